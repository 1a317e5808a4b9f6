//! `nandkit bench ma-capacity`: what bad blocks cost an array, and how even its wear stays,
//! with a UBI per chip (MA as its paper built it) and without (every stripe tied to the
//! same physical block of every chip).

use anyhow::{ensure, Context};
use clap::Args;
use nandkit_flash::FlashDevice;
use nandkit_fs::{FsError, NewObject, ROOT_INO};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::{format_with_stripe, noise, print_json, write_sequential, Fs, FsArgs, Progress};
use crate::device_args::{parse_bytes, DeviceArgs};

pub const LONG_ABOUT: &str = "For each P in --chips, the same capacity split over P chips, \
    each chip with the same seeded factory bad-block rate (--bad-block-rate), is formatted \
    twice: with a UBI per chip (--ubi on) and striped over physical blocks (--ubi off). \
    Reported for each: bad PEBs, the bytes the erase-block layer offers (UBI: LEBs x LEB \
    size; without: good stripes x stripe size), the file system's free bytes after mkfs, \
    and the bytes one file takes before ENOSPC; each as a fraction of P = 1's.\n\n\
    Without UBI a bad block anywhere takes its whole stripe (block b of every chip) out of \
    service; with UBI each chip keeps a reserve of PEBs for bad blocks (20 per 1024 by \
    default, UBI's), so a bad block costs one PEB of one chip and the volume is the same \
    size whichever blocks are bad. The file system's own cleaning reserve is a number of \
    its (striped) blocks, so it grows with P either way: fs_free_bytes shows it.\n\n\
    Then wear, on the UBI array: a cold file fills 60% of the free space, a hot file 10%, \
    and --overwrite bytes of random page-sized overwrites go to the hot file. Run with \
    wear levelling at --wl-threshold and with it off: the erase-count spread (max - min \
    over a chip's good PEBs, the worst chip) and the LEBs wear levelling moved.";

#[derive(Args)]
pub struct MaCapacityArgs {
    /// Device preset (see `nandkit presets`).
    #[arg(long, short = 'g', default_value = nandkit_flash::DEFAULT_PRESET, value_name = "NAME")]
    geometry: String,
    /// Total capacity instead of the preset's, split over P chips.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    device_size: Option<u64>,
    /// Seed for the device's random draws (which blocks are bad).
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    fs: FsArgs,
    /// Chip counts, comma-separated; the first is the baseline of the ratios.
    #[arg(
        long = "chips",
        default_value = "1,2,4,8",
        value_delimiter = ',',
        value_name = "P,..."
    )]
    chip_counts: Vec<u32>,
    /// Factory bad blocks per chip, as a fraction of its blocks [default: the preset's].
    #[arg(long, value_name = "FRACTION")]
    bad_block_rate: Option<f64>,
    /// Random overwrites for the wear run (0: skip it) [default: 4 x the device].
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    overwrite: Option<u64>,
    /// Wear levelling's threshold for the wear run (erase-count spread that moves a LEB).
    #[arg(long, default_value_t = 8, value_name = "ERASES")]
    wl_threshold: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone, Default)]
struct Space {
    /// Bytes the erase-block layer offers the file system.
    layer_bytes: u64,
    /// Free bytes statfs gives after mkfs.
    fs_free_bytes: u64,
    /// Bytes one file took before ENOSPC.
    filled_bytes: u64,
    layer_vs_first: f64,
    fs_free_vs_first: f64,
    filled_vs_first: f64,
}

#[derive(Serialize, Clone, Default)]
struct Wear {
    wl_threshold: Option<u32>,
    /// Largest erase-count spread (max - min over good PEBs) of any chip.
    ec_spread_max: u32,
    ec_max: u32,
    wl_moves: u64,
    /// Of those, moves of the layout volume's LEBs (UBI's volume table: cold).
    wl_moves_layout: u64,
    wl_pages_copied: u64,
    overwrite_bytes: u64,
}

#[derive(Serialize, Clone)]
struct Row {
    bench: &'static str,
    geometry: String,
    device_bytes: u64,
    chips: u32,
    bad_block_rate: f64,
    /// Factory bad blocks over all chips.
    bad_pebs: u32,
    /// Without UBI: stripes (virtual blocks) a bad block took out.
    stripes_lost: u32,
    ubi: Space,
    raw: Space,
    /// Wear levelling on (at --wl-threshold) and off, on the UBI array.
    wear_levelled: Option<Wear>,
    wear_unlevelled: Option<Wear>,
}

pub fn run(args: MaCapacityArgs) -> anyhow::Result<()> {
    ensure!(
        !args.chip_counts.is_empty(),
        "--chips needs at least one count"
    );
    ensure!(args.wl_threshold > 0, "--wl-threshold must be at least 1");
    let mut rows: Vec<Row> = Vec::new();
    for &chips in &args.chip_counts {
        let mut row = one(&args, chips)?;
        if let Some(first) = rows.first() {
            ratios(&mut row.ubi, &first.ubi);
            ratios(&mut row.raw, &first.raw);
        } else {
            let (u, r) = (row.ubi.clone(), row.raw.clone());
            ratios(&mut row.ubi, &u);
            ratios(&mut row.raw, &r);
        }
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

fn ratios(s: &mut Space, first: &Space) {
    let r = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    s.layer_vs_first = r(s.layer_bytes, first.layer_bytes);
    s.fs_free_vs_first = r(s.fs_free_bytes, first.fs_free_bytes);
    s.filled_vs_first = r(s.filled_bytes, first.filled_bytes);
}

fn one(args: &MaCapacityArgs, chips: u32) -> anyhow::Result<Row> {
    let device = DeviceArgs {
        geometry: args.geometry.clone(),
        chips,
        device_size: args.device_size,
        seed: args.seed,
    };
    let mut config = device.config()?;
    if let Some(rate) = args.bad_block_rate {
        config.wear.factory_bad_fraction = rate;
    }
    config.validate().context("--bad-block-rate")?;
    let g = config.geometry;
    let quiet = args.json;
    let mut fs_args = FsArgs {
        ubi: Some(true),
        ..args.fs.clone()
    };
    // With UBI.
    let mut fs = format_with_stripe(FlashDevice::ram(config.clone())?, &fs_args)?;
    let report = fs.device().ubi_report().expect("formatted with UBI");
    let bad_pebs: u32 = report.chips.iter().map(|c| c.bad).sum();
    let vg = nandkit_flash::Flash::geometry(&*fs.device());
    let ubi = Space {
        layer_bytes: u64::from(vg.blocks_per_chip)
            * u64::from(vg.pages_per_block)
            * u64::from(vg.page_size_bytes),
        fs_free_bytes: free_bytes(&fs),
        filled_bytes: fill(&mut fs, quiet, "filling (UBI)")?,
        ..Space::default()
    };
    // Without: stripe b is out if block b of any chip is bad.
    fs_args.ubi = Some(false);
    let mut fs = format_with_stripe(FlashDevice::ram(config.clone())?, &fs_args)?;
    let mut stripes_lost = 0;
    for b in 0..g.blocks_per_chip {
        if nandkit_flash::Flash::is_bad(fs.device_mut(), nandkit_flash::BlockAddr::new(0, b))? {
            stripes_lost += 1;
        }
    }
    let stripe = u64::from(g.pages_per_block) * u64::from(g.chips) * u64::from(g.page_size_bytes);
    let raw = Space {
        layer_bytes: u64::from(g.blocks_per_chip - stripes_lost) * stripe,
        fs_free_bytes: free_bytes(&fs),
        filled_bytes: fill(&mut fs, quiet, "filling (no UBI)")?,
        ..Space::default()
    };
    let overwrite = args.overwrite.unwrap_or(4 * g.total_bytes());
    let (wear_levelled, wear_unlevelled) = if overwrite == 0 {
        (None, None)
    } else {
        let wear = |threshold: u32| -> anyhow::Result<Wear> {
            let a = FsArgs {
                ubi: Some(true),
                ubi_wl_threshold: threshold,
                ..args.fs.clone()
            };
            let fs = format_with_stripe(FlashDevice::ram(config.clone())?, &a)?;
            wear_run(fs, overwrite, quiet).map(|mut w| {
                w.wl_threshold = (threshold != u32::MAX).then_some(threshold);
                w
            })
        };
        (Some(wear(args.wl_threshold)?), Some(wear(u32::MAX)?))
    };
    Ok(Row {
        bench: "ma-capacity",
        geometry: config.name.clone(),
        device_bytes: g.total_bytes(),
        chips,
        bad_block_rate: config.wear.factory_bad_fraction,
        bad_pebs,
        stripes_lost,
        ubi,
        raw,
        wear_levelled,
        wear_unlevelled,
    })
}

fn free_bytes(fs: &Fs) -> u64 {
    let s = fs.statfs();
    s.free_chunks * u64::from(s.chunk_bytes)
}

/// Writes one file in 1 MiB steps until the file system says it is full: the bytes taken.
fn fill(fs: &mut Fs, quiet: bool, what: &'static str) -> anyhow::Result<u64> {
    let ino = fs.create(ROOT_INO, b"fill", NewObject::regular_file())?.ino;
    let step = 1 << 20;
    let data = noise(step, 3);
    let mut progress = Progress::bytes(free_bytes(fs), what, quiet);
    let mut off = 0u64;
    loop {
        match fs.write(ino, off, &data) {
            Ok(n) => {
                off += n as u64;
                progress.inc(n as u64);
                if n < step {
                    break;
                }
            }
            Err(FsError::NoSpace) => break,
            Err(e) => return Err(e).context("filling the file system"),
        }
    }
    match fs.fsync(ino) {
        Ok(()) | Err(FsError::NoSpace) => {}
        Err(e) => return Err(e).context("fsync of the full file"),
    }
    progress.finish();
    Ok(off)
}

/// A cold file (60% of the free space), a hot one (10%), then random page overwrites of
/// the hot one; UBI's erase counters after.
fn wear_run(mut fs: Fs, overwrite: u64, quiet: bool) -> anyhow::Result<Wear> {
    let free = free_bytes(&fs);
    let page = u64::from(fs.chunk_bytes());
    let cold = fs.create(ROOT_INO, b"cold", NewObject::regular_file())?.ino;
    let hot = fs.create(ROOT_INO, b"hot", NewObject::regular_file())?.ino;
    let step = 1 << 20;
    let data = noise(step as usize, 5);
    let hot_pages = (free / 10 / page).max(1);
    for (ino, bytes) in [(cold, free * 6 / 10 / page * page), (hot, hot_pages * page)] {
        let mut progress = Progress::bytes(bytes, "filling", quiet);
        write_sequential(&mut fs, ino, bytes, step, &data, &mut progress)?;
        progress.finish();
        fs.fsync(ino).context("fsync")?;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut progress = Progress::bytes(overwrite, "overwriting", quiet);
    let mut done = 0;
    while done < overwrite {
        let off = rng.gen_range(0..hot_pages) * page;
        let at = (rng.gen_range(0..step - page)) as usize;
        fs.write(hot, off, &data[at..at + page as usize])
            .context("overwriting")?;
        done += page;
        progress.inc(page);
    }
    fs.sync().context("sync")?;
    progress.finish();
    let r = fs.device().ubi_report().expect("UBI array");
    Ok(Wear {
        wl_threshold: None,
        ec_spread_max: r
            .chips
            .iter()
            .map(|c| c.ec_max - c.ec_min)
            .max()
            .unwrap_or(0),
        ec_max: r.chips.iter().map(|c| c.ec_max).max().unwrap_or(0),
        wl_moves: r.wl_moves,
        wl_moves_layout: r.wl_moves_other_volumes,
        wl_pages_copied: r.wl_pages_copied,
        overwrite_bytes: overwrite,
    })
}

fn print_row(r: &Row, header: bool) {
    if header {
        println!(
            "{:>5} {:>5} {:>7} | {:>11} {:>7} {:>11} {:>7} | {:>11} {:>7} {:>11} {:>7} | {:>13} {:>13} {:>6}",
            "chips",
            "bad",
            "stripes",
            "UBI MiB",
            "vs 1st",
            "UBI filled",
            "vs 1st",
            "raw MiB",
            "vs 1st",
            "raw filled",
            "vs 1st",
            "spread WL on",
            "spread WL off",
            "moves"
        );
    }
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let spread = |w: &Option<Wear>| {
        w.as_ref()
            .map_or("-".into(), |w| w.ec_spread_max.to_string())
    };
    println!(
        "{:>5} {:>5} {:>7} | {:>11.1} {:>6.3}x {:>11.1} {:>6.3}x | {:>11.1} {:>6.3}x {:>11.1} {:>6.3}x | {:>13} {:>13} {:>6}",
        r.chips,
        r.bad_pebs,
        r.stripes_lost,
        mib(r.ubi.layer_bytes),
        r.ubi.layer_vs_first,
        mib(r.ubi.filled_bytes),
        r.ubi.filled_vs_first,
        mib(r.raw.layer_bytes),
        r.raw.layer_vs_first,
        mib(r.raw.filled_bytes),
        r.raw.filled_vs_first,
        spread(&r.wear_levelled),
        spread(&r.wear_unlevelled),
        r.wear_levelled.as_ref().map_or(0, |w| w.wl_moves)
    );
}
