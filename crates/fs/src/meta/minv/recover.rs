//! Mounting from the NVRAM: everything the file system keeps in RAM comes from the NVRAM
//! alone; of flash, only the anchor blocks are read, to check that the NVRAM belongs to
//! this flash (the two carry one id, see `same_file_system`) and is the one it goes with
//! now (the two carry one generation, see `same_generation`).
//!
//! Which pages are published the page states say and the heap's free space its bitmap,
//! read whole at every mount. Objects come in one of three ways (`Via`): through a clean
//! unmount's saved index, or through the tree in place (after a crash, or with the saved
//! state damaged), each object when a call first reaches it (`lazy`); or, when a file
//! holds fallocated chunks or the tree is damaged where the mount reads it, by a walk of
//! every inode and record, which go through the same recovery rules as a scan of the flash
//! log (`rebuild`: names, hard links, attribute sets, name updates of a rename by
//! version). A file's offset structures (its chunk map) wait for its first use
//! (`Minv::load_map`) in every way; those of symlinks and attribute sets are read with
//! them.
//!
//! Every pointer is checked before it is followed (inside the heap, aligned, not seen
//! before) and every record against its checksum, so a damaged NVRAM gives a clear error,
//! never a panic or a loop.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use nandkit_flash::Flash;
use nandkit_nvram::Nvram;

use super::heap::Heap;
use super::layout::{
    self, bucket_of, get32, get64, record_bytes, NvBlock, Regions, Superblock, BUCKETS, DYING_OFF,
    HIGH_WATER_OFF, HIGH_WATER_STEP, INODES_OFF, INODE_BYTES, OFFSETS_BYTES, OFFSETS_HEAD,
    RESERVED_OFF, SERIAL_OFF, SLOTS, SUPER_BYTES, TABLE_OFF, UNIT,
};
use super::{Extent, Minv, NvInode};
use crate::blocks::BlockState;
use crate::config::FsConfig;
use crate::error::{FsError, Result};
use crate::format::anchor::FsRecord;
use crate::format::Record;
use crate::fs::{FileSystem, MountMethod, MountOptions};
use crate::layout::Layout;
use crate::meta::MetadataKind;
use crate::object::{LOST_PAGE, NO_PAGE};
use crate::scan::{Found, Seen};
use crate::types::Ino;

fn corrupt(why: impl Into<String>) -> FsError {
    FsError::CorruptNvram(why.into())
}

/// Reads NVRAM through a redo transaction not yet applied (a read-only mount's view).
pub(super) struct Reader<'a> {
    pub nv: &'a mut Nvram,
    pub patch: HashMap<u64, u64>,
}

impl Reader<'_> {
    pub(super) fn read(&mut self, off: u64, len: u64) -> Result<Vec<u8>> {
        let mut b = vec![0u8; len as usize];
        self.nv.read(off, &mut b).map_err(FsError::Nvram)?;
        for (&o, &v) in &self.patch {
            if o >= off && o + 8 <= off + len {
                let at = (o - off) as usize;
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        Ok(b)
    }
}

/// Checks that the NVRAM was formatted for this device and returns its configuration.
fn superblock<F: Flash>(r: &mut Reader, dev: &F) -> Result<(Superblock, FsConfig)> {
    let b = r.read(0, SUPER_BYTES)?;
    let sb = Superblock::decode(&b).map_err(|why| {
        if why.contains("magic") {
            FsError::NotFormatted(format!("the NVRAM has {why}"))
        } else {
            corrupt(why)
        }
    })?;
    let layout = Layout::new(dev.geometry())?;
    let g = layout.geometry;
    let mine = (sb.page_size, sb.oob_size, sb.pages_per_block, sb.blocks);
    let theirs = (
        g.page_size_bytes,
        g.oob_size_bytes,
        layout.pages_per_block,
        layout.blocks,
    );
    if mine != theirs {
        return Err(corrupt(format!(
            "the NVRAM belongs to another flash device: made for {} blocks of {} pages of \
             {}+{} B, this device has {} blocks of {} pages of {}+{} B",
            sb.blocks,
            sb.pages_per_block,
            sb.page_size,
            sb.oob_size,
            layout.blocks,
            layout.pages_per_block,
            g.page_size_bytes,
            g.oob_size_bytes
        )));
    }
    if sb.nvram_size != r.nv.size_bytes() {
        return Err(corrupt(format!(
            "superblock says {} bytes of NVRAM, the device has {}",
            sb.nvram_size,
            r.nv.size_bytes()
        )));
    }
    if sb.anchors.iter().any(|&a| a >= layout.blocks) {
        return Err(corrupt("superblock names anchor blocks outside the device"));
    }
    let config: FsConfig = serde_json::from_slice(&sb.config_json)
        .map_err(|e| corrupt(format!("superblock configuration does not decode: {e}")))?;
    if config.metadata != MetadataKind::Nvram {
        return Err(corrupt("superblock configuration is not a MiNV one"));
    }
    config.alloc_params.validate()?;
    Ok((sb, config))
}

/// The file system id, if the NVRAM (`nvram_id`) and the flash's record (`flash`, read
/// from the anchor blocks the NVRAM names) belong to one file system; else an error
/// naming both. Images made before ids carry none on either side, and are taken as they
/// always were (fsck says nothing can check they belong together).
fn same_file_system(nvram_id: u128, flash: Option<&FsRecord>, anchors: [u32; 2]) -> Result<u128> {
    let name = |id: u128| match id {
        0 => "none (made before file system ids)".to_string(),
        id => format!("{id:032x}"),
    };
    let Some(flash) = flash else {
        return Err(FsError::NvramMismatch {
            nvram: name(nvram_id),
            flash: format!(
                "none: no file system record in blocks {} and {}, where the NVRAM's has it",
                anchors[0], anchors[1]
            ),
        });
    };
    if flash.fs_id != nvram_id {
        return Err(FsError::NvramMismatch {
            nvram: name(nvram_id),
            flash: name(flash.fs_id),
        });
    }
    Ok(nvram_id)
}

/// The NVRAM's generation and the flash's (`layout::GENERATION_OFF`), if the NVRAM is the
/// one this flash goes with: the same generation, or one ahead (a cut between the NVRAM's
/// step and the flash's). Else an error saying which of the two is an older copy.
fn same_generation(r: &mut Reader, flash: u64) -> Result<super::Generations> {
    let word = get64(&r.read(super::layout::GENERATION_OFF, 8)?, 0);
    let nvram = super::layout::generation_of(word).ok_or_else(|| {
        corrupt(format!(
            "superblock generation word {word:#018x} is damaged"
        ))
    })?;
    if nvram != flash && nvram != flash + 1 {
        return Err(FsError::NvramStale { nvram, flash });
    }
    Ok(super::Generations { nvram, flash })
}

/// An inode as the walk found it: the store's view of it, its record, and the
/// (chunk, page) pairs its offset structures publish.
pub(super) type Walked = (NvInode, Record, Vec<(u32, u32)>);

/// What the walk of the inode table found.
pub(super) struct Found2 {
    pub inodes: HashMap<Ino, Walked>,
    pub extents: Vec<(u64, u64)>,
}

/// Whether `off .. off + len` is a unit-aligned range inside the heap.
pub(super) fn heap_ok(regions: &Regions, off: u64, len: u64) -> bool {
    off >= regions.heap_off
        && off.is_multiple_of(UNIT)
        && off.saturating_add(len) <= regions.heap_end
}

/// Reads the offset chain of `ino` that starts at `first` into `n` (its `blocks`),
/// checking every pointer; `seen_at` catches structures reached twice. Returns the
/// published (chunk, page) pairs, in order.
pub(super) fn read_chain(
    r: &mut Reader,
    regions: &Regions,
    ino: Ino,
    first: u64,
    pages: u64,
    seen_at: &mut HashSet<u64>,
    n: &mut NvInode,
) -> Result<Vec<(u32, u32)>> {
    let mut o = first;
    let mut last: Option<u32> = None;
    let mut slots = Vec::new();
    while o != 0 {
        if !heap_ok(regions, o, OFFSETS_BYTES) || !seen_at.insert(o) {
            return Err(corrupt(format!(
                "object {ino}: offset chain points at {o}, outside the heap or seen twice"
            )));
        }
        let s = r.read(o, OFFSETS_BYTES)?;
        let (first_chunk, owner) = (get32(&s, 8), get32(&s, 12));
        let k = first_chunk / SLOTS;
        if first_chunk % SLOTS != 0 || owner != ino || last.is_some_and(|l| l >= k) {
            return Err(corrupt(format!(
                "object {ino}: offset structure at {o} is out of order or not its own"
            )));
        }
        last = Some(k);
        for i in 0..SLOTS {
            let p = get32(&s, (OFFSETS_HEAD + 4 * u64::from(i)) as usize);
            if p == NO_PAGE {
                continue;
            }
            if p != LOST_PAGE && u64::from(p) >= pages {
                return Err(corrupt(format!("object {ino}: page {p} is off the device")));
            }
            slots.push((first_chunk + i, p));
        }
        n.blocks.insert(k, o);
        o = get64(&s, 0);
    }
    n.loaded = true;
    Ok(slots)
}

/// Reads bucket `b`'s chain of inodes: (object, inode offset) each, in order.
pub(super) fn read_bucket(r: &mut Reader, regions: &Regions, b: u64) -> Result<Vec<(Ino, u64)>> {
    let mut at = get64(&r.read(regions.bucket_word(b), 8)?, 0);
    let mut chain = Vec::new();
    let most = (regions.heap_end - regions.heap_off) / INODE_BYTES;
    while at != 0 {
        if !heap_ok(regions, at, INODE_BYTES) || chain.len() as u64 > most {
            return Err(corrupt(format!(
                "inode chain {b} points at offset {at}, outside the heap, or loops"
            )));
        }
        let i = r.read(at, 16)?;
        let ino = inode_number(get64(&i, 0), b, at)?;
        chain.push((ino, at));
        at = get64(&i, 8);
    }
    Ok(chain)
}

/// The object number an inode at `at`, on chain `b`, holds, if it may.
fn inode_number(raw: u64, b: u64, at: u64) -> Result<Ino> {
    // The high half counts hard links (`tree`).
    let raw = raw & 0xffff_ffff;
    Ino::try_from(raw)
        .ok()
        .filter(|&x| x != 0 && bucket_of(x) == b)
        .ok_or_else(|| corrupt(format!("inode at {at} has number {raw}, not of chain {b}")))
}

/// An inode and its record, read and checked.
pub(super) struct InodeRead {
    pub ino: Ino,
    /// The next inode in its chain (or on the dying list).
    pub next: u64,
    /// Where its record is.
    pub record: Extent,
    /// Its first offset structure (0: none).
    pub first: u64,
    pub rec: Record,
    /// The inode as read: its tree words (`tree`) are read from here.
    pub bytes: Vec<u8>,
}

impl InodeRead {
    /// The store's view of it, offsets not read.
    pub(super) fn nv_inode(&self, at: u64) -> NvInode {
        NvInode::new(at, &self.rec, self.first == 0)
    }
}

/// The inode at `at` and its record, read and checked (on chain `b` if given).
pub(super) fn read_inode(
    r: &mut Reader,
    regions: &Regions,
    chunk_bytes: u32,
    at: u64,
    b: Option<u64>,
) -> Result<InodeRead> {
    let bytes = r.read(at, INODE_BYTES)?;
    parse_inode(r, regions, chunk_bytes, at, b, bytes)
}

/// `read_inode` of an inode already read (`bytes`): its record is read and checked.
pub(super) fn parse_inode(
    r: &mut Reader,
    regions: &Regions,
    chunk_bytes: u32,
    at: u64,
    b: Option<u64>,
    bytes: Vec<u8>,
) -> Result<InodeRead> {
    let raw = get64(&bytes, 0);
    let ino = match b {
        Some(b) => inode_number(raw, b, at)?,
        None => Ino::try_from(raw & 0xffff_ffff)
            .ok()
            .filter(|&x| x != 0)
            .ok_or_else(|| corrupt(format!("inode at {at} has number {raw}")))?,
    };
    let (next, rec_off, first) = (get64(&bytes, 8), get64(&bytes, 16), get64(&bytes, 24));
    if !heap_ok(regions, rec_off, UNIT) {
        return Err(corrupt(format!(
            "object {ino}: record pointer {rec_off} is bad"
        )));
    }
    let head = r.read(rec_off, 8)?;
    let len = u64::from(u16::from_le_bytes([head[0], head[1]]));
    if len < 8
        || len > u64::from(chunk_bytes)
        || !heap_ok(regions, rec_off, record_bytes(len as usize))
    {
        return Err(corrupt(format!("object {ino}: record length {len} is bad")));
    }
    let rec_bytes = r.read(rec_off, len)?;
    let rec = Record::decode(&rec_bytes)
        .ok_or_else(|| corrupt(format!("object {ino}: record fails its checksum")))?;
    if first != 0 && !heap_ok(regions, first, OFFSETS_BYTES) {
        return Err(corrupt(format!(
            "object {ino}: offset chain points at {first}, outside the heap"
        )));
    }
    let record = Extent {
        off: rec_off,
        bytes: record_bytes(len as usize),
    };
    Ok(InodeRead {
        ino,
        next,
        record,
        first,
        rec,
        bytes,
    })
}

/// Walks the inode table: every inode, its record and (with `files`) its offset chain;
/// without, only the chains of objects other than regular files (symlink targets and
/// attribute sets are read with their object), the files' left for their first use.
pub(super) fn walk(
    r: &mut Reader,
    regions: &Regions,
    chunk_bytes: u32,
    pages: u64,
    files: bool,
) -> Result<Found2> {
    let heads = r.read(regions.buckets_off, 8 * BUCKETS)?;
    let mut seen_at: HashSet<u64> = HashSet::new();
    let mut out = Found2 {
        inodes: HashMap::new(),
        extents: Vec::new(),
    };
    for b in 0..BUCKETS {
        let mut at = get64(&heads, 8 * b as usize);
        while at != 0 {
            if !heap_ok(regions, at, INODE_BYTES) || !seen_at.insert(at) {
                return Err(corrupt(format!(
                    "inode chain {b} points at offset {at}, outside the heap or seen twice"
                )));
            }
            let i = read_inode(r, regions, chunk_bytes, at, Some(b))?;
            let (ino, next, first) = (i.ino, i.next, i.first);
            if out.inodes.contains_key(&ino) {
                return Err(corrupt(format!("object {ino} has two inodes")));
            }
            out.extents.push((at, INODE_BYTES));
            out.extents.push((i.record.off, i.record.bytes));
            let mut n = i.nv_inode(at);
            let rec = i.rec;
            let slots = if files || rec.kind != crate::types::Kind::File {
                read_chain(r, regions, ino, first, pages, &mut seen_at, &mut n)?
            } else {
                Vec::new()
            };
            out.extents
                .extend(n.blocks.iter().map(|(_, o)| (o, OFFSETS_BYTES)));
            at = next;
            out.inodes.insert(ino, (n, rec, slots));
        }
    }
    out.extents.sort_unstable();
    for w in out.extents.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            return Err(corrupt(format!(
                "structures overlap at NVRAM offset {}",
                w[1].0
            )));
        }
    }
    Ok(out)
}

/// The runs of set bits of the heap bitmap, but for the units of `except`, as (offset,
/// bytes) extents in order.
fn taken_extents(regions: &Regions, bitmap: &[u8], except: &[Extent]) -> Vec<(u64, u64)> {
    let mut bits: Vec<u64> = (0..bitmap.len() / 8)
        .map(|w| get64(bitmap, 8 * w))
        .collect();
    for e in except {
        for i in regions.units_of(e.off, e.bytes) {
            bits[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }
    let mut out: Vec<(u64, u64)> = Vec::new();
    for i in 0..regions.units() {
        if bits[(i / 64) as usize] & (1 << (i % 64)) == 0 {
            continue;
        }
        let off = regions.heap_off + i * UNIT;
        match out.last_mut() {
            Some(last) if last.0 + last.1 == off => last.1 += UNIT,
            _ => out.push((off, UNIT)),
        }
    }
    out
}

/// Reads the block information table into `fs.blocks` (blocks in use are closed: where
/// their last page is, nothing says) and returns the pages it calls valid, in blocks in
/// use.
fn block_table<F: Flash>(
    r: &mut Reader,
    regions: &Regions,
    fs: &mut FileSystem<F>,
) -> Result<Vec<u32>> {
    let ppb = fs.layout.pages_per_block;
    let table = regions.decode_table(&r.read(TABLE_OFF, regions.table_bytes())?);
    if let Some((b, i)) = table.bad_bits.first() {
        return Err(corrupt(format!(
            "block {b}, page {i}: page state bits 0b10"
        )));
    }
    for b in 0..fs.layout.blocks {
        let w = table.status[b as usize];
        let state = table
            .block(b)
            .ok_or_else(|| corrupt(format!("block {b} has status word {w:#x}")))?;
        match state {
            NvBlock::Erased => {}
            NvBlock::InUse => {
                fs.blocks.set_state(b, BlockState::Full);
                fs.blocks.update(b, |x| x.set_next_page(ppb));
            }
            NvBlock::Bad => fs.blocks.set_state(b, BlockState::Bad),
            NvBlock::Anchor => fs.blocks.set_state(b, BlockState::Anchor),
        }
    }
    Ok(table.valid)
}

/// How a mount learns what the NVRAM holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// A clean unmount's saved index, if it left one that checks (else `Live`).
    Saved,
    /// The inodes in place, read when a call first reaches them: hash chains, child
    /// lists and the log region's counts (`lazy`).
    Live,
    /// Every inode and record read at mount: what `Live` reads is damaged, or files
    /// hold fallocated chunks (their reservations count from the mount on).
    Walk,
}

/// Mounts the file system whose metadata is in `nv` over `dev`.
pub(crate) fn mount<F: Flash>(nv: Nvram, dev: F, options: &MountOptions) -> Result<FileSystem<F>> {
    mount_via(nv, dev, options, Via::Saved)
}

/// `mount`, the NVRAM read `via` this (a damaged saved state or tree falls back to the
/// next way, the walk last: it reports what is damaged).
fn mount_via<F: Flash>(
    mut nv: Nvram,
    dev: F,
    options: &MountOptions,
    via: Via,
) -> Result<FileSystem<F>> {
    let mut r = Reader {
        nv: &mut nv,
        patch: HashMap::new(),
    };
    let (sb, config) = superblock(&mut r, &dev)?;
    let mut fs = FileSystem::empty(dev, config, Arc::clone(&options.clock))?;
    fs.read_only = options.read_only;
    fs.anchors.blocks = sb.anchors;
    // The flash reads of the mount, a fixed few in the anchor blocks: the record says
    // which file system the flash holds, the anchor log which NVRAM generation.
    let hint = layout::anchor_hint_of(get64(&r.read(layout::ANCHOR_HINT_OFF, 8)?, 0));
    let (record, flash_generation) = fs.minv_anchors(sb.anchors, hint)?;
    fs.anchors.fs_id = same_file_system(sb.fs_id, record.as_ref(), sb.anchors)?;
    let generations = same_generation(&mut r, flash_generation)?;
    let regions = Regions::new(
        fs.layout.blocks,
        fs.layout.pages_per_block,
        r.nv.size_bytes(),
    )?;
    let log = super::redo::read(r.nv, |o| regions.loggable(o)).map_err(corrupt)?;
    if let Some(entries) = &log {
        r.patch = entries.iter().copied().collect();
    }

    // Block information: status, and the pages published.
    let valid = block_table(&mut r, &regions, &mut fs)?;
    let pages = regions.pages();
    let high_water = get64(&r.read(HIGH_WATER_OFF, 8)?, 0);
    let numbers_end = u64::from(fs.layout.tags.max_obj()) + HIGH_WATER_STEP + 1;
    if high_water > numbers_end {
        return Err(corrupt(format!(
            "object number high-water mark {high_water} is past the last number ({})",
            fs.layout.tags.max_obj()
        )));
    }
    let serial_mark = get64(&r.read(SERIAL_OFF, 8)?, 0);
    // After a clean unmount (no transaction in the log, no inode left dying), what it
    // saved spares the walk: objects are read when a call first reaches them (see
    // `lazy`).
    let dying = get64(&r.read(DYING_OFF, 8)?, 0);
    let saved = match &log {
        None if via == Via::Saved && dying == 0 => super::save::read(&mut r, &regions, pages)?,
        _ => None,
    };
    // The heap from its bitmap, as after a crash (a fixed read, however fragmented the
    // heap), with the state's own room taken (it takes no bits).
    let saved = match saved {
        Some(s) if s.next_serial > 0 => {
            let bitmap = r.read(regions.bitmap_off, regions.bitmap_bytes())?;
            let mut taken = taken_extents(&regions, &bitmap, &[]);
            let i = taken.partition_point(|&(o, _)| o < s.off);
            let clear = |e: Option<&(u64, u64)>, lo: u64, hi: u64| {
                e.is_none_or(|&(o, n)| o + n <= lo || o >= hi)
            };
            let (lo, hi) = (s.off, s.off + s.bytes);
            let free = clear(i.checked_sub(1).and_then(|j| taken.get(j)), lo, hi)
                && clear(taken.get(i), lo, hi);
            free.then(|| {
                taken.insert(i, (s.off, s.bytes));
                let heap = Heap::rebuild(regions.heap_off, regions.heap_end, &taken);
                (s, heap)
            })
        }
        _ => None,
    };
    drop(r);
    if let Some((s, heap)) = saved {
        for &p in &valid {
            fs.blocks.set_valid(p);
        }
        let mut store = Minv::new(nv, regions, heap, high_water, serial_mark);
        store.generations = generations;
        store.lazy = Some(super::lazy::Lazy::saved(&s));
        // From the first change on, the state no longer describes the NVRAM: a crash must
        // not use it, so a writable mount clears the word before it changes anything
        // (and not before: a mount that writes nothing leaves the NVRAM as it found it).
        // The state's room stays taken while objects are still read from it.
        store.clean_word = !options.read_only;
        store.reserved_files = s.reserved.len() as u64;
        let facts = Counts {
            visible: s.visible,
            next_serial: s.next_serial,
        };
        return match mount_lazy(&mut fs, store, facts, s.reserved) {
            Ok(()) => Ok(fs),
            // The index is damaged where the mount reads it: the tree needs none of it.
            Err(FsError::CorruptNvram(_)) => {
                let (dev, nv) = fs.into_parts();
                mount_via(nv.expect("the NVRAM"), dev, options, Via::Live)
            }
            Err(e) => Err(e),
        };
    }

    let mut r = Reader {
        nv: &mut nv,
        patch: log.iter().flatten().copied().collect(),
    };
    let inodes = get64(&r.read(INODES_OFF, 8)?, 0);
    let (visible, all) = (inodes & 0xffff_ffff, inodes >> 32);
    let reserved = get64(&r.read(RESERVED_OFF, 8)?, 0);
    let most = regions.most_inodes();
    // Versions stay far from the end of u64 (`take_serial` adds to them).
    let counts_ok = visible <= all && all <= most && serial_mark < 1 << 62;
    let live = via != Via::Walk && reserved == 0 && counts_ok;
    // The files' offset structures are not read: which pages are published the page
    // states say, what the heap holds its bitmap, and a file's chunk map is read when
    // the file is first used (`Minv::load_map`).
    let found = match live {
        true => None,
        false => Some(walk(&mut r, &regions, fs.layout.chunk_bytes, pages, false)?),
    };
    // A state this mount did not use (damaged, or its index was) must not outlive the
    // first change either.
    let word_set = get64(&r.read(super::save::CLEAN_OFF, 8)?, 0) != 0;
    let bitmap = r.read(regions.bitmap_off, regions.bitmap_bytes())?;
    // What inodes left dying hold (all, some or none of it marked) is free once the mount
    // finishes them.
    let dying = super::pages::dying_list(&mut r, &regions, fs.layout.chunk_bytes, pages)?;
    let dying_extents: Vec<Extent> = dying.iter().flat_map(|d| d.extents.clone()).collect();
    let heap = Heap::rebuild(
        regions.heap_off,
        regions.heap_end,
        &taken_extents(&regions, &bitmap, &dying_extents),
    );
    drop(r);
    let mut store = Minv::new(nv, regions, heap, high_water, serial_mark);
    store.generations = generations;
    store.clean_word = word_set && !options.read_only;
    store.after_crash = true;
    if let Some(entries) = log {
        if options.read_only {
            store.unapplied = entries.iter().copied().collect();
        } else {
            store
                .apply(&entries)
                .and_then(|_| store.store_persist(super::layout::LOG_OFF, 0))
                .map_err(FsError::Nvram)?;
        }
    }
    // Inodes a crash left dying: their pages become dirty before anything else (the walk
    // did not reach them, so their structures are free heap already).
    if !options.read_only {
        store.drain_dying(&fs)?;
    }
    // Published pages, as the page states say (those of inodes left dying are nobody's).
    for &p in &valid {
        fs.blocks.set_valid(p);
    }
    for p in dying.into_iter().flat_map(|d| d.pages) {
        fs.blocks.invalidate(p);
    }
    let Some(found) = found else {
        // The tree in place: nothing more to read now (see `lazy`).
        store.lazy = Some(super::lazy::Lazy::live(all));
        let facts = Counts {
            visible,
            next_serial: serial_mark.max(1),
        };
        return match mount_lazy(&mut fs, store, facts, Vec::new()) {
            Ok(()) => Ok(fs),
            // The tree or a count is damaged where the mount reads it: the walk says where.
            Err(FsError::CorruptNvram(_)) => {
                let (dev, nv) = fs.into_parts();
                mount_via(nv.expect("the NVRAM"), dev, options, Via::Walk)
            }
            Err(e) => Err(e),
        };
    };
    let mut seen = Vec::with_capacity(found.inodes.len());
    let mut order: Vec<Ino> = found.inodes.keys().copied().collect();
    order.sort_unstable();
    let mut inodes = found.inodes;
    let mut published: HashMap<Ino, Vec<(u32, u32)>> = HashMap::new();
    let mut owned: HashSet<u32> = HashSet::new();
    for ino in order {
        let (n, rec, slots) = inodes.remove(&ino).expect("listed");
        for &(_, p) in &slots {
            if p != LOST_PAGE && !owned.insert(p) {
                return Err(corrupt(format!("page {p} is published twice")));
            }
        }
        published.insert(ino, slots);
        seen.push(Seen {
            pno: NO_PAGE,
            what: Found::Header {
                obj: ino,
                version: rec.version,
                facts: rec.facts(ino),
                record: Some(Box::new(rec)),
            },
        });
        store.inodes.insert(ino, n);
    }
    fs.rebuild(seen)?;
    // Versions below the mark may have been given since (a record cut short).
    fs.next_serial = fs.next_serial.max(serial_mark);
    // Numbers below the mark may have named objects since deleted: never again.
    fs.next_ino = fs
        .next_ino
        .max(u32::try_from(high_water).unwrap_or(u32::MAX));
    install_chunks(&mut fs, &mut store, &published)?;
    // Files with fallocated chunks: their reservations count against free space from now
    // on, which needs their maps (as after a clean unmount, `mount_lazy`).
    let mut reserved: Vec<Ino> = fs
        .reserves
        .inos()
        .filter(|i| fs.unloaded.contains(i))
        .collect();
    reserved.sort_unstable();
    for ino in reserved {
        store.load_map_inner(&mut fs, ino)?;
    }
    fs.mount_method = MountMethod::Nvram;
    let ns = store.nv.take_elapsed_ns();
    fs.dev.get_mut().advance_clock_ns(ns);
    fs.metadata = Some(Box::new(store));
    fs.recount_reserves();
    Ok(fs)
}

/// What a mount that reads objects later must know of them all at once.
struct Counts {
    /// Objects a listing shows, root included (`statfs`).
    visible: u64,
    /// The next record version to give.
    next_serial: u64,
}

/// The mount that reads objects when a call first reaches them (`lazy`), from a clean
/// unmount's saved index or from the tree in place: the root is put in RAM, and the files
/// with fallocated chunks (`reserved`: their reservations count against free space at
/// once); every other object waits for the first call that reaches it.
fn mount_lazy<F: Flash>(
    fs: &mut FileSystem<F>,
    mut store: Minv,
    counts: Counts,
    reserved: Vec<Ino>,
) -> Result<()> {
    fs.next_serial = counts.next_serial;
    fs.next_ino =
        (crate::types::ROOT_INO + 1).max(u32::try_from(store.high_water).unwrap_or(u32::MAX));
    fs.lazy_pending = true;
    fs.lazy_uncounted = counts.visible;
    fs.mount_method = MountMethod::Nvram;
    let ns = store.nv.take_elapsed_ns();
    fs.dev.get_mut().advance_clock_ns(ns);
    fs.metadata = Some(Box::new(store));
    fs.present(crate::types::ROOT_INO)?;
    if fs
        .objects
        .get(&crate::types::ROOT_INO)
        .is_none_or(|o| o.kind != crate::types::Kind::Dir)
    {
        return Err(corrupt("the NVRAM has no root directory"));
    }
    for ino in reserved {
        fs.present(ino)?;
        fs.map(ino)?;
    }
    fs.recount_reserves();
    Ok(())
}

/// Chunk maps from the published pages: a page counts if it lies within its file's size
/// and in a block in use; one past the end is stale (a truncate cut short), cleared by the
/// object's next header write (a writable mount makes one at once); one inside the file in
/// a block not in use is damage (no cut leaves it).
fn install_chunks<F: Flash>(
    fs: &mut FileSystem<F>,
    store: &mut Minv,
    published: &HashMap<Ino, Vec<(u32, u32)>>,
) -> Result<()> {
    let c = u64::from(fs.layout.chunk_bytes);
    let mut inos: Vec<Ino> = store.inodes.keys().copied().collect();
    inos.sort_unstable();
    for ino in inos {
        let n = &store.inodes[&ino];
        // Slots past a file's end: what a cut truncate leaves, or damage (`leftover`).
        if let Some((kind, size)) = fs.objects.get(&ino).map(|o| (o.kind, o.size)) {
            let past = published.get(&ino).into_iter().flatten();
            for &(chunk, p) in past.filter(|&&(chunk, _)| u64::from(chunk) * c >= size) {
                if crate::rebuild::has_data(kind) && !super::leftover(fs, ino, chunk, p)? {
                    return Err(corrupt(format!(
                        "object {ino}: chunk {chunk}, past the file's end, is published at \
                         page {p}, which holds another chunk"
                    )));
                }
            }
        }
        let Some(o) = fs.objects.get_mut(&ino) else {
            // Recovery did not keep it: the pages it publishes are nobody's in RAM (a
            // writable mount removes its inode, marking them dirty).
            let slots = match n.loaded {
                true => published.get(&ino).cloned().unwrap_or_default(),
                false => store.nv_load(ino).unwrap_or_default(),
            };
            for (_, p) in slots {
                if p != LOST_PAGE {
                    fs.blocks.invalidate(p);
                }
            }
            store.dead.push(ino);
            continue;
        };
        if !n.loaded {
            // Read when the file is first used (`Minv::load_map`).
            fs.unloaded.insert(ino);
            continue;
        }
        let slots = published.get(&ino).map_or(&[][..], |v| &v[..]);
        let mut stale = !crate::rebuild::has_data(o.kind) && !slots.is_empty();
        let mut skipped = Vec::new();
        if crate::rebuild::has_data(o.kind) {
            for &(chunk, p) in slots {
                let inside = u64::from(chunk) * c < o.size;
                let ok = p == LOST_PAGE
                    || fs.blocks.get(fs.layout.block_of(p)).state == BlockState::Full;
                if inside && !ok {
                    // Not what a cut leaves (see `Minv::load_map`): damage.
                    return Err(corrupt(format!(
                        "object {ino}: chunk {chunk} is published at page {p}, in a block \
                         not in use"
                    )));
                }
                if !inside {
                    stale = true;
                    skipped.push(chunk);
                    // The page states call it valid (a slot publishes it); RAM does not.
                    if p != LOST_PAGE {
                        fs.blocks.invalidate(p);
                    }
                    continue;
                }
                o.chunks.set(chunk, p);
                o.saw_chunk(chunk);
                // Valid already: the page states say so.
                if p != LOST_PAGE && !fs.blocks.is_valid(p) {
                    fs.blocks.set_valid(p);
                }
            }
            // RAM's map is the published one but for the slots skipped: note those as
            // changed, so the next header write (or erase) clears them, and every change
            // from here on.
            fs.track(ino);
            for chunk in skipped {
                fs.touch_chunk(ino, chunk);
            }
        }
        if stale {
            fs.repairs.push(ino);
        }
    }
    Ok(())
}
