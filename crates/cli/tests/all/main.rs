//! All of this crate's integration tests, one binary: linking one test
//! executable instead of one per file is most of what a fresh `cargo test` costs.
mod bench;
mod bench_queue;
mod cli;
mod common;
mod compare;
mod fs_cli;
mod fuse_acl;
mod fuse_cache_view;
mod fuse_conformance;
mod fuse_image_lock;
mod fuse_mount;
mod fuse_punch;
mod fuse_remount;
mod fuse_semantics;
mod fuse_writeback;
mod minv_cli;
mod model_cmd;
mod parity_cli;
mod reproduce;
mod ubi_tools;
mod ubifs_tools;
