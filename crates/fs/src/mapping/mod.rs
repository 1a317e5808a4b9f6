//! Data mapping (DESIGN axis 2): where each chunk of a file lives on flash. The kind is
//! chosen at mkfs (`FsConfig::mapping`); each file holds a [`FileMap`] of that kind. The
//! page-mapped log (YAFFS) maps any chunk to any page; the block-granular map (MNFS) keeps
//! one entry per erase block of a file written once in order, and turns page-mapped when a
//! file leaves that shape. Both map chunks to the same pages: the kind changes the RAM a
//! file's map takes, not what is on flash.

pub mod block_mapped;
pub mod page_mapped;
pub mod tnode;

use serde::{Deserialize, Serialize};

use block_mapped::{BlockMap, FirstBlock, Step};
use page_mapped::PageMap;
use tnode::TnodeMap;

/// Which data mapping a file system uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingKind {
    /// Any chunk in any page, YAFFS style.
    #[default]
    PageMapped,
    /// A file's chunks in whole blocks, one map entry a block (MNFS).
    BlockMapped,
    /// Any chunk in any page, in YAFFS1's tnode tree (16 entries of the device's page-number
    /// width per level-0 tnode): the RAM the 2006-07 papers' YAFFS held.
    Tnode,
}

/// What a file map needs to know of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapShape {
    pub pages_per_block: u32,
    /// Pages of the whole device.
    pub pages: u32,
}

/// A file's chunk-index-to-page map. Page numbers `NO_PAGE` (a hole) and `LOST_PAGE`
/// (lost to a media error) are never "mapped pages".
pub trait ChunkMap {
    /// The page of `chunk`, or `NO_PAGE`.
    fn get(&self, chunk: u32) -> u32;
    /// Maps `chunk` to `pno` (`NO_PAGE` unmaps); returns what it was mapped to before.
    fn set(&mut self, chunk: u32, pno: u32) -> u32;
    /// Drops every chunk from `keep` on; returns the mapped pages dropped.
    fn truncate(&mut self, keep: u32) -> Vec<u32>;
    /// Runs of consecutive chunks on consecutive pages, in chunk order: (first chunk,
    /// first page, length). Lost chunks come as runs of their own with page `LOST_PAGE`.
    fn runs(&self) -> Vec<(u32, u32, u32)>;
    /// Chunks mapped to real pages (for `stat`'s block count).
    fn mapped(&self) -> u64;
    /// Chunks in `[from, to)` with no page (holes).
    fn holes_in(&self, from: u32, to: u32) -> u64;
    /// One past the highest chunk with an entry (0 if none).
    fn end(&self) -> u32;
}

/// A file's map, of the kind the file system uses.
pub enum FileMap {
    Page(PageMap),
    /// Block-granular, the file still in its first block.
    First(FirstBlock),
    /// Block-granular, past its first block.
    Block(Box<BlockMap>),
    /// YAFFS1's tnode tree.
    Tnode(Box<TnodeMap>),
}

/// The same call on whichever map a file holds.
macro_rules! each {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            FileMap::Page($m) => $e,
            FileMap::First($m) => $e,
            FileMap::Block($m) => $e,
            FileMap::Tnode($m) => $e,
        }
    };
}

impl FileMap {
    /// An empty map of `kind` on a device of `shape`.
    pub fn new(kind: MappingKind, shape: MapShape) -> Self {
        match kind {
            MappingKind::PageMapped => FileMap::Page(PageMap::default()),
            MappingKind::BlockMapped => FileMap::First(FirstBlock::new(shape.pages_per_block)),
            MappingKind::Tnode => FileMap::Tnode(Box::new(TnodeMap::new(shape.pages))),
        }
    }

    /// A map of `kind` holding `runs` (as [`FileMap::runs`] gives them).
    pub fn from_runs(kind: MappingKind, shape: MapShape, runs: &[(u32, u32, u32)]) -> Self {
        match kind {
            MappingKind::PageMapped => FileMap::Page(PageMap::from_runs(runs)),
            MappingKind::BlockMapped | MappingKind::Tnode => {
                let mut m = FileMap::new(kind, shape);
                for (c, p) in page_mapped::run_entries(runs) {
                    m.set(c, p);
                }
                m
            }
        }
    }

    pub fn get(&self, chunk: u32) -> u32 {
        each!(self, m => m.get(chunk))
    }

    pub fn set(&mut self, chunk: u32, pno: u32) -> u32 {
        let step = match self {
            FileMap::Page(m) => return m.set(chunk, pno),
            FileMap::Tnode(m) => return m.set(chunk, pno),
            FileMap::First(m) => match m.step(chunk, pno) {
                Ok(step) => step,
                Err(second) => {
                    *self = FileMap::Block(Box::new(second));
                    Step::Set(crate::object::NO_PAGE)
                }
            },
            FileMap::Block(m) => m.step(chunk, pno),
        };
        match step {
            Step::Set(old) => old,
            Step::Leave => {
                // Out of the block-granular shape for good: page-mapped from here on.
                let mut page = PageMap::from_runs(&self.runs());
                let old = page.set(chunk, pno);
                *self = FileMap::Page(page);
                old
            }
        }
    }

    /// Moves chunks `first..first + n` to pages `page..page + n` at once (a block copied
    /// whole, MNFS): the pages they had, if the block-granular map can say it as one new
    /// entry (`None` leaves the map as it was; the caller sets chunk by chunk).
    pub fn move_run(&mut self, first: u32, n: u32, page: u32) -> Option<Vec<u32>> {
        match self {
            FileMap::First(m) => m.move_run(first, n, page),
            FileMap::Block(m) => m.move_run(first, n, page),
            FileMap::Page(_) | FileMap::Tnode(_) => None,
        }
    }

    pub fn truncate(&mut self, keep: u32) -> Vec<u32> {
        match self {
            FileMap::Page(m) => m.truncate(keep),
            FileMap::Tnode(m) => m.truncate(keep),
            FileMap::First(m) => m.truncate(keep),
            FileMap::Block(m) => {
                let (dropped, back) = m.truncate(keep);
                if let Some(first) = back {
                    *self = FileMap::First(first);
                }
                dropped
            }
        }
    }

    pub fn runs(&self) -> Vec<(u32, u32, u32)> {
        each!(self, m => m.runs())
    }
    pub fn mapped(&self) -> u64 {
        match self {
            FileMap::Page(m) => m.mapped(),
            FileMap::Tnode(m) => m.mapped(),
            FileMap::First(m) => u64::from(m.end()),
            FileMap::Block(m) => m.mapped(),
        }
    }
    pub fn holes_in(&self, from: u32, to: u32) -> u64 {
        match self {
            FileMap::Page(m) => m.holes_in(from, to),
            FileMap::Tnode(m) => m.holes_in(from, to),
            FileMap::First(m) => block_mapped::holes(m.end(), from, to),
            FileMap::Block(m) => m.holes_in(from, to),
        }
    }
    pub fn end(&self) -> u32 {
        each!(self, m => m.end())
    }

    /// (chunk, page) of every mapped or lost chunk, in chunk order.
    pub fn entries(&self) -> Vec<(u32, u32)> {
        page_mapped::run_entries(&self.runs()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{LOST_PAGE, NO_PAGE};
    use proptest::prelude::*;

    const PPB: u32 = 8;
    const BLOCKS: u32 = 32;
    const SHAPE: MapShape = MapShape {
        pages_per_block: PPB,
        pages: PPB * BLOCKS,
    };
    const SMALL: MapShape = MapShape {
        pages_per_block: 32,
        pages: 32 * 1024,
    };

    /// What a test does to a file's map.
    #[derive(Clone, Debug)]
    enum Op {
        /// The next chunk, at the writer's next page (most ops: files are written in order).
        Append,
        /// The writer moves on to a fresh block (with `summary`: after a summary page).
        NewBlock {
            block: u32,
            summary: bool,
        },
        Set {
            chunk: u32,
            page: u32,
        },
        Unmap {
            chunk: u32,
        },
        Lose {
            chunk: u32,
        },
        Truncate {
            keep: u32,
        },
        /// Cleaning moves the last `n` chunks to fresh pages of `block`, in order.
        Move {
            n: u32,
            block: u32,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            12 => Just(Op::Append),
            3 => (0..BLOCKS, any::<bool>()).prop_map(|(block, summary)| Op::NewBlock { block, summary }),
            1 => (0..40u32, 0..BLOCKS * PPB).prop_map(|(chunk, page)| Op::Set { chunk, page }),
            1 => (0..40u32).prop_map(|chunk| Op::Unmap { chunk }),
            1 => (0..40u32).prop_map(|chunk| Op::Lose { chunk }),
            1 => (0..40u32).prop_map(|keep| Op::Truncate { keep }),
            1 => (1..PPB, 0..BLOCKS).prop_map(|(n, block)| Op::Move { n, block }),
        ]
    }

    fn same(block: &FileMap, page: &FileMap) {
        assert_eq!(block.end(), page.end());
        assert_eq!(block.mapped(), page.mapped());
        assert_eq!(block.entries(), page.entries());
        assert_eq!(block.runs(), page.runs());
        for c in 0..page.end() + 3 {
            assert_eq!(block.get(c), page.get(c), "chunk {c}");
            assert_eq!(block.holes_in(c / 2, c + 1), page.holes_in(c / 2, c + 1));
        }
    }

    proptest! {
        /// Whatever is done to it, a block-granular map maps every chunk as the page map
        /// does (it only takes less RAM while the file keeps its shape).
        #[test]
        fn block_granular_maps_as_the_page_map_does(ops in proptest::collection::vec(op(), 0..120)) {
            let mut block = FileMap::new(MappingKind::BlockMapped, SHAPE);
            let mut page = FileMap::new(MappingKind::PageMapped, SHAPE);
            // The writer's next page, and the last page it may use in its block.
            let (mut next, mut stop) = (0u32, PPB);
            for op in ops {
                match op {
                    Op::Append => {
                        if next >= BLOCKS * PPB {
                            continue;
                        }
                        let c = page.end();
                        prop_assert_eq!(block.set(c, next), page.set(c, next));
                        next += 1;
                        if next % PPB >= stop {
                            next = (next / PPB + 1) * PPB;
                        }
                    }
                    Op::NewBlock { block: b, summary } => {
                        next = b * PPB;
                        stop = if summary { PPB - 1 } else { PPB };
                    }
                    Op::Set { chunk, page: p } => {
                        prop_assert_eq!(block.set(chunk, p), page.set(chunk, p));
                    }
                    Op::Unmap { chunk } => {
                        prop_assert_eq!(block.set(chunk, NO_PAGE), page.set(chunk, NO_PAGE));
                    }
                    Op::Lose { chunk } => {
                        prop_assert_eq!(block.set(chunk, LOST_PAGE), page.set(chunk, LOST_PAGE));
                    }
                    Op::Move { n, block: b } => {
                        let end = page.end();
                        for (k, c) in (end.saturating_sub(n)..end).enumerate() {
                            if page.get(c) != NO_PAGE {
                                let to = b * PPB + k as u32;
                                prop_assert_eq!(block.set(c, to), page.set(c, to));
                            }
                        }
                    }
                    Op::Truncate { keep } => {
                        let mut a = block.truncate(keep);
                        let mut b = page.truncate(keep);
                        a.sort_unstable();
                        b.sort_unstable();
                        prop_assert_eq!(a, b);
                    }
                }
                same(&block, &page);
            }
        }
    }

    /// MNFS's block copy: a whole block's chunks move to another block's first pages in
    /// one entry (the last block may grow), and anything else is refused untouched.
    #[test]
    fn a_copied_block_moves_as_one_entry() {
        let mut m = FileMap::new(MappingKind::BlockMapped, SMALL);
        for c in 0..70 {
            m.set(c, (c / 32) * 32 * 5 + c % 32);
        }
        assert!(matches!(m, FileMap::Block(_)));
        let before = m.entries();
        // Block 1 (chunks 32..64) to block 40.
        let old = m.move_run(32, 32, 40 * 32).expect("a whole block moves");
        assert_eq!(old, (32..64).map(|c| 5 * 32 + c - 32).collect::<Vec<_>>());
        assert!(matches!(m, FileMap::Block(_)));
        assert_eq!(m.get(40), 40 * 32 + 8);
        assert_eq!(m.get(65), 10 * 32 + 1);
        // The last block grows by pads as it moves.
        assert!(m.move_run(64, 10, 50 * 32).is_some());
        assert_eq!((m.end(), m.get(73)), (74, 50 * 32 + 9));
        // Part of a middle block, or to the middle of a block: refused, map unchanged.
        let now = m.entries();
        assert_eq!(m.move_run(32, 10, 60 * 32), None);
        assert_eq!(m.move_run(0, 32, 60 * 32 + 3), None);
        assert_eq!(m.entries(), now);
        assert_ne!(now, before);
        // A file in its first block.
        let mut f = FileMap::new(MappingKind::BlockMapped, SMALL);
        for c in 0..5 {
            f.set(c, 7 * 32 + c);
        }
        assert_eq!(
            f.move_run(0, 6, 9 * 32),
            Some((7 * 32..7 * 32 + 5).collect())
        );
        assert_eq!((f.get(5), f.end()), (9 * 32 + 5, 6));
    }

    #[test]
    fn a_file_written_in_order_keeps_one_entry_a_block() {
        // 31 data pages and a summary a block, as on a small-page chip; blocks apart.
        let mut m = FileMap::new(MappingKind::BlockMapped, SMALL);
        let mut c = 0;
        for b in [3u32, 9, 4, 20] {
            for k in 0..31 {
                assert_eq!(m.set(c, b * 32 + k), NO_PAGE);
                c += 1;
            }
        }
        match &m {
            FileMap::Block(b) => assert_eq!(b.runs().len(), 4),
            _ => panic!("not block-granular"),
        }
        assert_eq!(m.get(31 + 5), 9 * 32 + 5);
        // A rewrite leaves the shape: the file is page-mapped from then on, same pages.
        let before = m.entries();
        assert_eq!(m.set(40, 7 * 32), 9 * 32 + 9);
        assert!(matches!(m, FileMap::Page(_)));
        let after = m.entries();
        assert_eq!(after.len(), before.len());
        assert_eq!(after[40], (40, 7 * 32));
        // Cleaning moving the half-filled last block keeps the others block-granular, the
        // moved chunks (and later ones) in a page-mapped tail.
        let mut m = FileMap::new(MappingKind::BlockMapped, SMALL);
        for k in 0..40 {
            m.set(k, if k < 31 { k } else { 64 + k - 31 });
        }
        for k in 31..40 {
            assert_eq!(m.set(k, 320 + k - 31), 64 + k - 31);
        }
        assert!(matches!(m, FileMap::Block(_)));
        m.set(40, 329);
        assert_eq!(m.runs(), vec![(0, 0, 31), (31, 320, 10)]);
        assert_eq!(m.mapped(), 41);
        // ... but a rewrite before the last block makes it page-mapped.
        assert_eq!(m.set(3, 900), 3);
        assert!(matches!(m, FileMap::Page(_)));
        // Truncating a block-granular file back into its first block: no heap again.
        let mut m = FileMap::new(MappingKind::BlockMapped, SMALL);
        for k in 0..40 {
            m.set(k, if k < 31 { k } else { 64 + k - 31 });
        }
        assert_eq!(m.truncate(10).len(), 30);
        assert!(matches!(m, FileMap::First(_)));
        assert_eq!(m.get(9), 9);
    }
}
