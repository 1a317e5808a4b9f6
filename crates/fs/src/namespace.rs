//! Names: lookup, create, link, unlink, rename, readdir, and object lifetime.
//!
//! Directories are upward (YAFFS, MNFS): each object's header lists its own names as
//! (parent directory, name); a directory's header lists nothing about its children, and
//! the directories' indexes are rebuilt in RAM (lazily, see `details`). So every namespace
//! change is one header write of the object that changes, which makes each atomic:
//! - rename over an existing name: the moved object's header claims the name and carries
//!   the replaced object's new names (without it) as a name update;
//! - RENAME_EXCHANGE: one header carries both objects' new names;
//! - unlink: the header loses the name; an object with no names left is deleted, and that
//!   header is its tombstone.

use std::collections::BTreeMap;

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::{Name, Record};
use crate::fs::{Dir, FileSystem, Tomb};
use crate::object::{Details, LOST_PAGE};
use crate::types::{Attr, DirEntry, Ino, Kind, RenameMode, Time, NAME_MAX, ROOT_INO};

/// Longest symlink target: PATH_MAX (4,096) less its terminating NUL, as on Linux.
pub const SYMLINK_MAX: usize = 4095;

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

impl NewObject<'static> {
    /// A regular file, mode 0644, owned by root: what the benchmarks and unit tests
    /// create.
    pub fn regular_file() -> Self {
        NewObject {
            kind: Kind::File,
            perm: 0o644,
            uid: 0,
            gid: 0,
            rdev: 0,
            target: b"",
        }
    }
}

impl<F: Flash> FileSystem<F> {
    /// The object holding a name in a directory: the object itself, or a hard link object
    /// naming it (see `links`).
    fn child(&mut self, dir: Ino, name: &[u8]) -> Result<Ino> {
        self.dir_loaded(dir)?
            .get(name)
            .copied()
            .ok_or(FsError::NotFound)
    }

    fn has_child(&mut self, dir: Ino, name: &[u8]) -> Result<bool> {
        Ok(self.dir_loaded(dir)?.contains_key(name))
    }

    /// A directory new names may go in: one that exists and has not been removed (it may
    /// still be open somewhere).
    pub(crate) fn live_dir(&mut self, dir: Ino) -> Result<()> {
        let o = self.visible(dir)?;
        if o.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        if dir != ROOT_INO {
            self.load(dir)?;
            if self.obj(dir)?.d().names.is_empty() {
                return Err(FsError::NotFound);
            }
        }
        Ok(())
    }

    /// The object called `name` in directory `parent`.
    pub fn lookup(&mut self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.present(parent)?;
        self.check_alive()?;
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let holder = self.child(parent, name)?;
        self.getattr(self.target_of(holder))
    }

    /// The directory holding directory `dir` (the root's is the root): what ".." names
    /// there. FUSE asks for it to reconnect a file handle (`open_by_handle_at`).
    pub fn parent_dir(&mut self, dir: Ino) -> Result<Ino> {
        self.present(dir)?;
        self.check_alive()?;
        let o = self.visible(dir)?;
        if o.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        match (dir, o.parent) {
            (ROOT_INO, _) => Ok(ROOT_INO),
            (_, 0) => Err(FsError::NotFound), // removed, still held
            (_, p) => Ok(p),
        }
    }

    /// Entries of a directory, sorted by name (without "." and "..").
    pub fn readdir(&mut self, dir: Ino) -> Result<Vec<DirEntry>> {
        self.present(dir)?;
        self.check_alive()?;
        self.visible(dir)?;
        let entries: Vec<(Box<[u8]>, Ino)> = self
            .dir_loaded(dir)?
            .iter()
            .map(|(n, &i)| (n.clone(), i))
            .collect();
        if self.dir_atime {
            self.accessed(dir)?;
        }
        Ok(entries
            .into_iter()
            .filter_map(|(name, holder)| {
                let ino = self.target_of(holder);
                Some(DirEntry {
                    name: name.to_vec(),
                    ino,
                    kind: self.objects.get(&ino)?.kind,
                })
            })
            .collect())
    }

    /// The parent of a directory (the root is its own parent).
    pub fn parent_of(&self, dir: Ino) -> Result<Ino> {
        let o = self.obj(dir)?;
        Ok(if o.parent == 0 { ROOT_INO } else { o.parent })
    }

    /// Creates a file, directory, symlink or special file.
    pub fn create(&mut self, parent: Ino, name: &[u8], new: NewObject) -> Result<Attr> {
        self.present(parent)?;
        self.check_writable()?;
        check_name(name)?;
        if !new.kind.is_visible() {
            return Err(FsError::Invalid("not a kind of object one can create"));
        }
        self.live_dir(parent)?;
        if self.has_child(parent, name)? {
            return Err(FsError::Exists);
        }
        // The directory's times are written later: room for that header first.
        self.metadata_room(parent, None)?;
        let mut size = 0;
        if new.kind == Kind::Symlink {
            if new.target.is_empty() {
                return Err(FsError::NotFound); // as symlink(2) says of ""
            }
            if new.target.len() > SYMLINK_MAX {
                return Err(FsError::NameTooLong);
            }
            size = new.target.len() as u64;
        }
        let now = self.now();
        let mut d = Details::from_record(Record::bare(new.kind, new.perm & 0o7777, now));
        d.uid = new.uid;
        d.gid = new.gid;
        d.rdev = new.rdev;
        d.names = vec![Name {
            parent,
            name: name.into(),
        }];
        if new.kind == Kind::Symlink {
            d.target = new.target.to_vec();
        }
        let ino = self.create_object(new.kind, d, size, Vec::new())?;
        if new.kind == Kind::Dir {
            self.dirs.insert(
                ino,
                Dir {
                    unnamed: Vec::new(),
                    index: Some(BTreeMap::new()),
                },
            );
        }
        self.index_name(ino, parent, name);
        self.touch_dir(parent, now)?;
        self.getattr(ino)
    }

    pub fn readlink(&mut self, ino: Ino) -> Result<Vec<u8>> {
        self.present(ino)?;
        self.check_alive()?;
        self.visible(ino)?;
        self.load_payload(ino)?;
        let o = self.obj(ino)?;
        if o.kind != Kind::Symlink {
            return Err(FsError::Invalid("not a symlink"));
        }
        Ok(o.d().target.clone())
    }

    /// Removes a non-directory's name.
    pub fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.present(parent)?;
        self.check_writable()?;
        let ino = self.child(parent, name)?;
        match self.obj(ino)?.kind {
            Kind::Dir => return Err(FsError::IsDir),
            Kind::HardLink => self.unlink_hard_link(ino, parent, name)?,
            _ => self.drop_name(ino, parent, name)?,
        }
        self.erase_emptied_blocks()
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.present(parent)?;
        self.check_writable()?;
        if name == b"." {
            return Err(FsError::Invalid("rmdir of '.'"));
        }
        if name == b".." {
            return Err(FsError::NotEmpty);
        }
        let ino = self.child(parent, name)?;
        if self.obj(ino)?.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        if !self.dir_loaded(ino)?.is_empty() {
            return Err(FsError::NotEmpty);
        }
        self.drop_name(ino, parent, name)
    }

    /// Writes the object's header without `(parent, name)`; deletes it if that was its
    /// last name, no hard link names it and nothing holds it open.
    fn drop_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        self.load(ino)?;
        let now = self.now();
        let mut d = self.obj(ino)?.d().clone();
        d.names
            .retain(|n| !(n.parent == parent && &*n.name == name));
        d.ctime = Time::from_ns(now);
        if !d.names.is_empty() || self.link_count(ino) > 0 {
            // The header records the size: the data it covers goes first. An object losing
            // its last name is going away, so its data needs no flash (and a full device
            // must still be able to delete it).
            self.flush_cache(ino)?;
        }
        self.persist(ino, d, Vec::new())?;
        self.unindex_name(ino, parent, name);
        self.touch_dir(parent, now)?;
        self.bury_if_orphan(ino)
    }

    /// Whether a deleted object's last header must stay on flash as its tombstone: while
    /// older headers of it remain (they would bring it back), while blocks hold data pages
    /// of it (a scan would take them for a file whose header was lost, see
    /// `lost_found`), and while its number is the highest with a header on flash (see
    /// `newest_header_ino`).
    pub(crate) fn tomb_needed(&self, obj: Ino, headers_on_flash: u32, data_blocks: u32) -> bool {
        headers_on_flash > 1 || data_blocks > 0 || obj >= self.newest_header_ino
    }

    /// Frees an object whose (name-less) header is already on flash: that header stays as
    /// its tombstone while `tomb_needed` says so.
    pub(crate) fn delete_object(&mut self, ino: Ino) {
        let Some(o) = self.objects.remove(&ino) else {
            return;
        };
        self.untrack(ino);
        self.allocator.forget(ino);
        debug_assert!(o.details.as_ref().is_none_or(|d| d.names.is_empty()));
        if o.kind == Kind::HardLink {
            let target = Ino::try_from(o.size).unwrap_or(0);
            if let Some(n) = self.links.get_mut(&target) {
                *n -= 1;
                if *n == 0 {
                    self.links.remove(&target);
                }
            }
        }
        self.reserves.remove(ino);
        self.handles.remove(&ino);
        self.hollow.remove(&ino);
        self.drop_xattr_set_of(ino);
        // Its name-less header (or no header at all) drops these at any mount: no
        // deletion marker needed (YAFFS1's soft deletion).
        for (_, pno) in o.chunks.entries() {
            if pno != LOST_PAGE {
                self.blocks.invalidate_unlisted(pno);
            }
        }
        self.caches.remove(&ino);
        self.dirs.remove(&ino);
        // Only an emptied directory goes, and emptiness is only known once expanded.
        debug_assert!(!self.unexpanded.contains(&ino), "{ino} deleted unexpanded");
        self.unexpanded.remove(&ino);
        self.bury_header(ino, &o);
    }

    /// The header page of a deleted object `o` stays as its tombstone while `tomb_needed`
    /// says so; otherwise it is stale.
    pub(crate) fn bury_header(&mut self, ino: Ino, o: &crate::object::Object) {
        let Some(h) = o.header_page() else {
            if o.data_blocks > 0 {
                self.untombed.insert(ino);
            }
            return;
        };
        if self.tomb_needed(ino, o.headers_on_flash, o.data_blocks) {
            self.tombstones.insert(
                ino,
                Tomb {
                    page: h,
                    headers_on_flash: o.headers_on_flash,
                    data_blocks: o.data_blocks,
                },
            );
        } else {
            self.blocks.invalidate(h);
        }
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
        self.present(parent)?;
        self.present(new_parent)?;
        self.rename_names(parent, name, new_parent, new_name, mode)?;
        // A rename over a file deletes it.
        self.erase_emptied_blocks()
    }

    fn rename_names(
        &mut self,
        parent: Ino,
        name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
        mode: RenameMode,
    ) -> Result<()> {
        self.check_writable()?;
        check_name(new_name)?;
        let src = self.child(parent, name)?;
        self.live_dir(new_parent)?;
        let dst = self.dir_loaded(new_parent)?.get(new_name).copied();
        let src_kind = self.obj(self.target_of(src))?.kind;
        match (mode, dst) {
            (RenameMode::NoReplace, Some(_)) => return Err(FsError::Exists),
            (RenameMode::Exchange, None) => return Err(FsError::NotFound),
            _ => {}
        }
        if dst.map(|d| self.target_of(d)) == Some(self.target_of(src)) {
            return Ok(()); // two names of one object: POSIX says do nothing
        }
        // A directory may not move into itself or below itself.
        if src_kind == Kind::Dir && self.is_ancestor(src, new_parent) {
            return Err(FsError::Invalid("cannot move a directory into itself"));
        }
        // Both directories' times are written later.
        self.metadata_room(parent, None)?;
        self.metadata_room(new_parent, None)?;
        self.load(src)?;
        if let Some(d) = dst {
            self.load(d)?;
        }
        if let (RenameMode::Exchange, Some(d)) = (mode, dst) {
            if self.obj(d)?.kind == Kind::Dir && self.is_ancestor(d, parent) {
                return Err(FsError::Invalid("cannot move a directory into itself"));
            }
            return self.exchange(src, parent, name, d, new_parent, new_name);
        }
        if let Some(d) = dst {
            let dst_kind = self.obj(self.target_of(d))?.kind;
            match (src_kind == Kind::Dir, dst_kind == Kind::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) if !self.dir_loaded(d)?.is_empty() => return Err(FsError::NotEmpty),
                _ => {}
            }
        }
        let now = self.now();
        let mut sd = self.obj(src)?.d().clone();
        for n in sd.names.iter_mut() {
            if n.parent == parent && &*n.name == name {
                *n = Name {
                    parent: new_parent,
                    name: new_name.into(),
                };
                break;
            }
        }
        sd.ctime = Time::from_ns(now);
        // The replaced object loses the name in the same page.
        let dst_names = match dst {
            Some(d) => {
                let mut names = self.obj(d)?.d().names.clone();
                names.retain(|n| !(n.parent == new_parent && &*n.name == new_name));
                Some((d, names))
            }
            None => None,
        };
        let updates: Vec<(Ino, Vec<Name>)> = dst_names.iter().cloned().collect();
        if !self.fits(src, &sd, &updates) {
            return Err(FsError::NameTooLong);
        }
        self.flush_cache(src)?;
        // The replaced object's header is rewritten after the rename is durable; whatever
        // that needs must succeed (or fail) before it.
        let dst_lives_on = dst_names
            .as_ref()
            .is_some_and(|(d, n)| !n.is_empty() || self.link_count(*d) > 0);
        if let (Some(d), true) = (dst, dst_lives_on) {
            self.flush_cache(d)?;
        }
        self.persist(src, sd, updates)?;
        // Durable from here.
        if let Some(d) = dst {
            self.unindex_name(d, new_parent, new_name);
        }
        self.unindex_name(src, parent, name);
        self.index_name(src, new_parent, new_name);
        self.touch_dir(parent, now)?;
        self.touch_dir(new_parent, now)?;
        self.link_renamed(src, now)?;
        if let Some((d, names)) = dst_names {
            // Tidy the loser's header now (a scan would read the update otherwise).
            let mut dd = self.obj(d)?.d().clone();
            dd.names = names;
            dd.ctime = Time::from_ns(now);
            self.persist(d, dd, Vec::new())?;
            let target = self.target_of(d);
            if target != d {
                // A hard link object that lost its one name is gone; its file may be too.
                self.delete_object(d);
                self.changed(target, now)?;
            }
            self.bury_if_orphan(target)?;
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
        let mut ad = self.obj(a)?.d().clone();
        swap(&mut ad.names, (a_parent, a_name), (b_parent, b_name));
        ad.ctime = Time::from_ns(now);
        let mut bd = self.obj(b)?.d().clone();
        swap(&mut bd.names, (b_parent, b_name), (a_parent, a_name));
        bd.ctime = Time::from_ns(now);
        let updates = vec![(b, bd.names.clone())];
        // Both headers must hold their new names (with a symlink target or attributes
        // beside them) before anything is written: once a's page is on flash the swap is
        // durable, and a failure of b's own header after it would leave RAM describing
        // neither the old state nor the new one (issue 59: a checkpoint that disagreed
        // with the scan after fsstress).
        if !self.fits(a, &ad, &updates) || !self.fits(b, &bd, &[]) {
            return Err(FsError::NameTooLong);
        }
        self.flush_cache(a)?;
        self.flush_cache(b)?;
        // One page makes the swap durable; b's own header follows to tidy up.
        self.persist(a, ad, updates)?;
        self.unindex_name(a, a_parent, a_name);
        self.unindex_name(b, b_parent, b_name);
        self.index_name(a, b_parent, b_name);
        self.index_name(b, a_parent, a_name);
        if let Err(e) = self.persist(b, bd.clone(), Vec::new()) {
            // The swap is durable (a's header carries b's names): RAM keeps b's new names,
            // and its header is written again by the next flush of b. The caller hears the
            // error the write met, with every name already where the flash says.
            if let Ok(o) = self.obj_mut(b) {
                o.parent = bd.names.first().map_or(0, |n| n.parent);
                if let Some(d) = o.details.as_deref_mut() {
                    d.names = bd.names;
                }
                o.set_dirty(true);
            }
            return Err(e);
        }
        self.touch_dir(a_parent, now)?;
        self.touch_dir(b_parent, now)?;
        self.link_renamed(a, now)?;
        self.link_renamed(b, now)
    }

    /// A hard link object's name changed: its file's ctime changes too (the file is what
    /// the caller sees renamed).
    fn link_renamed(&mut self, holder: Ino, now: i64) -> Result<()> {
        let target = self.target_of(holder);
        if target != holder && self.objects.contains_key(&target) {
            self.changed(target, now)?;
        }
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
            match self.objects.get(&dir) {
                Some(o) if o.parent != 0 => dir = o.parent,
                _ => return false,
            }
        }
        false
    }

    /// Adds a name to the directory index and the object's RAM names (its header already
    /// has it). The directory's index is loaded.
    pub(crate) fn index_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        let is_dir = self.objects.get(&ino).is_some_and(|o| o.kind == Kind::Dir);
        if let Some(index) = self.dirs.get_mut(&parent).and_then(|d| d.index.as_mut()) {
            index.insert(name.into(), ino);
        }
        if is_dir {
            if let Some(p) = self.objects.get_mut(&parent) {
                p.subdirs += 1;
            }
        }
        if let Some(o) = self.objects.get_mut(&ino) {
            if let Some(d) = o.details.as_deref_mut() {
                let n = Name {
                    parent,
                    name: name.into(),
                };
                if !d.names.contains(&n) {
                    d.names.push(n);
                }
                o.parent = d.names[0].parent;
            }
        }
    }

    /// Removes a name from the directory index and from the object's RAM names.
    pub(crate) fn unindex_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        if let Some(index) = self.dirs.get_mut(&parent).and_then(|d| d.index.as_mut()) {
            if index.get(name) == Some(&ino) {
                index.remove(name);
            }
        }
        let mut was_dir = false;
        if let Some(o) = self.objects.get_mut(&ino) {
            was_dir = o.kind == Kind::Dir;
            if let Some(d) = o.details.as_deref_mut() {
                d.names
                    .retain(|n| !(n.parent == parent && &*n.name == name));
                o.parent = d.names.first().map_or(0, |n| n.parent);
            }
        }
        if was_dir {
            if let Some(p) = self.objects.get_mut(&parent) {
                p.subdirs = p.subdirs.saturating_sub(1);
            }
        }
    }

    /// A directory's contents changed: its times change (written lazily, like YAFFS).
    pub(crate) fn touch_dir(&mut self, dir: Ino, now: i64) -> Result<()> {
        if !self.objects.contains_key(&dir) {
            return Ok(());
        }
        self.load(dir)?;
        let o = self.obj_mut(dir)?;
        let d = o.d_mut();
        d.mtime = Time::from_ns(now);
        d.ctime = d.mtime;
        o.set_dirty(true);
        Ok(())
    }

    /// Resolves a path ("/a/b/c") from the root, following no symlinks.
    pub fn resolve(&mut self, path: &str) -> Result<Ino> {
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
