//! `nandkit bench parity`: what parity across the chips costs, and how long a rebuild
//! takes. Each chip count runs the same O_SYNC writes with parity and without (both over
//! a UBI per chip), then fills an array with parity, fails a chip, puts a new one in and
//! rebuilds it.

use std::time::Instant;

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_flash::{Flash, StripedFlash};
use nandkit_fs::{NewObject, ROOT_INO};
use serde::Serialize;

use super::iozone::{self, IozoneArgs, Mode};
use super::{format, noise, print_json, write_sequential, FsArgs, Progress};
use crate::device_args::{parse_bytes, DeviceArgs};

pub const LONG_ABOUT: &str = "Parity across the chips of an array (mkfs --parity): a page of \
the file system is a stripe of one page on every chip, P-1 of data and their XOR, the parity \
chip rotating per stripe. Per chip count: sequential O_SYNC writes of --seq-size in one \
record, and 4 KiB O_SYNC random overwrites of a --rand-file file, each with parity and \
without (both over a UBI per chip, simulated MB/s); write amplification (chip pages \
programmed per page of user data); then the time to rebuild a chip of a full array: the \
array is filled to --fill of its space, one chip fails, a new one takes its place and \
`rebuild` writes back every page it should hold.";

#[derive(Args)]
pub struct ParityArgs {
    /// Device preset (see `nandkit presets`).
    #[arg(long, short = 'g', default_value = "tlc-1g", value_name = "NAME")]
    geometry: String,
    /// Total capacity of the array, split over its chips.
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes, value_name = "SIZE")]
    device_size: u64,
    /// Chip counts to measure (3 or more), comma-separated.
    #[arg(
        long = "chips",
        default_value = "4,8",
        value_delimiter = ',',
        value_name = "P,..."
    )]
    chip_counts: Vec<u32>,
    /// Size of the sequential O_SYNC write (one record).
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes, value_name = "SIZE")]
    seq_size: u64,
    /// File the random 4 KiB O_SYNC overwrites land in (one write per 4 KiB of it).
    #[arg(long, default_value = "4MiB", value_parser = parse_bytes, value_name = "SIZE")]
    rand_file: u64,
    /// Part of the file system's free space filled before the rebuild.
    #[arg(long, default_value_t = 0.9, value_name = "FRACTION")]
    fill: f64,
    /// Seed of the device and the data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One workload with parity and without.
#[derive(Serialize)]
struct Pair {
    plain_mb_per_s: f64,
    parity_mb_per_s: f64,
    /// parity / plain.
    ratio: f64,
    /// Chip pages programmed per chip page of user data.
    plain_wa: f64,
    parity_wa: f64,
    plain_p99_us: f64,
    parity_p99_us: f64,
}

#[derive(Serialize)]
struct Rebuild {
    /// User bytes on the array when the chip failed.
    data_bytes: u64,
    /// LEBs and pages written on the new chip.
    lebs_written: u32,
    pages_written: u64,
    sim_s: f64,
    host_s: f64,
    /// Chip bytes written per simulated second.
    sim_mb_per_s: f64,
}

#[derive(Serialize)]
struct Row {
    bench: &'static str,
    geometry: String,
    chips: u32,
    device_bytes: u64,
    /// Space the file system offers, with parity and without.
    plain_fs_bytes: u64,
    parity_fs_bytes: u64,
    seq_write: Pair,
    rand_write_4k: Pair,
    rebuild: Rebuild,
    /// The goal: parity's 16 MB O_SYNC writes at 70% of no parity's or better.
    seq_goal_met: bool,
}

pub fn run(args: ParityArgs) -> anyhow::Result<()> {
    ensure!(
        !args.chip_counts.is_empty(),
        "--chips: give at least one count"
    );
    ensure!(
        args.chip_counts.iter().all(|&p| p >= 3),
        "--chips: parity needs 3 chips or more"
    );
    ensure!(
        args.fill > 0.0 && args.fill <= 1.0,
        "--fill must be in (0, 1]"
    );
    let mut rows = Vec::new();
    for &chips in &args.chip_counts {
        let row = one(&args, chips).with_context(|| format!("{chips} chips"))?;
        if !args.json {
            print_row(&row, rows.is_empty());
        }
        rows.push(row);
    }
    if args.json {
        print_json(&rows)?;
    }
    Ok(())
}

fn iozone_args(args: &ParityArgs, parity: bool, mode: Mode, record: u64, file: u64) -> IozoneArgs {
    IozoneArgs {
        device: DeviceArgs {
            geometry: args.geometry.clone(),
            chips: 1,
            device_size: Some(args.device_size),
            seed: Some(args.seed),
        },
        fs: FsArgs {
            ubi: Some(true),
            parity,
            ..FsArgs::default()
        },
        mode,
        record,
        file_size: file,
        workload_seed: args.seed,
        sweep: false,
        executor: crate::flash_bench::ExecutorArg::Sim,
        software_cost: nandkit_flash::HostCost::ZERO,
        json: true,
    }
}

/// The same writes with parity and without.
fn pair(args: &ParityArgs, chips: u32, mode: Mode, record: u64, file: u64) -> anyhow::Result<Pair> {
    let page = nandkit_flash::preset(&args.geometry)?
        .geometry
        .page_size_bytes as f64;
    let run = |parity| {
        iozone::one(
            &iozone_args(args, parity, mode, record, file),
            chips,
            record,
            file,
        )
    };
    let plain = run(false)?;
    let with = run(true)?;
    let wa = |r: &iozone::Row| r.page_programs as f64 * page / r.bytes.max(1) as f64;
    Ok(Pair {
        plain_mb_per_s: plain.sim_mb_per_s,
        parity_mb_per_s: with.sim_mb_per_s,
        ratio: with.sim_mb_per_s / plain.sim_mb_per_s.max(1e-12),
        plain_wa: wa(&plain),
        parity_wa: wa(&with),
        plain_p99_us: plain.record_p99_us,
        parity_p99_us: with.record_p99_us,
    })
}

fn one(args: &ParityArgs, chips: u32) -> anyhow::Result<Row> {
    let seq = pair(args, chips, Mode::SeqWrite, args.seq_size, args.seq_size)?;
    let rand = pair(args, chips, Mode::RandWrite, 4096, args.rand_file)?;
    let config = iozone_args(args, true, Mode::SeqWrite, 1, 1)
        .device
        .config_on(chips)?;
    let fs_bytes = |parity: bool| -> anyhow::Result<u64> {
        let fs_args = FsArgs {
            ubi: Some(true),
            parity,
            ..FsArgs::default()
        };
        let fs = format(config.clone(), &fs_args)?;
        let s = fs.statfs();
        Ok(s.free_chunks * u64::from(s.chunk_bytes))
    };
    let (plain_fs_bytes, parity_fs_bytes) = (fs_bytes(false)?, fs_bytes(true)?);
    let rebuild = rebuild(args, &config)?;
    Ok(Row {
        bench: "parity",
        geometry: args.geometry.clone(),
        chips,
        device_bytes: config.geometry.total_bytes(),
        plain_fs_bytes,
        parity_fs_bytes,
        seq_goal_met: seq.ratio >= 0.7,
        seq_write: seq,
        rand_write_4k: rand,
        rebuild,
    })
}

/// Fills an array with parity, fails chip 1, puts a new chip in and rebuilds it.
fn rebuild(args: &ParityArgs, config: &nandkit_flash::DeviceConfig) -> anyhow::Result<Rebuild> {
    let fs_args = FsArgs {
        ubi: Some(true),
        parity: true,
        ..FsArgs::default()
    };
    let mut fs = format(config.clone(), &fs_args)?;
    let s = fs.statfs();
    let chunk = u64::from(s.chunk_bytes);
    let size = ((s.free_chunks as f64 * args.fill) as u64).saturating_sub(8) * chunk;
    let ino = fs
        .create(ROOT_INO, b"fill", NewObject::regular_file())
        .context("creating the file")?
        .ino;
    let record = 64 * chunk;
    let data = noise(record as usize, args.seed);
    let mut progress = Progress::bytes(size, "filling", args.json);
    write_sequential(&mut fs, ino, size, record, &data, &mut progress)?;
    progress.finish();
    let (mut dev, _) = fs.unmount_parts().context("unmounting")?;
    dev.fail_chip(1, "failed by the bench");
    let mut chips = dev.into_inner();
    chips.replace_chip(1)?;
    let mut array = StripedFlash::open(chips, false).context("attaching")?;
    let lebs = array.geometry().blocks_per_chip;
    let mut progress = Progress::items(u64::from(lebs), "rebuilding", args.json);
    let mut last = 0;
    let host = Instant::now();
    let r = array.rebuild_chip(1, &mut |done, _| {
        progress.inc(u64::from(done - last));
        last = done;
    })?;
    let host_s = host.elapsed().as_secs_f64();
    progress.finish();
    let chip_page = config.geometry.page_size_bytes as f64;
    let sim_s = r.sim_ns as f64 / 1e9;
    Ok(Rebuild {
        data_bytes: size,
        lebs_written: r.lebs_written,
        pages_written: r.pages_written,
        sim_s,
        host_s,
        sim_mb_per_s: r.pages_written as f64 * chip_page / 1e6 / sim_s.max(1e-12),
    })
}

fn print_row(r: &Row, header: bool) {
    if header {
        println!(
            "{:>5} {:>22} {:>22} {:>12} {:>12} {:>16}",
            "chips", "16MB O_SYNC MB/s", "4KiB rand MB/s", "WA seq", "WA rand", "rebuild"
        );
        println!(
            "{:>5} {:>22} {:>22} {:>12} {:>12} {:>16}",
            "",
            "plain / parity (ratio)",
            "plain / parity (ratio)",
            "plain/parity",
            "plain/parity",
            "sim s (MiB)"
        );
    }
    let (s, q) = (&r.seq_write, &r.rand_write_4k);
    println!(
        "{:>5} {:>8.2}/{:>6.2} ({:>3.0}%) {:>8.3}/{:>6.3} ({:>3.0}%) {:>5.2}/{:>6.2} {:>5.2}/{:>6.2} {:>7.1} ({:>6.1})",
        r.chips,
        s.plain_mb_per_s,
        s.parity_mb_per_s,
        s.ratio * 100.0,
        q.plain_mb_per_s,
        q.parity_mb_per_s,
        q.ratio * 100.0,
        s.plain_wa,
        s.parity_wa,
        q.plain_wa,
        q.parity_wa,
        r.rebuild.sim_s,
        r.rebuild.data_bytes as f64 / (1u64 << 20) as f64
    );
}
