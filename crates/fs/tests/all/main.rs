//! All of this crate's integration tests, one binary: linking one test
//! executable instead of one per file is most of what a fresh `cargo test` costs.
mod array;
mod checkpoint_space;
mod common;
mod corrupt;
mod corrupt_targeted;
mod crash;
mod crash_overwrite_unlink;
mod crash_punch;
mod damage_campaign;
mod enospc;
mod minv;
mod mnfs;
mod model;
mod namespace_stress;
mod object_numbers;
mod posix;
mod punch;
mod shared_read;
mod smoke;
mod space;
mod truncate;
mod ubifs;
mod wear_out;
mod write_counts;
mod yaffs1;
