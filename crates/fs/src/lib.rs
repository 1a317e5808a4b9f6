//! nandkit-fs: one flash file system whose policies are pluggable (DESIGN.md, "fs").
//!
//! The four axes, each a trait or module with one file per implementation:
//! 1. metadata store: [`meta::MetadataStore`] (`meta/flash_log.rs`: headers in the log,
//!    `scan` and `checkpoint` at mount);
//! 2. data mapping: [`mapping::ChunkMap`] (`mapping/page_mapped.rs`), used by `file_io`;
//! 3. allocation: [`alloc::Allocator`] (`alloc/sequential.rs`);
//! 4. cleaning: [`clean::Cleaner`] (`clean/yaffs.rs`, `greedy.rs`, `cost_benefit.rs`).
//!
//! Crash rules: every page is self-describing and checked (tags CRC, the chip's ECC, the
//! data or record CRC); the newest copy (by serial or header version) wins; a torn page is
//! detected and ignored; `fsync` returns after the data and header reached flash;
//! cleaning copies valid pages before it erases. The on-flash format is in
//! docs/format.md.

pub mod alloc;
mod anchor;
mod atime;
mod batch;
pub mod block_placed;
pub mod blocks;
mod checkpoint;
pub mod clean;
mod cleaning;
pub mod clock;
pub mod config;
mod deletion_marks;
mod details;
mod device_cell;
pub mod error;
mod file_io;
mod floors;
pub mod format;
mod fs;
pub mod fsck;
mod fsck_data_owners;
mod holds;
pub mod inspect;
pub mod layout;
mod lazy;
mod links;
pub mod lost_found;
pub mod mapping;
pub mod meta;
mod namespace;
mod object;
mod payload;
mod punch;
mod read_path;
mod rebuild;
mod reserve;
mod reserve_table;
mod scan;
mod scan_damage;
mod scan_every_page;
mod scan_ibat;
mod seek;
mod touched;
pub mod types;
pub mod ubifs;
mod write_path;
mod xattr;

pub use clock::{Clock, CountingClock, SystemClock};
pub use config::{AllocParams, AllocatorKind, CleanerKind, FsConfig, PROFILES};
pub use error::{FsError, Result};
pub use fs::{AtimePolicy, FileSystem, FsStats, MountMethod, MountOptions};
pub use fsck::{FsckReport, SpaceAccount};
pub use namespace::NewObject;
pub use namespace::SYMLINK_MAX;
pub use types::*;
pub use xattr::XATTR_SIZE_MAX;
