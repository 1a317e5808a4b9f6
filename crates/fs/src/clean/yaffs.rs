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
