//! Extended attributes. An object's attributes are one attribute set: an object of their
//! own (`Kind::Xattrs`) whose one name is ("xattrs" in) its owner. The set lives in that
//! object's header while it fits the page, else in its data chunks (see `payload`), so a
//! value may be as large as Linux allows (64 KiB) and an object may have as many as it
//! likes.
//!
//! Every change is atomic:
//! - a set that fits its header page, replacing one that did too, is one header write of
//!   the same object;
//! - otherwise a new set object is written whole (chunks, then a header that takes the
//!   name from the old set in the same page); the old set's header is then rewritten
//!   without a name, as its tombstone;
//! - removing the last attribute writes the set's tombstone.
//!
//! A set belongs to its owner: when the owner is deleted the set goes with it, with no
//! write (a scan drops a set whose owner is gone; object numbers are never reused).
//!
//! Namespaces `user.`, `security.` and `trusted.` are stored, and of `system.` only the
//! two POSIX ACLs (`system.posix_acl_access`, `system.posix_acl_default`); other names
//! are not supported.

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::{Name, Record};
use crate::fs::FileSystem;
use crate::object::Details;
use crate::types::{Ino, Kind, Time, XattrMode};

const XATTR_NAME_MAX: usize = 255;
/// Largest value (Linux's XATTR_SIZE_MAX).
pub const XATTR_SIZE_MAX: usize = 65_536;
/// The name an attribute set has in its owner.
const SET_NAME: &[u8] = b"xattrs";

type List = Vec<(Vec<u8>, Vec<u8>)>;

/// The `system.` attributes stored: POSIX ACLs, as the kernel hands them over (the file
/// system keeps the bytes; what they mean is the mount's business).
pub const POSIX_ACL_NAMES: [&[u8]; 2] = [b"system.posix_acl_access", b"system.posix_acl_default"];

fn check_xattr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(FsError::Invalid("attribute name must be 1..=255 bytes"));
    }
    let ok = [&b"user."[..], b"security.", b"trusted."]
        .iter()
        .any(|p| name.starts_with(p) && name.len() > p.len())
        || POSIX_ACL_NAMES.contains(&name);
    if !ok {
        return Err(FsError::NotSupported(
            "only user.*, security.*, trusted.* and POSIX ACL attributes",
        ));
    }
    Ok(())
}

impl<F: Flash> FileSystem<F> {
    /// The attributes of `owner`, in the order they were first set.
    fn xattr_list(&mut self, owner: Ino) -> Result<List> {
        self.visible(owner)?;
        let Some(&set) = self.xattr_sets.get(&owner) else {
            return Ok(Vec::new());
        };
        self.load_payload(set)?;
        Ok(self.obj(set)?.d().xattrs.clone())
    }

    /// Does `ino` have any extended attribute? (A map lookup: cheap enough for every write.)
    pub fn has_xattrs(&self, ino: Ino) -> bool {
        self.xattr_sets.contains_key(&ino)
    }

    pub fn getxattr(&mut self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.present(ino)?;
        self.check_alive()?;
        self.xattr_list(ino)?
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or(FsError::NoData)
    }

    pub fn listxattr(&mut self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.present(ino)?;
        self.check_alive()?;
        Ok(self.xattr_list(ino)?.into_iter().map(|(k, _)| k).collect())
    }

    pub fn setxattr(&mut self, ino: Ino, name: &[u8], value: &[u8], mode: XattrMode) -> Result<()> {
        self.present(ino)?;
        self.check_writable()?;
        check_xattr_name(name)?;
        if value.len() > XATTR_SIZE_MAX {
            return Err(FsError::ValueTooBig);
        }
        // The owner's ctime is written later.
        self.metadata_room(ino, None)?;
        let mut list = self.xattr_list(ino)?;
        let existing = list.iter().position(|(k, _)| k == name);
        match (mode, existing) {
            (XattrMode::Create, Some(_)) => return Err(FsError::Exists),
            (XattrMode::Replace, None) => return Err(FsError::NoData),
            (_, Some(i)) => list[i].1 = value.to_vec(),
            (_, None) => list.push((name.to_vec(), value.to_vec())),
        }
        self.store_xattrs(ino, list)
    }

    pub fn removexattr(&mut self, ino: Ino, name: &[u8]) -> Result<()> {
        self.present(ino)?;
        self.check_writable()?;
        let mut list = self.xattr_list(ino)?;
        let before = list.len();
        list.retain(|(k, _)| k != name);
        if list.len() == before {
            return Err(FsError::NoData);
        }
        self.store_xattrs(ino, list)
    }

    /// Makes `list` the owner's attribute set (see the module comment for how each case
    /// stays atomic). The owner's ctime changes, written with its next header.
    fn store_xattrs(&mut self, owner: Ino, list: List) -> Result<()> {
        let now = self.now();
        let old = self.xattr_sets.get(&owner).copied();
        if list.is_empty() {
            let old = old.expect("an attribute was removed from a set");
            self.bury_xattr_set(old, now)?;
            self.xattr_sets.remove(&owner);
            return self.changed(owner, now);
        }
        // In place: the old set is in its header, and the new one fits there too.
        if let Some(set) =
            old.filter(|&s| self.objects.get(&s).is_some_and(|o| o.chunks.end() == 0))
        {
            let mut d = self.obj(set)?.d().clone();
            d.xattrs = list.clone();
            d.ctime = Time::from_ns(now);
            if self.fits(set, &d, &[]) {
                self.persist(set, d, Vec::new())?;
                return self.changed(owner, now);
            }
        }
        let mut d = Details::from_record(Record::bare(Kind::Xattrs, 0, now));
        d.names = vec![Name {
            parent: owner,
            name: SET_NAME.into(),
        }];
        d.xattrs = list;
        let updates = old.map(|o| vec![(o, Vec::new())]).unwrap_or_default();
        let set = self.create_object(Kind::Xattrs, d, 0, updates)?;
        self.xattr_sets.insert(owner, set);
        if let Some(old) = old {
            // The new set took the name in its header; the old one's own header follows,
            // so a later scan needs no update to know it is gone.
            self.bury_xattr_set(old, now)?;
        }
        self.changed(owner, now)
    }

    /// Writes an attribute set's tombstone and frees it.
    fn bury_xattr_set(&mut self, set: Ino, now: i64) -> Result<()> {
        self.load(set)?;
        let mut d = self.obj(set)?.d().clone();
        d.names.clear();
        d.xattrs.clear();
        d.ctime = Time::from_ns(now);
        self.persist(set, d, Vec::new())?;
        self.delete_object(set);
        Ok(())
    }

    /// An owner is gone: its attribute set leaves RAM with it. Nothing is written: on
    /// flash a set whose owner is gone is dead (see the module comment). A store that
    /// keeps an inode per object (minv) is told, so the set's inode goes now rather than
    /// at the next mount.
    pub(crate) fn drop_xattr_set_of(&mut self, owner: Ino) {
        let Some(set) = self.xattr_sets.remove(&owner) else {
            return;
        };
        // No store while a mount rebuilds, and nothing is written on a read-only mount:
        // the next writable mount drops ownerless sets itself. An error is a lost power:
        // the store has marked the file system dead, and the next mount drops the set as
        // it does after any crash.
        if self.metadata.is_some() && !self.read_only {
            let _ = self.meta_hook(|store, fs| store.forget(fs, set));
        }
        if let Some(o) = self.objects.remove(&set) {
            self.drop_ownerless_set(set, o);
        }
    }

    /// Frees an attribute set whose owner is gone. Its header, naming that owner, is what
    /// a scan finds of it, and marks it dead: kept (as a tombstone) while its chunks are
    /// on flash, which would otherwise look like a file whose header was lost.
    pub(crate) fn drop_ownerless_set(&mut self, set: Ino, o: crate::object::Object) {
        for (_, pno) in o.chunks.entries() {
            if pno != crate::object::LOST_PAGE {
                self.blocks.invalidate(pno);
            }
        }
        self.bury_header(set, &o);
    }
}
