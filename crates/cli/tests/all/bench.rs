//! `nandkit bench` as a user runs it, at tiny sizes: the JSON fields exist and are sane.
//! No timing thresholds: host speed depends on the machine.

use crate::common::*;

use serde_json::Value;

/// The fields every benchmark reports for its measured phase.
fn check_phase(r: &Value) {
    assert!(f(r, "sim_s") > 0.0, "{r}");
    assert!(f(r, "energy_j") > 0.0, "{r}");
    assert!(f(r, "host_s") > 0.0, "{r}");
    for field in [
        "flash_reads",
        "flash_oob_reads",
        "flash_erases",
        "pages_copied",
        "blocks_cleaned",
        "header_pages_written",
    ] {
        u(r, field);
    }
    let programs = u(r, "flash_programs");
    let user_pages = u(r, "user_pages");
    assert!(user_pages > 0 && programs >= user_pages, "{r}");
    assert_eq!(
        programs,
        u(r, "data_pages_written")
            + u(r, "header_pages_written")
            + u(r, "checkpoint_pages_written")
            + u(r, "summary_pages_written")
            + u(r, "anchor_pages_written")
            + u(r, "pages_copied")
            + u(r, "ubi_header_pages_written")
            + u(r, "ubi_pages_moved"),
        "every program is data, a header, a summary, a checkpoint or anchor page, a copy, \
         or UBI's: {r}"
    );
    let wa = f(r, "write_amplification");
    assert!(
        (wa - programs as f64 / user_pages as f64).abs() < 1e-9,
        "{r}"
    );
}

/// A phase's energy is exactly its flash operations at the preset's figures (as
/// `nandkit presets --json` gives them): (array) read, program and erase energy, plus the
/// bus energy of every byte moved.
fn check_phase_energy(r: &Value, geometry: &str) {
    let out = nandkit(&["presets", "--json"]);
    let presets: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = presets
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == geometry)
        .unwrap_or_else(|| panic!("preset {geometry}"));
    let e = &p["energy"];
    let g = &p["config"]["geometry"];
    let bus = u(e, "transfer_pj_per_byte");
    let (page, oob) = (u(g, "page_size_bytes"), u(g, "oob_size_bytes"));
    let want_pj = u(r, "flash_programs") * (u(e, "program_pj") + (page + oob) * bus)
        + u(r, "flash_reads") * (u(e, "read_pj") + (page + oob) * bus)
        + u(r, "flash_oob_reads") * (u(e, "read_pj") + oob * bus)
        + u(r, "flash_erases") * u(e, "erase_pj");
    let got = f(r, "energy_j");
    let want = want_pj as f64 * 1e-12;
    assert!(
        (got - want).abs() <= want * 1e-12,
        "{got} J, want {want} J: {r}"
    );
}

#[test]
fn seq_write_json_contract() {
    let r = bench_json(&[
        "seq-write",
        "--geometry",
        "tiny",
        "--file-size",
        "1MiB",
        "--write-size",
        "64KiB",
    ]);
    assert_eq!(r["bench"], "seq-write");
    assert_eq!(r["geometry"], "tiny");
    u(&r, "device_seed");
    u(&r, "workload_seed");
    check_phase(&r);
    check_phase_energy(&r, "tiny");
    assert_eq!(u(&r, "user_bytes"), 1 << 20);
    assert_eq!(u(&r, "user_pages"), 512);
    assert!(f(&r, "host_user_mb_per_s") > 0.0);
    // tiny: 2048 B pages + 64 B OOB over a 40 MB/s bus, then 200 us: 252.8 us a page.
    let raw = f(&r, "raw_program_mb_per_s");
    assert!((raw - 2048.0 / 252.8).abs() < 1e-9, "{raw}");
    let sim = f(&r, "sim_user_mb_per_s");
    let eff = f(&r, "efficiency_vs_raw");
    assert!((eff - sim / raw).abs() < 1e-12);
    assert!(eff > 0.5 && eff <= 1.0 + 1e-9, "{eff}");
    for field in [
        "mount_scan_ms_host",
        "mount_scan_ms_sim",
        "mount_checkpoint_ms_host",
        "mount_checkpoint_ms_sim",
        "unmount_energy_j",
        "mount_scan_energy_j",
        "mount_checkpoint_energy_j",
    ] {
        assert!(f(&r, field) > 0.0, "{field}: {r}");
    }
    assert_eq!(r["scan_mount_method"], "Scan");
    let m = r["checkpoint_mount_method"].as_str().unwrap();
    assert!(m == "Checkpoint" || m == "Scan", "{m}");
}

#[test]
fn random_overwrite_json_contract_and_determinism() {
    let args = [
        "random-overwrite",
        "--geometry",
        "tiny",
        "--utilization",
        "0.7",
        "--overwrite-factor",
        "1.5",
        "--cleaner",
        "greedy",
        "--workload-seed",
        "7",
    ];
    let r = bench_json(&args);
    assert_eq!(r["bench"], "random-overwrite");
    assert_eq!(r["cleaner"], "greedy");
    assert_eq!(u(&r, "workload_seed"), 7);
    check_phase(&r);
    check_phase(&r["fill"]);
    check_phase_energy(&r, "tiny");
    check_phase_energy(&r["fill"], "tiny");
    let file = u(&r, "file_size_bytes");
    let usable = u(&r, "usable_capacity_bytes");
    assert_eq!(file % 4096, 0);
    assert!(
        file <= usable * 7 / 10 && file + 4096 > usable * 7 / 10,
        "{r}"
    );
    let ops = u(&r, "overwrite_ops");
    assert_eq!(ops, (file * 3 / 2).div_ceil(4096));
    assert_eq!(u(&r, "user_bytes"), ops * 4096);
    // Overwrites on a 70% full device must clean.
    assert!(
        u(&r, "pages_copied") > 0 && u(&r, "flash_erases") > 0,
        "{r}"
    );
    let a = f(&r, "a");
    assert!((a - u(&r, "physical_pages") as f64 / u(&r, "logical_pages") as f64).abs() < 1e-12);
    let formula = f(&r, "greedy_formula_wa");
    assert!(formula > 1.0 && formula < 10.0, "{formula}");
    let ratio = f(&r, "wa_ratio_to_formula");
    assert!((ratio - f(&r, "write_amplification") / formula).abs() < 1e-12);
    assert_eq!(r["within_5pct_of_formula"], ratio <= 1.05);
    assert!(f(&r, "a_effective") < a);
    for field in ["u", "i", "p"] {
        let x = f(&r, field);
        assert!((0.0..=1.0).contains(&x), "{field} = {x}");
    }
    assert!(f(&r, "u") > 0.6, "{r}");

    // Same seeds, same run (simulated numbers are deterministic).
    let again = bench_json(&args);
    for field in [
        "flash_programs",
        "pages_copied",
        "flash_erases",
        "sim_s",
        "energy_j",
    ] {
        assert_eq!(r[field], again[field], "{field}");
    }
}

#[test]
fn random_overwrite_table_and_errors() {
    let out = nandkit(&[
        "bench",
        "random-overwrite",
        "--geometry",
        "tiny",
        "--utilization",
        "0.5",
        "--overwrite-factor",
        "0.5",
        "--cleaner",
        "cost-benefit",
        "--warmup-factor",
        "0.5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for want in ["write amplification", "formula WA", "CostBenefit", "u "] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }
    let bad = nandkit(&["bench", "random-overwrite", "--cleaner", "lru"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("greedy"), "{}", stderr(&bad));
    let full = nandkit(&[
        "bench",
        "random-overwrite",
        "--geometry",
        "tiny",
        "--utilization",
        "1.5",
    ]);
    assert!(!full.status.success());
    assert!(stderr(&full).contains("--utilization"), "{}", stderr(&full));
}

#[test]
fn heap_json_contract() {
    let r = bench_json(&[
        "heap",
        "--geometry",
        "tiny",
        "--big-file-size",
        "1MiB",
        "--files",
        "300",
        "--dirs",
        "3",
    ]);
    assert_eq!(r["bench"], "heap");
    // tiny is 8 MiB: per GiB is 128 times the bytes.
    for case in ["one_100mib_file", "35000_files_2kib"] {
        for suffix in ["", "_scan"] {
            let bytes = f(&r, &format!("heap_bytes_{case}{suffix}"));
            assert!(bytes > 0.0, "{case}{suffix}: {r}");
            let per_gib = f(&r, &format!("heap_bytes_per_gib_{case}{suffix}"));
            assert!((per_gib - bytes * 128.0).abs() < 1e-6, "{case}{suffix}");
        }
    }
    let small = &r["many_small_files"];
    assert_eq!(u(small, "files"), 300);
    assert_eq!(u(small, "dirs"), 3);
    check_phase(&small["populate"]);
    check_phase(&r["one_100mib_file"]["populate"]);
    assert_eq!(u(&small["populate"], "user_bytes"), 300 * 2048);
    for mount in ["default_mount", "scan_mount"] {
        let m = &small[mount];
        assert!(u(m, "heap_peak_bytes") >= u(m, "heap_bytes"), "{m}");
        assert!(f(m, "host_ms") > 0.0 && f(m, "sim_ms") > 0.0, "{m}");
        assert!(f(m, "energy_j") > 0.0, "{m}");
    }
    assert!(f(small, "unmount_energy_j") > 0.0, "{small}");
    assert_eq!(small["scan_mount"]["method"], "Scan");
    // 300 files cost more heap than one.
    assert!(f(&r, "heap_bytes_35000_files_2kib") > f(&r, "heap_bytes_one_100mib_file"));
}

#[test]
fn mount_json_contract() {
    let r = bench_json(&[
        "mount",
        "--geometry",
        "tiny",
        "--files",
        "200",
        "--dirs",
        "2",
    ]);
    assert_eq!(r["bench"], "mount");
    assert_eq!(u(&r, "files"), 200);
    check_phase(&r["populate"]);
    // Each small file: its header at create, its data, its header at close.
    let per_file = f(&r, "programs_per_file");
    assert!((3.0..3.2).contains(&per_file), "{per_file}");
    let used = u(&r, "used_blocks");
    assert!(used > 0);
    for (mount, method) in [("checkpoint_mount", "Checkpoint"), ("scan_mount", "Scan")] {
        let m = &r[mount];
        assert_eq!(m["method"], method, "{m}");
        assert_eq!(u(m, "reads"), u(m, "page_reads") + u(m, "oob_reads"), "{m}");
        assert!(u(m, "heap_bytes") > 0 && f(m, "sim_ms") > 0.0, "{m}");
        assert!(f(m, "energy_j") > 0.0, "{m}");
    }
    // A mount only reads, so its energy follows its reads.
    let energy = |m: &str| f(&r[m], "energy_j");
    assert!(energy("scan_mount") > energy("checkpoint_mount"), "{r}");
    // A checkpoint mount reads far fewer pages than a scan, which reads about one page
    // per block (a summary or an erased first page) and every page of the blocks left
    // open (the default device is 32 MiB: 256 blocks of tiny's shape).
    let cp = u(&r["checkpoint_mount"], "reads");
    let scan = u(&r["scan_mount"], "reads");
    let blocks = u(&r, "blocks");
    assert_eq!(blocks, 256);
    assert!(cp < 40, "checkpoint {cp} reads");
    assert!(
        scan <= blocks + 16 + u(&r, "open_block_pages"),
        "scan {scan} reads for {blocks} blocks ({used} used)"
    );
    assert!(f(&r, "heap_bytes_all_loaded") > f(&r["scan_mount"], "heap_bytes"));
}

/// MA: O_SYNC records on an array; the contract fields, and the speedup's shape (the
/// simulated clock makes it exact, whatever the host).
#[test]
fn iozone_json_contract_and_shape() {
    // 16 MiB: on 8 MiB split over 4 chips, UBI's reserves (a bad-block PEB, two spares and
    // the volume table's two, per chip of 16) leave too little for a 2 MiB file.
    let big = bench_json(&[
        "iozone",
        "-g",
        "tiny",
        "--device-size",
        "16MiB",
        "--chips",
        "4",
        "--mode",
        "seq-write",
        "--record",
        "1MiB",
        "--file-size",
        "2MiB",
    ]);
    assert_eq!(u(&big, "chips"), 4);
    assert!(f(&big, "sim_mb_per_s") > 0.0, "{big}");
    assert!(f(&big, "speedup_vs_p1") > 3.5, "{big}");
    let small = bench_json(&[
        "iozone",
        "-g",
        "tiny",
        "--chips",
        "4",
        "--mode",
        "rand-write",
        "--record",
        "2KiB",
        "--file-size",
        "256KiB",
    ]);
    assert!(f(&small, "speedup_vs_p1") < 1.2, "{small}");
    let re = bench_json(&[
        "iozone",
        "-g",
        "tiny",
        "--chips",
        "2",
        "--mode",
        "rewrite",
        "--record",
        "256KiB",
        "--file-size",
        "1MiB",
    ]);
    assert!(f(&re, "speedup_vs_p1") > 1.5, "{re}");
    assert_eq!(u(&re, "bytes"), 1 << 20);
    // MA's threaded executor (a worker per chip) gives the same simulated results.
    let threaded = |executor: &str| {
        bench_json(&[
            "iozone",
            "-g",
            "tiny",
            "--chips",
            "4",
            "--record",
            "64KiB",
            "--file-size",
            "1MiB",
            "--executor",
            executor,
        ])
    };
    let (sim, thr) = (threaded("sim"), threaded("threaded"));
    assert_eq!(thr["executor"], "threaded");
    assert_eq!(f(&sim, "sim_ms"), f(&thr, "sim_ms"), "{sim} {thr}");
    assert_eq!(f(&sim, "energy_j"), f(&thr, "energy_j"), "{sim} {thr}");
    assert!(f(&sim, "energy_j") > 0.0, "{sim}");
    assert_eq!(u(&sim, "page_programs"), u(&thr, "page_programs"));
    assert!(f(&thr, "host_us_per_record") > 0.0, "{thr}");
}

/// MA Figure 6's scenarios: rows with `scenario` and `mount_sim_ms`; the scan mount of
/// an array reads a quarter of the blocks.
#[test]
fn ma_mount_json_contract() {
    let run = |chips: &str| {
        bench_json(&[
            "ma-mount",
            "-g",
            "tiny",
            "--device-size",
            "128MiB",
            "--chips",
            chips,
            "--quick",
        ])
    };
    let (one, four) = (run("1"), run("4"));
    let (one, four) = (one.as_array().unwrap(), four.as_array().unwrap());
    assert_eq!(one.len(), 2);
    for (a, b) in one.iter().zip(four) {
        assert!(a["scenario"].is_string());
        assert!(f(a, "mount_sim_ms") > 0.0, "{a}");
        for field in ["mount_energy_j", "scan_mount_energy_j"] {
            assert!(f(a, field) > 0.0 && f(b, field) > 0.0, "{field}: {a} {b}");
        }
        assert!(
            f(b, "scan_mount_sim_ms") < f(a, "scan_mount_sim_ms"),
            "{a} {b}"
        );
        // The checkpoint mount's few reads are not compared here: on this small device
        // the anchor search reads two pages more in the array's larger blocks.
        assert!(f(b, "mount_sim_ms") > 0.0, "{b}");
        // Figure 9, RAM by P: fewer, larger blocks make the per-block tables smaller.
        assert!(f(b, "mount_heap_bytes") > 0.0, "{b}");
        assert!(
            f(b, "mount_heap_bytes") < f(a, "mount_heap_bytes"),
            "{a} {b}"
        );
    }
}

/// MA Figure 10's replay: `mean_response_ms` and the trace's counts, on a small quick
/// scale; an emitted trace replays as a file to the same figures; a bad trace file is an
/// error naming its line.
#[test]
fn trace_json_contract() {
    let quick = ["-g", "tiny", "--scale", "0.01"];
    let mut args = vec!["trace", "--trace", "WebBrowsing", "--chips", "2"];
    args.extend_from_slice(&quick);
    let r = bench_json(&args);
    assert_eq!(r["bench"], "trace");
    assert_eq!(r["trace"], "WebBrowsing");
    assert_eq!(r["geometry"], "tiny");
    assert_eq!(u(&r, "chips"), 2);
    assert_eq!(u(&r, "seed"), 1);
    assert!(f(&r, "mean_response_ms") > 0.0, "{r}");
    assert!(f(&r, "p99_response_ms") >= f(&r, "p50_response_ms"), "{r}");
    assert!(f(&r, "normalized_to_p1") > 0.0, "{r}");
    let (reads, writes) = (u(&r, "reads"), u(&r, "writes"));
    assert!(reads > 0 && writes > 0, "{r}");
    assert_eq!(u(&r, "requests"), reads + writes);
    check_phase(&r);
    check_phase_energy(&r, "tiny");

    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("web.csv");
    let csv = csv.to_str().unwrap();
    let mut emit = vec!["bench", "trace", "--trace", "webbrowsing", "--emit", csv];
    emit.extend_from_slice(&quick);
    let out = nandkit(&emit);
    assert!(out.status.success(), "{}", stderr(&out));
    let replayed = bench_json(&["trace", "--trace-file", csv, "-g", "tiny", "--chips", "2"]);
    assert_eq!(replayed["source"], "file");
    for field in ["requests", "bytes_written", "bytes_read"] {
        assert_eq!(replayed[field], r[field], "{field}");
    }
    assert_eq!(replayed["mean_response_ms"], r["mean_response_ms"]);

    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        "arrival_us,op,file,offset,size\n0,read,a,0,1\n5,seek,a,0,1\n",
    )
    .unwrap();
    let out = nandkit(&["bench", "trace", "--trace-file", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("line 3: op 'seek'"),
        "{}",
        stderr(&out)
    );
}

/// `trace import strace`: a log becomes a trace that `bench trace` replays, what it skips
/// is counted on stderr, and a line that is not strace's is an error naming it.
#[test]
fn an_strace_log_imports_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(
        &log,
        "7 12:00:00.000000 openat(AT_FDCWD, \"/data/app.db\", O_RDWR|O_CREAT, 0644) = 3\n\
         7 12:00:00.000100 pread64(3, \"\"..., 4096, 0) = 4096\n\
         7 12:00:00.001000 openat(AT_FDCWD, \"/data/app.db-journal\", O_RDWR|O_CREAT|O_EXCL, 0644) = 4\n\
         7 12:00:00.001100 write(4, \"\"..., 4608) = 4608\n\
         7 12:00:00.001200 fsync(4) = 0\n\
         7 12:00:00.001300 pwrite64(3, \"\"..., 4096, 8192) = 4096\n\
         7 12:00:00.001400 close(4) = 0\n\
         7 12:00:00.001500 unlink(\"/data/app.db-journal\") = 0\n\
         7 12:00:00.001600 write(1, \"ok\\n\", 3) = 3\n\
         7 12:00:00.001700 +++ exited with 0 +++\n",
    )
    .unwrap();
    let csv = dir.path().join("app.csv");
    let out = nandkit(&[
        "trace",
        "import",
        "strace",
        log.to_str().unwrap(),
        "--out",
        csv.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("5 requests on 2 files"), "{err}");
    assert!(err.contains("1 fsyncs"), "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        text.contains("1300,write,app.db,8192,4096\n1500,delete,app.db-journal,0,0"),
        "{text}"
    );
    let r = bench_json(&["trace", "--trace-file", csv.to_str().unwrap(), "-g", "tiny"]);
    assert_eq!(r["requests"], 5);
    assert_eq!(r["bytes_written"], 4608 + 4096);

    std::fs::write(
        &log,
        "7 12:00:00.000000 openat(AT_FDCWD, \"a\", O_RDONLY) = 3\nread(3\n",
    )
    .unwrap();
    let out = nandkit(&["trace", "import", "strace", log.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("line 2: no timestamp"),
        "{}",
        stderr(&out)
    );
}

/// The lifetime `bench trace` projects, against the closed form for even wear on a
/// synthetic workload: one file overwritten front to back in synced 4 KiB writes at a
/// known rate, 40 times, on a chip of known endurance. The closed form takes the bytes
/// programmed a day (`overwrite_years`); the projection, each block's erases. The two
/// differ only by the pages programmed and not yet erased when the replay ends (and those
/// of setup erased during it): at most one device's worth of pages.
#[test]
fn lifetime_projection_meets_the_closed_form() {
    use std::fmt::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("overwrite.csv");
    let (file_bytes, record, passes, gap_us) = (2u64 << 20, 4096u64, 40u64, 3000u64);
    let mut text = String::from("arrival_us,op,file,offset,size\n");
    let per_pass = file_bytes / record;
    for i in 0..passes * per_pass {
        let off = (i % per_pass) * record;
        writeln!(text, "{},write,data,{off},{record}", i * gap_us).unwrap();
    }
    std::fs::write(&csv, text).unwrap();
    let r = bench_json(&["trace", "--trace-file", csv.to_str().unwrap(), "-g", "tiny"]);
    let span_s = (passes * per_pass - 1) as f64 * gap_us as f64 / 1e6;
    assert!(
        f(&r, "makespan_ms") / 1e3 <= span_s * 1.01,
        "the device keeps the trace's rate"
    );
    let (blocks, ppb, page) = (
        u(&r, "blocks"),
        u(&r, "pages_per_block"),
        u(&r, "page_size_bytes"),
    );
    let programs = u(&r, "flash_programs");
    let written = u(&r, "bytes_written");
    assert_eq!(written, passes * file_bytes);
    let wa = (programs * page) as f64 / written as f64;
    let closed = nandkit_models::overwrite_years(
        u(&r, "endurance_cycles"),
        blocks,
        ppb * page,
        written as f64 / span_s * 86_400.0,
        wa,
    )
    .unwrap();
    let levelled = f(&r, "years_levelled");
    let bound = (blocks * ppb) as f64 / programs as f64;
    let off = (levelled / closed - 1.0).abs();
    assert!(
        off <= bound,
        "projected {levelled} years, closed form {closed}: {:.1}% apart, more than the \
         end's {:.1}%",
        100.0 * off,
        100.0 * bound
    );
    // The most-worn block ends the chip no later than even wear would.
    assert!(f(&r, "years_first_block") <= levelled);
    assert!(f(&r, "wear_spread") >= 1.0);
    assert!(f(&r, "erases_per_day") > 0.0);
}

/// The MODA table's contract on two cheap workloads: every row has its fields, the
/// policies separate (MODA's uniformity is not below sequential's, and on Andrew, whose
/// headers and data interleave, its measured cleaning costs less), and a run repeats
/// exactly.
#[test]
fn moda_table_json_contract() {
    let args = [
        "moda-table",
        "--workloads",
        "andrew,recorder",
        "--policies",
        "sequential,moda,dac,page-hotcold",
    ];
    let rows = bench_json(&args);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 8);
    for r in rows {
        for k in [
            "u",
            "i",
            "p",
            "est_erases",
            "est_copies",
            "est_clean_s",
            "clean_s",
            "clean_energy_j",
            "run_s",
            "run_energy_j",
        ] {
            assert!(f(r, k) >= 0.0, "{k} in {r}");
        }
        assert!(f(r, "run_energy_j") > 0.0, "{r}");
        u(r, "erases");
        u(r, "copies");
        assert!(f(r, "run_s") > 0.0);
        assert!(f(r, "p") <= 1.0 && f(r, "u") + f(r, "i") <= 1.0);
    }
    let row = |w: &str, p: &str| {
        rows.iter()
            .find(|r| r["workload"] == w && r["policy"] == p)
            .unwrap_or_else(|| panic!("row {w}/{p}"))
    };
    for w in ["andrew", "recorder"] {
        assert!(
            f(row(w, "moda"), "p") >= f(row(w, "sequential"), "p"),
            "{w}"
        );
    }
    assert!(f(row("andrew", "moda"), "clean_s") < f(row("andrew", "sequential"), "clean_s"));
    assert_eq!(
        bench_json(&args),
        Value::Array(rows.clone()),
        "same seed, same rows"
    );
}

/// Figure 7's bench on a small device: a row per u0 and policy, u0 reached, PostMark
/// wrote the same bytes wherever it completed, and a higher u0 leaves higher u.
#[test]
fn moda_utilization_json_contract() {
    let rows = bench_json(&[
        "moda-utilization",
        "--device-size",
        "8MiB",
        "--utilizations",
        "0,0.5",
        "--policies",
        "sequential,moda",
    ]);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert_eq!(r["outcome"], "ok", "{r}");
        assert!((f(r, "u_start") - f(r, "u0")).abs() < 0.05, "{r}");
        assert!(f(r, "run_s") > 0.0 && f(r, "clean_s") > 0.0, "{r}");
        assert!(
            f(r, "run_energy_j") > 0.0 && f(r, "clean_energy_j") > 0.0,
            "{r}"
        );
        assert!(f(r, "u") > f(r, "u_start"), "{r}");
        assert_eq!(u(r, "written_bytes"), u(&rows[0], "written_bytes"), "{r}");
        u(r, "erases");
        u(r, "copies");
        u(r, "run_erases");
    }
    assert!(f(&rows[2], "u") > f(&rows[0], "u") + 0.4);
}

/// Figure 8's bench on a small device: each mode's runs go until one cannot complete,
/// utilization grows run by run, only cleaning modes clean between runs, and cleaning
/// between runs keeps the last complete run faster than no cleaning does.
#[test]
fn moda_repeat_json_contract() {
    let rows = bench_json(&[
        "moda-repeat",
        "--device-size",
        "8MiB",
        "--policies",
        "moda",
        "--gap",
        "5",
    ]);
    let rows = rows.as_array().expect("an array of rows");
    for mode in ["none", "between", "idle"] {
        let runs: Vec<&Value> = rows.iter().filter(|r| r["mode"] == mode).collect();
        assert!(runs.len() >= 5, "{mode}: {} runs", runs.len());
        let (last, done) = runs.split_last().unwrap();
        assert_eq!(last["outcome"], "enospc", "{mode}: ends on a full device");
        for w in done.windows(2) {
            assert!(f(w[1], "u_before") > f(w[0], "u_before"), "{mode}");
        }
        for r in done {
            assert_eq!(r["outcome"], "ok");
            assert!(f(r, "run_energy_j") > 0.0, "{r}");
            let cleaned = u(r, "gap_erases");
            match mode {
                // Idle time costs no energy.
                "none" => assert_eq!((cleaned, f(r, "gap_energy_j")), (0, 0.0)),
                "between" => assert_eq!(f(r, "overrun_s"), 0.0),
                _ => assert!(f(r, "gap_clean_s") <= 5.0 + f(r, "overrun_s")),
            }
        }
        assert!(runs.iter().any(|r| u(r, "gap_erases") > 0) || mode == "none");
    }
    let slowest = |mode: &str| {
        rows.iter()
            .filter(|r| r["mode"] == mode && r["outcome"] == "ok")
            .map(|r| f(r, "run_s"))
            .fold(0.0, f64::max)
    };
    assert!(slowest("between") < slowest("none"));
}

/// MiNV's Figure 8 bench: rows per profile and mount method; minv reads three flash pages
/// (in the anchor blocks: the file system record, to check the NVRAM belongs to this flash,
/// and the newest NVRAM generation, to check it is not an older copy) and beats yaffs's
/// scan.
#[test]
fn minv_mount_json_contract() {
    let v = bench_json(&[
        "minv-mount",
        "--device-size",
        "4MiB",
        "--utilizations",
        "0,1",
        "--file-size",
        "256KiB",
    ]);
    let rows = v.as_array().expect("an array of rows");
    // yaffs: after a crash, from its checkpoint, by a scan; minv: after a crash, clean.
    assert_eq!(rows.len(), 2 * 2 * 5, "layouts x utilizations x mounts");
    for r in rows {
        for field in ["profile", "method", "layout"] {
            assert!(r[field].is_string(), "{field}: {r}");
        }
        assert!(r["dram_bytes"].is_u64(), "{r}");
        assert!(
            f(r, "utilization") >= 0.0 && f(r, "mount_sim_us") > 0.0,
            "{r}"
        );
        assert!(f(r, "energy_j") > 0.0, "{r}");
        if r["profile"] == "minv" {
            assert_eq!(u(r, "flash_reads"), 3, "{r}");
            let scan = rows
                .iter()
                .find(|s| {
                    s["method"] == "scan"
                        && s["layout"] == r["layout"]
                        && s["target"] == r["target"]
                })
                .expect("a scan row");
            assert!(
                f(r, "mount_sim_us") < f(scan, "mount_sim_us"),
                "{r} vs {scan}"
            );
            // A listing after a clean mount reads the objects it left in NVRAM (a mount
            // after a crash has read them all).
            if r["method"] == "nvram" {
                assert!(u(r, "files") == 0 || f(r, "list_sim_us") > 0.0, "{r}");
            }
        }
    }
    assert!(rows
        .iter()
        .any(|r| r["profile"] == "minv" && r["method"] == "after-crash"));
    // Flat: the NVRAM a clean minv mount reads does not depend on what is stored.
    let reads: Vec<u64> = rows
        .iter()
        .filter(|r| r["profile"] == "minv" && r["method"] == "nvram")
        .map(|r| u(r, "nvram_bytes_read"))
        .collect();
    let (lo, hi) = (reads.iter().min().unwrap(), reads.iter().max().unwrap());
    assert!(hi - lo <= 400, "minv mounts read {reads:?} NVRAM bytes");
}

/// MiNV's Figure 11 bench: every workload under both profiles, with the fields the
/// maintainers check; minv is faster and uses less energy on each.
#[test]
fn ttfs_json_contract() {
    let v = bench_json(&["ttfs", "--device-size", "8MiB"]);
    let rows = v.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 6);
    for w in ["fax", "phone", "recorder"] {
        let row = |p: &str| {
            rows.iter()
                .find(|r| r["workload"] == w && r["profile"] == p)
                .unwrap_or_else(|| panic!("{w} / {p}"))
        };
        let (y, m) = (row("yaffs"), row("minv"));
        for r in [y, m] {
            for field in ["sim_s", "energy_j"] {
                assert!(f(r, field) > 0.0, "{field}: {r}");
            }
            for field in ["flash_reads", "flash_programs", "flash_erases"] {
                u(r, field);
            }
        }
        assert!(f(m, "sim_s") < f(y, "sim_s"), "{w}: {m} vs {y}");
        assert!(f(m, "energy_j") < f(y, "energy_j"), "{w}: {m} vs {y}");
        assert!(u(m, "flash_programs") <= u(y, "flash_programs"), "{w}");
    }
}

/// MiNV's synthetic workload (Figures 9-10): both profiles run the same files; minv reads
/// nothing on flash and owes no erases at the end, yaffs reads (its headers, its cleaning)
/// and leaves dead blocks behind.
#[test]
fn minv_synthetic_json_contract() {
    let v = bench_json(&[
        "minv-synthetic",
        "--device-size",
        "4MiB",
        "--sizes",
        "512,64KiB",
        "--rounds",
        "2",
    ]);
    let rows = v.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 4);
    for size in [512, 65536] {
        let row = |p: &str| {
            rows.iter()
                .find(|r| r["file_size"] == size && r["profile"] == p)
                .unwrap_or_else(|| panic!("{size} / {p}"))
        };
        let (y, m) = (row("yaffs"), row("minv"));
        assert_eq!(u(y, "files"), u(m, "files"), "same files: {y} {m}");
        assert!(u(y, "files") > 10, "{y}");
        for r in [y, m] {
            assert_eq!(r["outcome"], "ok", "{r}");
            assert_eq!(u(r, "rounds"), 2);
            assert!(f(r, "sim_s") > 0.0 && f(r, "energy_j") > 0.0, "{r}");
            assert!(u(r, "flash_programs") >= u(r, "files") * 2, "{r}");
        }
        assert_eq!(u(m, "flash_reads"), 0, "{m}");
        assert_eq!(u(m, "blocks_left_to_erase"), 0, "{m}");
        assert!(u(m, "flash_erases") > 0, "erase on delete: {m}");
        assert!(u(y, "blocks_left_to_erase") > 0, "{y}");
        assert!(
            u(m, "flash_programs") < u(y, "flash_programs"),
            "{m} vs {y}"
        );
        assert!(f(m, "sim_s") < f(y, "sim_s"), "{m} vs {y}");
    }
    let small = rows
        .iter()
        .find(|r| r["file_size"] == 512 && r["profile"] == "yaffs");
    assert!(u(small.unwrap(), "flash_reads") > 0);
}

/// The peers bench: littlefs and yaffs run the same workloads with the same counters; every
/// scripted workload has its row; the power-cut rows say how many cut points mounted.
#[test]
fn peers_json_contract() {
    let v = bench_json(&[
        "peers",
        "--geometry",
        "tiny",
        "--fs",
        "littlefs,yaffs",
        "--workloads",
        "camera",
        "--small-files",
        "20",
        "--overwrites",
        "64",
        "--cut-points",
        "30",
    ]);
    let rows = v.as_array().expect("an array of rows");
    let scripted = [
        "format+mount",
        "small-files",
        "large-file",
        "small-overwrite",
        "remount",
        "delete",
        "fill",
        "random-overwrite",
        "camera",
        "power-cut",
    ];
    for fs in ["littlefs", "yaffs"] {
        for w in scripted {
            let r = rows
                .iter()
                .find(|r| r["fs"] == fs && r["workload"] == w)
                .unwrap_or_else(|| panic!("no row for {fs} / {w}"));
            for field in ["page_reads", "page_programs", "block_erases", "heap_bytes"] {
                u(r, field);
            }
            for field in ["sim_ms", "host_ms", "energy_j"] {
                assert!(f(r, field) >= 0.0, "{field}: {r}");
            }
            assert!(r["outcome"].is_string(), "{r}");
        }
        let row = |w: &str| {
            rows.iter()
                .find(|r| r["fs"] == fs && r["workload"] == w)
                .unwrap()
        };
        let small = row("small-files");
        assert_eq!(small["outcome"], "ok", "{small}");
        assert!(u(small, "page_programs") >= 20, "{small}");
        assert!(
            u(small, "heap_bytes") > 0 && f(small, "sim_ms") > 0.0,
            "{small}"
        );
        let fill = row("fill");
        assert!(
            fill["outcome"].as_str().unwrap().starts_with("enospc at "),
            "{fill}"
        );
        let cut = row("power-cut")["outcome"].as_str().unwrap().to_string();
        let n: Vec<&str> = cut.split_whitespace().collect();
        // "M of N cut points mount, fsync'd data whole at K"
        assert_eq!(n[0], n[2], "every cut point mounts: {cut}");
        assert_eq!(
            n.last(),
            Some(&n[0]),
            "fsync'd data whole at every cut: {cut}"
        );
    }
    assert!(rows.iter().any(|r| r["workload"] == "power-cut (ecc eio)"));
    for r in rows.iter().filter(|r| r["fs"] == "littlefs") {
        let device = r["device"].as_str().unwrap();
        assert!(device.contains("no factory bad blocks"), "{r}");
    }
}

/// Bad names and budgets are refused before anything runs, naming the flag.
#[test]
fn peers_refuses_bad_names_at_once() {
    for (args, want) in [
        (&["--fs", "ext4"][..], "--fs ext4"),
        (&["--workloads", "tetris"][..], "--workloads tetris"),
        (&["--budget-host-s", "0"][..], "--budget-host-s"),
    ] {
        let mut all = vec!["bench", "peers"];
        all.extend_from_slice(args);
        let out = nandkit(&all);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?} printed rows");
    }
}

/// MNFS's Figure 6: the contract's fields for each profile; mnfs's writes are flat (its
/// deleted files' blocks were erased at delete), yaffs's wait for erases and cleaning.
#[test]
fn mnfs_uniform_json_contract() {
    let run = |profile: &str| {
        bench_json(&[
            "mnfs-uniform",
            "--profile",
            profile,
            "--device-size",
            "16MiB",
            "--file-size",
            "6MiB",
        ])
    };
    let (m, y) = (run("mnfs"), run("yaffs"));
    for r in [&m, &y] {
        for field in [
            "latency_ms_min",
            "latency_ms_median",
            "latency_ms_p99",
            "latency_ms_max",
            "max_over_min",
        ] {
            assert!(f(r, field) > 0.0, "{field}: {r}");
        }
        assert_eq!(u(r, "writes"), 192);
        assert_eq!(r["latencies_ms"].as_array().unwrap().len(), 192);
        assert!(f(r, "latency_ms_min") <= f(r, "latency_ms_median"));
        assert!(f(r, "latency_ms_p99") <= f(r, "latency_ms_max"));
    }
    assert!(f(&m, "max_over_min") <= 1.1, "{m}");
    assert_eq!(u(&m, "flash_erases"), 0, "mnfs erased while writing: {m}");
    assert!(u(&y, "flash_erases") > 0, "{y}");
    assert!(f(&y, "max_over_min") > f(&m, "max_over_min"), "{y} vs {m}");
}

/// MNFS's Figures 4-5 and Table 2: the benches' fields; deleting under mnfs erases the
/// file's blocks (time grows with size), under yaffs it does not.
#[test]
fn mnfs_fill_delete_mount_json_contract() {
    let small = ["--device-size", "16MiB"];
    let fill = bench_json(&[&["mnfs-fill"][..], &small, &["--max-size", "1MiB"]].concat());
    for r in fill.as_array().unwrap() {
        assert!(f(r, "kib_per_s") > 0.0 && u(r, "files") > 3, "{r}");
    }
    let del = bench_json(&[&["mnfs-delete"][..], &small, &["--sizes", "64KiB,2MiB"]].concat());
    let row = |p: &str, size: u64| {
        del.as_array()
            .unwrap()
            .iter()
            .find(|r| r["profile"] == p && u(r, "file_bytes") == size)
            .unwrap_or_else(|| panic!("{p} {size}"))
            .clone()
    };
    let (m_small, m_big) = (row("mnfs", 64 << 10), row("mnfs", 2 << 20));
    assert!(
        u(&m_big, "erases") > u(&m_small, "erases"),
        "{m_big} {m_small}"
    );
    assert!(f(&m_big, "delete_sim_ms") > 10.0 * f(&m_small, "delete_sim_ms") / 2.0);
    assert_eq!(u(&row("yaffs", 2 << 20), "erases"), 0);
    let mount = bench_json(&[&["mnfs-mount"][..], &small].concat());
    let rows = mount.as_array().unwrap();
    // hybrid and yaffs, each by scan and from its checkpoint; yaffs1 and mnfs (neither
    // keeps a checkpoint) by scan only.
    assert_eq!(rows.len(), 6);
    for r in rows {
        assert!(
            r["profile"].is_string() && f(r, "mount_sim_ms") > 0.0,
            "{r}"
        );
        assert!(u(r, "heap_bytes") > 0 && f(r, "utilization") > 0.9, "{r}");
        assert_eq!(
            u(r, "mount_reads"),
            u(r, "mount_page_reads") + u(r, "mount_oob_reads"),
            "{r}"
        );
    }
    let scan = |p: &str| {
        rows.iter()
            .find(|r| r["profile"] == p && r["method"] == "scan")
            .unwrap_or_else(|| panic!("{p} scan"))
            .clone()
    };
    // yaffs1 reads every page's tags (32 a block on this chip), the others about one
    // page a block.
    let (y1, m) = (scan("yaffs1"), scan("mnfs"));
    assert!(
        u(&y1, "mount_reads") > 16 * u(&m, "mount_reads"),
        "{y1} {m}"
    );
    assert!(
        f(&y1, "mount_sim_ms") > 8.0 * f(&m, "mount_sim_ms"),
        "{y1} {m}"
    );
    // MNFS holds its iBAT (a word a block) and the files' block maps: on this 16 MiB
    // device about a tenth of YAFFS1's tnodes and objects (8.4% on the paper's full
    // 128 MB; the paper: 5%).
    assert!(u(&m, "heap_bytes") * 8 < u(&y1, "heap_bytes"), "{y1} {m}");
    assert_eq!(u(&row("yaffs1", 2 << 20), "erases"), 0);
}

/// Many small files: hybrid keeps them in the shared log (within 2x of yaffs's flash),
/// mnfs gives each a block; hybrid still writes a large file with flat latency.
#[test]
fn mnfs_small_files_and_hybrid() {
    let v = bench_json(&[
        "mnfs-small",
        "--profiles",
        "yaffs,mnfs,hybrid",
        "--device-size",
        "16MiB",
        "--files",
        "600",
    ]);
    let row = |p: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["profile"] == p)
            .unwrap()
            .clone()
    };
    let (y, m, h) = (row("yaffs"), row("mnfs"), row("hybrid"));
    for r in [&y, &m, &h] {
        assert_eq!(r["outcome"], "ok", "{r}");
        assert!(u(r, "flash_bytes") > 0, "{r}");
    }
    assert!(
        u(&h, "flash_bytes") <= 2 * u(&y, "flash_bytes"),
        "{h} vs {y}"
    );
    assert!(
        u(&m, "flash_bytes") > 2 * u(&y, "flash_bytes"),
        "{m} vs {y}"
    );
    let uniform = bench_json(&[
        "mnfs-uniform",
        "--profile",
        "hybrid",
        "--device-size",
        "16MiB",
        "--file-size",
        "6MiB",
    ]);
    assert!(f(&uniform, "max_over_min") <= 1.1, "{uniform}");
}

/// MiNV's Figure 7 bench: on real minv images the NVRAM in use is what the space model
/// says, to the byte, at every file size (a file the full device cut short is not kept).
#[test]
fn minv_space_measured_equals_the_model() {
    let v = bench_json(&[
        "minv-space",
        "--sizes",
        "1KiB,64KiB,1MiB",
        "--device-size",
        "4MiB",
    ]);
    let rows = v.as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert!(u(r, "files") > 0, "{r}");
        assert_eq!(u(r, "measured_bytes"), u(r, "model_bytes"), "{r}");
    }
}

/// The mount and heap benches run minv too (its metadata in a RAM NVRAM the bench makes):
/// both mounts come from the NVRAM, reading next to nothing on flash, and the spans'
/// energy is the mount's own (no NVRAM energy from before it).
#[test]
fn mount_and_heap_benches_run_minv() {
    let minv_mount = |extra: &[&str]| {
        let base = [
            "mount",
            "--geometry",
            "tiny",
            "--files",
            "100",
            "--profile",
            "minv",
        ];
        bench_json(&[&base[..], extra].concat())
    };
    let r = minv_mount(&[]);
    for mount in ["checkpoint_mount", "scan_mount"] {
        let m = &r[mount];
        assert_eq!(m["method"], "Nvram", "{m}");
        assert!(u(m, "reads") <= 4, "{m}");
        assert!(f(m, "energy_j") < 0.01, "{m}");
    }
    // Another NVRAM technology: the same reads, another energy.
    let pram = minv_mount(&["--nvram-preset", "pram"]);
    let energy = |r: &serde_json::Value| f(&r["checkpoint_mount"], "energy_j");
    assert_ne!(energy(&pram), energy(&r), "{pram}");
    let r = bench_json(&[
        "heap",
        "--geometry",
        "tiny",
        "--profile",
        "minv",
        "--big-file-size",
        "1MiB",
        "--files",
        "100",
    ]);
    assert_eq!(r["bench"], "heap");
    assert!(f(&r, "heap_bytes_35000_files_2kib") > 0.0, "{r}");
    // A full NVRAM is refused with the way out named.
    let o = crate::common::nandkit(&[
        "bench",
        "heap",
        "--geometry",
        "tiny",
        "--profile",
        "minv",
        "--big-file-size",
        "64KiB",
        "--files",
        "3000",
        "--small-file-size",
        "512",
        "--nvram-size",
        "256KiB",
    ]);
    assert!(!o.status.success());
    assert!(
        crate::common::stderr(&o).contains("--nvram-size"),
        "{}",
        crate::common::stderr(&o)
    );
}
