//! `nandkit bench ma-mount --profile ubifs`: the MA paper's mount scenarios (Figure 6) on
//! the file system the paper mounts, UBIFS over a UBI per chip, striped (LEB i of the
//! volume is LEB i of every chip's UBI). Each mount is timed in the paper's steps: UBI's
//! attach (every chip's headers), reading the superblock, reading the master node, the LPT,
//! replaying the journal (and the commit a replay makes); the heap the mount keeps (UBI and
//! UBIFS) is the paper's Figure 9.

use anyhow::Context;
use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{DeviceConfig, Flash, FlashDevice, StripedFlash};
use nandkit_fs::ubifs::fs::{MountSteps, UbifsFs, UbifsOptions};
use nandkit_fs::ubifs::media::{Time, ROOT_INO};
use nandkit_fs::ubifs::ops::NewInode;
use serde::Serialize;

use super::{noise, print_json, Progress};
use crate::heap as counter;

/// What a scenario fills the volume with.
pub enum UbifsFill {
    Nothing,
    OneFile(u64),
    SmallFiles(u64),
}

#[derive(Serialize)]
struct Row {
    bench: &'static str,
    profile: &'static str,
    geometry: String,
    chips: u32,
    scenario: String,
    /// UBI's attach of every chip (simulated ms).
    ubi_attach_ms: f64,
    /// UBIFS's mount, by step (simulated ms).
    steps_ms: StepsMs,
    mount_ms: f64,
    ubifs_page_reads: u64,
    /// Heap the attach keeps (every chip's UBI maps; with the threaded executor, the
    /// workers' queues too).
    ubi_heap_bytes: i64,
    /// Heap the UBIFS mount keeps (its state and the TNC).
    ubifs_heap_bytes: i64,
    /// Attach and mount together.
    heap_bytes: i64,
    tnc_bytes: usize,
    /// Worker threads the attach started (threaded executor, P > 1) and their stacks.
    worker_threads: u32,
    worker_stack_bytes: u64,
    /// heap_bytes + worker_stack_bytes: the paper's Figure 9.
    ram_bytes: i64,
}

#[derive(Serialize)]
struct StepsMs {
    superblock: f64,
    master: f64,
    lpt: f64,
    replay: f64,
    recovery_commit: f64,
}

impl From<MountSteps> for StepsMs {
    fn from(s: MountSteps) -> Self {
        let ms = |ns: u64| ns as f64 / 1e6;
        StepsMs {
            superblock: ms(s.superblock),
            master: ms(s.master),
            lpt: ms(s.lpt),
            replay: ms(s.replay),
            recovery_commit: ms(s.recovery_commit),
        }
    }
}

fn t(sec: u64) -> Time {
    Time { sec, nsec: 0 }
}

fn scenario(
    config: &DeviceConfig,
    name: &str,
    fill: &UbifsFill,
    threaded: bool,
    json: bool,
) -> anyhow::Result<Row> {
    let chips = config.geometry.chips;
    let dev = FlashDevice::ram(config.clone())?;
    let ubi = StripedFlash::format_ubi(dev, UbiParams::default())?;
    let opts = UbifsOptions::default();
    let mut fs = UbifsFs::format(ubi, opts, t(1)).context("mkfs (ubifs)")?;
    match *fill {
        UbifsFill::Nothing => {}
        UbifsFill::OneFile(bytes) => {
            let inum = fs.mknod(ROOT_INO, b"big", NewInode::new(0o100644), t(2))?;
            let step = 1u64 << 20;
            let data = noise(step as usize, 1);
            let mut progress = Progress::bytes(bytes, "writing", json);
            let mut off = 0;
            while off < bytes {
                let n = step.min(bytes - off);
                fs.write(inum, off, &data[..n as usize], t(2))
                    .with_context(|| format!("writing at {off}"))?;
                off += n;
                progress.inc(n);
            }
            progress.finish();
        }
        UbifsFill::SmallFiles(n) => {
            let data = noise(2000, 2);
            let mut progress = Progress::items(n, "files", json);
            let mut dir = ROOT_INO;
            for k in 0..n {
                if k % 1000 == 0 {
                    dir = fs.mknod(
                        ROOT_INO,
                        format!("d{:03}", k / 1000).as_bytes(),
                        NewInode::new(0o040755),
                        t(2),
                    )?;
                }
                let inum = fs.mknod(
                    dir,
                    format!("f{k:06}").as_bytes(),
                    NewInode::new(0o100644),
                    t(2),
                )?;
                fs.write(inum, 0, &data, t(2))?;
                progress.inc(1);
            }
            progress.finish();
        }
    }
    let mut dev = fs.unmount()?.into_inner();
    let heap0 = counter::live_bytes() as i64;
    // MA's mount starts a worker per chip (one chip has no dispatcher).
    let threaded = threaded && chips > 1;
    if threaded {
        dev.set_executor(nandkit_flash::ExecutorKind::Threaded);
    }
    let t0 = dev.now_ns();
    let ubi = StripedFlash::attach_ubi(dev, false)?;
    let t1 = ubi.now_ns();
    let heap1 = counter::live_bytes() as i64;
    let fs = UbifsFs::mount(ubi, opts, false).context("mounting")?;
    let heap2 = counter::live_bytes() as i64;
    let steps = fs.stats.mount_steps_ns;
    let workers = if threaded { chips } else { 0 };
    let stacks = u64::from(workers) * nandkit_flash::executor::threaded::WORKER_STACK_BYTES as u64;
    Ok(Row {
        bench: "ma-mount",
        profile: "ubifs",
        geometry: config.name.clone(),
        chips,
        scenario: name.to_string(),
        ubi_attach_ms: (t1 - t0) as f64 / 1e6,
        mount_ms: (fs.device().now_ns() - t1) as f64 / 1e6,
        steps_ms: steps.into(),
        ubifs_page_reads: fs.io_stats().pages_read,
        ubi_heap_bytes: heap1 - heap0,
        ubifs_heap_bytes: heap2 - heap1,
        heap_bytes: heap2 - heap0,
        tnc_bytes: fs.tnc_stats().bytes,
        worker_threads: workers,
        worker_stack_bytes: stacks,
        ram_bytes: heap2 - heap0 + stacks as i64,
    })
}

pub fn run(
    config: DeviceConfig,
    scenarios: &[(&str, UbifsFill)],
    threaded: bool,
    json: bool,
) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (name, fill) in scenarios {
        let row = scenario(&config, name, fill, threaded, json)?;
        if !json {
            if rows.is_empty() {
                println!(
                    "{:<22} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9}",
                    "scenario",
                    "chips",
                    "attach ms",
                    "sb ms",
                    "mst ms",
                    "lpt ms",
                    "replay",
                    "commit",
                    "mount ms",
                    "reads",
                    "heap KiB"
                );
            }
            println!(
                "{:<22} {:>5} {:>10.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>7} {:>9.1} {:>9.1}",
                row.scenario,
                row.chips,
                row.ubi_attach_ms,
                row.steps_ms.superblock,
                row.steps_ms.master,
                row.steps_ms.lpt,
                row.steps_ms.replay,
                row.steps_ms.recovery_commit,
                row.mount_ms,
                row.ubifs_page_reads,
                row.heap_bytes as f64 / 1024.0,
                row.ram_bytes as f64 / 1024.0
            );
        }
        rows.push(row);
    }
    if json {
        print_json(&rows)?;
    }
    Ok(())
}
