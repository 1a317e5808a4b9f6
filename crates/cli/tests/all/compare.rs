//! `nandkit compare`: every design replays one workload; the report's rows, page and JSON.

use crate::common::{bench_json, f, nandkit, stderr, stdout};

/// A 1 MiB file overwritten in synced 4 KiB writes scattered over it, one a millisecond,
/// with a reader and a second file coming and going: on 4 MiB of tiny, enough for every
/// design's cleaner to erase.
fn overwrite_trace() -> String {
    let mut csv = String::from("arrival_us,op,file,offset,size\n");
    for i in 0..600u64 {
        let t = i * 1000;
        csv += &format!("{t},write,data,{},4096\n", (i * 7919 % 256) * 4096);
        if i % 100 == 0 {
            csv += &format!("{t},create,log,0,0\n{t},write,log,0,10000\n{t},read,data,0,65536\n");
            csv += &format!("{t},delete,log,0,0\n");
        }
    }
    csv
}

#[test]
fn every_design_is_measured_from_the_replay_bench_trace_runs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    std::fs::write(&trace, overwrite_trace()).unwrap();
    let trace = trace.to_str().unwrap();
    let out_dir = dir.path().join("report");
    let out = nandkit(&[
        "compare",
        "--trace",
        trace,
        "-g",
        "tiny",
        "--device-size",
        "4MiB",
        "--profiles",
        "littlefs,yaffs,yaffs1,moda,minv,ma",
        "--cuts",
        "3",
        "--out",
        out_dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["design"].as_str().unwrap()).collect();
    // The report's order, whatever order --profiles gave.
    assert_eq!(names, ["yaffs", "yaffs1", "moda", "minv", "ma", "littlefs"]);
    assert!(rows[1]["status"]
        .as_str()
        .unwrap()
        .starts_with("not run: YAFFS1"));
    let requests = report["requests"].as_u64().unwrap();
    for r in rows.iter().filter(|r| r["status"] == "ok") {
        let name = &r["design"];
        assert_eq!(r["requests"].as_u64(), Some(requests), "{name}");
        assert!(f(r, "write_amplification") >= 1.0, "{name}");
        assert!(
            f(r, "flash_erases") > 0.0,
            "{name}: the trace makes the cleaner erase"
        );
        assert!(f(r, "p50_ms") <= f(r, "p99_ms") && f(r, "p99_ms") <= f(r, "max_ms"));
        assert_eq!(r["latency_cdf"].as_array().unwrap().last().unwrap()[1], 1.0);
        assert!(f(r, "mount_clean_ms") > 0.0, "{name}");
        assert!(f(r, "ram_after_mount_bytes") > 0.0, "{name}");
        let cut = &r["power_cut"];
        assert_eq!(cut["cuts"], 3, "{name}");
        for k in ["mounted", "data_kept", "fsck_clean"] {
            assert_eq!(cut[k], 3, "{name} {k}: {}", cut["problems"]);
        }
        assert!(f(cut, "mount_max_ms") > 0.0, "{name}");
        // Erases over the blocks add up to the histogram.
        let hist: u64 = r["wear_histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_u64().unwrap() * p[1].as_u64().unwrap())
            .sum();
        assert_eq!(hist as f64, f(r, "flash_erases"), "{name}");
    }
    // The same replay as bench trace: the same responses and erases, to the nanosecond.
    for (design, ubi) in [("yaffs", "off"), ("ma", "on")] {
        let row = rows.iter().find(|r| r["design"] == design).unwrap();
        let b = bench_json(&[
            "trace",
            "--trace-file",
            trace,
            "-g",
            "tiny",
            "--device-size",
            "4MiB",
            "--ubi",
            ubi,
        ]);
        assert_eq!(
            f(row, "mean_response_ms"),
            f(&b, "mean_response_ms"),
            "{design}"
        );
        assert_eq!(
            f(row, "p99_response_ms"),
            f(&b, "p99_response_ms"),
            "{design}"
        );
        assert_eq!(f(row, "flash_erases"), f(&b, "flash_erases"), "{design}");
        assert_eq!(
            f(row, "years_first_block"),
            f(&b, "years_first_block"),
            "{design}"
        );
    }
    // The page: the table with bests marked, both plots; the JSON beside it.
    let html = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for text in [
        "Request latency CDF",
        "Wear: blocks by erases",
        "class=\"best\"",
        "littlefs",
    ] {
        assert!(html.contains(text), "{text} missing from the page");
    }
    assert_eq!(html.matches("<svg").count(), 2);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("compare.json")).unwrap()).unwrap();
    assert_eq!(json, report);
}

#[test]
fn a_papers_workload_runs_by_name_and_the_table_says_who_wins() {
    let dir = tempfile::tempdir().unwrap();
    let out = nandkit(&[
        "compare",
        "--workload",
        "camera",
        "-g",
        "tiny",
        "--profiles",
        "yaffs,mnfs",
        "--cuts",
        "1",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for s in [
        "workload camera (MODA paper's workload)",
        "yaffs ",
        "mnfs ",
        "* best of the column",
        "lowest p99 latency, ms:",
        "ok 1/1",
        "index.html",
    ] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().to_str().unwrap();
    for (args, says) in [
        (
            vec!["--workload", "camera", "--profiles", "zfs"],
            "unknown design 'zfs' (known: yaffs",
        ),
        (
            vec!["--workload", "tetris"],
            "unknown workload 'tetris' (known: camera",
        ),
        (
            vec!["--workload", "camera", "--years-of", "0"],
            "--years-of must be",
        ),
        (
            vec!["--trace", "/nonexistent.csv"],
            "reading /nonexistent.csv",
        ),
    ] {
        let mut all = vec!["compare", "-g", "tiny", "--out", out_dir];
        all.extend(args);
        let out = nandkit(&all);
        assert!(!out.status.success(), "{all:?}");
        assert!(stderr(&out).contains(says), "{all:?}: {}", stderr(&out));
    }
}
