//! The NVRAM image of a `minv` file system (its metadata; the flash image holds file data
//! only): the flags that name it and opening it with errors that say what to do.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use nandkit_nvram::Nvram;

/// `--nvram FILE` for commands that use an existing image (mount, fsck, info, dump).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NvramArgs {
    /// NVRAM image holding the metadata of a `minv` file system (as mkfs made it).
    #[arg(long, value_name = "FILE")]
    pub nvram: Option<PathBuf>,
}

/// mkfs's NVRAM flags.
#[derive(clap::Args, Debug, Clone)]
pub struct NewNvramArgs {
    /// NVRAM image for the `minv` profile's metadata: created (replaced with --force).
    #[arg(long, value_name = "FILE")]
    pub nvram: Option<PathBuf>,
    /// NVRAM technology for a new NVRAM image (see `nandkit presets`: feram, pram).
    #[arg(long, value_name = "NAME", default_value = nandkit_nvram::DEFAULT_PRESET)]
    pub nvram_preset: String,
    /// Size of a new NVRAM image instead of the preset's, e.g. 4MiB.
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    pub nvram_size: Option<u64>,
}

impl Default for NewNvramArgs {
    fn default() -> Self {
        Self {
            nvram: None,
            nvram_preset: nandkit_nvram::DEFAULT_PRESET.into(),
            nvram_size: None,
        }
    }
}

impl NewNvramArgs {
    /// The new NVRAM image's configuration (preset, then size), at most what a minv file
    /// system can use.
    fn config(&self) -> anyhow::Result<nandkit_nvram::NvramConfig> {
        let mut config = nandkit_nvram::preset(&self.nvram_preset)?;
        if let Some(size) = self.nvram_size {
            config = config.with_size_bytes(size)?;
        }
        let size = config.size_bytes;
        let most = nandkit_fs::meta::minv::MAX_NVRAM_BYTES;
        if size > most {
            bail!(
                "an NVRAM of {} is more than a minv file system can use: at most {} (a \
                 mount reads the NVRAM manager's allocation bitmap whole into RAM, a bit per \
                 32 bytes, and mkfs writes it, so both grow with the NVRAM's size; {} holds \
                 the metadata of millions of files)",
                crate::presets_cmd::human_bytes(size),
                crate::presets_cmd::human_bytes(most),
                crate::presets_cmd::human_bytes(most)
            );
        }
        Ok(config)
    }

    /// Refuses, before any file is touched, flags that cannot make an NVRAM image for a
    /// flash device of geometry `g` (a bad preset, or too small to format).
    pub fn check(&self, g: nandkit_flash::Geometry) -> anyhow::Result<()> {
        if self.nvram.is_none() {
            return Ok(());
        }
        // The file system sees the chips as one striped device, and counts its blocks.
        let layout = nandkit_fs::layout::Layout::new(g.striped())?;
        let blocks = layout.blocks;
        let size = self.config()?.size_bytes;
        let least = nandkit_fs::meta::minv::min_nvram_bytes(blocks, layout.pages_per_block);
        if size < least {
            bail!(
                "an NVRAM of {size} bytes cannot hold a minv file system on this device: its \
                 {blocks} erase blocks need at least {least} bytes of NVRAM before the first \
                 file (give a larger --nvram-size)"
            );
        }
        Ok(())
    }

    /// Creates the NVRAM image (refusing to replace one unless `force`).
    pub fn create(&self, force: bool) -> anyhow::Result<Option<Nvram>> {
        let Some(path) = &self.nvram else {
            return Ok(None);
        };
        let config = self.config()?;
        if path.exists() && !force {
            bail!(
                "{}: an NVRAM image exists already (--force replaces it, losing the metadata \
                 it holds)",
                path.display()
            );
        }
        let nv = Nvram::create_file(path, config, force)
            .with_context(|| format!("creating NVRAM image {}", path.display()))?;
        Ok(Some(nv))
    }
}

/// Opens an NVRAM image with errors that name it.
pub fn open(path: &Path) -> anyhow::Result<Nvram> {
    if !path.exists() {
        bail!(
            "{}: no such NVRAM image (mkfs --profile minv --nvram {} IMAGE makes one)",
            path.display(),
            path.display()
        );
    }
    Nvram::open_file(path).with_context(|| format!("opening NVRAM image {}", path.display()))
}
