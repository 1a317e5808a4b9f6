//! The page states (the paper's 2 bits per page, in each block's information, see
//! `layout`): which flash pages hold published data, kept exact at every instant, so any
//! mount takes them as they are and never walks the offset structures to learn them.
//!
//! A page becomes valid, and the page it replaces dirty, in the same redo transaction as
//! the page slot that publishes it (`Minv::set_slots`). A file's pages become dirty, and
//! its heap units free in the bitmap (`bitmap`), when its inode goes: with the unchaining
//! store when they fit one transaction, else through the dying list (`layout::DYING_OFF`):
//! the inode is unchained onto that list in one transaction, its pages and units marked
//! in as many as they take, and it leaves the list with the last. A new file too large
//! for its linking transaction goes the other way: onto the list, its pages marked valid
//! and units taken, then off the list and into its bucket in one transaction. A writable
//! mount finishes whatever a crash left on the list (as a removal) before it does anything
//! else, so the states never name a page nobody publishes.

use nandkit_flash::Flash;
use nandkit_nvram::NvramError;

use super::bitmap::Change;
use super::layout::{
    bucket_of, get64, PageState, DYING_OFF, INODES_OFF, INODE_BYTES, INODE_NEXT, LOG_ENTRIES,
    OFFSETS_BYTES, PAGES_PER_WORD, RESERVED_OFF,
};
use super::recover::{self, Reader};
use super::tree::Half;
use super::{nv_err, Extent, Minv, NvInode};
use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::object::{LOST_PAGE, NO_PAGE};
use crate::types::Ino;

/// Word stores of one transaction being built: (offset, value), each offset once.
pub(super) type Tx = Vec<(u64, u64)>;

/// Sets `off` to `value` in `tx`, replacing an earlier store to it.
pub(super) fn put(tx: &mut Tx, off: u64, value: u64) {
    match tx.iter_mut().find(|(o, _)| *o == off) {
        Some(e) => e.1 = value,
        None => tx.push((off, value)),
    }
}

impl Minv {
    /// Whether a slot's value names a flash page (not "none", not "lost").
    pub(super) fn is_page(&self, p: u32) -> bool {
        p != NO_PAGE && p != LOST_PAGE && u64::from(p) < self.pages
    }

    /// Adds to `tx` the store that gives page `p` state `st`, the word read through
    /// the stores `tx` already holds.
    pub(super) fn page_state(
        &mut self,
        tx: &mut Tx,
        p: u32,
        st: PageState,
    ) -> std::result::Result<(), NvramError> {
        let (off, shift) = self.regions.state_word(p);
        let word = match tx.iter().find(|(o, _)| *o == off) {
            Some(&(_, v)) => v,
            None => self.nv.read_u64(off)?,
        };
        put(tx, off, word & !(3u64 << shift) | (st as u64) << shift);
        Ok(())
    }

    /// Makes `changes`, in transactions of at most the log's size; `last` (stores that
    /// must follow them all, such as leaving the dying list) go in the last one. Every
    /// change sets a word to a value, so a crash part-way and a second run are harmless.
    pub(super) fn apply_changes<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        changes: &[Change],
        last: &[(u64, u64)],
    ) -> Result<()> {
        let mut tx = Tx::new();
        for c in changes {
            if tx.len() + self.change_words(c) + last.len() > LOG_ENTRIES {
                self.commit(&tx).map_err(|e| nv_err(fs, e))?;
                tx.clear();
            }
            self.add_change(&mut tx, c).map_err(|e| nv_err(fs, e))?;
        }
        tx.extend_from_slice(last);
        if !tx.is_empty() {
            self.commit(&tx).map_err(|e| nv_err(fs, e))?;
        }
        Ok(())
    }

    /// What removing `ino`'s inode changes: the pages its slots publish become dirty, and
    /// its structures, record and inode free. A chain or record that cannot be read
    /// publishes nothing this can mark: what stays set, fsck reports.
    fn removal<F: Flash>(&mut self, fs: &FileSystem<F>, ino: Ino) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        if self.nv_load(ino).is_ok() {
            let published = self
                .read_published(ino, 0, false)
                .map_err(|e| nv_err(fs, e))?;
            for (_, p) in published {
                if self.is_page(p) {
                    out.push(Change::Page(p, PageState::Dirty));
                }
            }
        }
        let n = &self.inodes[&ino];
        let at = n.at;
        for (_, off) in n.blocks.iter() {
            out.push(Change::Heap(extent(off, OFFSETS_BYTES), false));
        }
        if let Ok(record) = self.record_at(at) {
            out.push(Change::Heap(record, false));
        }
        out.push(Change::Heap(extent(at, INODE_BYTES), false));
        Ok(out)
    }

    /// Removes the inodes of `group` (`tree::removal_group`): `tx` holds the stores that
    /// must go with it (a rename's record pointer), to which this adds each one's
    /// unchaining and its leaving the tree. The pages their slots publish become dirty and
    /// their heap units free in the same transaction if all fit, else the group goes onto
    /// the dying list in it and is drained after. The caller frees their DRAM state.
    pub(super) fn remove_group<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        mut tx: Tx,
        group: &[Ino],
    ) -> Result<()> {
        self.leave(fs, &mut tx, group)?;
        let mut changes = Vec::new();
        for &x in group {
            changes.extend(self.removal(fs, x)?);
        }
        let most: usize = changes.iter().map(|c| self.change_words(c)).sum();
        if tx.len() + most <= LOG_ENTRIES {
            for c in &changes {
                self.add_change(&mut tx, c).map_err(|e| nv_err(fs, e))?;
            }
            return self.commit(&tx).map_err(|e| nv_err(fs, e));
        }
        let head = self.nv.read_u64(DYING_OFF).map_err(|e| nv_err(fs, e))?;
        let head = self.push_dying(&mut tx, group, head);
        put(&mut tx, DYING_OFF, head);
        self.commit(&tx).map_err(|e| nv_err(fs, e))?;
        self.drain_dying(fs)
    }

    /// Adds to `tx` the stores that take each inode of `group` out of its chain and out
    /// of the tree.
    fn leave<F: Flash>(&mut self, fs: &FileSystem<F>, tx: &mut Tx, group: &[Ino]) -> Result<()> {
        for &x in group {
            let (word, next) = self.unchain(x, tx)?;
            put(tx, word, next);
            let n = &self.inodes[&x];
            let (at, place, reserved) = (n.at, n.place, n.reserved);
            self.tree_leave(tx, x, at, place)
                .and_then(|_| self.counts(tx, place.kind, reserved, false))
                .map_err(|e| nv_err(fs, e))?;
        }
        Ok(())
    }

    /// Adds to `tx` the stores that count an inode of kind `kind` (`reserved`: its
    /// record holds fallocated chunks) in or out of the log region's counts.
    pub(super) fn counts(
        &mut self,
        tx: &mut Tx,
        kind: crate::types::Kind,
        reserved: bool,
        up: bool,
    ) -> std::result::Result<(), NvramError> {
        self.add_half(tx, INODES_OFF, Half::High, up)?;
        if kind.is_visible() {
            self.add_half(tx, INODES_OFF, Half::Low, up)?;
        }
        if reserved {
            self.count(tx, RESERVED_OFF, up)?;
        }
        Ok(())
    }

    /// Adds to `tx` the store that moves the count at `off` by one.
    pub(super) fn count(
        &mut self,
        tx: &mut Tx,
        off: u64,
        up: bool,
    ) -> std::result::Result<(), NvramError> {
        let v = self.word(tx, off)?;
        put(tx, off, if up { v + 1 } else { v.saturating_sub(1) });
        Ok(())
    }

    /// Adds to `tx` the links that chain `group` in order onto a dying list whose head
    /// was `head`; returns the list's new head (stored by the caller).
    fn push_dying(&self, tx: &mut Tx, group: &[Ino], mut head: u64) -> u64 {
        for &x in group.iter().rev() {
            let at = self.inodes[&x].at;
            put(tx, at + INODE_NEXT, head);
            head = at;
        }
        head
    }

    /// Writes a new inode (object `ino`, its record at `record`) and links it into its
    /// bucket and the tree, with the pages its slots publish (stored already, in
    /// structures only it reaches) marked valid and its heap units taken: in the linking
    /// transaction when they fit, else with the inode on the dying list while they are
    /// marked, so that a crash meanwhile leaves it there and the mount undoes them.
    /// `victims` (an attribute set it replaces, see `Minv::name_update`) leave their chains
    /// and the tree for the dying list in the linking transaction.
    pub(super) fn link_new<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        ino: Ino,
        record: Extent,
        set: &[(u32, u32)],
        victims: &[Ino],
    ) -> Result<()> {
        let n = &self.inodes[&ino];
        let (at, first, place, reserved) =
            (n.at, n.blocks.first().unwrap_or(0), n.place, n.reserved);
        let mut changes: Vec<Change> = n
            .blocks
            .iter()
            .map(|(_, off)| Change::Heap(extent(off, OFFSETS_BYTES), true))
            .collect();
        changes.push(Change::Heap(record, true));
        changes.push(Change::Heap(extent(at, INODE_BYTES), true));
        for &(_, p) in set {
            if self.is_page(p) {
                changes.push(Change::Page(p, PageState::Valid));
            }
        }
        let nv = |e| nv_err(fs, e);
        let dying = self.nv.read_u64(DYING_OFF).map_err(nv)?;
        // The victims out of their chains and the tree (before the new inode is in its
        // chain: the chain words read here are the NVRAM's), onto the dying list.
        let mut link = Tx::new();
        self.leave(fs, &mut link, victims)?;
        let head = self.push_dying(&mut link, victims, dying);
        // Into its bucket and into the tree (its directory's list, its file's links, its
        // owner's set).
        let bucket = self.regions.bucket_word(bucket_of(ino));
        let next = self.word(&link, bucket).map_err(nv)?;
        put(&mut link, bucket, at);
        self.tree_join(&mut link, ino, at, place)
            .and_then(|()| self.counts(&mut link, place.kind, reserved, true))
            .map_err(nv)?;
        if !victims.is_empty() {
            put(&mut link, DYING_OFF, head);
        }
        let one = self.one_tx(&link, &changes).map_err(nv)?;
        let fits = one.is_some();
        let mut inode = [0u8; INODE_BYTES as usize];
        inode[0..8].copy_from_slice(&u64::from(ino).to_le_bytes());
        let chain = if fits { next } else { dying };
        inode[8..16].copy_from_slice(&chain.to_le_bytes());
        inode[16..24].copy_from_slice(&record.off.to_le_bytes());
        inode[24..32].copy_from_slice(&first.to_le_bytes());
        self.unclean()
            .and_then(|()| self.nv.write(at, &inode))
            .and_then(|()| self.nv.persist(at, INODE_BYTES))
            .map_err(nv)?;
        match one {
            Some(tx) => self.commit(&tx).map_err(nv)?,
            None => {
                // On the list while its pages are marked; off it (to the victims, or to
                // what was there) with the linking stores.
                self.store_persist(DYING_OFF, at).map_err(nv)?;
                put(&mut link, DYING_OFF, head);
                put(&mut link, at + INODE_NEXT, next);
                self.apply_changes(fs, &changes, &link)?;
            }
        }
        if victims.is_empty() {
            return Ok(());
        }
        self.drain_dying(fs)
    }

    /// Finishes every inode on the dying list: marks the pages it publishes dirty, frees its
    /// units in the bitmap and takes it off. Its structures are read in place, checked as
    /// a mount's walk checks them; the DRAM manager's room is freed by the caller (or was
    /// never counted, at mount).
    pub(super) fn drain_dying<F: Flash>(&mut self, fs: &FileSystem<F>) -> Result<()> {
        let most = (self.regions.heap_end - self.regions.heap_off) / INODE_BYTES;
        for _ in 0..=most {
            let at = self.nv.read_u64(DYING_OFF).map_err(|e| nv_err(fs, e))?;
            if at == 0 {
                return Ok(());
            }
            let d = self.dying_inode(at, fs.layout.chunk_bytes)?;
            let mut changes: Vec<Change> = d
                .pages
                .iter()
                .filter(|&&p| self.is_page(p))
                .map(|&p| Change::Page(p, PageState::Dirty))
                .collect();
            changes.extend(d.extents.iter().map(|&e| Change::Heap(e, false)));
            self.apply_changes(fs, &changes, &[(DYING_OFF, d.next)])?;
        }
        Err(FsError::CorruptNvram("the dying list loops".into()))
    }

    /// The inode at `at` on the dying list.
    fn dying_inode(&mut self, at: u64, chunk_bytes: u32) -> Result<Dying> {
        let (regions, pages) = (self.regions, self.pages);
        let mut r = Reader {
            nv: &mut self.nv,
            patch: Default::default(),
        };
        dying_entry(&mut r, &regions, chunk_bytes, at, pages)
    }

    /// Before a block is erased: its page states go back to available (no page in it is
    /// published by then). May lag like the block's status word: only "valid" is exact,
    /// and none of its pages is.
    pub(super) fn clear_block_states(&mut self, block: u32) -> std::result::Result<(), NvramError> {
        let base = self.regions.block_word(block) + 8;
        let words = self.regions.pages_per_block.div_ceil(PAGES_PER_WORD);
        for w in 0..u64::from(words) {
            #[cfg(debug_assertions)]
            {
                let mut b = [0u8; 8];
                let _ = self.nv.peek(base + 8 * w, &mut b);
                let v = u64::from_le_bytes(b);
                debug_assert!(
                    (0..PAGES_PER_WORD).all(|i| (v >> (2 * i)) & 3 != PageState::Valid as u64),
                    "block {block} is erased with a page still valid in the page states"
                );
            }
            self.store(base + 8 * w, 0)?;
        }
        Ok(())
    }
}

/// An inode on the dying list, as read.
pub(super) struct Dying {
    /// The next on the list.
    pub next: u64,
    /// The pages its slots publish.
    pub pages: Vec<u32>,
    /// Its heap structures: offset structures, record, inode.
    pub extents: Vec<Extent>,
}

fn extent(off: u64, bytes: u64) -> Extent {
    Extent { off, bytes }
}

/// The inode at `at` on the dying list, checked as a mount's walk checks inodes.
fn dying_entry(
    r: &mut Reader,
    regions: &super::layout::Regions,
    chunk_bytes: u32,
    at: u64,
    pages: u64,
) -> Result<Dying> {
    if !recover::heap_ok(regions, at, INODE_BYTES) {
        return Err(FsError::CorruptNvram(format!(
            "the dying list points at {at}, outside the heap"
        )));
    }
    let i = recover::read_inode(r, regions, chunk_bytes, at, None)?;
    let (ino, next, record, first) = (i.ino, i.next, i.record, i.first);
    let mut n = NvInode::new(at, &i.rec, false);
    let mut seen = Default::default();
    let slots = recover::read_chain(r, regions, ino, first, pages, &mut seen, &mut n)?;
    let mut extents: Vec<Extent> = n
        .blocks
        .iter()
        .map(|(_, off)| extent(off, OFFSETS_BYTES))
        .collect();
    extents.push(record);
    extents.push(extent(at, INODE_BYTES));
    Ok(Dying {
        next,
        pages: slots
            .into_iter()
            .map(|(_, p)| p)
            .filter(|&p| p != LOST_PAGE)
            .collect(),
        extents,
    })
}

/// Every inode on the dying list (fsck's view; a writable mount finishes them).
pub(super) fn dying_list(
    r: &mut Reader,
    regions: &super::layout::Regions,
    chunk_bytes: u32,
    pages: u64,
) -> Result<Vec<Dying>> {
    let mut out = Vec::new();
    let mut at = get64(&r.read(DYING_OFF, 8)?, 0);
    let most = (regions.heap_end - regions.heap_off) / INODE_BYTES;
    for _ in 0..=most {
        if at == 0 {
            return Ok(out);
        }
        let d = dying_entry(r, regions, chunk_bytes, at, pages)?;
        at = d.next;
        out.push(d);
    }
    Err(FsError::CorruptNvram("the dying list loops".into()))
}
