//! The page-mapped log (YAFFS): any chunk in any page; writes go out of place and the old
//! page becomes invalid. The map is compact: a file written once from the start, in order,
//! is one run (chunk 0 at page `first`, chunk k at `first + k`) held inline in the object;
//! anything else becomes a dense vector of pages.

use super::ChunkMap;
use crate::object::{LOST_PAGE, NO_PAGE};

#[derive(Default)]
pub enum PageMap {
    #[default]
    Empty,
    /// Chunks `0..len` on pages `first..first + len`.
    Run { first: u32, len: u32 },
    /// The page of every chunk below the vector's length (`NO_PAGE` for holes).
    Pages(Box<Vec<u32>>),
}

fn is_page(p: u32) -> bool {
    p != NO_PAGE && p != LOST_PAGE
}

impl PageMap {
    /// A map restored from runs (first chunk, first page, length).
    pub fn from_runs(runs: &[(u32, u32, u32)]) -> PageMap {
        let mut m = PageMap::Empty;
        for &(c, p, n) in runs {
            for k in 0..n {
                m.set(c + k, if p == LOST_PAGE { p } else { p + k });
            }
        }
        m
    }

    fn dense(&mut self) -> &mut Vec<u32> {
        if let PageMap::Run { first, len } = *self {
            *self = PageMap::Pages(Box::new((first..first + len).collect()));
        } else if let PageMap::Empty = self {
            *self = PageMap::Pages(Box::default());
        }
        match self {
            PageMap::Pages(v) => v,
            _ => unreachable!("made dense above"),
        }
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
            PageMap::Pages(v) => v.get(chunk as usize).copied().unwrap_or(NO_PAGE),
        }
    }

    fn set(&mut self, chunk: u32, pno: u32) -> u32 {
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
        let v = self.dense();
        let i = chunk as usize;
        if v.len() <= i {
            if pno == NO_PAGE {
                return NO_PAGE;
            }
            v.resize(i + 1, NO_PAGE);
        }
        let old = std::mem::replace(&mut v[i], pno);
        if pno == NO_PAGE {
            while v.last() == Some(&NO_PAGE) {
                v.pop();
            }
        }
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
            PageMap::Pages(v) => {
                let keep = (keep as usize).min(v.len());
                let dropped = v.drain(keep..).filter(|&p| is_page(p)).collect();
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
        }
    }

    fn runs(&self) -> Vec<(u32, u32, u32)> {
        match self {
            PageMap::Empty => Vec::new(),
            PageMap::Run { first, len } => vec![(0, *first, *len)],
            PageMap::Pages(v) => {
                let mut out: Vec<(u32, u32, u32)> = Vec::new();
                for (i, &p) in v.iter().enumerate() {
                    if p == NO_PAGE {
                        continue;
                    }
                    let i = i as u32;
                    match out.last_mut() {
                        Some((c, first, n))
                            if *c + *n == i
                                && ((p == LOST_PAGE && *first == LOST_PAGE)
                                    || (is_page(p) && *first != LOST_PAGE && *first + *n == p)) =>
                        {
                            *n += 1
                        }
                        _ => out.push((i, p, 1)),
                    }
                }
                out
            }
        }
    }

    fn mapped(&self) -> u64 {
        match self {
            PageMap::Empty => 0,
            PageMap::Run { len, .. } => u64::from(*len),
            PageMap::Pages(v) => v.iter().filter(|&&p| is_page(p)).count() as u64,
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
            PageMap::Pages(v) => (from..to)
                .filter(|&c| v.get(c as usize).is_none_or(|&p| p == NO_PAGE))
                .count() as u64,
        }
    }

    fn end(&self) -> u32 {
        match self {
            PageMap::Empty => 0,
            PageMap::Run { len, .. } => *len,
            PageMap::Pages(v) => v.len() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // An overwrite breaks the run.
        assert_eq!(m.set(3, 9), 503);
        assert!(matches!(m, PageMap::Pages(_)));
        assert_eq!(m.runs(), vec![(0, 500, 3), (3, 9, 1), (4, 504, 36)]);
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
}
