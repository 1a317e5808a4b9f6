//! Idle-time cleaning: which block to reclaim while nothing else is happening, and
//! whether to reclaim any. The MODA paper leaves this as future work ("defining and
//! finding idle time to initiate block cleaning and deciding which blocks and how many of
//! these blocks should be reclaimed", sec. 7). The "when" belongs to the caller (the
//! mount daemon's idle thread, a workload driver's idle time); this decides "which" and
//! "how many", one block per call.
//!
//! - Which: the block with the fewest valid pages on the whole device (flagged blocks
//!   first), whatever the foreground policy: in the background there is no hurry, so the
//!   cheapest block is the best one, and a windowed search like YAFFS's would stop at a
//!   window with nothing worth taking.
//! - How many: a block is worth reclaiming in the background when at least half its pages
//!   are invalid (each erase then costs at most half a block of copies), or, whatever its
//!   cost, while erased blocks number fewer than an eighth of the device: then the next
//!   burst of writes would soon have to clean on demand, which is what idle cleaning is
//!   for. Above that, a block with few invalid pages is left alone: cleaning it now would
//!   copy pages that may yet become invalid for free, and wear the flash for space
//!   nobody is asking for.

use super::flagged;
use crate::blocks::BlockTable;

/// Erased blocks below which idle cleaning takes any reclaimable block: one in this many.
const COMFORT_DIVISOR: u32 = 8;

/// The block to reclaim now, or `None` if none is worth it.
pub fn pick(table: &BlockTable) -> Option<u32> {
    if let Some(b) = flagged(table) {
        return Some(b);
    }
    let b = table.least_valid_candidate()?;
    let cheap = table.get(b).invalid() * 2 >= table.pages_per_block();
    let short = table.empty() < table.len() / COMFORT_DIVISOR;
    (cheap || short).then_some(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::BlockState;

    const PPB: u32 = 8;

    /// Block `b` full, its first `valid` pages valid.
    fn full(t: &mut BlockTable, b: u32, valid: u32) {
        t.set_state(b, BlockState::Full);
        t.update(b, |x| x.set_next_page(PPB));
        for p in 0..valid {
            t.set_valid(b * PPB + p);
        }
    }

    #[test]
    fn takes_the_cheapest_block_only_while_it_is_cheap() {
        let mut t = BlockTable::new(16, PPB);
        full(&mut t, 2, 6);
        full(&mut t, 5, 7);
        assert_eq!(
            pick(&t),
            None,
            "2 and 1 invalid of 8: not worth it with room left"
        );
        full(&mut t, 9, 4);
        assert_eq!(pick(&t), Some(9), "half invalid");
        full(&mut t, 11, 1);
        assert_eq!(pick(&t), Some(11), "the fewest valid pages first");
    }

    #[test]
    fn takes_any_reclaimable_block_once_erased_blocks_are_short() {
        let mut t = BlockTable::new(16, PPB);
        // 15 of 16 blocks full of valid data, one with a single invalid page: one erased
        // block left, fewer than 16 / 8.
        for b in 0..15 {
            full(&mut t, b, PPB);
        }
        t.invalidate(4 * PPB + 3);
        assert_eq!(t.empty(), 1);
        assert_eq!(pick(&t), Some(4));
        // With room, the same block is left alone.
        let mut roomy = BlockTable::new(16, PPB);
        full(&mut roomy, 4, PPB);
        roomy.invalidate(4 * PPB + 3);
        assert_eq!(pick(&roomy), None);
    }

    #[test]
    fn nothing_reclaimable_is_nothing_to_do() {
        let mut t = BlockTable::new(16, PPB);
        for b in 0..15 {
            full(&mut t, b, PPB);
        }
        assert_eq!(
            pick(&t),
            None,
            "short of erased blocks, but every page valid"
        );
    }
}
