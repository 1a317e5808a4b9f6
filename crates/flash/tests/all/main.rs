//! All of this crate's integration tests, one binary: linking one test
//! executable instead of one per file is most of what a fresh `cargo test` costs.
mod common;
mod ecc;
mod energy;
mod factory_bad;
mod file_image;
mod model;
mod oob_ecc;
mod parity;
mod power_loss;
mod rules;
mod spare_program;
mod striped;
mod timing;
mod ubi;
mod ubi_bad_input;
mod wear;
