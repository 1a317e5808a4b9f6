//! `nandkit bench peers`: littlefs, the C library, beside every nandkit profile on the
//! same simulated flash, through the same workloads: the operations users ask about first,
//! then the papers' workloads. Each file system counts the same reads, programs, erases,
//! simulated time and energy; heap is what the mounted file system holds (the counting
//! allocator; littlefs is built without malloc, so its buffers are counted too).

mod peer;
mod power_cut;
mod scripted;

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use self::peer::{Budgeted, Counters, Peer, OVER_BUDGET};
use super::print_json;
use crate::device_args::DeviceArgs;
use nandkit_workloads::TargetError;

pub const LONG_ABOUT: &str = "Runs the same workloads on littlefs (the C library, on the same \
    simulated chip through an adapter: a page per read and program, an erase block per \
    littlefs block) and on each nandkit profile: format; many small files; one large \
    sequential file; small overwrites inside it; a remount; deleting everything; files until \
    the device is full; random overwrites of a file filling most of the device; then the \
    papers' workloads (crates/workloads), each on a fresh device. Every row: page reads, \
    programs, erases, simulated ms, energy, host ms, heap the mounted file system holds, and \
    the outcome (ok, enospc at N, stopped: over budget). littlefs has no bad-block handling, \
    so its device has no factory bad blocks. Last, a power-cut comparison: a small-file \
    workload cut at every flash operation, on littlefs and yaffs (how many cut points \
    mount; whether every fsync'd file reads back).";

#[derive(Args)]
pub struct PeersArgs {
    /// Device preset (see `nandkit presets`); one chip.
    #[arg(long, short = 'g', default_value = "mlc-1g", value_name = "NAME")]
    geometry: String,
    /// Device capacity [default: the preset's, at most 64 MiB: littlefs walks its metadata
    /// to allocate, so a small device keeps the default run short].
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    device_size: Option<u64>,
    /// Seed for the device's random draws (bit errors).
    #[arg(long, value_name = "SEED")]
    seed: Option<u64>,
    /// File systems, comma-separated: littlefs and nandkit profiles [default: littlefs and
    /// every profile].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    fs: Vec<String>,
    /// Papers' workloads to run after the scripted ones, comma-separated ("none" for none).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fax,phone,recorder,camera,postmark,andrew,movie",
        value_name = "NAMES"
    )]
    workloads: Vec<String>,
    /// Small files of the small-files workload.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    small_files: u64,
    /// 4 KiB random overwrites of the random-overwrite workload.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    overwrites: u64,
    /// Simulated seconds a workload may take before it is stopped.
    #[arg(long, default_value_t = 600.0, value_name = "S")]
    budget_sim_s: f64,
    /// Host seconds a workload may take before it is stopped.
    #[arg(long, default_value_t = 60.0, value_name = "S")]
    budget_host_s: f64,
    /// Cut points of the power-cut comparison (every flash op of its workload up to this
    /// many; 0 skips it).
    #[arg(long, default_value_t = 400, value_name = "N")]
    cut_points: u64,
    /// Seed of the workloads.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    #[command(flatten)]
    nvram: crate::bench::BenchNvramArgs,
    /// Print a JSON array of rows instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone)]
pub struct Row {
    fs: String,
    workload: String,
    page_reads: u64,
    page_programs: u64,
    block_erases: u64,
    sim_ms: f64,
    energy_j: f64,
    host_ms: f64,
    heap_bytes: u64,
    /// "ok", "enospc at N", "stopped: over budget at op N", or the error.
    outcome: String,
    /// The device the row ran on, and what littlefs's lacked.
    device: String,
}

impl Row {
    /// A row with nothing counted: a step that did not run, or a result that is not a
    /// count (the power-cut comparison's).
    fn empty(fs: &str, workload: &str, outcome: String) -> Row {
        Row {
            fs: fs.to_string(),
            workload: workload.to_string(),
            page_reads: 0,
            page_programs: 0,
            block_erases: 0,
            sim_ms: 0.0,
            energy_j: 0.0,
            host_ms: 0.0,
            heap_bytes: 0,
            outcome,
            device: String::new(),
        }
    }
}

/// The budget and seed every run shares.
pub struct Limits {
    sim_budget_ns: u64,
    host_budget: Duration,
    seed: u64,
    /// The NVRAM a profile with metadata there gets.
    nvram: crate::bench::BenchNvramArgs,
}

pub fn run(args: PeersArgs) -> anyhow::Result<()> {
    let preset_bytes = nandkit_flash::preset(&args.geometry)?
        .geometry
        .total_bytes();
    let device_size = args
        .device_size
        .unwrap_or(preset_bytes.min(DEFAULT_MAX_BYTES));
    let config = DeviceArgs {
        geometry: args.geometry.clone(),
        chips: 1,
        device_size: Some(device_size),
        seed: args.seed,
    }
    .config()?;
    let fs_list: Vec<String> = if args.fs.is_empty() {
        std::iter::once("littlefs".to_string())
            .chain(nandkit_fs::PROFILES.iter().map(|p| p.to_string()))
            .collect()
    } else {
        args.fs.clone()
    };
    // Bad names and budgets are refused before anything runs.
    for fs in &fs_list {
        anyhow::ensure!(
            fs == "littlefs" || nandkit_fs::PROFILES.contains(&fs.as_str()),
            "--fs {fs}: not littlefs or a profile (profiles: {})",
            nandkit_fs::PROFILES.join(", ")
        );
    }
    for w in args.workloads.iter().filter(|w| w.as_str() != "none") {
        anyhow::ensure!(
            nandkit_workloads::by_name(w, 0, config.geometry.total_bytes()).is_some(),
            "--workloads {w}: unknown (known: {}, or none)",
            nandkit_workloads::NAMES.join(", ")
        );
    }
    anyhow::ensure!(
        args.budget_sim_s > 0.0 && args.budget_host_s > 0.0,
        "--budget-sim-s and --budget-host-s must be positive"
    );
    let limits = Limits {
        sim_budget_ns: (args.budget_sim_s * 1e9) as u64,
        host_budget: Duration::from_secs_f64(args.budget_host_s),
        seed: args.workload_seed,
        nvram: args.nvram.clone(),
    };
    let mut rows = Vec::new();
    for fs in &fs_list {
        if !args.json {
            eprintln!("bench peers: {fs}");
        }
        let got = scripted::run_all(&config, fs, &args, &limits).with_context(|| fs.to_string())?;
        rows.extend(got);
        for w in args.workloads.iter().filter(|w| w.as_str() != "none") {
            rows.push(paper_workload(&config, fs, w, &limits)?);
        }
    }
    if args.cut_points > 0 {
        let corrupt = nandkit_littlefs::LFS_ERR_CORRUPT;
        for fs in fs_list
            .iter()
            .filter(|f| ["littlefs", "yaffs"].contains(&f.as_str()))
        {
            rows.push(power_cut::run(
                fs,
                args.cut_points,
                corrupt,
                &args.nvram,
                args.json,
            )?);
            if fs == "littlefs" {
                let io = nandkit_littlefs::LFS_ERR_IO;
                rows.push(power_cut::run(
                    fs,
                    args.cut_points,
                    io,
                    &args.nvram,
                    args.json,
                )?);
            }
        }
    }
    let device = format!("{} at {}", args.geometry, human_size(device_size));
    for r in &mut rows {
        r.device = match (r.fs.as_str(), r.workload.starts_with("power-cut")) {
            ("littlefs", true) => format!("tiny, {NO_BAD_BLOCKS}"),
            (_, true) => "tiny".into(),
            ("littlefs", false) => format!("{device}, {NO_BAD_BLOCKS}"),
            _ => device.clone(),
        };
    }
    if args.json {
        return print_json(&rows);
    }
    print_table(&rows);
    println!(
        "\nDevice: {device}; power cuts on tiny (8 MiB) without bit errors. littlefs's \
         devices have no factory bad blocks (littlefs has no bad-block handling); an \
         uncorrectable read is LFS_ERR_CORRUPT to it (LFS_ERR_IO in the \"ecc eio\" row)."
    );
    Ok(())
}

/// The default run's largest device.
const DEFAULT_MAX_BYTES: u64 = 64 << 20;

const NO_BAD_BLOCKS: &str = "no factory bad blocks (littlefs has no bad-block handling)";

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b} B"),
    }
}

/// One measured span: counters and host clock at its start.
struct Span {
    at: Counters,
    host: Instant,
    heap_base: crate::compare::design::HeapBase,
}

impl Span {
    fn start(peer: &mut Peer, heap_base: crate::compare::design::HeapBase) -> Span {
        Span {
            at: peer.counters(),
            host: Instant::now(),
            heap_base,
        }
    }

    /// A span that began before the file system existed (a format): from zero.
    fn from_zero(host: Instant, heap_base: crate::compare::design::HeapBase) -> Span {
        Span {
            at: Counters {
                ns: 0,
                pj: 0,
                reads: 0,
                programs: 0,
                erases: 0,
            },
            host,
            heap_base,
        }
    }

    fn row(&self, peer: &mut Peer, fs: &str, workload: &str, outcome: String) -> Row {
        let now = peer.counters();
        let violations = peer.violations();
        Row {
            fs: fs.to_string(),
            workload: workload.to_string(),
            page_reads: now.reads - self.at.reads,
            page_programs: now.programs - self.at.programs,
            block_erases: now.erases - self.at.erases,
            sim_ms: (now.ns - self.at.ns) as f64 / 1e6,
            energy_j: (now.pj - self.at.pj) as f64 / 1e12,
            host_ms: self.host.elapsed().as_secs_f64() * 1e3,
            heap_bytes: peer.heap_bytes(self.heap_base),
            device: String::new(),
            outcome: if violations > 0 {
                format!("{outcome} ({violations} NAND rule violations)")
            } else {
                outcome
            },
        }
    }
}

/// What a run's error says in the row: full, over budget, or the error itself.
fn outcome(result: Result<(), TargetError>, ops: u64, over: bool) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(_) if over => format!("stopped: {OVER_BUDGET} at op {ops}"),
        Err(TargetError::NoSpace) => format!("enospc at {ops}"),
        Err(e) => format!("error at op {ops}: {e}"),
    }
}

fn budgeted<'a>(peer: &'a mut Peer, limits: &Limits) -> Budgeted<'a> {
    let start_ns = peer.now_ns();
    Budgeted {
        peer,
        start_ns,
        sim_budget_ns: limits.sim_budget_ns,
        host_start: Instant::now(),
        host_budget: limits.host_budget,
        over: false,
        calls: 0,
    }
}

fn paper_workload(
    config: &nandkit_flash::DeviceConfig,
    fs: &str,
    name: &str,
    limits: &Limits,
) -> anyhow::Result<Row> {
    let device_bytes = config.geometry.total_bytes();
    let mut load = nandkit_workloads::by_name(name, limits.seed, device_bytes)
        .with_context(|| format!("unknown workload {name}"))?;
    let (mut peer, heap_before) = Peer::format(config, fs, &limits.nvram)?;
    let span = Span::start(&mut peer, heap_before);
    let mut b = budgeted(&mut peer, limits);
    let result = load.run(&mut b);
    let (over, calls) = (b.over, b.calls);
    // A paper workload's point of stopping is its file system call count.
    let text = match result {
        Ok(s) => match s.enospc {
            Some(n) => format!("enospc at op {n}"),
            None => "ok".into(),
        },
        Err(_) if over => format!("stopped: {OVER_BUDGET} at call {calls}"),
        Err(TargetError::NoSpace) => format!("enospc at call {calls}"),
        Err(e) => format!("error at call {calls}: {e}"),
    };
    Ok(span.row(&mut peer, fs, name, text))
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<9} {:<17} {:>9} {:>9} {:>7} {:>11} {:>9} {:>9} {:>9}  outcome",
        "fs", "workload", "reads", "programs", "erases", "sim_ms", "energy_J", "host_ms", "heap_B"
    );
    for r in rows {
        println!(
            "{:<9} {:<17} {:>9} {:>9} {:>7} {:>11.1} {:>9.4} {:>9.1} {:>9}  {}",
            r.fs,
            r.workload,
            r.page_reads,
            r.page_programs,
            r.block_erases,
            r.sim_ms,
            r.energy_j,
            r.host_ms,
            r.heap_bytes,
            r.outcome
        );
    }
}

/// The workloads' random offsets.
fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}
