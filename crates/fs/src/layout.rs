//! How the file system uses a flash geometry: which tag layout fits the free OOB bytes,
//! where the tags sit, page numbers, and how pages are laid out in bytes.

use nandkit_flash::{BlockAddr, Geometry, PageAddr};

use crate::error::{FsError, Result};
use crate::format::tags::{self, DataTags, TagLayout, Tags};

/// Geometry as the file system sees it. Page numbers (`pno`) count pages over the whole
/// device: `block * pages_per_block + page`. An array of chips appears as one chip (its
/// striped view), so the file system's block is a block of every chip.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub geometry: Geometry,
    pub tags: TagLayout,
    /// Where the tags start in the OOB (after the bad-block marker).
    pub tag_offset: usize,
    /// Bytes of file data per page: always the whole page.
    pub chunk_bytes: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
}

impl Layout {
    pub fn new(geometry: Geometry) -> Result<Layout> {
        let free = geometry.oob_free_bytes();
        let tags = TagLayout::for_free_oob(free).ok_or_else(|| {
            FsError::NotFormatted(format!(
                "the OOB leaves {free} free bytes after the bad-block marker and ECC; the \
                 file system needs at least {}",
                tags::SMALL_TAG_BYTES
            ))
        })?;
        if geometry.chips != 1 {
            // Blocks numbered chip after chip would leave every chip but one idle: an
            // array is used through its striped view (`nandkit_flash::StripedFlash`),
            // which presents one chip whose block is a block of every chip.
            return Err(FsError::NotFormatted(format!(
                "the file system runs on one device; present the {} chips through their \
                 striped view",
                geometry.chips
            )));
        }
        if geometry.pages_per_block < 4 || geometry.page_size_bytes < 512 {
            return Err(FsError::NotFormatted(
                "the file system needs pages of at least 512 bytes and 4 pages per block".into(),
            ));
        }
        if geometry.pages_per_block > crate::blocks::MAX_PAGES_PER_BLOCK {
            return Err(FsError::NotFormatted(format!(
                "{} pages per block (over all chips of an array): the file system counts a \
                 block's pages in 16 bits, at most {}",
                geometry.pages_per_block,
                crate::blocks::MAX_PAGES_PER_BLOCK
            )));
        }
        Ok(Layout {
            geometry,
            tags,
            tag_offset: geometry.oob_free_offset(),
            chunk_bytes: geometry.page_size_bytes,
            pages_per_block: geometry.pages_per_block,
            blocks: geometry.total_blocks() as u32,
        })
    }

    pub fn total_pages(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.pages_per_block)
    }

    pub fn block_addr(&self, block: u32) -> BlockAddr {
        let per_chip = self.geometry.blocks_per_chip;
        BlockAddr::new(block / per_chip, block % per_chip)
    }

    /// What a file map needs to know of this device.
    pub fn map_shape(&self) -> crate::mapping::MapShape {
        crate::mapping::MapShape {
            pages_per_block: self.pages_per_block,
            pages: self.blocks * self.pages_per_block,
        }
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

    /// Lays out a page: the data (with a partial chunk's length in band in the small
    /// layout), 0xFF padding, and the tags in the OOB.
    pub fn encode_page(&self, tags: &Tags, data: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let g = self.geometry;
        let mut page = vec![0xFF; g.page_size_bytes as usize];
        let mut oob = vec![0xFF; g.oob_size_bytes as usize];
        page[..data.len()].copy_from_slice(data);
        if let (TagLayout::Small, Tags::Data(DataTags { n_bytes, .. })) = (self.tags, tags) {
            let n = n_bytes.unwrap_or(data.len() as u32);
            if n < g.page_size_bytes {
                tags::put_inband_len(&mut page, n);
            }
        }
        let t = tags.encode(self.tags, g.page_size_bytes);
        oob[self.tag_offset..self.tag_offset + t.len()].copy_from_slice(&t);
        (page, oob)
    }

    /// The tag bytes of a page's OOB.
    pub fn tag_bytes<'a>(&self, oob: &'a [u8]) -> &'a [u8] {
        oob.get(self.tag_offset..).unwrap_or(&[])
    }

    pub fn decode_tags(&self, oob: &[u8]) -> tags::TagRead {
        Tags::decode(
            self.tag_bytes(oob),
            self.tags,
            self.geometry.page_size_bytes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(pages_per_block: u32) -> Geometry {
        Geometry {
            page_size_bytes: 2048,
            oob_size_bytes: 64,
            pages_per_block,
            blocks_per_chip: 4,
            chips: 1,
            oob_ecc_bytes: 0,
        }
    }

    #[test]
    fn refuses_blocks_whose_pages_the_block_table_cannot_count() {
        let max = crate::blocks::MAX_PAGES_PER_BLOCK;
        assert_eq!(Layout::new(geometry(max)).unwrap().pages_per_block, max);
        match Layout::new(geometry(max + 1)) {
            Err(FsError::NotFormatted(why)) => assert!(why.contains("16 bits"), "{why}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a block of {} pages was accepted", max + 1),
        }
    }
}
