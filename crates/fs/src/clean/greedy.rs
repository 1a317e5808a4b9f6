//! Greedy cleaning: the block with the fewest valid pages on the whole device, only when
//! space is needed. Under uniform random writes its write amplification approaches
//! a / (a + W0(-a e^-a)), a = physical / logical pages.

use super::{flagged, Cleaner, Need};
use crate::blocks::BlockTable;

pub struct Greedy;

impl Cleaner for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }

    fn pick(&mut self, table: &BlockTable, need: Need) -> Option<u32> {
        if let Some(b) = flagged(table) {
            return Some(b);
        }
        if need == Need::Opportunistic {
            return None;
        }
        table.least_valid_candidate()
    }
}
