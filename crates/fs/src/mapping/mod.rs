//! Data mapping (DESIGN axis 2): where each chunk of a file lives on flash. The kind is
//! chosen at mkfs (`FsConfig::mapping`); each file holds a [`FileMap`] of that kind. The
//! page-mapped log (YAFFS) is the first; a block-mapped map (MNFS: a file owns whole erase
//! blocks) slots in beside it as another variant.

pub mod page_mapped;

use serde::{Deserialize, Serialize};

/// Which data mapping a file system uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingKind {
    /// Any chunk in any page, YAFFS style.
    #[default]
    PageMapped,
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
    Page(page_mapped::PageMap),
}

impl FileMap {
    pub fn new(kind: MappingKind) -> Self {
        match kind {
            MappingKind::PageMapped => FileMap::Page(page_mapped::PageMap::default()),
        }
    }

    fn inner(&self) -> &dyn ChunkMap {
        match self {
            FileMap::Page(m) => m,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn ChunkMap {
        match self {
            FileMap::Page(m) => m,
        }
    }

    pub fn get(&self, chunk: u32) -> u32 {
        self.inner().get(chunk)
    }
    pub fn set(&mut self, chunk: u32, pno: u32) -> u32 {
        self.inner_mut().set(chunk, pno)
    }
    pub fn truncate(&mut self, keep: u32) -> Vec<u32> {
        self.inner_mut().truncate(keep)
    }
    pub fn runs(&self) -> Vec<(u32, u32, u32)> {
        self.inner().runs()
    }
    pub fn mapped(&self) -> u64 {
        self.inner().mapped()
    }
    pub fn holes_in(&self, from: u32, to: u32) -> u64 {
        self.inner().holes_in(from, to)
    }
    pub fn end(&self) -> u32 {
        self.inner().end()
    }

    /// (chunk, page) of every mapped or lost chunk, in chunk order.
    pub fn entries(&self) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for (c, p, n) in self.runs() {
            for k in 0..n {
                let page = if p == crate::object::LOST_PAGE {
                    p
                } else {
                    p + k
                };
                out.push((c + k, page));
            }
        }
        out
    }
}
