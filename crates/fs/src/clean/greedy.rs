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

#[cfg(test)]
mod tests {
    use super::super::testing::{full, table, PPB};
    use super::*;
    use crate::blocks::RETIRE;

    /// Greedy: the block with the fewest valid pages on the whole device (no window), ties
    /// to the lowest block number; only when space is needed or asked for.
    #[test]
    fn greedy_takes_the_fewest_valid_pages_on_the_device_only_when_needed() {
        let t = table(1000, &[(10, 5), (900, 1), (400, 3), (600, 1)]);
        assert_eq!(Greedy.pick(&t, Need::Space), Some(600));
        assert_eq!(Greedy.pick(&t, Need::Explicit), Some(600));
        assert_eq!(Greedy.pick(&t, Need::Opportunistic), None);
        // Nothing reclaimable: nothing, even when space is short.
        let t = table(16, &[(2, PPB)]);
        assert_eq!(Greedy.pick(&t, Need::Space), None);
        // Flagged first, even when opportunistic.
        let mut t = table(16, &[(2, 0)]);
        full(&mut t, 9, PPB, 1);
        t.update(9, |b| b.flags = RETIRE);
        assert_eq!(Greedy.pick(&t, Need::Opportunistic), Some(9));
    }
}
