//! Requests in flight (`bench trace --queue-depth`) and IOzone's read tests (`bench iozone
//! --mode read|reread`), as a user runs them, at small sizes. Every figure asserted is
//! simulated time or a count, so the results do not depend on the host.

use crate::common::*;

use serde_json::Value;

/// `a` and `b` equal but for floating-point rounding.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// One page read on the tiny preset: tR 25 us, then 2,048 + 64 bytes over a 40 MB/s bus
/// (52.8 us).
const PAGE_READ_MS: f64 = (25_000.0 + 52_800.0) / 1e6;

/// The response time percentiles are ordered, and the mean lies between the extremes.
fn check_percentiles(r: &Value) {
    let (p50, p90, p99, max) = (
        f(r, "p50_response_ms"),
        f(r, "p90_response_ms"),
        f(r, "p99_response_ms"),
        f(r, "max_response_ms"),
    );
    assert!(p50 > 0.0 && p50 <= p90 && p90 <= p99 && p99 <= max, "{r}");
    assert!(f(r, "mean_response_ms") <= max, "{r}");
}

/// TwoWriters on 4 tiny chips, with `extra` flags.
fn two_writers_with(extra: &[&str]) -> Value {
    let mut args = vec![
        "trace",
        "--trace",
        "TwoWriters",
        "-g",
        "tiny",
        "--device-size",
        "16MiB",
        "--chips",
        "4",
    ];
    args.extend_from_slice(extra);
    bench_json(&args)
}

fn two_writers(depth: &str) -> Value {
    two_writers_with(&["--queue-depth", depth])
}

/// Two O_SYNC writers on four chips: with four requests in flight the records of the two
/// files overlap on the chips, so the same flash work finishes sooner.
#[test]
fn two_writers_finish_sooner_with_requests_in_flight() {
    let (one, four) = (two_writers("1"), two_writers("4"));
    for r in [&one, &four] {
        assert_eq!(r["trace"], "TwoWriters");
        assert_eq!(u(r, "requests"), 2 + 2 * 256, "{r}");
        assert_eq!(u(r, "writes"), 2 * 256, "{r}");
        assert_eq!(u(r, "bytes_written"), 2 << 20, "{r}");
        check_percentiles(r);
        // MB/s is the bytes over the makespan.
        let mb = f(r, "bytes_written") / 1e6;
        assert!(
            close(f(r, "mb_per_s"), mb / (f(r, "makespan_ms") / 1e3)),
            "{r}"
        );
        // Every request arrives at 0 and the replay starts there: its simulated time is
        // the makespan.
        assert!(close(f(r, "sim_s") * 1e3, f(r, "makespan_ms")), "{r}");
    }
    assert_eq!(u(&one, "queue_depth"), 1);
    assert_eq!(u(&four, "queue_depth"), 4);
    // The same operations in the same order, only overlapped: same programs, same energy.
    assert_eq!(u(&one, "flash_programs"), u(&four, "flash_programs"));
    assert_eq!(one["energy_j"], four["energy_j"]);
    let (span1, span4) = (f(&one, "makespan_ms"), f(&four, "makespan_ms"));
    assert!(
        span4 < 0.75 * span1,
        "makespan {span4} ms at depth 4, {span1} ms at 1"
    );
    assert!(f(&four, "mb_per_s") > f(&one, "mb_per_s") / 0.75);
    assert!(
        f(&four, "mean_response_ms") < f(&one, "mean_response_ms"),
        "{one} {four}"
    );
}

/// Depth 1 is the single queue the replay always was: with every request arriving at 0,
/// each starts when the one before completes, so the makespan is the sum of the service
/// times and a request's wait is the service of those before it. The default is depth 1.
#[test]
fn depth_one_is_the_single_queue() {
    let one = two_writers("1");
    let requests = f(&one, "requests");
    let served_ms = f(&one, "mean_service_ms") * requests;
    assert!(close(f(&one, "makespan_ms"), served_ms), "{one}");
    assert!(
        close(
            f(&one, "mean_response_ms"),
            f(&one, "mean_wait_ms") + f(&one, "mean_service_ms")
        ),
        "{one}"
    );
    let default = two_writers_with(&[]);
    assert_eq!(u(&default, "queue_depth"), 1);
    for field in [
        "mean_response_ms",
        "p50_response_ms",
        "p99_response_ms",
        "max_response_ms",
        "mean_wait_ms",
        "makespan_ms",
        "normalized_to_p1",
        "flash_programs",
    ] {
        assert_eq!(default[field], one[field], "{field}");
    }

    // One-page reads arriving together, on one chip and on two whose pages alternate.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("reads.csv");
    std::fs::write(
        &csv,
        "arrival_us,op,file,offset,size\n\
         0,read,f,0,2048\n\
         0,read,f,2048,2048\n\
         0,read,f,4096,2048\n\
         0,read,f,6144,2048\n",
    )
    .unwrap();
    let csv = csv.to_str().unwrap();
    let reads = |chips: &str, depth: &str| {
        bench_json(&[
            "trace",
            "--trace-file",
            csv,
            "-g",
            "tiny",
            "--chips",
            chips,
            "--queue-depth",
            depth,
        ])
    };
    let p = PAGE_READ_MS;
    // Depth 1: the k-th read completes after k page reads, on any number of chips.
    for chips in ["1", "2"] {
        let r = reads(chips, "1");
        assert!(close(f(&r, "mean_response_ms"), 2.5 * p), "{r}");
        assert!(close(f(&r, "makespan_ms"), 4.0 * p), "{r}");
        assert!(close(f(&r, "mean_wait_ms"), 1.5 * p), "{r}");
        assert!(close(f(&r, "max_response_ms"), 4.0 * p), "{r}");
    }
    // Depth 4 on one chip: all issued at once, served in turn; the same completions.
    let r = reads("1", "4");
    assert!(close(f(&r, "mean_response_ms"), 2.5 * p), "{r}");
    assert!(close(f(&r, "makespan_ms"), 4.0 * p), "{r}");
    assert_eq!(f(&r, "mean_wait_ms"), 0.0, "{r}");
    // Depth 2 on two chips: two reads at a time.
    let r = reads("2", "2");
    assert!(close(f(&r, "makespan_ms"), 2.0 * p), "{r}");
    assert!(close(f(&r, "mean_response_ms"), 1.5 * p), "{r}");
    assert!(close(f(&r, "normalized_to_p1"), 1.5 / 2.5), "{r}");
}

fn iozone(mode: &str, chips: &str) -> Value {
    bench_json(&[
        "iozone",
        "-g",
        "tiny",
        "--device-size",
        "16MiB",
        "--chips",
        chips,
        "--mode",
        mode,
        "--record",
        "64KiB",
        "--file-size",
        "1MiB",
    ])
}

/// Per-record latency percentiles are there and ordered, in every mode.
fn check_records(r: &Value) {
    let (mean, p50, p99, max) = (
        f(r, "record_mean_us"),
        f(r, "record_p50_us"),
        f(r, "record_p99_us"),
        f(r, "record_max_us"),
    );
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= max && mean <= max, "{r}");
    // The records are the whole measured phase.
    assert!(close(mean * 16.0 / 1e3, f(r, "sim_ms")), "{r}");
}

/// IOzone read after a remount: every page of the file is read from flash once, a record's
/// pages in parallel over the chips; reread reads it all again (the file system keeps no
/// data cache).
#[test]
fn iozone_reads_run_on_the_chips_in_parallel() {
    let (one, two) = (iozone("read", "1"), iozone("read", "2"));
    for r in [&one, &two] {
        assert_eq!(r["mode"], "read");
        assert_eq!(u(r, "bytes"), 1 << 20);
        // 1 MiB of 2 KiB pages, each read once, nothing written.
        assert_eq!(u(r, "page_reads"), 512, "{r}");
        assert_eq!(u(r, "page_programs"), 0, "{r}");
        check_records(r);
    }
    // One chip: a 64 KiB record is 32 page reads one after another.
    assert!(
        close(f(&one, "record_p50_us"), 32.0 * PAGE_READ_MS * 1e3),
        "{one}"
    );
    let mb_per_s = 65536.0 / 1e6 / (32.0 * PAGE_READ_MS / 1e3);
    assert!(close(f(&one, "sim_mb_per_s"), mb_per_s), "{one}");
    // Two chips: nearly twice as fast (a record's pages split over both).
    let speedup = f(&two, "sim_mb_per_s") / f(&one, "sim_mb_per_s");
    assert!(speedup > 1.9 && speedup <= 2.0, "{one} {two}");
    assert!(close(f(&two, "speedup_vs_p1"), speedup), "{two}");

    let again = iozone("reread", "2");
    assert_eq!(again["mode"], "reread");
    assert_eq!(u(&again, "page_reads"), 512, "{again}");
    assert_eq!(again["sim_mb_per_s"], two["sim_mb_per_s"]);
    check_records(&again);

    // The write modes report the same record latencies (a write and its fsync).
    let written = iozone("seq-write", "2");
    check_records(&written);
    assert!(
        f(&written, "record_p50_us") > f(&two, "record_p50_us"),
        "{written}"
    );
}

/// `bench ma-capacity`: with a UBI per chip a bad block costs one PEB of one chip, without
/// it a whole stripe (on 128 MiB: on 64 MiB over 8 chips of 64 PEBs, UBI's fixed reserves,
/// four PEBs a chip besides the bad-block reserve, cost more than the stripes lost); and wear levelling holds the erase-count spread at its threshold
/// where the same run without it spreads further.
#[test]
fn ma_capacity_ubi_keeps_the_volume_and_levels_wear() {
    let v = bench_json(&[
        "ma-capacity",
        "-g",
        "mlc-1g",
        "--device-size",
        "128MiB",
        "--chips",
        "1,8",
        "--bad-block-rate",
        "0.015",
        "--overwrite",
        "768MiB",
        "--wl-threshold",
        "4",
    ]);
    let rows = v.as_array().expect("rows");
    let (one, eight) = (&rows[0], &rows[1]);
    assert!(
        u(eight, "bad_pebs") > 0 && u(eight, "stripes_lost") > 0,
        "{eight}"
    );
    let ubi = f(&eight["ubi"], "layer_vs_first");
    let raw = f(&eight["raw"], "layer_vs_first");
    assert!(ubi > raw, "UBI {ubi} vs raw {raw}");
    assert!(ubi >= 0.95, "UBI at 8 chips: {ubi}");
    // UBI's bound is twice its threshold (the window it picks a move's target in).
    for r in [one, eight] {
        let on = &r["wear_levelled"];
        let off = &r["wear_unlevelled"];
        assert!(u(on, "ec_spread_max") <= 8, "{on}");
        assert!(u(off, "ec_spread_max") > 8, "{off}");
        assert!(u(on, "wl_moves") > 0 && u(off, "wl_moves") == 0);
    }
}
