//! Public value types of the file system API.

use serde::Serialize;

/// An object (inode) number. Numbers are never reused, so a stale page on flash can never
/// be mistaken for part of a newer object.
pub type Ino = u32;

/// The root directory.
pub const ROOT_INO: Ino = 1;
/// Longest name, in bytes, as on Linux.
pub const NAME_MAX: usize = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    CharDev,
    BlockDev,
    Fifo,
    Socket,
    /// On flash only: one more name of a file (a hard link), as YAFFS keeps them. Never
    /// returned by `getattr`, `lookup` or `readdir`, which give the file itself.
    HardLink,
    /// On flash only: the extended attributes of one object. Never returned by the API.
    Xattrs,
}

impl Kind {
    pub(crate) fn code(self) -> u8 {
        match self {
            Kind::File => 1,
            Kind::Dir => 2,
            Kind::Symlink => 3,
            Kind::CharDev => 4,
            Kind::BlockDev => 5,
            Kind::Fifo => 6,
            Kind::Socket => 7,
            Kind::HardLink => 8,
            Kind::Xattrs => 9,
        }
    }

    /// Is this a kind the API shows (not a hard link or attribute record)?
    pub fn is_visible(self) -> bool {
        !matches!(self, Kind::HardLink | Kind::Xattrs)
    }

    pub(crate) fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::CharDev,
            5 => Kind::BlockDev,
            6 => Kind::Fifo,
            7 => Kind::Socket,
            8 => Kind::HardLink,
            9 => Kind::Xattrs,
            _ => return None,
        })
    }
}

/// Nanoseconds since the Unix epoch: what a [`crate::Clock`] reads.
pub type TimeNs = i64;

/// A timestamp: seconds since the Unix epoch and nanoseconds, over the whole range Linux
/// allows (64-bit seconds), so a date in 2300 is kept as given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Time {
    pub sec: i64,
    /// Always below 1,000,000,000.
    pub nsec: u32,
}

impl Time {
    pub const fn new(sec: i64, nsec: u32) -> Time {
        Time { sec, nsec }
    }

    pub fn from_ns(ns: TimeNs) -> Time {
        Time {
            sec: ns.div_euclid(1_000_000_000),
            nsec: ns.rem_euclid(1_000_000_000) as u32,
        }
    }

    /// Nanoseconds since the epoch, saturating where an i64 cannot hold them (before 1678
    /// or after 2262).
    pub fn to_ns(self) -> TimeNs {
        self.sec
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(self.nsec))
    }
}

/// What `stat` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Attr {
    pub ino: Ino,
    pub kind: Kind,
    /// Permission bits, including set-uid, set-gid and sticky (`0o7777`).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    /// File: bytes of data. Symlink: bytes of the target. Others: 0.
    pub size: u64,
    /// Flash pages holding this object's data, and the holes fallocate reserved for it.
    pub blocks: u64,
    pub rdev: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
}

/// Attribute changes for `setattr`; `None` leaves a field alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Truncate (shrink or grow) to this size. Files only.
    pub size: Option<u64>,
    pub atime: Option<Time>,
    pub mtime: Option<Time>,
    /// The change time to store. Only FUSE's write-back cache sends one: the kernel keeps a
    /// cached file's times itself and hands them over with its writes, and a stat after a
    /// remount must show what the kernel showed. `None`: the time of this call, if anything
    /// changed.
    pub ctime: Option<Time>,
}

/// `rename` variants (Linux renameat2 flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RenameMode {
    /// Replace the destination if it exists.
    #[default]
    Replace,
    /// Fail with EEXIST if the destination exists (RENAME_NOREPLACE).
    NoReplace,
    /// Atomically swap source and destination, which must both exist (RENAME_EXCHANGE).
    Exchange,
}

/// `setxattr` variants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XattrMode {
    /// Create or replace.
    #[default]
    Set,
    /// Fail with EEXIST if it exists (XATTR_CREATE).
    Create,
    /// Fail with ENODATA if it does not exist (XATTR_REPLACE).
    Replace,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: Kind,
}

/// Space, in units of the file system's data chunk (one flash page of user data).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatFs {
    /// Bytes of user data one chunk holds.
    pub chunk_bytes: u32,
    /// Chunks the file system can hold (good blocks less the cleaning reserve).
    pub total_chunks: u64,
    /// Chunks holding live data or metadata.
    pub used_chunks: u64,
    /// Chunks available for new data (including space cleaning can reclaim).
    pub free_chunks: u64,
    pub objects: u64,
    pub name_max: u32,
}
