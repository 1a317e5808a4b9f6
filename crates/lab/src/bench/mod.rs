//! `nandkit bench`: file system benchmarks on a simulated RAM device.
//!
//! Every benchmark formats a fresh device, runs one workload through the nandkit-fs API and
//! reports, for the phase it measures, simulated time (the device clock), energy
//! (`energy_j`, see [`energy`]), host time, flash operation counts, pages copied by cleaning
//! and write amplification (flash programs / user data pages). Every random choice comes
//! from a seed the report names: the device's (`--seed`, bad blocks and bit errors) and the
//! workload's (`--workload-seed`).

pub mod energy;
mod fuse;
mod heap;
mod iozone;
mod ma_capacity;
mod ma_mount;
mod ma_mount_ubifs;
mod ma_realtime;
mod minv;
mod minv_space;
mod minv_synthetic;
mod mnfs;
mod mnfs_uniform;
mod moda_common;
mod moda_repeat;
mod moda_table;
mod moda_utilization;
mod mount;
mod parity;
mod peers;
mod random_overwrite;
mod seq_write;
mod software_cost;
pub mod standby;
pub mod trace;
mod ubifs_mount;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{ChipStats, Flash, FlashDevice, StripedDevice, StripedFlash};
use nandkit_fs::{
    AllocParams, AllocatorKind, CleanerKind, Clock, CountingClock, FileSystem, FsConfig, FsError,
    FsStats, Ino, Kind, MountMethod, MountOptions, NewObject,
};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use self::energy::Mark;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// One file written sequentially: host and simulated bandwidth, then mount times.
    #[command(
        long_about = seq_write::LONG_ABOUT,
        after_help = "Targets: host_user_mb_per_s >= 200, efficiency_vs_raw >= 0.90.\n\n\
            Examples:\n  \
            nandkit bench seq-write\n  \
            nandkit bench seq-write --geometry mlc-1g --device-size 128MiB --file-size 64MiB --json"
    )]
    SeqWrite(seq_write::SeqWriteArgs),
    /// Uniform random overwrites of one big file: cleaning cost and write amplification
    /// against the greedy model.
    #[command(
        long_about = random_overwrite::LONG_ABOUT,
        after_help = "Target: with --cleaner greedy, write amplification within 5% of the formula \
             or below (wa_ratio_to_formula <= 1.05).\n\n\
             Examples:\n  \
             nandkit bench random-overwrite --cleaner greedy\n  \
             nandkit bench random-overwrite --geometry mlc-1g --device-size 128MiB \
             --utilization 0.8 --cleaner greedy --json\n  \
             nandkit bench random-overwrite --cleaner greedy --warmup-factor 4"
    )]
    RandomOverwrite(random_overwrite::RandomOverwriteArgs),
    /// Heap the mounted file system holds: one big file, and many small files.
    #[command(
        long_about = heap::LONG_ABOUT,
        after_help = "Examples:\n  \
            nandkit bench heap --geometry mlc-1g --device-size 1GiB --json\n  \
            nandkit bench heap --files 1000 --big-file-size 8MiB"
    )]
    Heap(heap::HeapArgs),
    /// Mount cost (flash reads, time, heap) from a checkpoint and by full scan.
    #[command(
        long_about = mount::LONG_ABOUT,
        after_help = "Targets on the default (2,000 files of 2 KiB, 32 MiB of 2 KiB pages): \
            checkpoint mount <= 150 reads, scan mount <= 400 reads, heap <= 400 KB.\n\n\
            Examples:\n  \
            nandkit bench mount\n  \
            nandkit bench mount --json\n  \
            nandkit bench mount --device-size 128MiB --files 20000 --json"
    )]
    Mount(mount::MountArgs),
    /// Small reads and writes through a real FUSE mount, against bindfs over tmpfs.
    #[command(
        long_about = fuse::LONG_ABOUT,
        after_help = "Targets with the default mount options: 4-byte appends and random 4 KiB \
            writes >= 20x bindfs over tmpfs, random 4 KiB reads >= 5x; the logging workload \
            (3,000,000 appends) under 15 s.\n\n\
            Examples:\n  \
            nandkit bench fuse\n  \
            nandkit bench fuse --options nowriteback --json\n  \
            nandkit bench fuse --calls 10000 --log-appends 0 --no-reference"
    )]
    Fuse(fuse::FuseArgs),
    /// MA's IOzone runs: O_SYNC writes in records, on P chips striped (simulated MB/s).
    #[command(
        long_about = iozone::LONG_ABOUT,
        after_help = "Target (MA issue): seq-write, 16 MiB records on tlc-1g: P = 4 >= 3.6x \
            of P = 1, P = 2 >= 1.85x.\n\n\
            Examples:\n  \
            nandkit bench iozone --geometry tlc-1g --chips 4 --mode seq-write --record 16MiB --json\n  \
            nandkit bench iozone --geometry tlc-1g --mode rand-write --sweep\n  \
            nandkit bench iozone --geometry mlc-8k --chips 2 --mode read --software-cost calibrated\n  \
            nandkit bench iozone --geometry tlc-1g --chips 4 --ubi off --mode reread"
    )]
    Iozone(iozone::IozoneArgs),
    /// Parity across the chips: O_SYNC writes with parity and without, write
    /// amplification, and the time to rebuild a chip of a full array.
    #[command(
        long_about = parity::LONG_ABOUT,
        after_help = "Target (parity issue): 4 chips with parity >= 70% of 4 chips without \
            on 16 MB O_SYNC writes.\n\n\
            Examples:\n  \
            nandkit bench parity\n  \
            nandkit bench parity --chips 4,8 --json\n  \
            nandkit bench parity --geometry mlc-1g --chips 3 --device-size 128MiB"
    )]
    Parity(parity::ParityArgs),
    /// MA's arrays with a UBI per chip and without: what bad blocks cost, and how even the
    /// wear stays.
    #[command(long_about = ma_capacity::LONG_ABOUT, after_help = "Target (MA issue): usable \
            bytes at 8 chips >= 99% of 1 chip's; erase-count spread per chip after a long \
            random-overwrite run within the wear-levelling threshold.\n\n\
            Examples:\n  \
            nandkit bench ma-capacity --chips 1,2,4,8 --json\n  \
            nandkit bench ma-capacity --device-size 256MiB --overwrite 0")]
    MaCapacity(ma_capacity::MaCapacityArgs),
    /// The host software's own cost: measured on nandkit's code (the calibration), then
    /// swept over MA's speed-ups, cell-type trend and mount times.
    #[command(long_about = software_cost::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench software-cost\n  \
            nandkit bench software-cost --no-sweep --json\n  \
            nandkit bench software-cost --base calibrated --scales 0,1,100")]
    SoftwareCost(software_cost::SoftwareCostArgs),
    /// MA's mount times (Figure 6) on P chips: new, one big file, many small files.
    #[command(long_about = ma_mount::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench ma-mount --chips 4 --json\n  \
            nandkit bench ma-mount --chips 1 --quick")]
    MaMount(ma_mount::MaMountArgs),
    /// MA in wall time: O_SYNC writes onto a `--realtime` mount of P chips (needs FUSE).
    #[command(
        long_about = ma_realtime::LONG_ABOUT,
        after_help = "Target (MA issue): P = 4 >= 3x faster than P = 1 in wall time \
            (dd bs=16M oflag=sync).\n\n\
            Examples:\n  \
            nandkit bench ma-realtime\n  \
            nandkit bench ma-realtime --chips 1,2,4,8 --file-size 32MiB --json"
    )]
    MaRealtime(ma_realtime::MaRealtimeArgs),
    /// MA's smartphone trace replay (Figure 10) on P chips: response times, requests in
    /// flight.
    #[command(long_about = trace::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench trace --trace Movie --chips 4\n  \
            nandkit bench trace --trace TwoWriters --chips 4 --queue-depth 4\n  \
            nandkit bench trace --trace CameraVideo --sweep\n  \
            nandkit bench trace --trace WebBrowsing --chips 2 --scale 0.1 --json\n  \
            nandkit bench trace --trace AngryBird --emit angrybird.csv\n  \
            nandkit bench trace --trace-file my-trace.csv --chips 4")]
    Trace(trace::TraceArgs),
    /// The MODA paper's Table 1: seven workloads x every allocation policy; u, i, p, the
    /// cleaning model's estimate and the measured cleaning cost (--ablation: MODA in parts).
    #[command(long_about = moda_table::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench moda-table\n  \
            nandkit bench moda-table --ablation\n  \
            nandkit bench moda-table --workloads fax,andrew --policies sequential,moda --json")]
    ModaTable(moda_table::ModaTableArgs),
    /// The MODA paper's Figure 7: PostMark after pre-filling the device to utilization 0
    /// .. 0.9; running time and cleaning cost by policy.
    #[command(long_about = moda_utilization::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench moda-utilization\n  \
            nandkit bench moda-utilization --utilizations 0.5,0.9 --policies sequential,moda,dac --json")]
    ModaUtilization(moda_utilization::ModaUtilizationArgs),
    /// The MODA paper's Figure 8: PostMark repeated until the device is full, with no
    /// cleaning, cleaning between runs, or idle-time cleaning.
    #[command(long_about = moda_repeat::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench moda-repeat\n  \
            nandkit bench moda-repeat --modes none,idle --gap 5 --idle-after 0.5 --json")]
    ModaRepeat(moda_repeat::ModaRepeatArgs),
    /// The MiNV paper's Figure 8: mount time against utilization, yaffs (checkpoint and
    /// scan) against minv (NVRAM), on a fresh and an aged layout.
    #[command(long_about = minv::MOUNT_LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench minv-mount\n  \
            nandkit bench minv-mount --utilizations 0,1 --layouts fresh --json")]
    MinvMount(minv::MinvMountArgs),
    /// The MiNV paper's Figure 11: the TTFS workloads (fax, phone, recorder) under yaffs
    /// and minv: time, flash operations, energy.
    #[command(long_about = minv::TTFS_LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench ttfs\n  \
            nandkit bench ttfs --workloads fax --json")]
    Ttfs(minv::TtfsArgs),
    /// The MiNV paper's synthetic workload (Table 3, Figures 9-10): files of one size
    /// created until the flash is full, then deleted, five rounds; yaffs against minv.
    #[command(long_about = minv_synthetic::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench minv-synthetic\n  \
            nandkit bench minv-synthetic --sizes 2KiB,2MiB --rounds 1 --json")]
    MinvSynthetic(minv_synthetic::SyntheticArgs),
    /// MiNV's Figure 7: NVRAM the space model predicts against a real image's, by file size.
    #[command(long_about = minv_space::LONG_ABOUT, after_help = "Examples:\n  \
        nandkit bench minv-space\n  \
        nandkit bench minv-space --sizes 4KiB,1MiB --json")]
    MinvSpace(minv_space::SpaceArgs),
    /// littlefs (the C library) beside every nandkit profile on the same simulated flash:
    /// the same workloads, the same counters, and a power-cut comparison.
    #[command(long_about = peers::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench peers\n  \
            nandkit bench peers --fs littlefs,yaffs --workloads none --json")]
    Peers(peers::PeersArgs),
    /// The MNFS paper's Figure 6: every write's latency while a 64 MiB file is written in
    /// 32 KiB writes onto a fragmented device.
    #[command(long_about = mnfs_uniform::LONG_ABOUT, after_help = "Examples:\n  \
            nandkit bench mnfs-uniform --profile mnfs\n  \
            nandkit bench mnfs-uniform --profile yaffs --json")]
    MnfsUniform(mnfs_uniform::UniformArgs),
    /// The MNFS paper's Figure 4: write throughput filling a clean device with random-sized
    /// files.
    #[command(long_about = mnfs::FILL_ABOUT, after_help = "Examples:\n  \
            nandkit bench mnfs-fill\n  \
            nandkit bench mnfs-fill --profiles mnfs --fill-to 0.5 --json")]
    MnfsFill(mnfs::FillArgs),
    /// The MNFS paper's Figure 5: deletion time against file size.
    #[command(long_about = mnfs::DELETE_ABOUT, after_help = "Examples:\n  \
            nandkit bench mnfs-delete\n  \
            nandkit bench mnfs-delete --sizes 1MiB,16MiB --json")]
    MnfsDelete(mnfs::DeleteArgs),
    /// The MNFS paper's Table 2: mount time and heap with the device full.
    #[command(long_about = mnfs::MOUNT_ABOUT, after_help = "Examples:\n  \
            nandkit bench mnfs-mount\n  \
            nandkit bench mnfs-mount --json")]
    MnfsMount(mnfs::MnfsArgs),
    /// MNFS's stated weakness: many small files; the flash each profile needs for them.
    #[command(long_about = mnfs::SMALL_ABOUT, after_help = "Examples:\n  \
            nandkit bench mnfs-small --profiles yaffs,mnfs,hybrid\n  \
            nandkit bench mnfs-small --files 1000 --json")]
    MnfsSmall(mnfs::SmallArgs),
}

/// A file system as the benchmarks run it: on a RAM array seen striped.
pub type Fs = FileSystem<StripedDevice>;

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::SeqWrite(a) => seq_write::run(a),
        BenchCommand::RandomOverwrite(a) => random_overwrite::run(a),
        BenchCommand::Heap(a) => heap::run(a),
        BenchCommand::Mount(a) => mount::run(a),
        BenchCommand::Fuse(a) => fuse::run(a),
        BenchCommand::Iozone(a) => iozone::run(a),
        BenchCommand::Parity(a) => parity::run(a),
        BenchCommand::MaCapacity(a) => ma_capacity::run(a),
        BenchCommand::SoftwareCost(a) => software_cost::run(a),
        BenchCommand::MaMount(a) => ma_mount::run(a),
        BenchCommand::MaRealtime(a) => ma_realtime::run(a),
        BenchCommand::Trace(a) => trace::run(a),
        BenchCommand::ModaTable(a) => moda_table::run(a),
        BenchCommand::ModaUtilization(a) => moda_utilization::run(a),
        BenchCommand::ModaRepeat(a) => moda_repeat::run(a),
        BenchCommand::MinvMount(a) => minv::run_mount(a),
        BenchCommand::Ttfs(a) => minv::run_ttfs(a),
        BenchCommand::MinvSynthetic(a) => minv_synthetic::run(a),
        BenchCommand::MinvSpace(a) => minv_space::run(a),
        BenchCommand::Peers(a) => peers::run(a),
        BenchCommand::MnfsUniform(a) => mnfs_uniform::run(a),
        BenchCommand::MnfsFill(a) => mnfs::run_fill(a),
        BenchCommand::MnfsDelete(a) => mnfs::run_delete(a),
        BenchCommand::MnfsMount(a) => mnfs::run_mount(a),
        BenchCommand::MnfsSmall(a) => mnfs::run_small(a),
    }
}

/// The allocation policies' parameters (MODA's classifier, DAC's regions): on mkfs, every
/// bench, and the MODA benches.
#[derive(Args, Debug, Clone, Copy)]
pub struct ClassifierArgs {
    /// MODA and page-hotcold: queues of the multi-queue classifier (the paper's m).
    #[arg(long, value_name = "M", default_value_t = AllocParams::default().queues)]
    pub moda_queues: u32,
    /// MODA and page-hotcold: a queue's lifetime, in modifications (virtual ticks).
    #[arg(long, value_name = "TICKS", default_value_t = AllocParams::default().lifetime)]
    pub moda_lifetime: u32,
    /// DAC: regions (write streams) by update frequency.
    #[arg(long, value_name = "K", default_value_t = AllocParams::default().regions)]
    pub dac_regions: u32,
    /// DAC: data updated younger than this many write requests moves up a region (older
    /// data stays; a cleaning copy moves down one).
    #[arg(long, value_name = "TICKS", default_value_t = AllocParams::default().dac_age)]
    pub dac_age: u32,
}

impl Default for ClassifierArgs {
    fn default() -> Self {
        let p = AllocParams::default();
        Self {
            moda_queues: p.queues,
            moda_lifetime: p.lifetime,
            dac_regions: p.regions,
            dac_age: p.dac_age,
        }
    }
}

impl ClassifierArgs {
    pub fn params(&self) -> AllocParams {
        AllocParams {
            queues: self.moda_queues,
            lifetime: self.moda_lifetime,
            regions: self.dac_regions,
            dac_age: self.dac_age,
        }
    }
}

/// File system options every benchmark shares.
#[derive(Args, Debug, Clone)]
pub struct FsArgs {
    /// File system profile given to mkfs.
    #[arg(long, default_value = "yaffs", value_name = "NAME")]
    pub profile: String,
    /// Cleaning policy: yaffs, greedy or cost-benefit [default: the profile's].
    #[arg(long, value_name = "POLICY", value_parser = parse_cleaner)]
    pub cleaner: Option<CleanerKind>,
    /// Page allocation policy: sequential, moda, dac, page-hotcold, per-file or hybrid [default: the
    /// profile's].
    #[arg(long, value_name = "POLICY", value_parser = parse_alloc)]
    pub alloc: Option<AllocatorKind>,
    #[command(flatten)]
    pub classifiers: ClassifierArgs,
    /// Keep a deleted file's tombstone until cleaning has erased its data, so a mount
    /// brings files whose headers damage took back in lost+found: on or off [default: the
    /// profile's: on for yaffs and hybrid; off for yaffs1, moda, dac and page-hotcold, the
    /// papers' designs as they were built; MNFS and minv need none].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub recover_lost_files: Option<bool>,
    /// A UBI per chip under the striping (MA as its paper built it: each chip maps logical
    /// erase blocks to physical ones, with its own bad-block reserve, erase counters and
    /// wear levelling): on or off [default: off; on for the MA benches: iozone, ma-mount,
    /// ma-capacity, trace].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub ubi: Option<bool>,
    /// UBI: erase-count spread at which wear levelling moves a long-lived LEB (UBI's
    /// default). An attach parameter, as Linux's CONFIG_MTD_UBI_WL_THRESHOLD: not kept on
    /// flash, so a bench's run takes it and mkfs refuses any other value.
    #[arg(long, value_name = "ERASES", default_value_t = UbiParams::default().wl_threshold)]
    pub ubi_wl_threshold: u32,
    /// UBI: PEBs per 1024 kept on every chip for bad blocks over its life (UBI's
    /// CONFIG_MTD_UBI_BEB_LIMIT).
    #[arg(long, value_name = "N", default_value_t = UbiParams::default().bad_per_1024)]
    pub ubi_bad_per_1024: u32,
    /// Parity across the chips (3 or more; over a UBI per chip): each page of the file
    /// system is a stripe of one page on every chip, P-1 of data and their XOR, the parity
    /// chip rotating per stripe, so the array loses no data when any one chip fails. An
    /// image keeps a file per chip: IMAGE holds chip 0, IMAGE.chip<k> chip k.
    #[arg(long)]
    pub parity: bool,
    /// Profiles with metadata in NVRAM (minv): the NVRAM's capacity for a bench that asks
    /// for one [default: the FeRAM preset's 12 MiB, the MiNV paper's board]. Not a flag
    /// here: mkfs has its own `--nvram-size`.
    #[arg(skip)]
    pub nvram_size: Option<u64>,
    /// Profiles with metadata in NVRAM: its technology (a preset of `nandkit presets`)
    /// [default: feram]. Not a flag here: see [`BenchNvramArgs`].
    #[arg(skip)]
    pub nvram_preset: Option<String>,
    /// YAFFS cleaning reads the tags of the blocks its searches pass, as the MODA paper
    /// says of the YAFFS it measured (`FsConfig::yaffs_search_reads`). Not a flag here:
    /// the MODA benches' `--search-reads`.
    #[arg(skip)]
    pub yaffs_search_reads: bool,
}

/// The NVRAM a bench makes for a profile that keeps its metadata there (minv).
#[derive(Args, Debug, Clone)]
pub struct BenchNvramArgs {
    /// NVRAM technology for minv's metadata (see `nandkit presets`: feram, pram).
    #[arg(long, value_name = "NAME", default_value = nandkit_nvram::DEFAULT_PRESET)]
    pub nvram_preset: String,
    /// NVRAM capacity [default: the preset's; FeRAM's 12 MiB is the MiNV paper's board].
    #[arg(long, value_parser = crate::device_args::parse_bytes, value_name = "SIZE")]
    pub nvram_size: Option<u64>,
}

impl BenchNvramArgs {
    /// `fs` with this NVRAM.
    pub fn apply(&self, fs: &FsArgs) -> FsArgs {
        FsArgs {
            nvram_size: self.nvram_size,
            nvram_preset: Some(self.nvram_preset.clone()),
            ..fs.clone()
        }
    }
}

impl Default for FsArgs {
    /// The defaults the flags have: the yaffs profile as made.
    fn default() -> Self {
        Self {
            profile: "yaffs".into(),
            cleaner: None,
            alloc: None,
            classifiers: ClassifierArgs::default(),
            recover_lost_files: None,
            ubi: None,
            ubi_wl_threshold: UbiParams::default().wl_threshold,
            ubi_bad_per_1024: UbiParams::default().bad_per_1024,
            parity: false,
            nvram_size: None,
            nvram_preset: None,
            yaffs_search_reads: false,
        }
    }
}

impl FsArgs {
    /// UBI on unless `--ubi off` was given (the MA benches).
    pub fn ubi_by_default(&mut self) {
        self.ubi.get_or_insert(true);
    }

    /// With `--parity`, refuses an array too small for a stripe.
    pub fn check_parity_chips(&self, chips: u32) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.parity || chips >= 3,
            "--parity needs 3 chips or more (--chips {chips}): a stripe is at least two data \
             pages and their parity"
        );
        Ok(())
    }

    /// The array as the file system will see it: striped over a fresh UBI per chip if
    /// `--ubi on` (or with parity if `--parity`), else over the physical blocks.
    pub fn stripe(&self, dev: FlashDevice) -> anyhow::Result<StripedDevice> {
        if self.parity {
            self.check_parity_chips(dev.geometry().chips)?;
            anyhow::ensure!(
                self.ubi != Some(false),
                "--parity runs over a UBI per chip (a replacement chip must offer the same \
                 logical blocks whatever its bad blocks): drop --ubi off"
            );
        } else if !self.ubi.unwrap_or(false) {
            return Ok(StripedFlash::new(dev));
        }
        let params = UbiParams {
            wl_threshold: self.ubi_wl_threshold,
            bad_per_1024: self.ubi_bad_per_1024,
            parity: self.parity,
        };
        anyhow::ensure!(
            params.wl_threshold > 0,
            "--ubi-wl-threshold must be at least 1"
        );
        anyhow::ensure!(
            params.bad_per_1024 < 1024,
            "--ubi-bad-per-1024 must be below 1024"
        );
        StripedFlash::format_ubi(dev, params).context("formatting UBI on every chip")
    }
}

fn parse_cleaner(text: &str) -> Result<CleanerKind, String> {
    text.parse().map_err(|e: FsError| e.to_string())
}

fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{text:?}: give on or off")),
    }
}

fn parse_alloc(text: &str) -> Result<AllocatorKind, String> {
    text.parse().map_err(|e: FsError| e.to_string())
}

impl FsArgs {
    pub fn config(&self, dev: &impl Flash) -> anyhow::Result<FsConfig> {
        let blocks = dev.geometry().total_blocks() as u32;
        let mut config = FsConfig::profile(&self.profile, blocks)
            .with_context(|| format!("--profile {}", self.profile))?;
        if let Some(kind) = self.cleaner {
            config = config.with_cleaner(kind);
        }
        if let Some(kind) = self.alloc {
            config = config.with_allocator(kind, blocks);
        }
        if let Some(on) = self.recover_lost_files {
            config = config.with_tombs_cover_data(on);
        }
        config.yaffs_search_reads = self.yaffs_search_reads;
        config
            .with_alloc_params(self.classifiers.params(), blocks)
            .context("--moda-queues, --moda-lifetime, --dac-regions, --dac-age")
    }
}

/// Timestamps for the file system: a counter, so every run is the same run.
pub fn bench_clock() -> Arc<dyn Clock> {
    Arc::new(CountingClock::new(1_700_000_000_000_000_000))
}

/// A file system's devices while it is not mounted: the flash, and the NVRAM of a profile
/// that keeps its metadata there (minv).
pub type Parts = (StripedDevice, Option<nandkit_nvram::Nvram>);

/// Mounts `parts`: from the NVRAM when there is one, else from flash.
pub fn mount_parts(parts: Parts, options: MountOptions) -> anyhow::Result<Fs> {
    let (dev, nv) = parts;
    match nv {
        Some(nv) => FileSystem::mount_with_nvram(dev, nv, options),
        None => FileSystem::mount(dev, options),
    }
    .context("mounting")
}

pub fn mount_options(force_scan: bool) -> MountOptions {
    MountOptions {
        force_scan,
        clock: bench_clock(),
        ..MountOptions::default()
    }
}

/// mkfs on a fresh RAM device.
pub fn format(
    config: nandkit_flash::DeviceConfig,
    fs_args: &FsArgs,
) -> anyhow::Result<FileSystem<StripedDevice>> {
    format_on(config, fs_args, nandkit_flash::DeviceOptions::default())
}

/// `format` on a device run as `options` say (executor, real time).
pub fn format_on(
    config: nandkit_flash::DeviceConfig,
    fs_args: &FsArgs,
    options: nandkit_flash::DeviceOptions,
) -> anyhow::Result<FileSystem<StripedDevice>> {
    let ram = FlashDevice::ram_with(config, options).context("creating the RAM device")?;
    format_with_stripe(ram, fs_args)
}

/// mkfs on `chips`, striped (over a UBI per chip if `--ubi on`) as `fs_args` say.
pub fn format_with_stripe(
    chips: FlashDevice,
    fs_args: &FsArgs,
) -> anyhow::Result<FileSystem<StripedDevice>> {
    let dev = fs_args.stripe(chips)?;
    let fs_config = fs_args.config(&dev)?;
    if fs_config.metadata == nandkit_fs::meta::MetadataKind::Nvram {
        let nv = bench_nvram(fs_args.nvram_size, fs_args.nvram_preset.as_deref())?;
        return FileSystem::format_with_nvram(dev, nv, fs_config, bench_clock())
            .context("formatting");
    }
    FileSystem::format(dev, fs_config, bench_clock()).context("formatting")
}

/// Used / usable space of the file system (statfs's chunks).
pub fn used_fraction(fs: &Fs) -> f64 {
    let s = fs.statfs();
    s.used_chunks as f64 / s.total_chunks.max(1) as f64
}

/// The NVRAM a bench gives a profile that keeps its metadata there: the paper's board's
/// 12 MB of FeRAM (or the `preset` named), or `size` bytes of it.
pub fn bench_nvram(
    size: Option<u64>,
    preset: Option<&str>,
) -> anyhow::Result<nandkit_nvram::Nvram> {
    nandkit_nvram::preset(preset.unwrap_or(nandkit_nvram::DEFAULT_PRESET))
        .and_then(|c| match size {
            Some(size) => c.with_size_bytes(size),
            None => Ok(c),
        })
        .and_then(nandkit_nvram::Nvram::new_ram)
        .context("creating the RAM NVRAM")
}

pub fn directory() -> NewObject<'static> {
    NewObject {
        kind: Kind::Dir,
        perm: 0o755,
        ..NewObject::regular_file()
    }
}

/// `len` bytes of seeded noise, so pages hold realistic (incompressible) data.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    Xoshiro256PlusPlus::seed_from_u64(seed).fill_bytes(&mut buf);
    buf
}

/// Writes `size` bytes to `ino` from offset 0 in writes of `write_size` bytes.
pub fn write_sequential(
    fs: &mut FileSystem<StripedDevice>,
    ino: Ino,
    size: u64,
    write_size: u64,
    data: &[u8],
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let mut offset = 0u64;
    while offset < size {
        let n = write_size.min(size - offset) as usize;
        let done = fs
            .write(ino, offset, &data[..n])
            .with_context(|| format!("writing {n} bytes at offset {offset}"))?;
        anyhow::ensure!(
            done == n,
            "short write at offset {offset}: {done} of {n} bytes (device full)"
        );
        offset += n as u64;
        progress.inc(n as u64);
    }
    Ok(())
}

/// Device and file system counters at one moment, to measure a phase by difference.
pub struct Snapshot {
    host: Instant,
    mark: Mark,
    dev: ChipStats,
    fs: FsStats,
    /// UBI's header programs and pages moved by wear levelling (0 without UBI).
    ubi: (u64, u64),
}

impl Snapshot {
    pub fn take(fs: &mut FileSystem<StripedDevice>) -> Snapshot {
        let dev = fs.device_mut().stats().total();
        let ubi = fs
            .device()
            .ubi_report()
            .map_or((0, 0), |r| (r.header_programs, r.wl_pages_copied));
        Snapshot {
            host: Instant::now(),
            mark: Mark::of_fs(fs),
            dev,
            fs: fs.stats().clone(),
            ubi,
        }
    }
}

/// What one measured phase cost. Every benchmark reports these.
#[derive(Serialize, Clone, Debug)]
pub struct PhaseStats {
    /// Simulated seconds (device clock) the phase took.
    pub sim_s: f64,
    /// Joules the flash (and NVRAM, if any) spent in the phase.
    pub energy_j: f64,
    /// Host (wall-clock) seconds the phase took.
    pub host_s: f64,
    /// Full page reads (data + OOB).
    pub flash_reads: u64,
    /// OOB-only reads.
    pub flash_oob_reads: u64,
    pub flash_programs: u64,
    pub flash_erases: u64,
    /// Valid pages cleaning moved (FsStats.pages_copied).
    pub pages_copied: u64,
    pub blocks_cleaned: u64,
    /// Pages of file data the file system wrote (user data, not copies).
    pub data_pages_written: u64,
    /// Object header (metadata) pages written.
    pub header_pages_written: u64,
    pub checkpoint_pages_written: u64,
    /// Block summary pages written (one per full block that does not end in a run).
    pub summary_pages_written: u64,
    /// Anchor block pages (file system record copies, checkpoint pointers) written.
    pub anchor_pages_written: u64,
    /// UBI's erase-counter and volume-identifier header pages (with `--ubi on`).
    pub ubi_header_pages_written: u64,
    /// Pages UBI's wear levelling copied.
    pub ubi_pages_moved: u64,
    /// Bytes of user data accepted by write.
    pub user_bytes: u64,
    /// user_bytes in chunks (one flash page of user data each), rounded up.
    pub user_pages: u64,
    /// flash_programs / user_pages.
    pub write_amplification: f64,
}

impl PhaseStats {
    pub fn between(start: &Snapshot, end: &Snapshot, chunk_bytes: u32) -> PhaseStats {
        let user_bytes = end.fs.user_bytes_written - start.fs.user_bytes_written;
        let user_pages = user_bytes.div_ceil(u64::from(chunk_bytes));
        let programs = end.dev.programs - start.dev.programs;
        let spent = start.mark.to(end.mark);
        PhaseStats {
            sim_s: spent.sim_s(),
            energy_j: spent.energy_j(),
            host_s: end.host.duration_since(start.host).as_secs_f64(),
            flash_reads: end.dev.page_reads - start.dev.page_reads,
            flash_oob_reads: end.dev.oob_reads - start.dev.oob_reads,
            flash_programs: programs,
            flash_erases: end.dev.erases - start.dev.erases,
            pages_copied: end.fs.pages_copied - start.fs.pages_copied,
            blocks_cleaned: end.fs.blocks_cleaned - start.fs.blocks_cleaned,
            data_pages_written: end.fs.data_pages_written - start.fs.data_pages_written,
            header_pages_written: end.fs.header_pages_written - start.fs.header_pages_written,
            checkpoint_pages_written: end.fs.checkpoint_pages_written
                - start.fs.checkpoint_pages_written,
            summary_pages_written: end.fs.summary_pages_written - start.fs.summary_pages_written,
            anchor_pages_written: end.fs.anchor_pages_written - start.fs.anchor_pages_written,
            ubi_header_pages_written: end.ubi.0 - start.ubi.0,
            ubi_pages_moved: end.ubi.1 - start.ubi.1,
            user_bytes,
            user_pages,
            write_amplification: ratio(programs as f64, user_pages as f64),
        }
    }

    pub fn print(&self, label: &str) {
        println!(
            "{label:<12}simulated {:.3} s, host {:.3} s, energy {}",
            self.sim_s,
            self.host_s,
            human_joules(self.energy_j)
        );
        println!(
            "{:<12}flash: {} reads, {} OOB reads, {} programs, {} erases",
            "", self.flash_reads, self.flash_oob_reads, self.flash_programs, self.flash_erases
        );
        println!(
            "{:<12}fs: {} data + {} header + {} summary + {} checkpoint + {} anchor pages \
             written, {} pages copied by cleaning ({} blocks)",
            "",
            self.data_pages_written,
            self.header_pages_written,
            self.summary_pages_written,
            self.checkpoint_pages_written,
            self.anchor_pages_written,
            self.pages_copied,
            self.blocks_cleaned
        );
        if self.ubi_header_pages_written + self.ubi_pages_moved > 0 {
            println!(
                "{:<12}UBI: {} header pages written, {} pages moved by wear levelling",
                "", self.ubi_header_pages_written, self.ubi_pages_moved
            );
        }
        println!(
            "{:<12}user: {} bytes = {} pages; write amplification {:.3}",
            "", self.user_bytes, self.user_pages, self.write_amplification
        );
    }
}

/// a / b, or NaN (JSON null) when b is zero.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::NAN
    } else {
        a / b
    }
}

/// One timed mount.
#[derive(Serialize, Clone, Debug)]
pub struct MountTiming {
    /// How the mount actually found its state.
    pub method: MountMethod,
    pub host_ms: f64,
    /// The file system's mount (the MA paper's: superblock, master node, journal).
    pub sim_ms: f64,
    /// UBI's attach before it (0 without UBI): the scan of every PEB's two header pages,
    /// which Linux does at `ubiattach`, before any mount.
    pub attach_sim_ms: f64,
    pub energy_j: f64,
}

/// Mounts `dev` (attaching its UBI again first, as a boot would) and times it (host and
/// simulated) and its energy.
pub fn timed_mount(
    dev: StripedDevice,
    force_scan: bool,
) -> anyhow::Result<(FileSystem<StripedDevice>, MountTiming)> {
    let ubi = dev.ubi().map(|u| u.attach_options());
    timed_mount_chips(dev.into_inner(), ubi, force_scan)
}

/// `timed_mount` from the bare chips (whose UBI's maps in RAM are gone): attach UBI with
/// `ubi`'s options if given, then mount.
pub fn timed_mount_chips(
    chips: FlashDevice,
    ubi: Option<nandkit_flash::ubi::AttachOptions>,
    force_scan: bool,
) -> anyhow::Result<(FileSystem<StripedDevice>, MountTiming)> {
    let options = mount_options(force_scan);
    let before_attach = chips.now_ns();
    let mut dev = if let Some(options) = ubi {
        StripedFlash::attach_ubi_with(chips, false, options).context("attaching UBI")?
    } else {
        StripedFlash::new(chips)
    };
    let attach_ns = dev.now_ns() - before_attach;
    let start = Mark::of_device(&mut dev);
    let t = Instant::now();
    // The mount starts a worker per chip (an array): the host's cost of that first.
    dev.charge_mount();
    let fs = FileSystem::mount(dev, options).context("mounting")?;
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    let spent = start.to_fs(&fs);
    let method = fs.mount_method();
    Ok((
        fs,
        MountTiming {
            method,
            host_ms,
            sim_ms: spent.sim_ms(),
            attach_sim_ms: attach_ns as f64 / 1e6,
            energy_j: spent.energy_j(),
        },
    ))
}

/// Joules for a table, in J, mJ or uJ: a mount spends microjoules, a long run joules.
pub fn human_joules(j: f64) -> String {
    let (value, unit) = if j == 0.0 || j.abs() >= 1.0 {
        (j, "J")
    } else if j.abs() >= 1e-3 {
        (j * 1e3, "mJ")
    } else {
        (j * 1e6, "uJ")
    };
    format!("{value:.3} {unit}")
}

/// Device facts every report starts with.
#[derive(Serialize, Clone, Debug)]
pub struct DeviceInfo {
    pub geometry: String,
    pub chips: u32,
    pub device_bytes: u64,
    pub page_size_bytes: u32,
    pub pages_per_block: u32,
    pub blocks: u64,
    /// Seed of the device's random draws (factory bad blocks, bit errors).
    pub device_seed: u64,
}

impl DeviceInfo {
    pub fn of(config: &nandkit_flash::DeviceConfig) -> DeviceInfo {
        let g = config.geometry;
        DeviceInfo {
            geometry: config.name.clone(),
            chips: g.chips,
            device_bytes: g.total_bytes(),
            page_size_bytes: g.page_size_bytes,
            pages_per_block: g.pages_per_block,
            blocks: g.total_blocks(),
            device_seed: config.seed,
        }
    }

    pub fn print(&self) {
        println!(
            "device      {} x{} chip(s), {} MiB, {} B pages, {} pages/block, {} blocks, seed {:#x}",
            self.geometry,
            self.chips,
            self.device_bytes >> 20,
            self.page_size_bytes,
            self.pages_per_block,
            self.blocks,
            self.device_seed
        );
    }
}

/// A progress bar on stderr that appears only once a phase has run for a second, and never
/// when stderr is not a terminal or the output is JSON.
pub struct Progress {
    bar: ProgressBar,
    enabled: bool,
    shown: bool,
    start: Instant,
}

impl Progress {
    pub fn bytes(total: u64, what: &'static str, quiet: bool) -> Progress {
        Progress::new(
            total,
            what,
            quiet,
            "{msg:>16} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
    }

    pub fn items(total: u64, what: &'static str, quiet: bool) -> Progress {
        Progress::new(
            total,
            what,
            quiet,
            "{msg:>16} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({eta})",
        )
    }

    fn new(total: u64, what: &'static str, quiet: bool, template: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what);
        Progress {
            bar,
            enabled: !quiet && std::io::stderr().is_terminal(),
            shown: false,
            start: Instant::now(),
        }
    }

    pub fn inc(&mut self, n: u64) {
        self.bar.inc(n);
        if self.enabled && !self.shown && self.start.elapsed() >= Duration::from_secs(1) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
    }

    pub fn finish(self) {
        if self.shown {
            self.bar.finish_and_clear();
        }
    }
}

pub fn print_json<T: Serialize>(report: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(report)?);
    Ok(())
}

/// The JSON of a bench that runs one row, or a sweep of rows: the array for a sweep, else
/// the one row as an object.
pub fn print_rows_json<T: Serialize>(rows: &[T], sweep: bool) -> anyhow::Result<()> {
    match rows {
        [row] if !sweep => print_json(row),
        _ => print_json(&rows),
    }
}

/// Every block address of a device, chip after chip (the file system's block order).
pub fn block_addrs(g: nandkit_flash::Geometry) -> impl Iterator<Item = nandkit_flash::BlockAddr> {
    (0..g.chips)
        .flat_map(move |c| (0..g.blocks_per_chip).map(move |b| nandkit_flash::BlockAddr::new(c, b)))
}
