//! Everything that defines a simulated device. Stored in a file image's sidecar so an image
//! reopens as exactly the device that wrote it.

use serde::{Deserialize, Serialize};

use crate::ecc::EccModel;
use crate::energy::Energy;
use crate::error::FlashError;
use crate::geometry::Geometry;
use crate::timing::Timing;
use crate::wear::{CellType, WearModel};

/// A complete device description: shape, speed, reliability and the seed behind every random
/// choice the device makes (factory bad blocks, block lifetimes, bit errors, torn writes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredConfig")]
pub struct DeviceConfig {
    /// Preset this device came from (or a free-form label).
    pub name: String,
    pub geometry: Geometry,
    pub timing: Timing,
    /// Energy of each operation, per chip.
    pub energy: Energy,
    pub cell: CellType,
    pub wear: WearModel,
    pub ecc: EccModel,
    /// Seed for every random draw the device makes. Same seed, same device, same faults.
    pub seed: u64,
}

/// A configuration as a sidecar stores it. Sidecars written before the energy model have
/// no `energy`; they get the presets' rule applied to their own timing, so an old image
/// reports the energy a new one of the same device would.
#[derive(Deserialize)]
struct StoredConfig {
    name: String,
    geometry: Geometry,
    timing: Timing,
    #[serde(default)]
    energy: Option<Energy>,
    cell: CellType,
    wear: WearModel,
    ecc: EccModel,
    seed: u64,
}

impl From<StoredConfig> for DeviceConfig {
    fn from(s: StoredConfig) -> Self {
        Self {
            energy: s.energy.unwrap_or_else(|| Energy::typical(&s.timing)),
            name: s.name,
            geometry: s.geometry,
            timing: s.timing,
            cell: s.cell,
            wear: s.wear,
            ecc: s.ecc,
            seed: s.seed,
        }
    }
}

impl DeviceConfig {
    /// Checks that the geometry is valid and agrees with the ECC: its `oob_ecc_bytes` is
    /// either 0 (no stored ECC, as in older images) or one set of the ECC's check bytes per
    /// whole data codeword of a page.
    pub fn validate(&self) -> Result<(), FlashError> {
        self.geometry.validate()?;
        let (g, ecc) = (&self.geometry, &self.ecc);
        if g.oob_ecc_bytes == 0 {
            return Ok(());
        }
        if ecc.codeword_bytes == 0
            || !g.page_size_bytes.is_multiple_of(ecc.codeword_bytes)
            || ecc.check_bytes == 0
        {
            return Err(FlashError::InvalidGeometry(format!(
                "{} OOB ECC bytes need whole {}-byte codewords per {}-byte page with check bytes \
                 ({} per codeword); use 0 OOB ECC bytes for no stored ECC",
                g.oob_ecc_bytes, ecc.codeword_bytes, g.page_size_bytes, ecc.check_bytes
            )));
        }
        let want = ecc.oob_ecc_bytes(g.page_size_bytes);
        if g.oob_ecc_bytes != want {
            return Err(FlashError::InvalidGeometry(format!(
                "{} OOB ECC bytes, but {} codewords of {} check bytes take {want} \
                 (or 0 for no stored ECC)",
                g.oob_ecc_bytes,
                g.page_size_bytes / ecc.codeword_bytes,
                ecc.check_bytes
            )));
        }
        Ok(())
    }

    /// The same device with its capacity split over `chips` chips.
    pub fn with_chips(mut self, chips: u32) -> Result<Self, crate::FlashError> {
        self.geometry = self.geometry.split_over(chips)?;
        Ok(self)
    }

    /// The same device with a different total capacity in bytes.
    pub fn with_total_bytes(mut self, total_bytes: u64) -> Result<Self, crate::FlashError> {
        self.geometry = self.geometry.resized(total_bytes)?;
        Ok(self)
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Data codewords per page plus one for the OOB area.
    pub(crate) fn codewords_per_page(&self) -> u32 {
        self.geometry
            .page_size_bytes
            .div_ceil(self.ecc.codeword_bytes.max(1))
            + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_without_energy_get_the_typical_energy_of_their_timing() {
        let config = crate::preset("smallblock-64m").unwrap();
        let mut json = serde_json::to_value(&config).unwrap();
        assert!(json.get("energy").is_some());
        let round_trip: DeviceConfig = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(round_trip, config);
        // As a sidecar written before the energy model stored it.
        json.as_object_mut().unwrap().remove("energy");
        let old: DeviceConfig = serde_json::from_value(json).unwrap();
        assert_eq!(old.energy, Energy::typical(&config.timing));
        assert_eq!(old, config);
    }
}
