//! A nandkit device as littlefs's block device: one littlefs block is one erase block, one
//! read or program unit is one page, and littlefs's erase is a block erase.
//!
//! The chip enforces NAND's rules as it does for nandkit: a page is programmed once per
//! erase, and a block's pages in order. littlefs is not told about them and is not
//! helped around them: a program the chip refuses is an I/O error to littlefs, and the
//! refusal is kept (`BlockDevice::violations`) as a finding. An uncorrectable read is an
//! error too: by default `LFS_ERR_CORRUPT`, the code littlefs treats as "this data is
//! damaged" (a commit it stops reading at, as it does at a bad CRC), which is what a page
//! torn by a power cut reads as on NAND with ECC; `BlockDevice::uncorrectable` can make it
//! `LFS_ERR_IO`, which littlefs passes up instead. littlefs has no bad-block handling, so the peers run on devices without
//! factory bad blocks.

use std::ffi::{c_int, c_void};

use littlefs2_sys as ll;
use nandkit_flash::{BlockAddr, Flash, FlashError, Geometry, PageAddr};

/// The device and what happened on it, reached from littlefs's callbacks through
/// `lfs_config::context`.
pub struct BlockDevice<F: Flash> {
    pub dev: F,
    geometry: Geometry,
    /// Programs the chip refused (NAND rule violations), in the order they happened.
    pub violations: Vec<String>,
    /// The last error the device returned, for the caller to report after littlefs's own
    /// error code.
    pub last_error: Option<FlashError>,
    /// The littlefs error code an uncorrectable read returns.
    pub uncorrectable: c_int,
    page: Vec<u8>,
    oob: Vec<u8>,
}

impl<F: Flash> BlockDevice<F> {
    pub fn new(dev: F) -> Self {
        let geometry = dev.geometry();
        Self {
            page: vec![0; geometry.page_size_bytes as usize],
            oob: vec![0xFF; geometry.oob_size_bytes as usize],
            dev,
            geometry,
            violations: Vec::new(),
            last_error: None,
            uncorrectable: ll::lfs_error_LFS_ERR_CORRUPT,
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    pub fn page_size(&self) -> u32 {
        self.geometry.page_size_bytes
    }

    pub fn block_size(&self) -> u32 {
        self.geometry.page_size_bytes * self.geometry.pages_per_block
    }

    pub fn block_count(&self) -> u32 {
        self.geometry.blocks_per_chip * self.geometry.chips
    }

    fn block_addr(&self, block: u32) -> BlockAddr {
        BlockAddr::new(
            block / self.geometry.blocks_per_chip,
            block % self.geometry.blocks_per_chip,
        )
    }

    fn page_addr(&self, block: u32, page: u32) -> PageAddr {
        let b = self.block_addr(block);
        PageAddr::new(b.chip, b.block, page)
    }

    /// littlefs's unit checks: whole pages inside one block.
    fn span(&self, block: u32, off: u32, size: u32) -> Option<(u32, u32)> {
        let p = self.page_size();
        let fits = block < self.block_count()
            && off % p == 0
            && size % p == 0
            && off
                .checked_add(size)
                .is_some_and(|end| end <= self.block_size());
        fits.then(|| (off / p, size / p))
    }

    fn fail(&mut self, e: FlashError) -> c_int {
        if matches!(e, FlashError::NotErased(_) | FlashError::OutOfOrder { .. }) {
            self.violations.push(e.to_string());
        }
        let code = match e {
            FlashError::Uncorrectable { .. } => self.uncorrectable,
            _ => ll::lfs_error_LFS_ERR_IO,
        };
        self.last_error = Some(e);
        code
    }

    /// littlefs's read: whole pages of one block. 0, or a negative littlefs error code.
    pub fn read(&mut self, block: u32, off: u32, buf: &mut [u8]) -> c_int {
        let Some((first, pages)) = self.span(block, off, buf.len() as u32) else {
            return ll::lfs_error_LFS_ERR_INVAL;
        };
        let p = self.page_size() as usize;
        for (i, out) in (first..first + pages).zip(buf.chunks_exact_mut(p)) {
            let addr = self.page_addr(block, i);
            if let Err(e) = self.dev.read_page(addr, out, &mut self.oob) {
                return self.fail(e);
            }
        }
        0
    }

    /// littlefs's program: whole pages of one block. 0, or a negative littlefs error code.
    pub fn prog(&mut self, block: u32, off: u32, data: &[u8]) -> c_int {
        let Some((first, pages)) = self.span(block, off, data.len() as u32) else {
            return ll::lfs_error_LFS_ERR_INVAL;
        };
        let p = self.page_size() as usize;
        // The OOB is left erased: littlefs keeps nothing there (the chip adds its ECC).
        self.oob.fill(0xFF);
        for (i, chunk) in (first..first + pages).zip(data.chunks_exact(p)) {
            let addr = self.page_addr(block, i);
            self.page.copy_from_slice(chunk);
            if let Err(e) = self.dev.program_page(addr, &self.page, &self.oob) {
                return self.fail(e);
            }
        }
        0
    }

    /// littlefs's erase: one erase block. 0, or a negative littlefs error code.
    pub fn erase(&mut self, block: u32) -> c_int {
        if block >= self.block_count() {
            return ll::lfs_error_LFS_ERR_INVAL;
        }
        match self.dev.erase_block(self.block_addr(block)) {
            Ok(()) => 0,
            Err(e) => self.fail(e),
        }
    }
}

/// The device behind `c`.
///
/// # Safety
/// `c` is the `lfs_config` a [`crate::Littlefs`] built, whose context points at its
/// `BlockDevice<F>`, alive and not otherwise borrowed while littlefs runs.
unsafe fn device<'a, F: Flash>(c: *const ll::lfs_config) -> &'a mut BlockDevice<F> {
    &mut *((*c).context as *mut BlockDevice<F>)
}

pub(crate) unsafe extern "C" fn read_cb<F: Flash>(
    c: *const ll::lfs_config,
    block: ll::lfs_block_t,
    off: ll::lfs_off_t,
    buffer: *mut c_void,
    size: ll::lfs_size_t,
) -> c_int {
    let buf = std::slice::from_raw_parts_mut(buffer as *mut u8, size as usize);
    device::<F>(c).read(block, off, buf)
}

pub(crate) unsafe extern "C" fn prog_cb<F: Flash>(
    c: *const ll::lfs_config,
    block: ll::lfs_block_t,
    off: ll::lfs_off_t,
    buffer: *const c_void,
    size: ll::lfs_size_t,
) -> c_int {
    let data = std::slice::from_raw_parts(buffer as *const u8, size as usize);
    device::<F>(c).prog(block, off, data)
}

pub(crate) unsafe extern "C" fn erase_cb<F: Flash>(
    c: *const ll::lfs_config,
    block: ll::lfs_block_t,
) -> c_int {
    device::<F>(c).erase(block)
}

/// Programs are durable when they return (the simulated chip has no write cache).
pub(crate) unsafe extern "C" fn sync_cb(_c: *const ll::lfs_config) -> c_int {
    0
}
