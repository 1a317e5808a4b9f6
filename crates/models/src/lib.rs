//! nandkit-models: closed-form models from the papers, no I/O.
//!
//! Each module is one paper's arithmetic, with the equation numbers it implements in its docs,
//! so a figure nandkit prints can be traced to the page it came from:
//! - [`cleaning_cost`]: the MODA paper's block cleaning cost (equation 2) from utilization,
//!   invalidity and uniformity, and the LFS write cost it starts from (equation 1).
//! - [`nvram_space`]: the MiNV paper's NVRAM space requirement (equations 1-4).
//! - [`lifetime`]: a chip's life under a workload, from measured erases, and the closed
//!   form for even wear (ours, not a paper's).
//!
//! Inputs are validated and rejected with a [`ModelError`] rather than turned into NaN or
//! infinite figures.

pub mod cleaning_cost;
mod error;
pub mod lifetime;
pub mod nvram_space;

pub use cleaning_cost::{cleaning_cost, lfs_write_cost, CleaningCost, CleaningCostInput};
pub use error::ModelError;
pub use lifetime::{overwrite_years, project, Lifetime};
pub use nvram_space::{nvram_space, nvram_space_uniform, NvramConstants, NvramSpace, SavedState};
