//! Extended attributes, kept in the object's header (so each change is one atomic page).
//! Namespaces `user.`, `security.` and `trusted.` are stored; others (POSIX ACLs in
//! `system.`) are not supported. All of an object's attributes must fit its header page.

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::types::{Ino, XattrMode};

const XATTR_NAME_MAX: usize = 255;

fn check_xattr_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(FsError::Invalid("attribute name must be 1..=255 bytes"));
    }
    let ok = [&b"user."[..], b"security.", b"trusted."]
        .iter()
        .any(|p| name.starts_with(p) && name.len() > p.len());
    if !ok {
        return Err(FsError::NotSupported(
            "only user.*, security.* and trusted.* attributes",
        ));
    }
    Ok(())
}

impl<F: Flash> FileSystem<F> {
    pub fn getxattr(&mut self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.check_alive()?;
        self.load(ino)?;
        self.obj(ino)?
            .d()
            .xattrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .ok_or(FsError::NoData)
    }

    pub fn listxattr(&mut self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.check_alive()?;
        self.load(ino)?;
        Ok(self
            .obj(ino)?
            .d()
            .xattrs
            .iter()
            .map(|(k, _)| k.clone())
            .collect())
    }

    pub fn setxattr(&mut self, ino: Ino, name: &[u8], value: &[u8], mode: XattrMode) -> Result<()> {
        self.check_writable()?;
        check_xattr_name(name)?;
        if value.len() > u16::MAX as usize {
            return Err(FsError::NoSpace);
        }
        self.load(ino)?;
        let mut d = self.obj(ino)?.d().clone();
        let existing = d.xattrs.iter().position(|(k, _)| k == name);
        match (mode, existing) {
            (XattrMode::Create, Some(_)) => return Err(FsError::Exists),
            (XattrMode::Replace, None) => return Err(FsError::NoData),
            (_, Some(i)) => d.xattrs[i].1 = value.to_vec(),
            (_, None) => d.xattrs.push((name.to_vec(), value.to_vec())),
        }
        if !self.fits(ino, &d, &[]) {
            return Err(FsError::NoSpace);
        }
        d.ctime_ns = self.now();
        self.flush_cache(ino)?;
        self.persist(ino, d, Vec::new())
    }

    pub fn removexattr(&mut self, ino: Ino, name: &[u8]) -> Result<()> {
        self.check_writable()?;
        self.load(ino)?;
        let mut d = self.obj(ino)?.d().clone();
        let before = d.xattrs.len();
        d.xattrs.retain(|(k, _)| k != name);
        if d.xattrs.len() == before {
            return Err(FsError::NoData);
        }
        d.ctime_ns = self.now();
        self.flush_cache(ino)?;
        self.persist(ino, d, Vec::new())
    }
}
