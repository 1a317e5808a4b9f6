//! Objects read from the NVRAM when a call first reaches them, after a mount that found a
//! clean unmount's saved state (`save`, `index`). The state's room stays taken while any
//! object or directory listing is still to be read from it, and is freed once all are.
//!
//! Every inode read this way is checked as the mount's walk would check it (pointers
//! inside the heap, its number, the record's checksum), and must lie in room the NVRAM
//! manager counts as taken: the saved free extents are the manager's. Anything else is a
//! clear `CorruptNvram` error, never a panic or a wrong object.

use std::collections::{HashMap, HashSet};

use nandkit_flash::Flash;

use super::index::{children_crc, Entry, ENTRY};
use super::layout::{get32, INODE_BYTES, OFFSETS_BYTES};
use super::recover::{read_inode, Reader};
use super::save::Saved;
use super::{Minv, NvInode};
use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::lazy::IndexFacts;
use crate::rebuild::has_data;
use crate::types::{Ino, Kind};

fn corrupt(why: impl Into<String>) -> FsError {
    FsError::CorruptNvram(why.into())
}

/// Where the saved index is, and how much of it is still to be read.
pub(crate) struct Lazy {
    /// The saved state's allocation (freed when everything is read).
    region: (u64, u64),
    table_off: u64,
    children_off: u64,
    objects: u64,
    children: u64,
    /// Entries not yet put in RAM.
    left: u64,
    /// Objects the index lists that were deleted since the mount (after being put in RAM).
    pub(super) gone: HashSet<Ino>,
}

impl Lazy {
    pub(crate) fn region_bytes(&self) -> u64 {
        self.region.1
    }

    /// Objects the index lists that are not in RAM yet.
    pub(crate) fn unread(&self) -> u64 {
        self.left
    }

    pub(crate) fn new(s: &Saved) -> Lazy {
        Lazy {
            region: (s.off, s.bytes),
            table_off: s.table_off,
            children_off: s.children_off,
            objects: s.objects,
            children: s.children,
            left: s.objects,
            gone: HashSet::new(),
        }
    }
}

impl Minv {
    fn reader(&mut self) -> Reader<'_> {
        Reader {
            nv: &mut self.nv,
            patch: HashMap::new(),
        }
    }

    /// Entry `i` of the object table, checked.
    fn entry(&mut self, i: u64) -> Result<Entry> {
        let l = self.lazy.as_ref().expect("lazy");
        let (off, objects, children) = (l.table_off + i * ENTRY, l.objects, l.children);
        let b = self.reader().read(off, ENTRY)?;
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
        let (mut lo, mut hi) = (0, self.lazy.as_ref().expect("lazy").objects);
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

    /// Whether `off .. off + len` is room the NVRAM manager counts as taken.
    fn taken(&self, off: u64, len: u64) -> bool {
        !self.heap.overlaps_free(off, len)
    }

    /// Puts the object of entry `e` in RAM, with what it points at (its parent, a hard
    /// link's file, its attribute set), unless it is there already.
    fn instantiate<F: Flash>(&mut self, fs: &mut FileSystem<F>, e: Entry) -> Result<()> {
        let gone = self.lazy.as_ref().is_some_and(|l| l.gone.contains(&e.ino));
        if gone || fs.objects.contains_key(&e.ino) || self.inodes.contains_key(&e.ino) {
            return Ok(());
        }
        let regions = self.regions;
        let chunk_bytes = fs.layout.chunk_bytes;
        let mut r = self.reader();
        let (ino, _, record, first, rec) = read_inode(&mut r, &regions, chunk_bytes, e.at, None)?;
        if ino != e.ino
            || !self.taken(e.at, INODE_BYTES)
            || !self.taken(record.off, record.bytes)
            || (first != 0 && !self.taken(first, OFFSETS_BYTES))
        {
            return Err(corrupt(format!(
                "object {}: the saved index points at an inode that is not its own",
                e.ino
            )));
        }
        let (kind, parent, target) = (rec.kind, rec.names.first().map(|n| n.parent), rec.size);
        self.inodes.insert(
            ino,
            NvInode {
                at: e.at,
                blocks: Default::default(),
                loaded: first == 0,
                place: super::tree::Place::of(&rec),
            },
        );
        fs.instantiate(
            ino,
            rec,
            IndexFacts {
                links: e.links,
                xattr_set: e.xattr_set,
                subdirs: e.subdirs,
            },
        );
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
        let mut next: Vec<Ino> = parent.into_iter().collect();
        if kind == Kind::HardLink {
            next.push(Ino::try_from(target).unwrap_or(0));
        }
        if e.xattr_set != 0 {
            next.push(e.xattr_set);
        }
        for x in next {
            self.load_object_inner(fs, x)?;
        }
        Ok(())
    }

    /// `FileSystem::present`: object `ino` into RAM, if the index has it.
    pub(super) fn load_object_inner<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        ino: Ino,
    ) -> Result<()> {
        if self.lazy.is_none() || ino == 0 || fs.objects.contains_key(&ino) {
            return Ok(());
        }
        if let Some(e) = self.find(ino)? {
            self.instantiate(fs, e)?;
        }
        Ok(())
    }

    /// `FileSystem::expand`: every child of `dir` into RAM and into its entry lists.
    pub(super) fn expand_dir_inner<F: Flash>(
        &mut self,
        fs: &mut FileSystem<F>,
        dir: Ino,
    ) -> Result<()> {
        if self.lazy.is_none() || !fs.unexpanded.contains(&dir) {
            fs.unexpanded.remove(&dir);
            return Ok(());
        }
        let e = self
            .find(dir)?
            .ok_or_else(|| corrupt(format!("directory {dir} is missing from the saved index")))?;
        self.expand_entry(fs, e, None)
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
        let l = self.lazy.as_ref().expect("lazy");
        let off = l.children_off + 4 * u64::from(e.first_child);
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
            self.instantiate(fs, c)?;
            kids.push(c.ino);
        }
        if let Some(d) = fs.dirs.get_mut(&dir) {
            d.unnamed.extend(kids);
        }
        fs.unexpanded.remove(&dir);
        Ok(())
    }

    /// `FileSystem::load_all`: every object, then every directory's children, each entry
    /// read once.
    pub(super) fn load_all_inner<F: Flash>(&mut self, fs: &mut FileSystem<F>) -> Result<()> {
        let Some(l) = self.lazy.as_ref() else {
            fs.lazy_pending = false;
            return Ok(());
        };
        let mut all = Vec::with_capacity(l.objects as usize);
        for i in 0..l.objects {
            let e = self.entry(i)?;
            self.instantiate(fs, e)?;
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

    /// Once nothing is left to read from the saved state, its room is free. (Called by
    /// the hooks when they are done, never in the middle of a walk of the index.)
    pub(super) fn finish_if_done<F: Flash>(&mut self, fs: &mut FileSystem<F>) {
        let done = self
            .lazy
            .as_ref()
            .is_some_and(|l| l.left == 0 && fs.unexpanded.is_empty());
        if done {
            let l = self.lazy.take().expect("checked");
            self.heap.release(l.region.0, l.region.1);
            fs.lazy_pending = false;
            fs.lazy_uncounted = 0;
        }
    }
}
