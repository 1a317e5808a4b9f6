//! The NVRAM manager: which heap units are in use.
//!
//! Nothing about it is kept in the NVRAM. An allocation becomes durable only by being
//! linked from something reachable (the inode table, an inode, an offset chain), so at
//! mount the heap is rebuilt from what is reachable, and everything else is free: a crash
//! between an allocation and its publication leaks nothing. Free space is kept as extents
//! by size (exact fit first, else the smallest larger extent is split); extents freed while
//! mounted are not merged, which the next mount does by rebuilding.

use std::collections::BTreeMap;

use super::layout::UNIT;

#[derive(Debug, Default)]
pub(crate) struct Heap {
    /// Free extents: units -> their offsets.
    free: BTreeMap<u64, Vec<u64>>,
    in_use_units: u64,
}

impl Heap {
    /// A heap over `[start, end)` with the extents `used` (offset, bytes; sorted, not
    /// overlapping, inside the range) in use.
    pub(crate) fn rebuild(start: u64, end: u64, used: &[(u64, u64)]) -> Heap {
        let mut h = Heap::default();
        let mut at = start;
        for &(off, bytes) in used {
            if off > at {
                h.put(at, (off - at) / UNIT);
            }
            h.in_use_units += bytes / UNIT;
            at = off + bytes;
        }
        if end > at {
            h.put(at, (end - at) / UNIT);
        }
        h
    }

    fn put(&mut self, off: u64, units: u64) {
        if units > 0 {
            self.free.entry(units).or_default().push(off);
        }
    }

    /// Takes `bytes` (a multiple of the unit); None when no free extent is big enough.
    pub(crate) fn alloc(&mut self, bytes: u64) -> Option<u64> {
        debug_assert!(bytes > 0 && bytes.is_multiple_of(UNIT));
        let units = bytes / UNIT;
        let size = *self.free.range(units..).next()?.0;
        let list = self.free.get_mut(&size).expect("listed");
        let off = list.pop().expect("non-empty lists only");
        if list.is_empty() {
            self.free.remove(&size);
        }
        self.put(off + bytes, size - units);
        self.in_use_units += units;
        Some(off)
    }

    pub(crate) fn release(&mut self, off: u64, bytes: u64) {
        let units = bytes / UNIT;
        self.in_use_units -= units;
        self.put(off, units);
    }

    pub(crate) fn in_use_bytes(&self) -> u64 {
        self.in_use_units * UNIT
    }

    #[cfg(test)]
    pub(crate) fn free_bytes(&self) -> u64 {
        self.free
            .iter()
            .map(|(u, l)| u * UNIT * l.len() as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuild_finds_the_gaps_and_alloc_splits() {
        let mut h = Heap::rebuild(1000 * UNIT, 1010 * UNIT, &[(1002 * UNIT, 3 * UNIT)]);
        assert_eq!(h.in_use_bytes(), 3 * UNIT);
        assert_eq!(h.free_bytes(), 7 * UNIT);
        // Exact fit takes the 2-unit gap before the used extent.
        assert_eq!(h.alloc(2 * UNIT), Some(1000 * UNIT));
        // Then the 5-unit tail is split.
        assert_eq!(h.alloc(UNIT), Some(1005 * UNIT));
        assert_eq!(h.alloc(4 * UNIT), Some(1006 * UNIT));
        assert_eq!(h.alloc(UNIT), None);
        h.release(1005 * UNIT, UNIT);
        assert_eq!(h.alloc(UNIT), Some(1005 * UNIT));
        assert_eq!(h.in_use_bytes(), 10 * UNIT);
    }
}
