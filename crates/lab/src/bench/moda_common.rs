//! What the MODA benches share: the paper's device and the policies to compare, and
//! "clean everything", the measured cleaning cost of Table 1 and Figures 7 and 8.

use anyhow::Context;
use clap::Args;
use nandkit_fs::AllocatorKind;

use super::energy::Mark;
use super::{format, Fs, FsArgs};
use crate::device_args::DeviceArgs;

/// The device, the policies and the workload seed of a MODA bench.
#[derive(Args)]
pub struct ModaArgs {
    /// Device preset: the paper's 64 MB small-page chip with the times it measured above
    /// MTD.
    #[arg(
        long,
        short = 'g',
        default_value = "smallblock-64m-mtd",
        value_name = "NAME"
    )]
    pub geometry: String,
    /// Device capacity (the workloads scale with it) [default: the preset's].
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    pub device_size: Option<u64>,
    /// Allocation policies, comma-separated (sequential, moda, dac, page-hotcold)
    /// [default: the bench's].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub policies: Vec<String>,
    /// Seed of the workloads.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    pub workload_seed: u64,
    /// The log the policies run on: yaffs (modern YAFFS2) or yaffs1 (the YAFFS of 2007
    /// that the MODA paper modified: no summaries, every page's tags read at mount).
    #[arg(long, default_value = "yaffs", value_name = "NAME", value_parser = ["yaffs", "yaffs1"])]
    pub profile: String,
    #[command(flatten)]
    pub classifiers: super::ClassifierArgs,
    /// YAFFS cleaning without block status in RAM, as the paper says of the YAFFS it
    /// measured (sec. 6.3.2): every block a victim search passes costs an OOB read of each
    /// of its programmed pages (one for an erased block), counted and timed as flash
    /// reads. The YAFFS sources of the time keep the counts in RAM, so it is off by default.
    #[arg(long)]
    pub search_reads: bool,
    /// Print a JSON array of rows instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl ModaArgs {
    pub fn device(&self) -> anyhow::Result<nandkit_flash::DeviceConfig> {
        DeviceArgs {
            geometry: self.geometry.clone(),
            chips: 1,
            device_size: self.device_size,
            seed: None,
        }
        .config()
    }

    /// The policies asked for, or `default` (names) when none were.
    pub fn policies(&self, default: &[&str]) -> anyhow::Result<Vec<AllocatorKind>> {
        let names: Vec<&str> = if self.policies.is_empty() {
            default.to_vec()
        } else {
            self.policies.iter().map(String::as_str).collect()
        };
        names
            .iter()
            .map(|n| n.parse().with_context(|| format!("--policies {n}")))
            .collect()
    }
}

/// A fresh file system under `policy` with the classifiers' parameters `moda` gives
/// (everything else its profile's: yaffs or yaffs1).
pub fn format_with(
    device: &nandkit_flash::DeviceConfig,
    moda: &ModaArgs,
    policy: AllocatorKind,
) -> anyhow::Result<Fs> {
    let fs_args = FsArgs {
        profile: moda.profile.clone(),
        alloc: Some(policy),
        classifiers: moda.classifiers,
        // The YAFFS the paper modified dropped a deleted file's header without waiting
        // for its data to be erased.
        recover_lost_files: Some(false),
        yaffs_search_reads: moda.search_reads,
        ..FsArgs::default()
    };
    format(device.clone(), &fs_args)
}

/// What cleaning every block with an invalid page cost.
pub struct Cleaned {
    pub erases: u64,
    pub copies: u64,
    /// OOB reads the victim searches issued (`--search-reads`).
    pub search_reads: u64,
    /// Simulated seconds.
    pub seconds: f64,
    /// Joules the cleaning spent.
    pub energy_j: f64,
}

/// Explicit cleaning until the cleaner finds no block left to reclaim (bounded: each
/// pass reclaims a block or stops).
pub fn clean_everything(fs: &mut Fs) -> anyhow::Result<Cleaned> {
    let before = fs.stats().clone();
    let start = Mark::of_fs(fs);
    while fs.gc(64).context("cleaning")? > 0 {}
    let spent = start.to_fs(fs);
    let after = fs.stats();
    Ok(Cleaned {
        erases: after.blocks_cleaned - before.blocks_cleaned,
        copies: after.pages_copied - before.pages_copied,
        search_reads: after.search_reads - before.search_reads,
        seconds: spent.sim_s(),
        energy_j: spent.energy_j(),
    })
}
