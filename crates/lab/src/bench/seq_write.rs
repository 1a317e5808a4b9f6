//! `nandkit bench seq-write`: one file written front to back in large writes and fsynced,
//! then the device unmounted and mounted twice (full scan, then the default way, which
//! uses the unmount's checkpoint when there is one).

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_flash::StripedDevice;
use nandkit_fs::NewObject;
use nandkit_fs::{FileSystem, MountMethod, ROOT_INO};
use serde::Serialize;

use super::energy::Mark;
use super::{
    format, human_joules, noise, print_json, ratio, timed_mount, write_sequential, DeviceInfo,
    FsArgs, MountTiming, PhaseStats, Progress, Snapshot,
};
use crate::device_args::{parse_bytes, DeviceArgs};

/// What `--help` says about this benchmark.
pub const LONG_ABOUT: &str =
    "Formats a RAM device, creates one file and writes it sequentially, then \
    fsyncs it. The measured phase is the writes plus the fsync.\n\n\
    host_user_mb_per_s = user bytes / host seconds of that phase; \
    sim_user_mb_per_s = user bytes / simulated seconds (device clock); \
    raw_program_mb_per_s = page size / the time of one page program \
    (bus transfer of data + OOB, then tPROG): one chip's raw program bandwidth; \
    efficiency_vs_raw = sim / raw.\n\n\
    Then the file system is unmounted cleanly (which writes a checkpoint when the \
    profile keeps them) and mounted by force-scan and by the default method; \
    both mounts are timed in host and simulated milliseconds, and the method \
    the default mount actually used is reported.\n\n\
    Every simulated span also reports its energy in joules (energy_j, unmount_energy_j, \
    mount_*_energy_j): the preset's energy per flash operation (`nandkit presets`), \
    typical values.";

#[derive(Args)]
pub struct SeqWriteArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// Size of the file to write.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes, value_name = "SIZE")]
    file_size: u64,
    /// Bytes per write call.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes, value_name = "SIZE")]
    write_size: u64,
    /// Seed of the data written (its bytes only; nothing else is random).
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    #[serde(flatten)]
    device: DeviceInfo,
    profile: String,
    cleaner: nandkit_fs::CleanerKind,
    chunk_bytes: u32,
    file_size_bytes: u64,
    write_size_bytes: u64,
    workload_seed: u64,
    /// The write phase (writes + fsync).
    #[serde(flatten)]
    write: PhaseStats,
    host_user_mb_per_s: f64,
    sim_user_mb_per_s: f64,
    raw_program_mb_per_s: f64,
    efficiency_vs_raw: f64,
    /// The clean unmount after the write phase (sync, checkpoint).
    unmount_sim_ms: f64,
    unmount_energy_j: f64,
    unmount_flash_programs: u64,
    mount_scan_ms_host: f64,
    mount_scan_ms_sim: f64,
    mount_scan_energy_j: f64,
    scan_mount_method: MountMethod,
    mount_checkpoint_ms_host: f64,
    mount_checkpoint_ms_sim: f64,
    mount_checkpoint_energy_j: f64,
    /// What the default mount actually did: `Checkpoint`, or `Scan` if it found none.
    checkpoint_mount_method: MountMethod,
}

pub fn run(args: SeqWriteArgs) -> anyhow::Result<()> {
    ensure!(args.write_size > 0, "--write-size must be at least 1 byte");
    ensure!(
        args.file_size > 0,
        "--file-size must be at least 1 byte (there is nothing to measure in an empty file)"
    );
    let config = args.device.config()?;
    let info = DeviceInfo::of(&config);
    let timing = config.timing;
    let g = config.geometry;
    let mut fs = format(config, &args.fs)?;
    let chunk_bytes = fs.chunk_bytes();
    let fs_config = fs.config().clone();

    let data = noise(args.write_size as usize, args.workload_seed);
    let ino = fs
        .create(ROOT_INO, b"seq", NewObject::regular_file())
        .context("creating the file")?
        .ino;
    let mut progress = Progress::bytes(args.file_size, "writing", args.json);
    let start = Snapshot::take(&mut fs);
    write_sequential(
        &mut fs,
        ino,
        args.file_size,
        args.write_size,
        &data,
        &mut progress,
    )?;
    fs.fsync(ino).context("fsync")?;
    let end = Snapshot::take(&mut fs);
    progress.finish();
    let write = PhaseStats::between(&start, &end, chunk_bytes);

    let before_unmount = Mark::of_fs(&fs);
    let programs_before = fs.device_mut().stats().total().programs;
    let mut dev = fs.unmount().context("unmounting")?;
    let unmount = before_unmount.to_device(&mut dev);
    let unmount_flash_programs = dev.stats().total().programs - programs_before;

    // The default mount first, while the device is exactly as the clean unmount left it;
    // neither mount writes anything, so the scan then sees the same flash.
    let (fs, checkpoint) = timed_mount(dev, false)?;
    let dev = check_and_release(fs, args.file_size)?;
    let (fs, scan) = timed_mount(dev, true)?;
    check_and_release(fs, args.file_size)?;

    let raw_page_bytes = g.raw_page_bytes();
    let raw_program_mb_per_s =
        f64::from(g.page_size_bytes) / timing.program_cost_ns(raw_page_bytes) as f64 * 1e3;
    let user = write.user_bytes as f64;
    let sim_user_mb_per_s = ratio(user / 1e6, write.sim_s);
    let report = Report {
        bench: "seq-write",
        device: info,
        profile: fs_config.profile.clone(),
        cleaner: fs_config.cleaner,
        chunk_bytes,
        file_size_bytes: args.file_size,
        write_size_bytes: args.write_size,
        workload_seed: args.workload_seed,
        host_user_mb_per_s: ratio(user / 1e6, write.host_s),
        sim_user_mb_per_s,
        raw_program_mb_per_s,
        efficiency_vs_raw: sim_user_mb_per_s / raw_program_mb_per_s,
        write,
        unmount_sim_ms: unmount.sim_ms(),
        unmount_energy_j: unmount.energy_j(),
        unmount_flash_programs,
        mount_scan_ms_host: scan.host_ms,
        mount_scan_ms_sim: scan.sim_ms,
        mount_scan_energy_j: scan.energy_j,
        scan_mount_method: scan.method,
        mount_checkpoint_ms_host: checkpoint.host_ms,
        mount_checkpoint_ms_sim: checkpoint.sim_ms,
        mount_checkpoint_energy_j: checkpoint.energy_j,
        checkpoint_mount_method: checkpoint.method,
    };
    if args.json {
        print_json(&report)
    } else {
        print_table(&report, &scan, &checkpoint);
        Ok(())
    }
}

/// The file must have survived the remount whole; then the device goes back untouched.
fn check_and_release(
    mut fs: FileSystem<StripedDevice>,
    size: u64,
) -> anyhow::Result<StripedDevice> {
    let ino = fs
        .resolve("/seq")
        .context("the file is gone after remount")?;
    let found = fs.getattr(ino)?.size;
    ensure!(
        found == size,
        "file size after remount {found}, wrote {size}"
    );
    Ok(fs.into_device())
}

fn print_table(r: &Report, scan: &MountTiming, checkpoint: &MountTiming) {
    r.device.print();
    println!(
        "workload    one file of {} bytes in {} byte writes, then fsync (profile {}, {:?} cleaner)",
        r.file_size_bytes, r.write_size_bytes, r.profile, r.cleaner
    );
    r.write.print("write");
    println!(
        "bandwidth   host {:.1} MB/s, simulated {:.3} MB/s of user data",
        r.host_user_mb_per_s, r.sim_user_mb_per_s
    );
    println!(
        "            raw one-chip program {:.3} MB/s; efficiency {:.4}",
        r.raw_program_mb_per_s, r.efficiency_vs_raw
    );
    println!(
        "unmount     {:.3} ms simulated, {} flash programs, energy {}",
        r.unmount_sim_ms,
        r.unmount_flash_programs,
        human_joules(r.unmount_energy_j)
    );
    for (label, m) in [("mount scan", scan), ("mount", checkpoint)] {
        println!(
            "{label:<12}{:?}: host {:.3} ms, simulated {:.3} ms, energy {}",
            m.method,
            m.host_ms,
            m.sim_ms,
            human_joules(m.energy_j)
        );
    }
}
