//! Where the bits live. A backend stores raw pages (data followed by OOB) and a small record
//! per erase block; it knows no NAND rules. Those live in [`crate::chip`], above it.

pub mod file;
pub mod ram;

use crate::error::FlashError;

/// Persistent per-block state kept beside the pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockMeta {
    /// Erase attempts on this block since manufacture.
    pub erase_count: u32,
    /// Next page that may be programmed (pages below it are programmed, or torn).
    pub write_ptr: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
}

/// Bad since manufacture (the factory bad block marker).
pub const FLAG_FACTORY_BAD: u32 = 1 << 0;
/// Marked bad in service (worn out, failed program or erase).
pub const FLAG_GROWN_BAD: u32 = 1 << 1;
/// An erase was interrupted: the block holds half-erased cells and must be erased again
/// before anything can be programmed into it.
pub const FLAG_ERASE_TORN: u32 = 1 << 2;

impl BlockMeta {
    pub fn is_bad(&self) -> bool {
        self.flags & (FLAG_FACTORY_BAD | FLAG_GROWN_BAD) != 0
    }
}

/// Bytes of a chip's label (see [`Storage::label`]).
pub const LABEL_BYTES: usize = 512;

/// Raw storage for the pages and block records of one chip.
pub trait Storage: Send {
    /// The raw bytes (data then OOB) of one page. Erased bytes read as 0xFF.
    fn page(&self, block: u32, page: u32) -> &[u8];
    /// Mutable raw bytes of one page.
    fn page_mut(&mut self, block: u32, page: u32) -> &mut [u8];
    /// Stores a whole page: `data` then `oob`. Same as writing through `page_mut`; backends
    /// may do it faster because nothing of the old bytes survives.
    fn write_page(&mut self, block: u32, page: u32, data: &[u8], oob: &[u8]) {
        let raw = self.page_mut(block, page);
        let (d, o) = raw.split_at_mut(data.len());
        d.copy_from_slice(data);
        o.copy_from_slice(oob);
    }
    /// Sets every byte of a block to 0xFF.
    fn erase(&mut self, block: u32);
    fn meta(&self, block: u32) -> BlockMeta;
    fn set_meta(&mut self, block: u32, meta: BlockMeta);
    /// The chip's label: [`LABEL_BYTES`] kept beside its pages, as a chip's OTP pages are,
    /// for the array above to record there what it needs to trust the chip (the parity
    /// layer's membership record). All 0xFF on a new chip; empty where the storage keeps no
    /// label (the chips of a single page file).
    fn label(&self) -> Vec<u8>;
    /// Replaces the label (durably, before returning, for a file).
    fn set_label(&mut self, bytes: &[u8]) -> Result<(), FlashError>;
    /// True when the storage has vanished under the device (a chip's own image file was
    /// removed): the chip has failed.
    fn gone(&self) -> bool {
        false
    }
    /// Makes everything written so far durable (for a file: msync).
    fn flush(&mut self) -> Result<(), FlashError>;
    /// Heap the stored pages take (a RAM backend's block buffers; a file image's are in the
    /// page cache, not the heap): what a bench leaves out of a file system's heap.
    fn heap_bytes(&self) -> usize {
        0
    }
}
