//! `nandkit bench mnfs-uniform`: the MNFS paper's uniform write-response test (Figure 6).
//! The device is fragmented by creating random-sized files and removing some of them; then
//! one 64 MiB file is written as 2,048 writes of 32 KiB, and each write's simulated latency
//! is recorded. A profile whose writes wait for cleaning shows spikes; one that erased the
//! deleted files' blocks when they were deleted (mnfs) should not.

use anyhow::Context;
use clap::Args;
use nandkit_fs::NewObject;
use nandkit_fs::{FsError, Ino, ROOT_INO};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::energy::Mark;
use super::used_fraction;
use super::{format, noise, print_json, Fs, FsArgs, Progress};
use crate::device_args::{parse_bytes, DeviceArgs};

pub const LONG_ABOUT: &str = "The MNFS paper's uniform write-response test (Figure 6): \
    fragment the device by creating random-sized files (16 KiB to 4 MiB) until it is \
    --fill-to full and removing files at random until it is --keep full, then write one \
    file of --file-size as writes of --write-size, and record every write's simulated \
    latency (the device clock across the write call). Reports min, median, p99, max and \
    max/min of the latencies, and (with --json) every latency, for plotting. The \
    fragmenting is not measured.";

#[derive(Args)]
pub struct UniformArgs {
    /// Device preset (the paper's 128 MB small-block volume).
    #[arg(long, short = 'g', default_value = "mnfs-128m", value_name = "NAME")]
    geometry: String,
    /// Device capacity [default: the preset's].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    device_size: Option<u64>,
    /// File system profile.
    #[arg(long, default_value = "mnfs", value_name = "NAME")]
    profile: String,
    /// Size of the measured file.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes, value_name = "SIZE")]
    file_size: u64,
    /// Bytes per measured write.
    #[arg(long, default_value = "32KiB", value_parser = parse_bytes, value_name = "SIZE")]
    write_size: u64,
    /// Fragmenting: create files until this share of the space is used...
    #[arg(long, default_value_t = 0.9, value_name = "U")]
    fill_to: f64,
    /// ...then remove files at random until this share is used.
    #[arg(long, default_value_t = 0.4, value_name = "U")]
    keep: f64,
    /// Seed of the fragmenting.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    /// Print JSON (with every latency) instead of a summary.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    geometry: String,
    profile: String,
    writes: usize,
    write_bytes: u64,
    /// Files left by the fragmenting, and the share of the space they use.
    fragment_files: usize,
    fragment_utilization: f64,
    latency_ms_min: f64,
    latency_ms_median: f64,
    latency_ms_p99: f64,
    latency_ms_max: f64,
    max_over_min: f64,
    /// Writes slower than twice the median.
    slow_writes: usize,
    sim_s: f64,
    energy_j: f64,
    /// Pages cleaning copied and blocks erased during the measured writes.
    flash_reads: u64,
    flash_erases: u64,
    latencies_ms: Vec<f64>,
}

pub fn run(args: UniformArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.write_size > 0 && args.file_size >= args.write_size,
        "--write-size must be at least 1 byte and at most --file-size"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.keep) && args.keep <= args.fill_to && args.fill_to <= 1.0,
        "need 0 <= --keep <= --fill-to <= 1"
    );
    let config = DeviceArgs {
        geometry: args.geometry.clone(),
        chips: 1,
        device_size: args.device_size,
        seed: None,
    }
    .config()?;
    let mut fs = format(
        config,
        &FsArgs {
            profile: args.profile.clone(),
            ..FsArgs::default()
        },
    )?;
    let (fragment_files, fragment_utilization) = fragment(&mut fs, &args)?;
    let st = fs.statfs();
    let free = st.free_chunks * u64::from(st.chunk_bytes);
    anyhow::ensure!(
        free >= args.file_size,
        "the measured file ({} bytes) does not fit in what fragmenting left free ({free} \
         bytes): use a larger --device-size or a smaller --file-size or --keep",
        args.file_size
    );

    let ino = fs
        .create(ROOT_INO, b"movie", NewObject::regular_file())
        .context("creating the measured file")?
        .ino;
    let data = noise(args.write_size as usize, args.workload_seed + 1);
    let writes = (args.file_size / args.write_size) as usize;
    let mut latencies = Vec::with_capacity(writes);
    let mut progress = Progress::items(writes as u64, "writing", args.json);
    let t0 = fs.device_mut().stats().total();
    let start = Mark::of_fs(&fs);
    for k in 0..writes as u64 {
        let before = Mark::of_fs(&fs);
        fs.write(ino, k * args.write_size, &data)
            .with_context(|| format!("write {k} of {writes}"))?;
        latencies.push(before.to_fs(&fs).sim_ms());
        progress.inc(1);
    }
    progress.finish();
    let spent = start.to_fs(&fs);
    let t1 = fs.device_mut().stats().total();
    let mut sorted = latencies.clone();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    let (min, median, p99, max) = (at(0.0), at(0.5), at(0.99), at(1.0));
    let report = Report {
        bench: "mnfs-uniform",
        geometry: args.geometry.clone(),
        profile: args.profile.clone(),
        writes,
        write_bytes: args.write_size,
        fragment_files,
        fragment_utilization,
        latency_ms_min: min,
        latency_ms_median: median,
        latency_ms_p99: p99,
        latency_ms_max: max,
        max_over_min: if min > 0.0 { max / min } else { f64::INFINITY },
        slow_writes: latencies.iter().filter(|&&l| l > 2.0 * median).count(),
        sim_s: spent.sim_s(),
        energy_j: spent.energy_j(),
        flash_reads: (t1.page_reads + t1.oob_reads) - (t0.page_reads + t0.oob_reads),
        flash_erases: t1.erases - t0.erases,
        latencies_ms: latencies,
    };
    if args.json {
        return print_json(&report);
    }
    println!(
        "{} on {}: {} writes of {} KiB after fragmenting ({} files, {:.0}% used)",
        report.profile,
        report.geometry,
        report.writes,
        report.write_bytes >> 10,
        report.fragment_files,
        report.fragment_utilization * 100.0
    );
    println!(
        "latency ms: min {:.2}  median {:.2}  p99 {:.2}  max {:.2}  max/min {:.2}  (writes over 2x the median: {})",
        min, median, p99, max, report.max_over_min, report.slow_writes
    );
    println!(
        "during the writes: {} flash reads (cleaning), {} erases; {:.2} s simulated, {:.3} J",
        report.flash_reads, report.flash_erases, report.sim_s, report.energy_j
    );
    Ok(())
}

/// Random files until `fill_to` is used (or the device is full), then random removals
/// until `keep` is. Returns the files left and the share used.
fn fragment(fs: &mut Fs, args: &UniformArgs) -> anyhow::Result<(usize, f64)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(args.workload_seed);
    let chunk = noise(4 << 20, args.workload_seed);
    let mut files: Vec<(Ino, String)> = Vec::new();
    let mut n = 0u64;
    while used_fraction(fs) < args.fill_to {
        let size = rng.gen_range(16u64 << 10..=4 << 20) as usize;
        let name = format!("frag{n:05}");
        n += 1;
        let ino = match fs.create(ROOT_INO, name.as_bytes(), NewObject::regular_file()) {
            Ok(a) => a.ino,
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("fragmenting: create"),
        };
        files.push((ino, name));
        match fs.write(ino, 0, &chunk[..size]).and_then(|_| fs.fsync(ino)) {
            Ok(()) => {}
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("fragmenting: write"),
        }
    }
    while used_fraction(fs) > args.keep && !files.is_empty() {
        let (_, name) = files.swap_remove(rng.gen_range(0..files.len()));
        fs.unlink(ROOT_INO, name.as_bytes())
            .context("fragmenting: unlink")?;
    }
    fs.sync().context("fragmenting: sync")?;
    Ok((files.len(), used_fraction(fs)))
}
