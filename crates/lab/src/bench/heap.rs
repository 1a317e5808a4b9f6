//! `nandkit bench heap`: how much heap a mounted file system holds for (a) one big file and
//! (b) many small files. Each case formats a fresh device, populates it, unmounts, and then
//! measures the bytes left allocated by `FileSystem::mount` (live heap after it returns
//! minus live heap before the call), once by the default mount and once by a forced scan.
//!
//! The RAM device's own page buffers are allocated while populating, before the baseline,
//! so they are not counted; only what the mount call adds is.

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_fs::NewObject;
use nandkit_fs::{MountMethod, ROOT_INO};
use serde::Serialize;

use super::energy::Mark;
use super::{
    directory, format, human_joules, mount_options, mount_parts, noise, print_json,
    write_sequential, DeviceInfo, FsArgs, Parts, PhaseStats, Progress, Snapshot,
};
use crate::device_args::{parse_bytes, DeviceArgs};
use crate::heap as counter;

/// What `--help` says about this benchmark.
pub const LONG_ABOUT: &str =
    "Measures the heap a mounted file system keeps, for one big file and for many \
    small files. For each: format a RAM device, populate it, unmount it cleanly, \
    then mount it twice (the default way, which uses a checkpoint when the \
    unmount left one, and by forced scan). The heap counted is what is still \
    allocated when FileSystem::mount returns minus what was allocated just \
    before the call (a counting global allocator), so the device's own memory \
    is left out. The peak during the mount is reported too.\n\n\
    The JSON names heap_bytes_one_100mib_file and heap_bytes_35000_files_2kib \
    refer to the default workload; each case's object holds the sizes used.";

#[derive(Args)]
pub struct HeapArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// Size of the single file of case (a).
    #[arg(long, default_value = "100MiB", value_parser = parse_bytes, value_name = "SIZE")]
    big_file_size: u64,
    /// Number of small files of case (b).
    #[arg(long, default_value_t = 35_000, value_name = "N")]
    files: u64,
    /// Size of each small file.
    #[arg(long, default_value = "2KiB", value_parser = parse_bytes, value_name = "SIZE")]
    small_file_size: u64,
    /// Directories the small files are spread over (round-robin), under the root.
    #[arg(long, default_value_t = 1, value_name = "N")]
    dirs: u64,
    /// Bytes per write call.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes, value_name = "SIZE")]
    write_size: u64,
    /// Seed of the data written (its bytes only).
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    #[command(flatten)]
    nvram: super::BenchNvramArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Heap kept by one mount.
#[derive(Serialize, Clone, Debug)]
struct MountHeap {
    method: MountMethod,
    /// Live heap after mount returned minus live heap before the call.
    heap_bytes: i64,
    /// Highest live heap during the call, above the baseline.
    heap_peak_bytes: i64,
    host_ms: f64,
    sim_ms: f64,
    energy_j: f64,
}

#[derive(Serialize)]
struct Case {
    files: u64,
    bytes_per_file: u64,
    dirs: u64,
    /// The populate phase: creates, writes and a sync of everything.
    populate: PhaseStats,
    /// Host and simulated time of the clean unmount after it (checkpoint), and its energy.
    unmount_host_s: f64,
    unmount_sim_s: f64,
    unmount_energy_j: f64,
    /// Mount with default options (a checkpoint if the unmount left one).
    default_mount: MountHeap,
    /// Mount with force_scan.
    scan_mount: MountHeap,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    #[serde(flatten)]
    device: DeviceInfo,
    profile: String,
    workload_seed: u64,
    /// Default mount, case (a).
    heap_bytes_one_100mib_file: i64,
    /// Default mount, case (b).
    heap_bytes_35000_files_2kib: i64,
    heap_bytes_per_gib_one_100mib_file: f64,
    heap_bytes_per_gib_35000_files_2kib: f64,
    /// Forced-scan mount, case (a) and (b).
    heap_bytes_one_100mib_file_scan: i64,
    heap_bytes_35000_files_2kib_scan: i64,
    heap_bytes_per_gib_one_100mib_file_scan: f64,
    heap_bytes_per_gib_35000_files_2kib_scan: f64,
    /// How the default mounts found their state (Checkpoint, or Scan if none was left).
    default_mount_method_one_100mib_file: MountMethod,
    default_mount_method_35000_files_2kib: MountMethod,
    one_100mib_file: Case,
    many_small_files: Case,
}

pub fn run(args: HeapArgs) -> anyhow::Result<()> {
    ensure!(args.write_size > 0, "--write-size must be at least 1 byte");
    ensure!(args.dirs >= 1, "--dirs must be at least 1");
    let config = args.device.config()?;
    let info = DeviceInfo::of(&config);
    let gib = info.device_bytes as f64 / (1u64 << 30) as f64;

    // MiNV keeps every piece of metadata in its NVRAM: many files fill it before the flash.
    let hint = |e: anyhow::Error| {
        if args.fs.profile == "minv" {
            e.context(
                "the NVRAM holding minv's metadata is full, or the flash: a larger NVRAM: \
                 --nvram-size",
            )
        } else {
            e
        }
    };
    let big = run_case(&args, &config, 1, args.big_file_size, 1).map_err(hint)?;
    let small =
        run_case(&args, &config, args.files, args.small_file_size, args.dirs).map_err(hint)?;

    let report = Report {
        bench: "heap",
        profile: args.fs.profile.clone(),
        workload_seed: args.workload_seed,
        heap_bytes_one_100mib_file: big.default_mount.heap_bytes,
        heap_bytes_35000_files_2kib: small.default_mount.heap_bytes,
        heap_bytes_per_gib_one_100mib_file: big.default_mount.heap_bytes as f64 / gib,
        heap_bytes_per_gib_35000_files_2kib: small.default_mount.heap_bytes as f64 / gib,
        heap_bytes_one_100mib_file_scan: big.scan_mount.heap_bytes,
        heap_bytes_35000_files_2kib_scan: small.scan_mount.heap_bytes,
        heap_bytes_per_gib_one_100mib_file_scan: big.scan_mount.heap_bytes as f64 / gib,
        heap_bytes_per_gib_35000_files_2kib_scan: small.scan_mount.heap_bytes as f64 / gib,
        default_mount_method_one_100mib_file: big.default_mount.method,
        default_mount_method_35000_files_2kib: small.default_mount.method,
        device: info,
        one_100mib_file: big,
        many_small_files: small,
    };
    if args.json {
        print_json(&report)
    } else {
        print_table(&report);
        Ok(())
    }
}

fn run_case(
    args: &HeapArgs,
    config: &nandkit_flash::DeviceConfig,
    files: u64,
    size: u64,
    dirs: u64,
) -> anyhow::Result<Case> {
    let fs_args = args.nvram.apply(&args.fs);
    let mut fs = format(config.clone(), &fs_args)?;
    let chunk_bytes = fs.chunk_bytes();
    let data = noise(
        args.write_size.min(size).max(1) as usize,
        args.workload_seed,
    );
    let (mut progress, what) = if files == 1 {
        (Progress::bytes(size, "writing", args.json), "file")
    } else {
        (Progress::items(files, "creating files", args.json), "files")
    };
    let start = Snapshot::take(&mut fs);
    let parents: Vec<_> = if files == 1 || dirs == 1 {
        vec![ROOT_INO]
    } else {
        (0..dirs)
            .map(|d| {
                let name = format!("d{d:03}");
                fs.create(ROOT_INO, name.as_bytes(), directory())
                    .map(|a| a.ino)
                    .with_context(|| format!("creating directory {name}"))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut quiet = Progress::bytes(size, "", true);
    for k in 0..files {
        let parent = parents[(k % parents.len() as u64) as usize];
        let name = format!("f{k:06}");
        let ino = fs
            .create(parent, name.as_bytes(), NewObject::regular_file())
            .with_context(|| format!("creating {what} {name}"))?
            .ino;
        if files == 1 {
            write_sequential(&mut fs, ino, size, args.write_size, &data, &mut progress)?;
        } else {
            write_sequential(&mut fs, ino, size, args.write_size, &data, &mut quiet)?;
            progress.inc(1);
        }
    }
    fs.sync().context("sync after populating")?;
    let end = Snapshot::take(&mut fs);
    progress.finish();
    let populate = PhaseStats::between(&start, &end, chunk_bytes);
    let objects = fs.statfs().objects;

    let before_unmount = Mark::of_fs(&fs);
    let t = std::time::Instant::now();
    let mut parts = fs.unmount_parts().context("unmounting")?;
    let unmount_host_s = t.elapsed().as_secs_f64();
    let unmount = before_unmount.to_unmounted(&mut parts);

    let (parts, default_mount) = measure_mount(parts, false, objects)?;
    let (_, scan_mount) = measure_mount(parts, true, objects)?;
    Ok(Case {
        files,
        bytes_per_file: size,
        dirs: parents.len() as u64,
        populate,
        unmount_host_s,
        unmount_sim_s: unmount.sim_s(),
        unmount_energy_j: unmount.energy_j(),
        default_mount,
        scan_mount,
    })
}

/// Mounts and measures the heap the mount call leaves allocated; hands the devices back
/// untouched (nothing is written). The NVRAM of a minv file system was allocated before:
/// its bytes are not the mount's.
fn measure_mount(
    mut parts: Parts,
    force_scan: bool,
    objects: u64,
) -> anyhow::Result<(Parts, MountHeap)> {
    let options = mount_options(force_scan);
    // Marks are taken outside the heap window: reading the counters allocates.
    let start = Mark::of_unmounted(&mut parts);
    let before = counter::live_bytes() as i64;
    counter::reset_peak();
    let t = std::time::Instant::now();
    let fs = mount_parts(parts, options)?;
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    let after = counter::live_bytes() as i64;
    let peak = counter::peak_bytes() as i64;
    let spent = start.to_fs(&fs);
    let found = fs.statfs().objects;
    ensure!(
        found == objects,
        "mount found {found} objects, {objects} were written"
    );
    let heap = MountHeap {
        method: fs.mount_method(),
        heap_bytes: after - before,
        heap_peak_bytes: peak - before,
        host_ms,
        sim_ms: spent.sim_ms(),
        energy_j: spent.energy_j(),
    };
    Ok((fs.into_parts(), heap))
}

fn print_table(r: &Report) {
    r.device.print();
    for (label, c) in [
        ("one file", &r.one_100mib_file),
        ("small files", &r.many_small_files),
    ] {
        println!(
            "{label:<12}{} file(s) of {} bytes in {} director{}",
            c.files,
            c.bytes_per_file,
            c.dirs,
            if c.dirs == 1 { "y" } else { "ies" }
        );
        c.populate.print("  populate");
        println!(
            "  unmount   host {:.3} s, simulated {:.3} s, energy {}",
            c.unmount_host_s,
            c.unmount_sim_s,
            human_joules(c.unmount_energy_j)
        );
        for (what, m) in [("mount", &c.default_mount), ("scan mount", &c.scan_mount)] {
            println!(
                "  {what:<11}{:?}: heap kept {} bytes ({:.1} per file, {:.0} per GiB of flash), \
                 peak {} bytes; host {:.1} ms, simulated {:.1} ms, energy {}",
                m.method,
                m.heap_bytes,
                m.heap_bytes as f64 / c.files as f64,
                m.heap_bytes as f64 / (r.device.device_bytes as f64 / (1u64 << 30) as f64),
                m.heap_peak_bytes,
                m.host_ms,
                m.sim_ms,
                human_joules(m.energy_j)
            );
        }
    }
}
