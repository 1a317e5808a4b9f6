//! DAC, dynamic data clustering (Chiang, Lee and Chang, "Using data clustering to improve
//! cleaning performance for flash memory", 1999), the MODA paper's competitor: the flash
//! is split into k regions by update frequency, one stream each, region 0 the coldest.
//!
//! Its rules, by data age (the time since a page's data was last written):
//! - new data starts in region 0;
//! - data updated while young (its age below the threshold) is promoted one region; data
//!   updated when old stays in its region (it was not updated often);
//! - data still valid when its block is cleaned is demoted one region (it has cooled).
//!
//! Per page, and blind to what the page is: DAC works below the file system, so headers
//! are pages like any other.
//!
//! Where ours differs from Chiang et al.:
//! - their ages are seconds of wall time; ours are write requests (the virtual clock
//!   MODA's classifier uses, `Allocator::write_request`), so a replay's speed does not
//!   change the classes;
//! - their threshold is tuned per workload; ours is one parameter (`--dac-age`, default
//!   the MODA paper's lifetime of 100 ticks, the same horizon MODA calls recent), never
//!   fitted to a result;
//! - their paper is not among ours: the rules above follow how it is described by those
//!   who cite it (promoted when updated younger than a threshold, demoted when cleaned).
//!
//! A page's region is the stream its block was filled by (`BlockStreams`); its age comes
//! from the tick each page was written at (4 bytes per page of RAM). Pages written before
//! this mount have no known age and count as old in region 0; nothing is kept on flash
//! (see `alloc`).

use super::{Allocator, BlockStreams, WriteCause, WriteHint};
use crate::config::AllocParams;
use crate::types::Ino;

/// A page whose write this mount did not see.
const UNSEEN: u32 = u32::MAX;

pub struct Dac {
    regions: usize,
    /// Updated younger than this many ticks: promoted.
    young: u32,
    blocks: BlockStreams,
    /// The tick each page was last written at.
    written: Vec<u32>,
    now: u32,
}

impl Dac {
    pub fn new(params: &AllocParams, blocks: u32, pages_per_block: u32) -> Self {
        Self {
            regions: (params.regions as usize).max(1),
            young: params.dac_age,
            blocks: BlockStreams::new(blocks, pages_per_block),
            written: vec![UNSEEN; blocks as usize * pages_per_block as usize],
            now: 0,
        }
    }

    /// Ticks since `page` was written (None when this mount did not see it written).
    fn age(&self, page: u32) -> Option<u32> {
        match self.written.get(page as usize) {
            Some(&t) if t != UNSEEN => Some(self.now.wrapping_sub(t)),
            _ => None,
        }
    }
}

impl Allocator for Dac {
    fn name(&self) -> &'static str {
        "dac"
    }

    fn streams(&self) -> usize {
        self.regions
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        let Some(old) = hint.old_page else {
            return 0;
        };
        let region = self.blocks.of_page(old).unwrap_or(0).min(self.regions - 1);
        match hint.cause {
            WriteCause::Cleaning => region.saturating_sub(1),
            _ if self.age(old).is_some_and(|a| a < self.young) => {
                (region + 1).min(self.regions - 1)
            }
            _ => region,
        }
    }

    fn placed(&mut self, hint: &WriteHint, stream: usize, pno: u32) {
        self.blocks.record(pno, stream);
        // A cleaning copy moves data without writing it: its age goes with it.
        let tick = match (hint.cause, hint.old_page) {
            (WriteCause::Cleaning, Some(old)) => {
                self.written.get(old as usize).copied().unwrap_or(UNSEEN)
            }
            _ => self.now,
        };
        if let Some(t) = self.written.get_mut(pno as usize) {
            *t = tick;
        }
    }

    fn write_request(&mut self, _obj: Ino) {
        // Wraps after 4 billion requests; ages then read as small for one round.
        self.now = self.now.wrapping_add(1);
        if self.now == UNSEEN {
            self.now = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dac(young: u32) -> Dac {
        let p = AllocParams {
            dac_age: young,
            ..AllocParams::default()
        };
        Dac::new(&p, 16, 32)
    }

    fn update(d: &mut Dac, page: u32) -> usize {
        d.stream_for(&WriteHint::user_data(5, 0, Some(page)))
    }

    #[test]
    fn young_updates_climb_old_ones_stay_and_cleaning_copies_sink() {
        let mut d = dac(10);
        let new = WriteHint::user_data(5, 0, None);
        assert_eq!(d.stream_for(&new), 0);
        d.placed(&new, 0, 0);
        let mut page = 0;
        // Updated at once, again and again: one region up each time, to the top.
        for want in [1, 2, 3, 3] {
            d.write_request(5);
            let s = update(&mut d, page);
            assert_eq!(s, want);
            let next = 32 * (s as u32 + 1);
            d.placed(&WriteHint::user_data(5, 0, Some(page)), s, next);
            page = next;
        }
        // Left alone for the threshold: an update keeps it where it is.
        for _ in 0..10 {
            d.write_request(6);
        }
        assert_eq!(update(&mut d, page), 3);
        let copy = WriteHint {
            cause: WriteCause::Cleaning,
            ..WriteHint::user_data(5, 0, Some(page))
        };
        assert_eq!(d.stream_for(&copy), 2);
        // The copy keeps the data's age: still old after the move.
        d.placed(&copy, 2, 100);
        assert_eq!(update(&mut d, 100), 2);
        // Headers are pages like any other.
        d.write_request(5);
        let h = WriteHint::metadata(5, None);
        d.placed(&h, 0, 200);
        d.write_request(5);
        assert_eq!(d.stream_for(&WriteHint::metadata(5, Some(200))), 1);
    }

    /// The threshold is exclusive: data updated at age `young - 1` is promoted a region,
    /// at age `young` (or older) it stays. Ages count write requests (each one a tick,
    /// whichever file, however many in a row), from the tick the page was placed at.
    #[test]
    fn an_update_is_promoted_only_while_younger_than_the_threshold() {
        for (requests, want) in [(0, 1), (9, 1), (10, 0), (500, 0)] {
            let mut d = dac(10);
            let new = WriteHint::user_data(5, 0, None);
            d.placed(&new, 0, 0);
            for _ in 0..requests {
                d.write_request(5);
            }
            assert_eq!(d.age(0), Some(requests));
            assert_eq!(update(&mut d, 0), want, "updated at age {requests}");
        }
    }

    /// Promotion is one region per young update, from the region the old page's block was
    /// filled by, and stops at the hottest region; with k regions the top is k - 1.
    #[test]
    fn promotion_is_one_region_at_a_time_up_to_the_last() {
        let p = AllocParams {
            dac_age: 10,
            regions: 2,
            ..AllocParams::default()
        };
        let mut d = Dac::new(&p, 16, 32);
        assert_eq!(d.streams(), 2);
        d.placed(&WriteHint::user_data(5, 0, None), 1, 32); // block 1, region 1
        assert_eq!(update(&mut d, 32), 1, "the top region stays the top");
        let mut d = dac(10);
        d.placed(&WriteHint::user_data(5, 0, None), 2, 64); // block 2, region 2
        assert_eq!(
            update(&mut d, 64),
            3,
            "region 2 -> 3, not to 0 or the top at once"
        );
    }

    /// Chiang et al.'s demotion: valid data moved by cleaning has cooled, one region down
    /// (the coldest stays the coldest), whatever its age, and keeps its age when moved.
    #[test]
    fn cleaning_demotes_one_region_down_to_the_coldest_and_keeps_the_age() {
        let mut d = dac(10);
        let copy = |page| WriteHint {
            cause: WriteCause::Cleaning,
            ..WriteHint::user_data(5, 0, Some(page))
        };
        d.placed(&WriteHint::user_data(5, 0, None), 3, 96); // region 3, tick 0
        d.placed(&WriteHint::user_data(6, 0, None), 0, 5); // region 0
        d.write_request(5);
        assert_eq!(d.stream_for(&copy(96)), 2);
        assert_eq!(d.stream_for(&copy(5)), 0);
        d.placed(&copy(96), 2, 70);
        d.write_request(5);
        assert_eq!(
            d.age(70),
            Some(2),
            "the copy is as old as the data it moved"
        );
        assert_eq!(d.stream_for(&copy(9999)), 0, "a page never seen: region 0");
    }

    #[test]
    fn pages_written_before_the_mount_count_as_old_and_cold() {
        let mut d = dac(1000);
        assert_eq!(update(&mut d, 40), 0);
        assert_eq!(update(&mut d, 99_999), 0, "out of range: no panic");
    }
}
