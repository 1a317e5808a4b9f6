//! Hard links, kept the way YAFFS keeps them: each extra name of a file is an object of its
//! own (`Kind::HardLink`), whose header holds that one name and, in its size field, the
//! number of the file it names. So a link or an unlink is one header page however many
//! names the file has, and a file can have any number of them (at least `LINK_MAX`).
//!
//! The file keeps the name it was created with in its own header, or none once that name
//! is removed while links remain: a file without a name of its own lives on as long as a
//! hard link names it (a scan counts the links before it decides). When its last link
//! goes, its newest header (written when it lost its own name) already says it has no
//! names: it is deleted with no further write.
//!
//! Lookups and directory listings give the file, never the link object: the kernel only
//! ever sees the file's number.

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::{Name, Record};
use crate::fs::FileSystem;
use crate::namespace::check_name;
use crate::object::Details;
use crate::types::{Attr, Ino, Kind, Time, ROOT_INO};

/// Most names a file may have (ext4's limit).
pub(crate) const LINK_MAX: u32 = 65_000;

impl<F: Flash> FileSystem<F> {
    /// The object a directory entry stands for: a hard link's file, or the entry's own
    /// object.
    pub(crate) fn target_of(&self, holder: Ino) -> Ino {
        match self.objects.get(&holder) {
            Some(o) if o.kind == Kind::HardLink => Ino::try_from(o.size).unwrap_or(0),
            _ => holder,
        }
    }

    /// Hard link objects naming `ino`.
    pub(crate) fn link_count(&self, ino: Ino) -> u32 {
        self.links.get(&ino).copied().unwrap_or(0)
    }

    /// A new name for an existing non-directory (a hard link).
    pub fn link(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.present(ino)?;
        self.present(parent)?;
        self.check_writable()?;
        check_name(name)?;
        let kind = self.visible(ino)?.kind;
        if kind == Kind::Dir {
            return Err(FsError::NotPermitted);
        }
        self.load(ino)?;
        // The directory's times and the file's ctime are written later.
        self.metadata_room(parent, None)?;
        self.metadata_room(ino, None)?;
        let own = self.obj(ino)?.d().names.len() as u32;
        let links = self.link_count(ino);
        if own == 0 && links == 0 {
            return Err(FsError::NotFound); // unlinked but still open
        }
        self.live_dir(parent)?;
        if self.dir_loaded(parent)?.contains_key(name) {
            return Err(FsError::Exists);
        }
        if own + links >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        let now = self.now();
        let mut d = Details::from_record(Record::bare(Kind::HardLink, 0, now));
        d.names = vec![Name {
            parent,
            name: name.into(),
        }];
        let l = self.create_object(Kind::HardLink, d, u64::from(ino), Vec::new())?;
        *self.links.entry(ino).or_insert(0) += 1;
        self.index_name(l, parent, name);
        self.changed(ino, now)?;
        self.touch_dir(parent, now)?;
        self.getattr(ino)
    }

    /// Removes the name a hard link object holds: its header, without the name, is its
    /// tombstone. The file goes too if that was its last name and nothing holds it open.
    pub(crate) fn unlink_hard_link(&mut self, holder: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        self.load(holder)?;
        let now = self.now();
        let mut d = self.obj(holder)?.d().clone();
        d.names.clear();
        d.ctime = Time::from_ns(now);
        self.persist(holder, d, Vec::new())?;
        self.unindex_name(holder, parent, name);
        self.touch_dir(parent, now)?;
        let target = self.target_of(holder);
        self.delete_object(holder);
        if self.objects.contains_key(&target) {
            self.changed(target, now)?;
        }
        self.bury_if_orphan(target)
    }

    /// The object's ctime moves to `now` (written with its next header, like YAFFS's
    /// lazy attribute writes).
    pub(crate) fn changed(&mut self, ino: Ino, now: i64) -> Result<()> {
        self.load(ino)?;
        let o = self.obj_mut(ino)?;
        o.d_mut().ctime = Time::from_ns(now);
        o.set_dirty(true);
        Ok(())
    }

    /// Deletes `ino` if it has no name left, no hard link and nothing holds it (see
    /// `holds`); frees its data if only the kernel's references hold it. Its newest header
    /// on flash already has no names (it was written when the last name went), unless RAM
    /// has changes not yet written, in which case a name-less header is written first.
    pub(crate) fn bury_if_orphan(&mut self, ino: Ino) -> Result<()> {
        let Some(o) = self.objects.get(&ino) else {
            return Ok(());
        };
        if ino == ROOT_INO || !o.kind.is_visible() || self.link_count(ino) > 0 {
            return Ok(());
        }
        self.load(ino)?;
        let o = self.obj(ino)?;
        if !o.d().names.is_empty() {
            return Ok(());
        }
        if o.open > 0 {
            if self.handles_on(ino) == 0 {
                self.hollow_out(ino);
            }
            return Ok(());
        }
        if o.is_dirty() || o.header_page().is_none() {
            let d = o.d().clone();
            self.persist(ino, d, Vec::new())?;
        }
        self.delete_object(ino);
        Ok(())
    }
}
