//! The in-RAM block table: state, first serial and page validity of every erase block.
//!
//! Invariant per block: valid + invalid + overhead + free = pages per block, where pages
//! below `next_page` are valid, invalid or overhead (its summary), and pages from
//! `next_page` on are free. The table also keeps the set of blocks cleaning may reclaim
//! (candidates), indexed so that victim selection costs the same on any device size.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BlockState {
    /// Erased (or found all-erased at mount), ready to be opened.
    Empty,
    /// The open block of a write stream.
    Active,
    /// Written as far as it will be; cleaning may reclaim it.
    Full,
    /// Holds a checkpoint.
    Checkpoint,
    /// One of the two anchor blocks (file system record, checkpoint pointers).
    Anchor,
    /// Bad: never used again.
    Bad,
}

/// A program failed here: move its valid pages out and retire it.
pub const RETIRE: u8 = 1;
/// ECC asked for a scrub: move its valid pages out and erase it.
pub const SCRUB: u8 = 2;
/// Full but without a usable summary: reclaim it (a mount would have to read every page).
pub const NO_SUMMARY: u8 = 4;

/// One erase block's record: 16 bytes, since a device holds one per block and on a big
/// chip this table is most of the mounted file system's heap (8,192 blocks: 128 KiB). Page
/// counts are kept in 16 bits ([`MAX_PAGES_PER_BLOCK`] bounds them) and read as `u32`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Block {
    /// Write serial of the block's first page (0: never opened / unknown).
    pub base_serial: u64,
    /// Pages programmed (or spoiled) so far.
    next_page: u16,
    /// Pages holding live data or metadata.
    valid: u16,
    /// Pages that are neither (the block's summary).
    overhead: u16,
    pub state: BlockState,
    /// `RETIRE`, `SCRUB`, `NO_SUMMARY`.
    pub flags: u8,
}

/// Most pages per block the table counts (in 16 bits, with one value to spare for the
/// candidate index's "not filed").
pub const MAX_PAGES_PER_BLOCK: u32 = 32_768;

const _: () = assert!(std::mem::size_of::<Block>() == 16);

impl Block {
    fn new() -> Self {
        Block {
            base_serial: 0,
            next_page: 0,
            valid: 0,
            overhead: 0,
            state: BlockState::Empty,
            flags: 0,
        }
    }

    /// Pages programmed (or spoiled) so far.
    pub fn next_page(&self) -> u32 {
        u32::from(self.next_page)
    }

    /// Pages holding live data or metadata.
    pub fn valid(&self) -> u32 {
        u32::from(self.valid)
    }

    /// Pages that are neither (the block's summary).
    pub fn overhead(&self) -> u32 {
        u32::from(self.overhead)
    }

    pub fn set_next_page(&mut self, n: u32) {
        self.next_page = count16(n);
    }

    pub fn set_overhead(&mut self, n: u32) {
        self.overhead = count16(n);
    }

    /// One more page programmed (or spoiled).
    pub fn advance(&mut self) {
        self.next_page += 1;
    }

    pub fn invalid(&self) -> u32 {
        self.next_page() - self.valid() - self.overhead()
    }

    pub fn retire(&self) -> bool {
        self.flags & RETIRE != 0
    }

    pub fn scrub(&self) -> bool {
        self.flags & SCRUB != 0
    }
}

/// A page count of one block; `Layout` refuses geometries with more pages per block than
/// [`MAX_PAGES_PER_BLOCK`], and restored counts are checked against the block size first.
fn count16(n: u32) -> u16 {
    debug_assert!(n <= MAX_PAGES_PER_BLOCK, "page count {n} past a block");
    n.min(MAX_PAGES_PER_BLOCK) as u16
}

pub struct BlockTable {
    pub blocks: Vec<Block>,
    /// One bit per page: set when the page is valid.
    valid_bits: Vec<u64>,
    /// Per block: objects whose header pages (any version) sit in it, for tombstone
    /// lifetimes (see the file system's tombstone handling). Blocks holding none (file
    /// data) have no entry.
    header_objs: HashMap<u32, Vec<u32>>,
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
    /// Header page entries over all blocks (`header_objs`).
    header_pages: u64,
    /// Candidates with flags (retire, scrub, no summary): cleaned first.
    flagged: BTreeSet<u32>,
    /// Blocks in state `Bad` (statfs asks at every open: no walk of the table).
    bad: u32,
    /// Blocks being cleaned, never candidates meanwhile (see `pin`).
    pinned: Vec<u32>,
    /// Pages made stale and not yet marked deleted on flash, for a log that marks them
    /// (YAFFS1); `None` for every other.
    stale: Option<Vec<u32>>,
}

const NOT_FILED: u16 = u16::MAX;

impl BlockTable {
    pub fn new(blocks: u32, pages_per_block: u32) -> Self {
        let pages = blocks as usize * pages_per_block as usize;
        Self {
            blocks: vec![Block::new(); blocks as usize],
            valid_bits: vec![0; pages.div_ceil(64)],
            header_objs: HashMap::new(),
            pages_per_block,
            empty: blocks,
            cand_bits: vec![0; (blocks as usize).div_ceil(64)],
            by_valid: BTreeSet::new(),
            filed: vec![NOT_FILED; blocks as usize],
            candidates: 0,
            valid_pages: 0,
            header_pages: 0,
            flagged: BTreeSet::new(),
            bad: 0,
            pinned: Vec::new(),
            stale: None,
        }
    }

    /// From now on, every page made invalid is listed until [`BlockTable::take_stale`]
    /// hands it out (YAFFS1 marks each one deleted on flash).
    pub fn list_stale(&mut self) {
        self.stale.get_or_insert_with(Vec::new);
    }

    /// The pages made invalid since the last call, oldest first.
    pub fn take_stale(&mut self) -> Vec<u32> {
        self.stale.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Lists a page that is stale without ever having been valid here (a mount found it
    /// unmarked and did not take it).
    pub fn note_stale(&mut self, pno: u32) {
        if let Some(list) = self.stale.as_mut() {
            list.push(pno);
        }
    }

    /// Forgets listed pages of `block` (it is about to be erased: nothing to mark).
    pub fn forget_stale_in(&mut self, block: u32) {
        let ppb = self.pages_per_block;
        if let Some(list) = self.stale.as_mut() {
            list.retain(|&p| p / ppb != block);
        }
    }

    pub fn len(&self) -> u32 {
        self.blocks.len() as u32
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    pub fn get(&self, block: u32) -> &Block {
        &self.blocks[block as usize]
    }

    /// Changes a block's fields through `f`, keeping the candidate index in step.
    pub fn update(&mut self, block: u32, f: impl FnOnce(&mut Block)) {
        f(&mut self.blocks[block as usize]);
        self.refile(block);
    }

    /// The valid-page bits, 64 pages a word.
    pub(crate) fn valid_words(&self) -> &[u64] {
        &self.valid_bits
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

    /// A page stops holding live data or metadata (a YAFFS1 log marks it deleted later).
    pub fn invalidate(&mut self, pno: u32) {
        if self.invalidate_unlisted(pno) {
            if let Some(list) = self.stale.as_mut() {
                list.push(pno);
            }
        }
    }

    /// `invalidate`, for a page no mount can take however long it stays unmarked: a chunk
    /// of a deleted object (its name-less header, or the absence of any header, drops it,
    /// as YAFFS1's soft deletion did). True if the page was valid.
    pub fn invalidate_unlisted(&mut self, pno: u32) -> bool {
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
        let b = &self.blocks[block as usize];
        b.state == BlockState::Full
            && (b.invalid() > 0 || b.next_page() < self.pages_per_block || b.flags != 0)
            && !self.pinned.contains(&block)
    }

    /// Takes a block out of the candidates while it is being cleaned: moving its pages
    /// can set off more cleaning (a failed batch is written again elsewhere, and that may
    /// need room), which must not pick the block whose erase is still to come. Pins nest
    /// (a short stack: one per cleaning in progress).
    /// Is `block` being cleaned?
    pub fn is_pinned(&self, block: u32) -> bool {
        self.pinned.contains(&block)
    }

    pub fn pin(&mut self, block: u32) {
        self.pinned.push(block);
        self.refile(block);
    }

    pub fn unpin(&mut self, block: u32) {
        if let Some(i) = self.pinned.iter().rposition(|&b| b == block) {
            self.pinned.remove(i);
        }
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

    /// Header pages (any version) on flash, over all blocks.
    pub fn header_total(&self) -> u64 {
        self.header_pages
    }

    /// MODA's parameters over the whole device: utilisation u (valid / all pages),
    /// invalidity i (invalid / all pages) and uniformity p (fraction of blocks that do not
    /// hold both valid and invalid pages). Bad and anchor blocks are left out; summary
    /// pages count as neither valid nor invalid.
    pub fn uip(&self) -> (f64, f64, f64) {
        let mut pages = 0u64;
        let (mut valid, mut invalid, mut blocks, mut uniform) = (0u64, 0u64, 0u64, 0u64);
        for b in &self.blocks {
            if matches!(b.state, BlockState::Bad | BlockState::Anchor) {
                continue;
            }
            blocks += 1;
            pages += u64::from(self.pages_per_block);
            valid += u64::from(b.valid);
            let inv = if b.state == BlockState::Checkpoint {
                0
            } else {
                b.invalid()
            };
            invalid += u64::from(inv);
            if b.valid == 0 || inv == 0 {
                uniform += 1;
            }
        }
        if pages == 0 {
            return (0.0, 0.0, 1.0);
        }
        (
            valid as f64 / pages as f64,
            invalid as f64 / pages as f64,
            uniform as f64 / blocks as f64,
        )
    }

    /// A header page of `ino` was written to `block`.
    pub fn add_header(&mut self, block: u32, ino: u32) {
        self.header_objs.entry(block).or_default().push(ino);
        self.header_pages += 1;
    }

    /// The objects with header pages in `block` (each once per page).
    pub fn headers_in(&self, block: u32) -> &[u32] {
        self.header_objs.get(&block).map_or(&[], |v| v.as_slice())
    }

    /// Forgets (and returns) the header owners of an erased block.
    pub fn take_headers(&mut self, block: u32) -> Vec<u32> {
        let v = self.header_objs.remove(&block).unwrap_or_default();
        self.header_pages -= v.len() as u64;
        v
    }

    pub fn set_headers(&mut self, block: u32, inos: Vec<u32>) {
        self.take_headers(block);
        self.header_pages += inos.len() as u64;
        if !inos.is_empty() {
            self.header_objs.insert(block, inos);
        }
    }

    /// Blocks holding header pages of `ino`.
    pub fn blocks_with_headers_of(&self, ino: u32) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .header_objs
            .iter()
            .filter(|(_, v)| v.contains(&ino))
            .map(|(&b, _)| b)
            .collect();
        out.sort_unstable();
        out
    }

    /// Every block's header owners.
    pub fn all_headers(&self) -> impl Iterator<Item = (u32, &[u32])> {
        self.header_objs.iter().map(|(&b, v)| (b, v.as_slice()))
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
            + self.header_objs.capacity() * (4 + std::mem::size_of::<Vec<u32>>())
            + self
                .header_objs
                .values()
                .map(|v| v.capacity() * 4)
                .sum::<usize>()
            + self.cand_bits.capacity() * 8
            + self.filed.capacity() * 2
            + self.by_valid.len() * 16
            + self.stale.as_ref().map_or(0, |l| l.capacity() * 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(t: &mut BlockTable, b: u32, valid: u32) {
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
        let mut t = BlockTable::new(200, t_ppb());
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
        let mut t = BlockTable::new(200, t_ppb());
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
