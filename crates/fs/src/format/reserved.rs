//! The chunks of a file that fallocate (or zero range) reserved: a few disjoint ranges,
//! kept in the file's header record and in the checkpoint.
//!
//! Only what was asked is reserved: fallocate of `[0, 1 GiB)` then of `[2 GiB, +1 MiB)`
//! reserves the two ranges, not the gap between them (one range widened to cover both
//! promised the gap too, and filled test images with space no file held). A header page
//! is small, so a file keeps at most `MAX_RANGES`; one more joins the two ranges with the
//! smallest gap between them, and the gap is then reserved as well.
//!
//! On flash: a varint count, then per range the varint distance from the previous range's
//! end (from 0 for the first) and the varint length. A count of 1 is byte for byte the
//! single range of format 3's first records.

use super::{Put, Reader};

/// Chunks `[start, end)` of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reserve {
    pub start: u32,
    pub end: u32,
}

impl Reserve {
    pub fn len(&self) -> u32 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }
}

/// A file keeps at most this many ranges (at most 80 bytes of its header record).
pub const MAX_RANGES: usize = 8;

/// Disjoint, non-touching, non-empty ranges in ascending order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    ranges: Vec<Reserve>,
}

impl Reserved {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn one(r: Reserve) -> Self {
        let mut s = Self::new();
        s.add(r);
        s
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn ranges(&self) -> &[Reserve] {
        &self.ranges
    }

    pub fn contains(&self, chunk: u32) -> bool {
        // Few ranges: a scan is as fast as a search.
        self.ranges
            .iter()
            .any(|r| (r.start..r.end).contains(&chunk))
    }

    /// Chunks covered, over all ranges.
    pub fn chunks(&self) -> u64 {
        self.ranges.iter().map(|r| u64::from(r.len())).sum()
    }

    /// Adds `r`, merged with every range it overlaps or touches; past `MAX_RANGES` the
    /// two ranges closest together join.
    pub fn add(&mut self, r: Reserve) {
        if r.is_empty() {
            return;
        }
        let mut merged = r;
        self.ranges.retain(|x| {
            let touches = x.start <= merged.end && merged.start <= x.end;
            if touches {
                merged.start = merged.start.min(x.start);
                merged.end = merged.end.max(x.end);
            }
            !touches
        });
        let at = self.ranges.partition_point(|x| x.start < merged.start);
        self.ranges.insert(at, merged);
        while self.ranges.len() > MAX_RANGES {
            let i = (0..self.ranges.len() - 1)
                .min_by_key(|&i| self.ranges[i + 1].start - self.ranges[i].end)
                .expect("more than one range");
            self.ranges[i].end = self.ranges[i + 1].end;
            self.ranges.remove(i + 1);
        }
    }

    /// Removes chunks `[r.start, r.end)`: a range may shrink or split in two (a split can
    /// pass `MAX_RANGES` by one until the next `add`; the encoding takes any count).
    pub fn remove(&mut self, r: Reserve) {
        if r.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        for &x in &self.ranges {
            if x.end <= r.start || r.end <= x.start {
                out.push(x);
                continue;
            }
            if x.start < r.start {
                out.push(Reserve {
                    start: x.start,
                    end: r.start,
                });
            }
            if r.end < x.end {
                out.push(Reserve {
                    start: r.end,
                    end: x.end,
                });
            }
        }
        self.ranges = out;
    }

    /// Keeps only chunks below `end` (a file shrank).
    pub fn clip(&mut self, end: u32) {
        self.remove(Reserve {
            start: end,
            end: u32::MAX,
        });
    }

    pub fn encoded_len(&self) -> usize {
        let mut n = super::varint_len(self.ranges.len() as u64);
        let mut prev = 0u32;
        for r in &self.ranges {
            n += super::varint_len(u64::from(r.start - prev))
                + super::varint_len(u64::from(r.len()));
            prev = r.end;
        }
        n
    }

    pub fn encode(&self, b: &mut Vec<u8>) {
        b.put_varint(self.ranges.len() as u64);
        let mut prev = 0u32;
        for r in &self.ranges {
            b.put_varint(u64::from(r.start - prev));
            b.put_varint(u64::from(r.len()));
            prev = r.end;
        }
    }

    /// Decodes what `encode` wrote; `None` for anything it could not have written (empty,
    /// touching or out-of-order ranges, a count no header page holds).
    pub(crate) fn decode(r: &mut Reader) -> Option<Reserved> {
        let n = r.count(2)?;
        let mut ranges = Vec::with_capacity(n);
        let mut prev = 0u32;
        for i in 0..n {
            let gap = r.varint32()?;
            if i > 0 && gap == 0 {
                return None;
            }
            let start = prev.checked_add(gap)?;
            let len = r.varint32()?;
            if len == 0 {
                return None;
            }
            let end = start.checked_add(len)?;
            ranges.push(Reserve { start, end });
            prev = end;
        }
        Some(Reserved { ranges })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr(v: &[(u32, u32)]) -> Reserved {
        Reserved {
            ranges: v
                .iter()
                .map(|&(start, end)| Reserve { start, end })
                .collect(),
        }
    }

    #[test]
    fn adding_keeps_only_what_was_asked() {
        let mut s = Reserved::new();
        s.add(Reserve { start: 0, end: 512 });
        s.add(Reserve {
            start: 1024,
            end: 1025,
        });
        assert_eq!(s, rr(&[(0, 512), (1024, 1025)]));
        assert_eq!(s.chunks(), 513);
        // Touching and overlapping ranges merge.
        s.add(Reserve {
            start: 512,
            end: 600,
        });
        s.add(Reserve {
            start: 1000,
            end: 1030,
        });
        assert_eq!(s, rr(&[(0, 600), (1000, 1030)]));
        s.add(Reserve { start: 10, end: 20 });
        assert_eq!(s, rr(&[(0, 600), (1000, 1030)]));
        assert!(s.contains(599) && !s.contains(600) && s.contains(1000));
    }

    #[test]
    fn past_the_limit_the_closest_ranges_join() {
        let mut s = Reserved::new();
        for i in 0..MAX_RANGES as u32 {
            s.add(Reserve {
                start: i * 100,
                end: i * 100 + 10,
            });
        }
        assert_eq!(s.ranges().len(), MAX_RANGES);
        // 705..712 lies 5 from 700..710's end? It overlaps: merges, no join needed.
        s.add(Reserve {
            start: 705,
            end: 712,
        });
        assert_eq!(s.ranges().len(), MAX_RANGES);
        // A new range 3 chunks after the last one joins it (the smallest gap).
        s.add(Reserve {
            start: 715,
            end: 720,
        });
        assert_eq!(s.ranges().len(), MAX_RANGES);
        assert_eq!(
            s.ranges()[MAX_RANGES - 1],
            Reserve {
                start: 700,
                end: 720
            }
        );
    }

    #[test]
    fn removing_splits_and_clips() {
        let mut s = rr(&[(0, 100), (200, 300)]);
        s.remove(Reserve { start: 40, end: 60 });
        assert_eq!(s, rr(&[(0, 40), (60, 100), (200, 300)]));
        s.remove(Reserve {
            start: 90,
            end: 250,
        });
        assert_eq!(s, rr(&[(0, 40), (60, 90), (250, 300)]));
        s.clip(70);
        assert_eq!(s, rr(&[(0, 40), (60, 70)]));
        s.clip(0);
        assert!(s.is_empty());
    }

    #[test]
    fn encoding_round_trips_and_one_range_is_the_old_layout() {
        for s in [
            rr(&[]),
            rr(&[(3, 90)]),
            rr(&[(0, 1), (5, 7), (4_000_000, u32::MAX)]),
        ] {
            let mut b = Vec::new();
            s.encode(&mut b);
            assert_eq!(b.len(), s.encoded_len());
            let mut r = Reader::new(&b);
            assert_eq!(Reserved::decode(&mut r), Some(s));
            assert_eq!(r.left(), 0);
        }
        // Format 3's single range: a byte 1, start, length.
        let mut b = Vec::new();
        rr(&[(300, 310)]).encode(&mut b);
        assert_eq!(b, vec![1, 0xAC, 0x02, 10]);
        // Touching or empty ranges are not something encode writes.
        for bad in [vec![2, 0, 5, 0, 5], vec![1, 4, 0], vec![2, 0, 5]] {
            assert_eq!(Reserved::decode(&mut Reader::new(&bad)), None, "{bad:?}");
        }
    }
}
