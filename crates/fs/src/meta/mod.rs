//! Metadata store (DESIGN axis 1): where object headers live and how a mount finds them.
//! The flash log (YAFFS: headers are pages in the log, found by scanning or from a
//! checkpoint) is the first; MiNV's NVRAM store (`minv`: everything in NVRAM, nothing
//! scanned at mount) is the second; YAFFS1's log (`yaffs1_log`: no summaries, no
//! checkpoint, stale pages marked deleted in their spare, a mount that reads every page's
//! tags) is the third, the one the 2006-07 papers measured.

pub mod flash_log;
pub mod minv;
pub mod yaffs1_log;

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
    /// Everything in byte-addressable NVRAM (MiNV); flash holds file data only.
    Nvram,
    /// Object headers are pages of a YAFFS1 log: each page's tags carry its chunk's
    /// version, a page made stale is marked deleted in its spare area, and a mount reads
    /// the tags of every page (no summaries, no checkpoint).
    Yaffs1Log,
}

/// What happened to a flash block, for a store that keeps block status itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockEvent {
    /// Taken for writing: its first page is about to be programmed.
    Opened,
    Erased,
    /// Marked bad.
    Retired,
}

/// What fsck's look at a store found.
#[derive(Debug, Default)]
pub struct StoreCheck {
    pub problems: Vec<String>,
    /// Work the next writable mount will finish (not problems).
    pub notes: Vec<String>,
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

    /// Before `block` is erased (or retired), with every page programmed: a store that
    /// points at pages makes sure none of its pointers still needs one in this block.
    fn before_erase(&mut self, _fs: &mut FileSystem<F>, _block: u32) -> Result<()> {
        Ok(())
    }

    /// Builds the RAM chunk map of `ino`, a file whose map a mount left in the store
    /// (`FileSystem::unloaded`).
    fn load_map(&mut self, _fs: &mut FileSystem<F>, _ino: Ino) -> Result<()> {
        Ok(())
    }

    /// Before a call that leaves `ino`'s header to be written later (its data gets
    /// `chunks` mapped, its attributes change): a store that allocates for header writes
    /// makes sure that write will find room, or fails with NoSpace now, before the call
    /// changes anything.
    fn room_for(
        &mut self,
        _fs: &mut FileSystem<F>,
        _ino: Ino,
        _chunks: Option<std::ops::Range<u32>>,
    ) -> Result<()> {
        Ok(())
    }

    /// Puts `ino` in RAM if the store holds it and RAM does not (`FileSystem::present`).
    fn load_object(&mut self, _fs: &mut FileSystem<F>, _ino: Ino) -> Result<()> {
        Ok(())
    }

    /// Puts directory `dir`'s children in RAM (`FileSystem::expand`).
    fn expand_dir(&mut self, _fs: &mut FileSystem<F>, _dir: Ino) -> Result<()> {
        Ok(())
    }

    /// Puts every object in RAM (`FileSystem::load_all`).
    fn load_all(&mut self, _fs: &mut FileSystem<F>) -> Result<()> {
        Ok(())
    }

    /// `ino` left the file system without a header write of its own (an attribute set
    /// goes with its owner): a store that keeps something per object frees it.
    fn forget(&mut self, _fs: &mut FileSystem<F>, _ino: Ino) -> Result<()> {
        Ok(())
    }

    /// A block was opened for writing, erased or retired.
    fn block_event(
        &mut self,
        _fs: &mut FileSystem<F>,
        _block: u32,
        _event: BlockEvent,
    ) -> Result<()> {
        Ok(())
    }

    /// After a writable mount's repairs.
    fn after_mount(&mut self, _fs: &mut FileSystem<F>) -> Result<()> {
        Ok(())
    }

    /// fsck's checks of the store itself (nothing for the flash log: fsck reads it all).
    fn check(&mut self, _fs: &mut FileSystem<F>) -> StoreCheck {
        StoreCheck::default()
    }

    /// The NVRAM, for a store that has one.
    fn nvram(&self) -> Option<minv::NvramReport> {
        None
    }

    /// The NVRAM itself (tests arm power cuts on it).
    fn nvram_mut(&mut self) -> Option<&mut nandkit_nvram::Nvram> {
        None
    }

    /// Hands the NVRAM back (the file system is gone).
    fn into_nvram(self: Box<Self>) -> Option<nandkit_nvram::Nvram> {
        None
    }
}

pub fn make<F: Flash>(kind: MetadataKind) -> Box<dyn MetadataStore<F>> {
    match kind {
        MetadataKind::FlashLog => Box::new(flash_log::FlashLog),
        MetadataKind::Yaffs1Log => Box::new(yaffs1_log::Yaffs1Log),
        MetadataKind::Nvram => Box::new(NeedsNvram),
    }
}

/// Stands in for the NVRAM store until one is given (mkfs installs it after erasing the
/// device; a mount without the NVRAM is refused before any header is stored).
struct NeedsNvram;

impl<F: Flash> MetadataStore<F> for NeedsNvram {
    fn name(&self) -> &'static str {
        "nvram (missing)"
    }

    fn store_header(
        &mut self,
        _fs: &mut FileSystem<F>,
        _ino: Ino,
        _rec: &mut Record,
    ) -> Result<Option<u32>> {
        Err(crate::error::FsError::NeedsNvram)
    }

    fn recover(&mut self, _fs: &mut FileSystem<F>, _options: &MountOptions) -> Result<MountMethod> {
        Err(crate::error::FsError::NeedsNvram)
    }

    fn unmount(&mut self, _fs: &mut FileSystem<F>) -> Result<bool> {
        Ok(false)
    }
}
