//! Standby power: what the chips and memories draw while the system waits, which
//! operation energy (`energy.rs`) leaves out. A run's energy with its idle time is the
//! energy of its operations plus standby power over all of its time, busy and idle, so
//! designs that take the same time per operation but hold different memories (DRAM for
//! metadata, an NVRAM beside the flash) spend differently over a day of idle gaps.
//!
//! The figures are typical datasheet-class values, not measurements, and every bench that
//! uses them takes them as flags:
//! - NAND flash: 10 uA CMOS standby at 3.3 V (small-page NAND datasheets' typical ISB),
//!   33 uW per chip;
//! - DRAM: mobile SDRAM in self-refresh, about 0.5 mA at 1.8 V for 64 MiB, 14 uW per MiB,
//!   charged for the MiB the file system holds;
//! - NVRAM: FeRAM in its low-current mode, 5 uA at 3.3 V per 2 Mbit part (a bytewide
//!   F-RAM's sleep current), 66 uW per MiB; PRAM, about 75 uA at 1.8 V per 16 MiB part,
//!   8.4 uW per MiB; charged for the whole NVRAM.
//!
//! Standby is charged over busy time too (a chip at work draws its standby current
//! besides its active one): simpler than tracking each chip's idle spans, and an
//! overestimate of at most the standby power times the busy time.

use clap::Args;

/// Standby power of each part of the storage system, microwatts.
#[derive(Args, Debug, Clone, Copy)]
pub struct StandbyArgs {
    /// NAND standby power per chip, microwatts.
    #[arg(long, value_name = "UW", default_value_t = 33.0)]
    pub flash_standby_uw: f64,
    /// DRAM retention power per MiB the file system holds, microwatts.
    #[arg(long, value_name = "UW", default_value_t = 14.0)]
    pub dram_uw_per_mib: f64,
    /// NVRAM standby power per MiB of NVRAM, microwatts [default: the preset's: feram 66,
    /// pram 8.4].
    #[arg(long, value_name = "UW")]
    pub nvram_uw_per_mib: Option<f64>,
}

impl Default for StandbyArgs {
    fn default() -> Self {
        Self {
            flash_standby_uw: 33.0,
            dram_uw_per_mib: 14.0,
            nvram_uw_per_mib: None,
        }
    }
}

/// What a system holds while it runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Held {
    pub chips: u32,
    /// Heap bytes the file system holds.
    pub dram_bytes: u64,
    pub nvram_bytes: u64,
}

impl StandbyArgs {
    /// NVRAM standby power per MiB for technology `preset`.
    pub fn nvram_uw_per_mib_of(&self, preset: &str) -> f64 {
        self.nvram_uw_per_mib.unwrap_or(match preset {
            "pram" => 8.4,
            _ => 66.0,
        })
    }

    /// Microwatts `held` draws in standby, with an NVRAM of technology `preset`.
    pub fn microwatts(&self, held: Held, preset: &str) -> f64 {
        let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
        self.flash_standby_uw * f64::from(held.chips)
            + self.dram_uw_per_mib * mib(held.dram_bytes)
            + self.nvram_uw_per_mib_of(preset) * mib(held.nvram_bytes)
    }

    /// Joules `held` draws in standby over `seconds`.
    pub fn joules(&self, held: Held, preset: &str, seconds: f64) -> f64 {
        self.microwatts(held, preset) * 1e-6 * seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standby_adds_each_part_over_the_time() {
        let s = StandbyArgs::default();
        let held = Held {
            chips: 2,
            dram_bytes: 4 << 20,
            nvram_bytes: 12 << 20,
        };
        // 2 x 33 + 4 x 14 + 12 x 66 = 914 uW; over 100 s, 91.4 mJ.
        assert!((s.microwatts(held, "feram") - 914.0).abs() < 1e-9);
        assert!((s.joules(held, "feram", 100.0) - 0.0914).abs() < 1e-12);
        // PRAM: 66 + 56 + 12 x 8.4.
        assert!((s.microwatts(held, "pram") - (66.0 + 56.0 + 100.8)).abs() < 1e-9);
        // No NVRAM, no time: nothing.
        assert_eq!(s.joules(Held::default(), "feram", 0.0), 0.0);
    }
}
