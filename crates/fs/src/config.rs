//! File system configuration, chosen at mkfs and recorded on flash in the super record.

use serde::{Deserialize, Serialize};

use crate::error::{FsError, Result};

/// Which page allocation policy (DESIGN axis 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocatorKind {
    /// YAFFS: one write frontier for everything, block after block.
    Sequential,
    /// MODA: system data apart from user data, user data by its file's modification
    /// class (multi-queue over files): hot, cold, unclassified.
    Moda,
    /// MODA's first level alone: system data apart from user data, no classifier (for
    /// measuring what the classifier adds).
    ModaSplit,
    /// DAC (Chiang et al.): k regions by update frequency, per page.
    Dac,
    /// MODA's classes at page (chunk) granularity instead of file granularity.
    PageHotcold,
    /// MNFS: each file's data in erase blocks of its own.
    PerFile,
    /// Small and rewritten files in the shared log, large ones in blocks of their own.
    Hybrid,
}

impl AllocatorKind {
    pub const NAMES: &'static [&'static str] = &[
        "sequential",
        "moda",
        "moda-split",
        "dac",
        "page-hotcold",
        "per-file",
        "hybrid",
    ];

    pub fn name(self) -> &'static str {
        match self {
            AllocatorKind::Sequential => "sequential",
            AllocatorKind::Moda => "moda",
            AllocatorKind::ModaSplit => "moda-split",
            AllocatorKind::Dac => "dac",
            AllocatorKind::PageHotcold => "page-hotcold",
            AllocatorKind::PerFile => "per-file",
            AllocatorKind::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for AllocatorKind {
    type Err = FsError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sequential" => Ok(AllocatorKind::Sequential),
            "moda" => Ok(AllocatorKind::Moda),
            "moda-split" => Ok(AllocatorKind::ModaSplit),
            "dac" => Ok(AllocatorKind::Dac),
            "page-hotcold" => Ok(AllocatorKind::PageHotcold),
            "per-file" => Ok(AllocatorKind::PerFile),
            "hybrid" => Ok(AllocatorKind::Hybrid),
            _ => Err(FsError::Invalid(
                "allocator must be sequential, moda, moda-split, dac, page-hotcold, per-file or \
                 hybrid",
            )),
        }
    }
}

/// The allocation policies' parameters (unused by `sequential`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AllocParams {
    /// MODA / page-hotcold: queues of the multi-queue classifier (m; the paper's 2).
    pub queues: u32,
    /// MODA / page-hotcold: a queue's lifetime in virtual ticks, one per write request
    /// (the paper's 100).
    pub lifetime: u32,
    /// DAC: regions (k; Chiang et al. and this issue: 4).
    pub regions: u32,
    /// DAC: data updated younger than this many virtual ticks (write requests) is
    /// promoted a region (default: MODA's lifetime, 100).
    pub dac_age: u32,
}

impl Default for AllocParams {
    fn default() -> Self {
        Self {
            queues: 2,
            lifetime: 100,
            regions: 4,
            dac_age: 100,
        }
    }
}

impl AllocParams {
    pub fn validate(&self) -> Result<()> {
        if !(1..=8).contains(&self.queues) {
            return Err(FsError::Invalid("MODA queues must be 1..=8"));
        }
        if self.lifetime == 0 {
            return Err(FsError::Invalid("MODA lifetime must be at least 1 tick"));
        }
        if !(2..=8).contains(&self.regions) {
            return Err(FsError::Invalid("DAC regions must be 2..=8"));
        }
        if self.dac_age == 0 {
            return Err(FsError::Invalid(
                "DAC's age threshold must be at least 1 tick",
            ));
        }
        Ok(())
    }
}

/// Which block cleaning policy (DESIGN axis 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CleanerKind {
    /// YAFFS normal/aggressive cleaning as the MODA paper describes it.
    Yaffs,
    /// The block with the fewest valid pages, over the whole device.
    Greedy,
    /// LFS cost-benefit: maximise (1 - u) * age / (1 + u).
    CostBenefit,
}

impl std::str::FromStr for CleanerKind {
    type Err = FsError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "yaffs" => Ok(CleanerKind::Yaffs),
            "greedy" => Ok(CleanerKind::Greedy),
            "cost-benefit" => Ok(CleanerKind::CostBenefit),
            _ => Err(FsError::Invalid(
                "cleaner must be yaffs, greedy or cost-benefit",
            )),
        }
    }
}

/// Everything mkfs decides. Every field is stored on flash, so a mount uses exactly the
/// policies the image was made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsConfig {
    /// Profile name (`yaffs` is the baseline); names the combination of the four axes.
    pub profile: String,
    /// Where object headers live (axis 1).
    #[serde(default)]
    pub metadata: crate::meta::MetadataKind,
    /// How file chunks map to pages (axis 2).
    #[serde(default)]
    pub mapping: crate::mapping::MappingKind,
    pub allocator: AllocatorKind,
    /// The allocation policy's parameters (images made before they existed: defaults).
    #[serde(default)]
    pub alloc_params: AllocParams,
    pub cleaner: CleanerKind,
    /// Erased blocks kept back from user data so cleaning can always make progress.
    pub reserve_blocks: u32,
    /// YAFFS cleaning: blocks examined per victim search (YAFFS default 200).
    pub yaffs_window_blocks: u32,
    /// YAFFS normal mode reclaims a block only if it has fewer valid pages than this (3).
    pub yaffs_normal_max_valid: u32,
    /// YAFFS switches to aggressive mode below this many erased blocks (6).
    pub yaffs_aggressive_below: u32,
    /// YAFFS cleaning without block status in RAM, as the MODA paper says of the YAFFS it
    /// measured (sec. 6.3.2: "it needs to read Flash memory to detect the blocks to be
    /// cleaned and how many valid pages the blocks have"): every block a victim search
    /// passes costs an OOB read of each of its programmed pages (one for an erased
    /// block). Off in every profile: the YAFFS sources of the time keep each block's
    /// pages-in-use count in RAM (`yaffs_FindDirtiestBlock`). The MODA benches turn it on
    /// (`--search-reads`) to measure what the paper's account would cost.
    #[serde(default)]
    pub yaffs_search_reads: bool,
    /// Write a checkpoint at clean unmount so the next mount skips the scan.
    pub checkpoint: bool,
    /// Erase the blocks a delete leaves without a live page at once (MNFS), rather than
    /// leaving them to cleaning (images made before this existed: off; NVRAM metadata
    /// always erases).
    #[serde(default)]
    pub erase_on_delete: bool,
    /// What RAM keeps of each block (axis 5): MNFS keeps its iBAT, which places file data
    /// by block and mounts from one spare area per block (images made before: the page
    /// table).
    #[serde(default)]
    pub records: crate::blocks::RecordsKind,
    /// A deleted object's tombstone stays on flash until every data page of it is erased,
    /// so a scan can bring data pages whose header was lost back in lost+found (off: such
    /// pages are only reported; images made before this existed: off).
    #[serde(default)]
    pub tombs_cover_data: bool,
}

impl FsConfig {
    /// The configuration of a named profile on a device of `blocks` erase blocks.
    pub fn profile(name: &str, blocks: u32) -> Result<FsConfig> {
        // The MODA paper's schemes are YAFFS with only the page allocation changed.
        let allocator =
            match name {
                "yaffs" => AllocatorKind::Sequential,
                // YAFFS as the 2006-07 papers measured it: YAFFS1 on small-page chips.
                "yaffs1" => AllocatorKind::Sequential,
                "moda" => AllocatorKind::Moda,
                "dac" => AllocatorKind::Dac,
                "page-hotcold" => AllocatorKind::PageHotcold,
                // MiNV is YAFFS with every piece of metadata moved to NVRAM.
                "minv" => AllocatorKind::Sequential,
                // MNFS: file data in blocks of its own, erased when the file is deleted.
                "mnfs" => AllocatorKind::PerFile,
                // MNFS for large files only; small and rewritten ones stay in the log.
                "hybrid" => AllocatorKind::Hybrid,
                _ => return Err(FsError::Invalid(
                    "unknown profile (known: yaffs, yaffs1, moda, dac, page-hotcold, minv, mnfs, hybrid)",
                )),
            };
        let in_nvram = name == "minv";
        let yaffs1 = name == "yaffs1";
        let config = FsConfig {
            profile: name.into(),
            metadata: if in_nvram {
                crate::meta::MetadataKind::Nvram
            } else if yaffs1 {
                crate::meta::MetadataKind::Yaffs1Log
            } else {
                crate::meta::MetadataKind::FlashLog
            },
            // MNFS maps a file by the blocks it owns; hybrid's small files share the log's
            // blocks, so it keeps the page map.
            mapping: if name == "mnfs" {
                crate::mapping::MappingKind::BlockMapped
            } else if yaffs1 {
                crate::mapping::MappingKind::Tnode
            } else {
                crate::mapping::MappingKind::PageMapped
            },
            allocator: AllocatorKind::Sequential,
            alloc_params: AllocParams::default(),
            cleaner: CleanerKind::Yaffs,
            reserve_blocks: default_reserve(blocks),
            yaffs_window_blocks: 200,
            yaffs_normal_max_valid: 3,
            yaffs_aggressive_below: 6,
            yaffs_search_reads: false,
            // Nothing to checkpoint when the metadata is in NVRAM; YAFFS1 had none; MNFS
            // keeps no central allocation structure on flash (its iBAT is rebuilt at
            // every mount).
            checkpoint: !in_nvram && !yaffs1 && name != "mnfs",
            erase_on_delete: name == "mnfs" || name == "hybrid",
            records: if name == "mnfs" {
                crate::blocks::RecordsKind::Ibat
            } else {
                crate::blocks::RecordsKind::PageTable
            },
            // Our own designs. The papers' (YAFFS1, MODA's schemes) are left as they were
            // built: keeping tombstones moves their cleaning costs (PostMark on moda: 7.86
            // to 9.58 s), and `with_tombs_cover_data` turns it on. MNFS's mount reads one
            // spare area per block, not every data page's owner; NVRAM metadata loses no
            // header to a flash block.
            tombs_cover_data: name == "yaffs" || name == "hybrid",
        };
        let config = config.with_allocator(allocator, blocks);
        Ok(if name == "mnfs" || name == "hybrid" {
            // MNFS erases a file's blocks when it is deleted and has no cleaning to run
            // while writing: cleaning only when erased blocks run out (greedy), never the
            // opportunistic pass YAFFS makes at every new block.
            config.with_cleaner(CleanerKind::Greedy)
        } else {
            config
        })
    }

    /// This configuration with deleted objects' tombstones kept until their data is erased
    /// (so a scan restores files whose headers damage took) or not. Only where a mount
    /// reads every data page's owner: MNFS and NVRAM metadata keep none either way.
    pub fn with_tombs_cover_data(mut self, on: bool) -> Self {
        let page_scan = self.metadata != crate::meta::MetadataKind::Nvram
            && self.records != crate::blocks::RecordsKind::Ibat;
        self.tombs_cover_data = on && page_scan;
        self
    }

    /// This configuration with another page allocation policy. Each extra write stream
    /// adds a block to the cleaning reserve: cleaning one victim may copy its pages into
    /// every stream, each of which may need a fresh block before the victim's is freed.
    pub fn with_allocator(mut self, allocator: AllocatorKind, blocks: u32) -> Self {
        self.allocator = allocator;
        let extra = crate::alloc::stream_count(allocator, &self.alloc_params) as u32 - 1;
        self.reserve_blocks = default_reserve(blocks) + extra;
        self
    }

    /// This configuration with other allocation parameters (the reserve follows the
    /// number of streams they give).
    pub fn with_alloc_params(mut self, params: AllocParams, blocks: u32) -> Result<Self> {
        params.validate()?;
        self.alloc_params = params;
        let allocator = self.allocator;
        Ok(self.with_allocator(allocator, blocks))
    }

    pub fn with_cleaner(mut self, cleaner: CleanerKind) -> Self {
        self.cleaner = cleaner;
        self
    }
}

/// Two blocks let cleaning always finish a victim; a little more keeps it off the
/// critical path on big devices.
fn default_reserve(blocks: u32) -> u32 {
    (blocks / 100).clamp(3, 32)
}

/// What each profile is, in a line (for `nandkit presets`, `info` and `mkfs`).
pub fn profile_summary(name: &str) -> &'static str {
    match name {
        "yaffs" => "modern YAFFS2: page-mapped log, block summaries, checkpoint at unmount",
        "yaffs1" => {
            "YAFFS as the 2006-07 papers measured it: small pages only, tags in every spare \
             area, stale pages marked deleted, a mount that reads every page's tags, no \
             checkpoint, tnode page maps"
        }
        "moda" => "MODA: yaffs with modification-aware allocation (system/user, hot/cold)",
        "dac" => "yaffs with DAC's allocation: regions by update frequency",
        "page-hotcold" => "yaffs with MODA's classes at page granularity",
        "minv" => "MiNV: all metadata in NVRAM, only file data on flash",
        "mnfs" => "MNFS: file data placed by block (iBAT), erased on delete; mounts from one spare area per block",
        "hybrid" => "MNFS for large files, the log for small and rewritten ones",
        _ => "",
    }
}

/// Profile names mkfs accepts.
pub const PROFILES: &[&str] = &[
    "yaffs",
    "yaffs1",
    "moda",
    "dac",
    "page-hotcold",
    "minv",
    "mnfs",
    "hybrid",
];
