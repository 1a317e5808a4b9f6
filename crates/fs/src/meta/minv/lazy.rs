//! Objects read from the NVRAM when a call first reaches them, so a mount reads no object
//! but the root. Two sources say where each one is:
//!
//! - after a clean unmount, the namespace index it saved (`save`, `index`): the state's
//!   room stays taken while any object or directory listing is still to be read from it,
//!   and is freed once all are;
//! - otherwise (after a crash, or when the saved state is damaged), the tree in place
//!   (`tree`): an object by number is on its hash chain, a directory's children on its
//!   child list, and an object's links, attribute set and subdirectories in its inode.
//!   What the mount must know of all objects at once, the log region counts (`layout`).
//!
//! Every inode read this way is checked as the mount's walk would check it (pointers
//! inside the heap, its number, the record's checksum; a child's record names its
//! directory), and must lie in room the NVRAM manager counts as taken. Anything else is a
//! clear `CorruptNvram` error, never a panic or a wrong object.

use std::collections::HashSet;

use nandkit_flash::Flash;

use super::index::{children_crc, Entry, ENTRY};
use super::layout::{get32, get64, INODE_BYTES, INODE_CHILD, INODE_SIB_NEXT, OFFSETS_BYTES};
use super::recover::{heap_ok, parse_inode, read_bucket, InodeRead, Reader};
use super::save::Saved;
use super::Minv;
use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::lazy::IndexFacts;
use crate::rebuild::has_data;
use crate::types::{Ino, Kind};

fn corrupt(why: impl Into<String>) -> FsError {
    FsError::CorruptNvram(why.into())
}

/// Where objects not in RAM yet are read from.
enum Source {
    /// A clean unmount's saved index.
    Saved {
        /// The saved state's allocation (freed when everything is read).
        region: (u64, u64),
        table_off: u64,
        children_off: u64,
        objects: u64,
        children: u64,
    },
    /// The tree in place.
    Live,
}

/// Where objects are read from, and how many are still to be read.
pub(crate) struct Lazy {
    source: Source,
    /// Objects not yet put in RAM (as the source counts them).
    left: u64,
    /// Every object is in RAM: the saved index's count says so, the tree's count is only
    /// trusted for room (a count too low must not hide an object), so only `load_all`
    /// says so of the tree.
    all_read: bool,
    /// Objects the saved index lists that were deleted since the mount (after being put
    /// in RAM).
    pub(super) gone: HashSet<Ino>,
}

impl Lazy {
    /// Heap bytes held by a saved state still read from.
    pub(crate) fn region_bytes(&self) -> u64 {
        match self.source {
            Source::Saved { region, .. } => region.1,
            Source::Live => 0,
        }
    }

    pub(crate) fn saved(s: &Saved) -> Lazy {
        Lazy {
            source: Source::Saved {
                region: (s.off, s.bytes),
                table_off: s.table_off,
                children_off: s.children_off,
                objects: s.objects,
                children: s.children,
            },
            left: s.objects,
            all_read: false,
            gone: HashSet::new(),
        }
    }

    /// The tree in place, which holds `inodes` inodes.
    pub(crate) fn live(inodes: u64) -> Lazy {
        Lazy {
            source: Source::Live,
            left: inodes,
            all_read: false,
            gone: HashSet::new(),
        }
    }

    /// Objects the source holds that are not in RAM yet.
    pub(crate) fn unread(&self) -> u64 {
        self.left
    }

    fn is_live(&self) -> bool {
        matches!(self.source, Source::Live)
    }
}

impl Minv {
    fn reader(&mut self) -> Reader<'_> {
        Reader {
            nv: &mut self.nv,
            patch: self.unapplied.clone(),
        }
    }

    /// The saved index's shape: (table, children, objects, child slots).
    fn index_shape(&self) -> (u64, u64, u64, u64) {
        match self.lazy.as_ref().map(|l| &l.source) {
            Some(&Source::Saved {
                table_off,
                children_off,
                objects,
                children,
                ..
            }) => (table_off, children_off, objects, children),
            _ => (0, 0, 0, 0),
        }
    }

    /// Entry `i` of the object table, checked.
    fn entry(&mut self, i: u64) -> Result<Entry> {
        let (table_off, _, objects, children) = self.index_shape();
        let b = self.reader().read(table_off + i * ENTRY, ENTRY)?;
        let e = Entry::decode(&b)
            .ok_or_else(|| corrupt(format!("saved index entry {i} fails its checksum")))?;
        if u64::from(e.first_child) + u64::from(e.children) > children || i >= objects {
            return Err(corrupt(format!(
                "saved index entry {i} lists children past the end"
            )));
        }
        Ok(e)
    }

    /// The entry of object `ino` (binary search of the table).
    fn find(&mut self, ino: Ino) -> Result<Option<Entry>> {
        let (mut lo, mut hi) = (0, self.index_shape().2);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = self.entry(mid)?;
            match e.ino.cmp(&ino) {
                std::cmp::Ordering::Equal => return Ok(Some(e)),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Ok(None)
    }

    /// Where object `ino`'s inode is in the tree: on its hash chain.
    fn find_live(&mut self, ino: Ino) -> Result<Option<u64>> {
        let regions = self.regions;
        let chain = read_bucket(&mut self.reader(), &regions, super::layout::bucket_of(ino))?;
        Ok(chain.into_iter().find(|&(x, _)| x == ino).map(|(_, at)| at))
    }

    /// Whether `off .. off + len` is room the NVRAM manager counts as taken.
    fn taken(&self, off: u64, len: u64) -> bool {
        !self.heap.overlaps_free(off, len)
    }

    /// Whether object `ino` needs no reading: in RAM already, or (the saved index's)
    /// deleted since the mount.
    fn known<F: Flash>(&self, fs: &FileSystem<F>, ino: Ino) -> bool {
        let gone = self.lazy.as_ref().is_some_and(|l| l.gone.contains(&ino));
        gone || fs.objects.contains_key(&ino) || self.inodes.contains_key(&ino)
    }

    /// Reads the inode at `at`, which must be object `ino`'s (if given), and puts it in
    /// RAM (see `adopt`).
    fn instantiate<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
        at: u64,
        facts: Option<IndexFacts>,
    ) -> Result<()> {
        if self.known(fs, ino) {
            return Ok(());
        }
        if !heap_ok(&self.regions, at, INODE_BYTES) {
            return Err(corrupt(format!(
                "object {ino}: its inode would be at {at}, outside the heap"
            )));
        }
        let bytes = self.reader().read(at, INODE_BYTES)?;
        self.adopt(fs, Some(ino), at, bytes, facts)
    }

    /// Puts the object whose inode (at `at`) is `bytes` in RAM, with what it points at
    /// (its parent, a hard link's file, its attribute set). Its links, set and
    /// subdirectories are `facts` (the saved index's) or else its inode's.
    fn adopt<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        want: Option<Ino>,
        at: u64,
        bytes: Vec<u8>,
        facts: Option<IndexFacts>,
    ) -> Result<()> {
        let regions = self.regions;
        let chunk_bytes = fs.layout.chunk_bytes;
        let i: InodeRead = parse_inode(&mut self.reader(), &regions, chunk_bytes, at, None, bytes)?;
        let ino = i.ino;
        if want.is_some_and(|w| w != ino)
            || !self.taken(at, INODE_BYTES)
            || !self.taken(i.record.off, i.record.bytes)
            || (i.first != 0 && !self.taken(i.first, OFFSETS_BYTES))
        {
            return Err(corrupt(format!(
                "object {}: the NVRAM points at an inode at {at} that is not its own",
                want.unwrap_or(ino)
            )));
        }
        let facts = facts.unwrap_or_else(|| {
            let (links, xattr_set, subdirs) = super::tree::facts(&i.bytes);
            IndexFacts {
                links,
                xattr_set,
                subdirs,
            }
        });
        let n = i.nv_inode(at);
        let (kind, parent, target) = (n.place.kind, n.place.parent, n.place.target);
        let first = i.first;
        self.inodes.insert(ino, n);
        fs.instantiate(ino, i.rec, facts);
        if let Some(l) = self.lazy.as_mut() {
            l.left = l.left.saturating_sub(1);
        }
        if first == 0 {
            fs.unloaded.remove(&ino);
        } else if has_data(kind) && kind != Kind::File {
            // Symlink targets and attribute sets are small and read with their object.
            self.load_map_inner(fs, ino)?;
        }
        // What RAM objects point at must be in RAM too (see `crate::lazy`).
        let mut next = vec![parent];
        if kind == Kind::HardLink {
            next.push(target);
        }
        next.push(facts.xattr_set);
        for x in next {
            self.load_object_inner(fs, x)?;
        }
        Ok(())
    }

    /// `FileSystem::present`: object `ino` into RAM, if the source has it.
    pub(super) fn load_object_inner<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
    ) -> Result<()> {
        let Some(live) = self.lazy.as_ref().map(Lazy::is_live) else {
            return Ok(());
        };
        if ino == 0 || self.known(fs, ino) {
            return Ok(());
        }
        match live {
            true => {
                if let Some(at) = self.find_live(ino)? {
                    self.instantiate(fs, ino, at, None)?;
                }
            }
            false => {
                if let Some(e) = self.find(ino)? {
                    self.instantiate(fs, e.ino, e.at, Some(e.facts()))?;
                }
            }
        }
        Ok(())
    }

    /// `FileSystem::expand`: every child of `dir` into RAM and into its entry lists.
    pub(super) fn expand_dir_inner<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        dir: Ino,
    ) -> Result<()> {
        let Some(live) = self.lazy.as_ref().map(Lazy::is_live) else {
            fs.unexpanded.remove(&dir);
            return Ok(());
        };
        if !fs.unexpanded.contains(&dir) {
            return Ok(());
        }
        if live {
            return self.expand_live(fs, dir);
        }
        let e = self
            .find(dir)?
            .ok_or_else(|| corrupt(format!("directory {dir} is missing from the saved index")))?;
        self.expand_entry(fs, e, None)
    }

    /// Expands directory `dir` from its child list in place: each child's inode is read
    /// once, and must name `dir` in its record.
    fn expand_live<F: Flash>(&mut self, fs: &mut FileSystem<F>, dir: Ino) -> Result<()> {
        let at = self
            .inodes
            .get(&dir)
            .map(|n| n.at)
            .ok_or_else(|| corrupt(format!("directory {dir} has no inode")))?;
        let mut cur = get64(&self.reader().read(at + INODE_CHILD, 8)?, 0);
        let (most, mut seen) = (self.regions.most_inodes(), HashSet::new());
        let mut kids = Vec::new();
        while cur != 0 {
            if !heap_ok(&self.regions, cur, INODE_BYTES)
                || !seen.insert(cur)
                || seen.len() as u64 > most
            {
                return Err(corrupt(format!(
                    "directory {dir}: its child list points at {cur}, outside the heap, \
                     or loops"
                )));
            }
            let bytes = self.reader().read(cur, INODE_BYTES)?;
            let (ino, next) = (
                get64(&bytes, 0) as u32,
                get64(&bytes, INODE_SIB_NEXT as usize),
            );
            match self.inodes.get(&ino) {
                // In RAM already: it must be the same inode.
                Some(n) if n.at != cur => {
                    return Err(corrupt(format!(
                        "directory {dir}: its child list holds object {ino} at {cur}, \
                         whose inode is at {}",
                        n.at
                    )))
                }
                Some(_) => {}
                None => self.adopt(fs, None, cur, bytes, None)?,
            }
            let parent = self.inodes.get(&ino).map(|n| n.place.parent);
            if parent != Some(dir) {
                return Err(corrupt(format!(
                    "directory {dir}: its child list holds object {ino}, whose record \
                     names another directory"
                )));
            }
            kids.push(ino);
            cur = next;
        }
        if let Some(d) = fs.dirs.get_mut(&dir) {
            d.unnamed.extend(kids);
        }
        fs.unexpanded.remove(&dir);
        Ok(())
    }

    /// Expands the directory of entry `e`. `read` holds every entry of the table when
    /// the caller has already read them all (`load_all`), so none is read twice.
    fn expand_entry<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        e: Entry,
        read: Option<&[Entry]>,
    ) -> Result<()> {
        let dir = e.ino;
        let off = self.index_shape().1 + 4 * u64::from(e.first_child);
        let b = self.reader().read(off, 4 * u64::from(e.children))?;
        let idx: Vec<u32> = (0..e.children as usize).map(|i| get32(&b, 4 * i)).collect();
        if children_crc(&idx) != e.children_crc {
            return Err(corrupt(format!(
                "directory {dir}: its saved children fail their checksum"
            )));
        }
        let mut kids = Vec::with_capacity(idx.len());
        for i in idx {
            let c = match read {
                Some(all) => *all.get(i as usize).ok_or_else(|| {
                    corrupt(format!("directory {dir}: child {i} is past the index"))
                })?,
                None => self.entry(u64::from(i))?,
            };
            self.instantiate(fs, c.ino, c.at, Some(c.facts()))?;
            kids.push(c.ino);
        }
        if let Some(d) = fs.dirs.get_mut(&dir) {
            d.unnamed.extend(kids);
        }
        fs.unexpanded.remove(&dir);
        Ok(())
    }

    /// `FileSystem::load_all`: every object, then every directory's children, each entry
    /// (or inode) read once.
    pub(super) fn load_all_inner<F: Flash>(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        let Some(live) = self.lazy.as_ref().map(Lazy::is_live) else {
            fs.lazy_pending = false;
            return Ok(());
        };
        if live {
            return self.load_all_live(fs);
        }
        let objects = self.index_shape().2;
        let mut all = Vec::with_capacity(objects as usize);
        for i in 0..objects {
            let e = self.entry(i)?;
            self.instantiate(fs, e.ino, e.at, Some(e.facts()))?;
            all.push(e);
        }
        for &e in &all {
            if fs.unexpanded.contains(&e.ino) {
                self.expand_entry(fs, e, Some(&all))?;
            }
        }
        // Every directory in RAM came from an entry of the table.
        debug_assert!(fs.unexpanded.is_empty(), "{:?}", fs.unexpanded);
        Ok(())
    }

    /// `load_all` from the tree: every hash chain, then every directory's child list.
    fn load_all_live<F: Flash>(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        let regions = self.regions;
        for b in 0..super::layout::BUCKETS {
            for (ino, at) in read_bucket(&mut self.reader(), &regions, b)? {
                self.instantiate(fs, ino, at, None)?;
            }
        }
        let mut dirs: Vec<Ino> = fs.unexpanded.iter().copied().collect();
        dirs.sort_unstable();
        for dir in dirs {
            self.expand_live(fs, dir)?;
        }
        if let Some(l) = self.lazy.as_mut() {
            l.all_read = true;
        }
        Ok(())
    }

    /// Once nothing is left to read from the source, a saved state's room is free.
    /// (Called by the hooks when they are done, never in the middle of a walk.)
    pub(super) fn finish_if_done<F: Flash>(&mut self, fs: &mut FileSystem<F>) {
        let done = self.lazy.as_ref().is_some_and(|l| {
            let read = match l.source {
                Source::Saved { .. } => l.left == 0,
                Source::Live => l.all_read,
            };
            read && fs.unexpanded.is_empty()
        });
        if done {
            let l = self.lazy.take().expect("checked");
            let (off, bytes) = match l.source {
                Source::Saved { region, .. } => region,
                Source::Live => (0, 0),
            };
            if bytes > 0 {
                self.heap.release(off, bytes);
            }
            fs.lazy_pending = false;
            fs.lazy_uncounted = 0;
        }
    }
}
