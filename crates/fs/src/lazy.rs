//! Objects a mount leaves in its metadata store until a call reaches them. A MiNV mount
//! instantiates no object, after a clean unmount or a crash (see `meta::minv::lazy`): the
//! root comes first, any other object the first time a call names it (by number, or as a
//! child of a directory looked into), with its parent, its hard link's file and its
//! attribute set, so that whatever is in RAM can follow its pointers. A directory in
//! `unexpanded` has none of its children in its entry lists yet: `load_dir` asks the store
//! for them first.
//!
//! Rules that keep this exact: a directory's children change only through calls that look
//! into it (create, link, unlink, rename, rmdir all do), so an unexpanded directory holds
//! what the store held at mount; and every pass over all objects (fsck, unmount, a page lost
//! with its owner unknown) loads them all first.

use nandkit_flash::Flash;

use crate::error::Result;
use crate::format::Record;
use crate::fs::{Dir, FileSystem};
use crate::object::{Object, NO_PAGE};
use crate::types::{Ino, Kind};

/// What the store's index says of an object beside its record.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IndexFacts {
    /// Hard link objects naming it.
    pub links: u32,
    /// Its attribute set (0: none).
    pub xattr_set: Ino,
    /// Directories: subdirectories.
    pub subdirs: u32,
}

impl<F: Flash> FileSystem<F> {
    /// Makes sure `ino` is in RAM if it exists at all (a no-op unless a mount left objects
    /// in the store). Every call that takes an object number asks this first.
    pub(crate) fn present(&mut self, ino: Ino) -> Result<()> {
        if !self.lazy_pending || self.objects.contains_key(&ino) {
            return Ok(());
        }
        self.meta_hook(|store, fs| store.load_object(fs, ino))
    }

    /// Makes sure directory `dir`'s children are in RAM and in its entry lists.
    pub(crate) fn expand(&mut self, dir: Ino) -> Result<()> {
        if !self.unexpanded.contains(&dir) {
            return Ok(());
        }
        self.meta_hook(|store, fs| store.expand_dir(fs, dir))
    }

    /// Every object in RAM (a mount may leave them in its metadata store until a call
    /// reaches them): for a look over all of them, as `info` takes.
    pub fn load_everything(&mut self) -> Result<()> {
        self.load_all()
    }

    /// Every object in RAM and every directory expanded (fsck, unmount).
    pub(crate) fn load_all(&mut self) -> Result<()> {
        if !self.lazy_pending {
            return Ok(());
        }
        self.meta_hook(|store, fs| store.load_all(fs))
    }

    /// Puts an object the store read into RAM, as a mount would have: its details from
    /// `rec`, a directory with no children listed yet (unexpanded), its links and
    /// attribute set from `facts`. Its chunk map is left to `map` (the store says which
    /// maps it has read).
    pub(crate) fn instantiate(&mut self, ino: Ino, rec: Record, facts: IndexFacts) {
        let kind = rec.kind;
        let mut o = Object::new(kind, self.config.mapping, self.layout.map_shape());
        o.size = rec.size;
        o.header = NO_PAGE;
        o.parent = rec.names.first().map_or(0, |n| n.parent);
        o.subdirs = facts.subdirs;
        let reserve = rec.reserve.clone();
        o.details = Some(Box::new(self.details_from_record(ino, rec)));
        self.objects.insert(ino, o);
        if kind == Kind::Dir {
            self.dirs.insert(ino, Dir::default());
            self.unexpanded.insert(ino);
        }
        if facts.links > 0 {
            self.links.insert(ino, facts.links);
        }
        if facts.xattr_set != 0 {
            self.xattr_sets.insert(ino, facts.xattr_set);
        }
        // Counted once the map is in (the mount loads reserved files at once).
        self.reserves.set(ino, reserve, None);
        if crate::rebuild::has_data(kind) {
            self.unloaded.insert(ino);
        }
        if kind.is_visible() {
            self.lazy_uncounted = self.lazy_uncounted.saturating_sub(1);
        }
    }
}
