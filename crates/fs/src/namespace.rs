//! Names: lookup, create, link, unlink, rename, readdir, and object lifetime.
//!
//! Directories are upward (YAFFS, MNFS): each object's header lists its own names as
//! (parent directory, name); a directory's header lists nothing about its children, and
//! the directory index is rebuilt in RAM at mount. So every namespace change is one header
//! write of the object that changes, which makes each of them atomic:
//! - rename over an existing name: the moved object's header claims the name; the object
//!   that had it loses it because its own claim is older (resolved at mount by serial);
//! - RENAME_EXCHANGE: one header carries both objects' new names (`name_updates`);
//! - unlink: the header loses the name; an object with no names left is deleted, and that
//!   header is its tombstone.

use std::collections::BTreeMap;

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::{Name, Record, RecordKind};
use crate::fs::FileSystem;
use crate::object::{Object, LOST_PAGE};
use crate::types::{Attr, DirEntry, Ino, Kind, RenameMode, NAME_MAX, ROOT_INO};

/// Most names (hard links) one object may have.
const LINK_MAX: usize = 65_000;

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." {
        return Err(FsError::Invalid("name must not be empty, '.' or '..'"));
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Invalid("name must not contain '/' or NUL"));
    }
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

/// What a new object is.
pub struct NewObject<'a> {
    pub kind: Kind,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    /// Symlink target.
    pub target: &'a [u8],
}

impl<F: Flash> FileSystem<F> {
    fn dir_index(&self, dir: Ino) -> Result<&BTreeMap<Box<[u8]>, Ino>> {
        match self.obj(dir)?.kind() {
            Kind::Dir => self.dirs.get(&dir).ok_or(FsError::NotDir),
            _ => Err(FsError::NotDir),
        }
    }

    /// The object called `name` in directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.check_alive()?;
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let ino = *self.dir_index(parent)?.get(name).ok_or(FsError::NotFound)?;
        self.getattr(ino)
    }

    /// Entries of a directory, sorted by name (without "." and "..").
    pub fn readdir(&self, dir: Ino) -> Result<Vec<DirEntry>> {
        self.check_alive()?;
        Ok(self
            .dir_index(dir)?
            .iter()
            .map(|(name, &ino)| DirEntry {
                name: name.to_vec(),
                ino,
                kind: self.objects[&ino].kind(),
            })
            .collect())
    }

    /// The parent of a directory (the root is its own parent).
    pub fn parent_of(&self, dir: Ino) -> Result<Ino> {
        let o = self.obj(dir)?;
        Ok(o.meta.names.first().map_or(ROOT_INO, |n| n.parent))
    }

    /// Creates a file, directory, symlink or special file.
    pub fn create(&mut self, parent: Ino, name: &[u8], new: NewObject) -> Result<Attr> {
        self.check_writable()?;
        check_name(name)?;
        if self.dir_index(parent)?.contains_key(name) {
            return Err(FsError::Exists);
        }
        if new.kind == Kind::Symlink && new.target.is_empty() {
            return Err(FsError::Invalid("empty symlink target"));
        }
        if new.target.len() > u16::MAX as usize {
            return Err(FsError::NameTooLong);
        }
        let now = self.now();
        let meta = Record {
            kind: RecordKind::Object(new.kind),
            perm: new.perm & 0o7777,
            uid: new.uid,
            gid: new.gid,
            rdev: new.rdev,
            size: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            names: vec![Name {
                parent,
                name: name.into(),
            }],
            target: if new.kind == Kind::Symlink {
                new.target.to_vec()
            } else {
                Vec::new()
            },
            xattrs: Vec::new(),
            name_updates: Vec::new(),
        };
        if !self.fits(&meta, &[]) {
            return Err(FsError::NameTooLong);
        }
        self.make_room_for_new_object()?;
        let ino = self.next_ino;
        self.next_ino = self.next_ino.checked_add(1).ok_or(FsError::NoSpace)?;
        self.objects
            .insert(ino, Object::new(meta.clone(), self.config.mapping));
        if let Err(e) = self.persist(ino, meta, Vec::new()) {
            self.objects.remove(&ino);
            return Err(e);
        }
        self.add_name(ino, parent, name);
        if new.kind == Kind::Dir {
            self.dirs.insert(ino, BTreeMap::new());
        }
        self.touch_dir(parent, now);
        self.getattr(ino)
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.check_alive()?;
        let o = self.obj(ino)?;
        if o.kind() != Kind::Symlink {
            return Err(FsError::Invalid("not a symlink"));
        }
        Ok(o.meta.target.clone())
    }

    /// A new name for an existing non-directory (a hard link).
    pub fn link(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.check_writable()?;
        check_name(name)?;
        let o = self.obj(ino)?;
        if o.kind() == Kind::Dir {
            return Err(FsError::NotPermitted);
        }
        if o.meta.names.is_empty() {
            return Err(FsError::NotFound); // unlinked but still open
        }
        if self.dir_index(parent)?.contains_key(name) {
            return Err(FsError::Exists);
        }
        let mut meta = self.obj(ino)?.meta.clone();
        if meta.names.len() >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        meta.names.push(Name {
            parent,
            name: name.into(),
        });
        if !self.fits(&meta, &[]) {
            return Err(FsError::TooManyLinks);
        }
        let now = self.now();
        meta.ctime_ns = now;
        self.flush_cache(ino)?;
        meta.size = self.obj(ino)?.meta.size;
        self.persist(ino, meta, Vec::new())?;
        self.add_name(ino, parent, name);
        self.touch_dir(parent, now);
        self.getattr(ino)
    }

    /// Removes a non-directory's name.
    pub fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.check_writable()?;
        let ino = *self.dir_index(parent)?.get(name).ok_or(FsError::NotFound)?;
        if self.obj(ino)?.kind() == Kind::Dir {
            return Err(FsError::IsDir);
        }
        self.drop_name(ino, parent, name)
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.check_writable()?;
        if name == b"." {
            return Err(FsError::Invalid("rmdir of '.'"));
        }
        if name == b".." {
            return Err(FsError::NotEmpty);
        }
        let ino = *self.dir_index(parent)?.get(name).ok_or(FsError::NotFound)?;
        if self.obj(ino)?.kind() != Kind::Dir {
            return Err(FsError::NotDir);
        }
        if !self.dirs.get(&ino).is_none_or(|d| d.is_empty()) {
            return Err(FsError::NotEmpty);
        }
        self.drop_name(ino, parent, name)
    }

    /// Writes the object's header without `(parent, name)`; deletes it if that was its
    /// last name and nothing holds it open.
    fn drop_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        let now = self.now();
        let mut meta = self.obj(ino)?.meta.clone();
        meta.names
            .retain(|n| !(n.parent == parent && &*n.name == name));
        meta.ctime_ns = now;
        if !meta.names.is_empty() {
            // The header records the size: the data it covers goes first. An object losing
            // its last name is going away, so its data needs no flash (and a full device
            // must still be able to delete it).
            self.flush_cache(ino)?;
            meta.size = self.obj(ino)?.meta.size;
        }
        self.persist(ino, meta, Vec::new())?;
        self.remove_name(ino, parent, name);
        self.touch_dir(parent, now);
        let o = self.obj(ino)?;
        if o.meta.names.is_empty() && o.open == 0 {
            self.delete_object(ino);
        }
        Ok(())
    }

    /// Frees an object whose (name-less) header is already on flash: that header stays as
    /// its tombstone while older headers of the object remain on flash.
    pub(crate) fn delete_object(&mut self, ino: Ino) {
        let Some(o) = self.objects.remove(&ino) else {
            return;
        };
        debug_assert!(o.meta.names.is_empty());
        for (_, pno) in o.chunk_entries() {
            if pno != LOST_PAGE {
                self.blocks.invalidate(pno);
            }
        }
        self.dirs.remove(&ino);
        if let Some(h) = o.header {
            if self.headers_on_flash.get(&ino).copied().unwrap_or(0) > 1 {
                self.tombstones.insert(ino, h);
            } else {
                self.blocks.invalidate(h);
            }
        }
    }

    /// A handle was opened on `ino`.
    pub fn open(&mut self, ino: Ino) -> Result<()> {
        self.check_alive()?;
        self.obj_mut(ino)?.open += 1;
        Ok(())
    }

    /// A handle was closed: flushes the file's buffered chunk and header (as YAFFS does on
    /// close), and deletes it if it was unlinked and this was the last handle.
    pub fn release(&mut self, ino: Ino) -> Result<()> {
        self.check_alive()?;
        let o = self.obj_mut(ino)?;
        o.open = o.open.saturating_sub(1);
        let (orphan, open) = (o.meta.names.is_empty() && ino != ROOT_INO, o.open);
        if orphan {
            if open == 0 {
                self.delete_object(ino);
            }
            return Ok(());
        }
        if !self.read_only {
            self.fsync(ino)?;
        }
        Ok(())
    }

    /// rename / renameat2. See the module comment for why each case is atomic.
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        self.check_writable()?;
        check_name(new_name)?;
        let src = *self.dir_index(parent)?.get(name).ok_or(FsError::NotFound)?;
        let dst = self.dir_index(new_parent)?.get(new_name).copied();
        let src_kind = self.obj(src)?.kind();
        match (mode, dst) {
            (RenameMode::NoReplace, Some(_)) => return Err(FsError::Exists),
            (RenameMode::Exchange, None) => return Err(FsError::NotFound),
            _ => {}
        }
        if dst == Some(src) {
            return Ok(()); // two names of one object: POSIX says do nothing
        }
        // A directory may not move into itself or below itself.
        if src_kind == Kind::Dir && self.is_ancestor(src, new_parent) {
            return Err(FsError::Invalid("cannot move a directory into itself"));
        }
        if let (RenameMode::Exchange, Some(d)) = (mode, dst) {
            if self.obj(d)?.kind() == Kind::Dir && self.is_ancestor(d, parent) {
                return Err(FsError::Invalid("cannot move a directory into itself"));
            }
            return self.exchange(src, parent, name, d, new_parent, new_name);
        }
        if let Some(d) = dst {
            let dst_kind = self.obj(d)?.kind();
            match (src_kind == Kind::Dir, dst_kind == Kind::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) if !self.dirs.get(&d).is_none_or(|x| x.is_empty()) => {
                    return Err(FsError::NotEmpty)
                }
                _ => {}
            }
        }
        let now = self.now();
        let mut meta = self.obj(src)?.meta.clone();
        for n in meta.names.iter_mut() {
            if n.parent == parent && &*n.name == name {
                *n = Name {
                    parent: new_parent,
                    name: new_name.into(),
                };
                break;
            }
        }
        meta.ctime_ns = now;
        if !self.fits(&meta, &[]) {
            return Err(FsError::NameTooLong);
        }
        self.flush_cache(src)?;
        meta.size = self.obj(src)?.meta.size;
        // The replaced object's header is rewritten after the rename is durable; whatever
        // that needs must succeed (or fail) before it.
        let dst_keeps_names = match dst {
            Some(d) => self.obj(d)?.meta.names.len() > 1,
            None => false,
        };
        if let (Some(d), true) = (dst, dst_keeps_names) {
            self.flush_cache(d)?;
        }
        self.persist(src, meta, Vec::new())?;
        // Durable from here: the replaced object's own (older) claim on the name loses.
        if let Some(d) = dst {
            self.remove_name(d, new_parent, new_name);
        }
        self.remove_name(src, parent, name);
        self.add_name(src, new_parent, new_name);
        self.touch_dir(parent, now);
        self.touch_dir(new_parent, now);
        if let Some(d) = dst {
            // Tidy the loser's header now (mount would do it otherwise).
            let mut dmeta = self.obj(d)?.meta.clone();
            dmeta
                .names
                .retain(|n| !(n.parent == new_parent && &*n.name == new_name));
            dmeta.ctime_ns = now;
            if dst_keeps_names {
                dmeta.size = self.obj(d)?.meta.size;
            }
            self.persist(d, dmeta, Vec::new())?;
            let o = self.obj(d)?;
            if o.meta.names.is_empty() && o.open == 0 {
                self.delete_object(d);
            }
        }
        Ok(())
    }

    fn exchange(
        &mut self,
        a: Ino,
        a_parent: Ino,
        a_name: &[u8],
        b: Ino,
        b_parent: Ino,
        b_name: &[u8],
    ) -> Result<()> {
        let now = self.now();
        let swap = |names: &mut Vec<Name>, from: (Ino, &[u8]), to: (Ino, &[u8])| {
            for n in names.iter_mut() {
                if n.parent == from.0 && &*n.name == from.1 {
                    *n = Name {
                        parent: to.0,
                        name: to.1.into(),
                    };
                    break;
                }
            }
        };
        let mut ameta = self.obj(a)?.meta.clone();
        swap(&mut ameta.names, (a_parent, a_name), (b_parent, b_name));
        ameta.ctime_ns = now;
        let mut bmeta = self.obj(b)?.meta.clone();
        swap(&mut bmeta.names, (b_parent, b_name), (a_parent, a_name));
        bmeta.ctime_ns = now;
        let updates = vec![(b, bmeta.names.clone())];
        if !self.fits(&ameta, &updates) {
            return Err(FsError::NameTooLong);
        }
        self.flush_cache(a)?;
        self.flush_cache(b)?;
        ameta.size = self.obj(a)?.meta.size;
        bmeta.size = self.obj(b)?.meta.size;
        // One page makes the swap durable; b's own header follows to tidy up.
        self.persist(a, ameta, updates)?;
        self.remove_name(a, a_parent, a_name);
        self.remove_name(b, b_parent, b_name);
        self.add_name(a, b_parent, b_name);
        self.add_name(b, a_parent, a_name);
        self.obj_mut(b)?.meta.names = bmeta.names.clone();
        self.persist(b, bmeta, Vec::new())?;
        self.touch_dir(a_parent, now);
        self.touch_dir(b_parent, now);
        Ok(())
    }

    /// Is `anc` the directory `dir` or one of its ancestors?
    fn is_ancestor(&self, anc: Ino, mut dir: Ino) -> bool {
        for _ in 0..=self.objects.len() {
            if dir == anc {
                return true;
            }
            if dir == ROOT_INO {
                return false;
            }
            match self.objects.get(&dir).and_then(|o| o.meta.names.first()) {
                Some(n) => dir = n.parent,
                None => return false,
            }
        }
        false
    }

    /// Adds a name to the directory index (the header already has it).
    pub(crate) fn add_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        let is_dir = self
            .objects
            .get(&ino)
            .is_some_and(|o| o.kind() == Kind::Dir);
        self.dirs
            .entry(parent)
            .or_default()
            .insert(name.into(), ino);
        if is_dir {
            if let Some(p) = self.objects.get_mut(&parent) {
                p.subdirs += 1;
            }
        }
        if let Some(o) = self.objects.get_mut(&ino) {
            let n = Name {
                parent,
                name: name.into(),
            };
            if !o.meta.names.contains(&n) {
                o.meta.names.push(n);
            }
        }
    }

    /// Removes a name from the directory index and from the object's RAM names.
    pub(crate) fn remove_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        if let Some(d) = self.dirs.get_mut(&parent) {
            if d.get(name) == Some(&ino) {
                d.remove(name);
            }
        }
        let mut was_dir = false;
        if let Some(o) = self.objects.get_mut(&ino) {
            was_dir = o.kind() == Kind::Dir;
            o.meta
                .names
                .retain(|n| !(n.parent == parent && &*n.name == name));
        }
        if was_dir {
            if let Some(p) = self.objects.get_mut(&parent) {
                p.subdirs = p.subdirs.saturating_sub(1);
            }
        }
    }

    /// A directory's contents changed: its times change (written lazily, like YAFFS).
    fn touch_dir(&mut self, dir: Ino, now: i64) {
        if let Some(o) = self.objects.get_mut(&dir) {
            o.meta.mtime_ns = now;
            o.meta.ctime_ns = now;
            o.header_dirty = true;
        }
    }

    /// Resolves a path ("/a/b/c") from the root, following no symlinks.
    pub fn resolve(&self, path: &str) -> Result<Ino> {
        let mut ino = ROOT_INO;
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            ino = if part == ".." {
                self.parent_of(ino)?
            } else {
                self.lookup(ino, part.as_bytes())?.ino
            };
        }
        Ok(ino)
    }
}
