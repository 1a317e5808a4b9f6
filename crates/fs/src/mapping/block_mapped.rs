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
//! differs. What is on flash is the same either way. One exception keeps most files
//! block-granular: when it is the file's last block whose chunks leave the shape (the
//! block left half-filled when the file was closed, which cleaning moves once erased
//! blocks run out), that block's chunks, and any appended after, go to a page-mapped tail.

use super::page_mapped::PageMap;
use super::ChunkMap;
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
/// took), every chunk below `len` mapped; with a tail, `len` is a whole number of blocks
/// and the tail maps the chunks from `len` on.
pub struct BlockMap {
    ppb: u32,
    stride: u32,
    len: u32,
    /// The page each block's run of chunks starts at.
    firsts: Vec<u32>,
    tail: Option<Box<PageMap>>,
}

/// What a set does to a block-granular map.
pub enum Step {
    /// Done: what the chunk was mapped to before.
    Set(u32),
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
                Step::Set(NO_PAGE)
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
            return Ok(Step::Set(NO_PAGE));
        }
        let last = self.first + self.len - 1;
        if pno == last + 1 && same_block(pno, last, self.ppb()) {
            self.len += 1;
            return Ok(Step::Set(NO_PAGE));
        }
        // A new block. Only a file whose first block took most of a block is mapped by
        // block from here on: a small file split over two shared blocks (a stride of a
        // few chunks) takes less room page-mapped.
        if same_block(pno, last, self.ppb())
            || pno % self.ppb() + self.len > self.ppb()
            || self.len * 2 <= self.ppb()
        {
            return Ok(Step::Leave);
        }
        // The second block: its stride is what the first took.
        Err(BlockMap {
            ppb: self.ppb(),
            stride: self.len,
            len: self.len + 1,
            firsts: vec![self.first, pno],
            tail: None,
        })
    }

    /// See `FileMap::move_run`: the whole block, to the start of another.
    pub fn move_run(&mut self, first: u32, n: u32, page: u32) -> Option<Vec<u32>> {
        let ppb = self.ppb();
        if first != 0 || n < self.len || n > ppb || !page.is_multiple_of(ppb) {
            return None;
        }
        let old = (self.first..self.first + self.len).collect();
        self.first = page;
        self.len = n;
        Some(old)
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
    /// Sets `chunk` to `pno` if the map can say it.
    pub fn step(&mut self, chunk: u32, pno: u32) -> Step {
        if let Some(tail) = &mut self.tail {
            return if chunk >= self.len {
                Step::Set(tail.set(chunk, pno))
            } else {
                Step::Leave
            };
        }
        if chunk == self.len && is_page(pno) && self.try_append(pno) {
            self.len += 1;
            return Step::Set(NO_PAGE);
        }
        if pno == NO_PAGE && chunk >= self.len {
            return Step::Set(NO_PAGE);
        }
        // Out of shape: fine in the file's last block (or past it), which becomes a
        // page-mapped tail; anywhere else the whole file turns page-mapped.
        let base = if chunk >= self.len {
            self.len - self.len % self.stride
        } else {
            (self.len - 1) / self.stride * self.stride
        };
        if chunk < base || base < self.stride {
            return Step::Leave;
        }
        let mut tail = PageMap::default();
        for c in base..self.len {
            tail.set(c, self.get(c));
        }
        self.firsts.truncate((base / self.stride) as usize);
        self.len = base;
        let old = tail.set(chunk, pno);
        self.tail = Some(Box::new(tail));
        Step::Set(old)
    }

    /// See `FileMap::move_run`: one block's run (the last block's may grow), to the start
    /// of another block.
    pub fn move_run(&mut self, first: u32, n: u32, page: u32) -> Option<Vec<u32>> {
        let i = (first / self.stride) as usize;
        if self.tail.is_some()
            || !first.is_multiple_of(self.stride)
            || i >= self.firsts.len()
            || page % self.ppb + self.stride > self.ppb
        {
            return None;
        }
        let held = self.stride.min(self.len - first);
        let last = i + 1 == self.firsts.len();
        if n < held || n > self.stride || (n > held && !last) {
            return None;
        }
        let old = (first..first + held).map(|c| self.get(c)).collect();
        self.firsts[i] = page;
        if last {
            self.len = first + n;
        }
        Some(old)
    }

    /// Whether `pno` can hold the chunk after the last in block-granular form: the next
    /// page of the last block, or the start of a new block with room for a stride (which
    /// this then records).
    fn try_append(&mut self, pno: u32) -> bool {
        let last = self.get(self.len - 1);
        if self.len.is_multiple_of(self.stride) {
            if same_block(pno, last, self.ppb) || pno % self.ppb + self.stride > self.ppb {
                return false;
            }
            self.firsts.push(pno);
            true
        } else {
            pno == last + 1 && same_block(pno, last, self.ppb)
        }
    }

    /// Drops chunks from `keep` on; the pages they had. When what is left fits one block,
    /// that block alone (the caller turns the map back into a [`FirstBlock`]).
    pub fn truncate(&mut self, keep: u32) -> (Vec<u32>, Option<FirstBlock>) {
        let mut dropped = Vec::new();
        if let Some(tail) = &mut self.tail {
            dropped = tail.truncate(keep.max(self.len));
            if tail.end() <= self.len {
                self.tail = None;
            }
        }
        if keep < self.len {
            dropped.extend((keep..self.len).map(|c| self.get(c)));
            self.len = keep;
            self.firsts.truncate(keep.div_ceil(self.stride) as usize);
        }
        let back = (self.tail.is_none() && self.firsts.len() <= 1).then(|| FirstBlock {
            first: self.firsts.first().copied().unwrap_or(0),
            len: self.len,
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
            self.tail.as_ref().map_or(NO_PAGE, |t| t.get(chunk))
        }
    }

    /// One run a block, then the tail's; runs on consecutive pages joined (as the page
    /// map gives them).
    pub fn runs(&self) -> Vec<(u32, u32, u32)> {
        let mut out: Vec<(u32, u32, u32)> = Vec::with_capacity(self.firsts.len());
        let blocks = self.firsts.iter().enumerate().map(|(i, &first)| {
            let chunk = i as u32 * self.stride;
            (chunk, first, self.stride.min(self.len - chunk))
        });
        let tail = self.tail.as_ref().map(|t| t.runs()).unwrap_or_default();
        for (chunk, first, n) in blocks.chain(tail) {
            match out.last_mut() {
                Some((c, p, len))
                    if *c + *len == chunk
                        && is_page(*p)
                        && is_page(first)
                        && p.checked_add(*len) == Some(first) =>
                {
                    *len += n
                }
                _ => out.push((chunk, first, n)),
            }
        }
        out
    }

    pub fn end(&self) -> u32 {
        self.tail
            .as_ref()
            .map_or(self.len, |t| t.end().max(self.len))
    }

    pub fn mapped(&self) -> u64 {
        u64::from(self.len) + self.tail.as_ref().map_or(0, |t| t.mapped())
    }

    pub fn holes_in(&self, from: u32, to: u32) -> u64 {
        match &self.tail {
            Some(t) => t.holes_in(from.max(self.len), to),
            None => holes(self.len, from, to),
        }
    }
}
