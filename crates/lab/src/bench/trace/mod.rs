//! `nandkit bench trace`: the MA paper's real-world trace replay (section 5, Figure 10).
//! A smartphone trace (one of five synthetic ones after Table 3, or a user's CSV file) is
//! replayed on the file system on P striped chips, honouring arrival times in simulated
//! time, with up to `--queue-depth` requests in flight; the figure of merit is the mean
//! response time, normalised to P = 1. A sixth built-in trace, TwoWriters, is ours: two
//! files written in 4 KiB O_SYNC records, all requests arriving at once.

pub mod format;
pub mod replay;
pub mod strace;
pub mod synth;
pub mod target;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context};
use clap::{ArgGroup, Args};
use serde::Serialize;

use super::{print_rows_json, DeviceInfo, FsArgs, PhaseStats, Snapshot};
use crate::compare::design::Subject;
use crate::device_args::DeviceArgs;
use format::Request;
use replay::Summary;
use synth::{App, Scale};

pub const LONG_ABOUT: &str =
    "Replays a smartphone I/O trace on a RAM device of P chips (capacity constant as P \
    changes: the MA paper's Table 2) and reports response times in simulated time.\n\n\
    Traces: --trace NAME generates one of the paper's five (Table 3: AngryBird, GoogleMap, \
    Movie, CameraVideo, WebBrowsing) from the statistics section 5 states, with our own \
    assumptions where it states none (docs/trace-format.md lists both), or TwoWriters (ours, \
    not the paper's: two files written in alternating 4 KiB records, 256 to each, every \
    request arriving at time 0, to show requests in flight overlapping on the chips); \
    --trace-file FILE replays a CSV trace (header arrival_us,op,file,offset,size). --emit \
    FILE writes the generated trace as CSV instead of replaying it.\n\n\
    A generated trace covers the first --scale of the application's run (by default the \
    largest part that moves at most 256 MiB, so a run takes seconds); request sizes, mix \
    and arrival rate are those of the whole run. File sizes shrink only if the files would \
    not fit in half the device. TwoWriters' --scale is the fraction of its 256 records per \
    file.\n\n\
    Setup (not measured) creates the files the trace finds existing and fills them as far \
    as the trace touches them. Requests are issued in trace order with at most \
    --queue-depth N in flight: a request is issued at its arrival, or, when N earlier \
    requests are still outstanding, as soon as the first of them completes. The file \
    system serves each request to its end, but every chip keeps its own timeline, so a \
    request's flash operations queue behind those already on the same chip and start at \
    once on idle chips: requests in flight overlap on different chips. With N = 1 (the \
    default) the replay is a single queue: a request starts at its arrival or when the \
    previous one completes, whichever is later. Response time is completion - arrival; \
    the device clock jumps over idle time. Writes are durable before they complete (write \
    then fsync, as O_SYNC). Only flash time is simulated: the file system's CPU time and \
    MA's thread hand-offs cost nothing.\n\n\
    Reported: mean, p50, p90, p99 and max response time, mean wait (arrival to issue) and \
    service (issue to completion), the makespan (first arrival to last completion) and \
    MB/s over it, request counts and bytes, the replay's simulated and host time and flash \
    counts, and the chip's projected life: each block's erases during the replay carried \
    forward at the trace's rate (or the makespan's, when the device falls behind) until the \
    most-erased block reaches the rated endurance (life y), with the wear spread (that \
    block's erases over the mean's) and, in JSON, the life if wear were even. With P > 1 the same trace is replayed on one chip too (at the same queue \
    depth) and normalized_to_p1 is the ratio of the mean response times (Figure 10's \
    normalisation). --sweep replays P = 1, 2, 4 and 8.";

#[derive(Args)]
#[command(group(ArgGroup::new("source").required(true).args(["trace", "trace_file"])))]
pub struct TraceArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// A synthetic trace: one of the MA paper's five (Table 3), or TwoWriters (ours).
    #[arg(long, value_enum, ignore_case = true, value_name = "NAME")]
    trace: Option<App>,
    /// Replay this CSV trace instead (see docs/trace-format.md).
    #[arg(long, value_name = "FILE")]
    trace_file: Option<PathBuf>,
    /// Write the generated trace to FILE as CSV ('-': stdout) and replay nothing.
    #[arg(long, value_name = "FILE", conflicts_with = "trace_file")]
    emit: Option<PathBuf>,
    /// Fraction of the application's run to generate, 0 < S <= 1 [default: at most
    /// 256 MiB of reads and writes].
    #[arg(long, value_name = "S", conflicts_with = "trace_file")]
    scale: Option<f64>,
    /// Seed of the synthetic trace (arrivals, mix, sizes, offsets) and of the data written.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    /// Replay on P = 1, 2, 4 and 8 chips (ignores --chips).
    #[arg(long)]
    sweep: bool,
    /// Requests in flight at most: a request is issued at its arrival or when one of N
    /// outstanding requests completes (1: a single queue, one request at a time).
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    queue_depth: u32,
    /// The host software's own cost in simulated time: 0, `calibrated` (what `bench
    /// software-cost` measured of nandkit's code), or
    /// `request=US,handoff=US,page=US,device=US`. A request's cost is charged at its issue.
    #[arg(long, default_value = "0", value_parser = crate::device_args::parse_software_cost, value_name = "COST")]
    software_cost: nandkit_flash::HostCost,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A trace ready to replay, and where it came from.
struct Loaded {
    name: String,
    source: &'static str,
    scale: Option<Scale>,
    requests: Vec<Request>,
}

#[derive(Serialize, Clone)]
struct Row {
    bench: &'static str,
    /// The synthetic trace's name, or the trace file's path.
    trace: String,
    /// "synthetic" or "file".
    source: &'static str,
    #[serde(flatten)]
    device: DeviceInfo,
    profile: String,
    /// Seed of the synthetic trace and of the data written (--workload-seed).
    seed: u64,
    /// Fraction of the application's run replayed (null for a trace file).
    scale: Option<f64>,
    /// Factor on the model's file sizes (null for a trace file).
    file_scale: Option<f64>,
    /// Requests in flight at most (--queue-depth).
    queue_depth: u32,
    /// Arrival of the last request, seconds.
    trace_span_s: f64,
    /// Files that exist before the trace starts.
    files: usize,
    /// Bytes setup wrote into them (not measured).
    setup_bytes: u64,
    #[serde(flatten)]
    summary: Summary,
    /// The replay: its simulated seconds (sim_s, idle time included), energy (energy_j,
    /// which idle time does not add to), host seconds and flash counts.
    #[serde(flatten)]
    phase: PhaseStats,
    /// mean_response_ms over that of the same trace replayed on one chip (at the same
    /// queue depth).
    normalized_to_p1: f64,
    /// Erases a block of this chip is rated for.
    endurance_cycles: u32,
    /// The replay's erases, block by block, carried forward at the trace's rate (its span,
    /// or the makespan when the device falls behind) until a block reaches the rating:
    /// erases_per_day, years_first_block, years_levelled, wear_spread (absent when the
    /// replay took no time).
    #[serde(flatten)]
    lifetime: Option<nandkit_models::Lifetime>,
}

pub fn run(mut args: TraceArgs) -> anyhow::Result<()> {
    // MA's design: a UBI per chip, at every P (P = 1 is UBIFS on one UBI).
    args.fs.ubi_by_default();
    let trace = load(&args)?;
    if let Some(path) = &args.emit {
        return emit(&args, &trace, path);
    }
    let chips: Vec<u32> = if args.sweep {
        vec![1, 2, 4, 8]
    } else {
        vec![args.device.chips]
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut base = None;
    if !args.sweep && args.device.chips > 1 {
        base = Some(one(&args, &trace, 1)?.summary.mean_response_ms);
    }
    for p in chips {
        let mut row = one(&args, &trace, p)?;
        let b = *base.get_or_insert(row.summary.mean_response_ms);
        row.normalized_to_p1 = row.summary.mean_response_ms / b;
        if !args.json {
            if rows.is_empty() {
                print_header(&describe(&args, &trace), &row);
            }
            print_row(&row);
        }
        rows.push(row);
    }
    if args.json {
        print_rows_json(&rows, args.sweep)?;
    }
    Ok(())
}

fn load(args: &TraceArgs) -> anyhow::Result<Loaded> {
    if let Some(path) = &args.trace_file {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let requests =
            format::parse(&bytes).with_context(|| format!("trace file {}", path.display()))?;
        return Ok(Loaded {
            name: path.display().to_string(),
            source: "file",
            scale: None,
            requests,
        });
    }
    let app = args
        .trace
        .context("give --trace NAME or --trace-file FILE")?;
    // Capacity is the same for every P, so one fit serves a whole sweep.
    let device_bytes = args.device.config_on(1)?.geometry.total_bytes();
    let scale = synth::fit(app, device_bytes, args.scale)?;
    let requests = synth::generate(app, args.workload_seed, scale);
    ensure!(
        !requests.is_empty(),
        "--scale {} of {} gives no requests; use a larger --scale",
        scale.time,
        app.name()
    );
    Ok(Loaded {
        name: app.name().to_string(),
        source: "synthetic",
        scale: Some(scale),
        requests,
    })
}

/// What a generated trace is, in one line (the emitted file's comment, the table's title).
fn describe(args: &TraceArgs, trace: &Loaded) -> String {
    match (trace.scale, args.trace) {
        (Some(s), Some(App::TwoWriters)) => format!(
            "{} (synthetic, ours, seed {}), scale {:.4}{}: {}",
            trace.name,
            args.workload_seed,
            s.time,
            if s.auto { " (auto)" } else { "" },
            synth::two_writers_summary(s)
        ),
        (Some(s), Some(app)) => format!(
            "{} (synthetic, seed {}), scale {:.4}{}: the first {:.1} s of the app's {} s, \
             file sizes x{:.3}",
            trace.name,
            args.workload_seed,
            s.time,
            if s.auto { " (auto)" } else { "" },
            s.time * app.run_s(),
            app.run_s(),
            s.files
        ),
        _ => format!("{} (file)", trace.name),
    }
}

fn emit(args: &TraceArgs, trace: &Loaded, path: &Path) -> anyhow::Result<()> {
    let comments = [
        format!("made by nandkit bench trace: {}", describe(args, trace)),
        "assumptions: docs/trace-format.md".to_string(),
    ];
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        format::write(&mut out, &comments, &trace.requests)?;
        out.flush()?;
        return Ok(());
    }
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    format::write(&mut out, &comments, &trace.requests)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing {}", path.display()))?;
    if !args.json {
        println!(
            "wrote {} requests of {} to {}",
            trace.requests.len(),
            describe(args, trace),
            path.display()
        );
    }
    Ok(())
}

/// Formats a device of `chips` chips, sets the trace's files up and replays it.
fn one(args: &TraceArgs, trace: &Loaded, chips: u32) -> anyhow::Result<Row> {
    let config = args.device.config_on(chips)?;
    let info = DeviceInfo::of(&config);
    let options = nandkit_flash::DeviceOptions {
        host: args.software_cost,
        ..Default::default()
    };
    let mut fs = super::format_on(config, &args.fs, options)?;
    let quiet = args.json;
    let prepared = replay::prepare(&mut fs, &trace.requests, args.workload_seed, quiet)
        .context("setting up the trace's files")?;
    let (files, setup_bytes) = (prepared.files(), prepared.bytes);
    let worn_before = Subject::erase_counts(&mut fs);
    let start = Snapshot::take(&mut fs);
    let served = replay::replay(
        &mut fs,
        prepared,
        &trace.requests,
        args.workload_seed,
        args.queue_depth as usize,
        quiet,
    )
    .with_context(|| format!("replaying {} on {chips} chip(s)", trace.name))?;
    let end = Snapshot::take(&mut fs);
    let phase = PhaseStats::between(&start, &end, fs.chunk_bytes());
    let erased = fs.erases_since(&worn_before);
    let endurance = fs.device_mut().inner_mut().config().wear.endurance_cycles;
    let summary = Summary::of(&served);
    let trace_span_s = trace.requests.last().map_or(0, |r| r.arrival_us) as f64 / 1e6;
    let lifetime = replay::projected_life(&trace.requests, &summary, &erased, endurance);
    Ok(Row {
        bench: "trace",
        trace: trace.name.clone(),
        source: trace.source,
        device: info,
        profile: args.fs.profile.clone(),
        seed: args.workload_seed,
        scale: trace.scale.map(|s| s.time),
        file_scale: trace.scale.map(|s| s.files),
        queue_depth: args.queue_depth,
        trace_span_s,
        files,
        setup_bytes,
        summary,
        phase,
        normalized_to_p1: 1.0,
        endurance_cycles: endurance,
        lifetime,
    })
}

fn print_header(title: &str, r: &Row) {
    let s = &r.summary;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!("trace       {title}");
    println!(
        "requests    {} over {:.1} s: {} reads, {} writes, {} creates, {} deletes; \
         {:.1} MiB read, {:.1} MiB written",
        s.requests,
        r.trace_span_s,
        s.reads,
        s.writes,
        s.creates,
        s.deletes,
        mib(s.bytes_read),
        mib(s.bytes_written)
    );
    println!(
        "setup       {} files, {:.1} MiB (not measured)",
        r.files,
        mib(r.setup_bytes)
    );
    println!(
        "device      {}, {} MiB, profile {}, device seed {:#x}",
        r.device.geometry,
        r.device.device_bytes >> 20,
        r.profile,
        r.device.device_seed
    );
    println!(
        "{:>5} {:>5} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>11} {:>8} {:>9} {:>8} {:>7} {:>7} {:>9} {:>6}",
        "chips",
        "qd",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "wait ms",
        "read ms",
        "write ms",
        "makespan ms",
        "MB/s",
        "energy J",
        "host s",
        "erases",
        "vs P=1",
        "life y",
        "spread"
    );
}

fn print_row(r: &Row) {
    let s = &r.summary;
    println!(
        "{:>5} {:>5} {:>9.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>11.3} {:>8.3} {:>9.3} {:>8.2} {:>7} {:>7.3} {:>9} {:>6}",
        r.device.chips,
        r.queue_depth,
        s.mean_response_ms,
        s.p50_response_ms,
        s.p90_response_ms,
        s.p99_response_ms,
        s.max_response_ms,
        s.mean_wait_ms,
        s.mean_read_response_ms,
        s.mean_write_response_ms,
        s.makespan_ms,
        s.mb_per_s,
        r.phase.energy_j,
        r.phase.host_s,
        r.phase.flash_erases,
        r.normalized_to_p1,
        r.lifetime.map_or("-".into(), |l| years(l.years_first_block)),
        r.lifetime.map_or("-".into(), |l| format!("{:.2}", l.wear_spread))
    );
}

/// Years as a table shows them (no erase: never).
fn years(y: f64) -> String {
    match y {
        y if y.is_infinite() => "never".into(),
        y if y >= 100.0 => format!("{y:.0}"),
        y => format!("{y:.2}"),
    }
}
