//! The flash log metadata store (YAFFS): each header is a page in the log, tagged with its
//! object; mount takes the checkpoint a clean unmount left (found through the anchor
//! blocks), else scans every block (one summary page per full block).

use nandkit_flash::Flash;

use super::MetadataStore;
use crate::error::Result;
use crate::format::Record;
use crate::fs::{FileSystem, MountMethod, MountOptions};
use crate::types::Ino;

pub struct FlashLog;

impl<F: Flash> MetadataStore<F> for FlashLog {
    fn name(&self) -> &'static str {
        "flash-log"
    }

    fn store_header(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &mut Record,
    ) -> Result<Option<u32>> {
        fs.write_header_page(ino, rec).map(Some)
    }

    fn recover(&mut self, fs: &mut FileSystem<F>, options: &MountOptions) -> Result<MountMethod> {
        if fs.block_placed() {
            // MNFS: no checkpoint; the iBAT is rebuilt from the spare areas.
            fs.reset_state();
            fs.scan_ibat()?;
            return Ok(MountMethod::Scan);
        }
        if !options.force_scan && fs.load_checkpoint()? {
            return Ok(MountMethod::Checkpoint);
        }
        // Start from nothing: a checkpoint refused half-way may have left state behind.
        fs.reset_state();
        fs.scan()?;
        Ok(MountMethod::Scan)
    }

    fn unmount(&mut self, fs: &mut FileSystem<F>) -> Result<bool> {
        if fs.config.checkpoint {
            return fs.write_checkpoint();
        }
        Ok(false)
    }
}
