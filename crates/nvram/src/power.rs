//! Power loss. A cut is armed at a future persist point; power fails just before that persist
//! takes effect, and every operation after it is refused until [`crate::Nvram::crash`].
//!
//! Only persists are crash points. Stores between two persists are all volatile, and a crash
//! keeps, drops or tears each of them independently anyway, so cutting power between two
//! stores gives no state that cutting it at the next persist cannot. Counting stores would
//! only repeat crash points.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// When to cut power.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerCut {
    /// Fail at the persist with this index, counting from 0 at the moment of arming.
    AtPersist(u64),
    /// Fail at a persist chosen from the seed among the next `within` persists.
    Random { seed: u64, within: u64 },
}

/// What happens to one persist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Power is on: the persist runs.
    Run,
    /// Power fails now, before this persist takes effect.
    Cut,
    /// Power is already gone.
    Refuse,
}

/// Counts persist points and decides at which one power fails.
#[derive(Clone, Debug, Default)]
pub struct PowerControl {
    persists_done: u64,
    cut_at: Option<u64>,
    lost: bool,
}

impl PowerControl {
    /// Persist points reached since the device was opened, the cut one included.
    pub fn persists_done(&self) -> u64 {
        self.persists_done
    }

    pub fn is_lost(&self) -> bool {
        self.lost
    }

    pub fn arm(&mut self, cut: PowerCut) {
        let offset = match cut {
            PowerCut::AtPersist(n) => n,
            PowerCut::Random { seed, within } => {
                Xoshiro256PlusPlus::seed_from_u64(seed).gen_range(0..within.max(1))
            }
        };
        self.cut_at = Some(self.persists_done + offset);
    }

    pub fn disarm(&mut self) {
        self.cut_at = None;
    }

    /// Power comes back, with no cut armed.
    pub fn restore(&mut self) {
        self.lost = false;
        self.cut_at = None;
    }

    /// The verdict for the next persist.
    pub fn next_persist(&mut self) -> Verdict {
        if self.lost {
            return Verdict::Refuse;
        }
        let index = self.persists_done;
        self.persists_done += 1;
        if self.cut_at == Some(index) {
            self.lost = true;
            self.cut_at = None;
            return Verdict::Cut;
        }
        Verdict::Run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_exactly_the_armed_persist_then_refuses() {
        let mut p = PowerControl::default();
        assert_eq!(p.next_persist(), Verdict::Run);
        p.arm(PowerCut::AtPersist(2));
        assert_eq!(p.next_persist(), Verdict::Run);
        assert_eq!(p.next_persist(), Verdict::Run);
        assert_eq!(p.next_persist(), Verdict::Cut);
        assert_eq!(p.next_persist(), Verdict::Refuse);
        assert_eq!(p.persists_done(), 4);
        p.restore();
        assert_eq!(p.next_persist(), Verdict::Run);
    }

    #[test]
    fn random_cut_is_seeded() {
        let pick = |seed| {
            let mut p = PowerControl::default();
            p.arm(PowerCut::Random { seed, within: 1000 });
            (0..1000)
                .position(|_| p.next_persist() != Verdict::Run)
                .unwrap()
        };
        assert_eq!(pick(42), pick(42));
    }
}
