//! File system configuration, chosen at mkfs and recorded on flash in the super record.

use serde::{Deserialize, Serialize};

use crate::error::{FsError, Result};

/// Which page allocation policy (DESIGN axis 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllocatorKind {
    /// YAFFS: one write frontier for everything, block after block.
    Sequential,
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
    pub cleaner: CleanerKind,
    /// Erased blocks kept back from user data so cleaning can always make progress.
    pub reserve_blocks: u32,
    /// YAFFS cleaning: blocks examined per victim search (YAFFS default 200).
    pub yaffs_window_blocks: u32,
    /// YAFFS normal mode reclaims a block only if it has fewer valid pages than this (3).
    pub yaffs_normal_max_valid: u32,
    /// YAFFS switches to aggressive mode below this many erased blocks (6).
    pub yaffs_aggressive_below: u32,
    /// Write a checkpoint at clean unmount so the next mount skips the scan.
    pub checkpoint: bool,
}

impl FsConfig {
    /// The configuration of a named profile on a device of `blocks` erase blocks.
    pub fn profile(name: &str, blocks: u32) -> Result<FsConfig> {
        match name {
            "yaffs" => Ok(FsConfig {
                profile: "yaffs".into(),
                metadata: crate::meta::MetadataKind::FlashLog,
                mapping: crate::mapping::MappingKind::PageMapped,
                allocator: AllocatorKind::Sequential,
                cleaner: CleanerKind::Yaffs,
                reserve_blocks: default_reserve(blocks),
                yaffs_window_blocks: 200,
                yaffs_normal_max_valid: 3,
                yaffs_aggressive_below: 6,
                checkpoint: true,
            }),
            _ => Err(FsError::Invalid("unknown profile (known: yaffs)")),
        }
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

/// Profile names mkfs accepts.
pub const PROFILES: &[&str] = &["yaffs"];
