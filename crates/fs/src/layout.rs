//! How the file system uses a flash geometry: chunk size, where tags live, page numbers.

use nandkit_flash::{BlockAddr, Geometry, PageAddr};

use crate::format::TAG_BYTES;

/// OOB bytes kept free at the start of the spare area for the bad block marker.
pub const OOB_TAG_OFFSET: usize = 2;

/// Where a page's tags are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagPlace {
    /// In the OOB, after the bad block marker bytes (YAFFS2 on large-page NAND).
    Oob,
    /// At the end of the data area, for OOBs too small to hold them (small-page NAND):
    /// each chunk then holds `page_size - TAG_BYTES` bytes of data.
    InBand,
}

/// Geometry as the file system sees it. Page numbers (`pno`) count pages over the whole
/// device: `block * pages_per_block + page`, with blocks numbered chip after chip.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub geometry: Geometry,
    pub tags: TagPlace,
    /// Bytes of file data per page.
    pub chunk_bytes: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
}

impl Layout {
    pub fn new(geometry: Geometry) -> Layout {
        let tags = if geometry.oob_size_bytes as usize >= OOB_TAG_OFFSET + TAG_BYTES {
            TagPlace::Oob
        } else {
            TagPlace::InBand
        };
        let chunk_bytes = match tags {
            TagPlace::Oob => geometry.page_size_bytes,
            TagPlace::InBand => geometry.page_size_bytes - TAG_BYTES as u32,
        };
        Layout {
            geometry,
            tags,
            chunk_bytes,
            pages_per_block: geometry.pages_per_block,
            blocks: geometry.total_blocks() as u32,
        }
    }

    pub fn total_pages(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.pages_per_block)
    }

    pub fn block_addr(&self, block: u32) -> BlockAddr {
        let per_chip = self.geometry.blocks_per_chip;
        BlockAddr::new(block / per_chip, block % per_chip)
    }

    pub fn page_addr(&self, pno: u32) -> PageAddr {
        self.block_addr(pno / self.pages_per_block)
            .page(pno % self.pages_per_block)
    }

    pub fn pno(&self, block: u32, page: u32) -> u32 {
        block * self.pages_per_block + page
    }

    pub fn block_of(&self, pno: u32) -> u32 {
        pno / self.pages_per_block
    }
}
