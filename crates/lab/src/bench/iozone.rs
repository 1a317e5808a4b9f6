//! `nandkit bench iozone`: the MA paper's IOzone runs (Figures 7 and 8). One file written in
//! records of a fixed size, each record durable before the next is issued (O_SYNC: a write
//! then fsync), on an array of P chips striped; throughput in simulated time. IOzone's read
//! and reread tests read such a file back, record by record, after a remount (so nothing
//! is cached), and check every byte.

use nandkit_fs::NewObject;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::{Args, ValueEnum};
use nandkit_flash::Flash;
use nandkit_fs::ROOT_INO;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::energy::Mark;
use super::{format_on, mount_options, noise, print_rows_json, Fs, FsArgs, Progress};
use crate::device_args::{parse_bytes, DeviceArgs};

pub const LONG_ABOUT: &str =
    "Formats a RAM device of P chips (capacity kept constant as P changes: the MA paper's \
    Table 2), creates one file and writes it in records, each followed by fsync (IOzone's \
    O_SYNC runs). seq-write: records front to back into the new file. rewrite: the same \
    again over the written file. rand-write: as many records at random record-aligned \
    offsets of the written file (seeded). read: the file is written as for rewrite, the \
    file system unmounted and mounted again (nothing cached), then read in records front \
    to back. reread: the same, read twice, the second pass measured. Only the last phase \
    is measured. Every byte read is checked against what was written (each 512 bytes of \
    the file carry their offset): a mismatch is an error.\n\n\
    sim_mb_per_s = bytes / simulated seconds (the device clock: on P chips, a record's pages \
    program, or read, in parallel). host_mb_per_s = bytes / host seconds. With P > 1 the \
    same run on one chip is made too, and speedup_vs_p1 is the ratio of the two \
    sim_mb_per_s. energy_j is the joules the phase spent: P chips save time, not energy. \
    record_p50_us, record_p99_us, record_max_us (and record_mean_us): each record's \
    simulated latency (a write and its fsync, or a read), nearest-rank percentiles.\n\n\
    A record's pages go to flash as batches over the chips; its fsync then writes the \
    file's header, one page on one chip. At small records that page and the record's \
    few data pages are most of the work, so the chips wait for each other and P helps \
    little (the paper's small gains at 4 KB); at large records the data pages dominate. \
    A read fetches a record's pages as batches over the chips too.\n\n\
    --sweep runs every record size from 4 KiB to 16 MiB (powers of 4) for P = 1, 2, 4 and 8, \
    in any mode.\n\n\
    --executor threaded runs the device on MA's executor (a dispatcher and a worker thread \
    per chip) instead of in the calling thread: simulated results are identical, and \
    host_us_per_record against a sim run is the cost of the threads per request.";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Records front to back into a new file.
    SeqWrite,
    /// The same again over the written file.
    Rewrite,
    /// As many records at random record-aligned offsets of the written file.
    RandWrite,
    /// Read the written file front to back after a remount.
    Read,
    /// As read, twice; the second pass measured.
    Reread,
}

impl Mode {
    fn reads(self) -> bool {
        matches!(self, Mode::Read | Mode::Reread)
    }

    fn name(self) -> &'static str {
        match self {
            Mode::SeqWrite => "seq-write",
            Mode::Rewrite => "rewrite",
            Mode::RandWrite => "rand-write",
            Mode::Read => "read",
            Mode::Reread => "reread",
        }
    }
}

#[derive(Args, Clone)]
pub struct IozoneArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub fs: FsArgs,
    /// Which IOzone test.
    #[arg(long, value_enum, default_value = "seq-write")]
    pub mode: Mode,
    /// Bytes per write or read (IOzone's record size).
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes, value_name = "SIZE")]
    pub record: u64,
    /// Size of the file.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes, value_name = "SIZE")]
    pub file_size: u64,
    /// Seed of the data and of rand-write's offsets.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    pub workload_seed: u64,
    /// Every record size 4 KiB..16 MiB for P = 1, 2, 4, 8 (ignores --record and --chips).
    #[arg(long)]
    pub sweep: bool,
    /// Who runs the device's batches: the calling thread, or a worker per chip.
    #[arg(long, value_enum, default_value = "sim")]
    pub executor: crate::flash_bench::ExecutorArg,
    /// The host software's own cost in simulated time: 0, `calibrated` (what `bench
    /// software-cost` measured of nandkit's code), or
    /// `request=US,handoff=US,page=US,device=US`.
    #[arg(long, default_value = "0", value_parser = crate::device_args::parse_software_cost, value_name = "COST")]
    pub software_cost: nandkit_flash::HostCost,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize, Clone)]
pub struct Row {
    pub(crate) bench: &'static str,
    pub(crate) geometry: String,
    pub(crate) chips: u32,
    pub(crate) executor: &'static str,
    /// The host cost charged in simulated time (all 0: flash time only).
    pub(crate) software_cost: nandkit_flash::HostCost,
    pub(crate) mode: Mode,
    pub(crate) record_bytes: u64,
    pub(crate) file_size_bytes: u64,
    /// Bytes written (read, in the read modes) in the measured phase.
    pub(crate) bytes: u64,
    pub(crate) sim_ms: f64,
    /// Joules the measured phase spent (the same on any number of chips for the same
    /// flash operations: parallelism saves time, not energy).
    pub(crate) energy_j: f64,
    pub(crate) host_ms: f64,
    pub sim_mb_per_s: f64,
    pub(crate) host_mb_per_s: f64,
    /// Host microseconds per record (write and fsync, or read): where the executor's
    /// threads show.
    pub(crate) host_us_per_record: f64,
    /// Simulated latency of one record (write and fsync, or read), microseconds: mean,
    /// nearest-rank percentiles and the largest.
    pub(crate) record_mean_us: f64,
    pub(crate) record_p50_us: f64,
    pub(crate) record_p99_us: f64,
    pub(crate) record_max_us: f64,
    /// Flash page programs and full page reads in the measured phase.
    pub(crate) page_programs: u64,
    pub(crate) page_reads: u64,
    /// sim_mb_per_s over the same run on one chip.
    pub speedup_vs_p1: f64,
}

pub fn run(mut args: IozoneArgs) -> anyhow::Result<()> {
    // MA's design: a UBI per chip, at every P (P = 1 is UBIFS on one UBI).
    args.fs.ubi_by_default();
    ensure!(args.record > 0, "--record must be at least 1 byte");
    // A sweep sets the record size itself (and grows the file to hold one record).
    ensure!(
        args.sweep || args.file_size >= args.record,
        "--file-size ({}) must hold at least one --record ({})",
        args.file_size,
        args.record
    );
    ensure!(args.file_size > 0, "--file-size must be at least 1 byte");
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

/// One run: format, (write the file unmeasured; remount, for the read modes), then the
/// measured phase.
pub fn one(args: &IozoneArgs, chips: u32, record: u64, file_size: u64) -> anyhow::Result<Row> {
    let config = args.device.config_on(chips)?;
    let geometry = config.name.clone();
    let options = nandkit_flash::DeviceOptions {
        executor: crate::flash_bench::executor_kind(args.executor),
        realtime: false,
        host: args.software_cost,
    };
    let mut fs = format_on(config, &args.fs, options)?;
    let ino = fs
        .create(ROOT_INO, b"iozone", NewObject::regular_file())
        .context("creating the file")?
        .ino;
    let data = noise(record as usize, args.workload_seed);
    let records = file_size / record;
    // One O_SYNC write (or read) of a record is one request of the application.
    let write = |fs: &mut Fs, offset: u64, data: &[u8]| -> anyhow::Result<()> {
        fs.device_mut().charge_request();
        let n = fs
            .write(ino, offset, data)
            .with_context(|| format!("writing {record} bytes at {offset}"))?;
        ensure!(n as u64 == record, "short write at {offset} (device full?)");
        fs.fsync(ino).context("fsync")
    };
    let quiet = args.json || args.sweep;
    if args.mode.reads() {
        // Every record different (its offset stamped in), so a misplaced page shows.
        let mut stamped = data.clone();
        for k in 0..records {
            stamp(&data, k * record, &mut stamped);
            write(&mut fs, k * record, &stamped)?;
        }
        fs = remount(fs)?;
    } else if args.mode != Mode::SeqWrite {
        for k in 0..records {
            write(&mut fs, k * record, &data)?;
        }
    }
    // The remounted file system finds the file by name.
    let ino = if args.mode.reads() {
        fs.lookup(ROOT_INO, b"iozone")
            .context("looking the file up")?
            .ino
    } else {
        ino
    };
    let mut buf = vec![
        0u8;
        if args.mode.reads() {
            record as usize
        } else {
            0
        }
    ];
    let read = |fs: &mut Fs, k: u64, buf: &mut [u8]| -> anyhow::Result<()> {
        let offset = k * record;
        fs.device_mut().charge_request();
        let n = fs
            .read(ino, offset, buf)
            .with_context(|| format!("reading {record} bytes at {offset}"))?;
        ensure!(
            n as u64 == record,
            "short read at {offset}: {n} of {record} bytes"
        );
        Ok(())
    };
    if args.mode == Mode::Reread {
        for k in 0..records {
            read(&mut fs, k, &mut buf)?;
            verify(&data, k * record, &buf)?;
        }
    }
    let what = if args.mode.reads() {
        "reading"
    } else {
        "writing"
    };
    let mut progress = Progress::bytes(records * record, what, quiet);
    let before = fs.device_mut().stats().total();
    let start = Mark::of_fs(&fs);
    let mut host = Duration::ZERO;
    let mut latencies_ns = Vec::with_capacity(records as usize);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(args.workload_seed);
    for k in 0..records {
        let t0 = fs.device().now_ns();
        let h = Instant::now();
        match args.mode {
            Mode::SeqWrite | Mode::Rewrite => write(&mut fs, k * record, &data)?,
            Mode::RandWrite => write(&mut fs, rng.gen_range(0..records) * record, &data)?,
            Mode::Read | Mode::Reread => read(&mut fs, k, &mut buf)?,
        }
        host += h.elapsed();
        latencies_ns.push(fs.device().now_ns() - t0);
        // Checked outside the timed span: the check is ours, not the file system's.
        if args.mode.reads() {
            verify(&data, k * record, &buf)?;
        }
        progress.inc(record);
    }
    progress.finish();
    let host_s = host.as_secs_f64();
    let spent = start.to_fs(&fs);
    let after = fs.device_mut().stats().total();
    let sim_s = spent.sim_s();
    let bytes = records * record;
    let mb = bytes as f64 / 1e6;
    latencies_ns.sort_unstable();
    let us = |ns: u64| ns as f64 / 1e3;
    let mean_ns = latencies_ns.iter().map(|&ns| u128::from(ns)).sum::<u128>() as f64
        / latencies_ns.len().max(1) as f64;
    Ok(Row {
        bench: "iozone",
        geometry,
        chips,
        executor: match args.executor {
            crate::flash_bench::ExecutorArg::Sim => "sim",
            crate::flash_bench::ExecutorArg::Threaded => "threaded",
        },
        software_cost: args.software_cost,
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
        record_mean_us: mean_ns / 1e3,
        record_p50_us: us(percentile(&latencies_ns, 0.50)),
        record_p99_us: us(percentile(&latencies_ns, 0.99)),
        record_max_us: us(latencies_ns.last().copied().unwrap_or(0)),
        page_programs: after.programs - before.programs,
        page_reads: after.page_reads - before.page_reads,
        speedup_vs_p1: 1.0,
    })
}

/// Unmounts cleanly and mounts again: the read modes start with nothing in RAM.
fn remount(fs: Fs) -> anyhow::Result<Fs> {
    let (dev, nv) = fs.unmount_parts().context("unmounting")?;
    let dev = dev.reattach(false).context("attaching UBI")?;
    super::mount_parts((dev, nv), mount_options(false)).context("mounting again")
}

/// Bytes between two offset stamps.
const STAMP_EVERY: usize = 512;

/// The record at file offset `at`: `base` with, every 512 bytes, the file offset of that
/// spot (8 bytes, little-endian).
fn stamp(base: &[u8], at: u64, out: &mut [u8]) {
    out.copy_from_slice(base);
    for j in (0..out.len().saturating_sub(7)).step_by(STAMP_EVERY) {
        out[j..j + 8].copy_from_slice(&(at + j as u64).to_le_bytes());
    }
}

/// Checks that `got`, read at file offset `at`, is what `stamp` wrote there.
fn verify(base: &[u8], at: u64, got: &[u8]) -> anyhow::Result<()> {
    for (slot, (want, got)) in base
        .chunks(STAMP_EVERY)
        .zip(got.chunks(STAMP_EVERY))
        .enumerate()
    {
        let j = slot * STAMP_EVERY;
        let stamped = want.len() >= 8;
        let mut expected = [0u8; STAMP_EVERY];
        let expected = &mut expected[..want.len()];
        expected.copy_from_slice(want);
        if stamped {
            expected[..8].copy_from_slice(&(at + j as u64).to_le_bytes());
        }
        if got != expected {
            let first = got
                .iter()
                .zip(expected.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            bail!(
                "read back wrong data at file offset {}: not what was written there",
                at + (j + first) as u64
            );
        }
    }
    Ok(())
}

/// Nearest-rank percentile of sorted values (0 if there are none).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn print_row(r: &Row, header: bool) {
    if header {
        println!(
            "{:<10} {:>5} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>10}",
            "mode",
            "chips",
            "record",
            "sim MB/s",
            "host MB/s",
            "host us/rec",
            "p50 us",
            "p99 us",
            "max us",
            "vs P=1",
            "programs",
            "reads",
            "energy J"
        );
    }
    println!(
        "{:<10} {:>5} {:>9} {:>12.2} {:>12.1} {:>12.1} {:>10.1} {:>10.1} {:>10.1} {:>8.2}x {:>10} {:>10} {:>10.4}",
        r.mode.name(),
        r.chips,
        human(r.record_bytes),
        r.sim_mb_per_s,
        r.host_mb_per_s,
        r.host_us_per_record,
        r.record_p50_us,
        r.record_p99_us,
        r.record_max_us,
        r.speedup_vs_p1,
        r.page_programs,
        r.page_reads,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_record_verifies_where_it_was_written_only() {
        let base = noise(1500, 3);
        let mut record = vec![0u8; base.len()];
        stamp(&base, 3000, &mut record);
        // Stamps at 0, 512 and 1024 within the record: file offsets 3000, 3512, 4024.
        assert_eq!(record[512..520], 3512u64.to_le_bytes());
        assert_eq!(record[8..512], base[8..512]);
        verify(&base, 3000, &record).unwrap();
        // Another record's bytes, or one byte wrong, is an error naming the offset.
        assert!(verify(&base, 4500, &record).is_err());
        record[1400] ^= 1;
        let e = verify(&base, 3000, &record).unwrap_err().to_string();
        assert!(e.contains("offset 4400"), "{e}");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 0.5), 50);
        assert_eq!(percentile(&sorted, 0.99), 99);
        assert_eq!(percentile(&[7], 0.99), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
