//! Wear: how many program/erase cycles a block survives before it goes bad.

use serde::{Deserialize, Serialize};

/// Cell technology. It sets the default endurance and how fast raw bit errors grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    /// One bit per cell.
    Slc,
    /// Two bits per cell.
    Mlc,
    /// Three bits per cell.
    Tlc,
}

impl CellType {
    /// Rated program/erase cycles per block, the usual datasheet figure for the type.
    pub fn rated_endurance_cycles(self) -> u32 {
        match self {
            CellType::Slc => 100_000,
            CellType::Mlc => 10_000,
            CellType::Tlc => 3_000,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CellType::Slc => "SLC",
            CellType::Mlc => "MLC",
            CellType::Tlc => "TLC",
        }
    }
}

/// When blocks wear out.
///
/// Each block gets its own limit, drawn once from the device seed, between the rated
/// endurance and `rated * (1 + spread)`: real blocks outlive the datasheet figure by
/// varying amounts. At or past its limit an erase fails (the block is then bad) and so
/// does any program into it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WearModel {
    /// Rated program/erase cycles per block.
    pub endurance_cycles: u32,
    /// Extra life a block may have beyond the rating, as a fraction of it (0.5 = up to 50%).
    pub endurance_spread: f64,
    /// Fraction of blocks that are bad when the device leaves the factory (datasheets allow
    /// up to about 2%). Block 0 of each chip is always good, as datasheets guarantee.
    pub factory_bad_fraction: f64,
}

impl WearModel {
    pub fn for_cell(cell: CellType) -> Self {
        Self {
            endurance_cycles: cell.rated_endurance_cycles(),
            endurance_spread: 0.5,
            factory_bad_fraction: 0.005,
        }
    }

    /// The erase count at which this block fails, given a uniform draw `u` in [0, 1).
    pub fn block_limit(&self, u: f64) -> u32 {
        let extra = f64::from(self.endurance_cycles) * self.endurance_spread * u;
        self.endurance_cycles.saturating_add(extra as u32)
    }
}
