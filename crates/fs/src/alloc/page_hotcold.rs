//! page-hotcold: MODA's classes at page (chunk) granularity, the MODA paper's stated
//! future work. MODA classifies whole files, so a workload that keeps rewriting a few
//! records of a few files (Phone's call log and phone book, Recorder's rolling event log)
//! gains little: the file is hot, and all of it, rewritten records and untouched ones
//! alike, shares the hot stream, whose blocks then mix valid and invalid pages.
//!
//! Here each chunk has its own multi-queue entry (`mq`, the same rules and clock as MODA:
//! one tick per modification run), carried from a chunk's old page to its new one: a
//! chunk rewritten within its lifetime is promoted, one left alone is demoted. Headers are
//! system data as in MODA; a chunk written for the first time is unclassified. So the
//! records a workload keeps rewriting go to the hot stream and the rest of the same file
//! cools into the cold one.
//!
//! The cost is RAM: one entry (8 bytes) per page of the device, against MODA's one per
//! file. Cleaning copies keep their page's entry and go to the stream their block was
//! filled by (unknown blocks: the entry's class now). Nothing is kept on flash: at mount
//! every page counts as first written at tick 0.

use super::moda::{fixed_stream, stream_of, STREAMS};
use super::mq::{Entry, Mq};
use super::{Allocator, BlockStreams, WriteCause, WriteHint};
use crate::config::AllocParams;
use crate::types::Ino;

pub struct PageHotcold {
    mq: Mq,
    /// The entry of the chunk stored at each page (stale for pages no longer valid).
    pages: Vec<Entry>,
    blocks: BlockStreams,
}

impl PageHotcold {
    pub fn new(params: &AllocParams, blocks: u32, pages_per_block: u32) -> Self {
        let n = blocks as usize * pages_per_block as usize;
        Self {
            mq: Mq::new(params.queues, params.lifetime),
            pages: vec![Mq::unknown(); n],
            blocks: BlockStreams::new(blocks, pages_per_block),
        }
    }

    fn entry_at(&self, pno: u32) -> Entry {
        self.pages
            .get(pno as usize)
            .copied()
            .unwrap_or_else(Mq::unknown)
    }

    /// The entry the page described by `hint` will have once written.
    fn next_entry(&self, hint: &WriteHint) -> Entry {
        match (hint.cause, hint.old_page) {
            (_, None) => self.mq.created(),
            (WriteCause::Cleaning, Some(old)) => self.entry_at(old),
            (_, Some(old)) => self.mq.modified(self.entry_at(old)),
        }
    }
}

impl Allocator for PageHotcold {
    fn name(&self) -> &'static str {
        "page-hotcold"
    }

    fn streams(&self) -> usize {
        STREAMS
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        if let Some(s) = fixed_stream(hint, &self.blocks) {
            return s;
        }
        stream_of(self.mq.class(self.next_entry(hint)))
    }

    fn placed(&mut self, hint: &WriteHint, stream: usize, pno: u32) {
        self.blocks.record(pno, stream);
        if hint.header {
            return;
        }
        let e = self.next_entry(hint);
        if let Some(slot) = self.pages.get_mut(pno as usize) {
            *slot = e;
        }
    }

    fn write_request(&mut self, obj: Ino) {
        self.mq.write_request(obj);
    }

    fn flushed(&mut self, obj: Ino) {
        self.mq.flushed(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::super::moda::{COLD, HOT, UNCLASSIFIED};
    use super::*;

    /// Writes chunk `chunk` of file 5 (its old page `old`) as one modification; returns
    /// the stream and the new page.
    fn write(p: &mut PageHotcold, chunk: u32, old: Option<u32>, at: u32) -> usize {
        p.write_request(5);
        let hint = WriteHint::user_data(5, chunk, old);
        let s = p.stream_for(&hint);
        p.placed(&hint, s, at);
        p.flushed(5);
        s
    }

    #[test]
    fn a_rewritten_record_is_hot_while_the_rest_of_its_file_cools() {
        let mut p = PageHotcold::new(&AllocParams::default(), 64, 32);
        assert_eq!(write(&mut p, 0, None, 0), UNCLASSIFIED);
        assert_eq!(write(&mut p, 1, None, 1), UNCLASSIFIED);
        // Chunk 1 rewritten over and over; chunk 0 never again.
        let mut at = 1;
        let mut last = 0;
        for k in 0..5 {
            last = write(&mut p, 1, Some(at), 100 + k);
            at = 100 + k;
        }
        assert_eq!(last, HOT);
        for k in 0..100 {
            p.write_request(1000 + k);
        }
        let copy_of_0 = WriteHint {
            cause: WriteCause::Cleaning,
            ..WriteHint::user_data(5, 0, Some(0))
        };
        // Block 0 was filled by the unclassified stream: the copy keeps that.
        assert_eq!(p.stream_for(&copy_of_0), UNCLASSIFIED);
        p.blocks = BlockStreams::new(64, 32); // as after a remount
        assert_eq!(p.stream_for(&copy_of_0), COLD);
    }
}
