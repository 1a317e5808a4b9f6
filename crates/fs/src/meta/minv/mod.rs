//! MiNV's metadata store (DESIGN axis 1; paper: minvfs-nvram-metadata): every piece of
//! metadata lives in byte-addressable NVRAM, flash holds file data only, and a mount reads
//! the NVRAM and, of flash, only the anchor blocks (a fixed few pages): the file system
//! record, whose id must be the one the NVRAM's superblock holds, so an NVRAM is never used
//! with another file system's flash; and the anchor log's newest NVRAM generation, which
//! must be the superblock's (or one behind it), so an older copy of the NVRAM is never
//! used with the flash that has moved on (`layout::GENERATION_OFF`).
//!
//! The structures (layout in [`layout`]): a superblock, each flash block's information (a
//! status word and the paper's 2 bits per page, kept exact: [`pages`]), an inode hash
//! table, fixed-size inodes linked into the directory hierarchy as the paper's are (child
//! lists, hard link counts, attribute sets: [`tree`]), each object's header record (the
//! same record the flash log writes as a header page: names, attributes, size), and per
//! file a chain of fixed-size file-offset structures mapping chunk indexes to flash pages.
//! The NVRAM manager ([`heap`]) is rebuilt at every mount from its allocation bitmap
//! ([`bitmap`]). After a clean unmount the mount also takes what the unmount saved
//! ([`save`], a namespace [`index`]): it reads no inode, record or offset structure, and an
//! object is read the first time a call reaches it ([`lazy`]). After a crash the mount
//! walks the inodes and records (the namespace), not the files' offsets. Either way a
//! file's offsets are read the first time the file is used.
//!
//! Used in place, as the paper's: of an object, the store keeps in DRAM only where its
//! inode is and where its offset structures are ([`offsets`]); its record's extent, the
//! page numbers its structures publish and the inode chains are read from the NVRAM when
//! a header write, a delete or an erase needs them (each read timed). The file system's
//! own object (names, attributes, the chunk map it reads by) stays in DRAM, as YAFFS's
//! does. A full NVRAM refuses the call that needs room ([`room`]).
//!
//! Crash rules (DESIGN.md, after NOVA):
//! - payload before pointer: a record, an inode or an offset structure is written and
//!   persisted while unreachable, then published by one aligned 8-byte store (a record
//!   pointer, a chain link, a bucket head, a pair of page slots), itself persisted;
//! - names live in the child (upward directories, as in the flash log's headers), so
//!   create, rename and unlink change one inode's record pointer, with the tree's words
//!   it moves, and a rename over an existing name also drops the victim: all through the
//!   redo log ([`redo`]), one transaction;
//! - truncate publishes the record with the new size first and clears the page slots past
//!   it after; a mount ignores (and a writable mount clears) slots past a file's size, so a
//!   crash between the two finishes the truncate;
//! - a data page is published (its slot stored) only after it is programmed, at the
//!   object's next header write (fsync, close, sync, a namespace change), or before the
//!   block holding the page it replaces is erased, whichever comes first: a crash loses the
//!   writes not yet published, never published data;
//! - block status: "in use" is persisted before a block's first page is programmed, so a
//!   mount never hands out a block that holds data; "erased" may lag (a block still marked
//!   in use is just cleaned again);
//! - the tree: a record's place in it (its directory's child list, its file's link count,
//!   its owner's set, the records of objects it gives names to) changes in the record
//!   pointer's own transaction; a removal takes along what cannot outlive it, so no crash
//!   leaves an object without a name or an owner ([`tree`]);
//! - page states: a page is valid exactly while a reachable slot publishes it, changed in
//!   the slot's own redo transaction (a new inode's, in the one that links it; a removed
//!   one's, in the one that unchains it, or through the dying list: [`pages`]).
//!
//! Data pages still carry their tags in the OOB (owner, chunk, serial): cleaning reads a
//! victim's valid pages and needs to know whose they are. A mount never reads them.

mod bitmap;
mod check;
mod heap;
mod index;
pub mod layout;
mod lazy;
mod offsets;
mod pages;
mod recover;
mod redo;
mod room;
mod save;
#[cfg(test)]
mod tests;
mod tree;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use nandkit_flash::Flash;
use nandkit_nvram::{Nvram, NvramError, NvramStats};

use self::heap::Heap;
use self::layout::{
    bucket_of, record_bytes, Regions, INODE_BYTES, INODE_NEXT, INODE_OFFSETS, INODE_RECORD,
    OFFSETS_BYTES, OFFSETS_HEAD, SLOTS,
};
use super::{BlockEvent, MetadataStore};
use crate::error::{FsError, Result};
use crate::format::Record;
use crate::fs::{FileSystem, MountMethod, MountOptions};
use crate::object::{LOST_PAGE, NO_PAGE};
use crate::rebuild::has_data;
use crate::types::{Ino, Kind, ROOT_INO};

pub use self::layout::{
    min_nvram_bytes, model_constants, object_bytes, SpaceConstants, MAX_NVRAM_BYTES, SPACE,
};
pub(crate) use recover::mount;

/// An allocation in the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    pub off: u64,
    pub bytes: u64,
}

/// What the store keeps in DRAM of one object's NVRAM structures: where its inode is,
/// and where its offset structures are. Its record (where, how long) and the page numbers
/// its structures hold are read from the NVRAM when needed (`record_of`, `slot`,
/// `published_from`), not mirrored.
#[derive(Debug)]
pub(crate) struct NvInode {
    pub at: u64,
    /// Offset structures by index (chunk / SLOTS).
    pub blocks: offsets::Offsets,
    /// Whether `blocks` was read: a mount after a clean unmount leaves a file's offsets
    /// in the NVRAM until the file is used.
    pub loaded: bool,
    /// Where it hangs in the namespace tree, as its NVRAM record says (`tree`).
    pub place: tree::Place,
    /// Its NVRAM record holds fallocated chunks (counted at `layout::RESERVED_OFF`).
    pub reserved: bool,
}

impl NvInode {
    /// The inode at `at` whose NVRAM record is `rec`, its offsets not read (`loaded`: it
    /// has none).
    pub(super) fn new(at: u64, rec: &Record, loaded: bool) -> NvInode {
        NvInode {
            at,
            blocks: Default::default(),
            loaded,
            place: tree::Place::of(rec),
            reserved: !rec.reserve.is_empty(),
        }
    }

    /// Back to "offsets not read" (a chain that failed to read or check).
    fn unread(&mut self) {
        self.blocks.clear();
        self.loaded = false;
    }
}

pub struct Minv {
    nv: Nvram,
    regions: Regions,
    heap: Heap,
    inodes: HashMap<Ino, NvInode>,
    /// The saved namespace index objects are still read from (see `lazy`).
    lazy: Option<lazy::Lazy>,
    /// Inodes a mount found for objects that recovery did not keep (removed by a writable
    /// mount once its repairs are done).
    dead: Vec<Ino>,
    /// The object-number high-water mark as stored (see `layout::HIGH_WATER_OFF`).
    high_water: u64,
    /// The record-version high-water mark as stored (see `layout::SERIAL_OFF`).
    serial_mark: u64,
    /// Flash pages of the device.
    pages: u64,
    /// The saved state's word (`save::CLEAN_OFF`) is still set in the NVRAM: a writable
    /// mount after a clean unmount clears it right before its first NVRAM write, not at
    /// mount, so a mount that writes nothing (it met damage, say) leaves the NVRAM as
    /// fsck last saw it.
    clean_word: bool,
    /// Chunks header writes compared between RAM's maps and the published slots (see
    /// `slot_changes`): what a close costs in host time grows with this.
    slots_compared: u64,
    /// What deferred header writes will need (`room`).
    promises: room::Promises,
    /// Files with fallocated chunks, as last seen (the saved state lists them).
    reserved_files: u64,
    /// Mounted after a crash (no saved state): a file's chunk map, read on first use, may
    /// hold slots a cut left past its end or in a block no longer in use, which the next
    /// header write clears (after a clean unmount none can be left: any is damage).
    after_crash: bool,
    /// A read-only mount's view of a committed redo transaction it did not apply: what it
    /// reads later (a file's offsets) it reads through the same stores the mount did.
    unapplied: HashMap<u64, u64>,
    /// The NVRAM's generation and the flash's (`layout::GENERATION_OFF`).
    generations: Generations,
}

/// The generation the NVRAM's superblock holds, and the newest the flash's anchor log
/// records: equal, or the NVRAM's one ahead (its step is persisted first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Generations {
    pub nvram: u64,
    pub flash: u64,
}

/// Maps NVRAM failures; a lost power marks the file system dead like a flash power cut.
fn nv_err<F: Flash>(fs: &FileSystem<F>, e: NvramError) -> FsError {
    if matches!(e, NvramError::PowerLost) {
        fs.dead.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    FsError::Nvram(e)
}

impl Minv {
    /// An NVRAM freshly formatted for `fs` (mkfs): superblock, every block's status, an
    /// empty inode table. The root's inode comes with the root's first header write.
    pub(crate) fn format<F: Flash>(mut nv: Nvram, fs: &FileSystem<F>) -> Result<Minv> {
        if nv.size_bytes() > MAX_NVRAM_BYTES {
            return Err(FsError::Invalid(
                "an NVRAM larger than 1 GiB (a mount reads its allocation bitmap whole)",
            ));
        }
        let regions = Regions::new(fs.layout.blocks, fs.layout.pages_per_block, nv.size_bytes())?;
        let sb = layout::Superblock::for_layout(
            &fs.layout,
            fs.anchors.blocks,
            nv.size_bytes(),
            fs.anchors.fs_id,
            &fs.config,
        )?;
        let mut head = sb.encode();
        head.resize(regions.heap_off as usize, 0);
        for b in 0..fs.layout.blocks {
            let w = regions.block_word(b) as usize;
            head[w..w + 8]
                .copy_from_slice(&(status_of(fs.blocks.get(b).state) as u64).to_le_bytes());
        }
        nv.write(0, &head).map_err(|e| nv_err(fs, e))?;
        nv.persist(0, regions.heap_off).map_err(|e| nv_err(fs, e))?;
        let heap = Heap::rebuild(regions.heap_off, regions.heap_end, &[]);
        Ok(Minv::new(nv, regions, heap, 0, 0))
    }

    /// A store over `nv` as mkfs or a mount starts it: nothing in RAM yet, the two
    /// high-water marks as the NVRAM holds them.
    pub(super) fn new(
        nv: Nvram,
        regions: Regions,
        heap: Heap,
        high_water: u64,
        serial_mark: u64,
    ) -> Minv {
        Minv {
            heap,
            nv,
            regions,
            inodes: HashMap::new(),
            lazy: None,
            dead: Vec::new(),
            high_water,
            serial_mark,
            pages: regions.pages(),
            clean_word: false,
            slots_compared: 0,
            promises: room::Promises::default(),
            reserved_files: 0,
            after_crash: false,
            unapplied: HashMap::new(),
            generations: Generations::default(),
        }
    }

    /// Moves the NVRAM and the flash to the next generation together (a writable mount,
    /// a clean unmount), so a copy of the NVRAM taken before no longer mounts with this
    /// flash. The NVRAM's word is persisted first, then the flash's entry programmed: a
    /// cut between leaves the NVRAM one ahead, which a mount accepts and the next step
    /// completes first (so the two are never further apart). An anchor block that cannot
    /// take the entry leaves them as they are (one ahead at most, still accepted).
    pub(crate) fn next_generation<F: Flash>(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        let g = self.generations;
        if g.nvram == g.flash + 1 {
            if !fs.append_generation(g.nvram)? {
                return Ok(());
            }
            self.generations.flash = g.nvram;
            self.store_anchor_hint(fs)?;
        }
        let next = self.generations.nvram + 1;
        let word = layout::generation_word(next);
        // Not through `store`: the superblock is not what a saved state describes.
        self.nv
            .write_u64(layout::GENERATION_OFF, word)
            .and_then(|()| self.nv.persist(layout::GENERATION_OFF, 8))
            .map_err(|e| nv_err(fs, e))?;
        self.generations.nvram = next;
        if fs.append_generation(next)? {
            self.generations.flash = next;
            self.store_anchor_hint(fs)?;
        }
        Ok(())
    }

    /// Notes where the entry just appended is (`layout::ANCHOR_HINT_OFF`), so the next
    /// mount reads it without a search.
    fn store_anchor_hint<F: Flash>(&mut self, fs: &FileSystem<F>) -> Result<()> {
        let (i, page, epoch) = fs.last_anchor_entry();
        let word = layout::anchor_hint_word(i, page, epoch);
        self.nv
            .write_u64(layout::ANCHOR_HINT_OFF, word)
            .and_then(|()| self.nv.persist(layout::ANCHOR_HINT_OFF, 8))
            .map_err(|e| nv_err(fs, e))
    }

    pub fn nvram_stats(&self) -> NvramStats {
        self.nv.stats()
    }

    /// NVRAM bytes in use: the fixed regions and every heap allocation.
    pub fn bytes_in_use(&self) -> u64 {
        self.regions.fixed_bytes() + self.heap.in_use_bytes()
    }

    /// Before the first NVRAM write after a clean mount: the saved state stops describing
    /// the NVRAM, so its word goes first (persisted). Every write below comes through here.
    fn unclean(&mut self) -> std::result::Result<(), NvramError> {
        if self.clean_word {
            self.nv.write_u64(save::CLEAN_OFF, 0)?;
            self.nv.persist(save::CLEAN_OFF, 8)?;
            self.clean_word = false;
        }
        Ok(())
    }

    fn store(&mut self, off: u64, value: u64) -> std::result::Result<(), NvramError> {
        self.unclean()?;
        self.nv.write_u64(off, value)
    }

    fn store_persist(&mut self, off: u64, value: u64) -> std::result::Result<(), NvramError> {
        self.unclean()?;
        self.nv.write_u64(off, value)?;
        self.nv.persist(off, 8)
    }

    /// Writes `bytes` into a new extent and persists it (unreachable until published).
    fn write_extent(&mut self, bytes: &[u8]) -> Result<Extent> {
        let len = record_bytes(bytes.len());
        let off = self.alloc(len)?;
        let mut padded = bytes.to_vec();
        padded.resize(len as usize, 0);
        let out = self
            .unclean()
            .and_then(|_| self.nv.write(off, &padded))
            .and_then(|_| self.nv.persist(off, len));
        if let Err(e) = out {
            self.heap.release(off, len);
            return Err(FsError::Nvram(e));
        }
        Ok(Extent { off, bytes: len })
    }

    /// The store that drops `ino` from its inode chain, which is read in place (as the
    /// `pending` stores of the same transaction will leave it): the word that points at
    /// its inode (its bucket head or its predecessor's link) takes the offset of the
    /// inode after it.
    fn unchain(&mut self, ino: Ino, pending: &[(u64, u64)]) -> Result<(u64, u64)> {
        let b = bucket_of(ino);
        let bucket_word = self.regions.bucket_word(b);
        let mut r = recover::Reader {
            nv: &mut self.nv,
            patch: pending.iter().copied().collect(),
        };
        let chain = recover::read_bucket(&mut r, &self.regions, b)?;
        let i = chain.iter().position(|&(x, _)| x == ino).ok_or_else(|| {
            FsError::CorruptNvram(format!("object {ino} is missing from its inode chain"))
        })?;
        let word = match i {
            0 => bucket_word,
            _ => chain[i - 1].1 + INODE_NEXT,
        };
        let next = chain.get(i + 1).map_or(0, |&(_, at)| at);
        Ok((word, next))
    }

    /// Reads `ino`'s offset chain if the mount left it in the NVRAM (see `save`); returns
    /// the published (chunk, page) pairs it read on the way (none if it was read before).
    fn nv_load(&mut self, ino: Ino) -> Result<Vec<(u32, u32)>> {
        let Some(mut n) = self.inodes.remove(&ino) else {
            return Ok(Vec::new());
        };
        let out = if n.loaded {
            Ok(Vec::new())
        } else {
            let mut r = recover::Reader {
                nv: &mut self.nv,
                patch: self.unapplied.clone(),
            };
            let first = match r.read(n.at + INODE_OFFSETS, 8) {
                Ok(b) => layout::get64(&b, 0),
                Err(e) => {
                    self.inodes.insert(ino, n);
                    return Err(e);
                }
            };
            let mut seen = std::collections::HashSet::new();
            recover::read_chain(
                &mut r,
                &self.regions,
                ino,
                first,
                self.pages,
                &mut seen,
                &mut n,
            )
        };
        if out.is_err() {
            n.unread();
        }
        self.inodes.insert(ino, n);
        out
    }

    /// Makes the published pages of `ino` (a file whose offsets the mount left in the
    /// NVRAM) its chunk map in RAM. Every page must be one the saved state called valid,
    /// inside the file: anything else is damage, reported, and the map stays unread.
    fn load_map_inner<F: Flash>(&mut self, fs: &mut FileSystem<F>, ino: Ino) -> Result<()> {
        if self.inodes.get(&ino).is_none_or(|n| n.loaded) {
            fs.unloaded.remove(&ino);
            return Ok(());
        }
        let slots = self.nv_load(ino)?;
        let Some(size) = fs.objects.get(&ino).map(|o| o.size) else {
            return Ok(());
        };
        let c = u64::from(fs.layout.chunk_bytes);
        let mut stale = Vec::new();
        for &(chunk, p) in &slots {
            let inside = u64::from(chunk) * c < size;
            let in_use = p == LOST_PAGE
                || fs.blocks.get(fs.layout.block_of(p)).state == crate::blocks::BlockState::Full;
            // A cut may leave slots past the end (a truncate publishes the new size first),
            // never one inside the file in a block not in use: every erase and retirement
            // republishes the slots into its block first. That is damage, as anywhere
            // else a slot the page states do not back: the read fails, never reads a hole.
            if self.after_crash && !inside {
                if !leftover(fs, ino, chunk, p)? {
                    self.inodes.get_mut(&ino).expect("listed").unread();
                    return Err(FsError::CorruptNvram(format!(
                        "object {ino}: chunk {chunk}, past the file's end, is published at \
                         page {p}, which holds another chunk"
                    )));
                }
                stale.push((chunk, p));
                continue;
            }
            let known = p == LOST_PAGE || in_use && fs.blocks.is_valid(p);
            if !inside || !known {
                self.inodes.get_mut(&ino).expect("listed").unread();
                return Err(FsError::CorruptNvram(format!(
                    "object {ino}: chunk {chunk} is published at page {p}, which the page \
                     states do not call valid or lies past the file's end"
                )));
            }
        }
        let o = fs.objects.get_mut(&ino).expect("listed");
        for &(chunk, p) in &slots {
            if !stale.contains(&(chunk, p)) {
                o.chunks.set(chunk, p);
                o.saw_chunk(chunk);
            }
        }
        fs.unloaded.remove(&ino);
        // RAM's map is the published one but for stale slots: those are noted as changed,
        // so the next header write (or erase) clears them; and every change from here on.
        fs.track(ino);
        for (chunk, p) in stale {
            if p != LOST_PAGE {
                fs.blocks.invalidate(p);
            }
            fs.touch_chunk(ino, chunk);
        }
        Ok(())
    }

    /// At clean unmount, with everything persisted: saves the heap's free extents and the
    /// namespace index, then points the clean word at them (see `save`). No
    /// room in the heap: nothing is saved and the next mount reads the tree in place.
    fn save_state<F: Flash>(&mut self, fs: &FileSystem<F>) -> Result<()> {
        // The new state may go where the old one was: the old one's word goes first.
        self.unclean().map_err(|e| nv_err(fs, e))?;
        // A truncate publishes its record before RAM drops the chunks past the new end,
        // so slots past a file's end can outlive it until the file's next header write.
        // The saved state must describe every slot exactly: clear those now. A page in
        // RAM that is not published (never expected here) means no state is saved.
        let mut inos: Vec<Ino> = self
            .inodes
            .iter()
            .filter(|(_, n)| n.loaded && !n.blocks.is_empty())
            .map(|(&i, _)| i)
            .collect();
        inos.sort_unstable();
        for ino in inos {
            let (diff, compared) = self.slot_changes(fs, ino)?;
            self.slots_compared += compared;
            if !diff.set.is_empty() {
                return Ok(());
            }
            if !diff.clear.is_empty() {
                self.set_slots(fs, ino, &diff.clear)?;
            }
        }
        let Some(ns) = self.namespace(fs) else {
            return Ok(());
        };
        let bytes = record_bytes(save::state_bytes(&ns) as usize);
        let Some(off) = self.heap.alloc(bytes) else {
            return Ok(());
        };
        // The next mount takes the free space from the heap bitmap: no extents listed.
        let b = save::encode(self.pages, &ns, bytes);
        self.nv
            .write(off, &b)
            .and_then(|_| self.nv.persist(off, b.len() as u64))
            .and_then(|_| self.store_persist(save::CLEAN_OFF, off))
            .map_err(|e| nv_err(fs, e))
    }

    /// The namespace index of every object with an inode (`index`), or None if RAM and
    /// the NVRAM disagree on what exists (then nothing is saved: the next mount reads the
    /// tree in place).
    fn namespace<F: Flash>(&self, fs: &FileSystem<F>) -> Option<save::Namespace> {
        let mut inos: Vec<Ino> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        let at: HashMap<Ino, u32> = inos
            .iter()
            .enumerate()
            .map(|(i, &ino)| (ino, i as u32))
            .collect();
        let mut ns = save::Namespace {
            next_serial: fs.next_serial,
            ..Default::default()
        };
        for &ino in &inos {
            let o = fs.objects.get(&ino)?;
            let mut e = index::Entry {
                ino,
                links: fs.link_count(ino),
                xattr_set: fs
                    .xattr_sets
                    .get(&ino)
                    .copied()
                    .filter(|s| at.contains_key(s))
                    .unwrap_or(0),
                at: self.inodes[&ino].at,
                ..Default::default()
            };
            if let Some(d) = fs.dirs.get(&ino) {
                let mut kids: Vec<u32> = d
                    .unnamed
                    .iter()
                    .chain(d.index.iter().flat_map(|m| m.values()))
                    .filter_map(|k| at.get(k).copied())
                    .collect();
                kids.sort_unstable();
                kids.dedup();
                e.subdirs = o.subdirs;
                e.first_child = ns.children.len() as u32;
                e.children = kids.len() as u32;
                e.children_crc = index::children_crc(&kids);
                ns.children.extend(kids);
            }
            if o.kind.is_visible() {
                ns.visible += 1;
            }
            ns.entries.push(e);
        }
        ns.reserved = fs.reserves.inos().filter(|i| at.contains_key(i)).collect();
        ns.reserved.sort_unstable();
        Some(ns)
    }

    /// Frees an unchained inode's allocations.
    fn release_inode(&mut self, ino: Ino) {
        // A chain never read is read now, to free it; if it cannot be, its structures
        // stay taken (in the bitmap too: fsck reports them).
        let _ = self.nv_load(ino);
        self.promises.take(ino);
        let Some(n) = self.inodes.remove(&ino) else {
            return;
        };
        if let Some(l) = self.lazy.as_mut() {
            // The saved index still lists it: never from there again.
            l.gone.insert(ino);
        }
        self.heap.release(n.at, INODE_BYTES);
        // A record that cannot be read stays taken (fsck reports it).
        if let Ok(record) = self.record_at(n.at) {
            self.heap.release(record.off, record.bytes);
        }
        for (_, off) in n.blocks.iter() {
            self.heap.release(off, OFFSETS_BYTES);
        }
    }

    /// Removes an object's inode, with what goes with it (`tree::removal_group`): their
    /// unchaining and leaving the tree in the transaction (or through the dying list, see
    /// `pages`) that marks the pages they published dirty.
    fn remove_inode<F: Flash>(&mut self, fs: &mut FileSystem<F>, ino: Ino) -> Result<()> {
        let group = self
            .removal_group(&Vec::new(), ino)
            .map_err(|e| nv_err(fs, e))?;
        self.unmap_group(fs, &group)?;
        self.remove_group(fs, Vec::new(), &group)?;
        for x in group {
            self.release_inode(x);
        }
        Ok(())
    }

    /// The chunk maps of objects about to be removed, into RAM: the file system frees
    /// their pages from there when it deletes them.
    fn unmap_group<F: Flash>(&mut self, fs: &mut FileSystem<F>, group: &[Ino]) -> Result<()> {
        for &x in group {
            if fs.objects.contains_key(&x) {
                self.load_map_inner(fs, x)?;
            }
        }
        Ok(())
    }

    /// The offset structure for index `k` of `ino`, made (and linked into its chain) if
    /// missing.
    /// `linked`: the inode is in its bucket (else nothing reaches the structure until it
    /// is, and `link_new` marks its units).
    fn offsets_block<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        ino: Ino,
        k: u32,
        linked: bool,
    ) -> Result<u64> {
        let n = &self.inodes[&ino];
        if let Some(off) = n.blocks.get(k) {
            return Ok(off);
        }
        let next = n.blocks.next_after(k).unwrap_or(0);
        let pred_word = match n.blocks.before(k) {
            Some(p) => p,
            None => n.at + INODE_OFFSETS,
        };
        let mut b = vec![0xffu8; OFFSETS_BYTES as usize];
        b[0..8].copy_from_slice(&next.to_le_bytes());
        b[8..12].copy_from_slice(&(k * SLOTS).to_le_bytes());
        b[12..16].copy_from_slice(&ino.to_le_bytes());
        let ext = self.write_extent(&b)?;
        let changes = [bitmap::Change::Heap(ext, true)];
        let out = match linked {
            true => self
                .one_tx(&[(pred_word, ext.off)], &changes)
                .and_then(|tx| self.commit(&tx.expect("a structure's bits fit"))),
            false => self.store_persist(pred_word, ext.off),
        };
        if let Err(e) = out {
            self.heap.release(ext.off, ext.bytes);
            return Err(nv_err(fs, e));
        }
        let n = self.inodes.get_mut(&ino).expect("listed");
        n.blocks.insert(k, ext.off);
        Ok(ext.off)
    }

    /// Publishes page numbers for chunks of `ino` (`NO_PAGE` clears a slot): each pair of
    /// slots is one word, read from the NVRAM, changed and stored back in one transaction
    /// with the page states it changes (the new pages valid, the ones they replace dirty;
    /// see `pages`), several pairs to a transaction.
    fn set_slots<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        ino: Ino,
        changes: &[(u32, u32)],
    ) -> Result<()> {
        self.set_slots_with(fs, ino, changes, true)
    }

    /// `set_slots`; `states` false stores the slots alone (an inode not linked yet).
    fn set_slots_with<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        ino: Ino,
        changes: &[(u32, u32)],
        states: bool,
    ) -> Result<()> {
        // (block index, word index) -> the changes in that word.
        let mut words: BTreeMap<(u32, u32), Vec<(u32, u32)>> = BTreeMap::new();
        for &(c, v) in changes {
            let k = c / SLOTS;
            if v == NO_PAGE && !self.inodes[&ino].blocks.contains(k) {
                continue;
            }
            self.offsets_block(fs, ino, k, states)?;
            words.entry((k, (c % SLOTS) / 2)).or_default().push((c, v));
        }
        let mut tx = pages::Tx::new();
        for ((k, w), cs) in words {
            // A pair and the states of at most four pages.
            if tx.len() + 5 > layout::LOG_ENTRIES {
                self.commit(&tx).map_err(|e| nv_err(fs, e))?;
                tx.clear();
            }
            let base = self.inodes[&ino].blocks.get(k).expect("made above");
            let off = base + OFFSETS_HEAD + 8 * u64::from(w);
            let old = self.nv.read_u64(off).map_err(|e| nv_err(fs, e))?;
            let before = [old as u32, (old >> 32) as u32];
            let mut pair = before;
            for (c, v) in cs {
                pair[((c % SLOTS) % 2) as usize] = v;
            }
            if pair == before {
                continue;
            }
            let changed = || (0..2).filter(|&i| states && before[i] != pair[i]);
            for i in changed() {
                if self.is_page(before[i]) {
                    self.page_state(&mut tx, before[i], layout::PageState::Dirty)
                        .map_err(|e| nv_err(fs, e))?;
                }
            }
            for i in changed() {
                if self.is_page(pair[i]) {
                    self.page_state(&mut tx, pair[i], layout::PageState::Valid)
                        .map_err(|e| nv_err(fs, e))?;
                }
            }
            pages::put(
                &mut tx,
                off,
                u64::from(pair[0]) | (u64::from(pair[1]) << 32),
            );
        }
        if !tx.is_empty() {
            self.commit(&tx).map_err(|e| nv_err(fs, e))?;
        }
        Ok(())
    }

    /// Where the header record of the inode at `at` is and how much heap it takes, read
    /// in place and checked.
    fn record_at(&mut self, at: u64) -> Result<Extent> {
        let off = self
            .nv
            .read_u64(at + INODE_RECORD)
            .map_err(FsError::Nvram)?;
        if !recover::heap_ok(&self.regions, off, layout::UNIT) {
            return Err(FsError::CorruptNvram(format!(
                "the inode at {at} points at its record at {off}, outside the heap"
            )));
        }
        let mut head = [0u8; 2];
        self.nv.read(off, &mut head).map_err(FsError::Nvram)?;
        let bytes = record_bytes(usize::from(u16::from_le_bytes(head)));
        if bytes == 0 || !recover::heap_ok(&self.regions, off, bytes) {
            return Err(FsError::CorruptNvram(format!(
                "the record at {off} has a bad length"
            )));
        }
        Ok(Extent { off, bytes })
    }

    /// The page published for chunk `c` of `ino` (`NO_PAGE`: none), read in place.
    fn slot<F: Flash>(&mut self, fs: &FileSystem<F>, ino: Ino, c: u32) -> Result<u32> {
        let Some(base) = self.inodes.get(&ino).and_then(|n| n.blocks.get(c / SLOTS)) else {
            return Ok(NO_PAGE);
        };
        let mut b = [0u8; 4];
        self.nv
            .read(base + OFFSETS_HEAD + 4 * u64::from(c % SLOTS), &mut b)
            .map_err(|e| nv_err(fs, e))?;
        let p = u32::from_le_bytes(b);
        self.checked_page(ino, c, p)
    }

    /// A page number read from the NVRAM, if it may be one.
    fn checked_page(&self, ino: Ino, c: u32, p: u32) -> Result<u32> {
        if p != NO_PAGE && p != LOST_PAGE && u64::from(p) >= self.pages {
            return Err(FsError::CorruptNvram(format!(
                "object {ino}: chunk {c} is published at page {p}, off the device"
            )));
        }
        Ok(p)
    }

    /// The structures of `ino` from chunk `from` on, read in place: its published
    /// (chunk, page) pairs, in order. `peek` reads without taking time (checks).
    fn read_published(
        &mut self,
        ino: Ino,
        from: u32,
        peek: bool,
    ) -> std::result::Result<Vec<(u32, u32)>, NvramError> {
        let Some(n) = self.inodes.get(&ino) else {
            return Ok(Vec::new());
        };
        let structs: Vec<(u32, u64)> = n.blocks.from(from / SLOTS).collect();
        let mut out = Vec::new();
        let mut b = vec![0u8; (OFFSETS_BYTES - OFFSETS_HEAD) as usize];
        for (k, base) in structs {
            if peek {
                self.nv.peek(base + OFFSETS_HEAD, &mut b)?;
            } else {
                self.nv.read(base + OFFSETS_HEAD, &mut b)?;
            }
            for i in 0..SLOTS {
                let p = layout::get32(&b, 4 * i as usize);
                let c = k * SLOTS + i;
                if p != NO_PAGE && c >= from {
                    out.push((c, p));
                }
            }
        }
        Ok(out)
    }

    /// `read_published` from `from` on, every page checked.
    fn published_from<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        ino: Ino,
        from: u32,
    ) -> Result<Vec<(u32, u32)>> {
        let out = self
            .read_published(ino, from, false)
            .map_err(|e| nv_err(fs, e))?;
        for &(c, p) in &out {
            self.checked_page(ino, c, p)?;
        }
        Ok(out)
    }

    /// Offset structures wholly past the file's end and empty are unlinked and freed.
    fn trim<F: Flash>(&mut self, fs: &FileSystem<F>, ino: Ino, size: u64) -> Result<()> {
        let first_past = size.div_ceil(u64::from(fs.layout.chunk_bytes));
        let k0 = first_past
            .div_ceil(u64::from(SLOTS))
            .min(u64::from(u32::MAX)) as u32;
        if self.inodes[&ino].blocks.from(k0).next().is_none()
            || !self
                .published_from(fs, ino, k0.saturating_mul(SLOTS))?
                .is_empty()
        {
            return Ok(());
        }
        // Cut from the end, as many structures a transaction as their bits allow: each
        // cut leaves a whole, shorter chain.
        let n = &self.inodes[&ino];
        let head_word = match n.blocks.before(k0) {
            Some(p) => p,
            None => n.at + INODE_OFFSETS,
        };
        let tail: Vec<(u32, u64)> = n.blocks.from(k0).collect();
        let mut end = tail.len();
        while end > 0 {
            let mut start = end;
            let mut tx = pages::Tx::new();
            while start > 0 && tx.len() + 2 < layout::LOG_ENTRIES {
                start -= 1;
                let e = Extent {
                    off: tail[start].1,
                    bytes: OFFSETS_BYTES,
                };
                self.heap_bits(&mut tx, e, false)
                    .map_err(|e| nv_err(fs, e))?;
            }
            let word = match start {
                0 => head_word,
                // A structure's first word links the next.
                _ => tail[start - 1].1,
            };
            tx.push((word, 0));
            self.commit(&tx).map_err(|e| nv_err(fs, e))?;
            let cut = self
                .inodes
                .get_mut(&ino)
                .expect("listed")
                .blocks
                .split_off(tail[start].0);
            for (_, off) in cut {
                self.heap.release(off, OFFSETS_BYTES);
            }
            end = start;
        }
        Ok(())
    }

    /// The page slots of `ino` that differ from its chunk map in RAM: (to publish now,
    /// to clear after the record), and how many chunks it compared. A file whose changes
    /// RAM tracks (`touched`) costs what changed, each slot read in place; any other, its
    /// whole map.
    fn slot_changes<F: Flash>(&mut self, fs: &FileSystem<F>, ino: Ino) -> Result<(SlotDiff, u64)> {
        let none = crate::touched::Touched::default();
        let tracked = match fs.objects.get(&ino) {
            Some(o) if has_data(o.kind) && fs.is_tracked(ino) && self.inodes.contains_key(&ino) => {
                Some((o, fs.touched.get(&ino).unwrap_or(&none)))
            }
            _ => None,
        };
        let Some((o, t)) = tracked else {
            let whole = fs.objects.get(&ino).map_or(0, |o| o.chunks.mapped());
            let published = self.published_from(fs, ino, 0)?;
            let n = published.len() as u64;
            return Ok((Self::all_slot_changes(fs, &published, ino), whole + n));
        };
        let mut compared = t.chunks.len() as u64;
        let mut diff = SlotDiff::default();
        let mut clear = BTreeSet::new();
        for &c in &t.chunks {
            let published = self.slot(fs, ino, c)?;
            match o.chunks.get(c) {
                NO_PAGE if published != NO_PAGE => {
                    clear.insert(c);
                }
                NO_PAGE => {}
                p if published != p => diff.set.push((c, p)),
                _ => {}
            }
        }
        if let Some(cut) = t.cut {
            for (c, _) in self.published_from(fs, ino, cut)? {
                compared += 1;
                if o.chunks.get(c) == NO_PAGE {
                    clear.insert(c);
                }
            }
        }
        diff.clear = clear.into_iter().map(|c| (c, NO_PAGE)).collect();
        // Every test run checks the tracking against the whole map (read without taking
        // time, so the check changes no figure).
        #[cfg(debug_assertions)]
        {
            let published = self.read_published(ino, 0, true).unwrap_or_default();
            debug_assert_eq!(
                diff,
                Self::all_slot_changes(fs, &published, ino),
                "object {ino}: a chunk map change was not tracked"
            );
        }
        Ok((diff, compared))
    }

    /// `slot_changes` by comparing the whole chunk map with the `published` slots.
    fn all_slot_changes<F: Flash>(
        fs: &FileSystem<F>,
        published: &[(u32, u32)],
        ino: Ino,
    ) -> SlotDiff {
        let ram: Vec<(u32, u32)> = match fs.objects.get(&ino) {
            Some(o) if has_data(o.kind) => o.chunks.entries(),
            _ => Vec::new(),
        };
        let published: BTreeMap<u32, u32> = published.iter().copied().collect();
        let mut diff = SlotDiff::default();
        for &(c, p) in &ram {
            if published.get(&c) != Some(&p) {
                diff.set.push((c, p));
            }
        }
        let mut ram_iter = ram.iter().peekable();
        for &c in published.keys() {
            while ram_iter.peek().is_some_and(|&&(rc, _)| rc < c) {
                ram_iter.next();
            }
            if ram_iter.peek().is_none_or(|&&(rc, _)| rc != c) {
                diff.clear.push((c, NO_PAGE));
            }
        }
        diff
    }

    fn store_header_inner<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &mut Record,
    ) -> Result<()> {
        if rec.encoded_len() > fs.layout.chunk_bytes as usize {
            return Err(FsError::NameTooLong);
        }
        rec.version = fs.take_serial();
        let unloaded = self.inodes.get(&ino).is_some_and(|n| !n.loaded);
        // An attribute set whose owner has no inode (an open file whose last name is
        // gone) lives in RAM only, like its owner: the tree never holds a set without one.
        let ownerless = rec.kind == Kind::Xattrs
            && rec
                .names
                .first()
                .is_none_or(|n| !self.inodes.contains_key(&n.parent));
        if ownerless || rec.names.is_empty() && ino != ROOT_INO && fs.link_count(ino) == 0 {
            // Its last name is gone: the inode goes (an open file lives on in RAM only).
            if self.inodes.contains_key(&ino) {
                self.remove_inode(fs, ino)?;
            }
            return Ok(());
        }
        let bytes = rec.encode();
        let diff = if unloaded {
            // A map never loaded was never changed: nothing to publish.
            debug_assert!(
                fs.objects.get(&ino).is_none_or(|o| o.chunks.mapped() == 0),
                "object {ino}: chunk map changed before it was loaded"
            );
            SlotDiff::default()
        } else {
            let (diff, compared) = self.slot_changes(fs, ino)?;
            self.slots_compared += compared;
            diff
        };
        if rec.version >= self.serial_mark {
            // Durable before the record is published: a mount after a crash gives out
            // versions from here on (`layout::SERIAL_OFF`).
            let mark = rec.version + layout::SERIAL_STEP;
            self.store_persist(layout::SERIAL_OFF, mark)
                .map_err(|e| nv_err(fs, e))?;
            self.serial_mark = mark;
        }
        let new = !self.inodes.contains_key(&ino);
        if new && u64::from(ino) >= self.high_water {
            // Durable before the inode is published: a mount after a crash, or after
            // this object is deleted, never gives its number again.
            let mark = u64::from(ino) + layout::HIGH_WATER_STEP;
            self.store_persist(layout::HIGH_WATER_OFF, mark)
                .map_err(|e| nv_err(fs, e))?;
            self.high_water = mark;
        }
        if new {
            let at = self.alloc(INODE_BYTES)?;
            self.inodes.insert(ino, NvInode::new(at, rec, true));
        }
        let out = self.publish(fs, ino, rec, &bytes, &diff, new);
        if out.is_ok() && fs.objects.get(&ino).is_some_and(|o| has_data(o.kind)) && !unloaded {
            // The published slots are the map in RAM now: from here on, note changes.
            fs.track(ino);
        }
        if matches!(out, Err(FsError::NoSpace)) && new {
            // Refused before it was linked (any later failure is a lost power, after which
            // only what the NVRAM holds matters): give back what it took.
            if let Some(n) = self.inodes.remove(&ino) {
                self.heap.release(n.at, INODE_BYTES);
                for (_, off) in n.blocks.iter() {
                    self.heap.release(off, OFFSETS_BYTES);
                }
            }
        }
        out
    }

    fn publish<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &Record,
        bytes: &[u8],
        diff: &SlotDiff,
        new: bool,
    ) -> Result<()> {
        // Pages first, so the record never covers a chunk whose page is not published. A
        // new inode's slots are reached by nothing yet: their pages become valid when it
        // is linked (`link_new`).
        self.set_slots_with(fs, ino, &diff.set, !new)?;
        let ext = self.write_extent(bytes)?;
        if new {
            // A new attribute set takes its name from the set it replaces, which goes in
            // the same transaction.
            let victims = match self.name_update(fs, ino, rec) {
                Ok(Update::Removes(v)) => v,
                Ok(_) => Vec::new(),
                Err(e) => {
                    self.heap.release(ext.off, ext.bytes);
                    return Err(e);
                }
            };
            self.link_new(fs, ino, ext, &diff.set, &victims)?;
            for v in victims {
                self.release_inode(v);
            }
        } else {
            self.publish_existing(fs, ino, rec, ext)?;
        }
        self.set_slots(fs, ino, &diff.clear)?;
        self.trim(fs, ino, rec.size)
    }

    /// Publishes record `ext` of an object that has an inode, in one transaction with
    /// everything the record makes true: its move in the tree (a rename), the names it
    /// gives another object (an exchange, or a rename over a name: that object's record
    /// is rewritten with them and moved, or, left with no name and no link, removed with
    /// what goes with it, see `tree`), and the heap bits of the records swapped.
    fn publish_existing<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &Record,
        ext: Extent,
    ) -> Result<()> {
        let (victims, renamed) = match self.name_update(fs, ino, rec) {
            Ok(Update::None) => (Vec::new(), None),
            Ok(Update::Removes(v)) => (v, None),
            Ok(Update::Renames(t, names)) => (Vec::new(), Some((t, names))),
            Err(e) => {
                self.heap.release(ext.off, ext.bytes);
                return Err(e);
            }
        };
        let at = self.inodes[&ino].at;
        // The record it replaces, read in place (freed once the new one is published).
        let old = match self.record_at(at) {
            Ok(old) => old,
            Err(e) => {
                self.heap.release(ext.off, ext.bytes);
                return Err(match e {
                    FsError::Nvram(e) => nv_err(fs, e),
                    e => e,
                });
            }
        };
        let mut tx: pages::Tx = vec![(at + INODE_RECORD, ext.off)];
        let reserved = !rec.reserve.is_empty();
        if reserved != self.inodes[&ino].reserved {
            self.count(&mut tx, layout::RESERVED_OFF, reserved)
                .map_err(|e| nv_err(fs, e))?;
        }
        let mut swapped = vec![(old, ext)];
        let parent = rec.names.first().map_or(0, |n| n.parent);
        self.tree_move(&mut tx, ino, parent)
            .map_err(|e| nv_err(fs, e))?;
        if let Some((t, names)) = &renamed {
            match self.rename_in_place(fs, &mut tx, *t, names) {
                Ok(Some(pair)) => swapped.push(pair),
                Ok(None) => {}
                Err(e) => {
                    for (_, new) in &swapped {
                        self.heap.release(new.off, new.bytes);
                    }
                    return Err(e);
                }
            }
        }
        // The records' units: the new ones taken, the old ones free.
        for &(old, new) in &swapped {
            self.heap_bits(&mut tx, new, true)
                .and_then(|()| self.heap_bits(&mut tx, old, false))
                .map_err(|e| nv_err(fs, e))?;
        }
        // On failure power is gone: RAM state no longer matters, only what the NVRAM
        // keeps.
        if victims.is_empty() {
            self.commit(&tx).map_err(|e| nv_err(fs, e))?;
        } else {
            self.remove_group(fs, tx, &victims)?;
        }
        for (old, _) in swapped {
            self.heap.release(old.off, old.bytes);
        }
        let n = self.inodes.get_mut(&ino).expect("listed");
        n.place = tree::Place::of(rec);
        n.reserved = reserved;
        if let Some((t, names)) = renamed {
            if let Some(n) = self.inodes.get_mut(&t) {
                n.place.parent = names.first().map_or(0, |n| n.parent);
            }
        }
        for v in victims {
            self.release_inode(v);
        }
        Ok(())
    }

    /// What the names `rec` gives another object do to it: the file system gives one
    /// update at most (a rename over a name, an exchange, an attribute set replaced); any
    /// other would be settled by its object's own next header write. An object left with
    /// no name and no link is removed with what goes with it (its chunk maps loaded: the
    /// file system frees its pages from RAM after).
    fn name_update<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &Record,
    ) -> Result<Update> {
        let update = rec
            .name_updates
            .iter()
            .find(|(t, _)| *t != ino && *t != ROOT_INO && self.inodes.contains_key(t));
        let Some((t, names)) = update else {
            return Ok(Update::None);
        };
        if !names.is_empty() || fs.link_count(*t) > 0 {
            return Ok(Update::Renames(*t, names.clone()));
        }
        let victims = self
            .removal_group(&Vec::new(), *t)
            .map_err(|e| nv_err(fs, e))?;
        self.unmap_group(fs, &victims)?;
        Ok(Update::Removes(victims))
    }

    /// Rewrites object `t`'s record with `names` (another object's record gave them) and
    /// adds to `tx` the stores that publish it and move `t` in the tree. Returns (old, new)
    /// record, or None if there is nothing to change or the names do not fit a record
    /// (then `t`'s own next header write settles them, as on flash).
    fn rename_in_place<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        tx: &mut pages::Tx,
        t: Ino,
        names: &[crate::format::record::Name],
    ) -> Result<Option<(Extent, Extent)>> {
        let at = self.inodes[&t].at;
        let regions = self.regions;
        let mut r = recover::Reader {
            nv: &mut self.nv,
            patch: Default::default(),
        };
        let i = recover::read_inode(&mut r, &regions, fs.layout.chunk_bytes, at, None)?;
        let (old, mut trec) = (i.record, i.rec);
        if trec.names == names {
            return Ok(None);
        }
        trec.names = names.to_vec();
        if trec.encoded_len() > fs.layout.chunk_bytes as usize {
            return Ok(None);
        }
        let new = self.write_extent(&trec.encode())?;
        pages::put(tx, at + INODE_RECORD, new.off);
        let parent = names.first().map_or(0, |n| n.parent);
        if let Err(e) = self.tree_move(tx, t, parent) {
            self.heap.release(new.off, new.bytes);
            return Err(nv_err(fs, e));
        }
        Ok(Some((old, new)))
    }

    /// Before `block` is erased no published page may lie in it: every chunk published
    /// there is republished as it stands in RAM (moved by cleaning, overwritten, gone).
    /// The store keeps no map from pages to owners: a published page RAM no longer maps
    /// is one a change since the last header write left behind, so only the chunks the
    /// files' changes name are read in place. What that costs grows with the changes not
    /// yet published, not with what is stored.
    fn before_erase_inner<F: Flash>(&mut self, fs: &FileSystem<F>, block: u32) -> Result<()> {
        let pages = fs.layout.pno(block, 0)..fs.layout.pno(block, 0) + fs.layout.pages_per_block;
        let mut inos: Vec<Ino> = fs
            .touched
            .iter()
            .filter(|(_, t)| !t.chunks.is_empty() || t.cut.is_some())
            .map(|(&i, _)| i)
            .filter(|i| self.inodes.get(i).is_some_and(|n| n.loaded))
            .collect();
        inos.sort_unstable();
        for ino in inos {
            let t = &fs.touched[&ino];
            let mut here = Vec::new();
            for &c in &t.chunks {
                let p = self.slot(fs, ino, c)?;
                if pages.contains(&p) {
                    here.push((c, p));
                }
            }
            if let Some(cut) = t.cut {
                for (c, p) in self.published_from(fs, ino, cut)? {
                    if pages.contains(&p) && !here.contains(&(c, p)) {
                        here.push((c, p));
                    }
                }
            }
            let mut changes = Vec::with_capacity(here.len());
            for (c, p) in here {
                let now = match fs.objects.get(&ino) {
                    Some(o) if has_data(o.kind) => o.chunks.get(c),
                    _ => NO_PAGE,
                };
                if now == p {
                    return Err(FsError::Io(format!(
                        "block {block} is being erased with page {p} of object {ino} live"
                    )));
                }
                changes.push((c, now));
            }
            self.set_slots(fs, ino, &changes)?;
        }
        Ok(())
    }

    fn block_event_inner<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        block: u32,
        event: BlockEvent,
    ) -> Result<()> {
        let word = self.regions.block_word(block);
        let r = match event {
            BlockEvent::Opened => self.store_persist(word, layout::NvBlock::InUse as u64),
            BlockEvent::Retired => self.store_persist(word, layout::NvBlock::Bad as u64),
            // May lag: a block still marked in use is only cleaned again.
            BlockEvent::Erased => self
                .clear_block_states(block)
                .and_then(|()| self.store(word, layout::NvBlock::Erased as u64)),
        };
        r.map_err(|e| nv_err(fs, e))
    }

    /// Adds the NVRAM's time to the device clock (the two share one clock).
    fn settle_clock<F: Flash>(&mut self, fs: &mut FileSystem<F>) {
        let ns = self.nv.take_elapsed_ns();
        if ns > 0 {
            fs.dev.get_mut().advance_clock_ns(ns);
        }
    }

    /// Removes the inodes of objects a mount did not keep.
    pub(crate) fn remove_dead<F: Flash>(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        for ino in std::mem::take(&mut self.dead) {
            // (Its pages left RAM at mount: `recover::install_chunks`.)
            if self.inodes.contains_key(&ino) && !fs.objects.contains_key(&ino) {
                self.remove_inode(fs, ino)?;
            }
        }
        self.settle_clock(fs);
        Ok(())
    }
}

/// Whether a slot past a file's end (chunk `chunk` at page `p`) is what a cut truncate
/// leaves: the page holds that chunk of that file, as its tags say (one OOB read, only for
/// such slots after a crash). Damage to an offset structure's first chunk moves its slots
/// past the end too; their pages then hold other chunks, and the file would read holes.
pub(super) fn leftover<F: Flash>(
    fs: &mut FileSystem<F>,
    ino: Ino,
    chunk: u32,
    p: u32,
) -> Result<bool> {
    use crate::format::tags::{TagRead, Tags};
    if p == LOST_PAGE {
        return Ok(true);
    }
    Ok(matches!(
        fs.read_tags(p)?,
        TagRead::Valid(Tags::Data(d)) if d.obj == ino && d.chunk == chunk
    ))
}

/// The status word a block in this state gets.
fn status_of(state: crate::blocks::BlockState) -> layout::NvBlock {
    use crate::blocks::BlockState as S;
    match state {
        S::Empty => layout::NvBlock::Erased,
        S::Bad => layout::NvBlock::Bad,
        S::Anchor => layout::NvBlock::Anchor,
        _ => layout::NvBlock::InUse,
    }
}

/// What a record's name update does to the object it names (`Minv::name_update`).
enum Update {
    None,
    /// Removes it, with these.
    Removes(Vec<Ino>),
    /// Gives it these names.
    Renames(Ino, Vec<crate::format::record::Name>),
}

#[derive(Debug, Default, PartialEq, Eq)]
struct SlotDiff {
    set: Vec<(u32, u32)>,
    clear: Vec<(u32, u32)>,
}

impl<F: Flash> MetadataStore<F> for Minv {
    fn name(&self) -> &'static str {
        "nvram"
    }

    fn store_header(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        rec: &mut Record,
    ) -> Result<Option<u32>> {
        self.reserved_files = fs.reserves.inos().count() as u64;
        // The header write spends what the calls before it promised.
        let promise = self.promises.take(ino);
        let out = self.store_header_inner(fs, ino, rec);
        if let (Err(_), Some(p)) = (&out, promise) {
            self.promises.restore(ino, p);
        }
        self.settle_clock(fs);
        out.map(|()| None)
    }

    fn room_for(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        chunks: Option<std::ops::Range<u32>>,
    ) -> Result<()> {
        self.room_for_inner(fs, ino, chunks)
    }

    fn recover(&mut self, _fs: &mut FileSystem<F>, _options: &MountOptions) -> Result<MountMethod> {
        // `minv::mount` builds the state before the store is installed.
        Ok(MountMethod::Nvram)
    }

    fn unmount(&mut self, fs: &mut FileSystem<F>) -> Result<bool> {
        let mut out = self.nv.persist_all().map_err(|e| nv_err(fs, e));
        if out.is_ok() && !fs.read_only {
            out = self.save_state(fs);
        }
        if out.is_ok() && !fs.read_only {
            out = self.next_generation(fs);
        }
        self.settle_clock(fs);
        out.map(|()| false)
    }

    fn before_erase(&mut self, fs: &mut FileSystem<F>, block: u32) -> Result<()> {
        let out = self.before_erase_inner(fs, block);
        self.settle_clock(fs);
        out
    }

    fn block_event(&mut self, fs: &mut FileSystem<F>, block: u32, event: BlockEvent) -> Result<()> {
        let out = self.block_event_inner(fs, block, event);
        self.settle_clock(fs);
        out
    }

    fn after_mount(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        self.remove_dead(fs)?;
        if fs.read_only {
            // Damage met while mounting: nothing is written.
            return Ok(());
        }
        let out = self.next_generation(fs);
        self.settle_clock(fs);
        out
    }

    fn load_object(&mut self, fs: &mut FileSystem<F>, ino: Ino) -> Result<()> {
        let out = self.load_object_inner(fs, ino);
        self.finish_if_done(fs);
        self.settle_clock(fs);
        out
    }

    fn expand_dir(&mut self, fs: &mut FileSystem<F>, dir: Ino) -> Result<()> {
        let out = self.expand_dir_inner(fs, dir);
        self.finish_if_done(fs);
        self.settle_clock(fs);
        out
    }

    fn load_all(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        let out = self.load_all_inner(fs);
        self.finish_if_done(fs);
        self.settle_clock(fs);
        out
    }

    fn load_map(&mut self, fs: &mut FileSystem<F>, ino: Ino) -> Result<()> {
        let out = self.load_map_inner(fs, ino);
        self.settle_clock(fs);
        out
    }

    fn forget(&mut self, fs: &mut FileSystem<F>, ino: Ino) -> Result<()> {
        let out = if self.inodes.contains_key(&ino) {
            self.load_map_inner(fs, ino)
                .and_then(|()| self.remove_inode(fs, ino))
        } else {
            Ok(())
        };
        self.settle_clock(fs);
        out
    }

    fn check(&mut self, fs: &mut FileSystem<F>) -> super::StoreCheck {
        let out = check::check(self, fs);
        self.settle_clock(fs);
        out
    }

    fn nvram(&self) -> Option<NvramReport> {
        Some(NvramReport {
            stats: self.nv.stats(),
            bytes_in_use: self.bytes_in_use(),
            saved_state_bytes: self.lazy.as_ref().map_or(0, |l| l.region_bytes()),
            slots_compared: self.slots_compared,
            free_extents: self.heap.extent_count() as u64,
            size_bytes: self.nv.size_bytes(),
            power_lost: self.nv.power_lost(),
        })
    }

    fn nvram_mut(&mut self) -> Option<&mut Nvram> {
        Some(&mut self.nv)
    }

    fn into_nvram(self: Box<Self>) -> Option<Nvram> {
        Some(self.nv)
    }
}

/// What a file system's NVRAM holds and has done.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct NvramReport {
    pub stats: NvramStats,
    /// Of `bytes_in_use`: a clean unmount's saved state that objects are still read from
    /// (freed once every object is in RAM).
    pub saved_state_bytes: u64,
    /// Chunks the header writes since mount compared between RAM's chunk maps and the
    /// published page slots: a close costs what changed, not the file's size.
    pub slots_compared: u64,
    /// Free extents of the NVRAM manager (a clean unmount's saved state lists them).
    pub free_extents: u64,
    pub bytes_in_use: u64,
    pub size_bytes: u64,
    pub power_lost: bool,
}
