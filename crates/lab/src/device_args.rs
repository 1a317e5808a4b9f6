//! Options every command that builds a device shares.

use anyhow::{bail, Context};
use clap::Args;
use nandkit_flash::{preset, DeviceConfig, DEFAULT_PRESET};

#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// Device preset (see `nandkit presets`).
    #[arg(long, short = 'g', default_value = DEFAULT_PRESET, value_name = "NAME")]
    pub geometry: String,
    /// Split the device's capacity over P chips (MA: 1 GiB as 1, 2 or 4 chips).
    #[arg(long, short = 'p', default_value_t = 1, value_name = "P")]
    pub chips: u32,
    /// Total capacity instead of the preset's, e.g. 128MiB (whole blocks on every chip).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub device_size: Option<u64>,
    /// Seed for the device's random draws (bad blocks, bit errors, torn writes).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl DeviceArgs {
    pub fn config(&self) -> anyhow::Result<DeviceConfig> {
        if self.chips == 0 {
            bail!("--chips must be at least 1");
        }
        let mut config = preset(&self.geometry)?;
        if let Some(bytes) = self.device_size {
            config = config
                .with_total_bytes(bytes)
                .with_context(|| format!("--device-size {bytes} on preset {}", self.geometry))?;
        }
        if self.chips > 1 {
            config = config
                .with_chips(self.chips)
                .with_context(|| format!("--chips {}", self.chips))?;
        }
        if let Some(seed) = self.seed {
            config = config.with_seed(seed);
        }
        Ok(config)
    }

    /// `config` with the capacity split over `chips` instead of `--chips` (benches that
    /// sweep P, or compare against one chip).
    pub fn config_on(&self, chips: u32) -> anyhow::Result<DeviceConfig> {
        Self {
            chips,
            ..self.clone()
        }
        .config()
    }
}

/// The host cost `nandkit bench software-cost --no-sweep --repeat 9` measured for nandkit's
/// own code path (three runs on 2026-11-27, the README's machine: 2 cores; rounded middle
/// values of request 0.08-0.14 us, hand-off 2.63-2.81 us, page 1.78-1.81 us, device
/// 61-72 us): what `--software-cost calibrated` charges.
pub const CALIBRATED_SOFTWARE_COST: nandkit_flash::HostCost = nandkit_flash::HostCost {
    request_ns: 100,
    handoff_ns: 2_700,
    page_ns: 1_800,
    device_ns: 66_000,
};

/// Parses `--software-cost`: `0`, `calibrated`, or `request=US,handoff=US,page=US,device=US`.
pub fn parse_software_cost(text: &str) -> Result<nandkit_flash::HostCost, String> {
    match text.trim() {
        "calibrated" => Ok(CALIBRATED_SOFTWARE_COST),
        other => nandkit_flash::HostCost::parse(other),
    }
}

/// Parses sizes such as `4096`, `128MiB`, `1GiB`, `64MB`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    parse_size::parse_size(text)
        .map_err(|e| format!("'{text}' is not a size ({e}); try e.g. 128MiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_bytes("128MiB"), Ok(128 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert!(parse_bytes("lots").is_err());
    }
}
