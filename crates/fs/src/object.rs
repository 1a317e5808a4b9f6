//! Objects (inodes) as they live in RAM after mount.

use crate::format::{Record, RecordKind};
use crate::mapping::{new_map, ChunkMap, MappingKind};
use crate::types::Kind;

/// Marks a chunk with no page (a hole).
pub const NO_PAGE: u32 = u32::MAX;
/// Marks a chunk whose page was lost to an uncorrectable error: reads give EIO.
pub const LOST_PAGE: u32 = u32::MAX - 1;

/// The one chunk of a file being written, kept until it is full or flushed.
pub struct WriteCache {
    pub chunk: u32,
    pub data: Vec<u8>,
}

pub struct Object {
    /// Header fields, exactly as the next header write will store them (`name_updates`
    /// always empty here).
    pub meta: Record,
    /// Files: where each chunk lives (DESIGN axis 2); made on the first chunk.
    pub chunks: Option<Box<dyn ChunkMap>>,
    pub mapping: MappingKind,
    /// Page holding the current header, if it has been written.
    pub header: Option<u32>,
    /// Attributes changed in RAM (size, times by writes) and not yet in a header.
    pub header_dirty: bool,
    pub cache: Option<WriteCache>,
    /// Open handles; an unlinked object lives on until the last one closes.
    pub open: u32,
    /// Highest chunk index that any page of this object on flash may carry, live or not.
    /// Extending a file over a hole at or below it writes zeros, so a stale chunk can
    /// never reappear there after a remount.
    pub max_chunk_on_flash: Option<u32>,
    /// Directories: how many subdirectories (for nlink).
    pub subdirs: u32,
}

impl Object {
    pub fn new(meta: Record, mapping: MappingKind) -> Self {
        Self {
            meta,
            chunks: None,
            mapping,
            header: None,
            header_dirty: false,
            cache: None,
            open: 0,
            max_chunk_on_flash: None,
            subdirs: 0,
        }
    }

    pub fn kind(&self) -> Kind {
        match self.meta.kind {
            RecordKind::Object(k) => k,
            RecordKind::Super => Kind::File,
        }
    }

    pub fn chunk_page(&self, chunk: u32) -> u32 {
        self.chunks.as_ref().map_or(NO_PAGE, |m| m.get(chunk))
    }

    /// Maps a chunk; returns the page it had.
    pub fn set_chunk(&mut self, chunk: u32, pno: u32) -> u32 {
        let kind = self.mapping;
        self.chunks
            .get_or_insert_with(|| new_map(kind))
            .set(chunk, pno)
    }

    /// Drops chunks from `keep` on; returns their pages.
    pub fn truncate_chunks(&mut self, keep: u32) -> Vec<u32> {
        self.chunks
            .as_mut()
            .map_or_else(Vec::new, |m| m.truncate(keep))
    }

    /// (chunk, page) of every mapped or lost chunk.
    pub fn chunk_entries(&self) -> Vec<(u32, u32)> {
        self.chunks.as_ref().map_or_else(Vec::new, |m| m.entries())
    }

    /// Pages holding data (for `stat`'s block count).
    pub fn data_pages(&self) -> u64 {
        self.chunks.as_ref().map_or(0, |m| m.mapped())
    }

    pub fn saw_chunk(&mut self, chunk: u32) {
        self.max_chunk_on_flash = Some(self.max_chunk_on_flash.map_or(chunk, |m| m.max(chunk)));
    }
}
