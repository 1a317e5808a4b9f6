//! The YAFFS1 log metadata store: headers are pages of the log, as in `flash_log`, but the
//! log is YAFFS1's: no block summaries, no checkpoint; every page's tags name its object
//! and chunk and carry the chunk's version (one more than the copy it replaces); a page
//! made stale gets a deletion marker in its spare area (a second, partial program of the
//! spare, which small-page chips allow); a mount reads the tags of every page
//! (`scan_every_page`). This is the YAFFS the MNFS, MiNV and MODA papers measured on
//! small-page NAND; `flash_log` is the modern YAFFS2 way.

use nandkit_flash::Flash;

use super::MetadataStore;
use crate::error::Result;
use crate::format::Record;
use crate::fs::{FileSystem, MountMethod, MountOptions};
use crate::types::Ino;

pub struct Yaffs1Log;

impl<F: Flash> MetadataStore<F> for Yaffs1Log {
    fn name(&self) -> &'static str {
        "yaffs1-log"
    }

    fn store_header(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &mut Record,
    ) -> Result<Option<u32>> {
        fs.write_header_page(ino, rec).map(Some)
    }

    fn recover(&mut self, fs: &mut FileSystem<F>, _options: &MountOptions) -> Result<MountMethod> {
        fs.reset_state();
        fs.scan_every_page()?;
        Ok(MountMethod::Scan)
    }

    fn unmount(&mut self, fs: &mut FileSystem<F>) -> Result<bool> {
        // No checkpoint: YAFFS1 had none. The deletion markers still owed are written, so
        // the next mount finds no stale page unmarked.
        fs.mark_stale_pages()?;
        Ok(false)
    }
}
