//! The page-granular block table (every profile but MNFS): per block a 16-byte record,
//! per page a valid bit, and the set of blocks cleaning may reclaim (candidates), indexed
//! so that victim selection costs the same on any device size.
//!
//! Invariant per block: valid + invalid + overhead + free = pages per block, where pages
//! below `next_page` are valid, invalid or overhead (its summary), and pages from
//! `next_page` on are free.

use std::collections::BTreeSet;

use super::{count16, Block, BlockState};

/// The page-granular table: every block's full record and a valid bit per page.
pub struct PageTable {
    pub blocks: Vec<Block>,
    /// One bit per page: set when the page is valid.
    valid_bits: Vec<u64>,
    pub pages_per_block: u32,
    pub empty: u32,
    /// One bit per block: a cleaning candidate.
    cand_bits: Vec<u64>,
    /// Candidates by valid page count, for greedy selection.
    by_valid: BTreeSet<(u32, u32)>,
    /// The valid count each candidate is filed under in `by_valid`.
    filed: Vec<u16>,
    candidates: u32,
    /// Valid pages over all blocks.
    valid_pages: u64,
    /// Candidates with flags (retire, scrub, no summary): cleaned first.
    flagged: BTreeSet<u32>,
    /// Blocks in state `Bad` (statfs asks at every open: no walk of the table).
    bad: u32,
    /// Blocks being cleaned, never candidates meanwhile (see `pin`).
    pinned: super::Pins,
}

const NOT_FILED: u16 = u16::MAX;

impl PageTable {
    pub fn new(blocks: u32, pages_per_block: u32) -> Self {
        let pages = blocks as usize * pages_per_block as usize;
        Self {
            blocks: vec![Block::new(); blocks as usize],
            valid_bits: vec![0; pages.div_ceil(64)],
            pages_per_block,
            empty: blocks,
            cand_bits: vec![0; (blocks as usize).div_ceil(64)],
            by_valid: BTreeSet::new(),
            filed: vec![NOT_FILED; blocks as usize],
            candidates: 0,
            valid_pages: 0,
            flagged: BTreeSet::new(),
            bad: 0,
            pinned: super::Pins::default(),
        }
    }

    pub fn len(&self) -> u32 {
        self.blocks.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    pub fn record(&self, block: u32) -> Block {
        self.blocks[block as usize]
    }

    pub fn get(&self, block: u32) -> &Block {
        &self.blocks[block as usize]
    }

    /// Changes a block's fields through `f`, keeping the candidate index in step.
    pub fn update(&mut self, block: u32, f: impl FnOnce(&mut Block)) {
        f(&mut self.blocks[block as usize]);
        self.refile(block);
    }

    pub fn is_valid(&self, pno: u32) -> bool {
        self.valid_bits[pno as usize / 64] & (1 << (pno % 64)) != 0
    }

    pub fn set_valid(&mut self, pno: u32) {
        debug_assert!(!self.is_valid(pno), "page {pno} already valid");
        self.valid_bits[pno as usize / 64] |= 1 << (pno % 64);
        let b = pno / self.pages_per_block;
        self.blocks[b as usize].valid += 1;
        self.valid_pages += 1;
        self.refile(b);
    }

    /// A page stops holding live data or metadata. True if it was valid.
    pub fn invalidate(&mut self, pno: u32) -> bool {
        let was = self.is_valid(pno);
        if was {
            self.valid_bits[pno as usize / 64] &= !(1 << (pno % 64));
            let b = pno / self.pages_per_block;
            self.blocks[b as usize].valid -= 1;
            self.valid_pages -= 1;
            self.refile(b);
        }
        was
    }

    pub fn set_state(&mut self, block: u32, state: BlockState) {
        let b = &mut self.blocks[block as usize];
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
        self.refile(block);
    }

    /// Valid pages of a block, in page order.
    pub fn valid_pages(&self, block: u32) -> Vec<u32> {
        let first = block * self.pages_per_block;
        (first..first + self.blocks[block as usize].next_page())
            .filter(|&p| self.is_valid(p))
            .collect()
    }

    /// Blocks cleaning may reclaim: full, holding at least one invalid page or unwritten
    /// pages it will never be written to (a block sealed early), or flagged.
    pub fn is_candidate(&self, block: u32) -> bool {
        self.cand_bits[block as usize / 64] & (1 << (block % 64)) != 0
    }

    fn compute_candidate(&self, block: u32) -> bool {
        super::reclaimable(&self.blocks[block as usize], self.pages_per_block)
            && !self.pinned.contains(block)
    }

    /// Is `block` being cleaned?
    pub fn is_pinned(&self, block: u32) -> bool {
        self.pinned.contains(block)
    }

    /// Takes a block out of the candidates while it is being cleaned (see `Pins`).
    pub fn pin(&mut self, block: u32) {
        self.pinned.push(block);
        self.refile(block);
    }

    pub fn unpin(&mut self, block: u32) {
        self.pinned.pop(block);
        self.refile(block);
    }

    /// Re-files a block in the candidate index after any change.
    fn refile(&mut self, block: u32) {
        let cand = self.compute_candidate(block);
        let i = block as usize;
        let was = self.is_candidate(block);
        if was {
            self.by_valid.remove(&(u32::from(self.filed[i]), block));
            self.filed[i] = NOT_FILED;
        }
        if cand {
            self.cand_bits[i / 64] |= 1 << (block % 64);
            let v = self.blocks[i].valid;
            self.by_valid.insert((u32::from(v), block));
            self.filed[i] = v;
        } else {
            self.cand_bits[i / 64] &= !(1 << (block % 64));
        }
        if cand && self.blocks[i].flags != 0 {
            self.flagged.insert(block);
        } else {
            self.flagged.remove(&block);
        }
        match (was, cand) {
            (false, true) => self.candidates += 1,
            (true, false) => self.candidates -= 1,
            _ => {}
        }
    }

    /// Full blocks holding no valid page (not pinned), in block order: what a delete
    /// erases at once. From the candidate index, so it costs the same on any device size.
    pub fn full_and_dead(&self) -> Vec<u32> {
        self.by_valid
            .range((0, 0)..=(0, u32::MAX))
            .map(|&(_, b)| b)
            .filter(|&b| self.blocks[b as usize].state == BlockState::Full)
            .collect()
    }

    pub fn candidate_count(&self) -> u32 {
        self.candidates
    }

    /// The first candidate at or after `from` (wrapping), if any.
    pub fn next_candidate(&self, from: u32) -> Option<u32> {
        let n = self.len();
        if self.candidates == 0 || n == 0 {
            return None;
        }
        let from = from % n;
        self.first_set_in(from, n)
            .or_else(|| self.first_set_in(0, from))
    }

    fn first_set_in(&self, from: u32, to: u32) -> Option<u32> {
        let mut b = from;
        while b < to {
            let w = self.cand_bits[b as usize / 64] >> (b % 64);
            if w == 0 {
                b = (b / 64 + 1) * 64;
                continue;
            }
            let hit = b + w.trailing_zeros();
            return (hit < to).then_some(hit);
        }
        None
    }

    /// Candidates among `count` blocks from `from` (wrapping), in block order.
    pub fn candidates_in(&self, from: u32, count: u32) -> Vec<u32> {
        let n = self.len();
        let count = count.min(n);
        let mut out = Vec::new();
        let mut at = from % n.max(1);
        let mut left = count;
        while left > 0 {
            let span = left.min(n - at);
            let mut b = at;
            while let Some(hit) = self.first_set_in(b, at + span) {
                out.push(hit);
                b = hit + 1;
            }
            left -= span;
            at = 0;
        }
        out
    }

    /// A flagged candidate (retire, scrub or no summary), lowest block number first.
    pub fn first_flagged(&self) -> Option<u32> {
        self.flagged.first().copied()
    }

    /// The candidate with the fewest valid pages (lowest block number among equals).
    pub fn least_valid_candidate(&self) -> Option<u32> {
        self.by_valid.first().map(|&(_, b)| b)
    }

    /// Every candidate, in block order.
    pub fn all_candidates(&self) -> Vec<u32> {
        self.candidates_in(0, self.len())
    }

    pub fn good_blocks(&self) -> u32 {
        debug_assert_eq!(
            self.bad as usize,
            self.blocks
                .iter()
                .filter(|b| b.state == BlockState::Bad)
                .count()
        );
        self.len() - self.bad
    }

    pub fn valid_total(&self) -> u64 {
        self.valid_pages
    }

    /// MODA's parameters over the whole device: utilisation u (valid / all pages),
    /// invalidity i (invalid / all pages) and uniformity p (fraction of blocks that do not
    /// hold both valid and invalid pages). Bad and anchor blocks are left out; summary
    /// pages count as neither valid nor invalid.
    pub fn uip(&self) -> (f64, f64, f64) {
        super::uip_of(self.blocks.iter().copied(), self.pages_per_block)
    }

    /// Recounts every block's valid pages from the bitmap (after restoring it).
    pub fn recount(&mut self) {
        let ppb = self.pages_per_block;
        for b in 0..self.len() {
            let valid = (b * ppb..(b + 1) * ppb)
                .filter(|&p| self.is_valid(p))
                .count() as u32;
            self.blocks[b as usize].valid = count16(valid);
            self.refile(b);
        }
        self.valid_pages = self.blocks.iter().map(|b| u64::from(b.valid)).sum();
    }

    /// Heap bytes this table holds (for the memory figures).
    pub fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.valid_bits.capacity() * 8
            + self.cand_bits.capacity() * 8
            + self.filed.capacity() * 2
            + self.by_valid.len() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(t: &mut PageTable, b: u32, valid: u32) {
        t.set_state(b, BlockState::Full);
        t.update(b, |x| x.set_next_page(t_ppb()));
        for p in 0..valid {
            t.set_valid(b * t_ppb() + p);
        }
    }

    fn t_ppb() -> u32 {
        8
    }

    #[test]
    fn full_and_dead_lists_full_blocks_without_a_valid_page_and_nothing_else() {
        let mut t = PageTable::new(200, t_ppb());
        full(&mut t, 150, 0);
        full(&mut t, 7, 0);
        full(&mut t, 9, 1);
        full(&mut t, 11, 2);
        t.invalidate(11 * 8);
        t.invalidate(11 * 8 + 1);
        t.set_state(40, BlockState::Active);
        t.update(40, |x| x.set_next_page(3));
        full(&mut t, 60, 0);
        t.pin(60);
        assert_eq!(t.full_and_dead(), vec![7, 11, 150]);
        t.set_state(7, BlockState::Empty);
        t.unpin(60);
        assert_eq!(t.full_and_dead(), vec![11, 60, 150]);
    }

    #[test]
    fn candidates_follow_every_change() {
        let mut t = PageTable::new(200, t_ppb());
        full(&mut t, 3, 8);
        assert!(!t.is_candidate(3), "full of valid pages");
        t.invalidate(3 * 8 + 2);
        assert!(t.is_candidate(3));
        full(&mut t, 130, 2);
        full(&mut t, 70, 5);
        assert_eq!(t.candidate_count(), 3);
        assert_eq!(t.least_valid_candidate(), Some(130));
        assert_eq!(t.next_candidate(4), Some(70));
        assert_eq!(t.next_candidate(131), Some(3), "wraps");
        assert_eq!(t.candidates_in(100, 150), vec![130, 3]);
        assert_eq!(t.candidates_in(100, 180), vec![130, 3, 70]);
        assert_eq!(t.all_candidates(), vec![3, 70, 130]);
        t.set_state(130, BlockState::Empty);
        t.update(130, |b| b.flags = 0);
        for p in 0..2 {
            t.invalidate(130 * 8 + p);
        }
        assert_eq!(t.least_valid_candidate(), Some(70));
        t.update(70, |b| b.set_overhead(0));
        assert_eq!(t.candidate_count(), 2);
    }
}
