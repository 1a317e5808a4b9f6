//! Power loss. A cut is armed at a future state-changing operation; that operation is torn
//! and everything after it is refused until the device is reopened.
//!
//! Only programs, erases and bad-block marks count as operations here: a read changes
//! nothing on the chip, so cutting power during a read leaves the same state as cutting it
//! just before the next program, and counting reads would only repeat crash points.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// When to cut power.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerCut {
    /// Tear the operation with this index, counting from 0 at the moment of arming.
    AtOp(u64),
    /// Tear an operation chosen from the seed among the next `within` operations.
    Random { seed: u64, within: u64 },
}

/// What happens to one state-changing operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Power is on: the operation runs.
    Run,
    /// Power fails during this operation; the seed picks how it is torn.
    Tear { seed: u64 },
    /// Power is already gone.
    Refuse,
}

/// Counts state-changing operations and decides which one the power cut tears.
#[derive(Clone, Debug, Default)]
pub struct PowerControl {
    ops_done: u64,
    cut_at: Option<u64>,
    lost: bool,
    seed: u64,
}

impl PowerControl {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    /// State-changing operations issued since the device was opened.
    pub fn ops_done(&self) -> u64 {
        self.ops_done
    }

    pub fn is_lost(&self) -> bool {
        self.lost
    }

    pub fn arm(&mut self, cut: PowerCut) {
        let offset = match cut {
            PowerCut::AtOp(n) => n,
            PowerCut::Random { seed, within } => {
                Xoshiro256PlusPlus::seed_from_u64(seed).gen_range(0..within.max(1))
            }
        };
        self.cut_at = Some(self.ops_done + offset);
    }

    pub fn disarm(&mut self) {
        self.cut_at = None;
    }

    /// Power comes back: the device accepts operations again. Nothing on it changes.
    pub fn restore(&mut self) {
        self.lost = false;
        self.cut_at = None;
    }

    /// The verdict for the next state-changing operation.
    pub fn next_op(&mut self) -> Verdict {
        if self.lost {
            return Verdict::Refuse;
        }
        let index = self.ops_done;
        self.ops_done += 1;
        if self.cut_at == Some(index) {
            self.lost = true;
            self.cut_at = None;
            return Verdict::Tear {
                seed: self.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            };
        }
        Verdict::Run
    }

    /// Reads are refused once power is gone, but never counted.
    pub fn check_read(&self) -> Verdict {
        if self.lost {
            Verdict::Refuse
        } else {
            Verdict::Run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tears_exactly_the_armed_op_then_refuses() {
        let mut p = PowerControl::new(1);
        assert_eq!(p.next_op(), Verdict::Run);
        p.arm(PowerCut::AtOp(2));
        assert_eq!(p.next_op(), Verdict::Run);
        assert_eq!(p.next_op(), Verdict::Run);
        assert!(matches!(p.next_op(), Verdict::Tear { .. }));
        assert_eq!(p.next_op(), Verdict::Refuse);
        assert_eq!(p.check_read(), Verdict::Refuse);
        p.restore();
        assert_eq!(p.next_op(), Verdict::Run);
    }

    #[test]
    fn random_cut_is_seeded() {
        let pick = |seed| {
            let mut p = PowerControl::new(0);
            p.arm(PowerCut::Random { seed, within: 1000 });
            (0..1000).position(|_| p.next_op() != Verdict::Run).unwrap()
        };
        assert_eq!(pick(42), pick(42));
        assert!(pick(42) < 1000);
    }
}
