//! Beyond MNFS (its own conclusion): small and often-updated files waste whole blocks under
//! per-file allocation, so `hybrid` keeps them in the shared log, as YAFFS would, and gives
//! a file blocks of its own only once it is large: a file's first block's worth of chunks,
//! and every overwrite of a chunk already on flash, go to stream 0 with the headers;
//! chunks past that, written for the first time, go to the file's own blocks (`per-file`'s
//! streams). A large file written once in order (a recording, a photo burst) so lands in
//! whole blocks that its delete erases; a playlist or a licence file rewritten in place
//! never takes a block for itself.

use super::per_file::PerFile;
use super::{Allocator, WriteCause, WriteHint};
use crate::types::Ino;

pub struct Hybrid {
    files: PerFile,
    /// Chunks a file keeps in the shared log before it gets blocks of its own.
    small_chunks: u32,
}

impl Hybrid {
    /// `small_chunks`: a block's worth of chunks (pages per block).
    pub fn new(small_chunks: u32) -> Self {
        Self {
            files: PerFile::new(),
            small_chunks,
        }
    }
}

impl Allocator for Hybrid {
    fn name(&self) -> &'static str {
        "hybrid"
    }

    fn streams(&self) -> usize {
        self.files.streams()
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        let shared = hint.header
            || hint.cause != WriteCause::UserData
            || hint.chunk < self.small_chunks
            || hint.old_page.is_some();
        if shared {
            0
        } else {
            self.files.stream_for(hint)
        }
    }

    fn take_reassigned(&mut self) -> Option<usize> {
        self.files.take_reassigned()
    }

    fn forget(&mut self, obj: Ino) {
        self.files.forget(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_and_overwrites_share_the_log_large_files_get_blocks() {
        let mut a = Hybrid::new(32);
        assert_eq!(a.stream_for(&WriteHint::user_data(5, 0, None)), 0);
        assert_eq!(a.stream_for(&WriteHint::user_data(5, 31, None)), 0);
        let s = a.stream_for(&WriteHint::user_data(5, 32, None));
        assert!(s >= 1, "{s}");
        assert_eq!(a.stream_for(&WriteHint::user_data(5, 33, None)), s);
        // Rewriting a chunk already on flash: the shared log.
        assert_eq!(a.stream_for(&WriteHint::user_data(5, 40, Some(123))), 0);
        assert_eq!(a.stream_for(&WriteHint::metadata(5, None)), 0);
    }
}
