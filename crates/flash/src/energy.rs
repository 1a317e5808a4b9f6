//! What each flash operation costs in energy, in picojoules.
//!
//! The model follows the timing model ([`Timing`]) phase by phase: a read senses the page
//! (tR) and then moves its bytes out over the bus; a program moves the bytes in and then
//! programs (tPROG); an erase (tBERS) moves nothing. Each phase costs a fixed energy, and
//! each byte on the bus costs `transfer_pj_per_byte`. A chip that is not working costs
//! nothing (standby current is microamps).
//!
//! Energy is charged per operation on the chip that does it, so an array of p chips doing
//! the same operations as one chip spends the same energy in less time: parallelism saves
//! time, not joules.

use serde::{Deserialize, Serialize};

use crate::timing::Timing;

/// Energy of one chip's operations. Picojoules, so the sum over a run is an exact integer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Energy {
    /// Sensing one page into the page register (tR); full and OOB-only reads alike.
    pub read_pj: u64,
    /// Programming one page from the page register (tPROG).
    pub program_pj: u64,
    /// Erasing one block (tBERS).
    pub erase_pj: u64,
    /// Moving one byte over the bus, in or out. Zero when the bus is free in the timing too.
    pub transfer_pj_per_byte: u64,
}

/// Supply voltage the presets' energy assumes, millivolts: the nominal VCC of 3 V NAND.
pub const SUPPLY_MV: u64 = 3_300;
/// Active current the presets' energy assumes while a chip reads, programs, erases or
/// transfers, microamperes.
pub const ACTIVE_UA: u64 = 25_000;

impl Energy {
    /// E = V x I x t for every phase of `timing`, at `supply_mv` millivolts and `active_ua`
    /// microamperes. Rounded to the nearest picojoule (only the per-byte figure of some bus
    /// rates is not already whole: 40 MB/s at 82.5 mW is 2062.5 pJ a byte).
    pub fn from_power(timing: &Timing, supply_mv: u64, active_ua: u64) -> Self {
        // mV x uA = nW, and nW x ns = 1e-18 J = 1e-6 pJ.
        let nw = u128::from(supply_mv) * u128::from(active_ua);
        let pj = |ns: u64| round_div(nw * u128::from(ns), 1_000_000);
        // One byte takes 1000 / (MB/s) ns, so pJ per byte = nW / (MB/s x 1000).
        let per_byte = match timing.bus_mb_per_s {
            0 => 0,
            mb_per_s => round_div(nw, u128::from(mb_per_s) * 1_000),
        };
        Self {
            read_pj: pj(timing.read_ns),
            program_pj: pj(timing.program_ns),
            erase_pj: pj(timing.erase_ns),
            transfer_pj_per_byte: per_byte,
        }
    }

    /// The presets' rule: [`SUPPLY_MV`] x [`ACTIVE_UA`] x each phase of `timing`. Also what
    /// an image whose sidecar predates the energy model gets.
    pub fn typical(timing: &Timing) -> Self {
        Self::from_power(timing, SUPPLY_MV, ACTIVE_UA)
    }

    /// Picojoules to move `bytes` over the bus.
    pub fn transfer_pj(&self, bytes: usize) -> u64 {
        bytes as u64 * self.transfer_pj_per_byte
    }

    /// Picojoules for a page read that returns `bytes` (data + OOB, or OOB only).
    pub fn read_cost_pj(&self, bytes: usize) -> u64 {
        self.read_pj + self.transfer_pj(bytes)
    }

    /// Picojoules for a page program of `bytes` (data + OOB).
    pub fn program_cost_pj(&self, bytes: usize) -> u64 {
        self.transfer_pj(bytes) + self.program_pj
    }

    /// Picojoules for a block erase.
    pub fn erase_cost_pj(&self) -> u64 {
        self.erase_pj
    }
}

/// a / b rounded to the nearest integer (halves up), saturating at u64::MAX.
fn round_div(a: u128, b: u128) -> u64 {
    u64::try_from((a + b / 2) / b).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(bus_mb_per_s: u64) -> Timing {
        Timing {
            read_ns: 25_000,
            program_ns: 200_000,
            erase_ns: 1_500_000,
            bus_mb_per_s,
        }
    }

    #[test]
    fn typical_is_82_5_milliwatts_times_each_phase() {
        let e = Energy::typical(&timing(20));
        // 3.3 V x 25 mA = 82.5 mW: 25 us -> 2.0625 uJ, 200 us -> 16.5 uJ, 1.5 ms -> 123.75 uJ.
        assert_eq!(e.read_pj, 2_062_500);
        assert_eq!(e.program_pj, 16_500_000);
        assert_eq!(e.erase_pj, 123_750_000);
        // 20 MB/s: 50 ns a byte -> 4.125 nJ.
        assert_eq!(e.transfer_pj_per_byte, 4_125);
        assert_eq!(e.read_cost_pj(528), 2_062_500 + 528 * 4_125);
        assert_eq!(e.program_cost_pj(528), 16_500_000 + 528 * 4_125);
        assert_eq!(e.erase_cost_pj(), 123_750_000);
    }

    #[test]
    fn bus_energy_rounds_and_a_free_bus_costs_nothing() {
        // 40 MB/s: 25 ns a byte -> 2062.5 pJ, rounded up; 133 MB/s: 620.3 pJ -> 620.
        assert_eq!(Energy::typical(&timing(40)).transfer_pj_per_byte, 2_063);
        assert_eq!(Energy::typical(&timing(133)).transfer_pj_per_byte, 620);
        let free = Energy::typical(&timing(0));
        assert_eq!(free.transfer_pj_per_byte, 0);
        assert_eq!(free.read_cost_pj(2112), free.read_pj);
    }
}
