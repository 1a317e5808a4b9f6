//! Page allocation (DESIGN axis 3): which write stream a page goes to. Each stream has its
//! own open block, so a policy separates data (hot from cold, system from user) simply by
//! sending it to different streams.

pub mod sequential;

use crate::config::AllocatorKind;
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
}

pub trait Allocator: Send + Sync {
    fn name(&self) -> &'static str;
    /// How many write streams (open blocks) this policy uses.
    fn streams(&self) -> usize;
    /// The stream a page goes to.
    fn stream_for(&mut self, hint: &WriteHint) -> usize;
}

pub fn make(kind: AllocatorKind) -> Box<dyn Allocator> {
    match kind {
        AllocatorKind::Sequential => Box::new(sequential::Sequential),
    }
}
