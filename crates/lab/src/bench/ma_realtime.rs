//! `nandkit bench ma-realtime`: MA in wall time. A fresh image on P chips is mounted with
//! `--realtime` (every flash operation sleeps for its latency, one worker thread per chip)
//! and a program writes one file through the mount in large O_SYNC records, as
//! `dd bs=16M oflag=sync` does. On P chips the striped pages of a record sleep in parallel,
//! so the wall time falls with P.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use super::fuse::{run_quiet, unmount};
use super::print_json;
use crate::device_args::parse_bytes;

pub const LONG_ABOUT: &str = "Wall-clock throughput of a mounted array with --realtime: for \
    each P in --chips, a fresh image (GEOMETRY, DEVICE_SIZE, split over P chips, capacity \
    the same) is mounted with `nandkit mount --realtime`, FILE_SIZE bytes are written to one \
    file in RECORD-sized writes opened with O_SYNC (each returns once on flash), and the \
    mount is unmounted and checked. Needs FUSE (fusermount3). Wall time includes FUSE and \
    the file system's own work, which does not shrink with P.";

#[derive(Args)]
pub struct MaRealtimeArgs {
    /// Chip counts to run, comma-separated; the first is the baseline of the speed-up.
    #[arg(
        long,
        default_value = "1,4",
        value_delimiter = ',',
        value_name = "P,..."
    )]
    chips: Vec<u32>,
    /// Geometry preset (see `nandkit presets`).
    #[arg(long, default_value = "mlc-1g", value_name = "NAME")]
    geometry: String,
    /// Device size.
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    device_size: String,
    /// Bytes written.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes, value_name = "SIZE")]
    file_size: u64,
    /// Bytes per write (dd's bs).
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes, value_name = "SIZE")]
    record: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Debug)]
struct Row {
    chips: u32,
    wall_s: f64,
    mb_per_s: f64,
    speedup_vs_first: f64,
}

#[derive(Serialize, Debug)]
struct Report {
    bench: &'static str,
    geometry: String,
    device_size: String,
    file_size_bytes: u64,
    record_bytes: u64,
    rows: Vec<Row>,
}

/// Writes `a.file_size` bytes into `path` in O_SYNC records; seconds of wall time.
fn write_synced(path: &Path, a: &MaRealtimeArgs) -> anyhow::Result<f64> {
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc::O_SYNC)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    // Not zeros: a record of one repeated byte would be as costly, but say what we write.
    let record: Vec<u8> = (0..a.record).map(|i| (i * 131 % 251) as u8).collect();
    let start = Instant::now();
    let mut left = a.file_size;
    while left > 0 {
        let n = left.min(a.record) as usize;
        f.write_all(&record[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    drop(f);
    Ok(start.elapsed().as_secs_f64())
}

/// One chip count: mkfs, mount in real time, write, unmount, fsck.
fn one(a: &MaRealtimeArgs, work: &Path, chips: u32) -> anyhow::Result<f64> {
    let exe = std::env::current_exe().context("finding the nandkit binary")?;
    let img = work.join(format!("rt{chips}.img"));
    let mnt = work.join(format!("mnt{chips}"));
    std::fs::create_dir_all(&mnt)?;
    run_quiet(
        Command::new(&exe)
            .arg("mkfs")
            .arg(&img)
            .args(["--geometry", &a.geometry, "--device-size", &a.device_size])
            .args(["--chips", &chips.to_string(), "--force"]),
    )?;
    run_quiet(
        Command::new(&exe)
            .arg("mount")
            .arg("--realtime")
            .arg(&img)
            .arg(&mnt),
    )?;
    let took = write_synced(&mnt.join("f"), a);
    unmount(&mnt);
    // fsck waits for the daemon to finish unmounting and says the image is sound.
    run_quiet(Command::new(&exe).arg("fsck").arg(&img))?;
    std::fs::remove_file(&img).ok();
    took
}

pub fn run(a: MaRealtimeArgs) -> anyhow::Result<()> {
    if a.chips.is_empty() || a.chips.contains(&0) {
        bail!("--chips: give one or more chip counts of 1 or more");
    }
    if a.record == 0 || a.file_size == 0 {
        bail!("--record and --file-size must be more than 0");
    }
    let work = tempfile::Builder::new()
        .prefix("nandkit-bench-realtime-")
        .tempdir()
        .context("a work directory")?;
    let mut rows: Vec<Row> = Vec::new();
    for &chips in &a.chips {
        if !a.json {
            eprintln!("bench ma-realtime: {chips} chip(s), writing in real time");
        }
        let wall_s = one(&a, work.path(), chips)?;
        let first = rows.first().map_or(wall_s, |r| r.wall_s);
        rows.push(Row {
            chips,
            wall_s,
            mb_per_s: a.file_size as f64 / 1e6 / wall_s.max(1e-9),
            speedup_vs_first: first / wall_s.max(1e-9),
        });
    }
    let report = Report {
        bench: "ma-realtime",
        geometry: a.geometry.clone(),
        device_size: a.device_size.clone(),
        file_size_bytes: a.file_size,
        record_bytes: a.record,
        rows,
    };
    if a.json {
        return print_json(&report);
    }
    println!(
        "{} on {} ({}), {} MiB in O_SYNC writes of {} MiB, --realtime",
        report.bench,
        report.geometry,
        report.device_size,
        report.file_size_bytes >> 20,
        report.record_bytes >> 20
    );
    println!(
        "{:>6} {:>10} {:>10} {:>9}",
        "CHIPS", "WALL S", "MB/S", "SPEEDUP"
    );
    for r in &report.rows {
        println!(
            "{:>6} {:>10.2} {:>10.2} {:>8.2}x",
            r.chips, r.wall_s, r.mb_per_s, r.speedup_vs_first
        );
    }
    Ok(())
}
