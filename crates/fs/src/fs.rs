//! The file system: state, mkfs, mount, unmount and the attribute calls. The other calls
//! live beside this file (`namespace`, `file_io`, `xattr`), lazily loaded details in
//! `details`, the flash write path in `write_path`, reads in `read_path`, cleaning in
//! `cleaning`, mount-time recovery in `scan`, `rebuild` and `checkpoint`, the anchor blocks
//! in `anchor`, checks in `fsck`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nandkit_flash::Flash;
use serde::Serialize;

use crate::alloc::{self, Allocator};
use crate::anchor::Anchors;
use crate::blocks::{BlockState, BlockTable};
use crate::clean::{self, Cleaner};
use crate::clock::{Clock, SystemClock};
use crate::config::FsConfig;
use crate::error::{FsError, Result};
use crate::format::record::{Name, Record, Time};
use crate::format::summary::SummaryEntry;
use crate::layout::Layout;
use crate::meta::MetadataStore;
use crate::object::{Details, Object, WriteCache, NO_PAGE};
use crate::types::{Attr, Ino, Kind, SetAttr, StatFs, NAME_MAX, ROOT_INO};

/// Why every call fails once the device lost power under the file system.
pub(crate) const POWER_LOST: &str = "power lost; remount";

/// How to mount.
#[derive(Clone)]
pub struct MountOptions {
    pub read_only: bool,
    /// Ignore a checkpoint and scan the whole device.
    pub force_scan: bool,
    pub clock: Arc<dyn Clock>,
    /// When reads update access times.
    pub atime: AtimePolicy,
}

impl Default for MountOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            force_scan: false,
            clock: Arc::new(SystemClock),
            atime: AtimePolicy::default(),
        }
    }
}

/// When a read (of a file, or a directory listing) updates the access time. The new time
/// goes to flash with the object's next header write (at the next fsync, close, commit or
/// unmount), so it costs at most one header page per object per such write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum AtimePolicy {
    /// Linux's default: only when the access time is not newer than the modification or
    /// change time, or is a day old: about one header write per file read per day.
    #[default]
    Relatime,
    /// Every read (`strictatime`): a header write per file read.
    Strict,
    /// Never (`noatime`).
    Never,
}

/// How the last mount found its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MountMethod {
    Format,
    Scan,
    Checkpoint,
    /// From the NVRAM (MiNV): nothing read on flash.
    Nvram,
}

/// What the file system has done since mount.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FsStats {
    pub data_pages_written: u64,
    pub header_pages_written: u64,
    pub summary_pages_written: u64,
    pub checkpoint_pages_written: u64,
    /// File system record copies and checkpoint pointers written to the anchor blocks.
    pub anchor_pages_written: u64,
    /// Valid pages moved by cleaning.
    pub pages_copied: u64,
    /// Block-placed data (MNFS): blocks copied for an overwrite, a shrink or a failing
    /// block, and the pages those copies programmed (moved chunks and pads).
    pub blocks_copied: u64,
    pub block_copy_pages: u64,
    pub blocks_cleaned: u64,
    pub blocks_retired: u64,
    /// Blocks given a summary before they were full (after a crash, or by age).
    pub blocks_sealed: u64,
    pub scrubs: u64,
    /// Pages skipped because they were not erased (torn by an earlier power cut).
    pub pages_spoiled: u64,
    /// Bytes of user data accepted by `write`.
    pub user_bytes_written: u64,
    /// Header pages read to load names and attributes on demand.
    pub details_loaded: u64,
    /// YAFFS1: deletion markers programmed into the spare areas of stale pages.
    pub deletion_markers_written: u64,
    /// YAFFS1: OOB reads of a chunk's previous copy, for its version.
    pub version_reads: u64,
    /// OOB reads of victim searches without block status in RAM
    /// (`FsConfig::yaffs_search_reads`).
    pub search_reads: u64,
}

/// A directory's entries as far as they are known. Names are loaded on demand: until a
/// directory is first looked into, only which objects are its children is known (from
/// the tags), not what they are called.
#[derive(Default)]
pub struct Dir {
    /// Children whose names have not been loaded.
    pub unnamed: Vec<Ino>,
    /// Names, once loaded (`None` until then).
    pub index: Option<BTreeMap<Box<[u8]>, Ino>>,
}

/// A deleted object whose header must stay on flash (as its tombstone) while older
/// headers of it remain, or a remount would bring it back, and (where the profile tracks
/// data owners) while data pages of it remain, or a remount would take them for a file
/// whose header was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tomb {
    pub page: u32,
    pub headers_on_flash: u32,
    pub data_blocks: u32,
}

/// The open block of a write stream and the summary entries of its pages since its last
/// summary page (page 0, unless the block's tags needed more than one summary page).
#[derive(Clone, Debug)]
pub struct OpenBlock {
    pub block: u32,
    pub pending: Vec<SummaryEntry>,
    /// Bytes the pending entries take in a summary payload (with all their facts).
    pub pending_bytes: usize,
}

impl OpenBlock {
    pub fn new(block: u32, pending: Vec<SummaryEntry>, base_serial: u64, page_size: u32) -> Self {
        let pending_bytes = pending
            .iter()
            .map(|e| crate::format::summary::Summary::entry_len(e, base_serial, page_size))
            .sum();
        Self {
            block,
            pending,
            pending_bytes,
        }
    }

    pub fn push(&mut self, e: SummaryEntry, base_serial: u64, page_size: u32) {
        self.pending_bytes +=
            crate::format::summary::Summary::entry_len(&e, base_serial, page_size);
        self.pending.push(e);
    }
}

pub struct FileSystem<F: Flash> {
    pub(crate) dev: crate::device_cell::DeviceCell<F>,
    pub(crate) layout: Layout,
    pub(crate) config: FsConfig,
    pub(crate) blocks: BlockTable,
    pub(crate) objects: HashMap<Ino, Object>,
    pub(crate) dirs: HashMap<Ino, Dir>,
    /// The write cache: the one partial chunk of each file being written.
    pub(crate) caches: HashMap<Ino, WriteCache>,
    pub(crate) tombstones: HashMap<Ino, Tomb>,
    /// Files with hard links: how many `Kind::HardLink` objects name each (see `links`).
    pub(crate) links: HashMap<Ino, u32>,
    /// Objects with extended attributes: the `Kind::Xattrs` object holding them.
    pub(crate) xattr_sets: HashMap<Ino, Ino>,
    /// Files with chunks reserved by fallocate (see `reserve`).
    pub(crate) reserves: crate::reserve_table::Reserves,
    /// Open handles of each file that has any (see `holds`).
    pub(crate) handles: HashMap<Ino, u32>,
    /// Unlinked files only the kernel still references: attributes kept, data freed.
    pub(crate) hollow: HashSet<Ino>,
    /// Files whose chunk maps are still only in the metadata store: a MiNV mount after a
    /// clean unmount reads a file's offsets the first time the file is used (`map`).
    pub(crate) unloaded: HashSet<Ino>,
    /// Whether the metadata store still holds objects not in RAM (see `lazy`).
    pub(crate) lazy_pending: bool,
    /// Directories whose children are not in RAM yet (see `lazy`).
    pub(crate) unexpanded: HashSet<Ino>,
    /// Objects a listing shows that are still only in the store (statfs counts them).
    pub(crate) lazy_uncounted: u64,
    pub(crate) atime: AtimePolicy,
    /// Whether listing a directory moves its access time (`nodiratime` turns it off).
    pub(crate) dir_atime: bool,
    pub(crate) anchors: Anchors,
    /// Open block of each write stream.
    pub(crate) streams: Vec<Option<OpenBlock>>,
    pub(crate) allocator: Box<dyn Allocator>,
    pub(crate) cleaner: Box<dyn Cleaner>,
    pub(crate) next_serial: u64,
    pub(crate) next_ino: Ino,
    /// The highest object number with a header page on flash. Deleting that object leaves
    /// its last header as a tombstone that cleaning keeps (see `tomb_needed`): a scan after
    /// a crash takes the next number from the highest it finds, and must never give a
    /// deleted object's number again (a file handle to it would open another file).
    pub(crate) newest_header_ino: Ino,
    /// Where the search for the next empty block starts (spreads wear, as YAFFS does).
    pub(crate) alloc_cursor: u32,
    /// Blocks of the checkpoint this mount came from (or a scan found); erased before the
    /// first write.
    pub(crate) checkpoint_blocks: Vec<u32>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) read_only: bool,
    /// Damage a writable mount met in its metadata store after mounting (a `minv` object
    /// read on first use that fails its checks): from then on the file system is read-only
    /// and its unmount writes nothing and fails, so the store stays as fsck saw it.
    pub(crate) damaged: Option<String>,
    /// Chunks changed since the metadata store last published a file's map (see
    /// `touched`), for the files the store tracks.
    pub(crate) touched: HashMap<Ino, crate::touched::Touched>,
    /// The files the store tracks, a bit per object number (see `touched`).
    pub(crate) tracked: Vec<u64>,
    /// Set when the device failed under us (power lost): every call fails from then on.
    /// Atomic because a shared reader can be the one to see the loss.
    pub(crate) dead: AtomicBool,
    /// Blocks whose reads by shared readers asked for a scrub; flagged in the block table
    /// by the next exclusive call (see `read_path::note_ecc`).
    pub(crate) scrub_later: Mutex<Vec<u32>>,
    pub(crate) stats: FsStats,
    pub(crate) mount_method: MountMethod,
    /// Objects whose header must be rewritten (names resolved by a newer claim, orphans
    /// to delete).
    pub(crate) repairs: Vec<Ino>,
    /// Blocks a scan found written without a summary, with the entries of their pages:
    /// sealed (or, when full, cleaned) by a writable mount.
    pub(crate) to_seal: Vec<(u32, Vec<crate::format::summary::SummaryEntry>)>,
    /// Objects a read-only mount left out of RAM for want of a name (see
    /// `forget_unnamed`): still on flash or in NVRAM until a writable mount deletes them,
    /// which fsck says instead of calling them leaks.
    pub(crate) unnamed_left: Vec<Ino>,
    /// Pages of blocks a scan found open that fail their checks although good data or
    /// header pages were written after them, so no power cut tore them: a program that
    /// failed (its page written again elsewhere) or damage since it was written, which
    /// cannot be told apart, nor can the file that held the page. fsck notes them.
    pub(crate) unexplained_pages: Vec<u32>,
    /// Objects a scan found under a directory that is missing, moved to lost+found (see
    /// `lost_found`), with the directory they named, until a writable mount writes it.
    pub(crate) adopted: Vec<(Ino, Ino)>,
    /// Data pages a scan found of objects with neither a header nor a tombstone, by object.
    pub(crate) headerless_pages: std::collections::BTreeMap<Ino, u32>,
    /// Deleted objects whose data is still on flash but whose tombstone damage took (its
    /// page unreadable, or the header lost before the delete): the next scan takes the
    /// data for a file whose header was lost. fsck notes them.
    pub(crate) untombed: std::collections::BTreeSet<Ino>,
    /// Objects a scan made files in lost+found from header-less data pages (see
    /// `lost_found`), until a writable mount writes their headers.
    pub(crate) restored: Vec<Ino>,
    /// Where headers go (axis 1). Taken out while it works on the file system.
    pub(crate) metadata: Option<Box<dyn MetadataStore<F>>>,
    /// The pages of a hole being punched, while its header is written (see `punch`).
    pub(crate) punching: HashSet<u32>,
    /// Data pages placed but not yet programmed (see `batch`).
    pub(crate) batch: crate::batch::Batch,
}

impl<F: Flash> FileSystem<F> {
    pub(crate) fn empty(dev: F, config: FsConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        let layout = Layout::new(dev.geometry())?;
        let allocator = alloc::make(
            config.allocator,
            &config.alloc_params,
            layout.blocks,
            layout.pages_per_block,
        );
        let config_metadata = config.metadata;
        let streams = vec![None; allocator.streams()];
        let mut blocks = BlockTable::of_kind(config.records, layout.blocks, layout.pages_per_block);
        if config_metadata == crate::meta::MetadataKind::Yaffs1Log {
            blocks.list_stale();
        }
        Ok(Self {
            blocks,
            cleaner: clean::make(&config),
            allocator,
            streams,
            dev: crate::device_cell::DeviceCell::new(dev),
            layout,
            config,
            objects: HashMap::new(),
            dirs: HashMap::new(),
            caches: HashMap::new(),
            tombstones: HashMap::new(),
            links: HashMap::new(),
            xattr_sets: HashMap::new(),
            reserves: Default::default(),
            handles: HashMap::new(),
            hollow: HashSet::new(),
            unloaded: HashSet::new(),
            lazy_pending: false,
            unexpanded: HashSet::new(),
            lazy_uncounted: 0,
            punching: HashSet::new(),
            batch: Default::default(),
            atime: AtimePolicy::default(),
            dir_atime: true,
            anchors: Anchors::default(),
            next_serial: 1,
            next_ino: ROOT_INO + 1,
            newest_header_ino: ROOT_INO,
            alloc_cursor: 0,
            checkpoint_blocks: Vec::new(),
            clock,
            read_only: false,
            damaged: None,
            touched: HashMap::new(),
            tracked: Vec::new(),
            dead: AtomicBool::new(false),
            scrub_later: Mutex::new(Vec::new()),
            stats: FsStats::default(),
            mount_method: MountMethod::Format,
            repairs: Vec::new(),
            to_seal: Vec::new(),
            unnamed_left: Vec::new(),
            unexplained_pages: Vec::new(),
            adopted: Vec::new(),
            headerless_pages: std::collections::BTreeMap::new(),
            restored: Vec::new(),
            untombed: std::collections::BTreeSet::new(),
            metadata: Some(crate::meta::make(config_metadata)),
        })
    }

    /// mkfs: erases every good block, writes the file system record twice (the two anchor
    /// blocks) and the root directory, and returns the mounted file system.
    pub fn format(dev: F, config: FsConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        if config.metadata == crate::meta::MetadataKind::Nvram {
            return Err(FsError::NeedsNvram);
        }
        Self::format_with(dev, config, clock, None)
    }

    /// mkfs for a profile that keeps its metadata in NVRAM (`minv`): the NVRAM is
    /// formatted too, and holds everything but file data from then on.
    pub fn format_with_nvram(
        dev: F,
        nvram: nandkit_nvram::Nvram,
        config: FsConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        if config.metadata != crate::meta::MetadataKind::Nvram {
            return Err(FsError::Invalid("this profile keeps no metadata in NVRAM"));
        }
        Self::format_with(dev, config, clock, Some(nvram))
    }

    fn format_with(
        dev: F,
        config: FsConfig,
        clock: Arc<dyn Clock>,
        nvram: Option<nandkit_nvram::Nvram>,
    ) -> Result<Self> {
        let mut fs = Self::empty(dev, config, clock)?;
        if fs.config.reserve_blocks < 2 {
            return Err(FsError::Invalid("reserve_blocks must be at least 2"));
        }
        fs.check_layout_limits()?;
        for b in 0..fs.layout.blocks {
            let addr = fs.layout.block_addr(b);
            if fs.dev.get_mut().is_bad(addr)? {
                fs.blocks.set_state(b, BlockState::Bad);
                continue;
            }
            fs.erase_block(b)?;
        }
        if fs.blocks.good_blocks() < fs.config.reserve_blocks + 6 {
            return Err(FsError::NoSpace);
        }
        // Random, so two file systems never share one (0 means "none": skip it).
        let fs_id = rand::random::<u128>().max(1);
        fs.write_anchors_at_format(fs_id)?;
        if let Some(nv) = nvram {
            let mut store = crate::meta::minv::Minv::format(nv, &fs)?;
            // Generation 1 on both sides, so even the first mount finds its entry at once.
            store.next_generation(&mut fs)?;
            fs.metadata = Some(Box::new(store));
        }
        let now = fs.now();
        let mut root = Object::new(Kind::Dir, fs.config.mapping, fs.layout.map_shape());
        root.details = Some(Box::new(Details::from_record(Record::bare(
            Kind::Dir,
            0o755,
            now,
        ))));
        fs.objects.insert(ROOT_INO, root);
        fs.dirs.insert(
            ROOT_INO,
            Dir {
                unnamed: Vec::new(),
                index: Some(BTreeMap::new()),
            },
        );
        let d = fs.obj(ROOT_INO)?.d().clone();
        fs.persist(ROOT_INO, d, Vec::new())?;
        Ok(fs)
    }

    /// The small tag layout keeps 14 bits of each serial: every block without a summary
    /// must stay within that window (see `write_path`), which needs the open blocks of all
    /// streams to be few pages.
    pub(crate) fn check_layout_limits(&self) -> Result<()> {
        if self.yaffs1_log() && self.layout.tags != crate::format::tags::TagLayout::Small {
            return Err(FsError::Invalid(
                "yaffs1 runs on small-page chips (512-byte pages, 16-byte spare), as YAFFS1 did; \
                 on larger pages use yaffs",
            ));
        }
        if self.block_placed()
            && self.layout.pages_per_block > crate::blocks::ibat::MAX_PAGES_PER_BLOCK
        {
            return Err(FsError::Invalid(
                "mnfs's iBAT counts at most 2047 pages per block (a 32-bit word a block)",
            ));
        }
        if self.layout.tags == crate::format::tags::TagLayout::Small {
            let w =
                crate::scan::unsummarised_serials(self.streams.len(), self.layout.pages_per_block);
            if w > crate::write_path::SMALL_WINDOW_SLACK {
                return Err(FsError::Invalid(
                    "too many write streams or pages per block for the small tag layout",
                ));
            }
        }
        Ok(())
    }

    /// Mounts: from a checkpoint when the last unmount left a valid one, else by scanning
    /// every block.
    pub fn mount(dev: F, options: MountOptions) -> Result<Self> {
        let mut fs = Self::recover(dev, &options)?;
        fs.read_only = options.read_only;
        fs.atime = options.atime;
        if fs.read_only {
            fs.forget_unnamed();
        } else {
            fs.apply_repairs()?;
        }
        Ok(fs)
    }

    /// Mounts a file system whose metadata is in `nvram` (made by `format_with_nvram`):
    /// the NVRAM is read, flash is not.
    pub fn mount_with_nvram(
        dev: F,
        nvram: nandkit_nvram::Nvram,
        options: MountOptions,
    ) -> Result<Self> {
        let mut fs = crate::meta::minv::mount(nvram, dev, &options)?;
        fs.atime = options.atime;
        if fs.read_only {
            fs.forget_unnamed();
        } else {
            fs.apply_repairs()?;
            fs.meta_after_mount()?;
        }
        Ok(fs)
    }

    /// Read-only mounts cannot write tombstones: objects recovery left without a name are
    /// just left out of RAM (until none is left: a hard link dropped may orphan its file).
    fn forget_unnamed(&mut self) {
        loop {
            let unnamed: Vec<Ino> = self
                .objects
                .iter()
                .filter(|(&i, o)| {
                    i != ROOT_INO
                        && o.parent == 0
                        && o.open == 0
                        && o.kind != Kind::Xattrs
                        && !self.links.contains_key(&i)
                })
                .map(|(&i, _)| i)
                .collect();
            if unnamed.is_empty() {
                break;
            }
            for ino in unnamed {
                // Its attribute set goes with it; its pages too, so its map must be in
                // RAM (a map that fails to load leaves them, and fsck says so).
                self.unnamed_left.extend(self.xattr_sets.get(&ino).copied());
                let _ = self.map(ino);
                self.delete_object(ino);
                self.unnamed_left.push(ino);
            }
        }
        self.repairs.clear();
    }

    /// Flushes everything, writes a checkpoint (if the profile keeps them) and hands the
    /// device back.
    pub fn unmount(self) -> Result<F> {
        self.unmount_reporting().map(|(dev, _)| dev)
    }

    /// `unmount`, also saying whether a checkpoint was written (so the next mount is
    /// fast) or not (it will scan).
    pub fn unmount_reporting(self) -> Result<(F, bool)> {
        let (dev, written, _) = self.unmount_all()?;
        Ok((dev, written))
    }

    fn unmount_all(mut self) -> Result<(F, bool, Option<nandkit_nvram::Nvram>)> {
        if let Some(why) = self.damaged.take() {
            return Err(FsError::CorruptNvram(format!(
                "{why} (found after mounting: the file system turned read-only then, and \
                 this unmount wrote nothing; run fsck)"
            )));
        }
        let mut written = false;
        if !self.read_only {
            // What the unmount saves covers every object: the store's index is rebuilt.
            self.load_all()?;
            self.sync()?;
            let mut store = self.metadata.take().expect("a metadata store");
            let done = store.unmount(&mut self);
            self.metadata = Some(store);
            written = done?;
            self.settle()?;
            self.dev.get_mut().sync()?;
        }
        let nv = self.metadata.take().and_then(|m| m.into_nvram());
        Ok((self.dev.into_inner(), written, nv))
    }

    /// The device, with nothing flushed: what a crash leaves.
    pub fn into_device(self) -> F {
        self.dev.into_inner()
    }

    /// The device and the NVRAM (if the profile has one), with nothing flushed: what a
    /// crash leaves.
    pub fn into_parts(mut self) -> (F, Option<nandkit_nvram::Nvram>) {
        let nv = self.metadata.take().and_then(|m| m.into_nvram());
        (self.dev.into_inner(), nv)
    }

    /// `unmount`, handing back the NVRAM too.
    pub fn unmount_parts(self) -> Result<(F, Option<nandkit_nvram::Nvram>)> {
        let (mut dev, _, nv) = self.unmount_all()?;
        dev.sync()?;
        Ok((dev, nv))
    }

    /// The NVRAM's counters and space, for a profile that has one.
    pub fn nvram(&self) -> Option<crate::meta::minv::NvramReport> {
        self.metadata.as_ref().and_then(|m| m.nvram())
    }

    /// The NVRAM device, for a profile that has one (to arm a power cut on it).
    pub fn nvram_mut(&mut self) -> Option<&mut nandkit_nvram::Nvram> {
        self.metadata.as_mut().and_then(|m| m.nvram_mut())
    }

    /// Does this file system keep its metadata on flash (as opposed to NVRAM)?
    /// Before a call that leaves `ino`'s header for later (see `MetadataStore::room_for`).
    pub(crate) fn metadata_room(
        &mut self,
        ino: Ino,
        chunks: Option<std::ops::Range<u32>>,
    ) -> Result<()> {
        if self.metadata_on_flash() {
            return Ok(());
        }
        let mut store = self.metadata.take().expect("a metadata store");
        let out = store.room_for(self, ino, chunks);
        self.metadata = Some(store);
        out
    }

    pub(crate) fn metadata_on_flash(&self) -> bool {
        matches!(
            self.config.metadata,
            crate::meta::MetadataKind::FlashLog | crate::meta::MetadataKind::Yaffs1Log
        )
    }

    /// Does this mount track which objects have data pages in which block, keeping a
    /// deleted object's tombstone until they are all erased (`blocks::data_owners`)?
    pub(crate) fn tracks_data_owners(&self) -> bool {
        self.config.tombs_cover_data && self.metadata_on_flash() && !self.block_placed()
    }

    /// Does every full block end in a summary of its pages (the YAFFS2-style log)?
    pub(crate) fn summarised(&self) -> bool {
        self.config.metadata == crate::meta::MetadataKind::FlashLog && !self.block_placed()
    }

    /// Is file data placed by block, found at mount from one spare area per block (MNFS's
    /// iBAT; see `block_placed`)?
    pub(crate) fn block_placed(&self) -> bool {
        self.config.records == crate::blocks::RecordsKind::Ibat
    }

    /// Is the log YAFFS1's (chunk versions in the tags, deletion markers, every page read
    /// at mount)?
    pub(crate) fn yaffs1_log(&self) -> bool {
        self.config.metadata == crate::meta::MetadataKind::Yaffs1Log
    }

    /// Runs a metadata store hook (a no-op for the flash log).
    pub(crate) fn meta_hook(
        &mut self,
        f: impl FnOnce(&mut dyn MetadataStore<F>, &mut Self) -> Result<()>,
    ) -> Result<()> {
        if self.metadata_on_flash() {
            return Ok(());
        }
        // Power is gone (the flash said so): the NVRAM went with it and takes no more
        // writes, whatever the caller is still tidying up.
        self.check_alive()?;
        let mut store = self.metadata.take().expect("a metadata store");
        let out = f(store.as_mut(), self);
        self.metadata = Some(store);
        if let Err(FsError::CorruptNvram(why)) = &out {
            if !self.read_only {
                // Writing on would build on what may be wrong, and a failed unmount
                // would leave a store that no longer shows fsck the damage: stop here.
                self.damaged = Some(why.clone());
                self.read_only = true;
            }
        }
        out
    }

    /// Makes sure `ino`'s chunk map is in RAM (see `unloaded`). Every path that reads or
    /// changes a file's map calls this first.
    pub(crate) fn map(&mut self, ino: Ino) -> Result<()> {
        self.present(ino)?;
        if self.map_loaded(ino) {
            return Ok(());
        }
        self.meta_hook(|store, fs| store.load_map(fs, ino))
    }

    /// Every file's chunk map in RAM (fsck, and a page lost whose owner is unknown).
    pub(crate) fn map_all(&mut self) -> Result<()> {
        self.load_all()?;
        let mut inos: Vec<Ino> = self.unloaded.iter().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            self.map(ino)?;
        }
        Ok(())
    }

    /// Whether `ino`'s chunk map is in RAM, as `read_shared` needs it to be (and the
    /// object itself: see `lazy`).
    pub fn map_loaded(&self, ino: Ino) -> bool {
        !self.unloaded.contains(&ino) && (!self.lazy_pending || self.objects.contains_key(&ino))
    }

    fn meta_after_mount(&mut self) -> Result<()> {
        self.meta_hook(|store, fs| store.after_mount(fs))
    }

    /// The device, for a look at its state (clock, counters, power). The guard is the
    /// device lock shared readers take: drop it before the next file system call.
    pub fn device(&self) -> std::sync::MutexGuard<'_, F> {
        self.dev.lock()
    }

    pub fn device_mut(&mut self) -> &mut F {
        self.dev.get_mut()
    }

    pub fn config(&self) -> &FsConfig {
        &self.config
    }

    pub fn stats(&self) -> &FsStats {
        &self.stats
    }

    pub fn mount_method(&self) -> MountMethod {
        self.mount_method
    }

    /// The file system's id, random at mkfs, as its record on flash gives it (None: made
    /// before ids existed). A `minv` NVRAM image carries the same id.
    pub fn fs_id(&self) -> Option<u128> {
        Some(self.anchors.fs_id).filter(|&id| id != 0)
    }

    pub fn chunk_bytes(&self) -> u32 {
        self.layout.chunk_bytes
    }

    /// Largest file size the on-flash format can hold on this geometry.
    /// Object numbers given out so far and the most the tag layout can name. Numbers are
    /// never reused (a file handle to a deleted object stays stale), so creates fail once
    /// the two meet: a million objects over an image's life on the small layout.
    pub fn object_numbers(&self) -> (u64, u64) {
        let given = u64::from(self.next_ino.saturating_sub(crate::types::ROOT_INO + 1));
        let max = u64::from(self.layout.tags.max_obj() - crate::types::ROOT_INO);
        (given, max)
    }

    pub fn max_file_size(&self) -> u64 {
        (u64::from(self.layout.tags.max_chunk()) + 1) * u64::from(self.layout.chunk_bytes)
    }

    /// Device utilisation u, invalidity i and uniformity p (MODA's definitions).
    pub fn uip(&self) -> (f64, f64, f64) {
        self.blocks.uip()
    }

    /// Per-block state for tools.
    /// Files whose map is block-granular (the `mnfs` profile's files while they keep
    /// their shape: one entry an erase block) and files whose map is page-mapped.
    pub fn file_map_shapes(&self) -> (u64, u64) {
        let mut out = (0, 0);
        for o in self.objects.values().filter(|o| o.kind == Kind::File) {
            match o.chunks {
                crate::mapping::FileMap::Page(_) | crate::mapping::FileMap::Tnode(_) => out.1 += 1,
                _ => out.0 += 1,
            }
        }
        out
    }

    /// Every block's record, in block order.
    pub fn block_table(&self) -> Vec<crate::blocks::Block> {
        self.blocks.records()
    }

    /// The two anchor blocks (file system record copies).
    pub fn anchor_blocks(&self) -> [u32; 2] {
        self.anchors.blocks
    }

    /// Directories with the children given (per directory), and their subdirectory
    /// counts, names not loaded yet. Returns the lists given for objects that are not
    /// directories.
    pub(crate) fn install_dirs(
        &mut self,
        mut children: HashMap<Ino, Vec<Ino>>,
    ) -> HashMap<Ino, Vec<Ino>> {
        let dirs: Vec<Ino> = self
            .objects
            .iter()
            .filter(|(_, o)| o.kind == Kind::Dir)
            .map(|(&i, _)| i)
            .collect();
        for d in dirs {
            let kids = children.remove(&d).unwrap_or_default();
            let subdirs = kids
                .iter()
                .filter(|k| self.objects.get(k).is_some_and(|o| o.kind == Kind::Dir))
                .count() as u32;
            self.objects.get_mut(&d).expect("listed").subdirs = subdirs;
            self.dirs.insert(
                d,
                Dir {
                    unnamed: kids,
                    index: None,
                },
            );
        }
        children
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        if self.is_dead() {
            return Err(FsError::Io(POWER_LOST.into()));
        }
        Ok(())
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_alive()?;
        if self.read_only {
            return Err(FsError::ReadOnly);
        }
        Ok(())
    }

    pub(crate) fn obj(&self, ino: Ino) -> Result<&Object> {
        self.objects.get(&ino).ok_or(FsError::NotFound)
    }

    pub(crate) fn obj_mut(&mut self, ino: Ino) -> Result<&mut Object> {
        self.objects.get_mut(&ino).ok_or(FsError::NotFound)
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ns()
    }

    pub fn getattr(&mut self, ino: Ino) -> Result<Attr> {
        self.present(ino)?;
        self.check_alive()?;
        self.visible(ino)?;
        self.load(ino)?;
        self.map(ino)?;
        let o = self.obj(ino)?;
        let d = o.d();
        let named = ino == ROOT_INO || !d.names.is_empty();
        let nlink = match o.kind {
            // A removed directory (still open somewhere) has no links at all.
            Kind::Dir if named => 2 + o.subdirs,
            Kind::Dir => 0,
            _ => d.names.len() as u32 + self.links.get(&ino).copied().unwrap_or(0),
        };
        let size = match o.kind {
            Kind::File | Kind::Symlink => o.size,
            _ => 0,
        };
        Ok(Attr {
            ino,
            kind: o.kind,
            perm: d.perm & 0o7777,
            uid: d.uid,
            gid: d.gid,
            nlink,
            size,
            // What the file holds, its reserved holes included (as `du` counts a
            // fallocated file on a disk file system; statfs counts them used).
            blocks: o.chunks.mapped() + self.reserves.holes_of(ino),
            rdev: d.rdev,
            atime: d.atime,
            mtime: d.mtime,
            ctime: d.ctime,
        })
    }

    /// An object the API may show: hard link and attribute records are not.
    pub(crate) fn visible(&self, ino: Ino) -> Result<&Object> {
        let o = self.obj(ino)?;
        if o.kind.is_visible() {
            Ok(o)
        } else {
            Err(FsError::NotFound)
        }
    }

    /// chmod, chown, utimens and truncate. Persisted before it returns.
    pub fn setattr(&mut self, ino: Ino, set: SetAttr) -> Result<Attr> {
        self.present(ino)?;
        self.check_writable()?;
        self.visible(ino)?;
        self.load(ino)?;
        self.map(ino)?;
        let kind = self.obj(ino)?.kind;
        if let Some(size) = set.size {
            if kind == Kind::Dir {
                return Err(FsError::IsDir);
            }
            if kind != Kind::File {
                return Err(FsError::Invalid("truncate of a special file"));
            }
            self.truncate(ino, size)?;
        }
        let now = Time::from_ns(self.now());
        let mut d = self.obj(ino)?.d().clone();
        let mut changed = false;
        if let Some(perm) = set.perm {
            d.perm = perm & 0o7777;
            changed = true;
        }
        if let Some(uid) = set.uid {
            d.uid = uid;
            changed = true;
        }
        if let Some(gid) = set.gid {
            d.gid = gid;
            changed = true;
        }
        if let Some(t) = set.atime {
            d.atime = t;
            changed = true;
        }
        if let Some(t) = set.mtime {
            d.mtime = t;
            changed = true;
        }
        if changed || set.ctime.is_some() {
            d.ctime = set.ctime.unwrap_or(now);
            self.flush_cache(ino)?;
            self.persist(ino, d, Vec::new())?;
        }
        self.getattr(ino)
    }

    pub fn statfs(&self) -> StatFs {
        let (total, used) = self.space();
        StatFs {
            chunk_bytes: self.layout.chunk_bytes,
            total_chunks: total,
            used_chunks: used.min(total),
            free_chunks: total.saturating_sub(used),
            objects: self
                .objects
                .values()
                .filter(|o| o.kind.is_visible())
                .count()
                .saturating_sub(1) as u64
                + self.lazy_uncounted,
            name_max: NAME_MAX as u32,
        }
    }

    /// Chunks free for new data: statfs's `free_chunks` without its count of objects
    /// (the mount asks at every open, fallocate and punch at every call, the write path at
    /// every write while a file holds a reservation). Costs no walk.
    pub fn free_chunks(&self) -> u64 {
        let (total, used) = self.space();
        total.saturating_sub(used)
    }

    /// (Chunks the file system can hold, chunks in use or promised.)
    pub(crate) fn space(&self) -> (u64, u64) {
        let (total, valid) = self.space_without_reserves();
        (total, valid + self.reserved_chunks())
    }

    /// (Chunks the file system can hold, chunks in valid pages.)
    pub(crate) fn space_without_reserves(&self) -> (u64, u64) {
        let ppb = u64::from(self.layout.pages_per_block);
        // One page of each block holds its summary (none when metadata is in NVRAM or the
        // log is YAFFS1's).
        let per_block = if self.summarised() { ppb - 1 } else { ppb };
        let good = u64::from(self.blocks.good_blocks());
        let kept =
            u64::from(self.config.reserve_blocks) + u64::from(self.checkpoint_reserve_blocks()) + 2; // the anchor blocks
        let total = good.saturating_sub(kept) * per_block;
        // Holes fallocate reserved count as used: they are promised to their files.
        (total, self.blocks.valid_total())
    }

    /// Is anything written or changed that is not on flash yet (a buffered chunk, a
    /// header to rewrite)?
    pub fn has_unsynced(&self) -> bool {
        !self.caches.is_empty() || self.objects.values().any(|o| o.is_dirty())
    }

    /// Flushes every file's buffered chunk and every changed header.
    pub fn sync(&mut self) -> Result<()> {
        self.check_writable()?;
        let mut inos: Vec<Ino> = self
            .objects
            .iter()
            .filter(|(i, o)| o.is_dirty() || self.caches.contains_key(i))
            .map(|(&i, _)| i)
            .collect();
        inos.sort_unstable();
        for ino in inos {
            self.fsync(ino)?;
        }
        self.settle()?;
        self.mark_stale_pages()?;
        self.dev.get_mut().sync()?;
        Ok(())
    }

    /// Makes one object's data and header durable.
    pub fn fsync(&mut self, ino: Ino) -> Result<()> {
        self.present(ino)?;
        self.check_writable()?;
        self.allocator.flushed(ino);
        self.flush_cache(ino)?;
        if self.obj(ino)?.is_dirty() {
            self.load(ino)?;
            let d = self.obj(ino)?.d().clone();
            self.persist(ino, d, Vec::new())?;
        }
        Ok(())
    }

    /// The header record an object would get with details `d` (and `updates` riding
    /// along), version not yet set.
    pub(crate) fn record_for(
        &self,
        ino: Ino,
        d: &Details,
        updates: Vec<(Ino, Vec<Name>)>,
    ) -> Result<Record> {
        let o = self.obj(ino)?;
        // A symlink target or attribute set too big for the header is in the object's
        // data chunks; the header then only says how long it is.
        let in_chunks = o.chunks.end() > 0;
        Ok(Record {
            kind: o.kind,
            version: 0,
            perm: d.perm,
            uid: d.uid,
            gid: d.gid,
            rdev: d.rdev,
            size: o.size,
            atime: d.atime,
            mtime: d.mtime,
            ctime: d.ctime,
            names: d.names.clone(),
            target: if in_chunks {
                Vec::new()
            } else {
                d.target.clone()
            },
            xattrs: if in_chunks {
                Vec::new()
            } else {
                d.xattrs.clone()
            },
            name_updates: updates,
            floors: d.floors.clone(),
            reserve: self.reserves.get(ino),
        })
    }

    /// Writes `d` as the object's new header (with `updates` riding along, for a rename
    /// over a name or an exchange), and only then makes it the object's state in RAM.
    pub(crate) fn persist(
        &mut self,
        ino: Ino,
        mut d: Details,
        updates: Vec<(Ino, Vec<Name>)>,
    ) -> Result<()> {
        self.merge_floors_if_needed(ino, &mut d.floors)?;
        let size = self.obj(ino)?.size;
        let mut floors = self.live_floors(ino, &d.floors);
        let mut rec = self.record_for(ino, &d, updates)?;
        rec.floors = self.floors_for_header(ino, &floors, size);
        // Floors never cost the user room (`fits` leaves them out): a header they would
        // overflow gets rid of them, oldest first, by filling their holes with zeros.
        while rec.encoded_len() > self.layout.chunk_bytes as usize && !rec.floors.is_empty() {
            let f = rec.floors[0];
            self.fill_floor_holes(ino, f, size)?;
            floors = self.live_floors(ino, &floors);
            rec.floors = self.floors_for_header(ino, &floors, size);
        }
        if !self.metadata_on_flash() {
            // The record may publish data pages: they must be programmed first. A settle
            // on a dead device does nothing, and pages it did not program must never be
            // published (the flash lost power, so the NVRAM did too).
            self.settle()?;
            self.check_alive()?;
        }
        let mut store = self.metadata.take().expect("a metadata store");
        let stored = store.store_header(self, ino, &mut rec);
        self.metadata = Some(store);
        let pno = stored?;
        d.version = rec.version;
        d.floors = self.floors_after_header(ino, &floors, size, rec.version);
        let first_parent = d.names.first().map_or(0, |n| n.parent);
        let o = self.objects.get_mut(&ino).ok_or(FsError::NotFound)?;
        o.details = Some(Box::new(d));
        o.set_dirty(false);
        o.parent = first_parent;
        let old = std::mem::replace(&mut o.header, pno.unwrap_or(NO_PAGE));
        if old != NO_PAGE {
            self.blocks.invalidate(old);
        }
        Ok(())
    }

    /// Would a header with these details (and updates) fit one page? Truncation floors
    /// are left out: `persist` makes room for them.
    pub(crate) fn fits(&self, ino: Ino, d: &Details, updates: &[(Ino, Vec<Name>)]) -> bool {
        match self.record_for(ino, d, updates.to_vec()) {
            Ok(mut r) => {
                r.floors.clear();
                r.encoded_len() <= self.layout.chunk_bytes as usize
            }
            Err(_) => false,
        }
    }
}

/// Shared readers hold `&FileSystem` on several threads at once.
#[allow(dead_code)]
fn file_system_is_sync<F: Flash>() {
    fn sync<T: Sync>() {}
    sync::<FileSystem<F>>();
}
