//! MiNV's experiments: mount time against utilization (the paper's Figure 8) and the TTFS
//! workloads Fax, Mobile Phone and Event Recorder (Figure 11), yaffs against minv, with
//! flash operation counts and energy.

use anyhow::Context;
use clap::Args;
use nandkit_fs::NewObject;
use nandkit_fs::{FsError, Ino, ROOT_INO};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::energy::Mark;
use super::{format, mount_options, print_json, timed_mount, used_fraction, Fs, FsArgs};
use crate::device_args::DeviceArgs;

pub const MOUNT_LONG_ABOUT: &str = "Fills a fresh device to each utilization (used / usable \
    space), unmounts it cleanly, and times the next mount: yaffs from its checkpoint and by a \
    full scan, minv from its NVRAM. Two layouts: 'fresh' writes files one after another on an \
    erased device (the paper's procedure, the scan's best case); 'aged' creates, overwrites \
    and deletes files at random until the utilization is reached. mount_sim_us is simulated \
    time (flash and NVRAM share one clock).";

pub const TTFS_LONG_ABOUT: &str = "Runs the TTFS workloads (fax, phone, recorder) on a \
    fresh device under the yaffs and minv profiles: total simulated time of the run (and \
    its final sync), flash reads, programs and erases, and energy (NVRAM included for \
    minv). energy_J is the operations' energy; total_J adds the standby power of the flash \
    chips, the DRAM the file system holds and the NVRAM over the run's busy time and the \
    idle time between the workload's requests (typical datasheet-class figures, set by \
    the --*-standby flags), so it can favour a design differently from time.";

/// The device of the MiNV benches: the paper's 64 MB small-page chip.
#[derive(Args)]
pub struct MinvDeviceArgs {
    /// Device preset.
    #[arg(
        long,
        short = 'g',
        default_value = "smallblock-64m-mtd",
        value_name = "NAME"
    )]
    pub geometry: String,
    /// Device capacity [default: the preset's].
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    pub device_size: Option<u64>,
    /// Seed of the workloads and the aged layout.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    pub seed: u64,
    #[command(flatten)]
    pub nvram: super::BenchNvramArgs,
    /// Print a JSON array of rows instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl MinvDeviceArgs {
    fn device(&self) -> anyhow::Result<nandkit_flash::DeviceConfig> {
        DeviceArgs {
            geometry: self.geometry.clone(),
            chips: 1,
            device_size: self.device_size,
            seed: None,
        }
        .config()
    }
}

pub(super) fn format_profile(
    config: &nandkit_flash::DeviceConfig,
    profile: &str,
    nvram: &super::BenchNvramArgs,
) -> anyhow::Result<Fs> {
    let fs = FsArgs {
        profile: profile.into(),
        ..FsArgs::default()
    };
    format(config.clone(), &nvram.apply(&fs))
}

#[derive(Args)]
pub struct MinvMountArgs {
    #[command(flatten)]
    dev: MinvDeviceArgs,
    /// Utilizations to fill to, comma-separated (1 = until the device is full).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,0.2,0.4,0.6,0.8,1",
        value_name = "U"
    )]
    utilizations: Vec<f64>,
    /// Layouts: fresh (sequential fill), aged (create, overwrite, delete).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fresh,aged",
        value_name = "NAMES"
    )]
    layouts: Vec<String>,
    /// Profiles, comma-separated: minv mounts from its NVRAM; the others from their
    /// checkpoint (if they keep one) and by a full scan (yaffs1: the YAFFS the paper
    /// measured, whose mount reads every page's tags).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "yaffs,minv",
        value_name = "NAMES"
    )]
    profiles: Vec<String>,
    /// Size of each file of the fresh layout.
    #[arg(long, default_value = "1MiB", value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    file_size: u64,
    /// Instead of utilizations: file counts, comma-separated (layout "files": that many
    /// files of --small-file-size, one after another).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    files: Vec<u64>,
    /// Size of each file of the "files" layout.
    #[arg(long, default_value = "256", value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    small_file_size: u64,
}

#[derive(Serialize)]
struct MountRow {
    profile: String,
    /// scan, checkpoint or nvram.
    method: &'static str,
    layout: String,
    /// The utilization asked for.
    target: f64,
    /// Used / usable space when unmounted.
    utilization: f64,
    files: u64,
    mount_sim_us: f64,
    mount_host_ms: f64,
    flash_reads: u64,
    nvram_bytes_read: u64,
    energy_j: f64,
    /// Simulated time of a listing of the whole tree with a stat of every object, right
    /// after the mount: what the mount left to first use (headers read on demand by yaffs,
    /// objects read from the NVRAM on demand by minv). Not measured after the checkpoint
    /// mount, whose image the scan mount then reads unchanged.
    list_sim_us: Option<f64>,
    /// Heap the file system holds after the mount and, when measured, the listing (the
    /// DRAM a design needs once every object has been used).
    dram_bytes: u64,
}

pub fn run_mount(args: MinvMountArgs) -> anyhow::Result<()> {
    let config = args.dev.device()?;
    let mut rows = Vec::new();
    // (layout, target): utilizations per layout, or file counts.
    let mut cases: Vec<(String, f64)> = Vec::new();
    if args.files.is_empty() {
        for layout in &args.layouts {
            for &u in &args.utilizations {
                if !(0.0..=1.0).contains(&u) {
                    anyhow::bail!("--utilizations {u}: must be within 0..=1");
                }
                if layout != "fresh" && layout != "aged" {
                    anyhow::bail!("--layouts {layout}: fresh or aged");
                }
                cases.push((layout.clone(), u));
            }
        }
    } else {
        cases.extend(args.files.iter().map(|&n| ("files".to_string(), n as f64)));
    }
    for (layout, target) in &cases {
        for profile in &args.profiles {
            let mut fs = format_profile(&config, profile, &args.dev.nvram)?;
            let files = match layout.as_str() {
                "fresh" => fill_fresh(&mut fs, *target, args.file_size)?,
                "aged" => fill_aged(&mut fs, *target, args.dev.seed)?,
                _ => fill_count(&mut fs, *target as u64, args.small_file_size)?,
            };
            let s = fs.statfs();
            let utilization = s.used_chunks as f64 / s.total_chunks.max(1) as f64;
            let base = RowBase {
                layout: layout.clone(),
                target: *target,
                utilization,
                files,
            };
            if fs.nvram().is_some() {
                // After a power cut (everything was synced, nothing unmounted), then after
                // a clean unmount, from the saved state.
                let (dev, nv) = fs.into_parts();
                let (fs, mut t) = mount_row(dev, nv, profile, Method::Crash, &base)?;
                let fs = listed(fs, &mut t)?;
                rows.push(t);
                let (dev, nv) = fs.unmount_parts().context("unmounting")?;
                let (fs, mut t) = mount_row(dev, nv, profile, Method::Clean, &base)?;
                listed(fs, &mut t)?;
                rows.push(t);
                continue;
            }
            // The flash log: from its checkpoint (if it keeps one) after a clean unmount,
            // by a full scan, then after a power cut (the scan mount left, not unmounted).
            let checkpoint = fs.config().checkpoint;
            let mut dev = fs.unmount().context("unmounting")?;
            if checkpoint {
                let (fs, t) = mount_row(dev, None, profile, Method::Clean, &base)?;
                rows.push(t);
                dev = fs.unmount().context("unmounting")?;
            }
            let (fs, mut t) = mount_row(dev, None, profile, Method::Scan, &base)?;
            let fs = listed(fs, &mut t)?;
            rows.push(t);
            let (dev, _) = fs.into_parts();
            let (fs, mut t) = mount_row(dev, None, profile, Method::Crash, &base)?;
            listed(fs, &mut t)?;
            rows.push(t);
        }
        if !args.dev.json {
            eprintln!("{layout} {target}: done");
        }
    }
    if args.dev.json {
        return print_json(&rows);
    }
    println!(
        "{:<6} {:<18} {:>7} {:>6} {:>6} {:>6} {:>12} {:>10} {:>10} {:>10} {:>9}",
        "layout",
        "mount",
        "target",
        "u",
        "files",
        "reads",
        "mount_us",
        "host_ms",
        "energy_mJ",
        "list_us",
        "DRAM_KiB"
    );
    for r in &rows {
        println!(
            "{:<6} {:<18} {:>7} {:>6.3} {:>6} {:>6} {:>12.1} {:>10.2} {:>10.3} {:>10} {:>9.0}",
            r.layout,
            format!("{}/{}", r.profile, r.method),
            r.target,
            r.utilization,
            r.files,
            r.flash_reads,
            r.mount_sim_us,
            r.mount_host_ms,
            r.energy_j * 1e3,
            r.list_sim_us.map_or("-".into(), |v| format!("{v:.1}")),
            r.dram_bytes as f64 / 1024.0
        );
    }
    Ok(())
}

struct RowBase {
    layout: String,
    target: f64,
    utilization: f64,
    files: u64,
}

fn reads(fs: &Fs) -> u64 {
    let t = fs.device().stats().total();
    t.page_reads + t.oob_reads
}

/// Which mount a row measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    /// After a power cut (everything synced, nothing unmounted).
    Crash,
    /// After a clean unmount: the checkpoint, or minv's saved state.
    Clean,
    /// A full scan, forced.
    Scan,
}

/// Mounts the parts as `method` says and measures it: simulated time and energy (flash and
/// NVRAM), host time, flash reads, NVRAM bytes read, and the heap the mount leaves.
fn mount_row(
    dev: nandkit_flash::StripedDevice,
    nv: Option<nandkit_nvram::Nvram>,
    profile: &str,
    method: Method,
    b: &RowBase,
) -> anyhow::Result<(Fs, MountRow)> {
    let mut dev = dev;
    let nv_before = nv.as_ref().map(|n| n.stats());
    let t = dev.stats().total();
    let before = t.page_reads + t.oob_reads;
    let start = Mark::of_parts(&mut dev, nv_before.map_or(0, |s| s.energy_pj));
    let heap_before = crate::heap::live_bytes();
    let host = std::time::Instant::now();
    let fs = match nv {
        Some(nv) => nandkit_fs::FileSystem::mount_with_nvram(dev, nv, mount_options(false))
            .context("mounting from NVRAM")?,
        None => {
            let (fs, _) = timed_mount(dev, method == Method::Scan)?;
            fs
        }
    };
    let mount_host_ms = host.elapsed().as_secs_f64() * 1e3;
    let mount = start.to_fs(&fs);
    let nvram_bytes_read = match (nv_before, fs.nvram()) {
        (Some(a), Some(n)) => n.stats.bytes_read - a.bytes_read,
        _ => 0,
    };
    let row = MountRow {
        profile: profile.into(),
        method: match (method, fs.mount_method()) {
            (Method::Crash, _) => "after-crash",
            (_, nandkit_fs::MountMethod::Nvram) => "nvram",
            (_, nandkit_fs::MountMethod::Scan) => "scan",
            _ => "checkpoint",
        },
        layout: b.layout.clone(),
        target: b.target,
        utilization: b.utilization,
        files: b.files,
        mount_sim_us: mount.sim_us(),
        mount_host_ms,
        flash_reads: reads(&fs) - before,
        nvram_bytes_read,
        energy_j: mount.energy_j(),
        list_sim_us: None,
        dram_bytes: crate::heap::live_bytes().saturating_sub(heap_before) as u64,
    };
    Ok((fs, row))
}

/// Lists everything after the mount `t` measured, and takes the heap held after it.
fn listed(mut fs: Fs, t: &mut MountRow) -> anyhow::Result<Fs> {
    let before = crate::heap::live_bytes();
    t.list_sim_us = Some(list_everything(&mut fs)?);
    let grown = crate::heap::live_bytes() as i64 - before as i64;
    t.dram_bytes = (t.dram_bytes as i64 + grown).max(0) as u64;
    Ok(fs)
}

/// Lists every directory and stats every object (`ls -lR`); returns the simulated us.
fn list_everything(fs: &mut Fs) -> anyhow::Result<f64> {
    let start = Mark::of_fs(fs);
    let mut dirs = vec![ROOT_INO];
    while let Some(d) = dirs.pop() {
        for e in fs.readdir(d).context("listing")? {
            fs.getattr(e.ino).context("stat")?;
            if e.kind == nandkit_fs::types::Kind::Dir {
                dirs.push(e.ino);
            }
        }
    }
    Ok(start.to_fs(fs).sim_us())
}

/// Files of `file_size`, one after another, until `u` of the space is used (or the device
/// is full), each fsync'd. Returns the files made.
fn fill_fresh(fs: &mut Fs, u: f64, file_size: u64) -> anyhow::Result<u64> {
    fill_files(fs, file_size, true, |fs, _| used_fraction(fs) < u)
}

/// `n` files of `size` bytes, one after another, synced once at the end (fewer if the
/// device or the NVRAM fills).
fn fill_count(fs: &mut Fs, n: u64, size: u64) -> anyhow::Result<u64> {
    fill_files(fs, size, false, |_, made| made < n)
}

/// Files of `size` bytes named f000000 on, while `more(fs, files made)` says so or until
/// the device refuses one; each fsync'd if `fsync_each`, then a sync. Returns the files
/// made.
fn fill_files(
    fs: &mut Fs,
    size: u64,
    fsync_each: bool,
    mut more: impl FnMut(&Fs, u64) -> bool,
) -> anyhow::Result<u64> {
    let no_space_is_fine = |r: Result<(), FsError>| match r {
        Err(FsError::NoSpace) => Ok(()),
        r => r,
    };
    let mut n = 0u64;
    let data = super::noise(size as usize, 7);
    while more(fs, n) {
        let ino = match fs.create(
            ROOT_INO,
            format!("f{n:06}").as_bytes(),
            NewObject::regular_file(),
        ) {
            Ok(a) => a.ino,
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("creating a file"),
        };
        n += 1;
        match fs.write(ino, 0, &data) {
            Ok(_) => {}
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("writing a file"),
        }
        if fsync_each {
            no_space_is_fine(fs.fsync(ino))?;
        }
    }
    no_space_is_fine(fs.sync())?;
    Ok(n)
}

/// Creates (16 KiB .. 1 MiB), overwrites and deletes files at random until `u` of the
/// space is used; at `u` = 1, until the device refuses.
fn fill_aged(fs: &mut Fs, u: f64, seed: u64) -> anyhow::Result<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut files: Vec<(Ino, u64)> = Vec::new();
    let mut next = 0u64;
    let mut refusals = 0;
    let chunk = super::noise(1 << 20, seed);
    while used_fraction(fs) < u && refusals < 8 {
        let r: f64 = rng.gen();
        let out: Result<(), FsError> = if r < 0.15 && !files.is_empty() {
            let i = rng.gen_range(0..files.len());
            let (ino, _) = files.swap_remove(i);
            let name = format!("a{ino:08}");
            fs.unlink(ROOT_INO, name.as_bytes())
        } else if r < 0.40 && !files.is_empty() {
            let i = rng.gen_range(0..files.len());
            let (ino, size) = files[i];
            let off = rng.gen_range(0..size.max(1));
            let len = rng.gen_range(1..=(size - off).clamp(1, 256 << 10)) as usize;
            fs.write(ino, off, &chunk[..len]).map(|_| ())
        } else {
            let size = rng.gen_range(16u64 << 10..=1 << 20);
            next += 1;
            match fs.create(ROOT_INO, b"new", NewObject::regular_file()) {
                Ok(a) => {
                    let name = format!("a{:08}", a.ino);
                    fs.rename(
                        ROOT_INO,
                        b"new",
                        ROOT_INO,
                        name.as_bytes(),
                        Default::default(),
                    )?;
                    files.push((a.ino, size));
                    fs.write(a.ino, 0, &chunk[..size as usize]).map(|_| ())
                }
                Err(e) => Err(e),
            }
        };
        match out {
            Ok(()) => refusals = 0,
            Err(FsError::NoSpace) => refusals += 1,
            Err(e) => return Err(e).context("ageing the device"),
        }
    }
    let _ = next;
    fs.sync().or_else(|e| match e {
        FsError::NoSpace => Ok(()),
        e => Err(e),
    })?;
    Ok(files.len() as u64)
}

#[derive(Args)]
pub struct TtfsArgs {
    #[command(flatten)]
    dev: MinvDeviceArgs,
    /// Workloads, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fax,phone,recorder",
        value_name = "NAMES"
    )]
    workloads: Vec<String>,
    /// Profiles, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "yaffs,minv",
        value_name = "NAMES"
    )]
    profiles: Vec<String>,
    #[command(flatten)]
    standby: super::standby::StandbyArgs,
}

#[derive(Serialize)]
struct TtfsRow {
    workload: String,
    profile: String,
    /// Simulated time the run kept the device busy.
    sim_s: f64,
    /// Idle time the workload has between its requests (a fax every 60 s, ...).
    idle_s: f64,
    /// Energy of the operations (flash, and NVRAM accesses for minv).
    energy_j: f64,
    /// Heap bytes the file system held at the end of the run (DRAM).
    dram_bytes: u64,
    /// Standby power of the flash chips, the DRAM held and the NVRAM over busy and idle
    /// time (`bench::standby`).
    standby_j: f64,
    /// energy_j + standby_j: the run's energy with its idle time.
    total_j: f64,
    flash_reads: u64,
    flash_programs: u64,
    /// Partial programs of a spare area: yaffs1's deletion markers.
    flash_spare_programs: u64,
    flash_erases: u64,
    nvram_bytes_written: u64,
    /// NVRAM bytes read: the structures minv uses in place (published page numbers at
    /// every header write, objects on first use).
    nvram_bytes_read: u64,
    /// "ok", or where the workload met a full device.
    outcome: String,
}

pub fn run_ttfs(args: TtfsArgs) -> anyhow::Result<()> {
    let config = args.dev.device()?;
    let device_bytes = config.geometry.total_bytes();
    let mut rows = Vec::new();
    for w in &args.workloads {
        for profile in &args.profiles {
            let mut fs = format_profile(&config, profile, &args.dev.nvram)?;
            let mut load = nandkit_workloads::by_name(w, args.dev.seed, device_bytes)
                .with_context(|| format!("unknown workload {w}"))?;
            let t0 = fs.device_mut().stats().total();
            let nv0 = fs.nvram().map(|n| n.stats);
            let start = Mark::of_fs(&fs);
            let summary = load
                .run(&mut fs)
                .with_context(|| format!("{w} under {profile}"))?;
            fs.sync().context("sync after the workload")?;
            let spent = start.to_fs(&fs);
            let t1 = fs.device_mut().stats().total();
            let nv1 = fs.nvram().map(|n| n.stats);
            let nvram_bytes = fs.nvram().map_or(0, |n| n.size_bytes);
            // What the file system holds in DRAM: the heap its structures free when it goes
            // (the simulated chips' storage, also on the heap, stays with the parts).
            let with_fs = crate::heap::live_bytes();
            let parts = fs.into_parts();
            let dram_bytes = with_fs.saturating_sub(crate::heap::live_bytes()) as u64;
            drop(parts);
            let held = super::standby::Held {
                chips: config.geometry.chips,
                dram_bytes,
                nvram_bytes,
            };
            let idle_s = summary.idle_ns as f64 / 1e9;
            let standby_j =
                args.standby
                    .joules(held, &args.dev.nvram.nvram_preset, spent.sim_s() + idle_s);
            rows.push(TtfsRow {
                workload: w.clone(),
                profile: profile.clone(),
                sim_s: spent.sim_s(),
                idle_s,
                energy_j: spent.energy_j(),
                dram_bytes,
                standby_j,
                total_j: spent.energy_j() + standby_j,
                flash_reads: (t1.page_reads + t1.oob_reads) - (t0.page_reads + t0.oob_reads),
                flash_programs: t1.programs - t0.programs,
                flash_spare_programs: t1.spare_programs - t0.spare_programs,
                flash_erases: t1.erases - t0.erases,
                nvram_bytes_written: match (nv0, nv1) {
                    (Some(a), Some(b)) => b.bytes_written - a.bytes_written,
                    _ => 0,
                },
                nvram_bytes_read: match (nv0, nv1) {
                    (Some(a), Some(b)) => b.bytes_read - a.bytes_read,
                    _ => 0,
                },
                outcome: match summary.enospc {
                    Some(n) => format!("enospc at op {n}"),
                    None => "ok".into(),
                },
            });
            if !args.dev.json {
                eprintln!("{w} / {profile}: done");
            }
        }
    }
    if args.dev.json {
        return print_json(&rows);
    }
    println!(
        "{:<9} {:<6} {:>9} {:>10} {:>8} {:>9} {:>7} {:>8} {:>9} {:>9} {:>10} {:>9}",
        "workload",
        "fs",
        "sim_s",
        "energy_J",
        "reads",
        "programs",
        "erases",
        "speedup",
        "idle_s",
        "DRAM_KiB",
        "total_J",
        "J_saving"
    );
    for r in &rows {
        let yaffs = rows
            .iter()
            .find(|y| y.workload == r.workload && y.profile == "yaffs");
        let over = |k: fn(&TtfsRow) -> f64| yaffs.map_or(f64::NAN, |y| k(y) / k(r));
        println!(
            "{:<9} {:<6} {:>9.2} {:>10.3} {:>8} {:>9} {:>7} {:>7.2}x {:>9.0} {:>9.0} {:>10.3} {:>8.2}x{}",
            r.workload,
            r.profile,
            r.sim_s,
            r.energy_j,
            r.flash_reads,
            r.flash_programs,
            r.flash_erases,
            over(|r| r.sim_s),
            r.idle_s,
            r.dram_bytes as f64 / 1024.0,
            r.total_j,
            over(|r| r.total_j),
            if r.outcome == "ok" {
                String::new()
            } else {
                format!("  ({})", r.outcome)
            }
        );
    }
    Ok(())
}
