//! LFS cost-benefit cleaning (Rosenblum and Ousterhout): reclaim the block maximising
//! (1 - u) * age / (1 + u), where u is its valid fraction and age how many pages have been
//! written since its first page was (write serials stand in for time). Only when space is
//! needed.

use super::{flagged, Cleaner, Need};
use crate::blocks::BlockTable;

pub struct CostBenefit;

impl Cleaner for CostBenefit {
    fn name(&self) -> &'static str {
        "cost-benefit"
    }

    fn pick(&mut self, table: &BlockTable, need: Need) -> Option<u32> {
        if let Some(b) = flagged(table) {
            return Some(b);
        }
        if need == Need::Opportunistic {
            return None;
        }
        let candidates = table.all_candidates();
        let newest = candidates
            .iter()
            .map(|&b| table.get(b).base_serial)
            .max()
            .unwrap_or(0);
        let ppb = f64::from(table.pages_per_block());
        let score = |b: u32| {
            let blk = table.get(b);
            let u = f64::from(blk.valid()) / ppb;
            let age = (newest - blk.base_serial.min(newest) + 1) as f64;
            (1.0 - u) * age / (1.0 + u)
        };
        candidates
            .into_iter()
            .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(b.cmp(&a)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{full, PPB};
    use super::*;
    use crate::blocks::SCRUB;

    /// Rosenblum and Ousterhout's benefit / cost = (1 - u) * age / (1 + u), age counted in
    /// write serials from the newest block's first page, plus one. The three blocks'
    /// scores: 7 (u 1/4, age 2) 1.2; 3 (u 1/2, age 3) 1.0; 5 (u 1/8, age 1) 0.78. Each
    /// variant of the formula picks another block: (1 - u) * age ties 7 with 3 (lowest
    /// number: 3), (1 - u) / (1 + u) takes 5, (1 - u) * age / u takes 5, greedy takes 5.
    #[test]
    fn cost_benefit_takes_the_highest_score_not_the_fewest_valid_pages() {
        let mut t = BlockTable::new(16, PPB);
        full(&mut t, 7, 2, 99);
        full(&mut t, 3, 4, 98);
        full(&mut t, 5, 1, 100);
        assert_eq!(CostBenefit.pick(&t, Need::Space), Some(7));
        assert_eq!(CostBenefit.pick(&t, Need::Explicit), Some(7));
        assert_eq!(CostBenefit.pick(&t, Need::Opportunistic), None);
        // Old enough, a fuller block beats an emptier young one.
        let mut t = BlockTable::new(16, PPB);
        full(&mut t, 1, 4, 1);
        full(&mut t, 2, 2, 1000);
        assert_eq!(CostBenefit.pick(&t, Need::Space), Some(1));
        // Equal ages: the emptier block.
        let mut t = BlockTable::new(16, PPB);
        full(&mut t, 1, 4, 10);
        full(&mut t, 2, 2, 10);
        assert_eq!(CostBenefit.pick(&t, Need::Space), Some(2));
    }

    /// Equal scores go to the lowest block number; flagged blocks come first; nothing
    /// reclaimable is nothing.
    #[test]
    fn cost_benefit_ties_flags_and_an_empty_device() {
        let mut t = BlockTable::new(16, PPB);
        full(&mut t, 11, 3, 5);
        full(&mut t, 4, 3, 5);
        assert_eq!(CostBenefit.pick(&t, Need::Space), Some(4));
        full(&mut t, 13, PPB, 1);
        t.update(13, |b| b.flags = SCRUB);
        assert_eq!(CostBenefit.pick(&t, Need::Opportunistic), Some(13));
        let t = BlockTable::new(16, PPB);
        assert_eq!(CostBenefit.pick(&t, Need::Explicit), None);
    }
}
