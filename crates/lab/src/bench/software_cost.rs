//! `nandkit bench software-cost`: the host software's own cost, measured on nandkit's own
//! code path (the calibration), then swept to show where MA's results depend on it.
//!
//! Calibration, all host (wall) time on this machine, median of `--repeat` runs:
//! - the simulator's own cost per page program (a bare device, no file system), which is
//!   not the host software's and is taken out of what follows;
//! - `request` and `page`: O_SYNC writes of 1-page and 64-page records through the file
//!   system (simulated executor, one chip); host time per record = request + pages x page;
//! - `handoff`: the 64-page records on 4 chips, threaded executor (a dispatcher and a
//!   worker thread per chip) against simulated: the difference per operation submitted;
//! - `device`: starting and stopping a 4-chip threaded device against a simulated one, per
//!   chip.
//!
//! Sweep: the calibrated cost times each `--scales` factor, charged in simulated time, on
//! the MA paper's measurements: 16 MiB O_SYNC sequential writes on SLC, MLC and TLC at 1
//! and 4 chips, 4 MiB records (the cell-type trend), and the new file system's mount.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_flash::{Command, DeviceOptions, ExecutorKind, Flash, FlashDevice, HostCost, PageAddr};
use nandkit_fs::{NewObject, ROOT_INO};
use serde::Serialize;

use super::iozone::{self, IozoneArgs, Mode};
use super::{format_on, noise, print_json, FsArgs};
use crate::device_args::{DeviceArgs, CALIBRATED_SOFTWARE_COST};
use crate::flash_bench::ExecutorArg;

pub const LONG_ABOUT: &str = "Measures nandkit's own host cost per request, per page, per \
    hand-off to a chip's worker thread and per worker started at mount (wall time on this \
    machine, the simulator's own cost per page taken out), prints it as a \
    --software-cost value, then (unless --no-sweep) charges that cost times each of \
    --scales in simulated time on the MA paper's measurements: 16 MiB O_SYNC sequential \
    writes at 1 and 4 chips on SLC, MLC and TLC (Figure 8's speed-ups), TLC's gain over \
    SLC's at 4 MiB records (section 4.3's cell-type trend) and the new file system's mount \
    at 1 and 4 chips (Figure 6). --software-cost calibrated on the other benches is the \
    figure this command measured when the README was written (CALIBRATED_SOFTWARE_COST).";

#[derive(Args)]
pub struct SoftwareCostArgs {
    /// Runs of each measurement; the median is kept.
    #[arg(long, default_value_t = 5, value_name = "N")]
    repeat: u32,
    /// Factors of the calibrated cost to sweep.
    #[arg(
        long,
        default_value = "0,1,10,30,100,300",
        value_delimiter = ',',
        value_name = "K,..."
    )]
    scales: Vec<f64>,
    /// Sweep this cost instead of the one just measured (e.g. `calibrated`, or
    /// `request=US,handoff=US,page=US,device=US`).
    #[arg(long, value_parser = crate::device_args::parse_software_cost, value_name = "COST")]
    base: Option<HostCost>,
    /// Only calibrate.
    #[arg(long)]
    no_sweep: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Calibration {
    /// What the sweep multiplies (the measured cost unless --base).
    cost: HostCost,
    measured: HostCost,
    /// As a --software-cost value.
    software_cost: String,
    /// The simulator's own host time per page program (taken out of `page`).
    simulator_page_ns: u64,
    /// The value `--software-cost calibrated` charges (measured when the README was
    /// written).
    built_in: HostCost,
}

#[derive(Serialize)]
struct SweepRow {
    scale: f64,
    cost: HostCost,
    /// 16 MiB records, 4 chips over 1.
    speedup_16m_slc: f64,
    speedup_16m_mlc: f64,
    speedup_16m_tlc: f64,
    /// 4 MiB records: TLC's gain (speed-up - 1) over SLC's (the paper: 5.6).
    tlc_gain_over_slc_4m: f64,
    /// The new file system's mount, simulated ms, and 4 chips over 1 (the paper: 1.17).
    mount_p1_ms: f64,
    mount_p4_ms: f64,
    mount_p4_over_p1: f64,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    calibration: Calibration,
    sweep: Vec<SweepRow>,
}

pub fn run(args: SoftwareCostArgs) -> anyhow::Result<()> {
    ensure!(args.repeat > 0, "--repeat must be at least 1");
    let (measured, simulator_page_ns) = calibrate(args.repeat)?;
    let cost = args.base.unwrap_or(measured);
    if !args.json {
        println!(
            "measured on this machine (host time, median of {}):",
            args.repeat
        );
        println!(
            "  request {:.2} us, page {:.2} us (simulator's own {:.2} us/page taken out), \
             handoff {:.2} us, device {:.2} us",
            measured.request_ns as f64 / 1e3,
            measured.page_ns as f64 / 1e3,
            simulator_page_ns as f64 / 1e3,
            measured.handoff_ns as f64 / 1e3,
            measured.device_ns as f64 / 1e3
        );
        println!("  --software-cost {measured}");
        println!("  built in as `calibrated`: {CALIBRATED_SOFTWARE_COST}");
    }
    let mut sweep = Vec::new();
    if !args.no_sweep {
        for &k in &args.scales {
            ensure!(k >= 0.0 && k.is_finite(), "--scales: {k} is not a factor");
            let row = sweep_row(k, cost.scaled(k))?;
            if !args.json {
                print_sweep(&row, sweep.is_empty());
            }
            sweep.push(row);
        }
    }
    if args.json {
        print_json(&Report {
            bench: "software-cost",
            calibration: Calibration {
                cost,
                measured,
                software_cost: measured.to_string(),
                simulator_page_ns,
                built_in: CALIBRATED_SOFTWARE_COST,
            },
            sweep,
        })?;
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The cost of the simulator itself per page program: host time of a bare device.
fn simulator_page_ns() -> anyhow::Result<f64> {
    let config = nandkit_flash::preset("tlc-1g")?.with_total_bytes(64 << 20)?;
    let mut dev = FlashDevice::ram(config)?;
    let g = dev.geometry();
    let data = noise(g.page_size_bytes as usize, 9);
    let oob = vec![0xFF; g.oob_size_bytes as usize];
    let pages = 4 * g.pages_per_block;
    let t = Instant::now();
    for k in 0..pages {
        let addr = PageAddr::new(0, 1 + k / g.pages_per_block, k % g.pages_per_block);
        let done = dev.submit(vec![Command::Program {
            addr,
            data: data.clone(),
            oob: oob.clone(),
        }]);
        for c in done {
            c.result.context("programming the bare device")?;
        }
    }
    Ok(t.elapsed().as_nanos() as f64 / f64::from(pages))
}

/// Host time per record and page programs per record of O_SYNC writes of `pages`-page
/// records, on `chips` chips run by `executor`; and operations submitted per record.
fn records(pages: u64, chips: u32, executor: ExecutorKind) -> anyhow::Result<(f64, f64, f64)> {
    let device = DeviceArgs {
        geometry: "tlc-1g".into(),
        chips,
        device_size: Some(256 << 20),
        seed: None,
    };
    let options = DeviceOptions {
        executor,
        ..Default::default()
    };
    let mut fs = format_on(device.config()?, &FsArgs::default(), options)?;
    let ino = fs.create(ROOT_INO, b"cal", NewObject::regular_file())?.ino;
    let record = pages * 4096;
    let n = (16u64 << 20) / record;
    let data = noise(record as usize, 1);
    let before = fs.device_mut().stats().total();
    let mut host = Duration::ZERO;
    for k in 0..n {
        let t = Instant::now();
        fs.write(ino, k * record, &data)?;
        fs.fsync(ino)?;
        host += t.elapsed();
    }
    let after = fs.device_mut().stats().total();
    let programs = (after.programs - before.programs) as f64 / n as f64;
    let ops = (after.programs + after.page_reads + after.oob_reads + after.erases
        - before.programs
        - before.page_reads
        - before.oob_reads
        - before.erases) as f64
        / n as f64;
    Ok((host.as_nanos() as f64 / n as f64, programs, ops))
}

/// Host nanoseconds to start and stop a 4-chip device run by `executor`.
fn device_start_ns(executor: ExecutorKind) -> anyhow::Result<f64> {
    let config = nandkit_flash::preset("tlc-1g")?
        .with_total_bytes(64 << 20)?
        .with_chips(4)?;
    let t = Instant::now();
    let dev = FlashDevice::ram_with(
        config,
        DeviceOptions {
            executor,
            ..Default::default()
        },
    )?;
    drop(dev);
    Ok(t.elapsed().as_nanos() as f64)
}

/// Measures the four parameters (and the simulator's own cost per page).
fn calibrate(repeat: u32) -> anyhow::Result<(HostCost, u64)> {
    let mut sim = Vec::new();
    let (mut small, mut large, mut thr) = (Vec::new(), Vec::new(), Vec::new());
    let mut dev = Vec::new();
    // Page programs per record of each size (the same in every run: simulated).
    let (mut p1, mut p64) = (0.0, 0.0);
    for _ in 0..repeat {
        sim.push(simulator_page_ns()?);
        let (h1, programs1, _) = records(1, 1, ExecutorKind::Simulated)?;
        let (h64, programs64, _) = records(64, 1, ExecutorKind::Simulated)?;
        (p1, p64) = (programs1, programs64);
        let (hs, _, ops) = records(64, 4, ExecutorKind::Simulated)?;
        let (ht, _, _) = records(64, 4, ExecutorKind::Threaded)?;
        small.push(h1);
        large.push(h64);
        thr.push((ht - hs) / ops);
        dev.push(
            (device_start_ns(ExecutorKind::Threaded)? - device_start_ns(ExecutorKind::Simulated)?)
                / 4.0,
        );
    }
    let sim_page = median(sim);
    // Host per record, the simulator's share taken out: request + programs x page.
    let h1 = median(small) - p1 * sim_page;
    let h64 = median(large) - p64 * sim_page;
    let page = ((h64 - h1) / (p64 - p1)).max(0.0);
    let request = (h1 - p1 * page).max(0.0);
    let cost = HostCost {
        request_ns: request.round() as u64,
        handoff_ns: median(thr).max(0.0).round() as u64,
        page_ns: page.round() as u64,
        device_ns: median(dev).max(0.0).round() as u64,
    };
    Ok((cost, sim_page.round() as u64))
}

/// 16 MiB (or `record`) O_SYNC sequential writes on `geometry`: speed-up of 4 chips over 1.
fn speedup(geometry: &str, record: u64, cost: HostCost) -> anyhow::Result<f64> {
    let mut fs = FsArgs::default();
    fs.ubi_by_default();
    let args = IozoneArgs {
        device: DeviceArgs {
            geometry: geometry.into(),
            chips: 1,
            device_size: Some(512 << 20),
            seed: None,
        },
        fs,
        mode: Mode::SeqWrite,
        record,
        file_size: 64 << 20,
        workload_seed: 1,
        sweep: true,
        executor: ExecutorArg::Sim,
        software_cost: cost,
        json: true,
    };
    let one = iozone::one(&args, 1, record, args.file_size)?;
    let four = iozone::one(&args, 4, record, args.file_size)?;
    Ok(four.sim_mb_per_s / one.sim_mb_per_s)
}

/// The new file system's mount on `chips` TLC chips (1 GiB split), simulated ms.
fn mount_ms(chips: u32, cost: HostCost) -> anyhow::Result<f64> {
    let device = DeviceArgs {
        geometry: "tlc-1g".into(),
        chips,
        device_size: None,
        seed: None,
    };
    let mut fs_args = FsArgs::default();
    fs_args.ubi_by_default();
    let options = DeviceOptions {
        host: cost,
        ..Default::default()
    };
    let fs = format_on(device.config()?, &fs_args, options)?;
    let dev = fs.unmount().context("unmounting")?;
    let (_, timing) = super::timed_mount(dev, false)?;
    Ok(timing.sim_ms)
}

fn sweep_row(scale: f64, cost: HostCost) -> anyhow::Result<SweepRow> {
    const M16: u64 = 16 << 20;
    let tlc4 = speedup("tlc-1g", 4 << 20, cost)?;
    let slc4 = speedup("slc-1g", 4 << 20, cost)?;
    let (p1, p4) = (mount_ms(1, cost)?, mount_ms(4, cost)?);
    Ok(SweepRow {
        scale,
        cost,
        speedup_16m_slc: speedup("slc-1g", M16, cost)?,
        speedup_16m_mlc: speedup("mlc-1g", M16, cost)?,
        speedup_16m_tlc: speedup("tlc-1g", M16, cost)?,
        tlc_gain_over_slc_4m: (tlc4 - 1.0) / (slc4 - 1.0),
        mount_p1_ms: p1,
        mount_p4_ms: p4,
        mount_p4_over_p1: p4 / p1,
    })
}

fn print_sweep(r: &SweepRow, header: bool) {
    if header {
        println!();
        println!(
            "{:>7} {:>44} | {:>7} {:>7} {:>7} | {:>9} | {:>9} {:>9} {:>7}",
            "scale",
            "cost (us)",
            "SLC 16M",
            "MLC 16M",
            "TLC 16M",
            "TLC/SLC",
            "mount P1",
            "mount P4",
            "P4/P1"
        );
    }
    println!(
        "{:>7} {:>44} | {:>6.2}x {:>6.2}x {:>6.2}x | {:>8.2}x | {:>8.2}ms {:>8.2}ms {:>6.2}x",
        r.scale,
        r.cost.to_string(),
        r.speedup_16m_slc,
        r.speedup_16m_mlc,
        r.speedup_16m_tlc,
        r.tlc_gain_over_slc_4m,
        r.mount_p1_ms,
        r.mount_p4_ms,
        r.mount_p4_over_p1
    );
}
