//! Simulated time and energy for the benches: every bench that reports a span's simulated
//! time reports the energy of the same span next to it, measured the same way.
//!
//! The energy is what the device counted: each flash operation's energy from its preset
//! (`nandkit presets` lists the figures and their sources; typical values, not
//! measurements), plus the NVRAM's per-byte energy when the file system has an NVRAM.
//! Idle time costs nothing here, so a span's energy does not grow with the clock, only with
//! the operations in it, and p chips working in parallel spend what one chip would.
//! Standby power over busy and idle time is added where a bench reports it (`standby`).

use nandkit_flash::StripedDevice;

use super::Fs;

/// Picojoules in a joule.
const PJ_PER_J: f64 = 1e12;

/// The simulated clock and the energy spent so far, at one moment. A span's time and
/// energy are the difference of two marks, so every bench subtracts the same way.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    ns: u64,
    pj: u64,
}

impl Mark {
    /// On a mounted file system: its flash and, if it has one, its NVRAM.
    pub fn of_fs(fs: &Fs) -> Mark {
        let nvram_pj = fs.nvram().map_or(0, |n| n.stats.energy_pj);
        Mark::of_parts(&mut fs.device(), nvram_pj)
    }

    /// On a device no file system holds (before a mount, after an unmount): its flash.
    pub fn of_device(dev: &mut StripedDevice) -> Mark {
        Mark::of_parts(dev, 0)
    }

    /// On a device and, apart from it, an NVRAM that has spent `nvram_pj` so far (between
    /// an unmount and a mount that hands the NVRAM over).
    pub fn of_parts(dev: &mut StripedDevice, nvram_pj: u64) -> Mark {
        use nandkit_flash::Flash;
        Mark {
            ns: dev.now_ns(),
            pj: dev.stats().energy_pj() + nvram_pj,
        }
    }

    /// On an unmounted file system's devices: its flash and, if it has one, its NVRAM.
    pub fn of_unmounted(parts: &mut super::Parts) -> Mark {
        let nvram_pj = parts.1.as_ref().map_or(0, |n| n.stats().energy_pj);
        Mark::of_parts(&mut parts.0, nvram_pj)
    }

    /// What the unmounted devices spent since `self`.
    pub fn to_unmounted(self, parts: &mut super::Parts) -> Spent {
        self.to(Mark::of_unmounted(parts))
    }

    /// What was spent from `self` to `later`.
    pub fn to(self, later: Mark) -> Spent {
        Spent {
            sim_ns: later.ns - self.ns,
            energy_pj: later.pj - self.pj,
        }
    }

    /// What the file system spent since `self`.
    pub fn to_fs(self, fs: &Fs) -> Spent {
        self.to(Mark::of_fs(fs))
    }

    /// What the device spent since `self`.
    pub fn to_device(self, dev: &mut StripedDevice) -> Spent {
        self.to(Mark::of_device(dev))
    }
}

/// Simulated time and energy of one span, in the units reports use.
#[derive(Clone, Copy, Debug, Default)]
pub struct Spent {
    pub sim_ns: u64,
    pub energy_pj: u64,
}

impl Spent {
    pub fn sim_s(&self) -> f64 {
        self.sim_ns as f64 / 1e9
    }

    pub fn sim_ms(&self) -> f64 {
        self.sim_ns as f64 / 1e6
    }

    pub fn sim_us(&self) -> f64 {
        self.sim_ns as f64 / 1e3
    }

    /// The `energy_j` every bench reports.
    pub fn energy_j(&self) -> f64 {
        self.energy_pj as f64 / PJ_PER_J
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nandkit_flash::{BlockAddr, Flash};

    #[test]
    fn a_span_costs_its_operations_not_its_idle_time() {
        let config = nandkit_flash::preset("smallblock-64m").unwrap();
        let erase_pj = config.energy.erase_pj;
        let erase_ns = config.timing.erase_ns;
        let ram = nandkit_flash::FlashDevice::ram(config).unwrap();
        let mut dev = nandkit_flash::StripedFlash::new(ram);
        let start = Mark::of_device(&mut dev);
        dev.erase_block(BlockAddr::new(0, 100)).unwrap();
        dev.advance_clock_ns(1_000_000);
        let spent = start.to_device(&mut dev);
        assert_eq!(spent.sim_ns, erase_ns + 1_000_000);
        // 3.3 V x 25 mA x 2 ms = 165 uJ, whatever the clock did afterwards.
        assert_eq!(spent.energy_pj, erase_pj);
        assert!((spent.energy_j() - 165e-6).abs() < 1e-15, "{spent:?}");
    }
}
