//! nandkit-nvram: a byte-addressable non-volatile RAM (FeRAM, PRAM) for MiNV, the design
//! that keeps all file system metadata in NVRAM and only file data on flash.
//!
//! Layers, bottom up:
//! - [`backend`]: where the bytes live (a `Vec`, or a memory-mapped file image).
//! - [`volatile`]: which stored words are not yet durable, and what a crash makes of them.
//! - [`power`]: counts persist points and decides at which one the power fails.
//! - [`device`]: [`Nvram`], the byte region with explicit [`Nvram::persist`], its simulated
//!   clock, energy meter and counters.
//!
//! The durability contract is the one persistent-memory code is written against:
//! - a store is visible to later reads at once but is *volatile* until a persist (flush +
//!   fence) covers it;
//! - a crash keeps, drops or tears every volatile 8-byte word, chosen from a seed; only an
//!   aligned 8-byte store ([`Nvram::write_u64`]) is failure-atomic.
//!
//! Time is simulated: the NVRAM knows nothing of flash, it only adds up what its accesses
//! cost, and its owner moves the flash device's clock by [`Nvram::take_elapsed_ns`].
//!
//! Bytes in use are not tracked here: the NVRAM has no idea which bytes hold live
//! structures, only the allocator that hands them out does. The file system's allocator
//! reports them, next to [`Nvram::size_bytes`], for the space model (`nandkit-models`).

pub mod backend;
pub mod config;
pub mod cost;
pub mod device;
pub mod error;
pub mod power;
pub mod preset;
pub mod stats;
pub mod volatile;

pub use config::NvramConfig;
pub use cost::{NvramEnergy, NvramTiming, WORD_BYTES};
pub use device::Nvram;
pub use error::NvramError;
pub use power::PowerCut;
pub use preset::{preset, presets, Preset, DEFAULT_PRESET};
pub use stats::NvramStats;
pub use volatile::CrashReport;
