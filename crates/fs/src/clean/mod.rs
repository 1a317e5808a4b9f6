//! Block cleaning (DESIGN axis 4): which block to reclaim, and whether to reclaim one now.
//! Every policy works from the block table's candidate index, so a pick costs about the
//! same on any device size.

pub mod cost_benefit;
pub mod greedy;
pub mod idle;
pub mod yaffs;

use crate::blocks::BlockTable;
use crate::config::{CleanerKind, FsConfig};

/// Why the file system asks for a victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// A new block is being opened and space is not short: clean only if it is cheap
    /// (YAFFS "normal" mode; other policies may decline).
    Opportunistic,
    /// Erased blocks are at the reserve: a victim is needed to go on.
    Space,
    /// An explicit `gc` call: clean the best block there is.
    Explicit,
}

pub trait Cleaner: Send + Sync {
    fn name(&self) -> &'static str;
    /// A block to reclaim now, or `None` to reclaim nothing. Only blocks for which
    /// `BlockTable::is_candidate` holds may be returned.
    fn pick(&mut self, table: &BlockTable, need: Need) -> Option<u32>;
    /// The blocks the searches since the last call passed, as (first block, count) runs
    /// that may wrap past the last block: what a search without block status in RAM would
    /// have had to read (`FsConfig::yaffs_search_reads`). Empty for a policy that does
    /// not model it.
    fn take_passed(&mut self) -> Vec<(u32, u32)> {
        Vec::new()
    }
}

pub fn make(config: &FsConfig) -> Box<dyn Cleaner> {
    match config.cleaner {
        CleanerKind::Yaffs => Box::new(yaffs::YaffsCleaner::new(config)),
        CleanerKind::Greedy => Box::new(greedy::Greedy),
        CleanerKind::CostBenefit => Box::new(cost_benefit::CostBenefit),
    }
}

/// Blocks flagged for scrubbing, retirement or a missing summary come first, whatever the
/// policy.
pub(crate) fn flagged(table: &BlockTable) -> Option<u32> {
    table.first_flagged()
}

/// Block tables for the policies' tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::blocks::{BlockState, BlockTable};

    /// Pages per block of the test tables.
    pub const PPB: u32 = 8;

    /// Block `b` of `t` written to its end, its first `valid` pages valid, its first page
    /// written at write serial `serial`.
    pub fn full(t: &mut BlockTable, b: u32, valid: u32, serial: u64) {
        t.set_state(b, BlockState::Full);
        t.update(b, |x| {
            x.set_next_page(PPB);
            x.base_serial = serial;
        });
        for p in 0..valid {
            t.set_valid(b * PPB + p);
        }
    }

    /// A table of `blocks` erased blocks with `full_blocks` (block, valid pages) written.
    pub fn table(blocks: u32, full_blocks: &[(u32, u32)]) -> BlockTable {
        let mut t = BlockTable::new(blocks, PPB);
        for &(b, valid) in full_blocks {
            full(&mut t, b, valid, 1);
        }
        t
    }

    /// Fills blocks (all pages valid: no candidates) until `empty` erased blocks are left.
    pub fn fill_until(t: &mut BlockTable, empty: u32) {
        let mut b = 0;
        while t.empty() > empty {
            if t.get(b).state == BlockState::Empty {
                full(t, b, PPB, 1);
            }
            b += 1;
        }
    }
}
