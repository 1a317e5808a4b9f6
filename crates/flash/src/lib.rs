//! nandkit-flash: a NAND flash device simulator you can trust.
//!
//! Layers, bottom up:
//! - [`backend`]: where the bits live (RAM, or a nanddump-layout file image with a sidecar).
//! - [`chip`]: one chip's rules (program erased pages in order, erase whole blocks, no bad
//!   blocks), wear, bit errors behind ECC (check bytes stored in the OOB), torn operations,
//!   and its simulated clock.
//! - [`executor`]: who runs a batch: in the caller's thread, or one worker thread per chip.
//! - [`device`]: p chips behind the [`Flash`] trait, with the caller's clock and power rail.
//! - [`striped`]: MA's round-robin striping of p chips into one wide device.
//!
//! Simulated time is deterministic: each chip starts an operation at max(issue time, its
//! `busy_until`) and stays busy for the latency plus bus transfer. Every random choice (bad
//! blocks, lifetimes, bit errors, how a cut op tears) comes from the device seed. Each
//! operation also spends its [`energy`], counted per chip next to the time.

pub mod backend;
pub mod chip;
pub mod command;
pub mod config;
pub mod device;
pub mod ecc;
pub mod energy;
pub mod error;
pub mod executor;
pub mod geometry;
pub mod host_cost;
pub mod power;
pub mod preset;
pub mod stats;
pub mod striped;
pub mod timing;
pub mod ubi;
mod verified;
pub mod wear;

pub use command::{Command, Completion, Reply};
pub use config::DeviceConfig;
pub use device::{BlockInfo, DeviceOptions, Flash, FlashDevice};
pub use ecc::{EccModel, EccReport};
pub use energy::Energy;
pub use error::FlashError;
pub use executor::ExecutorKind;
pub use geometry::{BlockAddr, Geometry, PageAddr, OOB_BBM_BYTES};
pub use host_cost::HostCost;
pub use power::PowerCut;
pub use preset::{preset, presets, Preset, DEFAULT_PRESET};
pub use stats::{ChipStats, DeviceStats};
pub use striped::StripedFlash;

/// A simulated array as a file system uses it: its chips striped into one device.
pub type StripedDevice = StripedFlash<FlashDevice>;
pub use timing::Timing;
pub use wear::{CellType, WearModel};
