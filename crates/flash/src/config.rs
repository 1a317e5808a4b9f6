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
    /// A file image keeps each chip in a file of its own (chip 0 in the image file, chip k
    /// in `IMAGE.chip<k>`), so one chip can be removed or replaced: arrays with parity.
    pub chip_files: bool,
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
    #[serde(default)]
    chip_files: bool,
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
            chip_files: s.chip_files,
        }
    }
}

impl DeviceConfig {
    /// How many times the spare area of a page may be programmed per erase, the page's own
    /// program included (the datasheets' NOP). Small-page SLC parts allow 2 for the spare
    /// (e.g. Samsung K9F1208: main array 1, spare array 2), which is what YAFFS1's deletion
    /// marker relies on; large-page SLC parts allow 4 partial programs of a page; MLC and
    /// TLC cells allow none.
    pub fn spare_programs(&self) -> u32 {
        match self.cell {
            crate::wear::CellType::Slc if self.geometry.page_size_bytes <= 512 => 2,
            crate::wear::CellType::Slc => 4,
            _ => 1,
        }
    }

    /// Checks that the geometry is valid and agrees with the ECC: its `oob_ecc_bytes` is
    /// either 0 (no stored ECC, as in older images) or one set of the ECC's check bytes per
    /// whole data codeword of a page. The wear and bit-error parameters must be in their
    /// ranges: they are probabilities and counts, and a sidecar may have been edited.
    pub fn validate(&self) -> Result<(), FlashError> {
        self.geometry.validate()?;
        self.validate_model()?;
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

    fn validate_model(&self) -> Result<(), FlashError> {
        let bad = |why: String| Err(FlashError::InvalidModel(why));
        let (w, e) = (&self.wear, &self.ecc);
        // A raw bit error rate above one half is no longer an error rate: the bits would
        // carry less than nothing.
        for (name, v) in [
            ("rber_fresh", e.rber_fresh),
            ("rber_at_endurance", e.rber_at_endurance),
        ] {
            if !(0.0..=0.5).contains(&v) {
                return bad(format!("{name} is {v}; a raw bit error rate is 0..=0.5"));
            }
        }
        if !(0.0..1.0).contains(&w.factory_bad_fraction) {
            return bad(format!(
                "factory_bad_fraction is {}; it is a fraction of the blocks, 0 up to (not including) 1",
                w.factory_bad_fraction
            ));
        }
        if !(w.endurance_spread.is_finite() && w.endurance_spread >= 0.0) {
            return bad(format!(
                "endurance_spread is {}; it is extra life as a fraction of the rating, 0 or more",
                w.endurance_spread
            ));
        }
        if w.endurance_cycles == 0 {
            return bad("endurance_cycles is 0; a block must survive at least one erase".into());
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

    #[test]
    fn wear_and_error_rates_out_of_range_are_refused_with_their_name() {
        let ok = crate::preset("tiny").unwrap();
        ok.validate().unwrap();
        type Spoil = fn(&mut DeviceConfig);
        let cases: [(&str, Spoil); 7] = [
            ("rber_fresh", |c| c.ecc.rber_fresh = -1e-9),
            ("rber_fresh", |c| c.ecc.rber_fresh = f64::NAN),
            ("rber_at_endurance", |c| c.ecc.rber_at_endurance = 2.0),
            ("factory_bad_fraction", |c| {
                c.wear.factory_bad_fraction = 1.0
            }),
            ("factory_bad_fraction", |c| {
                c.wear.factory_bad_fraction = -0.1
            }),
            ("endurance_spread", |c| {
                c.wear.endurance_spread = f64::INFINITY
            }),
            ("endurance_cycles", |c| c.wear.endurance_cycles = 0),
        ];
        for (name, spoil) in cases {
            let mut c = ok.clone();
            spoil(&mut c);
            match c.validate() {
                Err(FlashError::InvalidModel(why)) => assert!(why.contains(name), "{why}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
