//! `nandkit bench random-overwrite`: one file filling a fixed fraction of the file system,
//! then uniform random aligned overwrites. Measures what cleaning costs and compares write
//! amplification with the greedy model WA = a / (a + W0(-a e^-a)), a = physical / logical
//! pages (Hu et al. 2009; Desnoyers 2012).

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_flash::StripedDevice;
use nandkit_fs::blocks::BlockState;
use nandkit_fs::NewObject;
use nandkit_fs::{CleanerKind, FileSystem, Ino, ROOT_INO};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::{
    format, noise, print_json, write_sequential, DeviceInfo, FsArgs, PhaseStats, Progress, Snapshot,
};
use crate::device_args::{parse_bytes, DeviceArgs};

/// What `--help` says about this benchmark.
pub const LONG_ABOUT: &str =
    "Formats a RAM device, creates one file, fills it sequentially, then overwrites \
    uniformly random --io-size aligned blocks of it (offsets from --workload-seed, \
    xoshiro256++) until --overwrite-factor times the file size has been written. \
    Only the overwrite phase (overwrites plus a final fsync) is measured; \
    --warmup-factor first does that many file sizes of unmeasured overwrites, \
    to measure from steady state instead of from the end of the fill.\n\n\
    Usable capacity is what statfs reports: total_chunks * chunk_bytes, that is \
    (good blocks - the cleaning reserve) * pages per block * bytes per chunk. \
    The file is --utilization of that, rounded down to a multiple of --io-size.\n\n\
    write_amplification = flash programs in the phase / user pages written in it. \
    The greedy formula is a / (a + W0(-a e^-a)), a = physical / logical pages, for a \
    device whose every page holds data. Here each block also spends one page on its \
    summary (a block that is one run of a file needs none, but random overwrites \
    leave none that are), so greedy_formula_wa takes physical = data pages of the \
    good blocks outside the two anchor blocks, (pages per block - 1) each, and \
    multiplies the formula by pages per block / (pages per block - 1) for the summary \
    programs; logical = pages of the file. greedy_formula_wa_all_pages is the plain \
    formula over every page of every good block. The report also gives a_effective \
    and its formula WA, which leave out the reserve blocks the file system keeps \
    erased.";

#[derive(Args)]
pub struct RandomOverwriteArgs {
    #[command(flatten)]
    device: DeviceArgs,
    #[command(flatten)]
    fs: FsArgs,
    /// Fraction of the usable capacity the file takes (0 < U < 1).
    #[arg(long, default_value_t = 0.8, value_name = "U")]
    utilization: f64,
    /// Bytes overwritten, as a multiple of the file size.
    #[arg(long, default_value_t = 4.0, value_name = "X")]
    overwrite_factor: f64,
    /// Overwrites done before the measurement starts, as a multiple of the file size, so the
    /// measured phase can start from steady state (0: measure from the end of the fill).
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    warmup_factor: f64,
    /// Size and alignment of each overwrite.
    #[arg(long, default_value = "4KiB", value_parser = parse_bytes, value_name = "SIZE")]
    io_size: u64,
    /// Bytes per write call while filling the file.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes, value_name = "SIZE")]
    fill_write_size: u64,
    /// Seed of the overwrite offsets and of the data written.
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
    cleaner: CleanerKind,
    reserve_blocks: u32,
    good_blocks: u64,
    chunk_bytes: u32,
    workload_seed: u64,
    utilization: f64,
    overwrite_factor: f64,
    warmup_factor: f64,
    io_size_bytes: u64,
    /// statfs total_chunks * chunk_bytes.
    usable_capacity_bytes: u64,
    file_size_bytes: u64,
    /// Logical pages: the file's chunks.
    logical_pages: u64,
    /// Data pages of the good blocks outside the anchors: (pages per block - 1) each.
    physical_pages: u64,
    /// Measured overwrites.
    overwrite_ops: u64,
    /// Unmeasured overwrites done first (--warmup-factor).
    warmup_ops: u64,
    /// The sequential fill (not part of the measurement).
    fill: PhaseStats,
    /// The overwrite phase: overwrites plus a final fsync.
    #[serde(flatten)]
    overwrite: PhaseStats,
    /// physical_pages / logical_pages.
    a: f64,
    /// The greedy formula at `a`, times pages per block / (pages per block - 1) for the
    /// block summaries.
    greedy_formula_wa: f64,
    /// The plain formula over every page of every good block.
    greedy_formula_wa_all_pages: f64,
    /// write_amplification / greedy_formula_wa (target: <= 1.05 with the greedy cleaner).
    wa_ratio_to_formula: f64,
    within_5pct_of_formula: bool,
    /// (good blocks - reserve blocks) * pages per block / logical pages: the spare the
    /// cleaner can actually use, since the reserve is kept erased.
    a_effective: f64,
    greedy_formula_wa_effective: f64,
    /// Device utilisation, invalidity and uniformity at the end (MODA).
    u: f64,
    i: f64,
    p: f64,
}

pub fn run(args: RandomOverwriteArgs) -> anyhow::Result<()> {
    ensure!(
        args.utilization > 0.0 && args.utilization < 1.0,
        "--utilization must be between 0 and 1"
    );
    ensure!(
        args.overwrite_factor >= 0.0 && args.overwrite_factor.is_finite(),
        "--overwrite-factor must be a non-negative number"
    );
    ensure!(
        args.warmup_factor >= 0.0 && args.warmup_factor.is_finite(),
        "--warmup-factor must be a non-negative number"
    );
    ensure!(args.io_size > 0, "--io-size must be at least 1 byte");
    ensure!(
        args.fill_write_size > 0,
        "--fill-write-size must be at least 1 byte"
    );
    let config = args.device.config()?;
    let info = DeviceInfo::of(&config);
    let ppb = u64::from(config.geometry.pages_per_block);
    let mut fs = format(config, &args.fs)?;
    let fs_config = fs.config().clone();
    let chunk_bytes = fs.chunk_bytes();
    let st = fs.statfs();
    let usable = st.total_chunks * u64::from(st.chunk_bytes);
    let file_size = (args.utilization * usable as f64) as u64 / args.io_size * args.io_size;
    ensure!(
        file_size > 0,
        "the file would be empty: usable capacity {usable} bytes * {} < --io-size",
        args.utilization
    );
    let good_blocks = fs
        .block_table()
        .iter()
        .filter(|b| b.state != BlockState::Bad)
        .count() as u64;
    // The two anchor blocks hold no data; every other block spends a page on its summary.
    let physical_pages = good_blocks.saturating_sub(2) * (ppb - 1);
    let logical_pages = file_size.div_ceil(u64::from(chunk_bytes));

    let data = noise(
        args.fill_write_size.max(args.io_size) as usize,
        args.workload_seed,
    );
    let ino = fs
        .create(ROOT_INO, b"random", NewObject::regular_file())
        .context("creating the file")?
        .ino;
    let mut progress = Progress::bytes(file_size, "filling", args.json);
    let start = Snapshot::take(&mut fs);
    write_sequential(
        &mut fs,
        ino,
        file_size,
        args.fill_write_size,
        &data,
        &mut progress,
    )?;
    fs.fsync(ino).context("fsync after the fill")?;
    let end = Snapshot::take(&mut fs);
    progress.finish();
    let fill = PhaseStats::between(&start, &end, chunk_bytes);

    let slots = file_size / args.io_size;
    let ops_for = |factor: f64| (factor * file_size as f64 / args.io_size as f64).ceil() as u64;
    let (warmup_ops, ops) = (ops_for(args.warmup_factor), ops_for(args.overwrite_factor));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(args.workload_seed);
    let mut next = 0u64;
    if warmup_ops > 0 {
        let mut progress = Progress::items(warmup_ops, "warming up", args.json);
        overwrite(
            &mut fs,
            ino,
            &mut rng,
            &data,
            slots,
            args.io_size,
            next,
            warmup_ops,
            &mut progress,
        )?;
        progress.finish();
        next += warmup_ops;
    }
    let mut progress = Progress::items(ops, "overwriting", args.json);
    let start = Snapshot::take(&mut fs);
    overwrite(
        &mut fs,
        ino,
        &mut rng,
        &data,
        slots,
        args.io_size,
        next,
        ops,
        &mut progress,
    )?;
    fs.fsync(ino).context("fsync after the overwrites")?;
    let end = Snapshot::take(&mut fs);
    progress.finish();
    let overwrite = PhaseStats::between(&start, &end, chunk_bytes);
    let (u, i, p) = fs.uip();
    let size = fs.getattr(ino)?.size;
    ensure!(
        size == file_size,
        "file size {size} after overwrites, wrote {file_size}"
    );

    let a = physical_pages as f64 / logical_pages as f64;
    let summaries = ppb as f64 / (ppb - 1) as f64;
    let formula = greedy_wa(a) * summaries;
    let wa_ratio = overwrite.write_amplification / formula;
    let usable_blocks = good_blocks.saturating_sub(u64::from(fs_config.reserve_blocks) + 2);
    let a_effective = (usable_blocks * (ppb - 1)) as f64 / logical_pages as f64;
    let report = Report {
        bench: "random-overwrite",
        device: info,
        profile: fs_config.profile.clone(),
        cleaner: fs_config.cleaner,
        reserve_blocks: fs_config.reserve_blocks,
        good_blocks,
        chunk_bytes,
        workload_seed: args.workload_seed,
        utilization: args.utilization,
        overwrite_factor: args.overwrite_factor,
        io_size_bytes: args.io_size,
        usable_capacity_bytes: usable,
        file_size_bytes: file_size,
        logical_pages,
        physical_pages,
        overwrite_ops: ops,
        warmup_ops,
        warmup_factor: args.warmup_factor,
        fill,
        overwrite,
        a,
        greedy_formula_wa: formula,
        greedy_formula_wa_all_pages: greedy_wa((good_blocks * ppb) as f64 / logical_pages as f64),
        wa_ratio_to_formula: wa_ratio,
        within_5pct_of_formula: wa_ratio <= 1.05,
        a_effective,
        greedy_formula_wa_effective: greedy_wa(a_effective) * summaries,
        u,
        i,
        p,
    };
    if args.json {
        print_json(&report)
    } else {
        print_table(&report);
        Ok(())
    }
}

/// `count` overwrites of `io_size` bytes at uniformly random aligned offsets; `first` numbers
/// the first one (it picks which bytes of `data` go out).
#[allow(clippy::too_many_arguments)]
fn overwrite(
    fs: &mut FileSystem<StripedDevice>,
    ino: Ino,
    rng: &mut Xoshiro256PlusPlus,
    data: &[u8],
    slots: u64,
    io_size: u64,
    first: u64,
    count: u64,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let io = io_size as usize;
    for k in first..first + count {
        let offset = rng.gen_range(0..slots) * io_size;
        // Vary the bytes from write to write without generating new noise.
        let from = (k as usize * 64) % (data.len() - io + 1);
        let n = fs
            .write(ino, offset, &data[from..from + io])
            .with_context(|| format!("overwrite {k} at offset {offset}"))?;
        ensure!(n == io, "short overwrite at offset {offset}: {n} of {io}");
        progress.inc(1);
    }
    Ok(())
}

fn print_table(r: &Report) {
    r.device.print();
    println!(
        "fs          profile {}, {:?} cleaner, {} reserve blocks, {} good blocks, usable {} bytes",
        r.profile, r.cleaner, r.reserve_blocks, r.good_blocks, r.usable_capacity_bytes
    );
    println!(
        "workload    file of {} bytes ({:.2} of usable), {} random {} byte overwrites (x{}) \
         after {} unmeasured (x{}), seed {}",
        r.file_size_bytes,
        r.utilization,
        r.overwrite_ops,
        r.io_size_bytes,
        r.overwrite_factor,
        r.warmup_ops,
        r.warmup_factor,
        r.workload_seed
    );
    r.fill.print("fill");
    r.overwrite.print("overwrite");
    println!(
        "greedy      a = {:.4} ({} physical / {} logical pages): formula WA {:.3} (with one \
         summary page per block); measured / formula {:.3} ({})",
        r.a,
        r.physical_pages,
        r.logical_pages,
        r.greedy_formula_wa,
        r.wa_ratio_to_formula,
        if r.within_5pct_of_formula {
            "within 5%"
        } else {
            "NOT within 5%"
        }
    );
    println!(
        "            without the reserve blocks: a = {:.4}, formula WA {:.3}",
        r.a_effective, r.greedy_formula_wa_effective
    );
    println!("end state   u {:.4}, i {:.4}, p {:.4}", r.u, r.i, r.p);
}

/// Greedy cleaning's write amplification under uniform random writes, for spare factor
/// a = physical / logical pages (a > 1): a / (a + W0(-a e^-a)).
pub fn greedy_wa(a: f64) -> f64 {
    a / (a + lambert_w0(-a * (-a).exp()))
}

/// The principal branch W0 of the Lambert W function (w e^w = x, w >= -1) for
/// x >= -1/e, by Halley's iteration. NaN below -1/e.
pub fn lambert_w0(x: f64) -> f64 {
    const INV_E: f64 = 1.0 / std::f64::consts::E;
    if x.is_nan() || x < -INV_E - 1e-15 {
        return f64::NAN;
    }
    if x == 0.0 {
        return 0.0;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    // Starting points: the series around the branch point -1/e, a Padé-like guess near 0,
    // and the asymptotic ln x - ln ln x for large x.
    let q = x + INV_E;
    if q <= 0.0 {
        return -1.0;
    }
    let mut w = if x < -0.25 {
        let p = (2.0 * std::f64::consts::E * q).sqrt();
        -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p * p * p
    } else if x < 3.0 {
        x.ln_1p() * (1.0 - x.ln_1p() / (2.0 + x.ln_1p()))
    } else {
        let l = x.ln();
        l - l.ln()
    };
    for _ in 0..64 {
        let ew = w.exp();
        let f = w * ew - x;
        let wp1 = w + 1.0;
        if wp1.abs() < 1e-300 {
            break;
        }
        let denom = ew * wp1 - (w + 2.0) * f / (2.0 * wp1);
        if denom == 0.0 || !denom.is_finite() {
            break;
        }
        let next = w - f / denom;
        let done = (next - w).abs() <= 4.0 * f64::EPSILON * (1.0 + next.abs());
        w = next;
        if done {
            break;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn lambert_w0_known_values() {
        let inv_e = -1.0 / std::f64::consts::E;
        assert!(
            close(lambert_w0(inv_e), -1.0, 1e-7),
            "{}",
            lambert_w0(inv_e)
        );
        assert_eq!(lambert_w0(0.0), 0.0);
        assert!(close(lambert_w0(1.0), 0.567_143_290_409_783_8, 1e-12));
        assert!(close(lambert_w0(std::f64::consts::E), 1.0, 1e-12));
        assert!(close(lambert_w0(-0.3), -0.489_402_227_180_214_9, 1e-12));
        assert!(close(lambert_w0(10.0), 1.745_528_002_740_699_4, 1e-12));
        assert!(close(lambert_w0(-0.1), -0.111_832_559_158_962_9, 1e-12));
        assert!(close(lambert_w0(1e6), 11.383_358_086_140_053, 1e-9));
        assert!(lambert_w0(-0.5).is_nan());
    }

    #[test]
    fn lambert_w0_inverts_w_exp_w() {
        let inv_e = -1.0 / std::f64::consts::E;
        for k in 0..=2000 {
            // From just above the branch point to 100.
            let x = inv_e + 1e-12 + (k as f64 / 2000.0).powi(3) * (100.0 - inv_e);
            let w = lambert_w0(x);
            assert!(w >= -1.0, "W0({x}) = {w} is not on the principal branch");
            let back = w * w.exp();
            assert!(
                close(back, x, 1e-9 * (1.0 + x.abs())),
                "W0({x}) = {w}: w e^w = {back}"
            );
        }
    }

    #[test]
    fn greedy_formula_matches_published_values() {
        // a -> infinity: no cleaning cost; a -> 1: unbounded.
        assert!(close(greedy_wa(50.0), 1.0, 1e-12));
        assert!(greedy_wa(1.0001) > 50.0);
        // Spare factor 0.25 of logical (a = 1.25), worked by hand:
        // W0(-1.25 e^-1.25) = W0(-0.35813) = -0.7700..., WA = 1.25 / 0.4799... = 2.6046...
        let wa = greedy_wa(1.25);
        let w = lambert_w0(-1.25 * (-1.25f64).exp());
        assert!(close(w * w.exp(), -1.25 * (-1.25f64).exp(), 1e-15));
        assert!(close(wa, 1.25 / (1.25 + w), 1e-12));
        assert!(wa > 2.5 && wa < 2.7, "{wa}");
        // Monotone: more spare, less amplification.
        let mut last = f64::INFINITY;
        for k in 1..100 {
            let wa = greedy_wa(1.0 + k as f64 * 0.05);
            assert!(wa < last);
            last = wa;
        }
    }
}
