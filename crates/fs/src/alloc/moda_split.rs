//! MODA's level 1 alone (`moda-split`): system data (object headers) apart from user data,
//! and nothing more: no multi-queue classifier, so every file's data shares one stream.
//! It exists to measure MODA in parts (`nandkit bench moda-table --ablation`): sequential
//! allocation, then this, then the full policy, so the classifier's own share of MODA's
//! gain is what the full policy adds over this one.
//!
//! As in `moda`, a cleaning copy keeps the stream its block was filled by.

use super::moda::{fixed_stream, SYSTEM};
use super::{Allocator, BlockStreams, WriteHint};

/// The stream of user data (the system stream is MODA's, 0).
pub const USER: usize = 1;

pub struct ModaSplit {
    blocks: BlockStreams,
}

impl ModaSplit {
    pub fn new(blocks: u32, pages_per_block: u32) -> Self {
        Self {
            blocks: BlockStreams::new(blocks, pages_per_block),
        }
    }
}

impl Allocator for ModaSplit {
    fn name(&self) -> &'static str {
        "moda-split"
    }

    fn streams(&self) -> usize {
        2
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        // MODA's streams 2 and 3 (hot, cold) do not exist here: a copy from a block this
        // mount did not see filled goes by what the page is.
        match fixed_stream(hint, &self.blocks) {
            Some(s) if s == SYSTEM || s == USER => s,
            _ if hint.header => SYSTEM,
            _ => USER,
        }
    }

    fn placed(&mut self, _hint: &WriteHint, stream: usize, pno: u32) {
        self.blocks.record(pno, stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::WriteCause;

    #[test]
    fn headers_apart_from_data_and_copies_keep_their_stream() {
        let mut a = ModaSplit::new(16, 32);
        let header = WriteHint::metadata(5, None);
        let data = WriteHint::user_data(5, 0, None);
        assert_eq!(a.stream_for(&header), SYSTEM);
        assert_eq!(a.stream_for(&data), USER);
        // However often a file is modified, its data stays in the one user stream.
        for _ in 0..10 {
            a.write_request(5);
        }
        assert_eq!(a.stream_for(&data), USER);
        // A header page placed in block 1 (pages 32..64); a copy of it keeps the system
        // stream, and a copy of a data page from an unseen block goes to the user stream.
        a.placed(&header, SYSTEM, 40);
        let copy = |page| WriteHint {
            cause: WriteCause::Cleaning,
            old_page: Some(page),
            ..data
        };
        assert_eq!(a.stream_for(&copy(41)), SYSTEM);
        assert_eq!(a.stream_for(&copy(200)), USER);
    }
}
