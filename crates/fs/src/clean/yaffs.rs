//! YAFFS cleaning as the MODA paper (sec. 6) describes it. A search examines a window of
//! blocks from a rotating cursor. Normal mode picks the block with the most invalid pages
//! in the window and reclaims it only if it has fewer than 3 valid pages; aggressive mode
//! (fewer than 6 erased blocks) reclaims the dirtiest block of the window whatever its
//! valid count, moving on window by window until it finds one.
//!
//! The window is walked through the block table's candidate index, so a search costs the
//! candidates it meets, not the blocks it passes: cheap on any device size. With
//! `yaffs_search_reads` the cleaner also lists the blocks each search passed, for the file
//! system to charge the OOB reads a search without block status in RAM would issue.

use super::{flagged, Cleaner, Need};
use crate::blocks::BlockTable;
use crate::config::FsConfig;

pub struct YaffsCleaner {
    window: u32,
    normal_max_valid: u32,
    aggressive_below: u32,
    cursor: u32,
    /// Runs of blocks passed since `take_passed` (only with `yaffs_search_reads`).
    passed: Option<Vec<(u32, u32)>>,
}

impl YaffsCleaner {
    pub fn new(config: &FsConfig) -> Self {
        Self {
            window: config.yaffs_window_blocks.max(1),
            normal_max_valid: config.yaffs_normal_max_valid,
            aggressive_below: config.yaffs_aggressive_below,
            cursor: 0,
            passed: config.yaffs_search_reads.then(Vec::new),
        }
    }

    /// The candidate with the fewest valid pages among `window` blocks from the cursor,
    /// and the cursor moved past the window.
    fn dirtiest_in_window(&mut self, table: &BlockTable) -> Option<u32> {
        let n = table.len().max(1);
        let best = table
            .candidates_in(self.cursor, self.window)
            .into_iter()
            .min_by_key(|&b| table.get(b).valid());
        self.pass(self.window.min(n));
        self.cursor = (self.cursor + self.window.min(n)) % n;
        best
    }

    /// The search passes `count` blocks from the cursor.
    fn pass(&mut self, count: u32) {
        if let Some(p) = self.passed.as_mut() {
            if count > 0 {
                p.push((self.cursor, count));
            }
        }
    }
}

impl Cleaner for YaffsCleaner {
    fn name(&self) -> &'static str {
        "yaffs"
    }

    fn pick(&mut self, table: &BlockTable, need: Need) -> Option<u32> {
        if let Some(b) = flagged(table) {
            return Some(b);
        }
        let aggressive = need != Need::Opportunistic || table.empty() < self.aggressive_below;
        if aggressive {
            if let Some(b) = self.dirtiest_in_window(table) {
                return Some(b);
            }
            // No candidate in this window: jump to the window holding the next one (what
            // sweeping window after window would find, without walking empty windows).
            let next = table.next_candidate(self.cursor)?;
            let n = table.len();
            let skipped = (next + n - self.cursor) % n;
            // Without status in RAM, the windows jumped over are swept block by block.
            self.pass(skipped / self.window * self.window);
            self.cursor = (self.cursor + skipped / self.window * self.window) % n;
            return self.dirtiest_in_window(table);
        }
        let b = self.dirtiest_in_window(table)?;
        (table.get(b).valid() < self.normal_max_valid).then_some(b)
    }

    fn take_passed(&mut self) -> Vec<(u32, u32)> {
        self.passed.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{fill_until, full, table, PPB};
    use super::*;
    use crate::blocks::{BlockTable, SCRUB};

    fn yaffs() -> YaffsCleaner {
        let config = FsConfig::profile("yaffs", 1024).unwrap();
        assert_eq!(
            (
                config.yaffs_window_blocks,
                config.yaffs_normal_max_valid,
                config.yaffs_aggressive_below
            ),
            (200, 3, 6),
            "YAFFS's defaults (MODA sec. 6.1)"
        );
        YaffsCleaner::new(&config)
    }

    /// MODA sec. 6.1: "In normal mode, YAFFS chooses the block that has the largest number
    /// of invalid pages among the predefined number of blocks (default setting is 200). If
    /// the chosen block has less than 3 valid pages, it reclaims the block. Otherwise, it
    /// gives up". Fewer than 3: 2 is taken, 3 is not.
    #[test]
    fn normal_mode_takes_the_dirtiest_block_only_below_3_valid_pages() {
        for (valid, want) in [(0, true), (2, true), (3, false), (PPB - 1, false)] {
            let t = table(300, &[(10, valid), (40, PPB - 1)]);
            assert!(t.empty() >= 6);
            let got = yaffs().pick(&t, Need::Opportunistic);
            assert_eq!(got, want.then_some(10), "{valid} valid pages");
        }
        // The dirtiest of the window is chosen, not the first candidate met.
        let t = table(300, &[(10, 5), (40, 1), (90, 2)]);
        assert_eq!(yaffs().pick(&t, Need::Opportunistic), Some(40));
        // Ties: the first met from the cursor.
        let t = table(300, &[(70, 1), (30, 1), (120, 1)]);
        assert_eq!(yaffs().pick(&t, Need::Opportunistic), Some(30));
    }

    /// The search looks at 200 blocks from a cursor that moves on by the window each
    /// search: a dirtier block outside the window is not seen, and the next search looks
    /// at the next 200 (wrapping at the end of the device).
    #[test]
    fn a_search_sees_one_window_of_200_blocks_and_the_cursor_moves_on() {
        let t = table(300, &[(199, 2), (200, 0)]);
        let mut y = yaffs();
        assert_eq!(
            y.pick(&t, Need::Opportunistic),
            Some(199),
            "200 is past the window"
        );
        assert_eq!(y.cursor, 200);
        assert_eq!(
            y.pick(&t, Need::Opportunistic),
            Some(200),
            "blocks 200..300, 0..100"
        );
        assert_eq!(y.cursor, 100);
        // A window with nothing worth taking: normal mode gives up (and moves on).
        let t = table(300, &[(250, 2)]);
        let mut y = yaffs();
        assert_eq!(y.pick(&t, Need::Opportunistic), None);
        assert_eq!(y.pick(&t, Need::Opportunistic), Some(250));
    }

    /// MODA sec. 6.1: "If the number of clean blocks is lower than a predefined number
    /// (default setting is 6), the mode is converted to aggressive. In aggressive mode,
    /// YAFFS chooses a block that has invalid pages and reclaims the block without checking
    /// the number of valid pages in it." Below 6: 5 erased blocks; at 6 it is still normal.
    #[test]
    fn aggressive_below_6_erased_blocks_takes_the_dirtiest_whatever_its_valid_pages() {
        for (empty, want) in [(6, None), (5, Some(3)), (0, Some(3))] {
            let mut t = table(32, &[(3, PPB - 1), (9, PPB - 1)]);
            fill_until(&mut t, empty);
            assert_eq!(t.empty(), empty);
            assert_eq!(
                yaffs().pick(&t, Need::Opportunistic),
                want,
                "{empty} erased blocks"
            );
        }
        // Space short (at the reserve) or an explicit gc: aggressive whatever the count.
        let t = table(300, &[(3, PPB - 1), (9, PPB - 2)]);
        assert_eq!(yaffs().pick(&t, Need::Space), Some(9));
        assert_eq!(yaffs().pick(&t, Need::Explicit), Some(9));
        assert_eq!(yaffs().pick(&t, Need::Opportunistic), None);
    }

    /// Aggressive mode goes on window after window until it finds a block: a candidate
    /// far past the cursor is found in one search, and the cursor ends past its window.
    #[test]
    fn aggressive_mode_goes_on_past_empty_windows() {
        let t = table(1000, &[(700, PPB - 1)]);
        let mut y = yaffs();
        assert_eq!(y.pick(&t, Need::Space), Some(700));
        assert_eq!(
            y.cursor, 800,
            "windows 0, 200, 400 skipped; 600..800 searched"
        );
        // Nothing reclaimable anywhere: nothing, in either mode.
        let t = table(1000, &[(5, PPB)]);
        assert_eq!(yaffs().pick(&t, Need::Space), None);
        assert_eq!(yaffs().pick(&t, Need::Opportunistic), None);
        let t = BlockTable::new(0, PPB);
        assert_eq!(yaffs().pick(&t, Need::Explicit), None);
    }

    /// A block flagged for scrubbing (or retirement) is reclaimed first, in any mode,
    /// however many valid pages it has.
    #[test]
    fn flagged_blocks_come_first() {
        let mut t = table(300, &[(10, 0)]);
        full(&mut t, 250, PPB - 1, 1);
        t.update(250, |b| b.flags = SCRUB);
        assert_eq!(yaffs().pick(&t, Need::Opportunistic), Some(250));
    }
}
