//! `nandkit bench iozone`: the MA paper's IOzone runs (Figures 7 and 8). One file written in
//! records of a fixed size, each record durable before the next is issued (O_SYNC: a write
//! then fsync), on an array of P chips striped; throughput in simulated time.

use nandkit_fs::NewObject;
use std::time::Instant;

use anyhow::{ensure, Context};
use clap::{Args, ValueEnum};
use nandkit_fs::ROOT_INO;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::energy::Mark;
use super::{format_on, noise, print_rows_json, FsArgs, Progress};
use crate::device_args::{parse_bytes, DeviceArgs};

pub const LONG_ABOUT: &str =
    "Formats a RAM device of P chips (capacity kept constant as P changes: the MA paper's \
    Table 2), creates one file and writes it in records, each followed by fsync (IOzone's \
    O_SYNC runs). seq-write: records front to back into the new file. rewrite: the same \
    again over the written file. rand-write: as many records at random record-aligned \
    offsets of the written file (seeded). Only that phase is measured.\n\n\
    sim_mb_per_s = bytes / simulated seconds (the device clock: on P chips, a record's pages \
    program in parallel). host_mb_per_s = bytes / host seconds. With P > 1 the same run on \
    one chip is made too, and speedup_vs_p1 is the ratio of the two sim_mb_per_s. \
    energy_j is the joules the phase spent: P chips save time, not energy.\n\n\
    A record's pages go to flash as batches over the chips; its fsync then writes the \
    file's header, one page on one chip. At small records that page and the record's \
    few data pages are most of the work, so the chips wait for each other and P helps \
    little (the paper's small gains at 4 KB); at large records the data pages dominate.\n\n\
    --sweep runs every record size from 4 KiB to 16 MiB (powers of 4) for P = 1, 2, 4 and 8.\n\n\
    --executor threaded runs the device on MA's executor (a dispatcher and a worker thread \
    per chip) instead of in the calling thread: simulated results are identical, and \
    host_us_per_record against a sim run is the cost of the threads per request.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    SeqWrite,
    Rewrite,
    RandWrite,
}

#[derive(Args)]
pub struct IozoneArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// Which IOzone test.
    #[arg(long, value_enum, default_value = "seq-write")]
    mode: Mode,
    /// Bytes per write (IOzone's record size).
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes, value_name = "SIZE")]
    record: u64,
    /// Size of the file.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes, value_name = "SIZE")]
    file_size: u64,
    /// Seed of the data and of rand-write's offsets.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    /// Every record size 4 KiB..16 MiB for P = 1, 2, 4, 8 (ignores --record and --chips).
    #[arg(long)]
    sweep: bool,
    /// Who runs the device's batches: the calling thread, or a worker per chip.
    #[arg(long, value_enum, default_value = "sim")]
    executor: crate::flash_bench::ExecutorArg,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone)]
struct Row {
    bench: &'static str,
    geometry: String,
    chips: u32,
    executor: &'static str,
    mode: Mode,
    record_bytes: u64,
    file_size_bytes: u64,
    /// Bytes written in the measured phase.
    bytes: u64,
    sim_ms: f64,
    /// Joules the measured phase spent (the same on any number of chips for the same
    /// flash operations: parallelism saves time, not energy).
    energy_j: f64,
    host_ms: f64,
    sim_mb_per_s: f64,
    host_mb_per_s: f64,
    /// Host microseconds per record (write and fsync): where the executor's threads show.
    host_us_per_record: f64,
    page_programs: u64,
    /// sim_mb_per_s over the same run on one chip.
    speedup_vs_p1: f64,
}

pub fn run(args: IozoneArgs) -> anyhow::Result<()> {
    ensure!(args.record > 0, "--record must be at least 1 byte");
    ensure!(
        args.file_size >= args.record,
        "--file-size ({}) must hold at least one --record ({})",
        args.file_size,
        args.record
    );
    let rows = if args.sweep {
        let mut rows = Vec::new();
        let mut record = 4096u64;
        while record <= 16 << 20 {
            let file_size = args.file_size.max(record);
            let mut base = None;
            for chips in [1, 2, 4, 8] {
                let mut row = one(&args, chips, record, file_size)?;
                let b = *base.get_or_insert(row.sim_mb_per_s);
                row.speedup_vs_p1 = row.sim_mb_per_s / b;
                if !args.json {
                    print_row(&row, rows.is_empty());
                }
                rows.push(row);
            }
            record *= 4;
        }
        rows
    } else {
        let mut row = one(&args, args.device.chips, args.record, args.file_size)?;
        if args.device.chips > 1 {
            let base = one(&args, 1, args.record, args.file_size)?;
            row.speedup_vs_p1 = row.sim_mb_per_s / base.sim_mb_per_s;
        }
        if !args.json {
            print_row(&row, true);
        }
        vec![row]
    };
    if args.json {
        print_rows_json(&rows, args.sweep)?;
    }
    Ok(())
}

/// One run: format, (write the file unmeasured), then the measured phase.
fn one(args: &IozoneArgs, chips: u32, record: u64, file_size: u64) -> anyhow::Result<Row> {
    let config = args.device.config_on(chips)?;
    let geometry = config.name.clone();
    let options = nandkit_flash::DeviceOptions {
        executor: crate::flash_bench::executor_kind(args.executor),
        realtime: false,
    };
    let mut fs = format_on(config, &args.fs, options)?;
    let ino = fs
        .create(ROOT_INO, b"iozone", NewObject::regular_file())
        .context("creating the file")?
        .ino;
    let data = noise(record as usize, args.workload_seed);
    let records = file_size / record;
    let write = |fs: &mut super::Fs, offset: u64| -> anyhow::Result<()> {
        let n = fs
            .write(ino, offset, &data)
            .with_context(|| format!("writing {record} bytes at {offset}"))?;
        ensure!(n as u64 == record, "short write at {offset} (device full?)");
        fs.fsync(ino).context("fsync")
    };
    if args.mode != Mode::SeqWrite {
        for k in 0..records {
            write(&mut fs, k * record)?;
        }
    }
    let quiet = args.json || args.sweep;
    let mut progress = Progress::bytes(records * record, "writing", quiet);
    let programs_before = fs.device_mut().stats().total().programs;
    let start = Mark::of_fs(&fs);
    let host = Instant::now();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(args.workload_seed);
    for k in 0..records {
        let offset = match args.mode {
            Mode::SeqWrite | Mode::Rewrite => k * record,
            Mode::RandWrite => rng.gen_range(0..records) * record,
        };
        write(&mut fs, offset)?;
        progress.inc(record);
    }
    progress.finish();
    let host_s = host.elapsed().as_secs_f64();
    let spent = start.to_fs(&fs);
    let sim_s = spent.sim_s();
    let bytes = records * record;
    let mb = bytes as f64 / 1e6;
    Ok(Row {
        bench: "iozone",
        geometry,
        chips,
        executor: match args.executor {
            crate::flash_bench::ExecutorArg::Sim => "sim",
            crate::flash_bench::ExecutorArg::Threaded => "threaded",
        },
        mode: args.mode,
        record_bytes: record,
        file_size_bytes: file_size,
        bytes,
        sim_ms: sim_s * 1e3,
        energy_j: spent.energy_j(),
        host_ms: host_s * 1e3,
        sim_mb_per_s: mb / sim_s.max(1e-12),
        host_mb_per_s: mb / host_s.max(1e-12),
        host_us_per_record: host_s * 1e6 / records.max(1) as f64,
        page_programs: fs.device_mut().stats().total().programs - programs_before,
        speedup_vs_p1: 1.0,
    })
}

fn print_row(r: &Row, header: bool) {
    if header {
        println!(
            "{:<10} {:>5} {:>9} {:>12} {:>12} {:>12} {:>9} {:>10} {:>10}",
            "mode",
            "chips",
            "record",
            "sim MB/s",
            "host MB/s",
            "host us/rec",
            "vs P=1",
            "programs",
            "energy J"
        );
    }
    println!(
        "{:<10} {:>5} {:>9} {:>12.2} {:>12.1} {:>12.1} {:>8.2}x {:>10} {:>10.4}",
        format!("{:?}", r.mode).to_lowercase(),
        r.chips,
        human(r.record_bytes),
        r.sim_mb_per_s,
        r.host_mb_per_s,
        r.host_us_per_record,
        r.speedup_vs_p1,
        r.page_programs,
        r.energy_j
    );
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{}MiB", bytes >> 20)
    } else {
        format!("{}KiB", bytes >> 10)
    }
}
