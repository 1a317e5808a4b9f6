//! LFS cost-benefit cleaning (Rosenblum and Ousterhout): reclaim the block maximising
//! (1 - u) * age / (1 + u), where u is its valid fraction and age how many blocks have been
//! opened since it was (block sequence numbers stand in for time). Only when space is
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
        let newest = table.blocks.iter().map(|b| b.seq).max().unwrap_or(0);
        let ppb = f64::from(table.pages_per_block);
        let score = |b: u32| {
            let blk = &table.blocks[b as usize];
            let u = f64::from(blk.valid) / ppb;
            let age = f64::from(newest - blk.seq + 1);
            (1.0 - u) * age / (1.0 + u)
        };
        (0..table.blocks.len() as u32)
            .filter(|&b| table.is_candidate(b))
            .max_by(|&a, &b| score(a).total_cmp(&score(b)))
    }
}
