//! The fallocate reservations in RAM, with the count of their chunks still unwritten kept
//! as the maps change, so that the room checks at every write and `statfs` cost nothing
//! however many files hold a reservation (walking each reserved range's map at every write
//! was a fifth of the mount daemon's time under fsstress).
//!
//! The count is exact while every change to a reserved file's map is reported here:
//! `chunk_changed` for a chunk mapped or unmapped, `recount` after a bulk change (truncate,
//! punch, mount). fsck recomputes it from the maps and compares.

use std::collections::HashMap;

use crate::format::reserved::Reserved;
use crate::mapping::FileMap;
use crate::object::NO_PAGE;
use crate::types::Ino;

#[derive(Default)]
pub(crate) struct Reserves {
    /// Each file's ranges and how many of their chunks have no page.
    files: HashMap<Ino, (Reserved, u64)>,
    /// Sum of the per-file hole counts.
    holes: u64,
}

impl Reserves {
    /// `ino`'s reserved ranges (empty if none).
    pub(crate) fn get(&self, ino: Ino) -> Reserved {
        self.files
            .get(&ino)
            .map(|(r, _)| r.clone())
            .unwrap_or_default()
    }

    /// Chunks of `ino` reserved and not written yet.
    pub(crate) fn holes_of(&self, ino: Ino) -> u64 {
        self.files.get(&ino).map_or(0, |&(_, h)| h)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub(crate) fn inos(&self) -> impl Iterator<Item = Ino> + '_ {
        self.files.keys().copied()
    }

    /// Is `chunk` inside one of `ino`'s reserved ranges?
    pub(crate) fn covers(&self, ino: Ino, chunk: u32) -> bool {
        self.files.get(&ino).is_some_and(|(r, _)| r.contains(chunk))
    }

    /// Chunks reserved and not written yet, over every file.
    pub(crate) fn holes(&self) -> u64 {
        self.holes
    }

    /// Gives `ino` the ranges `r` (none if empty), their holes counted in `map` (the
    /// file's map; `None` for a file not in RAM, whose ranges then count no holes).
    pub(crate) fn set(&mut self, ino: Ino, r: Reserved, map: Option<&FileMap>) {
        self.remove(ino);
        if r.is_empty() {
            return;
        }
        let holes = map.map_or(0, |m| holes_in(m, &r));
        self.holes += holes;
        self.files.insert(ino, (r, holes));
    }

    pub(crate) fn remove(&mut self, ino: Ino) {
        if let Some((_, holes)) = self.files.remove(&ino) {
            self.holes = self.holes.saturating_sub(holes);
        }
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Chunk `chunk` of `ino` went from page `old` to page `new` (either may be `NO_PAGE`).
    pub(crate) fn chunk_changed(&mut self, ino: Ino, chunk: u32, old: u32, new: u32) {
        let Some((r, holes)) = self.files.get_mut(&ino) else {
            return;
        };
        if !r.contains(chunk) {
            return;
        }
        match (old == NO_PAGE, new == NO_PAGE) {
            // Saturating: a miscount (a change not reported) must not panic; fsck finds it.
            (true, false) => {
                *holes = holes.saturating_sub(1);
                self.holes = self.holes.saturating_sub(1);
            }
            (false, true) => {
                *holes += 1;
                self.holes += 1;
            }
            _ => {}
        }
    }

    /// Counts `ino`'s holes again from its map (after a change of many chunks at once).
    pub(crate) fn recount(&mut self, ino: Ino, map: Option<&FileMap>) {
        let r = self.get(ino);
        if !r.is_empty() {
            self.set(ino, r, map);
        }
    }

    /// The stored count of each file whose count differs from its map's (for fsck).
    pub(crate) fn miscounted<'a>(
        &self,
        map_of: impl Fn(Ino) -> Option<&'a FileMap>,
    ) -> Vec<(Ino, u64, u64)> {
        let mut out: Vec<(Ino, u64, u64)> = self
            .files
            .iter()
            .filter_map(|(&ino, (r, holes))| {
                let (ino, holes) = (ino, *holes);
                let actual = map_of(ino).map_or(0, |m| holes_in(m, r));
                (actual != holes).then_some((ino, holes, actual))
            })
            .collect();
        out.sort_unstable();
        out
    }
}

/// Chunks of `r` with no page in `map`.
pub(crate) fn holes_in(map: &FileMap, r: &Reserved) -> u64 {
    r.ranges()
        .iter()
        .map(|x| map.holes_in(x.start, x.end))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::reserved::Reserve;
    use crate::mapping::MappingKind;

    fn one(start: u32, end: u32) -> Reserved {
        Reserved::one(Reserve { start, end })
    }

    fn map_with(chunks: &[u32]) -> FileMap {
        let shape = crate::mapping::MapShape {
            pages_per_block: 64,
            pages: 64 * 64,
        };
        let mut m = FileMap::new(MappingKind::PageMapped, shape);
        for (i, &c) in chunks.iter().enumerate() {
            m.set(c, 100 + i as u32);
        }
        m
    }

    #[test]
    fn counts_follow_the_map() {
        let mut map = map_with(&[0, 1, 5]);
        let mut t = Reserves::default();
        t.set(7, one(0, 8), Some(&map));
        assert_eq!(t.holes(), 5);
        // A write into a hole, an overwrite, a write outside the range.
        let old = map.set(3, 200);
        t.chunk_changed(7, 3, old, 200);
        let old = map.set(0, 201);
        t.chunk_changed(7, 0, old, 201);
        let old = map.set(9, 202);
        t.chunk_changed(7, 9, old, 202);
        assert_eq!(t.holes(), 4);
        // A punch.
        let old = map.set(1, NO_PAGE);
        t.chunk_changed(7, 1, old, NO_PAGE);
        assert_eq!(t.holes(), 5);
        assert!(t.miscounted(|_| Some(&map)).is_empty());
        // A change not reported is found.
        map.set(2, 203);
        assert_eq!(t.miscounted(|_| Some(&map)), vec![(7, 5, 4)]);
        t.recount(7, Some(&map));
        assert!(t.miscounted(|_| Some(&map)).is_empty());
        t.remove(7);
        assert_eq!(t.holes(), 0);
        assert!(t.is_empty());
    }

    #[test]
    fn replacing_a_range_replaces_its_counts() {
        let map = map_with(&[2]);
        let mut t = Reserves::default();
        t.set(1, one(0, 4), Some(&map));
        t.set(2, one(0, 2), None);
        assert_eq!(t.holes(), 3);
        t.set(1, one(2, 3), Some(&map));
        assert_eq!(t.holes(), 0);
        t.set(1, Reserved::new(), Some(&map));
        assert_eq!(t.holes(), 0);
        assert!(t.covers(2, 1) && !t.covers(2, 2) && !t.covers(1, 2));
    }
}
