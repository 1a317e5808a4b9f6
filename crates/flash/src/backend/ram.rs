//! Pages in memory. A block's buffer is allocated on its first program and kept after that;
//! a device costs only the memory of the blocks that have ever held data.
//!
//! Erase is O(1): each block remembers how many of its leading pages hold real bytes
//! (`filled`); pages past that read as erased without being touched. This keeps the
//! simulator's host cost per page program near a memcpy.

use super::{BlockMeta, Storage};
use crate::error::FlashError;
use crate::geometry::Geometry;

pub struct RamStorage {
    raw_page_bytes: usize,
    pages_per_block: usize,
    blocks: Vec<Option<Box<[u8]>>>,
    /// Per block: pages `0..filled` hold real bytes in the buffer; the rest are erased.
    filled: Vec<u32>,
    metas: Vec<BlockMeta>,
    /// What any page of an unallocated block reads as.
    erased_page: Box<[u8]>,
    label: Vec<u8>,
}

impl RamStorage {
    pub fn new(geometry: &Geometry) -> Self {
        let raw = geometry.raw_page_bytes();
        Self {
            raw_page_bytes: raw,
            pages_per_block: geometry.pages_per_block as usize,
            blocks: (0..geometry.blocks_per_chip).map(|_| None).collect(),
            filled: vec![0; geometry.blocks_per_chip as usize],
            metas: vec![BlockMeta::default(); geometry.blocks_per_chip as usize],
            erased_page: vec![0xFF; raw].into_boxed_slice(),
            label: vec![0xFF; super::LABEL_BYTES],
        }
    }

    fn range(&self, page: u32) -> std::ops::Range<usize> {
        let start = page as usize * self.raw_page_bytes;
        start..start + self.raw_page_bytes
    }
}

impl RamStorage {
    /// Makes pages `filled..page` real erased bytes and returns the block buffer, so that
    /// `page` can be written. The caller sets `filled` past `page`.
    fn prepare(&mut self, block: u32, page: u32) -> &mut [u8] {
        let (raw, ppb) = (self.raw_page_bytes, self.pages_per_block);
        let filled = self.filled[block as usize] as usize;
        // Zeroed allocation is lazy (calloc); the bytes mean nothing until `filled` says so.
        let bytes = self.blocks[block as usize]
            .get_or_insert_with(|| vec![0; raw * ppb].into_boxed_slice());
        if filled < page as usize {
            bytes[filled * raw..page as usize * raw].fill(0xFF);
        }
        bytes
    }
}

impl Storage for RamStorage {
    fn label(&self) -> Vec<u8> {
        self.label.clone()
    }

    fn set_label(&mut self, bytes: &[u8]) -> Result<(), FlashError> {
        self.label = bytes.to_vec();
        self.label.resize(super::LABEL_BYTES, 0xFF);
        Ok(())
    }

    fn heap_bytes(&self) -> usize {
        let block = self.raw_page_bytes * self.pages_per_block;
        self.blocks.iter().filter(|b| b.is_some()).count() * block
    }

    fn page(&self, block: u32, page: u32) -> &[u8] {
        match &self.blocks[block as usize] {
            Some(bytes) if page < self.filled[block as usize] => &bytes[self.range(page)],
            _ => &self.erased_page,
        }
    }

    fn page_mut(&mut self, block: u32, page: u32) -> &mut [u8] {
        let range = self.range(page);
        let filled = self.filled[block as usize];
        let bytes = self.prepare(block, page);
        if page >= filled {
            bytes[range.clone()].fill(0xFF);
        }
        let b = block as usize;
        self.filled[b] = self.filled[b].max(page + 1);
        &mut self.blocks[b].as_mut().expect("prepared")[range]
    }

    fn write_page(&mut self, block: u32, page: u32, data: &[u8], oob: &[u8]) {
        let range = self.range(page);
        let bytes = &mut self.prepare(block, page)[range];
        let (d, o) = bytes.split_at_mut(data.len());
        d.copy_from_slice(data);
        o.copy_from_slice(oob);
        let b = block as usize;
        self.filled[b] = self.filled[b].max(page + 1);
    }

    fn erase(&mut self, block: u32) {
        self.filled[block as usize] = 0;
    }

    fn meta(&self, block: u32) -> BlockMeta {
        self.metas[block as usize]
    }

    fn set_meta(&mut self, block: u32, meta: BlockMeta) {
        self.metas[block as usize] = meta;
    }

    fn flush(&mut self) -> Result<(), FlashError> {
        Ok(())
    }
}
