//! `nandkit model`: the JSON contract of the closed-form models and their input errors.

use crate::common::*;
use serde_json::Value;

/// The MODA paper's Table 1 Fax YAFFS row: its partition (3706 blocks of 32 pages), the
/// measured u, i, p, and the operation times the paper measured above MTD.
const FAX_YAFFS: [&str; 18] = [
    "model",
    "cleaning-cost",
    "--blocks",
    "3706",
    "--pages-per-block",
    "32",
    "--u",
    "0.86",
    "--i",
    "0.0087",
    "--p",
    "0.73",
    "--read-us",
    "200",
    "--write-us",
    "1030",
    "--erase-us",
    "1740",
];

fn json_of(args: &[&str]) -> Value {
    let out = nandkit(args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn near(value: &Value, want: f64, tolerance: f64) -> bool {
    (value.as_f64().unwrap() - want).abs() <= tolerance
}

#[test]
fn cleaning_cost_json_contract() {
    let r = json_of(&[&FAX_YAFFS[..], &["--json"]].concat());
    // The paper prints 1024 erases, 31710 copies and 40.74 s for this row.
    assert!(near(&r["erases"], 1024.16, 0.01), "{r}");
    assert!(near(&r["copies"], 31699.16, 0.01), "{r}");
    assert!(near(&r["seconds"], 40.772, 0.001), "{r}");
    let (erase_s, copy_s) = (&r["erase_seconds"], &r["copy_seconds"]);
    assert!(near(erase_s, 1.782, 0.001), "{r}");
    assert!(near(
        &r["seconds"],
        erase_s.as_f64().unwrap() + copy_s.as_f64().unwrap(),
        1e-9
    ));
    let inputs = &r["inputs"];
    assert_eq!(inputs["blocks"], 3706);
    assert_eq!(inputs["pages_per_block"], 32);
    for (key, value) in [("u", 0.86), ("i", 0.0087), ("p", 0.73), ("read_us", 200.0)] {
        assert_eq!(inputs[key].as_f64(), Some(value), "{key}: {r}");
    }
    assert_eq!(inputs["write_us"].as_f64(), Some(1030.0));
    assert_eq!(inputs["erase_us"].as_f64(), Some(1740.0));
}

#[test]
fn cleaning_cost_table_names_units() {
    let out = nandkit(&FAX_YAFFS[..]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "erases            1024.2 blocks",
        "copies            31699.2 pages",
        "seconds           40.772 s",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
}

#[test]
fn invalid_input_fails_with_a_clear_message() {
    // Each case changes one flag of the Fax row.
    for (flag, value, message) in [
        ("--u", "1.5", "utilization u = 1.5 is outside [0, 1]"),
        (
            "--i",
            "0.2",
            "invalidity i = 0.2 is more than 1 - u with u = 0.86",
        ),
        // A negative number reaches the model rather than being taken for a flag.
        ("--read-us", "-200", "read time = -200 us is not a time"),
        ("--blocks", "0", "blocks must be at least 1"),
    ] {
        let mut args = FAX_YAFFS;
        let at = args.iter().position(|a| *a == flag).unwrap() + 1;
        args[at] = value;
        let out = nandkit(&args);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}");
        assert!(out.stdout.is_empty(), "{flag} {value}");
        assert!(
            stderr(&out).contains(message),
            "{flag} {value}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn lfs_write_cost_contract() {
    let r = json_of(&["model", "lfs-write-cost", "--u", "0.5", "--json"]);
    assert_eq!(r["u"].as_f64(), Some(0.5));
    assert_eq!(r["write_cost"].as_f64(), Some(4.0));
    let full = nandkit(&["model", "lfs-write-cost", "--u", "1"]);
    assert_eq!(full.status.code(), Some(1));
    assert!(
        stderr(&full).contains("unbounded at u = 1"),
        "{}",
        stderr(&full)
    );
}

/// The MiNV space model's contract: Table 2 cells through the command line (the model's
/// own tests check every cell), a blank cell as a clear error, and no silent default for
/// structure sizes.
#[test]
fn nvram_space_json_contract() {
    for (files, size, kib) in [
        ("16", "2MiB", 317),
        ("65536", "512", 17955),
        ("1", "32MiB", 315),
        ("256", "128KiB", 350),
    ] {
        let v = json_of(&[
            "model",
            "nvram-space",
            "--flash",
            "32MiB",
            "--files",
            files,
            "--file-size",
            size,
            "--paper-constants",
            "--json",
        ]);
        assert_eq!(v["kib"], kib, "{files} x {size}: {v}");
        let sum = ["fixed_bytes", "inode_bytes", "offset_bytes"]
            .iter()
            .map(|k| v[k].as_u64().unwrap())
            .sum::<u64>();
        assert_eq!(v["bytes"].as_u64().unwrap(), sum);
    }
    let out = nandkit(&[
        "model",
        "nvram-space",
        "--flash",
        "32MiB",
        "--files",
        "65536",
        "--file-size",
        "2KiB",
        "--paper-constants",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("do not fit"), "{}", stderr(&out));
    let out = nandkit(&[
        "model",
        "nvram-space",
        "--flash",
        "32MiB",
        "--files",
        "1",
        "--file-size",
        "1",
        "--json",
    ]);
    // Without --paper-constants: the minv profile's own sizes (the fs tests check them
    // against NVRAM use on real images).
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["constants"], "nandkit-minv");
    assert_eq!(v["sizes"]["offsets_per_struct"], 60);
}

/// `--grid`: Table 2's whole layout, 9 file sizes by 9 counts, blanks as null, the same
/// numbers as the one-cell form.
#[test]
fn nvram_space_grid_is_table_2() {
    let v = json_of(&[
        "model",
        "nvram-space",
        "--flash",
        "32MiB",
        "--grid",
        "--paper-constants",
        "--json",
    ]);
    let cells = v.as_array().expect("an array of cells");
    assert_eq!(cells.len(), 81);
    let cell = |size: u64, files: u64| {
        cells
            .iter()
            .find(|c| c["file_size_bytes"] == size && c["files"] == files)
            .unwrap_or_else(|| panic!("{files} x {size}"))["kib"]
            .clone()
    };
    assert_eq!(cell(512, 65536), 17955);
    assert_eq!(cell(2 << 20, 16), 317);
    assert_eq!(cell(32 << 20, 1), 315);
    assert!(cell(32 << 20, 4).is_null(), "4 files of 32 MiB do not fit");
    assert_eq!(cells.iter().filter(|c| c["kib"].is_null()).count(), 36);
    // And --grid takes no single cell's flags.
    let out = nandkit(&[
        "model",
        "nvram-space",
        "--flash",
        "32MiB",
        "--grid",
        "--files",
        "4",
    ]);
    assert!(!out.status.success());
}

/// MiNV Figure 4 from the command line: its table's 1 GB cells, and NVRAM growing with
/// capacity in every case.
#[test]
fn nvram_space_capacity_sweep_is_figure_4() {
    let v = json_of(&[
        "model",
        "nvram-space",
        "--capacity-sweep",
        "--paper-constants",
        "--json",
    ]);
    let rows = v.as_array().expect("rows");
    let kib = |case: &str, flash: u64| {
        rows.iter()
            .find(|r| r["case"] == case && r["flash_bytes"] == flash)
            .unwrap_or_else(|| panic!("{case} {flash}"))["kib"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(kib("best", 1 << 30), 9987);
    assert_eq!(kib("mp3", 1 << 30), 10022);
    assert_eq!(kib("best", 8 << 30), 79875);
    for case in ["worst", "best", "mp3", "photo"] {
        let v: Vec<u64> = rows
            .iter()
            .filter(|r| r["case"] == case)
            .map(|r| r["kib"].as_u64().unwrap())
            .collect();
        assert!(v.windows(2).all(|w| w[0] < w[1]), "{case}: {v:?}");
    }
}

/// MODA equation 2 swept: 21 values of one parameter, a grid of two, u + i never past 1.
#[test]
fn cleaning_cost_sweeps() {
    let base = [
        "model",
        "cleaning-cost",
        "--blocks",
        "4096",
        "--pages-per-block",
        "32",
        "--u",
        "0.5",
        "--i",
        "0.1",
        "--p",
        "0.5",
        "--read-us",
        "15",
        "--write-us",
        "200",
        "--erase-us",
        "2000",
        "--json",
        "--sweep",
    ];
    let one = json_of(&[&base[..], &["p"]].concat());
    let rows = one.as_array().unwrap();
    assert_eq!(rows.len(), 21);
    let secs: Vec<f64> = rows
        .iter()
        .map(|r| r["seconds"].as_f64().unwrap())
        .collect();
    assert!(
        secs.windows(2).all(|w| w[1] < w[0]),
        "uniformity lowers the cost"
    );
    let grid = json_of(&[&base[..], &["u,p"]].concat());
    let rows = grid.as_array().unwrap();
    // u runs to 0.9 with i = 0.1: 19 values of u by 21 of p.
    assert_eq!(rows.len(), 19 * 21);
    assert!(rows.iter().all(|r| r["inputs"]["u"].as_f64().unwrap()
        + r["inputs"]["i"].as_f64().unwrap()
        <= 1.0 + 1e-9));
}

/// MiNV Figure 5 from the command line: the NVRAM grows as metadata files take more of
/// the flash, and 1% of 1 GB comes within 1% of the paper's figures.
#[test]
fn nvram_space_mix_sweep_is_figure_5() {
    let v = json_of(&[
        "model",
        "nvram-space",
        "--flash",
        "1GiB",
        "--mix-sweep",
        "--paper-constants",
        "--json",
    ]);
    let rows = v.as_array().expect("rows");
    for (content, paper) in [("mp3", 15667.0), ("photo", 16223.0)] {
        let kib: Vec<f64> = rows
            .iter()
            .filter(|r| r["content"] == content)
            .map(|r| r["kib"].as_f64().unwrap())
            .collect();
        assert!(kib.windows(2).all(|w| w[0] < w[1]), "{content}: {kib:?}");
        let at1 = rows
            .iter()
            .find(|r| r["content"] == content && r["metadata_percent"] == 1.0)
            .unwrap()["kib"]
            .as_f64()
            .unwrap();
        assert!((at1 / paper - 1.0).abs() < 0.01, "{content}: {at1}");
    }
}
