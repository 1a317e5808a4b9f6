//! Data mapping (DESIGN axis 2): where each chunk of a file lives on flash. Each file owns
//! one [`ChunkMap`]; the kind is chosen at mkfs (`FsConfig::mapping`). The page-mapped log
//! (YAFFS) is the first; a block-mapped map (MNFS: a file owns whole erase blocks) slots in
//! beside it.

pub mod page_mapped;

use serde::{Deserialize, Serialize};

/// Which data mapping a file system uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingKind {
    /// Any chunk in any page, one map entry per chunk (YAFFS).
    #[default]
    PageMapped,
}

/// A file's chunk index to flash page map. Page numbers `NO_PAGE` (a hole) and
/// `LOST_PAGE` (lost to a media error) are never "mapped pages".
pub trait ChunkMap: Send {
    /// The page of `chunk`, or `NO_PAGE`.
    fn get(&self, chunk: u32) -> u32;
    /// Maps `chunk` to `pno`; returns what it was mapped to before.
    fn set(&mut self, chunk: u32, pno: u32) -> u32;
    /// Drops every chunk from `keep` on; returns the mapped pages dropped.
    fn truncate(&mut self, keep: u32) -> Vec<u32>;
    /// (chunk, page) of every entry that is not a hole, in chunk order.
    fn entries(&self) -> Vec<(u32, u32)>;
    /// Chunks mapped to real pages (for `stat`'s block count).
    fn mapped(&self) -> u64;
}

pub fn new_map(kind: MappingKind) -> Box<dyn ChunkMap> {
    match kind {
        MappingKind::PageMapped => Box::<page_mapped::PageMap>::default(),
    }
}
