//! The NVRAM manager: which heap units are in use.
//!
//! Nothing about it is kept in the NVRAM while mounted. An allocation becomes durable only
//! by being linked from something reachable (the inode table, an inode, an offset chain),
//! so a mount after a crash rebuilds the heap from what is reachable, and everything else
//! is free: a crash between an allocation and its publication leaks nothing. A clean
//! unmount saves the free extents (`save`), so the next mount need not walk every offset
//! structure to find them. Free space is kept as extents by size (exact fit first, else
//! the smallest larger extent is split); extents freed while mounted are not merged until
//! the free list is listed or rebuilt.

use std::collections::BTreeMap;

use super::layout::UNIT;

#[derive(Debug, Default)]
pub(crate) struct Heap {
    /// Free extents: units -> their offsets.
    free: BTreeMap<u64, Vec<u64>>,
    /// The same extents by offset -> units (to tell whether room is free).
    by_off: BTreeMap<u64, u64>,
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

    /// A heap over `[start, end)` whose free extents are `free` (offset, bytes), as
    /// [`Heap::free_extents`] listed them. None if they are not sorted, unit-aligned,
    /// disjoint and inside the range.
    pub(crate) fn from_free(start: u64, end: u64, free: &[(u64, u64)]) -> Option<Heap> {
        let mut h = Heap::default();
        let mut at = start;
        let mut free_units = 0;
        for &(off, bytes) in free {
            let aligned = off.is_multiple_of(UNIT) && bytes.is_multiple_of(UNIT) && bytes > 0;
            if !aligned || off < at || off.checked_add(bytes)? > end {
                return None;
            }
            h.put(off, bytes / UNIT);
            free_units += bytes / UNIT;
            at = off + bytes;
        }
        h.in_use_units = (end - start) / UNIT - free_units;
        Some(h)
    }

    /// The free extents (offset, bytes), sorted, adjacent ones merged.
    pub(crate) fn free_extents(&self) -> Vec<(u64, u64)> {
        let mut all: Vec<(u64, u64)> = self
            .free
            .iter()
            .flat_map(|(&units, offs)| offs.iter().map(move |&o| (o, units * UNIT)))
            .collect();
        all.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for (off, bytes) in all {
            match out.last_mut() {
                Some(last) if last.0 + last.1 == off => last.1 += bytes,
                _ => out.push((off, bytes)),
            }
        }
        out
    }

    fn put(&mut self, off: u64, units: u64) {
        if units > 0 {
            self.free.entry(units).or_default().push(off);
            self.by_off.insert(off, units);
        }
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
        debug_assert!(bytes > 0 && bytes.is_multiple_of(UNIT));
        let units = bytes / UNIT;
        let size = *self.free.range(units..).next()?.0;
        let list = self.free.get_mut(&size).expect("listed");
        let off = list.pop().expect("non-empty lists only");
        if list.is_empty() {
            self.free.remove(&size);
        }
        self.by_off.remove(&off);
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
    fn free_extents_merge_and_restore_the_same_heap() {
        let mut h = Heap::rebuild(0, 64 * UNIT, &[(10 * UNIT, 2 * UNIT)]);
        let a = h.alloc(3 * UNIT).unwrap();
        let b = h.alloc(3 * UNIT).unwrap();
        h.release(a, 3 * UNIT);
        h.release(b, 3 * UNIT);
        let free = h.free_extents();
        // Freed neighbours come back as one extent: only the used one splits the range.
        assert_eq!(free, vec![(0, 10 * UNIT), (12 * UNIT, 52 * UNIT)]);
        let back = Heap::from_free(0, 64 * UNIT, &free).unwrap();
        assert_eq!(back.in_use_bytes(), 2 * UNIT);
        assert_eq!(back.free_extents(), free);
        // Damaged lists are refused.
        assert!(Heap::from_free(0, 64 * UNIT, &[(12 * UNIT, UNIT), (0, UNIT)]).is_none());
        assert!(Heap::from_free(0, 64 * UNIT, &[(0, 65 * UNIT)]).is_none());
        assert!(Heap::from_free(0, 64 * UNIT, &[(1, UNIT)]).is_none());
        assert!(Heap::from_free(0, 64 * UNIT, &[(0, 0)]).is_none());
    }
}
