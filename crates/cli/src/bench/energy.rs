//! Flash energy for the benches: E = V x I x t over the time the chips are busy.
//!
//! The model: a NAND chip draws its active current while it reads, programs, erases or
//! transfers, and nothing worth counting otherwise (standby current is microamps). With
//! ONFI-class supply (3.3 V) and an active current of 25 mA (the typical-to-maximum
//! ICC1/ICC2/ICC3 range of SLC/MLC datasheets is 15-35 mA), every busy second costs
//! 82.5 mJ, so each operation costs its latency times 82.5 mW: a 200 us program
//! 16.5 uJ, a 2 ms erase 165 uJ. These are typical values, not measurements and not from
//! the papers; the ratios between profiles (which is what a bench compares) depend only
//! on the busy times the simulator counts.

/// Supply voltage, volts.
pub const VCC_V: f64 = 3.3;
/// Active current while busy, amperes.
pub const ICC_A: f64 = 0.025;

/// Joules the device's chips have spent so far (busy time of every chip).
pub fn flash_energy_j(dev: &mut nandkit_flash::StripedDevice) -> f64 {
    let busy_ns: u64 = dev.stats().chips.iter().map(|c| c.busy_ns).sum();
    busy_ns as f64 * 1e-9 * VCC_V * ICC_A
}

#[cfg(test)]
mod tests {
    use super::*;
    use nandkit_flash::Flash;

    #[test]
    fn an_erase_costs_its_time_at_active_power() {
        let config = nandkit_flash::preset("smallblock-64m").unwrap();
        let erase_ns = config.timing.erase_ns;
        let ram = nandkit_flash::FlashDevice::ram(config).unwrap();
        let mut dev = nandkit_flash::StripedFlash::new(ram);
        let before = flash_energy_j(&mut dev);
        dev.erase_block(nandkit_flash::BlockAddr::new(0, 100))
            .unwrap();
        let spent = flash_energy_j(&mut dev) - before;
        let want = erase_ns as f64 * 1e-9 * VCC_V * ICC_A;
        assert!((spent - want).abs() < want * 1e-9, "{spent} vs {want}");
    }
}
