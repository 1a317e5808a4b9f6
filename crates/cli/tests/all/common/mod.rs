//! Running the `nandkit` binary from the CLI tests. Each test binary uses part of this.
#![allow(dead_code)]

use std::process::{Command, Output};

pub mod fuse;

/// Runs `nandkit ARGS` without backtraces, so error messages are what a user sees.
pub fn nandkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nandkit"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("run nandkit")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
