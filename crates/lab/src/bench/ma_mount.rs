//! `nandkit bench ma-mount`: the MA paper's mount-time scenarios (Figure 6) on P chips.

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_fs::NewObject;
use nandkit_fs::{MountMethod, ROOT_INO};
use serde::Serialize;

use super::{directory, noise, print_json, FsArgs, Progress};
use crate::device_args::DeviceArgs;

pub const LONG_ABOUT: &str =
    "For each scenario of the MA paper's Figure 6, formats a RAM device of P chips \
    (capacity constant as P changes), fills it (nothing; one 50 MB file; one 100 MB file; \
    16,000 or 35,000 files of 2 KB, 1,000 to a directory), unmounts cleanly, then mounts \
    the default way (from the checkpoint the unmount wrote) and by a forced full scan. \
    Reported: simulated and host milliseconds, energy and flash reads of each mount.\n\n\
    A scan reads one page per block (its summary) and more for blocks without one; on P \
    chips a block is P chips' blocks, so there are P times fewer of them. A checkpoint \
    mount reads the checkpoint's pages, which lie over all chips.\n\n\
    mount_heap_bytes is the heap the mounted file system holds (the paper's Figure 9, RAM \
    by P). Its per-block tables shrink as P grows (fewer, larger blocks). MA-UBIFS's RAM \
    grew with P from one kernel thread per device; nandkit's threaded executor (used by \
    `mount --realtime`) likewise adds one worker thread per chip, whose stack is not heap.";

#[derive(Args)]
pub struct MaMountArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// The host software's own cost in simulated time: 0, `calibrated` (what `bench
    /// software-cost` measured of nandkit's code), or
    /// `request=US,handoff=US,page=US,device=US` (`device`: per chip's worker started at
    /// mount).
    #[arg(long, default_value = "0", value_parser = crate::device_args::parse_software_cost, value_name = "COST")]
    software_cost: nandkit_flash::HostCost,
    /// Who runs the chips after the mount: the calling thread (sim), or, as MA-UBIFS, a
    /// worker thread per chip started by the mount (threaded; arrays only: one chip has no
    /// dispatcher). The workers' heap (queues, shared chips) is in mount_heap_bytes, their
    /// stacks in worker_stack_bytes.
    #[arg(long, value_enum, default_value = "sim")]
    executor: crate::flash_bench::ExecutorArg,
    /// Only the new file system and the 50 MB file (seconds, for smoke tests).
    #[arg(long)]
    quick: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    bench: &'static str,
    geometry: String,
    chips: u32,
    scenario: String,
    /// The default mount (from the checkpoint).
    mount_sim_ms: f64,
    mount_energy_j: f64,
    mount_host_ms: f64,
    mount_method: MountMethod,
    mount_reads: u64,
    /// UBI's attach before the mount (the scan of every PEB's two header pages; 0 with
    /// `--ubi off`), which the paper's Figure 6 leaves out (`ubiattach` runs at boot).
    attach_sim_ms: f64,
    /// Heap the mount holds (MA's Figure 9: RAM by P), after the checkpoint mount: the file
    /// system, UBI's maps and the workers' queues; the RAM device's own bytes are not
    /// counted.
    mount_heap_bytes: u64,
    /// Worker threads the mount started (0 with --executor sim, or on one chip).
    worker_threads: u32,
    /// Their stacks (each reserves `WORKER_STACK_BYTES`).
    worker_stack_bytes: u64,
    /// mount_heap_bytes + worker_stack_bytes.
    mount_ram_bytes: u64,
    scan_mount_sim_ms: f64,
    scan_mount_energy_j: f64,
    scan_mount_host_ms: f64,
    scan_mount_reads: u64,
}

enum Fill {
    Nothing,
    OneFile(u64),
    SmallFiles(u64),
}

const SCENARIOS: [(&str, Fill); 5] = [
    ("new", Fill::Nothing),
    ("one 50 MB file", Fill::OneFile(50_000_000)),
    ("one 100 MB file", Fill::OneFile(100_000_000)),
    ("16,000 files of 2 KB", Fill::SmallFiles(16_000)),
    ("35,000 files of 2 KB", Fill::SmallFiles(35_000)),
];

pub fn run(mut args: MaMountArgs) -> anyhow::Result<()> {
    if args.fs.profile == "ubifs" {
        use super::ma_mount_ubifs::UbifsFill;
        let all = [
            ("new", UbifsFill::Nothing),
            ("one 50 MB file", UbifsFill::OneFile(50_000_000)),
            ("one 100 MB file", UbifsFill::OneFile(100_000_000)),
            ("16,000 files of 2 KB", UbifsFill::SmallFiles(16_000)),
            ("35,000 files of 2 KB", UbifsFill::SmallFiles(35_000)),
        ];
        let take = if args.quick { 2 } else { all.len() };
        let threaded = args.executor == crate::flash_bench::ExecutorArg::Threaded;
        return super::ma_mount_ubifs::run(
            args.device.config()?,
            &all[..take],
            threaded,
            args.json,
        );
    }
    // MA's design: a UBI per chip, at every P (P = 1 is UBIFS on one UBI).
    args.fs.ubi_by_default();
    let mut rows = Vec::new();
    let take = if args.quick { 2 } else { SCENARIOS.len() };
    for (name, fill) in &SCENARIOS[..take] {
        let row = scenario(&args, name, fill)?;
        if !args.json {
            if rows.is_empty() {
                println!(
                    "{:<22} {:>5} {:>16} {:>8} {:>8} {:>14} {:>8} {:>8} {:>10}",
                    "scenario",
                    "chips",
                    "checkpoint ms",
                    "mJ",
                    "reads",
                    "scan ms",
                    "mJ",
                    "reads",
                    "heap KiB"
                );
            }
            println!(
                "{:<22} {:>5} {:>16.2} {:>8.3} {:>8} {:>14.2} {:>8.3} {:>8} {:>10.1}",
                row.scenario,
                row.chips,
                row.mount_sim_ms,
                row.mount_energy_j * 1e3,
                row.mount_reads,
                row.scan_mount_sim_ms,
                row.scan_mount_energy_j * 1e3,
                row.scan_mount_reads,
                row.mount_heap_bytes as f64 / 1024.0
            );
        }
        rows.push(row);
    }
    if args.json {
        print_json(&rows)?;
    }
    Ok(())
}

fn scenario(args: &MaMountArgs, name: &str, fill: &Fill) -> anyhow::Result<Row> {
    let config = args.device.config()?;
    let geometry = config.name.clone();
    let chips = config.geometry.chips;
    let options = nandkit_flash::DeviceOptions {
        host: args.software_cost,
        ..Default::default()
    };
    let mut fs = super::format_on(config, &args.fs, options)?;
    match *fill {
        Fill::Nothing => {}
        Fill::OneFile(bytes) => {
            let ino = fs.create(ROOT_INO, b"big", NewObject::regular_file())?.ino;
            let step = 1 << 20;
            let data = noise(step as usize, 1);
            let mut progress = Progress::bytes(bytes, "writing", args.json);
            let mut off = 0;
            while off < bytes {
                let n = step.min(bytes - off) as usize;
                let done = fs.write(ino, off, &data[..n]).context("writing")?;
                ensure!(done == n, "short write at {off}: the device is full");
                off += n as u64;
                progress.inc(n as u64);
            }
            progress.finish();
            fs.fsync(ino)?;
        }
        Fill::SmallFiles(n) => {
            let data = noise(2000, 2);
            let mut progress = Progress::items(n, "files", args.json);
            let mut dir = ROOT_INO;
            for i in 0..n {
                if i % 1000 == 0 {
                    let dname = format!("d{}", i / 1000);
                    dir = fs.create(ROOT_INO, dname.as_bytes(), directory())?.ino;
                }
                let fname = format!("f{i}");
                let ino = fs
                    .create(dir, fname.as_bytes(), NewObject::regular_file())?
                    .ino;
                fs.write(ino, 0, &data).context("writing")?;
                fs.fsync(ino)?;
                progress.inc(1);
            }
            progress.finish();
        }
    }
    let dev = fs.unmount().context("unmounting")?;
    let threaded = args.executor == crate::flash_bench::ExecutorArg::Threaded && chips > 1;
    let (mount, reads, heap, fs) = measure(dev, false, threaded)?;
    let (scan, scan_reads, _, _) = measure(fs.into_device(), true, threaded)?;
    let workers = if threaded { chips } else { 0 };
    let stacks = u64::from(workers) * nandkit_flash::executor::threaded::WORKER_STACK_BYTES as u64;
    Ok(Row {
        bench: "ma-mount",
        geometry,
        chips,
        scenario: name.to_string(),
        mount_sim_ms: mount.sim_ms,
        mount_energy_j: mount.energy_j,
        mount_host_ms: mount.host_ms,
        mount_method: mount.method,
        mount_reads: reads,
        attach_sim_ms: mount.attach_sim_ms,
        mount_heap_bytes: heap,
        worker_threads: workers,
        worker_stack_bytes: stacks,
        mount_ram_bytes: heap + stacks,
        scan_mount_sim_ms: scan.sim_ms,
        scan_mount_energy_j: scan.energy_j,
        scan_mount_host_ms: scan.host_ms,
        scan_mount_reads: scan_reads,
    })
}

/// One timed mount, the flash reads it made and the heap the mounted file system holds.
fn measure(
    dev: nandkit_flash::StripedDevice,
    force_scan: bool,
    threaded: bool,
) -> anyhow::Result<(super::MountTiming, u64, u64, super::Fs)> {
    // UBI's maps go with the detach, so the heap counts the ones the attach builds.
    let ubi = dev.ubi().map(|u| u.attach_options());
    let mut chips = dev.into_inner();
    let before = chips.stats().total();
    let heap_before = crate::heap::live_bytes();
    // MA's mount starts a worker per chip (the threads' host time is --software-cost's
    // `device`; their heap is measured here).
    if threaded {
        chips.set_executor(nandkit_flash::ExecutorKind::Threaded);
    }
    let (mut fs, timing) = super::timed_mount_chips(chips, ubi, force_scan)?;
    let heap = crate::heap::live_bytes().saturating_sub(heap_before) as u64;
    let after = fs.device_mut().stats().total();
    let reads = after.page_reads + after.oob_reads - before.page_reads - before.oob_reads;
    Ok((timing, reads, heap, fs))
}
