//! The multi-queue (MQ) classifier MODA uses for user data (Zhou et al.'s MQ, as the MODA
//! paper applies it): m queues Q0..Q(m-1), each stay lasting a lifetime of virtual ticks.
//! Something first written enters Q0; modified within its lifetime it is promoted one
//! queue, and promoted out of the top queue it is hot; left unmodified for a lifetime it is
//! demoted one queue, and demoted out of Q0 it is cold. Anything in a queue is
//! unclassified. With the paper's m = 2 and lifetime 100: written three times in quick
//! succession is hot; untouched for 100 ticks after its first write is cold.
//!
//! Demotion is computed when asked (one level per whole lifetime since the last change),
//! which is what demoting at every tick would give, without a timer per entry.
//!
//! What a tick is: MODA counts a file's modification "when its modification time is
//! updated", which YAFFS does when a file is flushed, not at each write call. So a
//! modification here is a run of write requests to one file: it ends when a request for
//! another file arrives or the file is fsync'd. A program writing a photo in 256 calls
//! makes one modification, not 256 (which would call every new file hot).

use std::cmp::Ordering;

use crate::types::Ino;

/// The class an entry is in now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Unclassified,
    Hot,
    Cold,
}

/// One classified thing (a file, or a page): its level (-1 cold, 0..m-1 a queue, m hot)
/// and the tick of its last change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    level: i8,
    since: u32,
}

/// The classifier's rules and its clock.
pub struct Mq {
    queues: i8,
    lifetime: u32,
    now: u32,
    /// The file whose run of writes is the current modification (see the module doc).
    in_run: Option<Ino>,
}

impl Mq {
    pub fn new(queues: u32, lifetime: u32) -> Self {
        Self {
            queues: i8::try_from(queues.clamp(1, 8)).unwrap_or(8),
            lifetime: lifetime.max(1),
            now: 0,
            in_run: None,
        }
    }

    pub fn now(&self) -> u32 {
        self.now
    }

    /// A write request for `obj` arrived. True if it starts a new modification (and so
    /// moved the clock), false if it continues the current one.
    pub fn write_request(&mut self, obj: Ino) -> bool {
        if self.in_run == Some(obj) {
            return false;
        }
        self.in_run = Some(obj);
        self.now = self.now.saturating_add(1);
        true
    }

    /// `obj` was flushed: its next write is a new modification.
    pub fn flushed(&mut self, obj: Ino) {
        if self.in_run == Some(obj) {
            self.in_run = None;
        }
    }

    /// An entry first written now: Q0.
    pub fn created(&self) -> Entry {
        Entry {
            level: 0,
            since: self.now,
        }
    }

    /// An entry known since before this mount (its history is not kept): as if first
    /// written at tick 0.
    pub fn unknown() -> Entry {
        Entry { level: 0, since: 0 }
    }

    /// The level of `e` now, after the demotions its idle lifetimes earned.
    fn level(&self, e: Entry) -> i8 {
        let idle = self.now.saturating_sub(e.since) / self.lifetime;
        let demotions = i8::try_from(idle).unwrap_or(i8::MAX);
        e.level.saturating_sub(demotions).max(-1)
    }

    /// `e` modified now. Within its lifetime: promoted (at most to hot). After it: what
    /// demotion left, and a cold entry written again re-enters Q0 (its new data is not
    /// known to be cold). Twice in one modification counts once.
    pub fn modified(&self, e: Entry) -> Entry {
        let level = match self.now.saturating_sub(e.since).cmp(&self.lifetime) {
            _ if self.now == e.since => e.level,
            Ordering::Less => (e.level + 1).min(self.queues),
            Ordering::Equal | Ordering::Greater => self.level(e).max(0),
        };
        Entry {
            level,
            since: self.now,
        }
    }

    pub fn class(&self, e: Entry) -> Class {
        match self.level(e) {
            l if l >= self.queues => Class::Hot,
            l if l < 0 => Class::Cold,
            _ => Class::Unclassified,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks the clock by `n` modifications of other files.
    fn tick(mq: &mut Mq, n: u32) {
        for k in 0..n {
            mq.write_request(1_000_000 + k);
        }
    }

    #[test]
    fn the_papers_rules_with_m_2_and_lifetime_100() {
        let mut mq = Mq::new(2, 100);
        mq.write_request(1);
        let e = mq.created();
        assert_eq!(mq.class(e), Class::Unclassified);
        tick(&mut mq, 1);
        mq.write_request(1);
        let e = mq.modified(e); // Q1
        assert_eq!(mq.class(e), Class::Unclassified);
        tick(&mut mq, 1);
        mq.write_request(1);
        let e = mq.modified(e); // promoted out of the top queue
        assert_eq!(mq.class(e), Class::Hot);
        // A lifetime untouched: back into Q1; two more and out of Q0: cold.
        tick(&mut mq, 100);
        assert_eq!(mq.class(e), Class::Unclassified);
        tick(&mut mq, 200);
        assert_eq!(mq.class(e), Class::Cold);
        // Written again: Q0, not cold.
        mq.write_request(1);
        let e = mq.modified(e);
        assert_eq!(mq.class(e), Class::Unclassified);
    }

    #[test]
    fn a_new_entry_left_alone_for_a_lifetime_is_cold() {
        let mut mq = Mq::new(2, 100);
        let e = mq.created();
        tick(&mut mq, 99);
        assert_eq!(
            mq.class(e),
            Class::Unclassified,
            "modified within the last 100"
        );
        tick(&mut mq, 1);
        assert_eq!(
            mq.class(e),
            Class::Cold,
            "not modified in the last 100 ticks"
        );
    }

    #[test]
    fn a_run_of_writes_to_one_file_is_one_modification() {
        let mut mq = Mq::new(2, 100);
        assert!(mq.write_request(7));
        let mut e = mq.created();
        for _ in 0..50 {
            assert!(!mq.write_request(7));
            e = mq.modified(e);
        }
        assert_eq!(
            mq.class(e),
            Class::Unclassified,
            "one long write is not hot"
        );
        assert_eq!(mq.now(), 1);
        mq.flushed(7);
        assert!(mq.write_request(7), "after a flush, a new modification");
        assert!(
            mq.write_request(8) && mq.write_request(7),
            "interleaved: each switch"
        );
    }

    #[test]
    fn modified_after_the_lifetime_is_not_promoted() {
        let mut mq = Mq::new(2, 10);
        let e = mq.created();
        tick(&mut mq, 15);
        let e = mq.modified(e);
        assert_eq!(mq.class(e), Class::Unclassified);
        assert_eq!(
            e.level, 0,
            "one idle lifetime took it to -1; written: back to Q0"
        );
    }

    /// MODA sec. 5: "If a file is modified within its lifetime, it is promoted from Q_i to
    /// Q_{i+1}". Within means fewer than `lifetime` ticks: at 99 of 100 it is promoted, at
    /// exactly 100 the lifetime has run out and it is not (it was demoted instead).
    #[test]
    fn promotion_needs_a_modification_within_the_lifetime_exclusive() {
        let mut mq = Mq::new(2, 100);
        mq.write_request(1);
        let e = mq.created();
        tick(&mut mq, 98);
        mq.write_request(1); // 99 ticks after its creation
        let promoted = mq.modified(e);
        assert_eq!(promoted.level, 1, "modified 99 ticks on: Q0 -> Q1");
        assert_eq!(promoted.since, mq.now(), "its lifetime restarts now");

        let mut mq = Mq::new(2, 100);
        mq.write_request(1);
        let e = mq.created();
        tick(&mut mq, 99);
        mq.write_request(1); // exactly 100 ticks after its creation
        assert_eq!(mq.now() - e.since, 100);
        let late = mq.modified(e);
        assert_eq!(
            late.level, 0,
            "modified at exactly the lifetime: demoted out of Q0, written again: Q0"
        );
        assert_eq!(mq.class(late), Class::Unclassified);
    }

    /// MODA sec. 5: "a file promoted from Q_{m-1} [is] hot-modified data": with m = 2, the
    /// third write within lifetimes (Q0, Q1, out of Q1), never the second; and a hot entry
    /// modified again stays hot (the level never passes m) with its lifetime restarted.
    #[test]
    fn hot_is_promotion_out_of_the_top_queue_and_a_hot_entry_stays_hot_while_modified() {
        let mut mq = Mq::new(2, 100);
        mq.write_request(1);
        let e = mq.created();
        assert_eq!((e.level, mq.class(e)), (0, Class::Unclassified));
        tick(&mut mq, 1);
        mq.write_request(1);
        let e = mq.modified(e);
        assert_eq!((e.level, mq.class(e)), (1, Class::Unclassified), "twice");
        tick(&mut mq, 1);
        mq.write_request(1);
        let e = mq.modified(e);
        assert_eq!((e.level, mq.class(e)), (2, Class::Hot), "three times");
        // Modified every 99 ticks, it never cools: each modification restarts the clock.
        let mut e = e;
        for _ in 0..5 {
            tick(&mut mq, 98);
            mq.write_request(1);
            e = mq.modified(e);
            assert_eq!(e.level, 2, "capped at m");
            assert_eq!(mq.class(e), Class::Hot);
        }
    }

    /// The same rules with the paper's other settings (m = 3 and lifetime = 500, sec. 5):
    /// hot after four writes, and a new entry is cold after 500 idle ticks, not 100.
    #[test]
    fn queues_and_lifetime_are_parameters_not_constants() {
        let mut mq = Mq::new(3, 500);
        mq.write_request(1);
        let mut e = mq.created();
        for want in [Class::Unclassified, Class::Unclassified, Class::Hot] {
            tick(&mut mq, 1);
            mq.write_request(1);
            e = mq.modified(e);
            assert_eq!(mq.class(e), want, "level {}", e.level);
        }
        let mut mq = Mq::new(3, 500);
        let e = mq.created();
        tick(&mut mq, 499);
        assert_eq!(mq.class(e), Class::Unclassified);
        tick(&mut mq, 1);
        assert_eq!(mq.class(e), Class::Cold);
    }

    /// MODA sec. 5: "if a file is not modified within its lifetime, it is demoted from Q_i
    /// to Q_{i-1}", one queue per lifetime: a hot entry (level m) is in Q1 after 100 idle
    /// ticks, Q0 after 200, cold after 300; never at 99, 199 or 299. Past that it stays
    /// cold: demotion stops at cold however many lifetimes pass.
    #[test]
    fn demotion_is_one_queue_per_whole_idle_lifetime_down_to_cold() {
        let mut mq = Mq::new(2, 100);
        let hot = Entry { level: 2, since: 0 };
        let at = |mq: &mut Mq, t: u32| {
            mq.now = t;
            (mq.level(hot), mq.class(hot))
        };
        assert_eq!(at(&mut mq, 99), (2, Class::Hot));
        assert_eq!(at(&mut mq, 100), (1, Class::Unclassified));
        assert_eq!(at(&mut mq, 199), (1, Class::Unclassified));
        assert_eq!(at(&mut mq, 200), (0, Class::Unclassified));
        assert_eq!(at(&mut mq, 299), (0, Class::Unclassified));
        assert_eq!(at(&mut mq, 300), (-1, Class::Cold));
        assert_eq!(at(&mut mq, 1_000_000), (-1, Class::Cold));
        // Modified after many lifetimes: what demotion left (cold), back into Q0, not
        // promoted from the level it had.
        mq.in_run = None;
        mq.write_request(1);
        let again = mq.modified(hot);
        assert_eq!((again.level, again.since), (0, mq.now()));
        // Modified after exactly one idle lifetime: demoted once (Q1), not promoted.
        let mut mq = Mq::new(2, 100);
        mq.now = 100;
        assert_eq!(mq.modified(hot).level, 1);
        mq.now = 250;
        assert_eq!(mq.modified(hot).level, 0, "two whole lifetimes: Q0");
    }

    /// A tie: two requests in one tick (one modification) count once, however the entry
    /// is asked; and an empty classifier (nothing written, clock at 0) calls an entry from
    /// before the mount unclassified until a lifetime of ticks has passed.
    #[test]
    fn one_tick_counts_once_and_an_empty_classifier_starts_unclassified() {
        let mut mq = Mq::new(2, 100);
        assert_eq!(mq.now(), 0);
        assert_eq!(mq.class(Mq::unknown()), Class::Unclassified);
        assert_eq!(Mq::unknown(), Entry { level: 0, since: 0 });
        mq.flushed(9); // nothing in a run: no effect, no tick
        assert_eq!(mq.now(), 0);
        mq.write_request(1);
        let e = mq.created();
        let twice = mq.modified(mq.modified(e));
        assert_eq!(twice, e, "same tick: no promotion");
        tick(&mut mq, 99);
        assert_eq!(mq.class(Mq::unknown()), Class::Cold, "tick 100: cold");
    }

    /// The clock: one tick per modification (a run of requests to one file), so a flush
    /// or another file's request ends the run, and a flush of another file does not.
    #[test]
    fn the_clock_ticks_once_per_run_and_only_its_own_flush_ends_a_run() {
        let mut mq = Mq::new(2, 100);
        assert!(mq.write_request(1));
        assert!(!mq.write_request(1));
        mq.flushed(2);
        assert!(!mq.write_request(1), "another file's fsync: still one run");
        assert_eq!(mq.now(), 1);
        mq.flushed(1);
        assert!(mq.write_request(1), "its own fsync ended the run");
        assert_eq!(mq.now(), 2);
        assert!(mq.write_request(2));
        assert!(mq.write_request(1));
        assert_eq!(mq.now(), 4);
    }

    #[test]
    fn clock_and_levels_saturate_instead_of_wrapping() {
        let mut mq = Mq::new(8, 1);
        mq.now = u32::MAX - 1;
        tick(&mut mq, 5);
        assert_eq!(mq.now(), u32::MAX);
        let e = Mq::unknown();
        assert_eq!(mq.class(e), Class::Cold);
    }
}
