//! page-hotcold: MODA's classes at page (chunk) granularity, the MODA paper's stated
//! future work. MODA classifies whole files, so a workload that keeps appending small
//! synced records to a few files (Phone's call logs and messages, Recorder's samples) gains
//! little: the file is hot, and all of it shares the hot stream, where the pages that will
//! never change again (a log's full pages) sit between the many superseded copies of its
//! tail, and every block of the stream needs copying when cleaned.
//!
//! Per chunk, then, two things decide:
//! - **A growing tail.** A page holding less than a whole chunk (`WriteHint::partial`) of
//!   a file seen appending in small pieces (a partial tail written again as partial: the
//!   file is an "appender" from then on) goes to the hot stream: the next append
//!   supersedes it. A file that was written whole and closed with a partial last chunk
//!   (a photo, a fax page) is no appender, and its tail stays with its data.
//! - **Everything else** goes by its own multi-queue entry (`mq`, MODA's rules and clock:
//!   one tick per modification run), carried from a chunk's old page to its new one: a
//!   chunk rewritten within its lifetime is promoted, one left alone is demoted, a chunk
//!   written for the first time is unclassified. A tail that becomes a full chunk starts
//!   afresh as new data: its bytes are final, whatever its rewrites as a tail said. So a
//!   log's full pages join the unclassified stream, uniform and valid, while its tail
//!   churns in the hot one.
//!
//! Headers are system data as in MODA. Cleaning copies keep their class: they go to the
//! stream their block was filled by (unknown blocks: the entry's class now).
//!
//! What was tried first, and measured (`bench moda-table`): classes from the per-chunk
//! entry alone barely beat MODA on Phone and lost on Fax (its tails and history churned
//! among the fax pages). Sending every partial page to the hot stream won Phone and
//! Recorder but lost Fax (each fax page's final tail, valid for good, landed among the
//! history's superseded ones); only rewritten tails to hot lost Phone again (each chunk's
//! first, soon superseded, version landed among the full pages). The appender rule is what
//! separates the two kinds of tail.
//!
//! The cost is RAM: one entry (8 bytes) and one bit per page of the device, and a set of
//! appending files, against MODA's one entry per file. Nothing is kept on flash: at mount
//! every page counts as first written at tick 0 and no file as an appender.

use super::moda::{fixed_stream, stream_of, HOT, STREAMS};
use super::mq::{Entry, Mq};
use super::{Allocator, BlockStreams, WriteCause, WriteHint};
use crate::config::AllocParams;
use crate::types::Ino;

pub struct PageHotcold {
    mq: Mq,
    /// The entry of the chunk stored at each page (stale for pages no longer valid).
    pages: Vec<Entry>,
    /// One bit per page: the chunk stored there was partial (a file's tail).
    partial: Vec<u64>,
    /// Files seen growing by small appends: a partial tail written again as partial.
    appenders: std::collections::HashSet<Ino>,
    blocks: BlockStreams,
}

impl PageHotcold {
    pub fn new(params: &AllocParams, blocks: u32, pages_per_block: u32) -> Self {
        let n = blocks as usize * pages_per_block as usize;
        Self {
            mq: Mq::new(params.queues, params.lifetime),
            pages: vec![Mq::unknown(); n],
            partial: vec![0; n.div_ceil(64)],
            appenders: std::collections::HashSet::new(),
            blocks: BlockStreams::new(blocks, pages_per_block),
        }
    }

    fn entry_at(&self, pno: u32) -> Entry {
        self.pages
            .get(pno as usize)
            .copied()
            .unwrap_or_else(Mq::unknown)
    }

    fn was_partial(&self, pno: u32) -> bool {
        self.partial
            .get(pno as usize / 64)
            .is_some_and(|w| w & (1 << (pno % 64)) != 0)
    }

    fn rewrites_tail(&self, hint: &WriteHint) -> bool {
        hint.partial && hint.old_page.is_some_and(|p| self.was_partial(p))
    }

    /// The entry the page described by `hint` will have once written.
    fn next_entry(&self, hint: &WriteHint) -> Entry {
        match (hint.cause, hint.old_page) {
            (_, None) => self.mq.created(),
            (WriteCause::Cleaning, Some(old)) => self.entry_at(old),
            // A tail completed: the chunk's bytes are final from here on, whatever its
            // rewrites as a tail said. It starts afresh, as new data.
            (_, Some(old)) if self.was_partial(old) && !hint.partial => self.mq.created(),
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
        if self.rewrites_tail(hint) || (hint.partial && self.appenders.contains(&hint.obj)) {
            return HOT;
        }
        stream_of(self.mq.class(self.next_entry(hint)))
    }

    fn placed(&mut self, hint: &WriteHint, stream: usize, pno: u32) {
        self.blocks.record(pno, stream);
        if hint.header {
            return;
        }
        if self.rewrites_tail(hint) {
            self.appenders.insert(hint.obj);
        }
        let e = self.next_entry(hint);
        if let Some(slot) = self.pages.get_mut(pno as usize) {
            *slot = e;
        }
        if let Some(w) = self.partial.get_mut(pno as usize / 64) {
            let bit = 1 << (pno % 64);
            if hint.partial {
                *w |= bit;
            } else {
                *w &= !bit;
            }
        }
    }

    fn write_request(&mut self, obj: Ino) {
        self.mq.write_request(obj);
    }

    fn flushed(&mut self, obj: Ino) {
        self.mq.flushed(obj);
    }

    fn forget(&mut self, obj: Ino) {
        self.appenders.remove(&obj);
    }
}

#[cfg(test)]
mod tests {
    use super::super::moda::{COLD, UNCLASSIFIED};
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

    /// Writes a partial tail of file `obj` (chunk 0) replacing `old`, placed at `at`.
    fn tail(p: &mut PageHotcold, obj: Ino, old: Option<u32>, at: u32) -> usize {
        p.write_request(obj);
        let hint = WriteHint::user_data(obj, 0, old).with_partial(true);
        let s = p.stream_for(&hint);
        p.placed(&hint, s, at);
        p.flushed(obj);
        s
    }

    #[test]
    fn an_appended_tail_is_hot_and_a_closed_files_tail_is_not() {
        let mut p = PageHotcold::new(&AllocParams::default(), 64, 32);
        // A file written once with a partial last chunk: no appender.
        assert_eq!(tail(&mut p, 7, None, 0), UNCLASSIFIED);
        // A log: its tail written, then written again as a tail.
        assert_eq!(tail(&mut p, 8, None, 1), UNCLASSIFIED);
        assert_eq!(tail(&mut p, 8, Some(1), 2), HOT);
        // An appender's next new tail is hot from its first version.
        p.write_request(8);
        let next = WriteHint::user_data(8, 1, None).with_partial(true);
        assert_eq!(p.stream_for(&next), HOT);
        // The tail completed: a full chunk, new data again.
        let full = WriteHint::user_data(8, 0, Some(2));
        assert_eq!(p.stream_for(&full), UNCLASSIFIED);
        p.forget(8);
        assert_eq!(
            p.stream_for(&next),
            UNCLASSIFIED,
            "a deleted file is forgotten"
        );
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

    /// As in MODA (sec. 5: "When a file is first written (created), it is inserted into
    /// Q_0"), a chunk written for the first time enters Q0 at the tick it is written, so
    /// it is unclassified for a lifetime from then, however late in the clock it comes;
    /// and a tail completed into a full chunk starts afresh the same way.
    #[test]
    fn a_new_chunk_is_unclassified_for_a_lifetime_from_its_first_write() {
        let mut p = PageHotcold::new(&AllocParams::default(), 64, 32);
        for k in 0..250 {
            p.write_request(1000 + k);
        }
        assert_eq!(write(&mut p, 0, None, 0), UNCLASSIFIED);
        assert_eq!(p.entry_at(0), p.mq.created(), "Q0 since tick 251");
        let copy = WriteHint {
            cause: WriteCause::Cleaning,
            ..WriteHint::user_data(5, 0, Some(0))
        };
        p.blocks = BlockStreams::new(64, 32); // the block's stream unknown: the class
        for k in 0..99 {
            p.write_request(2000 + k);
        }
        assert_eq!(
            p.stream_for(&copy),
            UNCLASSIFIED,
            "99 ticks after its write"
        );
        p.write_request(3000);
        assert_eq!(p.stream_for(&copy), COLD, "a lifetime after its write");
        // A tail completed late in the clock: new data, unclassified.
        assert_eq!(tail(&mut p, 9, None, 40), UNCLASSIFIED);
        p.write_request(9);
        let full = WriteHint::user_data(9, 0, Some(40));
        assert_eq!(p.stream_for(&full), UNCLASSIFIED);
    }

    /// The per-chunk entry follows MODA's rules: rewritten within the lifetime it climbs
    /// (hot at the third write), rewritten after it it is not promoted (Q0).
    #[test]
    fn a_chunk_rewritten_within_its_lifetime_is_promoted_and_after_it_is_not() {
        let mut p = PageHotcold::new(&AllocParams::default(), 64, 32);
        assert_eq!(write(&mut p, 3, None, 0), UNCLASSIFIED);
        assert_eq!(
            write(&mut p, 3, Some(0), 1),
            UNCLASSIFIED,
            "second write: Q1"
        );
        assert_eq!(write(&mut p, 3, Some(1), 2), HOT, "third write: hot");
        let mut p = PageHotcold::new(&AllocParams::default(), 64, 32);
        assert_eq!(write(&mut p, 3, None, 0), UNCLASSIFIED);
        for k in 0..100 {
            p.write_request(1000 + k);
        }
        assert_eq!(
            write(&mut p, 3, Some(0), 1),
            UNCLASSIFIED,
            "late: back to Q0"
        );
        assert_eq!(write(&mut p, 3, Some(1), 2), UNCLASSIFIED, "then Q1");
        // Headers stay system data, whatever the chunks do.
        assert_eq!(
            p.stream_for(&WriteHint::metadata(5, Some(2))),
            super::super::moda::SYSTEM
        );
    }
}
