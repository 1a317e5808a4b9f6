//! LEB I/O for the UBIFS that writes: a device whose erase blocks are the LEBs of a UBI
//! volume (one chip's, or every chip's striped: `StripedFlash` over UBI) and whose page is
//! the min. I/O unit. Reads take the pages a node covers; writes program whole pages, in
//! one batch so a striped device runs its chips side by side; an unmap erases the LEB
//! (UBI maps it afresh on the next write).

use super::image::UbifsError;
use super::volume::LebSource;
use nandkit_flash::{BlockAddr, Command, Flash, FlashError, PageAddr, Reply};
use std::rc::Rc;

/// Flash operations UBIFS issued.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct IoStats {
    pub pages_read: u64,
    pub pages_written: u64,
    pub lebs_unmapped: u64,
}

pub struct LebIo<D: Flash> {
    pub dev: D,
    page: usize,
    pages_per_leb: u32,
    lebs: u32,
    pub stats: IoStats,
}

impl<D: Flash> LebIo<D> {
    pub fn new(dev: D) -> Result<Self, UbifsError> {
        let g = dev.geometry();
        if g.chips != 1 {
            return Err(UbifsError::Unsupported(
                "UBIFS runs on one UBI volume (a chip, or chips striped); an array with parity \
                 presents its chips apart"
                    .into(),
            ));
        }
        Ok(LebIo {
            page: g.page_size_bytes as usize,
            pages_per_leb: g.pages_per_block,
            lebs: g.blocks_per_chip,
            dev,
            stats: IoStats::default(),
        })
    }

    pub fn min_io(&self) -> usize {
        self.page
    }

    pub fn lebs(&self) -> u32 {
        self.lebs
    }

    fn addr(&self, lnum: u32, page: u32) -> PageAddr {
        PageAddr {
            chip: 0,
            block: lnum,
            page,
        }
    }

    /// Reads pages `first..first + count` of a LEB; `None` if one cannot be read (ECC).
    fn read_pages(
        &mut self,
        lnum: u32,
        first: u32,
        count: u32,
    ) -> Result<Option<Vec<u8>>, FlashError> {
        let batch = (first..first + count)
            .map(|p| Command::Read {
                addr: self.addr(lnum, p),
            })
            .collect();
        let mut out = Vec::with_capacity(count as usize * self.page);
        for c in self.dev.submit(batch) {
            self.stats.pages_read += 1;
            match c.result {
                Ok(Reply::Read { data, .. }) => out.extend_from_slice(&data),
                Ok(_) => unreachable!("a read answers with data"),
                Err(FlashError::Uncorrectable { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(out))
    }

    /// Programs `data` (whole pages) into a LEB from page `first`.
    pub fn program(&mut self, lnum: u32, first: u32, data: &[u8]) -> Result<(), UbifsError> {
        debug_assert_eq!(data.len() % self.page, 0);
        let oob = vec![0xFF; self.dev.geometry().oob_size_bytes as usize];
        let batch = data
            .chunks(self.page)
            .enumerate()
            .map(|(i, d)| Command::Program {
                addr: self.addr(lnum, first + i as u32),
                data: d.to_vec(),
                oob: oob.clone(),
            })
            .collect();
        for c in self.dev.submit(batch) {
            self.stats.pages_written += 1;
            c.result?;
        }
        Ok(())
    }

    /// Replaces a LEB's contents atomically (UBI's LEB change): `data` is whole pages.
    pub fn change(&mut self, lnum: u32, data: &[u8]) -> Result<(), UbifsError> {
        debug_assert_eq!(data.len() % self.page, 0);
        self.stats.pages_written += (data.len() / self.page) as u64;
        self.dev.change_block(
            BlockAddr {
                chip: 0,
                block: lnum,
            },
            data,
        )?;
        Ok(())
    }

    /// Unmaps a LEB: its contents are gone, it reads erased, it can be written from page 0.
    pub fn unmap(&mut self, lnum: u32) -> Result<(), UbifsError> {
        self.stats.lebs_unmapped += 1;
        self.dev.erase_block(BlockAddr {
            chip: 0,
            block: lnum,
        })?;
        Ok(())
    }
}

impl<D: Flash> LebSource for LebIo<D> {
    fn leb_size(&self) -> usize {
        self.page * self.pages_per_leb as usize
    }

    fn leb_count(&self) -> u32 {
        self.lebs
    }

    fn read_leb(&mut self, lnum: u32) -> Result<Option<Rc<Vec<u8>>>, FlashError> {
        Ok(self.read_pages(lnum, 0, self.pages_per_leb)?.map(Rc::new))
    }

    fn read_leb_lossy(&mut self, lnum: u32) -> Result<Vec<u8>, FlashError> {
        // One batch (a striped LEB's pages run on all chips at once); a page that fails its
        // ECC reads as zeros.
        let batch = (0..self.pages_per_leb)
            .map(|p| Command::Read {
                addr: self.addr(lnum, p),
            })
            .collect();
        let mut out = Vec::with_capacity(self.leb_size());
        for c in self.dev.submit(batch) {
            self.stats.pages_read += 1;
            match c.result {
                Ok(Reply::Read { data, .. }) => out.extend_from_slice(&data),
                Ok(_) => unreachable!("a read answers with data"),
                Err(FlashError::Uncorrectable { .. }) => out.resize(out.len() + self.page, 0),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn read(&mut self, lnum: u32, offs: usize, len: usize) -> Result<Option<Vec<u8>>, FlashError> {
        let first = offs / self.page;
        let last = (offs + len).div_ceil(self.page);
        Ok(self
            .read_pages(lnum, first as u32, (last - first) as u32)?
            .map(|b| b[offs - first * self.page..offs - first * self.page + len].to_vec()))
    }
}
