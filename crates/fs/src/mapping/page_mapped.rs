//! The page-mapped log (YAFFS): any chunk in any page; writes go out of place and the old
//! page becomes invalid. The map is compact for the files most devices hold: a file
//! written once from the start, in order, is one run (chunk 0 at page `first`, chunk k at
//! `first + k`) held inline in the object; a file whose runs break where the log skipped
//! a bad block or another file's pages is a short list of extents; only a file with many
//! scattered chunks (random overwrites) becomes a dense vector of pages.

use super::ChunkMap;
use crate::object::{LOST_PAGE, NO_PAGE};

/// A run of chunks on consecutive pages (or, with `page == LOST_PAGE`, lost chunks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub chunk: u32,
    pub page: u32,
    pub len: u32,
}

impl Extent {
    fn end(&self) -> u32 {
        self.chunk + self.len
    }

    fn page_of(&self, chunk: u32) -> u32 {
        if self.page == LOST_PAGE {
            LOST_PAGE
        } else {
            self.page + (chunk - self.chunk)
        }
    }

    /// Does `(chunk, page)` continue this extent?
    fn continued_by(&self, chunk: u32, page: u32) -> bool {
        chunk == self.end()
            && if self.page == LOST_PAGE {
                page == LOST_PAGE
            } else {
                is_page(page) && self.page.checked_add(self.len) == Some(page)
            }
    }
}

#[derive(Default)]
pub enum PageMap {
    #[default]
    Empty,
    /// Chunks `0..len` on pages `first..first + len`.
    Run { first: u32, len: u32 },
    /// Sorted, non-overlapping extents (holes between them).
    Extents(Box<Vec<Extent>>),
    /// The page of every chunk below the vector's length (`NO_PAGE` for holes).
    Pages(Box<Dense>),
}

/// A dense map and how many of its entries are real pages: `stat` asks for that count
/// (its block count) at every getattr, and the mount at every write, so it is kept rather
/// than counted over a vector that can hold millions of entries.
pub struct Dense {
    pages: Vec<u32>,
    mapped: u64,
}

impl Dense {
    fn new(pages: Vec<u32>) -> Self {
        let mapped = pages.iter().filter(|&&p| is_page(p)).count() as u64;
        Self { pages, mapped }
    }
}

/// (chunk, page) of every chunk of `runs` (first chunk, first page, length), in order; a
/// run of lost chunks gives `LOST_PAGE` for each.
pub fn run_entries(runs: &[(u32, u32, u32)]) -> impl Iterator<Item = (u32, u32)> + '_ {
    runs.iter()
        .flat_map(|&(c, p, n)| (0..n).map(move |k| (c + k, if p == LOST_PAGE { p } else { p + k })))
}

fn is_page(p: u32) -> bool {
    p != NO_PAGE && p != LOST_PAGE
}

/// Extents past which an insert into the middle of the list (a memmove of it) costs more
/// than a dense vector saves: 48 KiB moved at most. A file written in order has one extent
/// per erase block where each block's summary page breaks its run (small-page chips): a
/// 16 MiB file on a 512-byte-page chip is 1,057 extents (12.4 KiB) instead of 32,768 pages
/// (128 KiB). It was 512, which made every file over 8 MiB there dense; until 2026-11-26 it
/// capped appends too, which made every file over 4,096 blocks dense.
const MAX_EXTENTS: usize = 4096;

/// An extent list goes dense when it takes more room than a vector of pages would, or
/// when an insert into its middle (`inserted`) finds it long enough that inserting costs
/// more than it saves. Appends cost no memmove, so a file written in order stays extents
/// however long it grows: a 100 MiB file on a 512-byte-page chip is 6,607 extents (77 KiB)
/// where a dense map takes 800 KiB (and YAFFS2's tnodes, at 18 bits a chunk, about 450).
fn too_fragmented(extents: &[Extent], inserted: bool) -> bool {
    let end = extents.last().map_or(0, |e| e.end()) as usize;
    extents.len() > 8 && (extents.len() * 3 > end || (inserted && extents.len() > MAX_EXTENTS))
}

impl PageMap {
    /// A map restored from runs (first chunk, first page, length), in chunk order.
    pub fn from_runs(runs: &[(u32, u32, u32)]) -> PageMap {
        let mut m = PageMap::Empty;
        for (c, p) in run_entries(runs) {
            m.set(c, p);
        }
        m
    }

    fn extents(&self) -> Vec<Extent> {
        match self {
            PageMap::Empty => Vec::new(),
            PageMap::Run { first, len } => vec![Extent {
                chunk: 0,
                page: *first,
                len: *len,
            }],
            PageMap::Extents(v) => v.to_vec(),
            PageMap::Pages(v) => {
                let mut out: Vec<Extent> = Vec::new();
                for (i, &p) in v.pages.iter().enumerate() {
                    if p == NO_PAGE {
                        continue;
                    }
                    match out.last_mut() {
                        Some(e) if e.continued_by(i as u32, p) => e.len += 1,
                        _ => out.push(Extent {
                            chunk: i as u32,
                            page: p,
                            len: 1,
                        }),
                    }
                }
                out
            }
        }
    }

    /// The most compact form of these extents (`inserted`: one was just inserted before
    /// the last, see `too_fragmented`).
    fn from_extents(extents: Vec<Extent>, inserted: bool) -> PageMap {
        match extents.as_slice() {
            [] => PageMap::Empty,
            [e] if e.chunk == 0 && is_page(e.page) => PageMap::Run {
                first: e.page,
                len: e.len,
            },
            _ if too_fragmented(&extents, inserted) => {
                let end = extents.last().map_or(0, |e| e.end()) as usize;
                let mut v = vec![NO_PAGE; end];
                for e in &extents {
                    for c in e.chunk..e.end() {
                        v[c as usize] = e.page_of(c);
                    }
                }
                PageMap::Pages(Box::new(Dense::new(v)))
            }
            _ => PageMap::Extents(Box::new(extents)),
        }
    }

    fn set_in_extents(extents: &mut Vec<Extent>, chunk: u32, pno: u32) -> u32 {
        // Fast path: appending to the last extent (sequential writes).
        if let Some(last) = extents.last_mut() {
            if last.continued_by(chunk, pno) {
                last.len += 1;
                return NO_PAGE;
            }
        }
        let i = extents.partition_point(|e| e.end() <= chunk);
        let mut old = NO_PAGE;
        if let Some(e) = extents.get(i).copied() {
            if e.chunk <= chunk {
                old = e.page_of(chunk);
                // Split the extent around the chunk.
                let mut parts = Vec::with_capacity(2);
                if e.chunk < chunk {
                    parts.push(Extent {
                        chunk: e.chunk,
                        page: e.page,
                        len: chunk - e.chunk,
                    });
                }
                if chunk + 1 < e.end() {
                    parts.push(Extent {
                        chunk: chunk + 1,
                        page: e.page_of(chunk + 1),
                        len: e.end() - chunk - 1,
                    });
                }
                extents.splice(i..=i, parts);
            }
        }
        if pno != NO_PAGE {
            let at = extents.partition_point(|e| e.end() <= chunk);
            extents.insert(
                at,
                Extent {
                    chunk,
                    page: pno,
                    len: 1,
                },
            );
            // Merge with the neighbours where it continues them.
            if at + 1 < extents.len() {
                let next = extents[at + 1];
                if extents[at].continued_by(next.chunk, next.page) {
                    extents[at].len += next.len;
                    extents.remove(at + 1);
                }
            }
            if at > 0 {
                let cur = extents[at];
                if extents[at - 1].continued_by(cur.chunk, cur.page) {
                    extents[at - 1].len += cur.len;
                    extents.remove(at);
                }
            }
        }
        old
    }
}

impl ChunkMap for PageMap {
    fn get(&self, chunk: u32) -> u32 {
        match self {
            PageMap::Empty => NO_PAGE,
            PageMap::Run { first, len } => {
                if chunk < *len {
                    first + chunk
                } else {
                    NO_PAGE
                }
            }
            PageMap::Extents(v) => {
                let i = v.partition_point(|e| e.end() <= chunk);
                match v.get(i) {
                    Some(e) if e.chunk <= chunk => e.page_of(chunk),
                    _ => NO_PAGE,
                }
            }
            PageMap::Pages(v) => v.pages.get(chunk as usize).copied().unwrap_or(NO_PAGE),
        }
    }

    fn set(&mut self, chunk: u32, pno: u32) -> u32 {
        // The common cases without reshaping the map.
        match *self {
            PageMap::Empty if chunk == 0 && is_page(pno) => {
                *self = PageMap::Run { first: pno, len: 1 };
                return NO_PAGE;
            }
            PageMap::Empty if pno == NO_PAGE => return NO_PAGE,
            PageMap::Run { first, len }
                if chunk == len && is_page(pno) && first.checked_add(len) == Some(pno) =>
            {
                *self = PageMap::Run {
                    first,
                    len: len + 1,
                };
                return NO_PAGE;
            }
            PageMap::Run { len, .. } if chunk >= len && pno == NO_PAGE => return NO_PAGE,
            _ => {}
        }
        if let PageMap::Pages(d) = self {
            let i = chunk as usize;
            let v = &mut d.pages;
            if v.len() <= i {
                if pno == NO_PAGE {
                    return NO_PAGE;
                }
                v.resize(i + 1, NO_PAGE);
            }
            let old = std::mem::replace(&mut v[i], pno);
            d.mapped = d.mapped + u64::from(is_page(pno)) - u64::from(is_page(old));
            if pno == NO_PAGE {
                while v.last() == Some(&NO_PAGE) {
                    v.pop();
                }
                if v.is_empty() {
                    *self = PageMap::Empty;
                }
            }
            return old;
        }
        let mut extents = match std::mem::take(self) {
            PageMap::Extents(v) => *v,
            other => other.extents(),
        };
        let appended = extents.last().is_none_or(|e| chunk >= e.end());
        let old = Self::set_in_extents(&mut extents, chunk, pno);
        *self = Self::from_extents(extents, !appended);
        old
    }

    fn truncate(&mut self, keep: u32) -> Vec<u32> {
        match self {
            PageMap::Empty => Vec::new(),
            PageMap::Run { first, len } => {
                if keep >= *len {
                    return Vec::new();
                }
                let dropped = (*first + keep..*first + *len).collect();
                if keep == 0 {
                    *self = PageMap::Empty;
                } else {
                    *len = keep;
                }
                dropped
            }
            PageMap::Pages(d) => {
                let v = &mut d.pages;
                let keep = (keep as usize).min(v.len());
                let dropped: Vec<u32> = v.drain(keep..).filter(|&p| is_page(p)).collect();
                d.mapped -= dropped.len() as u64;
                let v = &mut d.pages;
                while v.last() == Some(&NO_PAGE) {
                    v.pop();
                }
                if v.is_empty() {
                    *self = PageMap::Empty;
                } else {
                    v.shrink_to_fit();
                }
                dropped
            }
            PageMap::Extents(_) => {
                let mut dropped = Vec::new();
                let mut kept = Vec::new();
                for e in self.extents() {
                    if e.end() <= keep {
                        kept.push(e);
                        continue;
                    }
                    let cut = keep.max(e.chunk);
                    if e.page != LOST_PAGE {
                        dropped.extend((cut..e.end()).map(|c| e.page_of(c)));
                    }
                    if e.chunk < keep {
                        kept.push(Extent {
                            len: keep - e.chunk,
                            ..e
                        });
                    }
                }
                *self = Self::from_extents(kept, false);
                dropped
            }
        }
    }

    fn runs(&self) -> Vec<(u32, u32, u32)> {
        self.extents()
            .into_iter()
            .map(|e| (e.chunk, e.page, e.len))
            .collect()
    }

    fn mapped(&self) -> u64 {
        match self {
            PageMap::Empty => 0,
            PageMap::Run { len, .. } => u64::from(*len),
            PageMap::Extents(v) => v
                .iter()
                .filter(|e| e.page != LOST_PAGE)
                .map(|e| u64::from(e.len))
                .sum(),
            PageMap::Pages(d) => d.mapped,
        }
    }

    fn holes_in(&self, from: u32, to: u32) -> u64 {
        if to <= from {
            return 0;
        }
        let span = u64::from(to - from);
        match self {
            PageMap::Empty => span,
            PageMap::Run { len, .. } => span - u64::from(to.min(*len).saturating_sub(from)),
            PageMap::Extents(v) => {
                let covered: u64 = v
                    .iter()
                    .map(|e| u64::from(e.end().min(to).saturating_sub(e.chunk.max(from))))
                    .sum();
                span - covered
            }
            PageMap::Pages(v) => (from..to)
                .filter(|&c| v.pages.get(c as usize).is_none_or(|&p| p == NO_PAGE))
                .count() as u64,
        }
    }

    fn end(&self) -> u32 {
        match self {
            PageMap::Empty => 0,
            PageMap::Run { len, .. } => *len,
            PageMap::Extents(v) => v.last().map_or(0, |e| e.end()),
            PageMap::Pages(v) => v.pages.len() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sequential_writes_stay_one_run() {
        let mut m = PageMap::default();
        for k in 0..100 {
            assert_eq!(m.set(k, 500 + k), NO_PAGE);
        }
        assert!(matches!(
            m,
            PageMap::Run {
                first: 500,
                len: 100
            }
        ));
        assert_eq!(m.get(99), 599);
        assert_eq!(m.get(100), NO_PAGE);
        assert_eq!(m.runs(), vec![(0, 500, 100)]);
        assert_eq!(m.holes_in(90, 110), 10);
        assert_eq!(m.truncate(40).len(), 60);
        assert_eq!(m.end(), 40);
        // An overwrite breaks the run into extents.
        assert_eq!(m.set(3, 9), 503);
        assert!(matches!(m, PageMap::Extents(_)));
        assert_eq!(m.runs(), vec![(0, 500, 3), (3, 9, 1), (4, 504, 36)]);
    }

    #[test]
    fn a_run_broken_by_a_skipped_block_is_two_extents() {
        let mut m = PageMap::default();
        for k in 0..64 {
            m.set(k, 128 + k);
        }
        for k in 64..200 {
            m.set(k, 256 + k);
        }
        assert!(matches!(&m, PageMap::Extents(v) if v.len() == 2));
        assert_eq!(m.get(63), 191);
        assert_eq!(m.get(64), 320);
        assert_eq!(m.mapped(), 200);
    }

    #[test]
    fn a_long_file_written_in_order_stays_extents_until_a_middle_insert() {
        // 31 data pages a 32-page block (the summary on the last), blocks in turn: more
        // extents than MAX_EXTENTS, all of them appended.
        let mut m = PageMap::default();
        let blocks = MAX_EXTENTS as u32 + 500;
        for c in 0..blocks * 31 {
            m.set(c, c / 31 * 32 + c % 31);
        }
        assert!(matches!(&m, PageMap::Extents(v) if v.len() == blocks as usize));
        assert_eq!(m.get(31 * 7 + 4), 32 * 7 + 4);
        // A truncate keeps the shape; an insert before the end makes it dense.
        m.truncate(blocks * 31 - 10);
        assert!(matches!(&m, PageMap::Extents(_)));
        assert_eq!(m.set(5, 1), 5);
        assert!(matches!(&m, PageMap::Pages(_)));
        assert_eq!(m.get(5), 1);
        assert_eq!(m.get(31 * 7 + 4), 32 * 7 + 4);
    }

    #[test]
    fn holes_set_truncate_lost() {
        let mut m = PageMap::default();
        assert_eq!(m.get(5), NO_PAGE);
        assert_eq!(m.set(3, 10), NO_PAGE);
        assert_eq!(m.set(3, 11), 10);
        m.set(7, LOST_PAGE);
        m.set(8, LOST_PAGE);
        assert_eq!(m.mapped(), 1);
        assert_eq!(m.runs(), vec![(3, 11, 1), (7, LOST_PAGE, 2)]);
        assert_eq!(m.holes_in(0, 10), 7);
        let back = PageMap::from_runs(&m.runs());
        assert_eq!(back.runs(), m.runs());
        assert_eq!(m.truncate(4), Vec::<u32>::new());
        assert_eq!(m.truncate(0), vec![11]);
        assert_eq!(m.get(3), NO_PAGE);
        assert!(matches!(m, PageMap::Empty));
        assert_eq!(m.set(2, NO_PAGE), NO_PAGE);
    }

    /// Every form agrees with a plain vector under random sets and truncates.
    #[test]
    fn agrees_with_a_vector() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        for round in 0..200 {
            let mut m = PageMap::default();
            let mut want: Vec<u32> = Vec::new();
            let len = rng.gen_range(1..80u32);
            for step in 0..300 {
                let chunk = if rng.gen_bool(0.5) {
                    want.len() as u32
                } else {
                    rng.gen_range(0..len)
                };
                if rng.gen_bool(0.05) {
                    let keep = rng.gen_range(0..len);
                    let mut got = m.truncate(keep);
                    let mut exp: Vec<u32> = want
                        .iter()
                        .skip(keep as usize)
                        .copied()
                        .filter(|&p| is_page(p))
                        .collect();
                    got.sort_unstable();
                    exp.sort_unstable();
                    assert_eq!(got, exp, "round {round} step {step}");
                    want.truncate(keep as usize);
                    while want.last() == Some(&NO_PAGE) {
                        want.pop();
                    }
                    continue;
                }
                let pno = match rng.gen_range(0..10) {
                    0 => NO_PAGE,
                    1 => LOST_PAGE,
                    _ => {
                        // Mostly the page after the previous chunk's: runs form.
                        let prev = want.get(chunk.wrapping_sub(1) as usize).copied();
                        match prev {
                            Some(p) if is_page(p) && rng.gen_bool(0.7) => p + 1,
                            _ => rng.gen_range(0..10_000),
                        }
                    }
                };
                let old = m.set(chunk, pno);
                let i = chunk as usize;
                let exp_old = want.get(i).copied().unwrap_or(NO_PAGE);
                assert_eq!(old, exp_old, "round {round} step {step}");
                if want.len() <= i {
                    want.resize(i + 1, NO_PAGE);
                }
                want[i] = pno;
                while want.last() == Some(&NO_PAGE) {
                    want.pop();
                }
                for (c, &p) in want.iter().enumerate() {
                    assert_eq!(m.get(c as u32), p, "round {round} step {step} chunk {c}");
                }
                assert_eq!(m.get(want.len() as u32 + 3), NO_PAGE);
                assert_eq!(
                    m.mapped(),
                    want.iter().filter(|&&p| is_page(p)).count() as u64
                );
            }
        }
    }
}
