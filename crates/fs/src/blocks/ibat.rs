//! MNFS's iBAT (in-core block allocation table): one 32-bit word per erase block, kept in
//! RAM only and rebuilt at mount from the spare areas (`scan_ibat`). A block of
//! block-placed file data needs no more: its pages are written in order from the first,
//! and the live ones are a prefix of them (an overwrite copies the block, a truncation
//! cuts from the end), so "pages written" and "pages live" say which pages are valid. The
//! word packs them with the block's state and flags:
//!
//! ```text
//!  bits 0-2 state  3-5 flags  6 data block  7 exact  8-9 generation  10-20 pages written
//!  21-31 pages live
//! ```
//!
//! The generation (0-3, wrapping) is the one the block's pages carry in their tags: a
//! block copied for an overwrite gets the next, so a mount that finds both copies (a cut
//! before the old one was erased) knows which is newer, as YAFFS1's 2-bit serial did.
//!
//! What the word cannot say (a block with a serial base or a summary, live pages that are
//! not a prefix: the metadata log's blocks, whose headers go stale in any order) gets an
//! exact record on the side, a 16-byte `Block` and a bit per page, until the block is
//! erased. The log is a few blocks, so the table costs about 4 bytes a block: 32 KiB for
//! the 128 MiB chip of the MNFS paper, whose iBAT took about as much.
//!
//! Data blocks are never cleaning candidates while they hold a live page: MNFS erases a
//! file's blocks when it is deleted and never moves them. A data block flagged for
//! retirement or scrubbing is the exception (the file system copies it block for block,
//! `block_placed`), and so is one left without a live page (a truncation), which cleaning
//! erases at no cost.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{count16, Block, BlockState};

const STATE_BITS: u32 = 0x7;
const FLAGS_SHIFT: u32 = 3;
const DATA_BIT: u32 = 1 << 6;
const EXACT_BIT: u32 = 1 << 7;
const GEN_SHIFT: u32 = 8;
const GEN_BITS: u32 = 0x3 << GEN_SHIFT;
const WRITTEN_SHIFT: u32 = 10;
const LIVE_SHIFT: u32 = 21;
const COUNT_MASK: u32 = 0x7FF;
/// Generations wrap at this many.
pub const GENERATIONS: u8 = 4;
/// Most pages per block a word counts.
pub const MAX_PAGES_PER_BLOCK: u32 = COUNT_MASK;

/// A block the word cannot describe.
struct Exact {
    block: Block,
    /// One bit per page: set when valid.
    bits: Vec<u64>,
}

pub struct Ibat {
    words: Vec<u32>,
    exact: HashMap<u32, Exact>,
    pub pages_per_block: u32,
    pub empty: u32,
    bad: u32,
    valid_pages: u64,
    /// Candidates (block -> the valid count filed under in `by_valid`).
    filed: BTreeMap<u32, u32>,
    by_valid: BTreeSet<(u32, u32)>,
    flagged: BTreeSet<u32>,
    /// Full data blocks without a live page (a delete erases them).
    dead_data: BTreeSet<u32>,
    pinned: super::Pins,
}

fn state_code(s: BlockState) -> u32 {
    match s {
        BlockState::Empty => 0,
        BlockState::Active => 1,
        BlockState::Full => 2,
        BlockState::Checkpoint => 3,
        BlockState::Anchor => 4,
        BlockState::Bad => 5,
    }
}

fn state_of(code: u32) -> BlockState {
    match code {
        1 => BlockState::Active,
        2 => BlockState::Full,
        3 => BlockState::Checkpoint,
        4 => BlockState::Anchor,
        5 => BlockState::Bad,
        _ => BlockState::Empty,
    }
}

impl Ibat {
    pub fn new(blocks: u32, pages_per_block: u32) -> Self {
        debug_assert!(pages_per_block <= MAX_PAGES_PER_BLOCK);
        Ibat {
            words: vec![0; blocks as usize],
            exact: HashMap::new(),
            pages_per_block,
            empty: blocks,
            bad: 0,
            valid_pages: 0,
            filed: BTreeMap::new(),
            by_valid: BTreeSet::new(),
            flagged: BTreeSet::new(),
            dead_data: BTreeSet::new(),
            pinned: super::Pins::default(),
        }
    }

    pub fn len(&self) -> u32 {
        self.words.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Blocks holding file data, and blocks with an exact record (the log's).
    pub fn counts(&self) -> (u32, u32) {
        let data = self.words.iter().filter(|&&w| w & DATA_BIT != 0).count() as u32;
        (data, self.exact.len() as u32)
    }

    pub fn is_data(&self, block: u32) -> bool {
        self.words[block as usize] & DATA_BIT != 0
    }

    pub fn set_data(&mut self, block: u32, data: bool) {
        let w = &mut self.words[block as usize];
        if data {
            *w |= DATA_BIT;
        } else {
            *w &= !DATA_BIT;
        }
        self.refile(block);
    }

    /// The generation of a data block's pages.
    pub fn generation(&self, block: u32) -> u8 {
        ((self.words[block as usize] & GEN_BITS) >> GEN_SHIFT) as u8
    }

    pub fn set_generation(&mut self, block: u32, generation: u8) {
        let w = &mut self.words[block as usize];
        *w = (*w & !GEN_BITS) | ((u32::from(generation) % 4) << GEN_SHIFT);
    }

    pub fn record(&self, block: u32) -> Block {
        let w = self.words[block as usize];
        if w & EXACT_BIT != 0 {
            return self.exact[&block].block;
        }
        Block {
            base_serial: 0,
            next_page: count16((w >> WRITTEN_SHIFT) & COUNT_MASK),
            valid: count16((w >> LIVE_SHIFT) & COUNT_MASK),
            overhead: 0,
            state: state_of(w & STATE_BITS),
            flags: ((w >> FLAGS_SHIFT) & 0x7) as u8,
        }
    }

    /// Stores `b` as block `block`'s record: in its word if the word can say it (valid
    /// pages `0..b.valid`), else exactly, with `bits` (or the prefix if none are given).
    fn store(&mut self, block: u32, b: Block, bits: Option<Vec<u64>>) {
        let i = block as usize;
        let data = self.words[i] & (DATA_BIT | GEN_BITS);
        let prefix = match &bits {
            None => true,
            Some(bits) => is_prefix(bits, b.valid()),
        };
        let fits = b.base_serial == 0
            && b.overhead == 0
            && prefix
            && b.valid() <= b.next_page()
            && b.next_page() <= COUNT_MASK
            && b.flags <= 0x7;
        if fits {
            self.exact.remove(&block);
            self.words[i] = data
                | state_code(b.state)
                | (u32::from(b.flags) << FLAGS_SHIFT)
                | (b.next_page() << WRITTEN_SHIFT)
                | (b.valid() << LIVE_SHIFT);
        } else {
            let bits = bits.unwrap_or_else(|| self.prefix_bits(b.valid()));
            self.exact.insert(block, Exact { block: b, bits });
            self.words[i] = data | EXACT_BIT;
        }
    }

    fn prefix_bits(&self, valid: u32) -> Vec<u64> {
        let mut bits = vec![0u64; (self.pages_per_block as usize).div_ceil(64)];
        for p in 0..valid as usize {
            bits[p / 64] |= 1 << (p % 64);
        }
        bits
    }

    /// The block's valid bits, exact or from its word.
    fn bits(&self, block: u32) -> Vec<u64> {
        match self.exact.get(&block) {
            Some(e) => e.bits.clone(),
            None => self.prefix_bits(self.record(block).valid()),
        }
    }

    pub fn update(&mut self, block: u32, f: impl FnOnce(&mut Block)) {
        let mut b = self.record(block);
        let valid = b.valid;
        f(&mut b);
        b.valid = valid;
        let bits = self.exact.get(&block).map(|e| e.bits.clone());
        self.store(block, b, bits);
        self.refile(block);
    }

    pub fn is_valid(&self, pno: u32) -> bool {
        let (block, page) = (pno / self.pages_per_block, pno % self.pages_per_block);
        match self.exact.get(&block) {
            Some(e) => e.bits[page as usize / 64] & (1 << (page % 64)) != 0,
            None => page < self.record(block).valid(),
        }
    }

    pub fn set_valid(&mut self, pno: u32) {
        debug_assert!(!self.is_valid(pno), "page {pno} already valid");
        let (block, page) = (pno / self.pages_per_block, pno % self.pages_per_block);
        let mut bits = self.bits(block);
        bits[page as usize / 64] |= 1 << (page % 64);
        let mut b = self.record(block);
        b.valid += 1;
        self.store(block, b, Some(bits));
        self.valid_pages += 1;
        self.refile(block);
    }

    pub fn invalidate(&mut self, pno: u32) -> bool {
        if !self.is_valid(pno) {
            return false;
        }
        let (block, page) = (pno / self.pages_per_block, pno % self.pages_per_block);
        let mut bits = self.bits(block);
        bits[page as usize / 64] &= !(1 << (page % 64));
        let mut b = self.record(block);
        b.valid -= 1;
        self.store(block, b, Some(bits));
        self.valid_pages -= 1;
        self.refile(block);
        true
    }

    pub fn set_state(&mut self, block: u32, state: BlockState) {
        let mut b = self.record(block);
        if b.state == BlockState::Empty {
            self.empty -= 1;
        }
        if state == BlockState::Empty {
            self.empty += 1;
        }
        if b.state == BlockState::Bad {
            self.bad -= 1;
        }
        if state == BlockState::Bad {
            self.bad += 1;
        }
        b.state = state;
        if matches!(state, BlockState::Empty | BlockState::Bad) {
            // Erased or gone: no longer any file's.
            self.words[block as usize] &= !(DATA_BIT | GEN_BITS);
        }
        let bits = self.exact.get(&block).map(|e| e.bits.clone());
        self.store(block, b, bits);
        self.refile(block);
    }

    pub fn valid_pages(&self, block: u32) -> Vec<u32> {
        let first = block * self.pages_per_block;
        (first..first + self.record(block).next_page())
            .filter(|&p| self.is_valid(p))
            .collect()
    }

    pub fn is_candidate(&self, block: u32) -> bool {
        self.filed.contains_key(&block)
    }

    fn compute_candidate(&self, block: u32) -> bool {
        let b = self.record(block);
        super::reclaimable(&b, self.pages_per_block)
            && !self.pinned.contains(block)
            && (!self.is_data(block) || b.flags != 0 || b.valid() == 0)
    }

    pub fn is_pinned(&self, block: u32) -> bool {
        self.pinned.contains(block)
    }

    pub fn pin(&mut self, block: u32) {
        self.pinned.push(block);
        self.refile(block);
    }

    pub fn unpin(&mut self, block: u32) {
        self.pinned.pop(block);
        self.refile(block);
    }

    fn refile(&mut self, block: u32) {
        if let Some(v) = self.filed.remove(&block) {
            self.by_valid.remove(&(v, block));
        }
        let b = self.record(block);
        if self.compute_candidate(block) {
            self.filed.insert(block, b.valid());
            self.by_valid.insert((b.valid(), block));
        }
        if self.is_candidate(block) && b.flags != 0 {
            self.flagged.insert(block);
        } else {
            self.flagged.remove(&block);
        }
        let dead = self.is_data(block)
            && b.state == BlockState::Full
            && b.valid() == 0
            && !self.pinned.contains(block);
        if dead {
            self.dead_data.insert(block);
        } else {
            self.dead_data.remove(&block);
        }
    }

    pub fn full_and_dead(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .by_valid
            .range((0, 0)..=(0, u32::MAX))
            .map(|&(_, b)| b)
            .filter(|&b| self.record(b).state == BlockState::Full)
            .chain(self.dead_data.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    pub fn candidate_count(&self) -> u32 {
        self.filed.len() as u32
    }

    pub fn next_candidate(&self, from: u32) -> Option<u32> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let from = from % n;
        self.filed
            .range(from..)
            .next()
            .or_else(|| self.filed.range(..from).next())
            .map(|(&b, _)| b)
    }

    pub fn candidates_in(&self, from: u32, count: u32) -> Vec<u32> {
        let n = self.len();
        if n == 0 {
            return Vec::new();
        }
        let from = from % n;
        let count = count.min(n);
        let end = from + count;
        let mut out: Vec<u32> = self
            .filed
            .range(from..end.min(n))
            .map(|(&b, _)| b)
            .collect();
        if end > n {
            out.extend(self.filed.range(..end - n).map(|(&b, _)| b));
        }
        out
    }

    pub fn first_flagged(&self) -> Option<u32> {
        self.flagged.first().copied()
    }

    pub fn least_valid_candidate(&self) -> Option<u32> {
        self.by_valid.first().map(|&(_, b)| b)
    }

    pub fn all_candidates(&self) -> Vec<u32> {
        self.filed.keys().copied().collect()
    }

    pub fn good_blocks(&self) -> u32 {
        self.len() - self.bad
    }

    pub fn valid_total(&self) -> u64 {
        self.valid_pages
    }

    pub fn uip(&self) -> (f64, f64, f64) {
        super::uip_of(
            (0..self.len()).map(|b| self.record(b)),
            self.pages_per_block,
        )
    }

    /// Recounts every block's valid pages (the counts are kept exactly; nothing to do but
    /// the total).
    pub fn recount(&mut self) {
        self.valid_pages = (0..self.len())
            .map(|b| u64::from(self.record(b).valid()))
            .sum();
    }

    /// Heap bytes: the words, the exact records, and the candidate index (B-tree nodes
    /// counted at their entries' size).
    pub fn heap_bytes(&self) -> usize {
        let exact = std::mem::size_of::<Exact>() + 4;
        self.words.capacity() * 4
            + self.exact.capacity() * exact
            + self
                .exact
                .values()
                .map(|e| e.bits.capacity() * 8)
                .sum::<usize>()
            + self.filed.len() * 8
            + self.by_valid.len() * 8
            + (self.flagged.len() + self.dead_data.len()) * 4
            + self.pinned.heap_bytes()
    }
}

/// Are exactly the pages `0..n` set?
fn is_prefix(bits: &[u64], n: u32) -> bool {
    let n = n as usize;
    bits.iter().enumerate().all(|(i, &w)| {
        let lo = i * 64;
        let want = if n >= lo + 64 {
            u64::MAX
        } else if n <= lo {
            0
        } else {
            (1u64 << (n - lo)) - 1
        };
        w == want
    })
}
