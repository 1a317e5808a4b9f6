//! The block-granular map (MNFS): a file written once, in order, holds its chunks in whole
//! erase blocks, the same number in each (its *stride*: every page of a block, or every
//! page but the block's summary), so the map keeps one page number per block, where the
//! block's run of chunks starts: chunk `c` is at `firsts[c / stride] + c % stride`. That is
//! 4 bytes a block, where the page-mapped log's extents take 12 (small-page chips, whose
//! summary pages break a file's run at every block) and a dense map 4 a chunk; a file still
//! in its first block takes no heap at all ([`FirstBlock`]).
//!
//! Block mapping cannot say "chunk 5 now lives elsewhere": MNFS's files are written once
//! and rarely updated, and a block-mapped store updates a page by copying its whole block
//! (the MNFS paper's account of SmartCard). Here a file
//! whose chunks leave the shape (a chunk rewritten or moved by cleaning, written out of
//! order, a hole, a page lost to a media error) turns into a page-mapped map for good
//! (`FileMap` does that), so every file is always mapped exactly; only the RAM it takes
//! differs. What is on flash is the same either way.

use crate::object::NO_PAGE;

/// A file whose chunks `0..len` sit on pages `first..first + len` of one erase block (no
/// heap: this is what most small files stay).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstBlock {
    first: u32,
    len: u32,
    /// Pages per block (at most `blocks::MAX_PAGES_PER_BLOCK`).
    ppb: u16,
}

/// A file past its first block: `stride` chunks a block (the number its first block
/// took), every chunk below `len` mapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockMap {
    ppb: u32,
    stride: u32,
    len: u32,
    /// The page each block's run of chunks starts at.
    firsts: Vec<u32>,
}

/// What a set does to a block-granular map.
pub enum Step {
    /// Taken: the chunk had no page before.
    Took,
    /// The map stays as it is (an unmap of a chunk it does not hold).
    Unchanged,
    /// The map cannot say this: make the file page-mapped, then set.
    Leave,
}

fn same_block(a: u32, b: u32, ppb: u32) -> bool {
    a / ppb == b / ppb
}

fn is_page(p: u32) -> bool {
    p != NO_PAGE && p != crate::object::LOST_PAGE
}

/// Chunks in `[from, to)` at or past `len`: the holes of a block-granular map, which
/// maps every chunk below its end and none past it (so its mapped count is its end).
pub fn holes(len: u32, from: u32, to: u32) -> u64 {
    let lo = from.max(len);
    u64::from(to.saturating_sub(lo))
}

impl FirstBlock {
    pub fn new(ppb: u32) -> Self {
        FirstBlock {
            first: 0,
            len: 0,
            ppb: u16::try_from(ppb).unwrap_or(u16::MAX),
        }
    }

    fn ppb(&self) -> u32 {
        u32::from(self.ppb).max(1)
    }

    /// Sets `chunk` to `pno` if the map can say it; `Err(map)` when the file has just
    /// reached its second block (the caller replaces this with `map`).
    pub fn step(&mut self, chunk: u32, pno: u32) -> Result<Step, BlockMap> {
        if !is_page(pno) {
            return Ok(if pno == NO_PAGE && chunk >= self.len {
                Step::Unchanged
            } else {
                Step::Leave
            });
        }
        if chunk != self.len {
            return Ok(Step::Leave);
        }
        if self.len == 0 {
            self.first = pno;
            self.len = 1;
            return Ok(Step::Took);
        }
        let last = self.first + self.len - 1;
        if pno == last + 1 && same_block(pno, last, self.ppb()) {
            self.len += 1;
            return Ok(Step::Took);
        }
        if same_block(pno, last, self.ppb()) || pno % self.ppb() + self.len > self.ppb() {
            return Ok(Step::Leave);
        }
        // The second block: its stride is what the first took.
        Err(BlockMap {
            ppb: self.ppb(),
            stride: self.len,
            len: self.len + 1,
            firsts: vec![self.first, pno],
        })
    }

    pub fn truncate(&mut self, keep: u32) -> Vec<u32> {
        if keep >= self.len {
            return Vec::new();
        }
        let dropped = (self.first + keep..self.first + self.len).collect();
        self.len = keep;
        dropped
    }
}

/// The read side, as `ChunkMap` has it (sets go through `step`).
impl FirstBlock {
    pub fn get(&self, chunk: u32) -> u32 {
        if chunk < self.len {
            self.first + chunk
        } else {
            NO_PAGE
        }
    }

    pub fn runs(&self) -> Vec<(u32, u32, u32)> {
        if self.len == 0 {
            Vec::new()
        } else {
            vec![(0, self.first, self.len)]
        }
    }

    pub fn end(&self) -> u32 {
        self.len
    }
}

impl BlockMap {
    fn last_page(&self) -> u32 {
        self.get(self.len - 1)
    }

    /// Sets `chunk` to `pno` if the map can say it.
    pub fn step(&mut self, chunk: u32, pno: u32) -> Step {
        if !is_page(pno) {
            return if pno == NO_PAGE && chunk >= self.len {
                Step::Unchanged
            } else {
                Step::Leave
            };
        }
        if chunk != self.len {
            return Step::Leave;
        }
        let last = self.last_page();
        if self.len.is_multiple_of(self.stride) {
            // A new block, holding the next `stride` chunks.
            if same_block(pno, last, self.ppb) || pno % self.ppb + self.stride > self.ppb {
                return Step::Leave;
            }
            self.firsts.push(pno);
        } else if pno != last + 1 || !same_block(pno, last, self.ppb) {
            return Step::Leave;
        }
        self.len += 1;
        Step::Took
    }

    /// Drops chunks from `keep` on; the pages they had. When what is left fits one block,
    /// that block alone (the caller turns the map back into a [`FirstBlock`]).
    pub fn truncate(&mut self, keep: u32) -> (Vec<u32>, Option<FirstBlock>) {
        if keep >= self.len {
            return (Vec::new(), None);
        }
        let dropped = (keep..self.len).map(|c| self.get(c)).collect();
        self.len = keep;
        self.firsts.truncate(keep.div_ceil(self.stride) as usize);
        let back = (self.firsts.len() <= 1).then(|| FirstBlock {
            first: self.firsts.first().copied().unwrap_or(0),
            len: keep,
            ppb: u16::try_from(self.ppb).unwrap_or(u16::MAX),
        });
        (dropped, back)
    }
}

/// The read side, as `ChunkMap` has it (sets go through `step`).
impl BlockMap {
    pub fn get(&self, chunk: u32) -> u32 {
        if chunk < self.len {
            self.firsts[(chunk / self.stride) as usize] + chunk % self.stride
        } else {
            NO_PAGE
        }
    }

    /// One run a block, runs on consecutive pages joined (as the page map gives them).
    pub fn runs(&self) -> Vec<(u32, u32, u32)> {
        let mut out: Vec<(u32, u32, u32)> = Vec::with_capacity(self.firsts.len());
        for (i, &first) in self.firsts.iter().enumerate() {
            let chunk = i as u32 * self.stride;
            let n = self.stride.min(self.len - chunk);
            match out.last_mut() {
                Some((c, p, len)) if *c + *len == chunk && *p + *len == first => *len += n,
                _ => out.push((chunk, first, n)),
            }
        }
        out
    }

    pub fn end(&self) -> u32 {
        self.len
    }
}
