//! MiNV's synthetic workload (the paper's Table 3, Figures 9 and 10): files of one size
//! are created one after another until 32 MB of flash is full, then all deleted; five
//! rounds; no reads and no updates. Counted: flash reads, programs and erases, total
//! simulated time and energy, yaffs against minv, one row per file size and profile.
//!
//! How many files: the paper's Table 3 count for its sizes (it filled the flash as far as
//! YAFFS's metadata allowed), capped by what our yaffs profile manages to create on the
//! same device in a trial run; the largest size shrinks, as in the paper, until one file
//! fits. Both profiles run the same
//! files. A file is created, written in one call and fsync'd (YAFFS writes its header again
//! when the file is closed); the deletes end with a sync.

use anyhow::Context;
use clap::Args;
use nandkit_flash::Flash;
use nandkit_fs::blocks::BlockState;
use nandkit_fs::NewObject;
use nandkit_fs::{FsError, ROOT_INO};
use serde::Serialize;

use super::energy::Mark;
use super::{print_json, Fs, Progress};

pub const LONG_ABOUT: &str = "MiNV's synthetic workload (Table 3, Figures 9-10): for each \
    file size, create files of that size until the flash is full (the paper's Table 3 \
    counts, capped by what fits in yaffs on this device), then delete them all; five rounds. \
    Reports flash reads, programs, erases, blocks left to erase at the end (dirty blocks \
    yaffs has not cleaned yet; minv erases on delete), total simulated time and energy, for \
    yaffs and minv on the same files.";

/// The paper's sizes and Table 3's file counts (32 MB of flash).
const TABLE3: [(u64, u64); 9] = [
    (512, 32_673),
    (2 << 10, 13_069),
    (8 << 10, 3_844),
    (32 << 10, 1_006),
    (128 << 10, 256),
    (512 << 10, 64),
    (2 << 20, 16),
    (8 << 20, 4),
    (32 << 20, 1),
];

/// The paper's board: its 64 MB small-page chip, 32 MB of it used, and an NVRAM for minv
/// (the MiNV benches that fill 32 MB of flash share these flags).
#[derive(Args)]
pub struct BoardArgs {
    /// Device preset (the paper's board: a 64 MB small-page chip, 32 MB of it used).
    #[arg(
        long,
        short = 'g',
        default_value = "smallblock-64m-mtd",
        value_name = "NAME"
    )]
    geometry: String,
    /// Device capacity.
    #[arg(long, default_value = "32MiB", value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    device_size: u64,
    /// NVRAM capacity of minv. 32 MB of 0.5 KB files need 13.3 MiB of our structures
    /// (`nandkit model nvram-space --flash 32MiB --files 32673 --file-size 512`); the
    /// paper's board had 12 MB.
    #[arg(long, default_value = "16MiB", value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    nvram_size: u64,
    /// NVRAM technology for minv's metadata (see `nandkit presets`: feram, pram).
    #[arg(long, value_name = "NAME", default_value = nandkit_nvram::DEFAULT_PRESET)]
    nvram_preset: String,
}

impl BoardArgs {
    pub fn config(&self) -> anyhow::Result<nandkit_flash::DeviceConfig> {
        crate::device_args::DeviceArgs {
            geometry: self.geometry.clone(),
            chips: 1,
            device_size: Some(self.device_size),
            seed: None,
        }
        .config()
    }

    /// A fresh file system of `profile` on a device of `config` (minv with our NVRAM).
    pub fn format(
        &self,
        config: &nandkit_flash::DeviceConfig,
        profile: &str,
    ) -> anyhow::Result<Fs> {
        super::format(
            config.clone(),
            &super::FsArgs {
                profile: profile.into(),
                nvram_size: Some(self.nvram_size),
                nvram_preset: Some(self.nvram_preset.clone()),
                ..super::FsArgs::default()
            },
        )
    }
}

#[derive(Args)]
pub struct SyntheticArgs {
    #[command(flatten)]
    board: BoardArgs,
    /// File sizes, comma-separated [default: the paper's, 512 B .. 32 MiB].
    #[arg(long, value_delimiter = ',', value_name = "SIZES", value_parser = crate::device_args::parse_bytes)]
    sizes: Vec<u64>,
    /// Create-then-delete rounds.
    #[arg(long, default_value_t = 5, value_name = "N")]
    rounds: u32,
    /// Profiles, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "yaffs,minv",
        value_name = "NAMES"
    )]
    profiles: Vec<String>,
    /// Print a JSON array of rows instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Serialize)]
struct Row {
    profile: String,
    /// Bytes in each file (the largest size shrinks until one file fits).
    file_size: u64,
    files: u64,
    /// Table 3's count for this size, when it is one of the paper's.
    paper_files: Option<u64>,
    rounds: u32,
    flash_reads: u64,
    flash_programs: u64,
    /// Partial programs of a spare area: yaffs1's deletion markers.
    flash_spare_programs: u64,
    flash_erases: u64,
    /// Blocks holding no live page but not yet erased when the run ends: erases still owed.
    blocks_left_to_erase: u64,
    sim_s: f64,
    energy_j: f64,
    nvram_bytes_written: u64,
    /// "ok", or where the run met a full device.
    outcome: String,
}

pub fn run(args: SyntheticArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.rounds > 0, "--rounds must be at least 1");
    let config = args.board.config()?;
    let sizes: Vec<u64> = if args.sizes.is_empty() {
        TABLE3.iter().map(|&(s, _)| s).collect()
    } else {
        args.sizes.clone()
    };
    anyhow::ensure!(
        sizes.iter().all(|&s| s > 0),
        "file sizes must be at least 1 byte"
    );
    let format = |profile: &str| args.board.format(&config, profile);
    let mut rows = Vec::new();
    for &size in &sizes {
        let paper_files = TABLE3.iter().find(|&&(s, _)| s == size).map(|&(_, n)| n);
        let yaffs = plan(&format, size, paper_files, args.rounds, args.json)
            .with_context(|| format!("yaffs, files of {size} bytes"))?;
        for profile in &args.profiles {
            let row = if profile == "yaffs" {
                yaffs.clone()
            } else {
                run_one(
                    format(profile)?,
                    profile,
                    yaffs.file_size,
                    yaffs.files,
                    args.rounds,
                    args.json,
                )
                .with_context(|| format!("{profile}, files of {size} bytes"))?
                .0
            };
            rows.push(Row { paper_files, ..row });
        }
    }
    if args.json {
        return print_json(&rows);
    }
    print_table(&rows);
    Ok(())
}

/// The run on yaffs that sets the files for every profile: as many as yaffs keeps up with
/// through every round, at most the paper's count. It starts from what the free space holds
/// (data chunks plus one header each) and, when a round meets a full device after k files,
/// runs again with k; a size of which not even one fits shrinks by a block at a time.
fn plan(
    format: &dyn Fn(&str) -> anyhow::Result<Fs>,
    size: u64,
    paper_files: Option<u64>,
    rounds: u32,
    quiet: bool,
) -> anyhow::Result<Row> {
    let fs = format("yaffs")?;
    let s = fs.statfs();
    let chunk = u64::from(s.chunk_bytes);
    let block = chunk * u64::from(fs.device().geometry().pages_per_block);
    let most = s.free_chunks / (size.div_ceil(chunk) + 1);
    let mut size = if most == 0 {
        s.free_chunks.saturating_sub(1) * chunk
    } else {
        size
    };
    let mut files = paper_files.map_or(most, |n| n.min(most)).max(1);
    loop {
        anyhow::ensure!(size > 0, "the device has no room for a file");
        let (row, full_after) = run_one(format("yaffs")?, "yaffs", size, files, rounds, quiet)?;
        match full_after {
            None => return Ok(row),
            Some(0) => size = size.saturating_sub(block),
            Some(k) => files = k,
        }
    }
}

/// Runs the rounds; also returns, if the device filled up, after how many files of that
/// round (the row's outcome says so too).
fn run_one(
    mut fs: Fs,
    profile: &str,
    file_size: u64,
    files: u64,
    rounds: u32,
    quiet: bool,
) -> anyhow::Result<(Row, Option<u64>)> {
    let data = super::noise(file_size as usize, 3);
    let t0 = fs.device_mut().stats().total();
    let nv0 = fs.nvram().map_or(0, |n| n.stats.bytes_written);
    let start = Mark::of_fs(&fs);
    let mut progress = Progress::items(files * u64::from(rounds), "create+delete", quiet);
    let mut full_after = None;
    let mut outcome = "ok".to_string();
    'rounds: for round in 0..rounds {
        let mut made = 0;
        for i in 0..files {
            let name = format!("f{i:06}");
            let step = fs
                .create(ROOT_INO, name.as_bytes(), NewObject::regular_file())
                .and_then(|a| {
                    made += 1;
                    // A write the full device cuts short is the device full, too.
                    if fs.write(a.ino, 0, &data)? < data.len() {
                        return Err(FsError::NoSpace);
                    }
                    fs.fsync(a.ino)
                });
            match step {
                Ok(()) => {}
                Err(FsError::NoSpace) => {
                    outcome = format!("enospc at file {i} of round {}", round + 1);
                    full_after = Some(i);
                    for j in 0..made {
                        fs.unlink(ROOT_INO, format!("f{j:06}").as_bytes())?;
                    }
                    break 'rounds;
                }
                Err(e) => return Err(e).context("creating a file"),
            }
            progress.inc(1);
        }
        for i in 0..files {
            fs.unlink(ROOT_INO, format!("f{i:06}").as_bytes())
                .context("deleting a file")?;
        }
        fs.sync().context("sync after the deletes")?;
    }
    progress.finish();
    let spent = start.to_fs(&fs);
    let t1 = fs.device_mut().stats().total();
    let left = fs
        .block_table()
        .iter()
        .filter(|b| b.state == BlockState::Full && b.valid() == 0)
        .count() as u64;
    let row = Row {
        profile: profile.to_string(),
        file_size,
        files,
        paper_files: None,
        rounds,
        flash_reads: (t1.page_reads + t1.oob_reads) - (t0.page_reads + t0.oob_reads),
        flash_programs: t1.programs - t0.programs,
        flash_spare_programs: t1.spare_programs - t0.spare_programs,
        flash_erases: t1.erases - t0.erases,
        blocks_left_to_erase: left,
        sim_s: spent.sim_s(),
        energy_j: spent.energy_j(),
        nvram_bytes_written: fs
            .nvram()
            .map_or(0, |n| n.stats.bytes_written.saturating_sub(nv0)),
        outcome,
    };
    Ok((row, full_after))
}

fn print_table(rows: &[Row]) {
    println!(
        "{:>9} {:>6} {:<6} {:>8} {:>9} {:>7} {:>6} {:>9} {:>9} {:>8}",
        "size",
        "files",
        "fs",
        "reads",
        "programs",
        "erases",
        "owed",
        "sim_s",
        "energy_J",
        "speedup"
    );
    for r in rows {
        let yaffs = rows
            .iter()
            .find(|y| y.file_size == r.file_size && y.profile == "yaffs")
            .map_or(f64::NAN, |y| y.sim_s);
        println!(
            "{:>9} {:>6} {:<6} {:>8} {:>9} {:>7} {:>6} {:>9.3} {:>9.3} {:>7.2}x{}",
            human(r.file_size),
            r.files,
            r.profile,
            r.flash_reads,
            r.flash_programs,
            r.flash_erases,
            r.blocks_left_to_erase,
            r.sim_s,
            r.energy_j,
            yaffs / r.sim_s,
            if r.outcome == "ok" {
                String::new()
            } else {
                format!("  ({})", r.outcome)
            }
        );
    }
    println!(
        "(owed: blocks with no live page left unerased at the end; speedup: yaffs sim_s / this)"
    );
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b}B"),
    }
}
