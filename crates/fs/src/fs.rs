//! The file system: state, mkfs, mount, unmount and the attribute calls. The other calls
//! live beside this file (`namespace`, `file_io`, `xattr`), the flash write path and
//! cleaning in `io`, mount-time recovery in `scan` and `checkpoint`, checks in `fsck`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use nandkit_flash::Flash;
use serde::Serialize;

use crate::alloc::{self, Allocator};
use crate::blocks::BlockTable;
use crate::clean::{self, Cleaner};
use crate::clock::{Clock, SystemClock};
use crate::config::FsConfig;
use crate::error::{FsError, Result};
use crate::format::{Name, Record, RecordKind};
use crate::layout::Layout;
use crate::meta::MetadataStore;
use crate::object::Object;
use crate::types::{Attr, Ino, Kind, SetAttr, StatFs, NAME_MAX, ROOT_INO, SUPER_INO};

/// How to mount.
#[derive(Clone)]
pub struct MountOptions {
    pub read_only: bool,
    /// Ignore a checkpoint and scan the whole device.
    pub force_scan: bool,
    pub clock: Arc<dyn Clock>,
}

impl Default for MountOptions {
    fn default() -> Self {
        Self {
            read_only: false,
            force_scan: false,
            clock: Arc::new(SystemClock),
        }
    }
}

/// How the last mount found its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MountMethod {
    Format,
    Scan,
    Checkpoint,
}

/// What the file system has done since mount.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FsStats {
    pub data_pages_written: u64,
    pub header_pages_written: u64,
    pub checkpoint_pages_written: u64,
    /// Valid pages moved by cleaning.
    pub pages_copied: u64,
    pub blocks_cleaned: u64,
    pub blocks_retired: u64,
    pub scrubs: u64,
    /// Pages skipped because they were not erased (torn by an earlier power cut).
    pub pages_spoiled: u64,
    /// Bytes of user data accepted by `write`.
    pub user_bytes_written: u64,
}

pub struct FileSystem<F: Flash> {
    pub(crate) dev: F,
    pub(crate) layout: Layout,
    pub(crate) config: FsConfig,
    pub(crate) blocks: BlockTable,
    pub(crate) objects: HashMap<Ino, Object>,
    /// Directory index: children of each directory by name.
    pub(crate) dirs: HashMap<Ino, BTreeMap<Box<[u8]>, Ino>>,
    /// Deleted objects whose tombstone header must stay valid while older headers of
    /// theirs remain on flash (else a remount would resurrect them). Value: its page.
    pub(crate) tombstones: HashMap<Ino, u32>,
    /// Header pages (any version, not yet erased) per object.
    pub(crate) headers_on_flash: HashMap<Ino, u32>,
    pub(crate) super_page: Option<u32>,
    /// Open block of each write stream.
    pub(crate) streams: Vec<Option<u32>>,
    pub(crate) allocator: Box<dyn Allocator>,
    pub(crate) cleaner: Box<dyn Cleaner>,
    pub(crate) next_serial: u64,
    pub(crate) next_seq: u32,
    pub(crate) next_ino: Ino,
    /// Where the search for the next empty block starts (spreads wear, as YAFFS does).
    pub(crate) alloc_cursor: u32,
    /// Blocks of the checkpoint this mount came from; erased before the first write.
    pub(crate) checkpoint_blocks: Vec<u32>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) read_only: bool,
    /// Set when the device failed under us (power lost): every call fails from then on.
    pub(crate) dead: Option<String>,
    pub(crate) stats: FsStats,
    pub(crate) mount_method: MountMethod,
    /// Objects whose header must be rewritten after mount (names resolved by a newer
    /// claim, orphans to delete).
    pub(crate) repairs: Vec<Ino>,
    /// During a scan: the serial of each object's newest header.
    pub(crate) header_serials: HashMap<Ino, u64>,
    /// Where headers go (axis 1). Taken out while it works on the file system.
    pub(crate) metadata: Option<Box<dyn MetadataStore<F>>>,
}

impl<F: Flash> FileSystem<F> {
    pub(crate) fn empty(dev: F, config: FsConfig, clock: Arc<dyn Clock>) -> Self {
        let layout = Layout::new(dev.geometry());
        let allocator = alloc::make(config.allocator);
        let config_metadata = config.metadata;
        let streams = vec![None; allocator.streams()];
        Self {
            blocks: BlockTable::new(layout.blocks, layout.pages_per_block),
            cleaner: clean::make(&config),
            allocator,
            streams,
            dev,
            layout,
            config,
            objects: HashMap::new(),
            dirs: HashMap::new(),
            tombstones: HashMap::new(),
            headers_on_flash: HashMap::new(),
            super_page: None,
            next_serial: 1,
            next_seq: 1,
            next_ino: ROOT_INO + 1,
            alloc_cursor: 0,
            checkpoint_blocks: Vec::new(),
            clock,
            read_only: false,
            dead: None,
            stats: FsStats::default(),
            mount_method: MountMethod::Format,
            repairs: Vec::new(),
            header_serials: HashMap::new(),
            metadata: Some(crate::meta::make(config_metadata)),
        }
    }

    /// mkfs: erases every good block, writes the file system record and the root
    /// directory, and returns the mounted file system.
    pub fn format(dev: F, config: FsConfig, clock: Arc<dyn Clock>) -> Result<Self> {
        let mut fs = Self::empty(dev, config, clock);
        if fs.config.reserve_blocks < 2 {
            return Err(FsError::Invalid("reserve_blocks must be at least 2"));
        }
        for b in 0..fs.layout.blocks {
            let addr = fs.layout.block_addr(b);
            if fs.dev.is_bad(addr)? {
                fs.blocks.set_state(b, crate::blocks::BlockState::Bad);
                continue;
            }
            fs.erase_block(b)?;
        }
        if fs.blocks.good_blocks() < fs.config.reserve_blocks + 4 {
            return Err(FsError::NoSpace);
        }
        let now = fs.clock.now_ns();
        let config_json = serde_json::to_vec(&fs.config).expect("config serialises");
        let super_rec = Record {
            target: config_json,
            ..Record::bare(RecordKind::Super, 0, now)
        };
        if super_rec.encode().len() > fs.layout.chunk_bytes as usize {
            return Err(FsError::Invalid(
                "page too small for the file system record",
            ));
        }
        let pno = fs.write_header_page(SUPER_INO, &super_rec)?;
        fs.super_page = Some(pno);
        let root = Record::bare(RecordKind::Object(Kind::Dir), 0o755, now);
        fs.objects
            .insert(ROOT_INO, Object::new(root.clone(), fs.config.mapping));
        fs.dirs.insert(ROOT_INO, BTreeMap::new());
        fs.persist(ROOT_INO, root, Vec::new())?;
        Ok(fs)
    }

    /// Mounts: from a checkpoint when the last unmount left a valid one, else by scanning
    /// every block.
    pub fn mount(dev: F, options: MountOptions) -> Result<Self> {
        let mut fs = Self::recover(dev, &options)?;
        fs.read_only = options.read_only;
        if fs.read_only {
            fs.forget_unnamed();
        } else {
            fs.apply_repairs()?;
        }
        Ok(fs)
    }

    /// Read-only mounts cannot write tombstones: objects recovery left without a name are
    /// just left out of RAM.
    fn forget_unnamed(&mut self) {
        let unnamed: Vec<Ino> = self
            .objects
            .iter()
            .filter(|(&i, o)| i != ROOT_INO && o.meta.names.is_empty())
            .map(|(&i, _)| i)
            .collect();
        for ino in unnamed {
            self.delete_object(ino);
        }
        self.repairs.clear();
    }

    /// Flushes everything, writes a checkpoint (if the profile keeps them) and hands the
    /// device back.
    pub fn unmount(mut self) -> Result<F> {
        if !self.read_only {
            self.sync()?;
            let mut store = self.metadata.take().expect("a metadata store");
            let done = store.unmount(&mut self);
            self.metadata = Some(store);
            done?;
            self.dev.sync()?;
        }
        Ok(self.dev)
    }

    /// The device, with nothing flushed: what a crash leaves.
    pub fn into_device(self) -> F {
        self.dev
    }

    pub fn device(&self) -> &F {
        &self.dev
    }

    pub fn device_mut(&mut self) -> &mut F {
        &mut self.dev
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

    pub fn chunk_bytes(&self) -> u32 {
        self.layout.chunk_bytes
    }

    /// Device utilisation u, invalidity i and uniformity p (MODA's definitions).
    pub fn uip(&self) -> (f64, f64, f64) {
        self.blocks.uip()
    }

    /// Per-block state for tools.
    pub fn block_table(&self) -> &[crate::blocks::Block] {
        &self.blocks.blocks
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        match &self.dead {
            Some(why) => Err(FsError::Io(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        self.check_alive()?;
        if self.read_only {
            return Err(FsError::ReadOnly);
        }
        Ok(())
    }

    pub(crate) fn obj(&self, ino: Ino) -> Result<&Object> {
        self.objects
            .get(&ino)
            .filter(|_| ino != SUPER_INO)
            .ok_or(FsError::NotFound)
    }

    pub(crate) fn obj_mut(&mut self, ino: Ino) -> Result<&mut Object> {
        if ino == SUPER_INO {
            return Err(FsError::NotFound);
        }
        self.objects.get_mut(&ino).ok_or(FsError::NotFound)
    }

    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ns()
    }

    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.check_alive()?;
        let o = self.obj(ino)?;
        let m = &o.meta;
        let kind = o.kind();
        let nlink = match kind {
            Kind::Dir => 2 + o.subdirs,
            _ => m.names.len() as u32,
        };
        let size = match kind {
            Kind::File => m.size,
            Kind::Symlink => m.target.len() as u64,
            _ => 0,
        };
        Ok(Attr {
            ino,
            kind,
            perm: m.perm & 0o7777,
            uid: m.uid,
            gid: m.gid,
            nlink,
            size,
            blocks: o.data_pages(),
            rdev: m.rdev,
            atime_ns: m.atime_ns,
            mtime_ns: m.mtime_ns,
            ctime_ns: m.ctime_ns,
        })
    }

    /// chmod, chown, utimens and truncate. Persisted before it returns.
    pub fn setattr(&mut self, ino: Ino, set: SetAttr) -> Result<Attr> {
        self.check_writable()?;
        let kind = self.obj(ino)?.kind();
        if let Some(size) = set.size {
            if kind == Kind::Dir {
                return Err(FsError::IsDir);
            }
            if kind != Kind::File {
                return Err(FsError::Invalid("truncate of a special file"));
            }
            self.truncate(ino, size)?;
        }
        let now = self.now();
        let mut meta = self.obj(ino)?.meta.clone();
        let mut changed = false;
        if let Some(perm) = set.perm {
            meta.perm = perm & 0o7777;
            changed = true;
        }
        if let Some(uid) = set.uid {
            meta.uid = uid;
            changed = true;
        }
        if let Some(gid) = set.gid {
            meta.gid = gid;
            changed = true;
        }
        if let Some(t) = set.atime_ns {
            meta.atime_ns = t;
            changed = true;
        }
        if let Some(t) = set.mtime_ns {
            meta.mtime_ns = t;
            changed = true;
        }
        if changed {
            meta.ctime_ns = now;
            self.flush_cache(ino)?;
            meta.size = self.obj(ino)?.meta.size;
            self.persist(ino, meta, Vec::new())?;
        }
        self.getattr(ino)
    }

    pub fn statfs(&self) -> StatFs {
        let ppb = u64::from(self.layout.pages_per_block);
        let good = u64::from(self.blocks.good_blocks());
        let total = good.saturating_sub(u64::from(self.config.reserve_blocks)) * ppb;
        let used = self.blocks.valid_total();
        StatFs {
            chunk_bytes: self.layout.chunk_bytes,
            total_chunks: total,
            used_chunks: used.min(total),
            free_chunks: total.saturating_sub(used),
            objects: self.objects.len().saturating_sub(1) as u64,
            name_max: NAME_MAX as u32,
        }
    }

    /// Flushes every file's buffered chunk and every changed header.
    pub fn sync(&mut self) -> Result<()> {
        self.check_writable()?;
        let mut inos: Vec<Ino> = self
            .objects
            .keys()
            .copied()
            .filter(|&i| i != SUPER_INO)
            .collect();
        inos.sort_unstable();
        for ino in inos {
            self.fsync(ino)?;
        }
        self.dev.sync()?;
        Ok(())
    }

    /// Makes one object's data and header durable.
    pub fn fsync(&mut self, ino: Ino) -> Result<()> {
        self.check_writable()?;
        self.flush_cache(ino)?;
        let o = self.obj(ino)?;
        if o.header_dirty {
            let meta = o.meta.clone();
            self.persist(ino, meta, Vec::new())?;
        }
        Ok(())
    }

    /// Writes `meta` as the object's new header (with `updates` riding along, for an
    /// exchange), and only then makes it the object's state in RAM.
    pub(crate) fn persist(
        &mut self,
        ino: Ino,
        meta: Record,
        updates: Vec<(Ino, Vec<Name>)>,
    ) -> Result<()> {
        let rec = Record {
            name_updates: updates,
            ..meta
        };
        let mut store = self.metadata.take().expect("a metadata store");
        let stored = store.store_header(self, ino, &rec);
        self.metadata = Some(store);
        let pno = stored?;
        let old = {
            let o = self.objects.get_mut(&ino).ok_or(FsError::NotFound)?;
            o.meta = Record {
                name_updates: Vec::new(),
                ..rec
            };
            o.header_dirty = false;
            std::mem::replace(&mut o.header, pno)
        };
        if let Some(old) = old {
            self.blocks.invalidate(old);
        }
        Ok(())
    }

    /// Would this record fit in one page?
    pub(crate) fn fits(&self, rec: &Record, updates: &[(Ino, Vec<Name>)]) -> bool {
        let mut len = rec.encode().len();
        for (_, names) in updates {
            len += 6 + names.iter().map(|n| 5 + n.name.len()).sum::<usize>();
        }
        len <= self.layout.chunk_bytes as usize
    }
}
