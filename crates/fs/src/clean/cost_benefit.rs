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
