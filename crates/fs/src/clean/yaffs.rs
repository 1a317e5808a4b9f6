//! YAFFS cleaning as the MODA paper (sec. 6) describes it. A search examines a window of
//! blocks from a rotating cursor. Normal mode picks the block with the most invalid pages
//! in the window and reclaims it only if it has fewer than 3 valid pages; aggressive mode
//! (fewer than 6 erased blocks) reclaims the dirtiest block of the window whatever its
//! valid count.

use super::{flagged, Cleaner, Need};
use crate::blocks::BlockTable;
use crate::config::FsConfig;

pub struct YaffsCleaner {
    window: u32,
    normal_max_valid: u32,
    aggressive_below: u32,
    cursor: u32,
}

impl YaffsCleaner {
    pub fn new(config: &FsConfig) -> Self {
        Self {
            window: config.yaffs_window_blocks.max(1),
            normal_max_valid: config.yaffs_normal_max_valid,
            aggressive_below: config.yaffs_aggressive_below,
            cursor: 0,
        }
    }

    /// The candidate with the fewest valid pages among `window` blocks from the cursor.
    fn dirtiest_in_window(&mut self, table: &BlockTable, window: u32) -> Option<u32> {
        let n = table.blocks.len() as u32;
        let mut best: Option<u32> = None;
        for k in 0..window.min(n) {
            let b = (self.cursor + k) % n;
            if table.is_candidate(b)
                && best
                    .is_none_or(|x| table.blocks[b as usize].valid < table.blocks[x as usize].valid)
            {
                best = Some(b);
            }
        }
        self.cursor = (self.cursor + window.min(n)) % n.max(1);
        best
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
        let aggressive = need != Need::Opportunistic || table.empty < self.aggressive_below;
        if aggressive {
            // Keep looking window after window until the whole device has been searched.
            let n = table.blocks.len() as u32;
            let mut searched = 0;
            while searched < n {
                if let Some(b) = self.dirtiest_in_window(table, self.window) {
                    return Some(b);
                }
                searched += self.window;
            }
            return None;
        }
        let b = self.dirtiest_in_window(table, self.window)?;
        (table.blocks[b as usize].valid < self.normal_max_valid).then_some(b)
    }
}
