//! All of this crate's integration tests, one binary: linking one test
//! executable instead of one per file is most of what a fresh `cargo test` costs.
mod littlefs;
