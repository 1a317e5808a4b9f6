//! `nandkit compare`: which flash design for my workload on my chip. One workload (a
//! trace file, an strace capture made into one, or a paper's workload by name) is
//! replayed on every design through `bench trace`'s replay, on the same simulated chip;
//! each design's row adds a clean remount and a power-cut sweep. The report is a table,
//! an HTML page with plots and JSON.
//!
//! Each design runs in a worker process of its own (`--jobs` at once): heap is counted
//! per process, so a design's RAM figures are its own.

pub mod design;
pub mod measure;
pub mod page;
pub mod power_cut;
pub mod recorded;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Mutex};

use anyhow::{bail, ensure, Context};
use clap::{ArgGroup, Args};
use serde::Serialize;

use crate::bench::trace::format::{self, Request};
use crate::bench::trace::synth;
use crate::bench::{BenchNvramArgs, Progress};
use crate::device_args::DeviceArgs;
use design::{Design, DESIGNS};
use measure::{Row, Spec};

pub const LONG_ABOUT: &str = "Replays one workload on every design nandkit has (yaffs, yaffs1 \
    on small-page chips, moda, dac, page-hotcold, mnfs, hybrid, minv with its NVRAM, MA's \
    arrays with a UBI per chip, with parity on 3 chips or more) and on littlefs, each on a \
    fresh copy of the same simulated chip, and reports per design: throughput while busy \
    and over the trace, request response time (mean, p50, p99, max), write amplification \
    (pages programmed per page written), erases a day at the trace's rate and the years \
    until the first block reaches the chip's rated endurance (with the wear spread), heap \
    after a clean remount and at the replay's peak, mount time after a clean unmount and \
    after a power cut, and a power-cut sweep: the replay cut at --cuts flash operations \
    spread over it, each time on a fresh device, then mounted, every acknowledged file read \
    back and fsck run.\n\n\
    The workload: --trace FILE (docs/trace-format.md; `nandkit trace import strace` makes \
    one of an strace log), or --workload NAME: one of the MODA paper's workloads (camera, \
    movie, phone, recorder, fax, postmark, andrew, or a combination as camera+phone), their \
    requests back to back and their idle time kept, or one of the MA paper's smartphone \
    traces (AngryBird, GoogleMap, Movie, CameraVideo, WebBrowsing; case matters: movie is \
    MODA's).\n\n\
    The replay is `bench trace`'s: requests in trace order, at most --queue-depth in \
    flight, every write fsync'd before it completes, response time = completion - arrival \
    in simulated time. Writes --out DIR/index.html (table, latency CDF, wear histogram; the \
    best value of each column marked) and DIR/compare.json.";

#[derive(Args)]
#[command(group(ArgGroup::new("source").required(true).args(["trace", "workload"])))]
pub struct CompareArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// The workload as a trace file (CSV: docs/trace-format.md).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// A paper's workload by name (see above).
    #[arg(long, value_name = "NAME")]
    workload: Option<String>,
    /// Designs to compare, comma-separated, or `all`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all",
        value_name = "NAMES"
    )]
    profiles: Vec<String>,
    /// The life the chip must last: designs whose first block wears out sooner are
    /// marked.
    #[arg(long, value_name = "N", default_value_t = 5.0)]
    years_of: f64,
    /// Cuts of the power-cut sweep per design (0: none).
    #[arg(long, default_value_t = 6, value_name = "N")]
    cuts: u32,
    /// Requests in flight at most (as bench trace).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    queue_depth: u32,
    /// Seed of the workload and of the data written.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    #[command(flatten)]
    nvram: BenchNvramArgs,
    /// Designs measured at once, each in its own process [default: the host's cores].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    jobs: Option<u32>,
    /// Directory for index.html and compare.json.
    #[arg(long, default_value = "compare-report", value_name = "DIR")]
    out: PathBuf,
    /// Print the JSON report instead of a table.
    #[arg(long)]
    json: bool,
    /// Measure this one design and print its row as JSON (what each worker runs).
    #[arg(long, hide = true, value_name = "DESIGN", requires = "trace")]
    worker: Option<String>,
}

/// The report: what was compared, and a row per design.
#[derive(Serialize)]
pub struct Report {
    pub workload: String,
    pub geometry: String,
    pub chips: u32,
    pub device_bytes: u64,
    pub page_bytes: u32,
    pub endurance_cycles: u32,
    pub requests: usize,
    pub trace_span_s: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub years_of: f64,
    pub cuts: u32,
    pub queue_depth: u32,
    pub rows: Vec<Row>,
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    ensure!(
        args.years_of > 0.0 && args.years_of.is_finite(),
        "--years-of must be a positive number of years"
    );
    let config = args.device.config()?;
    if let Some(name) = &args.worker {
        return worker(&args, config, name);
    }
    let designs = chosen(&args.profiles)?;
    let (name, trace) = load(&args, config.geometry.total_bytes())?;
    ensure!(!trace.is_empty(), "the workload has no requests");
    // The workers read the trace from a file: the one given, or the recording.
    let dir = tempfile::tempdir().context("making a temporary directory")?;
    let trace_path = match &args.trace {
        Some(p) => p.clone(),
        None => {
            let p = dir.path().join("trace.csv");
            let mut out = std::io::BufWriter::new(std::fs::File::create(&p)?);
            format::write(&mut out, &[format!("nandkit compare: {name}")], &trace)?;
            out.flush()?;
            p
        }
    };
    let rows = run_workers(&args, &designs, &trace_path)?;
    let report = Report {
        workload: name,
        geometry: args.device.geometry.clone(),
        chips: config.geometry.chips,
        device_bytes: config.geometry.total_bytes(),
        page_bytes: config.geometry.page_size_bytes,
        endurance_cycles: config.wear.endurance_cycles,
        requests: trace.len(),
        trace_span_s: trace.last().map_or(0, |r| r.arrival_us) as f64 / 1e6,
        bytes_read: bytes(&trace, format::Op::Read),
        bytes_written: bytes(&trace, format::Op::Write),
        years_of: args.years_of,
        cuts: args.cuts,
        queue_depth: args.queue_depth,
        rows,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = serde_json::to_string_pretty(&report)?;
    write_file(&args.out.join("compare.json"), json.as_bytes())?;
    write_file(
        &args.out.join("index.html"),
        page::html(&report)?.as_bytes(),
    )?;
    if args.json {
        println!("{json}");
    } else {
        page::print_table(&report);
        println!(
            "\nreport: {} (JSON: {})",
            args.out.join("index.html").display(),
            args.out.join("compare.json").display()
        );
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn bytes(trace: &[Request], op: format::Op) -> u64 {
    trace.iter().filter(|r| r.op == op).map(|r| r.size).sum()
}

/// The designs `--profiles` names, in the report's order.
fn chosen(names: &[String]) -> anyhow::Result<Vec<Design>> {
    if names.iter().any(|n| n == "all") {
        return Ok(DESIGNS.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let d = design::by_name(n.trim())?;
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out.sort_by_key(|d| DESIGNS.iter().position(|x| x == d));
    Ok(out)
}

/// The workload: its name and requests.
fn load(args: &CompareArgs, device_bytes: u64) -> anyhow::Result<(String, Vec<Request>)> {
    if let Some(path) = &args.trace {
        let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let requests =
            format::parse(&text).with_context(|| format!("trace file {}", path.display()))?;
        return Ok((path.display().to_string(), requests));
    }
    let name = args
        .workload
        .as_deref()
        .context("give --trace or --workload")?;
    if let Ok(app) = <synth::App as clap::ValueEnum>::from_str(name, false) {
        let scale = synth::fit(app, device_bytes, None)?;
        let requests = synth::generate(app, args.workload_seed, scale);
        return Ok((
            format!("{name} (MA paper's trace, scale {:.4})", scale.time),
            requests,
        ));
    }
    if nandkit_workloads::by_name(name, args.workload_seed, device_bytes).is_none() {
        bail!(
            "unknown workload '{name}' (known: {}, or the MA paper's AngryBird, GoogleMap, \
             Movie, CameraVideo, WebBrowsing)",
            nandkit_workloads::NAMES.join(", ")
        );
    }
    let requests = recorded::record(name, args.workload_seed, device_bytes)?;
    Ok((format!("{name} (MODA paper's workload)"), requests))
}

/// The worker: one design, its row as JSON on stdout.
fn worker(
    args: &CompareArgs,
    config: nandkit_flash::DeviceConfig,
    name: &str,
) -> anyhow::Result<()> {
    let design = design::by_name(name)?;
    let (_, trace) = load(args, config.geometry.total_bytes())?;
    let spec = Spec {
        config,
        trace,
        seed: args.workload_seed,
        queue_depth: args.queue_depth as usize,
        cuts: args.cuts,
        nvram: args.nvram.clone(),
    };
    let row = measure::measure(&spec, &design);
    println!("{}", serde_json::to_string(&row)?);
    Ok(())
}

/// The command line of the worker for `design`.
fn worker_args(args: &CompareArgs, design: &Design, trace: &Path) -> Vec<String> {
    let d = &args.device;
    let mut v: Vec<String> = vec![
        "compare".into(),
        "--worker".into(),
        design.name.into(),
        "--trace".into(),
        trace.display().to_string(),
        "--geometry".into(),
        d.geometry.clone(),
        "--chips".into(),
        d.chips.to_string(),
        "--cuts".into(),
        args.cuts.to_string(),
        "--queue-depth".into(),
        args.queue_depth.to_string(),
        "--workload-seed".into(),
        args.workload_seed.to_string(),
        "--nvram-preset".into(),
        args.nvram.nvram_preset.clone(),
    ];
    if let Some(size) = d.device_size {
        v.extend(["--device-size".into(), size.to_string()]);
    }
    if let Some(seed) = d.seed {
        v.extend(["--seed".into(), seed.to_string()]);
    }
    if let Some(size) = args.nvram.nvram_size {
        v.extend(["--nvram-size".into(), size.to_string()]);
    }
    v
}

/// Runs a worker per design, `--jobs` at a time; the rows in the designs' order.
fn run_workers(args: &CompareArgs, designs: &[Design], trace: &Path) -> anyhow::Result<Vec<Row>> {
    let exe = std::env::current_exe().context("finding the nandkit executable")?;
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |j| j as usize,
    );
    // littlefs first: it takes longest (its allocator walks the files), and the others
    // fill the other jobs meanwhile.
    let mut order: Vec<(usize, Design)> = designs.iter().copied().enumerate().collect();
    order.sort_by_key(|(_, d)| !d.is_littlefs());
    order.reverse();
    let queue = Mutex::new(order);
    // Takes the next design, the lock released before its worker runs.
    let next = || queue.lock().ok().and_then(|mut q| q.pop());
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(designs.len()) {
            let (tx, exe, next) = (tx.clone(), &exe, &next);
            s.spawn(move || {
                while let Some((i, design)) = next() {
                    let row = Command::new(exe)
                        .args(worker_args(args, &design, trace))
                        .output()
                        .context("starting a worker")
                        .and_then(|out| {
                            ensure!(
                                out.status.success(),
                                "{}",
                                String::from_utf8_lossy(&out.stderr).trim()
                            );
                            serde_json::from_slice::<Row>(&out.stdout).context("reading its row")
                        })
                        .unwrap_or_else(|e| Row::without(&design, format!("failed: {e:#}")));
                    if tx.send((i, row)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut progress = Progress::items(designs.len() as u64, "designs", args.json);
        let mut rows: Vec<Option<Row>> = vec![None; designs.len()];
        for (i, row) in rx {
            rows[i] = Some(row);
            progress.inc(1);
        }
        progress.finish();
        Ok(rows.into_iter().flatten().collect())
    })
}
