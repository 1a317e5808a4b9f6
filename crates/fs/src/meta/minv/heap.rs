//! The NVRAM manager's working copy in DRAM: which heap units are in use, as free
//! extents to allocate from.
//!
//! The NVRAM keeps the manager's state as its allocation bitmap (`bitmap`): a unit's bit
//! is set in the transaction that makes it reachable, so every mount rebuilds this from
//! the bitmap (a fixed read) and a crash between an allocation and its publication
//! leaks nothing.
//!
//! Free space is kept as extents, merged with their free neighbours when released, and
//! found by size (exact fit first, else the smallest larger extent is split). The extent
//! that ends at the heap's end (the top) can be kept back: an allocation may take from it
//! only what leaves `keep` bytes of it, so the room a clean unmount's saved state needs
//! is always there in one piece (`Minv::alloc`).

use std::collections::{BTreeMap, BTreeSet};

use super::layout::UNIT;

#[derive(Debug, Default)]
pub(crate) struct Heap {
    /// Free extents: units -> their offsets.
    free: BTreeMap<u64, BTreeSet<u64>>,
    /// The same extents by offset -> units.
    by_off: BTreeMap<u64, u64>,
    in_use_units: u64,
    free_units: u64,
    /// Where the heap ends (the top extent ends here).
    end: u64,
}

impl Heap {
    fn over(end: u64) -> Heap {
        Heap {
            end,
            ..Heap::default()
        }
    }

    /// A heap over `[start, end)` with the extents `used` (offset, bytes; sorted, not
    /// overlapping, inside the range) in use.
    pub(crate) fn rebuild(start: u64, end: u64, used: &[(u64, u64)]) -> Heap {
        let mut h = Heap::over(end);
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

    /// How many free extents there are.
    pub(crate) fn extent_count(&self) -> usize {
        self.by_off.len()
    }

    pub(crate) fn free_bytes(&self) -> u64 {
        self.free_units * UNIT
    }

    /// Bytes of the top extent (0 when the heap's last unit is in use).
    pub(crate) fn top_bytes(&self) -> u64 {
        match self.by_off.iter().next_back() {
            Some((&o, &u)) if o + u * UNIT == self.end => u * UNIT,
            _ => 0,
        }
    }

    fn put(&mut self, off: u64, units: u64) {
        if units > 0 {
            self.free.entry(units).or_default().insert(off);
            self.by_off.insert(off, units);
            self.free_units += units;
        }
    }

    fn take(&mut self, off: u64, units: u64) {
        if let Some(set) = self.free.get_mut(&units) {
            set.remove(&off);
            if set.is_empty() {
                self.free.remove(&units);
            }
        }
        self.by_off.remove(&off);
        self.free_units -= units;
    }

    /// Whether any of `off .. off + bytes` is free.
    pub(crate) fn overlaps_free(&self, off: u64, bytes: u64) -> bool {
        let end = off.saturating_add(bytes);
        // Free extents never overlap: only the last one starting before `end` can.
        self.by_off
            .range(..end)
            .next_back()
            .is_some_and(|(&f, &units)| f + units * UNIT > off)
    }

    /// Takes `bytes` (a multiple of the unit); None when no free extent is big enough.
    pub(crate) fn alloc(&mut self, bytes: u64) -> Option<u64> {
        self.alloc_keeping(bytes, 0)
    }

    /// `alloc`, leaving at least `keep` bytes of the top extent free (the top's low end
    /// is taken only when no other extent fits).
    pub(crate) fn alloc_keeping(&mut self, bytes: u64, keep: u64) -> Option<u64> {
        debug_assert!(bytes > 0 && bytes.is_multiple_of(UNIT));
        let units = bytes / UNIT;
        let top = self
            .by_off
            .iter()
            .next_back()
            .filter(|(&o, &u)| o + u * UNIT == self.end)
            .map(|(&o, _)| o);
        let mut pick = None;
        'sizes: for (&size, offs) in self.free.range(units..) {
            for &off in offs {
                if Some(off) != top || (size - units) * UNIT >= keep {
                    pick = Some((off, size));
                    break 'sizes;
                }
            }
        }
        let (off, size) = pick?;
        self.take(off, size);
        self.put(off + bytes, size - units);
        self.in_use_units += units;
        Some(off)
    }

    pub(crate) fn release(&mut self, off: u64, bytes: u64) {
        let units = bytes / UNIT;
        self.in_use_units -= units;
        self.release_units(off, units);
    }

    /// Frees `units` at `off`, merged with the free extents on either side.
    fn release_units(&mut self, off: u64, units: u64) {
        if units == 0 {
            return;
        }
        let (mut start, mut len) = (off, units);
        if let Some((&o, &u)) = self.by_off.range(..off).next_back() {
            if o + u * UNIT == off {
                self.take(o, u);
                start = o;
                len += u;
            }
        }
        let after = start + len * UNIT;
        if let Some(&u) = self.by_off.get(&after) {
            self.take(after, u);
            len += u;
        }
        self.put(start, len);
    }

    pub(crate) fn in_use_bytes(&self) -> u64 {
        self.in_use_units * UNIT
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

    #[test]
    fn overlaps_free_tells_taken_room_from_free() {
        let mut h = Heap::rebuild(0, 64 * UNIT, &[(10 * UNIT, 2 * UNIT), (20 * UNIT, UNIT)]);
        assert!(!h.overlaps_free(10 * UNIT, 2 * UNIT));
        assert!(!h.overlaps_free(20 * UNIT, UNIT));
        assert!(h.overlaps_free(9 * UNIT, 2 * UNIT));
        assert!(h.overlaps_free(11 * UNIT, 2 * UNIT));
        assert!(h.overlaps_free(0, UNIT));
        // Allocated room is taken; released room is free again.
        let a = h.alloc(64 * UNIT - 24 * UNIT).unwrap();
        assert!(!h.overlaps_free(a, 40 * UNIT));
        h.release(a, 40 * UNIT);
        assert!(h.overlaps_free(a + UNIT, UNIT));
    }

    #[test]
    fn freed_neighbours_merge_into_one_extent() {
        let mut h = Heap::rebuild(0, 64 * UNIT, &[(10 * UNIT, 2 * UNIT)]);
        let a = h.alloc(3 * UNIT).unwrap();
        let b = h.alloc(3 * UNIT).unwrap();
        h.release(a, 3 * UNIT);
        h.release(b, 3 * UNIT);
        // Only the used extent splits the range.
        assert_eq!(h.extent_count(), 2);
        assert_eq!(h.in_use_bytes(), 2 * UNIT);
        assert_eq!(h.free_bytes(), 62 * UNIT);
    }

    #[test]
    fn releases_merge_with_both_neighbours() {
        let mut h = Heap::rebuild(0, 16 * UNIT, &[]);
        let a = h.alloc(2 * UNIT).unwrap();
        let b = h.alloc(2 * UNIT).unwrap();
        let c = h.alloc(2 * UNIT).unwrap();
        assert_eq!(h.extent_count(), 1);
        h.release(a, 2 * UNIT);
        h.release(c, 2 * UNIT);
        assert_eq!(h.extent_count(), 2, "b keeps a apart from c and the top");
        h.release(b, 2 * UNIT);
        assert_eq!(h.extent_count(), 1);
        assert_eq!(h.free_bytes(), 16 * UNIT);
        assert_eq!(h.in_use_bytes(), 0);
    }

    #[test]
    fn the_top_keeps_what_it_is_asked_to() {
        let mut h = Heap::rebuild(0, 16 * UNIT, &[(2 * UNIT, UNIT)]);
        // Free: a 2-unit hole at 0, the top of 13 units from 3.
        assert_eq!(h.top_bytes(), 13 * UNIT);
        // The hole is used first when it fits, whatever is kept.
        assert_eq!(h.alloc_keeping(2 * UNIT, 13 * UNIT), Some(0));
        // Then the top only down to what is kept.
        assert_eq!(h.alloc_keeping(4 * UNIT, 10 * UNIT), None);
        assert_eq!(h.alloc_keeping(3 * UNIT, 10 * UNIT), Some(3 * UNIT));
        assert_eq!(h.top_bytes(), 10 * UNIT);
        // Without keeping, all of it.
        assert_eq!(h.alloc(10 * UNIT), Some(6 * UNIT));
        assert_eq!(h.top_bytes(), 0);
        assert_eq!(h.alloc(UNIT), None);
    }
}
