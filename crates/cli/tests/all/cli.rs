//! The `nandkit` binary as a user runs it: exit codes, JSON contracts, error messages.

use crate::common::*;

#[test]
fn presets_lists_every_paper_device() {
    let out = nandkit(&["presets"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "slc-1g",
        "mlc-1g",
        "tlc-1g",
        "smallblock-64m",
        "smallblock-64m-mtd",
        "mnfs-128m",
        "mlc-8k",
        "tiny",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    let json = nandkit(&["presets", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let mlc = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "mlc-1g")
        .unwrap();
    assert_eq!(mlc["config"]["timing"]["program_ns"], 600_000);
    assert_eq!(mlc["total_bytes"], 1u64 << 30);
    // 3.3 V x 25 mA x 600 us, in picojoules, with where the figure comes from.
    assert_eq!(mlc["energy"]["program_pj"], 49_500_000);
    assert_eq!(mlc["energy"], mlc["config"]["energy"]);
    let source = mlc["energy_source"].as_str().unwrap();
    assert!(source.contains("typical values"), "{source}");
    for want in ["ENERGY", "49.5uJ", "typical values"] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }
}

#[test]
fn flash_bench_json_contract() {
    let out = nandkit(&[
        "flash-bench",
        "--geometry",
        "mlc-1g",
        "--chips",
        "4",
        "--bytes",
        "4MiB",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in ["programs_per_s", "reads_per_s", "erases_per_s"] {
        assert!(r[field].as_f64().unwrap() > 0.0, "{field}: {r}");
    }
    assert_eq!(r["parallel_speedup"].as_f64().unwrap(), 4.0);
    let checks = r["parallel"].as_array().unwrap();
    for c in checks {
        assert_eq!(c["speedup"].as_f64().unwrap(), c["chips"].as_f64().unwrap());
        assert_eq!(c["executors_agree"], true);
    }
    assert_eq!(checks.len(), 3);
}

#[test]
fn flash_bench_on_a_file_image() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("bench.img");
    let out = nandkit(&[
        "flash-bench",
        "--geometry",
        "tiny",
        "--backend",
        "file",
        "--image",
        image.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(image.exists());
    // A second run refuses to overwrite the image it was pointed at.
    let again = nandkit(&[
        "flash-bench",
        "--geometry",
        "tiny",
        "--backend",
        "file",
        "--image",
        image.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("bench.img"), "{}", stderr(&again));
}

#[test]
fn unknown_geometry_is_a_clear_error() {
    let out = nandkit(&["flash-bench", "--geometry", "floppy"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("unknown preset 'floppy'"), "{err}");
    assert!(err.contains("mlc-1g"), "{err}");
}

#[test]
fn impossible_chip_split_is_a_clear_error() {
    let out = nandkit(&["flash-bench", "--geometry", "tiny", "--chips", "3"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be split evenly over 3 chips"),
        "{}",
        stderr(&out)
    );
    let zero = nandkit(&["flash-bench", "--chips", "0"]);
    assert!(!zero.status.success());
}

#[test]
fn bad_flag_and_bad_size_are_rejected() {
    let out = nandkit(&["flash-bench", "--bogus"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--bogus"));
    let size = nandkit(&["flash-bench", "--device-size", "lots"]);
    assert!(!size.status.success());
    assert!(stderr(&size).contains("not a size"), "{}", stderr(&size));
    let odd = nandkit(&["flash-bench", "--geometry", "tiny", "--device-size", "1000"]);
    assert!(!odd.status.success());
    assert!(stderr(&odd).contains("whole number"), "{}", stderr(&odd));
}
