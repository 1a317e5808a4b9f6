//! Metadata store (DESIGN axis 1): where object headers live and how a mount finds them.
//! The flash log (YAFFS: headers are pages in the log, found by scanning or from a
//! checkpoint) is the first; MiNV's NVRAM store slots in beside it.

pub mod flash_log;

use nandkit_flash::Flash;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::format::Record;
use crate::fs::{FileSystem, MountMethod, MountOptions};
use crate::types::Ino;

/// Which metadata store a file system uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetadataKind {
    /// Object headers are pages of the flash log.
    #[default]
    FlashLog,
}

pub trait MetadataStore<F: Flash>: Send + Sync {
    fn name(&self) -> &'static str;
    /// Makes `rec` the durable header of `ino`, giving it its version. Returns the flash
    /// page it now occupies (`None` for a store that keeps headers off flash).
    fn store_header(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &mut Record,
    ) -> Result<Option<u32>>;
    /// Rebuilds the file system's RAM state at mount.
    fn recover(&mut self, fs: &mut FileSystem<F>, options: &MountOptions) -> Result<MountMethod>;
    /// At clean unmount, after everything is flushed: whatever makes the next mount fast.
    /// Returns whether it was done (a checkpoint written).
    fn unmount(&mut self, fs: &mut FileSystem<F>) -> Result<bool>;
}

pub fn make<F: Flash>(kind: MetadataKind) -> Box<dyn MetadataStore<F>> {
    match kind {
        MetadataKind::FlashLog => Box::new(flash_log::FlashLog),
    }
}
