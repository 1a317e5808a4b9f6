//! Objects (inodes) as they live in RAM after mount.
//!
//! An object is kept small (about 64 bytes) because a mount holds one per file: its type,
//! size, where its header is, its first parent and its chunk map, all known from the
//! tags or summaries at mount without reading the header. Everything else (permissions,
//! owner, times, names, symlink target, extended attributes, truncation floors) is in
//! [`Details`], loaded from the header page the first time it is needed (YAFFS2 does the
//! same: "lazy loading").

use crate::format::record::{Floor, Name, Record};
use crate::mapping::FileMap;
use crate::types::{Ino, Kind, Time};

/// Marks a chunk with no page (a hole), or an object without a header page.
pub const NO_PAGE: u32 = u32::MAX;
/// Marks a chunk whose page was lost to an uncorrectable error: reads give EIO.
pub const LOST_PAGE: u32 = u32::MAX - 1;
/// `max_chunk_on_flash` when no chunk of the object was ever written.
pub const NO_CHUNK: u32 = u32::MAX;

/// The header fields an object's header record holds, loaded on demand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details {
    /// Version of the header these came from (0: never written).
    pub version: u64,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub names: Vec<Name>,
    /// Symlinks: the target (loaded from the data chunks when it did not fit the header).
    pub target: Vec<u8>,
    /// `Kind::Xattrs` objects: the attributes (loaded from the data chunks likewise).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub floors: Vec<Floor>,
}

impl Details {
    pub fn from_record(r: Record) -> Details {
        Details {
            version: r.version,
            perm: r.perm,
            uid: r.uid,
            gid: r.gid,
            rdev: r.rdev,
            atime: r.atime,
            mtime: r.mtime,
            ctime: r.ctime,
            names: r.names,
            target: r.target,
            xattrs: r.xattrs,
            floors: r.floors,
        }
    }
}

/// Flag: details changed in RAM (or size, by writes) and not yet in a header.
pub const HEADER_DIRTY: u8 = 1;

pub struct Object {
    pub size: u64,
    /// Files: where each chunk lives (DESIGN axis 2).
    pub chunks: FileMap,
    pub details: Option<Box<Details>>,
    /// Page holding the current header, or `NO_PAGE`.
    pub header: u32,
    /// Directory of the first name (0 when it has none). A directory has one name.
    pub parent: Ino,
    /// Highest chunk index that any page of this object on flash may carry, live or not
    /// (`NO_CHUNK`: none). A hole at or below it may hide a stale chunk.
    pub max_chunk_on_flash: u32,
    /// Header pages (any version, not yet erased) of this object on flash.
    pub headers_on_flash: u32,
    /// Blocks holding data pages of it (any version), where the profile tracks them
    /// (`blocks::data_owners`): its tombstone must outlive them.
    pub data_blocks: u32,
    /// Directories: how many subdirectories (for nlink).
    pub subdirs: u32,
    /// Open handles and kernel references (FUSE lookups not yet forgotten): an object
    /// that loses its last name lives on in RAM until they are all gone.
    pub open: u32,
    pub kind: Kind,
    pub flags: u8,
}

impl Object {
    /// A new object whose file map is of `mapping`'s kind, on a device of `shape`.
    pub fn new(
        kind: Kind,
        mapping: crate::mapping::MappingKind,
        shape: crate::mapping::MapShape,
    ) -> Self {
        Self {
            size: 0,
            chunks: FileMap::new(mapping, shape),
            details: None,
            header: NO_PAGE,
            parent: 0,
            max_chunk_on_flash: NO_CHUNK,
            headers_on_flash: 0,
            data_blocks: 0,
            subdirs: 0,
            open: 0,
            kind,
            flags: 0,
        }
    }

    pub fn header_page(&self) -> Option<u32> {
        (self.header != NO_PAGE).then_some(self.header)
    }

    pub fn is_dirty(&self) -> bool {
        self.flags & HEADER_DIRTY != 0
    }

    pub fn set_dirty(&mut self, dirty: bool) {
        if dirty {
            self.flags |= HEADER_DIRTY;
        } else {
            self.flags &= !HEADER_DIRTY;
        }
    }

    pub fn saw_chunk(&mut self, chunk: u32) {
        if self.max_chunk_on_flash == NO_CHUNK || chunk > self.max_chunk_on_flash {
            self.max_chunk_on_flash = chunk;
        }
    }

    pub fn max_chunk(&self) -> Option<u32> {
        (self.max_chunk_on_flash != NO_CHUNK).then_some(self.max_chunk_on_flash)
    }

    /// Loaded details (callers load them first).
    pub fn d(&self) -> &Details {
        self.details.as_deref().expect("details loaded")
    }

    pub fn d_mut(&mut self) -> &mut Details {
        self.details.as_deref_mut().expect("details loaded")
    }
}

/// The one chunk of a file being written, kept until it is full or flushed.
pub struct WriteCache {
    pub chunk: u32,
    pub data: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_small() {
        assert!(
            std::mem::size_of::<Object>() <= 64,
            "Object is {} bytes",
            std::mem::size_of::<Object>()
        );
    }
}
