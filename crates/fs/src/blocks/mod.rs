//! Per-block state (DESIGN axis 5): what the file system keeps in RAM about each erase
//! block. Chosen at mkfs (`FsConfig::records`) and held behind [`BlockTable`]:
//!
//! - [`PageTable`](page_table::PageTable): a 16-byte record per block and a valid bit per
//!   page, what a page-mapped log needs (every profile but MNFS);
//! - [`Ibat`](ibat::Ibat): MNFS's in-core block allocation table, 4 bytes a block, which is
//!   all a block-mapped data block needs; the few blocks it cannot describe (the log's)
//!   get a full record on the side.
//!
//! Both answer every question the same way (a property test holds them to it); they
//! differ in the RAM they take. Which objects have header pages in which block is kept
//! here, beside either.

pub mod data_owners;
pub mod headers;
pub mod ibat;
pub mod page_table;

use serde::{Deserialize, Serialize};

use data_owners::DataOwners;
use headers::HeaderOwners;
use ibat::Ibat;
use page_table::PageTable;

/// Which per-block table a file system keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordsKind {
    /// A record per block and a valid bit per page.
    #[default]
    PageTable,
    /// MNFS's iBAT: a word per block; file data placed by block (see `block_placed`) and
    /// found at mount from one spare area per block (see `scan_ibat`).
    Ibat,
}

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

/// MODA's parameters over the whole device: utilisation u (valid / all pages), invalidity
/// i (invalid / all pages) and uniformity p (fraction of blocks that do not hold both
/// valid and invalid pages). Bad and anchor blocks are left out; summary pages count as
/// neither valid nor invalid.
fn uip_of(blocks: impl Iterator<Item = Block>, pages_per_block: u32) -> (f64, f64, f64) {
    let mut pages = 0u64;
    let (mut valid, mut invalid, mut count, mut uniform) = (0u64, 0u64, 0u64, 0u64);
    for b in blocks {
        if matches!(b.state, BlockState::Bad | BlockState::Anchor) {
            continue;
        }
        count += 1;
        pages += u64::from(pages_per_block);
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
        uniform as f64 / count as f64,
    )
}

/// Could cleaning reclaim a block in this state? Full, and holding an invalid page, pages
/// it will never be written to (a block sealed early) or a flag. Each table adds its own
/// rules (pins; the iBAT's data blocks).
fn reclaimable(b: &Block, pages_per_block: u32) -> bool {
    b.state == BlockState::Full
        && (b.invalid() > 0 || b.next_page() < pages_per_block || b.flags != 0)
}

/// Blocks being cleaned, never candidates meanwhile: moving a block's pages can set off
/// more cleaning (a failed batch is written again elsewhere, and that may need room),
/// which must not pick the block whose erase is still to come. Pins nest (a short stack:
/// one per cleaning in progress).
#[derive(Default)]
struct Pins(Vec<u32>);

impl Pins {
    fn contains(&self, block: u32) -> bool {
        self.0.contains(&block)
    }

    fn push(&mut self, block: u32) {
        self.0.push(block);
    }

    /// Drops one pin of `block` (the newest).
    fn pop(&mut self, block: u32) {
        if let Some(i) = self.0.iter().rposition(|&b| b == block) {
            self.0.remove(i);
        }
    }

    fn heap_bytes(&self) -> usize {
        self.0.capacity() * 4
    }
}

enum Records {
    Page(PageTable),
    Ibat(Ibat),
}

/// The per-block state of a mounted file system, of the kind it was made with.
pub struct BlockTable {
    records: Records,
    headers: HeaderOwners,
    /// Objects with data pages in each block, for profiles whose tombstones outlive
    /// their data (see `data_owners`); empty for the others.
    pub data: DataOwners,
    /// Pages made stale and not yet marked deleted on flash, for a log that marks them
    /// (YAFFS1); `None` for every other.
    stale: Option<Vec<u32>>,
}

/// The same call on whichever table the file system keeps.
macro_rules! each {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            Records::Page($t) => $e,
            Records::Ibat($t) => $e,
        }
    };
}

impl BlockTable {
    /// A page table (every profile but MNFS) of `blocks` erased blocks.
    pub fn new(blocks: u32, pages_per_block: u32) -> Self {
        Self::of_kind(RecordsKind::PageTable, blocks, pages_per_block)
    }

    pub fn of_kind(kind: RecordsKind, blocks: u32, pages_per_block: u32) -> Self {
        let records = match kind {
            RecordsKind::PageTable => Records::Page(PageTable::new(blocks, pages_per_block)),
            RecordsKind::Ibat => Records::Ibat(Ibat::new(blocks, pages_per_block)),
        };
        BlockTable {
            records,
            headers: HeaderOwners::default(),
            data: DataOwners::new(blocks),
            stale: None,
        }
    }

    pub fn kind(&self) -> RecordsKind {
        match self.records {
            Records::Page(_) => RecordsKind::PageTable,
            Records::Ibat(_) => RecordsKind::Ibat,
        }
    }

    /// The iBAT, if this is one.
    pub fn ibat(&self) -> Option<&Ibat> {
        match &self.records {
            Records::Ibat(t) => Some(t),
            Records::Page(_) => None,
        }
    }

    /// Marks a block as holding file data placed by block (iBAT: never a cleaning
    /// candidate unless flagged; the page table has no such notion).
    pub fn set_data_block(&mut self, block: u32, data: bool) {
        if let Records::Ibat(t) = &mut self.records {
            t.set_data(block, data);
        }
    }

    /// The generation of a data block's pages (iBAT only; 0 otherwise).
    pub fn generation(&self, block: u32) -> u8 {
        self.ibat().map_or(0, |t| t.generation(block))
    }

    pub fn set_generation(&mut self, block: u32, generation: u8) {
        if let Records::Ibat(t) = &mut self.records {
            t.set_generation(block, generation);
        }
    }

    /// Does `block` hold block-placed file data?
    pub fn is_data_block(&self, block: u32) -> bool {
        match &self.records {
            Records::Ibat(t) => t.is_data(block),
            Records::Page(_) => false,
        }
    }

    pub fn pages_per_block(&self) -> u32 {
        each!(&self.records, t => t.pages_per_block)
    }

    /// Erased blocks.
    pub fn empty(&self) -> u32 {
        each!(&self.records, t => t.empty)
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
        let ppb = self.pages_per_block();
        if let Some(list) = self.stale.as_mut() {
            list.retain(|&p| p / ppb != block);
        }
    }

    pub fn len(&self) -> u32 {
        each!(&self.records, t => t.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of a block's record.
    pub fn get(&self, block: u32) -> Block {
        each!(&self.records, t => t.record(block))
    }

    /// Every block's record, in block order.
    pub fn records(&self) -> Vec<Block> {
        (0..self.len()).map(|b| self.get(b)).collect()
    }

    pub fn update(&mut self, block: u32, f: impl FnOnce(&mut Block)) {
        each!(&mut self.records, t => t.update(block, f))
    }

    pub fn is_valid(&self, pno: u32) -> bool {
        each!(&self.records, t => t.is_valid(pno))
    }

    pub fn set_valid(&mut self, pno: u32) {
        each!(&mut self.records, t => t.set_valid(pno))
    }

    /// A page stops holding live data or metadata (a YAFFS1 log marks it deleted later).
    pub fn invalidate(&mut self, pno: u32) {
        if self.invalidate_unlisted(pno) {
            self.note_stale(pno);
        }
    }

    /// `invalidate`, for a page no mount can take however long it stays unmarked: a chunk
    /// of a deleted object (its name-less header, or the absence of any header, drops it,
    /// as YAFFS1's soft deletion did). True if the page was valid.
    pub fn invalidate_unlisted(&mut self, pno: u32) -> bool {
        each!(&mut self.records, t => t.invalidate(pno))
    }

    pub fn set_state(&mut self, block: u32, state: BlockState) {
        each!(&mut self.records, t => t.set_state(block, state))
    }

    pub fn valid_pages(&self, block: u32) -> Vec<u32> {
        each!(&self.records, t => t.valid_pages(block))
    }

    pub fn is_candidate(&self, block: u32) -> bool {
        each!(&self.records, t => t.is_candidate(block))
    }

    pub fn is_pinned(&self, block: u32) -> bool {
        each!(&self.records, t => t.is_pinned(block))
    }

    pub fn pin(&mut self, block: u32) {
        each!(&mut self.records, t => t.pin(block))
    }

    pub fn unpin(&mut self, block: u32) {
        each!(&mut self.records, t => t.unpin(block))
    }

    pub fn full_and_dead(&self) -> Vec<u32> {
        each!(&self.records, t => t.full_and_dead())
    }

    pub fn candidate_count(&self) -> u32 {
        each!(&self.records, t => t.candidate_count())
    }

    pub fn next_candidate(&self, from: u32) -> Option<u32> {
        each!(&self.records, t => t.next_candidate(from))
    }

    pub fn candidates_in(&self, from: u32, count: u32) -> Vec<u32> {
        each!(&self.records, t => t.candidates_in(from, count))
    }

    pub fn first_flagged(&self) -> Option<u32> {
        each!(&self.records, t => t.first_flagged())
    }

    pub fn least_valid_candidate(&self) -> Option<u32> {
        each!(&self.records, t => t.least_valid_candidate())
    }

    pub fn all_candidates(&self) -> Vec<u32> {
        each!(&self.records, t => t.all_candidates())
    }

    pub fn good_blocks(&self) -> u32 {
        each!(&self.records, t => t.good_blocks())
    }

    pub fn valid_total(&self) -> u64 {
        each!(&self.records, t => t.valid_total())
    }

    pub fn uip(&self) -> (f64, f64, f64) {
        each!(&self.records, t => t.uip())
    }

    pub fn recount(&mut self) {
        each!(&mut self.records, t => t.recount())
    }

    /// Heap bytes this table holds (for the memory figures).
    pub fn heap_bytes(&self) -> usize {
        each!(&self.records, t => t.heap_bytes())
            + self.headers.heap_bytes()
            + self.data.heap_bytes()
            + self.stale.as_ref().map_or(0, |l| l.capacity() * 4)
    }

    /// Header pages (any version) on flash, over all blocks.
    pub fn header_total(&self) -> u64 {
        self.headers.pages
    }

    /// A header page of `ino` was written to `block`.
    pub fn add_header(&mut self, block: u32, ino: u32) {
        self.headers.objs.entry(block).or_default().push(ino);
        self.headers.pages += 1;
    }

    /// The objects with header pages in `block` (each once per page).
    pub fn headers_in(&self, block: u32) -> &[u32] {
        self.headers.objs.get(&block).map_or(&[], |v| v.as_slice())
    }

    /// Forgets (and returns) the header owners of an erased block.
    pub fn take_headers(&mut self, block: u32) -> Vec<u32> {
        let v = self.headers.objs.remove(&block).unwrap_or_default();
        self.headers.pages -= v.len() as u64;
        v
    }

    pub fn set_headers(&mut self, block: u32, inos: Vec<u32>) {
        self.take_headers(block);
        self.headers.pages += inos.len() as u64;
        if !inos.is_empty() {
            self.headers.objs.insert(block, inos);
        }
    }

    /// Blocks holding header pages of `ino`.
    pub fn blocks_with_headers_of(&self, ino: u32) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .headers
            .objs
            .iter()
            .filter(|(_, v)| v.contains(&ino))
            .map(|(&b, _)| b)
            .collect();
        out.sort_unstable();
        out
    }

    /// Every block's header owners.
    pub fn all_headers(&self) -> impl Iterator<Item = (u32, &[u32])> {
        self.headers.objs.iter().map(|(&b, v)| (b, v.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BLOCKS: u32 = 12;
    const PPB: u32 = 8;

    #[derive(Clone, Debug)]
    enum Op {
        /// Opens an empty block and programs `n` pages of it, valid.
        Fill(u32, u32),
        Invalidate(u32),
        Full(u32),
        Erase(u32),
        Flag(u32, u8),
        Serial(u32, u64),
        Overhead(u32),
        Pin(u32),
        Unpin(u32),
        Bad(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        let b = 0..BLOCKS;
        prop_oneof![
            (b.clone(), 1..=PPB).prop_map(|(b, n)| Op::Fill(b, n)),
            (0..BLOCKS * PPB).prop_map(Op::Invalidate),
            (0..BLOCKS * PPB).prop_map(Op::Invalidate),
            b.clone().prop_map(Op::Full),
            b.clone().prop_map(Op::Erase),
            (b.clone(), 0u8..8).prop_map(|(b, f)| Op::Flag(b, f)),
            (b.clone(), 0u64..3).prop_map(|(b, s)| Op::Serial(b, s)),
            b.clone().prop_map(Op::Overhead),
            b.clone().prop_map(Op::Pin),
            b.clone().prop_map(Op::Unpin),
            b.prop_map(Op::Bad),
        ]
    }

    fn apply(t: &mut BlockTable, op: &Op) {
        match *op {
            Op::Fill(b, n) => {
                if t.get(b).state != BlockState::Empty {
                    return;
                }
                t.set_state(b, BlockState::Active);
                for p in 0..n {
                    t.update(b, |x| x.advance());
                    t.set_valid(b * PPB + p);
                }
            }
            Op::Invalidate(p) => t.invalidate(p),
            Op::Full(b) => {
                if t.get(b).state == BlockState::Active {
                    t.set_state(b, BlockState::Full)
                }
            }
            Op::Erase(b) => {
                if t.get(b).state == BlockState::Bad {
                    return;
                }
                for p in t.valid_pages(b) {
                    t.invalidate(p);
                }
                t.update(b, |x| {
                    x.set_next_page(0);
                    x.base_serial = 0;
                    x.set_overhead(0);
                    x.flags = 0;
                });
                t.set_state(b, BlockState::Empty);
            }
            Op::Flag(b, f) => t.update(b, |x| x.flags = f),
            Op::Serial(b, s) => t.update(b, |x| x.base_serial = s),
            Op::Overhead(b) => {
                if t.get(b).next_page() < PPB && t.get(b).state == BlockState::Active {
                    t.update(b, |x| {
                        x.advance();
                        x.set_overhead(x.overhead() + 1)
                    });
                }
            }
            Op::Pin(b) => t.pin(b),
            Op::Unpin(b) => t.unpin(b),
            Op::Bad(b) => {
                if t.get(b).valid() == 0 {
                    t.set_state(b, BlockState::Bad)
                }
            }
        }
    }

    fn same(a: &BlockTable, b: &BlockTable) {
        for blk in 0..BLOCKS {
            let (x, y) = (a.get(blk), b.get(blk));
            assert_eq!(
                (
                    x.state,
                    x.next_page(),
                    x.valid(),
                    x.overhead(),
                    x.flags,
                    x.base_serial
                ),
                (
                    y.state,
                    y.next_page(),
                    y.valid(),
                    y.overhead(),
                    y.flags,
                    y.base_serial
                ),
                "block {blk}"
            );
            assert_eq!(a.valid_pages(blk), b.valid_pages(blk));
            assert_eq!(a.is_candidate(blk), b.is_candidate(blk), "block {blk}");
            assert_eq!(a.candidates_in(blk, 5), b.candidates_in(blk, 5));
            assert_eq!(a.next_candidate(blk), b.next_candidate(blk));
        }
        for p in 0..BLOCKS * PPB {
            assert_eq!(a.is_valid(p), b.is_valid(p), "page {p}");
        }
        assert_eq!(a.all_candidates(), b.all_candidates());
        assert_eq!(a.candidate_count(), b.candidate_count());
        assert_eq!(a.least_valid_candidate(), b.least_valid_candidate());
        assert_eq!(a.first_flagged(), b.first_flagged());
        assert_eq!(a.full_and_dead(), b.full_and_dead());
        assert_eq!(a.valid_total(), b.valid_total());
        assert_eq!(a.empty(), b.empty());
        assert_eq!(a.good_blocks(), b.good_blocks());
        assert_eq!(a.uip(), b.uip());
    }

    proptest! {
        /// The iBAT answers every question as the page table does (no data blocks: those
        /// it keeps out of cleaning by design).
        #[test]
        fn ibat_answers_as_the_page_table(ops in proptest::collection::vec(op(), 1..120)) {
            let mut page = BlockTable::of_kind(RecordsKind::PageTable, BLOCKS, PPB);
            let mut ibat = BlockTable::of_kind(RecordsKind::Ibat, BLOCKS, PPB);
            for op in &ops {
                apply(&mut page, op);
                apply(&mut ibat, op);
                same(&page, &ibat);
            }
        }
    }

    #[test]
    fn data_blocks_take_a_word_and_are_never_cleaned_unless_flagged() {
        let mut t = BlockTable::of_kind(RecordsKind::Ibat, 64, 32);
        for b in 0..60 {
            t.set_state(b, BlockState::Active);
            t.set_data_block(b, true);
            for p in 0..20 {
                t.update(b, |x| x.advance());
                t.set_valid(b * 32 + p);
            }
            t.set_state(b, BlockState::Full);
        }
        // A truncation cuts from the end: still one word.
        for p in (10..20).rev() {
            t.invalidate(5 * 32 + p);
        }
        assert_eq!(t.ibat().map(|i| i.counts()), Some((60, 0)));
        assert_eq!(t.candidate_count(), 0, "data blocks are not candidates");
        t.set_generation(3, 2);
        assert_eq!(
            (t.generation(3), t.get(3).valid(), t.get(3).next_page()),
            (2, 20, 20)
        );
        t.update(7, |x| x.flags = crate::blocks::RETIRE);
        assert_eq!(t.first_flagged(), Some(7));
        for p in 0..20 {
            t.invalidate(9 * 32 + p);
        }
        assert_eq!(t.full_and_dead(), vec![9]);
        // A page made stale in the middle needs an exact record.
        t.invalidate(11 * 32 + 3);
        assert_eq!(t.ibat().map(|i| i.counts()), Some((60, 1)));
        assert!(!t.is_valid(11 * 32 + 3) && t.is_valid(11 * 32 + 4));
        assert!(t.heap_bytes() < 64 * 4 + 200, "{}", t.heap_bytes());
    }
}
