//! The MNFS paper's other experiments on its 128 MB volume, each profile on a fresh
//! device: `mnfs-fill` (Figure 4: write throughput while filling the clean device with
//! random-sized files), `mnfs-delete` (Figure 5: deletion time against file size) and
//! `mnfs-mount` (Table 2: mount time and heap with the device full).

use anyhow::Context;
use clap::Args;
use nandkit_flash::Flash;
use nandkit_fs::NewObject;
use nandkit_fs::{FsError, ROOT_INO};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::energy::Mark;
use super::used_fraction;
use super::{format, noise, print_json, timed_mount, Fs, FsArgs};
use crate::device_args::{parse_bytes, DeviceArgs};

pub const FILL_ABOUT: &str = "The MNFS paper's write test (Figure 4): on a clean device, \
    files of random size (--min-size to --max-size, seeded) are created and written in \
    --write-size writes, each file fsync'd, until the device is full (or --fill-to of it \
    is used). Reports the average write throughput in simulated time, per profile.";

pub const DELETE_ABOUT: &str = "The MNFS paper's deletion test (Figure 5): for each size, \
    a fresh device gets one file of that size (and, before it, files filling --fill-to of \
    the device, deleted again, so yaffs has garbage to keep), and the unlink is timed in \
    simulated time. mnfs erases the file's blocks in the unlink, so its time grows with \
    the file; yaffs leaves them to cleaning.";

pub const SMALL_ABOUT: &str = "MNFS's stated weakness, and the hybrid policy's answer: \
    --files files of --size each are created and fsync'd on a fresh device, then the file \
    system syncs. Reports the flash the files take (blocks holding any page, as bytes), \
    the programs and erases it cost, and where the device filled, per profile.";

pub const MOUNT_ABOUT: &str = "The MNFS paper's Table 2: the device is filled (random-sized \
    files, as mnfs-fill), unmounted cleanly, and mounted again, by a full scan and (for \
    profiles that keep one) from the checkpoint: simulated mount time, flash reads and the \
    heap the mounted file system holds, per profile. yaffs1 is YAFFS as the paper measured \
    it (every page's tags read at mount); yaffs is a modern YAFFS2.";

/// Options every MNFS bench shares.
#[derive(Args)]
pub struct MnfsArgs {
    /// Device preset (the paper's 128 MB small-block volume).
    #[arg(long, short = 'g', default_value = "mnfs-128m", value_name = "NAME")]
    geometry: String,
    /// Device capacity [default: the preset's].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    device_size: Option<u64>,
    /// Profiles, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "yaffs1,yaffs,mnfs,hybrid",
        value_name = "NAMES"
    )]
    profiles: Vec<String>,
    /// Seed of the file sizes.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    /// Print a JSON array of rows instead of a table.
    #[arg(long)]
    json: bool,
}

impl MnfsArgs {
    fn format(&self, profile: &str) -> anyhow::Result<Fs> {
        let config = DeviceArgs {
            geometry: self.geometry.clone(),
            chips: 1,
            device_size: self.device_size,
            seed: None,
        }
        .config()?;
        format(
            config,
            &FsArgs {
                profile: profile.into(),
                ..FsArgs::default()
            },
        )
    }
}

/// Random-sized files until the device is full or `fill_to` of it is used. Returns the
/// files made and the bytes written.
fn fill(
    fs: &mut Fs,
    seed: u64,
    sizes: (u64, u64),
    write_size: usize,
    fill_to: f64,
) -> anyhow::Result<(u64, u64)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let data = noise(write_size, seed);
    let (mut files, mut bytes) = (0u64, 0u64);
    'files: while used_fraction(fs) < fill_to {
        let size = rng.gen_range(sizes.0..=sizes.1);
        let ino = match fs.create(
            ROOT_INO,
            format!("m{files:05}").as_bytes(),
            NewObject::regular_file(),
        ) {
            Ok(a) => a.ino,
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("creating a file"),
        };
        files += 1;
        let mut off = 0;
        while off < size {
            let n = (size - off).min(write_size as u64) as usize;
            match fs.write(ino, off, &data[..n]) {
                Ok(_) => {}
                Err(FsError::NoSpace) => break 'files,
                Err(e) => return Err(e).context("writing a file"),
            }
            off += n as u64;
            bytes += n as u64;
        }
        match fs.fsync(ino) {
            Ok(()) => {}
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("fsync"),
        }
    }
    Ok((files, bytes))
}

#[derive(Args)]
pub struct FillArgs {
    #[command(flatten)]
    common: MnfsArgs,
    /// Smallest file.
    #[arg(long, default_value = "256KiB", value_parser = parse_bytes, value_name = "SIZE")]
    min_size: u64,
    /// Largest file.
    #[arg(long, default_value = "8MiB", value_parser = parse_bytes, value_name = "SIZE")]
    max_size: u64,
    /// Bytes per write call.
    #[arg(long, default_value = "32KiB", value_parser = parse_bytes, value_name = "SIZE")]
    write_size: u64,
    /// Stop once this share of the space is used.
    #[arg(long, default_value_t = 1.0, value_name = "U")]
    fill_to: f64,
}

#[derive(Serialize)]
struct FillRow {
    profile: String,
    files: u64,
    bytes: u64,
    sim_s: f64,
    energy_j: f64,
    kib_per_s: f64,
    flash_reads: u64,
    flash_erases: u64,
}

pub fn run_fill(args: FillArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.min_size > 0 && args.min_size <= args.max_size && args.write_size > 0,
        "need 0 < --min-size <= --max-size and --write-size > 0"
    );
    let mut rows = Vec::new();
    for profile in &args.common.profiles {
        let mut fs = args.common.format(profile)?;
        let t0 = fs.device_mut().stats().total();
        let start = Mark::of_fs(&fs);
        let (files, bytes) = fill(
            &mut fs,
            args.common.workload_seed,
            (args.min_size, args.max_size),
            args.write_size as usize,
            args.fill_to,
        )?;
        let spent = start.to_fs(&fs);
        let t1 = fs.device_mut().stats().total();
        rows.push(FillRow {
            profile: profile.clone(),
            files,
            bytes,
            sim_s: spent.sim_s(),
            energy_j: spent.energy_j(),
            kib_per_s: bytes as f64 / 1024.0 / spent.sim_s().max(1e-12),
            flash_reads: (t1.page_reads + t1.oob_reads) - (t0.page_reads + t0.oob_reads),
            flash_erases: t1.erases - t0.erases,
        });
    }
    if args.common.json {
        return print_json(&rows);
    }
    println!(
        "{:<8} {:>6} {:>10} {:>9} {:>10} {:>9} {:>8}",
        "profile", "files", "MiB", "sim_s", "KiB/s", "reads", "erases"
    );
    for r in &rows {
        println!(
            "{:<8} {:>6} {:>10.1} {:>9.2} {:>10.0} {:>9} {:>8}",
            r.profile,
            r.files,
            r.bytes as f64 / (1 << 20) as f64,
            r.sim_s,
            r.kib_per_s,
            r.flash_reads,
            r.flash_erases
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    common: MnfsArgs,
    /// File sizes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64KiB,256KiB,1MiB,4MiB,16MiB,32MiB",
        value_parser = parse_bytes,
        value_name = "SIZES"
    )]
    sizes: Vec<u64>,
    /// Share of the device filled (and emptied again) before the measured file.
    #[arg(long, default_value_t = 0.5, value_name = "U")]
    fill_to: f64,
}

#[derive(Serialize)]
struct DeleteRow {
    profile: String,
    file_bytes: u64,
    delete_sim_ms: f64,
    energy_j: f64,
    erases: u64,
}

pub fn run_delete(args: DeleteArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for profile in &args.common.profiles {
        for &size in &args.sizes {
            let mut fs = args.common.format(profile)?;
            let (files, _) = fill(
                &mut fs,
                args.common.workload_seed,
                (256 << 10, 8 << 20),
                32 << 10,
                args.fill_to,
            )?;
            for i in 0..files {
                fs.unlink(ROOT_INO, format!("m{i:05}").as_bytes())
                    .context("emptying the device")?;
            }
            let ino = fs
                .create(ROOT_INO, b"victim", NewObject::regular_file())
                .context("creating the file")?
                .ino;
            let data = noise(size as usize, 5);
            fs.write(ino, 0, &data)
                .with_context(|| format!("writing {size} bytes"))?;
            fs.fsync(ino).context("fsync")?;
            let e0 = fs.device_mut().stats().total().erases;
            let start = Mark::of_fs(&fs);
            fs.unlink(ROOT_INO, b"victim")
                .context("the measured unlink")?;
            let spent = start.to_fs(&fs);
            rows.push(DeleteRow {
                profile: profile.clone(),
                file_bytes: size,
                delete_sim_ms: spent.sim_ms(),
                energy_j: spent.energy_j(),
                erases: fs.device_mut().stats().total().erases - e0,
            });
        }
    }
    if args.common.json {
        return print_json(&rows);
    }
    println!(
        "{:<8} {:>12} {:>12} {:>8}",
        "profile", "file KiB", "delete ms", "erases"
    );
    for r in &rows {
        println!(
            "{:<8} {:>12} {:>12.2} {:>8}",
            r.profile,
            r.file_bytes >> 10,
            r.delete_sim_ms,
            r.erases
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct SmallArgs {
    #[command(flatten)]
    common: MnfsArgs,
    /// Files to create.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    files: u64,
    /// Bytes in each.
    #[arg(long, default_value = "512", value_parser = parse_bytes, value_name = "SIZE")]
    size: u64,
}

#[derive(Serialize)]
struct SmallRow {
    profile: String,
    files: u64,
    file_bytes: u64,
    /// Blocks holding any page when the run ends.
    blocks_in_use: u64,
    flash_bytes: u64,
    flash_programs: u64,
    flash_erases: u64,
    sim_s: f64,
    /// "ok", or the file at which the device filled.
    outcome: String,
}

pub fn run_small(args: SmallArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.size > 0, "--size must be at least 1 byte");
    let data = noise(args.size as usize, 9);
    let mut rows = Vec::new();
    for profile in &args.common.profiles {
        let mut fs = args.common.format(profile)?;
        let t0 = fs.device_mut().stats().total();
        let start = Mark::of_fs(&fs);
        let mut outcome = "ok".to_string();
        for i in 0..args.files {
            let step = fs
                .create(
                    ROOT_INO,
                    format!("s{i:06}").as_bytes(),
                    NewObject::regular_file(),
                )
                .and_then(|a| {
                    fs.write(a.ino, 0, &data)?;
                    fs.fsync(a.ino)
                });
            match step {
                Ok(()) => {}
                Err(FsError::NoSpace) => {
                    outcome = format!("enospc at file {i}");
                    break;
                }
                Err(e) => return Err(e).context("creating a small file"),
            }
        }
        match fs.sync() {
            Ok(()) | Err(FsError::NoSpace) => {}
            Err(e) => return Err(e).context("sync"),
        }
        let spent = start.to_fs(&fs);
        let t1 = fs.device_mut().stats().total();
        let geometry = fs.device().geometry();
        let block_bytes = u64::from(geometry.pages_per_block) * u64::from(geometry.page_size_bytes);
        let blocks_in_use = fs
            .block_table()
            .iter()
            .filter(|b| {
                matches!(
                    b.state,
                    nandkit_fs::blocks::BlockState::Full | nandkit_fs::blocks::BlockState::Active
                ) && b.next_page() > 0
            })
            .count() as u64;
        rows.push(SmallRow {
            profile: profile.clone(),
            files: args.files,
            file_bytes: args.size,
            blocks_in_use,
            flash_bytes: blocks_in_use * block_bytes,
            flash_programs: t1.programs - t0.programs,
            flash_erases: t1.erases - t0.erases,
            sim_s: spent.sim_s(),
            outcome,
        });
    }
    if args.common.json {
        return print_json(&rows);
    }
    println!(
        "{:<8} {:>7} {:>7} {:>10} {:>10} {:>9} {:>8} {:>9}  outcome",
        "profile", "files", "bytes", "blocks", "flash MiB", "programs", "erases", "sim_s"
    );
    for r in &rows {
        println!(
            "{:<8} {:>7} {:>7} {:>10} {:>10.2} {:>9} {:>8} {:>9.2}  {}",
            r.profile,
            r.files,
            r.file_bytes,
            r.blocks_in_use,
            r.flash_bytes as f64 / (1 << 20) as f64,
            r.flash_programs,
            r.flash_erases,
            r.sim_s,
            r.outcome
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct MountRow {
    profile: String,
    /// scan or checkpoint.
    method: &'static str,
    files: u64,
    utilization: f64,
    mount_sim_ms: f64,
    /// Flash reads the mount made: whole pages and spare areas only.
    mount_reads: u64,
    mount_page_reads: u64,
    mount_oob_reads: u64,
    heap_bytes: u64,
    /// Files whose map is block-granular (one entry an erase block; `mnfs`) and files
    /// whose map is page-mapped, after the mount.
    block_granular_files: u64,
    page_mapped_files: u64,
    energy_j: f64,
}

pub fn run_mount(args: MnfsArgs) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for profile in &args.profiles {
        let mut fs = args.format(profile)?;
        let (files, _) = fill(
            &mut fs,
            args.workload_seed,
            (256 << 10, 8 << 20),
            32 << 10,
            1.0,
        )?;
        let utilization = used_fraction(&fs);
        // A profile without a checkpoint (yaffs1) mounts by scan either way.
        let methods: &[bool] = if fs.config().checkpoint {
            &[true, false]
        } else {
            &[true]
        };
        let mut dev = fs.unmount().context("unmounting")?;
        for &force_scan in methods {
            let before = dev.stats().total();
            let heap_before = crate::heap::live_bytes();
            let (mut fs, timing) = timed_mount(dev, force_scan)?;
            let heap = crate::heap::live_bytes().saturating_sub(heap_before) as u64;
            let after = fs.device_mut().stats().total();
            let (block_granular_files, page_mapped_files) = fs.file_map_shapes();
            rows.push(MountRow {
                profile: profile.clone(),
                method: if force_scan { "scan" } else { "checkpoint" },
                files,
                utilization,
                mount_sim_ms: timing.sim_ms,
                mount_reads: after.page_reads + after.oob_reads
                    - before.page_reads
                    - before.oob_reads,
                mount_page_reads: after.page_reads - before.page_reads,
                mount_oob_reads: after.oob_reads - before.oob_reads,
                heap_bytes: heap,
                block_granular_files,
                page_mapped_files,
                energy_j: timing.energy_j,
            });
            dev = fs.unmount().context("unmounting")?;
        }
    }
    if args.json {
        return print_json(&rows);
    }
    println!(
        "{:<8} {:<10} {:>6} {:>6} {:>12} {:>8} {:>10} {:>14}",
        "profile", "mount", "files", "u", "mount ms", "reads", "heap B", "maps blk/page"
    );
    for r in &rows {
        println!(
            "{:<8} {:<10} {:>6} {:>6.2} {:>12.2} {:>8} {:>10} {:>14}",
            r.profile,
            r.method,
            r.files,
            r.utilization,
            r.mount_sim_ms,
            r.mount_reads,
            r.heap_bytes,
            format!("{}/{}", r.block_granular_files, r.page_mapped_files)
        );
    }
    Ok(())
}
