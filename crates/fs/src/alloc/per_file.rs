//! MNFS's block-based file allocation: each file's data goes to blocks of its own, so a
//! file owns whole erase blocks and deleting it leaves them empty, to be erased at once
//! (`FsConfig::erase_on_delete`) instead of cleaned later. Headers (the metadata log),
//! checkpoints and cleaning's copies share stream 0.
//!
//! A stream is an open block, and a device keeps few open: [`FILE_STREAMS`] files write
//! at once, each into its own block. A further file takes the stream unused longest; the
//! block that file had open is closed first (its free pages are lost until the block is
//! erased, as MNFS loses the end of a file's last block), which `take_reassigned` tells
//! the file system to do.

use super::{Allocator, WriteCause, WriteHint};
use crate::types::Ino;

/// Streams for file data (stream 0 is the metadata log's).
pub const FILE_STREAMS: usize = 4;

pub struct PerFile {
    /// Per data stream (index + 1): the file it belongs to, and when it was last used.
    owners: [(Option<Ino>, u64); FILE_STREAMS],
    tick: u64,
    reassigned: Option<usize>,
}

impl PerFile {
    pub fn new() -> Self {
        Self {
            owners: [(None, 0); FILE_STREAMS],
            tick: 0,
            reassigned: None,
        }
    }
}

impl Default for PerFile {
    fn default() -> Self {
        Self::new()
    }
}

impl Allocator for PerFile {
    fn name(&self) -> &'static str {
        "per-file"
    }

    fn streams(&self) -> usize {
        1 + FILE_STREAMS
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        if hint.header || hint.cause != WriteCause::UserData {
            return 0;
        }
        self.tick += 1;
        let slot = match self.owners.iter().position(|o| o.0 == Some(hint.obj)) {
            Some(i) => i,
            None => {
                // A free stream, else the one unused longest.
                let i = self
                    .owners
                    .iter()
                    .position(|o| o.0.is_none())
                    .unwrap_or_else(|| {
                        (0..FILE_STREAMS)
                            .min_by_key(|&i| self.owners[i].1)
                            .expect("streams")
                    });
                self.owners[i].0 = Some(hint.obj);
                self.reassigned = Some(i + 1);
                i
            }
        };
        self.owners[slot].1 = self.tick;
        slot + 1
    }

    fn take_reassigned(&mut self) -> Option<usize> {
        self.reassigned.take()
    }

    fn forget(&mut self, obj: Ino) {
        for o in &mut self.owners {
            if o.0 == Some(obj) {
                *o = (None, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_get_streams_of_their_own_and_the_oldest_is_taken_over() {
        let mut a = PerFile::new();
        let data = |obj| WriteHint::user_data(obj, 0, None);
        assert_eq!(a.stream_for(&WriteHint::metadata(7, None)), 0);
        let s: Vec<usize> = (10..10 + FILE_STREAMS as Ino)
            .map(|o| a.stream_for(&data(o)))
            .collect();
        assert_eq!(s, (1..=FILE_STREAMS).collect::<Vec<_>>());
        assert_eq!(a.take_reassigned(), Some(FILE_STREAMS));
        assert_eq!(a.take_reassigned(), None);
        // The same file again: its stream, nothing to close.
        assert_eq!(a.stream_for(&data(11)), 2);
        assert_eq!(a.take_reassigned(), None);
        // A new file takes the stream unused longest (file 10's), which must be closed.
        assert_eq!(a.stream_for(&data(99)), 1);
        assert_eq!(a.take_reassigned(), Some(1));
        // A deleted file's stream is free for the next.
        a.forget(12);
        assert_eq!(a.stream_for(&data(100)), 3);
    }

    /// MNFS sec. 2.2: "MNFS defines the allocation block size of file system as the block
    /// of NAND flash memory": a block holds one file's data. A file keeps its stream while
    /// it writes; a new file takes a free stream first, else the one least recently used
    /// (not the one assigned first); everything that is not user data (headers, cleaning
    /// copies, checkpoints) goes to the shared stream 0 and moves no stream's clock.
    #[test]
    fn a_new_file_takes_a_free_stream_else_the_least_recently_used() {
        let mut a = PerFile::new();
        let data = |obj| WriteHint::user_data(obj, 0, None);
        for o in 10..14 {
            a.stream_for(&data(o));
        }
        a.take_reassigned();
        // File 10 (assigned first) is used again; 11 is now the least recently used.
        assert_eq!(a.stream_for(&data(10)), 1);
        for cause in [
            WriteCause::Cleaning,
            WriteCause::Checkpoint,
            WriteCause::Metadata,
        ] {
            let h = WriteHint { cause, ..data(11) };
            assert_eq!(a.stream_for(&h), 0, "{cause:?}");
        }
        assert_eq!(a.stream_for(&WriteHint::metadata(11, None)), 0);
        assert_eq!(a.take_reassigned(), None);
        assert_eq!(a.stream_for(&data(20)), 2, "file 11's stream");
        assert_eq!(
            a.take_reassigned(),
            Some(2),
            "its open block is closed first"
        );
        // A deleted file's stream is free and taken before any least recently used one.
        a.forget(13);
        assert_eq!(a.stream_for(&data(21)), 4);
        assert_eq!(a.take_reassigned(), Some(4));
        // Each file's pages stay in its own stream, interleaved or not.
        for _ in 0..3 {
            assert_eq!(a.stream_for(&data(20)), 2);
            assert_eq!(a.stream_for(&data(21)), 4);
            assert_eq!(a.stream_for(&WriteHint::user_data(10, 7, Some(3))), 1);
        }
        assert_eq!(a.take_reassigned(), None);
    }
}
