//! MODA (modification-aware allocation, the MODA paper's section 5): two levels of
//! classification, each class writing to its own stream, so that blocks end up uniform
//! (all valid or all invalid) and cleaning them is cheap.
//!
//! Level 1 is static: system data (object headers: every change to a file rewrites its
//! header) goes apart from user data. Level 2 is dynamic, for user data: the multi-queue
//! classifier (`mq`) over files, each write request run being one modification. A file's
//! pages go to the stream of its class: hot, cold or unclassified (new files stay
//! unclassified, apart from the cold, until their behaviour is known: the paper's answer
//! to DAC mixing new data into its cold region).
//!
//! Pages moved by cleaning keep their class: a copy goes to the stream its block was
//! filled by. Blocks filled before this mount have no known stream; their pages take the
//! class their file has now (headers: system).
//!
//! State across a remount: none. The classifier lives in RAM; at mount every existing file
//! counts as first written at tick 0 (so, untouched for a lifetime, it is cold). A crash
//! loses only that history; placement never affects what reads back.

use std::collections::HashMap;

use super::mq::{Class, Entry, Mq};
use super::{Allocator, BlockStreams, WriteCause, WriteHint};
use crate::config::AllocParams;
use crate::types::Ino;

pub const SYSTEM: usize = 0;
pub const UNCLASSIFIED: usize = 1;
pub const HOT: usize = 2;
pub const COLD: usize = 3;
pub const STREAMS: usize = 4;

/// The stream of a class of user data.
pub fn stream_of(class: Class) -> usize {
    match class {
        Class::Unclassified => UNCLASSIFIED,
        Class::Hot => HOT,
        Class::Cold => COLD,
    }
}

/// The stream a page goes to whatever its class (MODA's level 1, and cleaning keeping
/// classes): headers to the system stream, a cleaning copy to the stream its block was
/// filled by, when this mount saw that block. Shared with `page_hotcold`.
pub(crate) fn fixed_stream(hint: &WriteHint, blocks: &BlockStreams) -> Option<usize> {
    if hint.header {
        return Some(SYSTEM);
    }
    if hint.cause == WriteCause::Cleaning {
        return hint.old_page.and_then(|p| blocks.of_page(p));
    }
    None
}

pub struct Moda {
    mq: Mq,
    files: HashMap<Ino, Entry>,
    blocks: BlockStreams,
}

impl Moda {
    pub fn new(params: &AllocParams, blocks: u32, pages_per_block: u32) -> Self {
        Self {
            mq: Mq::new(params.queues, params.lifetime),
            files: HashMap::new(),
            blocks: BlockStreams::new(blocks, pages_per_block),
        }
    }

    fn file_class(&self, obj: Ino) -> Class {
        let e = self.files.get(&obj).copied().unwrap_or_else(Mq::unknown);
        self.mq.class(e)
    }
}

impl Allocator for Moda {
    fn name(&self) -> &'static str {
        "moda"
    }

    fn streams(&self) -> usize {
        STREAMS
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        if let Some(s) = fixed_stream(hint, &self.blocks) {
            return s;
        }
        stream_of(self.file_class(hint.obj))
    }

    fn placed(&mut self, _hint: &WriteHint, stream: usize, pno: u32) {
        self.blocks.record(pno, stream);
    }

    fn write_request(&mut self, obj: Ino) {
        if !self.mq.write_request(obj) {
            return;
        }
        let e = match self.files.get(&obj) {
            Some(&e) => self.mq.modified(e),
            None => self.mq.created(),
        };
        self.files.insert(obj, e);
    }

    fn flushed(&mut self, obj: Ino) {
        self.mq.flushed(obj);
    }

    fn forget(&mut self, obj: Ino) {
        self.files.remove(&obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(obj: Ino) -> WriteHint {
        WriteHint::user_data(obj, 0, None)
    }

    #[test]
    fn headers_are_system_data_and_new_files_unclassified() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        assert_eq!(m.stream_for(&WriteHint::metadata(5, None)), SYSTEM);
        m.write_request(5);
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED);
    }

    #[test]
    fn a_file_modified_three_times_is_hot_and_one_left_alone_cold() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        for _ in 0..3 {
            m.write_request(5);
            m.write_request(6);
        }
        assert_eq!(m.stream_for(&data(5)), HOT);
        m.write_request(7);
        for k in 0..100 {
            m.write_request(100 + k);
        }
        assert_eq!(m.stream_for(&data(7)), COLD);
        m.forget(7);
        // Forgotten: as a file from before the mount (first written at tick 0): cold.
        assert_eq!(m.stream_for(&data(7)), COLD);
    }

    /// `n` ticks of the classifier's clock: one modification each of other files (a new
    /// one each tick, so no two calls make one run).
    fn ticks(m: &mut Moda, n: u32) {
        for _ in 0..n {
            let other = 1_000_000 + m.mq.now();
            m.write_request(other);
        }
    }

    /// MODA sec. 5: "When a file is first written (created), it is inserted into Q_0":
    /// at the tick of that first write, not at tick 0. A file created after the clock has
    /// run for several lifetimes is unclassified for a whole lifetime from its creation,
    /// cold only once "not modified within the recent 100 modification requests".
    #[test]
    fn a_new_file_enters_q0_at_the_tick_it_is_first_written() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        ticks(&mut m, 250);
        m.write_request(5);
        assert_eq!(m.mq.now(), 251);
        assert_eq!(m.files[&5], m.mq.created(), "Q0 since tick 251");
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED, "new data, not cold");
        ticks(&mut m, 99);
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED, "99 ticks idle");
        ticks(&mut m, 1);
        assert_eq!(
            m.stream_for(&data(5)),
            COLD,
            "100 ticks idle: demoted out of Q0"
        );
    }

    /// MODA sec. 5 with m = 2: "a file modified more than 2 times is classified as hot".
    /// Written twice it is in Q1 (unclassified); the third time it is hot. A file that
    /// stays hot goes cold only after its lifetimes run out one queue at a time.
    #[test]
    fn the_third_modification_within_lifetimes_makes_a_file_hot() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        ticks(&mut m, 150);
        m.write_request(5);
        ticks(&mut m, 1);
        m.write_request(5);
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED, "two writes: Q1");
        ticks(&mut m, 1);
        m.write_request(5);
        assert_eq!(m.stream_for(&data(5)), HOT, "three writes: hot");
        ticks(&mut m, 99);
        assert_eq!(m.stream_for(&data(5)), HOT, "99 idle ticks: still hot");
        ticks(&mut m, 1);
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED, "a lifetime: Q1");
        ticks(&mut m, 200);
        assert_eq!(m.stream_for(&data(5)), COLD, "three lifetimes: cold");
        m.write_request(5);
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED, "written again: Q0");
    }

    /// MODA sec. 5: a modification is counted "when the modification time is updated",
    /// which YAFFS does when the file is flushed (`yaffs_FlushFile`, sec. 6.1). So a run of
    /// write requests is one modification, and fsync ends it: three runs separated by
    /// fsyncs are three modifications (hot); the same requests without them are one.
    #[test]
    fn fsync_ends_a_modification_and_a_run_of_writes_is_one() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        for _ in 0..3 {
            m.write_request(5);
        }
        assert_eq!(m.mq.now(), 1, "one run, one tick");
        assert_eq!(m.stream_for(&data(5)), UNCLASSIFIED);
        m.flushed(5);
        m.write_request(5);
        m.flushed(5);
        m.write_request(5);
        assert_eq!(m.mq.now(), 3);
        assert_eq!(m.stream_for(&data(5)), HOT, "three modifications");
        // Another file's fsync does not end this file's run.
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        m.write_request(7);
        m.flushed(8);
        m.write_request(7);
        m.flushed(8);
        m.write_request(7);
        assert_eq!(m.stream_for(&data(7)), UNCLASSIFIED);
    }

    /// Level 1 (sec. 5: "we distinguish system data and user data"): a header goes to the
    /// system stream whatever its file's class, and user data never does.
    #[test]
    fn headers_go_to_the_system_stream_whatever_the_files_class() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        for _ in 0..3 {
            m.write_request(5);
            m.write_request(6);
        }
        assert_eq!(m.stream_for(&data(5)), HOT);
        assert_eq!(m.stream_for(&WriteHint::metadata(5, Some(3))), SYSTEM);
        ticks(&mut m, 1000);
        assert_eq!(m.stream_for(&data(5)), COLD);
        assert_eq!(m.stream_for(&WriteHint::metadata(5, None)), SYSTEM);
        for class in [Class::Unclassified, Class::Hot, Class::Cold] {
            assert_ne!(stream_of(class), SYSTEM);
        }
    }

    #[test]
    fn cleaning_copies_keep_their_blocks_stream() {
        let mut m = Moda::new(&AllocParams::default(), 16, 32);
        m.write_request(5);
        let hint = data(5);
        m.placed(&hint, UNCLASSIFIED, 64); // block 2
        for _ in 0..3 {
            m.write_request(5);
            m.write_request(6);
        }
        assert_eq!(m.stream_for(&data(5)), HOT);
        let copy = WriteHint {
            cause: WriteCause::Cleaning,
            old_page: Some(70),
            ..hint
        };
        assert_eq!(
            m.stream_for(&copy),
            UNCLASSIFIED,
            "the page's class when written"
        );
        let unknown = WriteHint {
            old_page: Some(300),
            ..copy
        };
        assert_eq!(
            m.stream_for(&unknown),
            HOT,
            "block not seen: the file's class"
        );
        let header = WriteHint {
            header: true,
            ..copy
        };
        assert_eq!(m.stream_for(&header), SYSTEM);
    }
}
