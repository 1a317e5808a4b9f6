//! `nandkit rebuild`: a new chip in place of a failed one of an array with parity, and
//! every piece it should hold written back, so the array survives the next failure.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use nandkit_flash::backend::file;
use nandkit_flash::{DeviceOptions, Flash, StripedFlash};
use serde::Serialize;

use crate::bench::Progress;
use crate::image::{self, Access};

#[derive(Args)]
pub struct RebuildArgs {
    /// Flash image of an array made with `mkfs --parity`.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// The chip to rebuild (0-based). If its image file is gone or of the wrong size (a
    /// rebuild killed while it made the file), a new erased chip takes its place; if it is
    /// there (a rebuild cut short, a blank or an old chip put in), the rebuild goes on from
    /// what it holds. The array trusts the chip again only once the rebuild completes.
    #[arg(long, value_name = "K")]
    chip: u32,
    /// Put a new erased chip in place of chip K even if its image file is there.
    #[arg(long)]
    new_chip: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    image: PathBuf,
    /// A new erased chip was put in place before the rebuild.
    new_chip: bool,
    /// The array's membership generation, the chip a member again at it.
    generation: u64,
    #[serde(flatten)]
    rebuild: nandkit_flash::striped::rebuild::RebuildReport,
    host_s: f64,
}

pub fn run(args: RebuildArgs) -> anyhow::Result<()> {
    let img = &args.image;
    image::require_exists(img)?;
    let _lock = image::lock(img, Access::Write)?;
    let config = file::read_config(img).with_context(|| format!("reading {}", img.display()))?;
    if !config.chip_files {
        bail!(
            "{}: not an array with parity (made without mkfs --parity): there is nothing to \
             rebuild a chip from",
            img.display()
        );
    }
    let chips = config.geometry.chips;
    if args.chip >= chips {
        bail!(
            "--chip {}: the array has chips 0 to {}",
            args.chip,
            chips - 1
        );
    }
    let start = Instant::now();
    let mut dev = image::open_device(img, DeviceOptions::default())?;
    let failed = dev.failed_chips();
    if let Some((other, why)) = failed.iter().find(|(c, _)| *c != args.chip) {
        bail!(
            "chip {other} has failed as well ({why}): a rebuild of chip {} needs every other \
             chip, so the data on both is lost to parity",
            args.chip
        );
    }
    let new_chip = args.new_chip || failed.iter().any(|(c, _)| *c == args.chip);
    // Another chip the array does not trust: say so before anything is replaced (attached
    // read-only, nothing is written).
    let excluded = StripedFlash::open(dev, true)
        .with_context(|| format!("attaching the chips of {}", img.display()))?
        .excluded_chips();
    if let Some((other, why)) = excluded.iter().find(|(c, _)| *c != args.chip) {
        bail!(
            "chip {other} is not a complete member of the array either ({why}): a rebuild of \
             chip {} needs every other chip, so the data on both is lost to parity",
            args.chip
        );
    }
    let mut dev = image::open_device(img, DeviceOptions::default())?;
    if new_chip {
        dev.replace_chip(args.chip)
            .with_context(|| format!("putting a new chip {} in place", args.chip))?;
        if !args.json {
            eprintln!(
                "nandkit rebuild: chip {}: a new erased chip in {}",
                args.chip,
                file::chip_path(img, args.chip).display()
            );
        }
    }
    let mut array = StripedFlash::open(dev, false)
        .with_context(|| format!("attaching the chips of {}", img.display()))?;
    if !array.has_parity() {
        bail!("{}: its chips carry no parity layout", img.display());
    }
    if let Some((_, why)) = array.excluded_chips().iter().find(|(c, _)| *c == args.chip) {
        if !args.json && !new_chip {
            eprintln!(
                "nandkit rebuild: chip {} is not a complete member of the array ({why}): \
                 rebuilding it from what it holds",
                args.chip
            );
        }
    }
    let lebs = array.geometry().blocks_per_chip;
    let mut progress = Progress::items(u64::from(lebs), "rebuilding", args.json);
    let mut last = 0;
    let rebuild = array
        .rebuild_chip(args.chip, &mut |done, _| {
            progress.inc(u64::from(done - last));
            last = done;
        })
        .with_context(|| {
            format!(
                "rebuilding chip {} of {} (run the same command again to go on)",
                args.chip,
                img.display()
            )
        })?;
    progress.finish();
    array
        .sync()
        .with_context(|| format!("syncing {}", img.display()))?;
    let generation = array.membership_generation().unwrap_or(0);
    drop(array);
    let report = Report {
        image: img.clone(),
        new_chip,
        generation,
        rebuild,
        host_s: start.elapsed().as_secs_f64(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let r = &report.rebuild;
        println!(
            "nandkit rebuild: chip {} of {} rebuilt: a member of the array again (membership \
             generation {})",
            r.chip,
            img.display(),
            report.generation
        );
        println!(
            "  LEBs       {} written, {} already whole, {} unmapped, of {}",
            r.lebs_written, r.lebs_kept, r.lebs_unmapped, r.lebs
        );
        println!(
            "  pages      {} programmed ({} fillers); {} rows whose piece no stripe could give",
            r.pages_written, r.fillers, r.rows_unrecoverable
        );
        println!(
            "  time       {:.1} s simulated, {:.1} s host",
            r.sim_ns as f64 / 1e9,
            report.host_s
        );
    }
    Ok(())
}
