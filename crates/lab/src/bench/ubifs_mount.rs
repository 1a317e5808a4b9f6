//! `nandkit bench mount --profile ubifs`: what mounting UBIFS costs as files grow. UBIFS
//! mounts from its superblock, master node, LPT and log and reads the index only as lookups
//! need it, so a mount's reads should not grow with the files; after a cut it also replays
//! the journal, bounded by the journal's size. The TNC (the index in RAM) is bounded too.

use anyhow::{ensure, Context};
use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{DeviceConfig, Flash, FlashDevice, StripedFlash};
use nandkit_fs::ubifs::fs::{UbifsFs, UbifsOptions};
use nandkit_fs::ubifs::media::{Time, ROOT_INO};
use nandkit_fs::ubifs::ops::NewInode;
use nandkit_fs::ubifs::tnc::TncStats;
use serde::Serialize;

use super::{noise, print_json, DeviceInfo, Progress};
use crate::heap as counter;

type Fs = UbifsFs<StripedFlash<FlashDevice>>;

/// What the bench is asked.
pub struct UbifsMountArgs {
    pub config: DeviceConfig,
    pub files: u64,
    pub file_size: u64,
    pub dirs: u64,
    pub seed: u64,
    pub json: bool,
}

/// One measured mount.
#[derive(Serialize, Clone, Debug)]
struct MountCost {
    /// "clean" (after an unmount) or "cut" (power lost after the last sync).
    after: &'static str,
    /// Pages UBI's attach read (every PEB's headers).
    ubi_attach_page_reads: u64,
    /// Pages UBIFS read to mount (superblock, master, LPT, log, buds, index as replay needs).
    ubifs_page_reads: u64,
    /// Journal nodes replayed.
    nodes_replayed: u64,
    buds: u32,
    sim_ms: f64,
    /// Heap the mount keeps (live bytes after it minus before).
    heap_bytes: i64,
    tnc: TncStats,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    profile: &'static str,
    device: DeviceInfo,
    files: u64,
    file_size: u64,
    dirs: u64,
    /// LEBs of the volume and of its journal (max_bud_bytes in LEBs).
    lebs: u32,
    journal_lebs: u64,
    mounts: Vec<MountCost>,
    /// Every directory listed and every file stat'ed after the clean mount.
    list_page_reads: u64,
    list_sim_ms: f64,
    /// The TNC after the listing: bounded by `tnc_max_znodes`.
    tnc_after_listing: TncStats,
    tnc_max_znodes: usize,
    heap_after_listing: i64,
}

fn t(sec: u64) -> Time {
    Time { sec, nsec: 0 }
}

/// Formats, then creates the files (each written whole), syncing at the end.
fn populate(a: &UbifsMountArgs, opts: UbifsOptions) -> anyhow::Result<Fs> {
    let dev = FlashDevice::ram(a.config.clone())?;
    let ubi = StripedFlash::format_ubi(dev, UbiParams::default())?;
    let mut fs = UbifsFs::format(ubi, opts, t(1)).context("mkfs (ubifs)")?;
    let data = noise(a.file_size.max(1) as usize, a.seed);
    let parents: Vec<u32> = if a.dirs <= 1 {
        vec![ROOT_INO]
    } else {
        (0..a.dirs)
            .map(|d| {
                fs.mknod(
                    ROOT_INO,
                    format!("d{d:03}").as_bytes(),
                    NewInode::new(0o040755),
                    t(2),
                )
            })
            .collect::<Result<_, _>>()?
    };
    let mut progress = Progress::items(a.files, "creating files", a.json);
    for k in 0..a.files {
        let parent = parents[(k % parents.len() as u64) as usize];
        let inum = fs.mknod(
            parent,
            format!("f{k:06}").as_bytes(),
            NewInode::new(0o100644),
            t(3),
        )?;
        fs.write(inum, 0, &data[..a.file_size as usize], t(3))
            .with_context(|| format!("writing file {k}"))?;
        progress.inc(1);
    }
    progress.finish();
    fs.sync()?;
    Ok(fs)
}

/// Attaches UBI and mounts, measuring both.
fn measure(
    dev: FlashDevice,
    after: &'static str,
    opts: UbifsOptions,
) -> anyhow::Result<(Fs, MountCost)> {
    let mut dev = dev;
    let reads0 = dev.stats().total().page_reads;
    let mut ubi = StripedFlash::attach_ubi(dev, false)?;
    let attach_reads = ubi.inner_mut().stats().total().page_reads - reads0;
    let t0 = ubi.now_ns();
    let heap0 = counter::live_bytes() as i64;
    let fs = UbifsFs::mount(ubi, opts, false).context("mounting")?;
    let heap = counter::live_bytes() as i64 - heap0;
    let cost = MountCost {
        after,
        ubi_attach_page_reads: attach_reads,
        ubifs_page_reads: fs.io_stats().pages_read,
        nodes_replayed: fs.stats.mount_nodes_replayed,
        buds: fs.stats.mount_buds,
        sim_ms: (fs.device().now_ns() - t0) as f64 / 1e6,
        heap_bytes: heap,
        tnc: fs.tnc_stats(),
    };
    Ok((fs, cost))
}

pub fn run(a: UbifsMountArgs) -> anyhow::Result<()> {
    ensure!(a.dirs >= 1, "--dirs must be at least 1");
    let opts = UbifsOptions::default();
    let info = DeviceInfo::of(&a.config);
    // After a clean unmount.
    let fs = populate(&a, opts)?;
    let lebs = fs.superblock().leb_cnt;
    let journal_lebs = fs.superblock().max_bud_bytes / u64::from(fs.superblock().leb_size);
    let dev = fs.unmount()?.into_inner();
    let (mut fs, clean) = measure(dev, "clean", opts)?;
    // Everything listed.
    let reads0 = fs.io_stats().pages_read;
    let t0 = fs.device().now_ns();
    let heap0 = counter::live_bytes() as i64;
    let mut stack = vec![ROOT_INO];
    while let Some(d) = stack.pop() {
        for e in fs.readdir(d)? {
            let st = fs.stat(e.inum)?;
            if st.mode & 0o170000 == 0o040000 {
                stack.push(e.inum);
            }
        }
    }
    let list_page_reads = fs.io_stats().pages_read - reads0;
    let list_sim_ms = (fs.device().now_ns() - t0) as f64 / 1e6;
    let heap_after_listing = counter::live_bytes() as i64 - heap0 + clean.heap_bytes;
    let tnc_after_listing = fs.tnc_stats();
    drop(fs);
    // After a cut: the same files, power lost after the last sync (the journal since the
    // last commit is replayed).
    let fs = populate(&a, opts)?;
    let dev = fs.into_device().into_inner();
    let (_, cut) = measure(dev, "cut", opts)?;
    let report = Report {
        bench: "mount",
        profile: "ubifs",
        device: info,
        files: a.files,
        file_size: a.file_size,
        dirs: a.dirs,
        lebs,
        journal_lebs,
        mounts: vec![clean, cut],
        list_page_reads,
        list_sim_ms,
        tnc_after_listing,
        tnc_max_znodes: opts.tnc_max_znodes,
        heap_after_listing,
    };
    if a.json {
        return print_json(&report);
    }
    println!(
        "nandkit bench mount --profile ubifs: {} files of {} B in {} director{}, {} LEBs, journal {} LEBs",
        report.files,
        report.file_size,
        report.dirs,
        if report.dirs == 1 { "y" } else { "ies" },
        report.lebs,
        report.journal_lebs
    );
    println!(
        "{:<7} {:>12} {:>12} {:>10} {:>6} {:>9} {:>11} {:>8} {:>10}",
        "after",
        "UBI reads",
        "UBIFS reads",
        "replayed",
        "buds",
        "sim ms",
        "heap B",
        "znodes",
        "TNC B"
    );
    for m in &report.mounts {
        println!(
            "{:<7} {:>12} {:>12} {:>10} {:>6} {:>9.2} {:>11} {:>8} {:>10}",
            m.after,
            m.ubi_attach_page_reads,
            m.ubifs_page_reads,
            m.nodes_replayed,
            m.buds,
            m.sim_ms,
            m.heap_bytes,
            m.tnc.znodes,
            m.tnc.bytes
        );
    }
    println!(
        "listing every directory and stat of every file after the clean mount: {} page reads, {:.2} sim ms; TNC then {} znodes ({} B; bound {} znodes, {} loaded, {} dropped), heap {} B",
        report.list_page_reads,
        report.list_sim_ms,
        report.tnc_after_listing.znodes,
        report.tnc_after_listing.bytes,
        report.tnc_max_znodes,
        report.tnc_after_listing.loaded,
        report.tnc_after_listing.evicted,
        report.heap_after_listing
    );
    Ok(())
}
