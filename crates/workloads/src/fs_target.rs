//! The nandkit file system as a [`Target`].
//!
//! Implemented on [`FileSystem`] itself, with no cache of its own: every call resolves its
//! path with [`FileSystem::resolve`], one directory lookup per component, which the file
//! system answers from its in-RAM directory index (workload paths are two or three
//! components deep). A wrapper holding a path -> inode map would save little and could
//! go stale when a file is deleted.
//!
//! A close in the modelled application is an `fsync` here: YAFFS, which the MODA paper
//! ran, writes a file's cached chunk and its object header when the file is closed.
//! `idle` does nothing: Table 1's runs had no idle-time cleaning. [`crate::IdleCleaning`]
//! wraps a file system whose idle time cleans.

use nandkit_flash::Flash;
use nandkit_fs::{FileSystem, FsError, Kind, NewObject, SetAttr};

use crate::{Target, TargetError};

impl From<FsError> for TargetError {
    fn from(e: FsError) -> Self {
        match e {
            // Out of object numbers is out of room for a new file, as the errno says.
            FsError::NoSpace | FsError::NoObjectNumbers(_) => TargetError::NoSpace,
            FsError::NotFound => TargetError::NotFound,
            other => TargetError::Other(other.to_string()),
        }
    }
}

/// The directory holding `path` and the last component's name.
fn split(path: &str) -> Result<(&str, &str), TargetError> {
    let path = path.trim_end_matches('/');
    match path.rfind('/') {
        Some(i) if i + 1 < path.len() => Ok((&path[..i], &path[i + 1..])),
        _ => Err(TargetError::Other(format!(
            "{path:?}: not a path to a name"
        ))),
    }
}

fn new_object(kind: Kind, perm: u32) -> NewObject<'static> {
    NewObject {
        kind,
        perm,
        uid: 0,
        gid: 0,
        rdev: 0,
        target: b"",
    }
}

fn make<F: Flash>(
    fs: &mut FileSystem<F>,
    path: &str,
    kind: Kind,
    perm: u32,
) -> Result<(), TargetError> {
    let (dir, name) = split(path)?;
    let parent = fs.resolve(dir)?;
    match fs.create(parent, name.as_bytes(), new_object(kind, perm)) {
        Ok(_) => Ok(()),
        Err(FsError::Exists) => Err(TargetError::Other(format!("{path}: file exists"))),
        Err(e) => Err(e.into()),
    }
}

impl<F: Flash> Target for FileSystem<F> {
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError> {
        make(self, path, Kind::Dir, 0o755)
    }

    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        make(self, path, Kind::File, 0o644)
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        let ino = self.resolve(path)?;
        // A full device gives a short write (or ENOSPC when nothing fit).
        if FileSystem::write(self, ino, offset, data)? < data.len() {
            return Err(TargetError::NoSpace);
        }
        Ok(())
    }

    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        let ino = self.resolve(path)?;
        let mut buf = vec![0; len];
        Ok(FileSystem::read(self, ino, offset, &mut buf)?)
    }

    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        let ino = self.resolve(path)?;
        Ok(self.getattr(ino)?.size)
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        let ino = self.resolve(path)?;
        let set = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        self.setattr(ino, set)?;
        Ok(())
    }

    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        let (dir, name) = split(path)?;
        let parent = self.resolve(dir)?;
        Ok(FileSystem::unlink(self, parent, name.as_bytes())?)
    }

    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        let ino = self.resolve(path)?;
        Ok(FileSystem::fsync(self, ino)?)
    }
}
