//! Page allocation (DESIGN axis 3): which write stream a page goes to. Each stream has its
//! own open block, so a policy separates data (hot from cold, system from user) simply by
//! sending it to different streams.
//!
//! Policies: `sequential` (YAFFS: one stream), `moda` (the MODA paper: system data apart,
//! user data by its file's modification class), `moda-split` (MODA's first level alone:
//! system apart from user data, for measuring what the classifier adds), `dac` (Chiang et al.'s dynamic data
//! clustering: regions by update frequency, per page), `page-hotcold` (MODA's classes
//! per page, its stated future work), `per-file` (MNFS: each file's data in blocks of
//! its own) and `hybrid` (small and rewritten files in the shared log, large ones in
//! blocks of their own: MNFS's stated weakness addressed).
//!
//! What a policy learns (classes, regions, which block holds which stream) lives in RAM
//! only and is rebuilt from nothing at every mount: placement never decides what is on
//! flash or whether it reads back, only where a page goes, so a crash or remount can cost
//! a policy its history (everything restarts unclassified) but never data. The crash
//! sweeps run every policy to check exactly that.

pub mod dac;
pub mod hybrid;
pub mod moda;
pub mod moda_split;
pub mod mq;
pub mod page_hotcold;
pub mod per_file;
pub mod sequential;

use crate::config::{AllocParams, AllocatorKind};
use crate::types::Ino;

/// Why a page is being written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCause {
    /// File data from a user write.
    UserData,
    /// An object header (metadata).
    Metadata,
    /// A valid page moved by cleaning.
    Cleaning,
    /// A checkpoint page.
    Checkpoint,
}

/// What the allocator knows about the page to place.
#[derive(Clone, Copy, Debug)]
pub struct WriteHint {
    pub cause: WriteCause,
    pub obj: Ino,
    pub chunk: u32,
    /// The page is an object header (metadata), whatever the cause.
    pub header: bool,
    /// The page this one replaces: the chunk's or header's previous page for a write, the
    /// page being moved for a cleaning copy; `None` for new data.
    pub old_page: Option<u32>,
    /// A data page holding less than a whole chunk: a file's tail, which the file's next
    /// append writes again.
    pub partial: bool,
}

impl WriteHint {
    /// File data written by a user (`old_page`: the chunk's current page, if any).
    pub fn user_data(obj: Ino, chunk: u32, old_page: Option<u32>) -> Self {
        Self {
            cause: WriteCause::UserData,
            obj,
            chunk,
            header: false,
            old_page,
            partial: false,
        }
    }

    /// This hint for a page holding less than a whole chunk (or not).
    pub fn with_partial(mut self, partial: bool) -> Self {
        self.partial = partial;
        self
    }

    /// A header of `obj` (`old_page`: its current header page, if any).
    pub fn metadata(obj: Ino, old_page: Option<u32>) -> Self {
        Self {
            cause: WriteCause::Metadata,
            obj,
            chunk: 0,
            header: true,
            old_page,
            partial: false,
        }
    }
}

pub trait Allocator: Send + Sync {
    fn name(&self) -> &'static str;
    /// How many write streams (open blocks) this policy uses.
    fn streams(&self) -> usize;
    /// The stream a page goes to.
    fn stream_for(&mut self, hint: &WriteHint) -> usize;
    /// The page `hint` described is now at page `pno`, on `stream` (which may differ from
    /// the one asked for: see `FileSystem::choose_stream`).
    fn placed(&mut self, _hint: &WriteHint, _stream: usize, _pno: u32) {}
    /// A user write request reached file `obj`: one tick of the classifiers' clock.
    fn write_request(&mut self, _obj: Ino) {}
    /// `obj` was fsync'd: its next write request starts a new modification.
    fn flushed(&mut self, _obj: Ino) {}
    /// `obj` is gone: forget what was learnt about it.
    fn forget(&mut self, _obj: Ino) {}
    /// A stream the last `stream_for` gave to a new owner: the file system closes the
    /// block it has open before writing there (per-file allocation: a block holds one
    /// file's data).
    fn take_reassigned(&mut self) -> Option<usize> {
        None
    }
}

/// The streams `kind` uses with `params`, before any is built (the reserve depends on it).
pub fn stream_count(kind: AllocatorKind, params: &AllocParams) -> usize {
    match kind {
        AllocatorKind::Sequential => 1,
        AllocatorKind::Moda | AllocatorKind::PageHotcold => moda::STREAMS,
        AllocatorKind::ModaSplit => 2,
        AllocatorKind::Dac => params.regions as usize,
        AllocatorKind::PerFile | AllocatorKind::Hybrid => 1 + per_file::FILE_STREAMS,
    }
}

/// The policy `kind` for a device of `blocks` blocks of `pages_per_block` pages.
pub fn make(
    kind: AllocatorKind,
    params: &AllocParams,
    blocks: u32,
    pages_per_block: u32,
) -> Box<dyn Allocator> {
    match kind {
        AllocatorKind::Sequential => Box::new(sequential::Sequential),
        AllocatorKind::Moda => Box::new(moda::Moda::new(params, blocks, pages_per_block)),
        AllocatorKind::ModaSplit => Box::new(moda_split::ModaSplit::new(blocks, pages_per_block)),
        AllocatorKind::Dac => Box::new(dac::Dac::new(params, blocks, pages_per_block)),
        AllocatorKind::PageHotcold => Box::new(page_hotcold::PageHotcold::new(
            params,
            blocks,
            pages_per_block,
        )),
        AllocatorKind::PerFile => Box::new(per_file::PerFile::new()),
        AllocatorKind::Hybrid => Box::new(hybrid::Hybrid::new(pages_per_block)),
    }
}

/// Which stream each block was filled by, as far as this mount has seen (a block filled
/// before the mount is unknown). A page's block tells its stream, so a policy that wants
/// cleaning copies to keep their stream looks it up here.
pub(crate) struct BlockStreams {
    of_block: Vec<u8>,
    pages_per_block: u32,
}

const UNKNOWN: u8 = u8::MAX;

impl BlockStreams {
    pub(crate) fn new(blocks: u32, pages_per_block: u32) -> Self {
        Self {
            of_block: vec![UNKNOWN; blocks as usize],
            pages_per_block: pages_per_block.max(1),
        }
    }

    pub(crate) fn record(&mut self, pno: u32, stream: usize) {
        if let Some(s) = self.of_block.get_mut((pno / self.pages_per_block) as usize) {
            *s = u8::try_from(stream).unwrap_or(UNKNOWN);
        }
    }

    /// The stream the block holding `pno` was filled by, if this mount saw it.
    pub(crate) fn of_page(&self, pno: u32) -> Option<usize> {
        match self.of_block.get((pno / self.pages_per_block) as usize) {
            Some(&s) if s != UNKNOWN => Some(usize::from(s)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_streams_follow_pages_and_know_nothing_else() {
        let mut b = BlockStreams::new(4, 32);
        assert_eq!(b.of_page(40), None);
        b.record(33, 2);
        assert_eq!(b.of_page(40), Some(2));
        assert_eq!(b.of_page(31), None);
        b.record(40, 1); // the block was erased and refilled by another stream
        assert_eq!(b.of_page(63), Some(1));
        b.record(9999, 1); // out of range: ignored, never a panic
        assert_eq!(b.of_page(9999), None);
    }

    #[test]
    fn every_kind_builds_the_streams_it_counts() {
        let p = AllocParams::default();
        for name in AllocatorKind::NAMES {
            let kind: AllocatorKind = name.parse().unwrap();
            let a = make(kind, &p, 64, 32);
            assert_eq!(a.name(), *name);
            assert_eq!(a.streams(), stream_count(kind, &p));
        }
    }
}
