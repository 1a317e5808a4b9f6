//! `nandkit bench mount`: what a mount costs in flash reads, time and RAM, from a
//! checkpoint and by full scan, on a device holding many small files (the measurement
//! YAFFS2 is usually compared on).

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_fs::blocks::BlockState;
use nandkit_fs::NewObject;
use nandkit_fs::{Ino, Kind, MountMethod, ROOT_INO};
use serde::Serialize;

use super::energy::Mark;
use super::{
    directory, format, mount_options, mount_parts, noise, print_json, DeviceInfo, FsArgs, Parts,
    PhaseStats, Progress, Snapshot,
};
use crate::device_args::{parse_bytes, DeviceArgs};
use crate::heap as counter;

pub const LONG_ABOUT: &str = "Measures what mounting costs. Formats a RAM device (by \
    default 32 MiB of 2 KiB pages, 64 pages per block), creates N small files (each \
    created, written and closed: 3 page programs), unmounts cleanly (a checkpoint), \
    then mounts twice: the default way (from the checkpoint) and by a forced full scan. \
    For each mount: flash page reads and OOB-only reads, simulated and host time, energy, and the \
    heap the mount keeps (a counting allocator: live bytes after the call minus before). \
    Then every directory is listed and every file stat'ed, which loads the names and \
    attributes a mount leaves on flash until they are needed, and the heap is measured \
    again.\n\nThe scan reads one page per block it can (a summary, a run's last page, or \
    an erased first page) and every page of blocks without a summary (the ones open when \
    the device was last written).";

#[derive(Args)]
pub struct MountArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// Number of small files.
    #[arg(long, default_value_t = 2_000, value_name = "N")]
    files: u64,
    /// Size of each file.
    #[arg(long, default_value = "2KiB", value_parser = parse_bytes, value_name = "SIZE")]
    file_size: u64,
    /// Directories the files are spread over (round-robin), under the root.
    #[arg(long, default_value_t = 1, value_name = "N")]
    dirs: u64,
    /// Seed of the data written.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    #[command(flatten)]
    nvram: super::BenchNvramArgs,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// One measured mount.
#[derive(Serialize, Clone, Debug)]
struct MountCost {
    method: MountMethod,
    /// Full page reads (data and OOB).
    page_reads: u64,
    /// OOB-only reads.
    oob_reads: u64,
    /// Both.
    reads: u64,
    /// Reads per block in use (not erased, not bad).
    reads_per_used_block: f64,
    sim_ms: f64,
    energy_j: f64,
    host_ms: f64,
    /// Heap the mount keeps (live bytes after it returned minus before the call).
    heap_bytes: i64,
    heap_peak_bytes: i64,
    heap_bytes_per_object: f64,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    #[serde(flatten)]
    device: DeviceInfo,
    profile: String,
    files: u64,
    file_size_bytes: u64,
    dirs: u64,
    workload_seed: u64,
    populate: PhaseStats,
    /// Page programs per file (create, write, close), over the whole populate phase.
    programs_per_file: f64,
    /// Blocks holding something (not erased, not bad) after the clean unmount.
    used_blocks: u64,
    /// Pages of blocks without a summary when the scan ran (the stream's open block).
    open_block_pages: u64,
    checkpoint_mount: MountCost,
    scan_mount: MountCost,
    /// Heap after listing every directory and stat'ing every file (everything loaded).
    heap_bytes_all_loaded: i64,
    heap_bytes_per_object_all_loaded: f64,
}

pub fn run(args: MountArgs) -> anyhow::Result<()> {
    let mut device = args.device.clone();
    if device.device_size.is_none() {
        device.device_size = Some(32 << 20);
    }
    ensure!(args.dirs >= 1, "--dirs must be at least 1");
    let config = device.config()?;
    if args.fs.profile == "ubifs" {
        return super::ubifs_mount::run(super::ubifs_mount::UbifsMountArgs {
            config,
            files: args.files,
            file_size: args.file_size,
            dirs: args.dirs,
            seed: args.workload_seed,
            json: args.json,
        });
    }
    let info = DeviceInfo::of(&config);
    let fs_args = args.nvram.apply(&args.fs);
    let mut fs = format(config, &fs_args)?;
    let chunk_bytes = fs.chunk_bytes();
    let data = noise(args.file_size.max(1) as usize, args.workload_seed);

    let mut progress = Progress::items(args.files, "creating files", args.json);
    let start = Snapshot::take(&mut fs);
    let parents: Vec<Ino> = if args.dirs == 1 {
        vec![ROOT_INO]
    } else {
        (0..args.dirs)
            .map(|d| {
                fs.create(ROOT_INO, format!("d{d:03}").as_bytes(), directory())
                    .map(|a| a.ino)
                    .context("creating a directory")
            })
            .collect::<anyhow::Result<_>>()?
    };
    for k in 0..args.files {
        let parent = parents[(k % parents.len() as u64) as usize];
        let name = format!("f{k:06}");
        let ino = fs
            .create(parent, name.as_bytes(), NewObject::regular_file())
            .with_context(|| format!("creating {name}"))?
            .ino;
        fs.open(ino)?;
        let n = fs.write(ino, 0, &data[..args.file_size as usize])?;
        ensure!(n as u64 == args.file_size, "device full at file {k}");
        fs.release(ino)?;
        progress.inc(1);
    }
    let end = Snapshot::take(&mut fs);
    progress.finish();
    let populate = PhaseStats::between(&start, &end, chunk_bytes);
    let objects = fs.statfs().objects;
    let parts = fs.unmount_parts().context("unmounting")?;

    let (parts, used_blocks, open_block_pages) = {
        let fs = mount_parts(parts, mount_options(false))?;
        let table = fs.block_table();
        let used = table
            .iter()
            .filter(|b| !matches!(b.state, BlockState::Empty | BlockState::Bad))
            .count() as u64;
        let open: u64 = table
            .iter()
            .filter(|b| b.state == BlockState::Active)
            .map(|b| u64::from(b.next_page()))
            .sum();
        (fs.into_parts(), used, open)
    };
    let (parts, checkpoint_mount) = measure(parts, false, objects, used_blocks)?;
    let (parts, scan_mount) = measure(parts, true, objects, used_blocks)?;

    // Everything loaded: names of every directory, attributes of every object.
    let before = counter::live_bytes() as i64;
    let mut fs = mount_parts(parts, mount_options(false))?;
    let mut stack = vec![ROOT_INO];
    while let Some(d) = stack.pop() {
        for e in fs.readdir(d)? {
            fs.getattr(e.ino)?;
            if e.kind == Kind::Dir {
                stack.push(e.ino);
            }
        }
    }
    let all_loaded = counter::live_bytes() as i64 - before;
    drop(fs);

    let report = Report {
        bench: "mount",
        device: info,
        profile: args.fs.profile.clone(),
        files: args.files,
        file_size_bytes: args.file_size,
        dirs: parents.len() as u64,
        workload_seed: args.workload_seed,
        programs_per_file: populate.flash_programs as f64 / args.files.max(1) as f64,
        populate,
        used_blocks,
        open_block_pages,
        checkpoint_mount,
        scan_mount,
        heap_bytes_all_loaded: all_loaded,
        heap_bytes_per_object_all_loaded: all_loaded as f64 / (objects + 1) as f64,
    };
    if args.json {
        print_json(&report)
    } else {
        print_table(&report);
        Ok(())
    }
}

/// Mounts, counting reads, time and heap; hands the devices back.
fn measure(
    mut parts: Parts,
    force_scan: bool,
    objects: u64,
    used_blocks: u64,
) -> anyhow::Result<(Parts, MountCost)> {
    let reads_before = parts.0.stats().total();
    // Marks are taken outside the heap window: reading the counters allocates.
    let start = Mark::of_unmounted(&mut parts);
    let before = counter::live_bytes() as i64;
    counter::reset_peak();
    let t = std::time::Instant::now();
    let mut fs = mount_parts(parts, mount_options(force_scan))?;
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    let after = counter::live_bytes() as i64;
    let peak = counter::peak_bytes() as i64;
    let spent = start.to_fs(&fs);
    let reads_after = fs.device_mut().stats().total();
    let found = fs.statfs().objects;
    ensure!(
        found == objects,
        "mount found {found} objects, {objects} were written"
    );
    let page_reads = reads_after.page_reads - reads_before.page_reads;
    let oob_reads = reads_after.oob_reads - reads_before.oob_reads;
    let cost = MountCost {
        method: fs.mount_method(),
        page_reads,
        oob_reads,
        reads: page_reads + oob_reads,
        reads_per_used_block: (page_reads + oob_reads) as f64 / used_blocks.max(1) as f64,
        sim_ms: spent.sim_ms(),
        energy_j: spent.energy_j(),
        host_ms,
        heap_bytes: after - before,
        heap_peak_bytes: peak - before,
        heap_bytes_per_object: (after - before) as f64 / (objects + 1) as f64,
    };
    Ok((fs.into_parts(), cost))
}

fn print_table(r: &Report) {
    r.device.print();
    println!(
        "files       {} of {} bytes in {} director{}; {:.2} programs per file",
        r.files,
        r.file_size_bytes,
        r.dirs,
        if r.dirs == 1 { "y" } else { "ies" },
        r.programs_per_file
    );
    println!(
        "blocks      {} in use, {} pages in open blocks",
        r.used_blocks, r.open_block_pages
    );
    println!(
        "{:<12} {:>8} {:>8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>10}",
        "MOUNT",
        "READS",
        "PAGE",
        "OOB",
        "SIM MS",
        "ENERGY mJ",
        "HOST MS",
        "HEAP BYTES",
        "PER OBJECT"
    );
    for (label, m) in [("checkpoint", &r.checkpoint_mount), ("scan", &r.scan_mount)] {
        println!(
            "{label:<12} {:>8} {:>8} {:>8} {:>10.2} {:>10.3} {:>10.2} {:>12} {:>10.1}",
            m.reads,
            m.page_reads,
            m.oob_reads,
            m.sim_ms,
            m.energy_j * 1e3,
            m.host_ms,
            m.heap_bytes,
            m.heap_bytes_per_object
        );
    }
    println!(
        "all loaded   heap {} bytes ({:.1} per object) after listing and stat'ing everything",
        r.heap_bytes_all_loaded, r.heap_bytes_per_object_all_loaded
    );
}
