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

/// Runs `nandkit bench ARGS --json` and parses its one JSON object; stderr must stay empty
/// (progress bars never go to a pipe, and JSON output is alone on stdout).
pub fn bench_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = nandkit(&all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

/// A number field of a JSON row.
pub fn f(r: &serde_json::Value, field: &str) -> f64 {
    r[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing or not a number in {r}"))
}

/// An integer field of a JSON row.
pub fn u(r: &serde_json::Value, field: &str) -> u64 {
    r[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} missing or not an integer in {r}"))
}
