//! `nandkit ubi`: raw UBI images in and out. `import` puts an image that `ubinize` made
//! or `nanddump` read off a board onto a new nandkit image, as `ubiformat -f` flashes it;
//! `export` writes a chip back out as a raw image (what `nandwrite` would flash, and what
//! `ubireader` reads).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use nandkit_flash::ubi::raw::{self, RawKind};
use nandkit_flash::ubi::{AttachOptions, Ubi};
use nandkit_flash::{DeviceOptions, Flash, FlashDevice};

use crate::bench::Progress;
use crate::image::{self, Access};

#[derive(Args)]
pub struct UbiArgs {
    #[command(subcommand)]
    command: UbiCommand,
}

#[derive(Subcommand)]
enum UbiCommand {
    /// Make a nandkit image from a raw UBI image (ubinize's output, or a nanddump with or
    /// without OOB), as `ubiformat -f` flashes it.
    #[command(
        after_help = "The raw image's PEBs go, in order, onto the chip's good blocks; \
        every block past them gets an EC header with the image's mean erase count. The \
        geometry's block must be the image's PEB (ubinize -p) and its page the image's \
        minimum I/O unit (ubinize -m).\n\nExamples:\n  \
        ubinize -o rootfs.ubi -p 128KiB -m 2048 -s 2048 ubi.cfg\n  \
        nandkit ubi import rootfs.ubi --geometry mlc-1g --device-size 64MiB board.img\n  \
        nanddump --oob /dev/mtd3 > mtd3.dump; nandkit ubi import mtd3.dump -g slc-1g board.img"
    )]
    Import(ImportArgs),
    /// Write a chip of an image out as a raw UBI image (every good block in order).
    #[command(after_help = "Examples:\n  \
        nandkit ubi export board.img board.ubi\n  \
        ubireader_display_info board.ubi\n  \
        nandkit ubi export board.img board.dump --oob")]
    Export(ExportArgs),
    /// Convert an image made with nandkit's own UBI headers (nandkit up to 2026-12-07) to
    /// Linux's UBI format, keeping every LEB and so the file system on it.
    #[command(
        after_help = "The conversion works on a copy of the image's files and puts \
        it in place only when it is done, so a cut leaves the image as it was. The volume \
        keeps its LEBs; the layout volume's two PEBs per chip come out of the bad-block \
        reserve.\n\nExample:\n  nandkit ubi convert disk.img"
    )]
    Convert(ConvertArgs),
}

#[derive(Args)]
struct ConvertArgs {
    /// The nandkit image (with --parity, its chip files are converted too).
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
}

#[derive(Args)]
struct ImportArgs {
    /// The raw UBI image.
    #[arg(value_name = "RAW")]
    raw: PathBuf,
    /// The nandkit image to make (its geometry goes in IMAGE.meta).
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Device preset of the chip the image goes on (see `nandkit presets`).
    #[arg(long, short = 'g', value_name = "NAME")]
    geometry: String,
    /// The chip's capacity instead of the preset's, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    device_size: Option<u64>,
    /// Seed for the device's random draws (factory bad blocks, bit errors).
    #[arg(long)]
    seed: Option<u64>,
    /// Replace IMAGE if it exists.
    #[arg(long, short = 'f')]
    force: bool,
}

#[derive(Args)]
struct ExportArgs {
    /// The nandkit image.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// The raw image to write.
    #[arg(value_name = "RAW")]
    raw: PathBuf,
    /// Each page's OOB after its data, as `nanddump --oob` writes it. A nandkit file
    /// system keeps its tags in the OOB (UBI itself does not use it): to move one to
    /// another image, export with --oob.
    #[arg(long)]
    oob: bool,
    /// The chip to write out (an array keeps a UBI per chip).
    #[arg(long, value_name = "K", default_value_t = 0)]
    chip: u32,
    /// Replace RAW if it exists.
    #[arg(long, short = 'f')]
    force: bool,
}

pub fn run(args: UbiArgs) -> anyhow::Result<()> {
    match args.command {
        UbiCommand::Import(a) => import(&a),
        UbiCommand::Export(a) => export(&a),
        UbiCommand::Convert(a) => convert(&a),
    }
}

fn import(args: &ImportArgs) -> anyhow::Result<()> {
    let config = crate::device_args::DeviceArgs {
        geometry: args.geometry.clone(),
        chips: 1,
        device_size: args.device_size,
        seed: args.seed,
    }
    .config()?;
    let g = config.geometry;
    let file = File::open(&args.raw).with_context(|| format!("opening {}", args.raw.display()))?;
    let len = file.metadata()?.len();
    let mut head = vec![0u8; (2 * g.block_bytes_with(true)).min(len) as usize];
    (&file)
        .read_exact(&mut head)
        .with_context(|| format!("reading {}", args.raw.display()))?;
    let kind = raw::detect(
        &head,
        len,
        g.page_size_bytes,
        g.oob_size_bytes,
        g.pages_per_block,
    )
    .map_err(|why| {
        anyhow::anyhow!(
            "{} is not a raw UBI image for {}: {why}",
            args.raw.display(),
            args.geometry
        )
    })?;
    if image::image_present(&args.image) && !args.force {
        bail!(
            "{} exists (--force replaces it, losing its contents)",
            args.image.display()
        );
    }
    let dev = FlashDevice::create_image(&args.image, config, args.force, DeviceOptions::default())
        .with_context(|| format!("creating {}", args.image.display()))?;
    let _lock = image::lock(&args.image, Access::Write)?;
    match import_onto(dev, &file, kind, args) {
        Ok(()) => Ok(()),
        Err(e) => {
            // Nothing half-made is left for a later command to trust.
            for p in [
                args.image.clone(),
                nandkit_flash::backend::file::sidecar_path(&args.image),
            ] {
                let _ = std::fs::remove_file(p);
            }
            Err(e)
        }
    }
}

fn import_onto(
    mut dev: FlashDevice,
    file: &File,
    kind: RawKind,
    args: &ImportArgs,
) -> anyhow::Result<()> {
    let g = dev.geometry();
    let mut reader = BufReader::new(file);
    std::io::Seek::rewind(&mut reader)?;
    let total = file.metadata()?.len() / g.block_bytes_with(kind == RawKind::WithOob);
    let mut bar = Progress::items(total, "importing PEBs", false);
    let done = raw::import(&mut dev, 0, reader, kind, |_| bar.inc(1))?;
    bar.finish();
    dev.sync()?;
    let ubi = Ubi::attach(&mut dev, true, AttachOptions::default())
        .context("the imported image does not attach")?;
    println!(
        "nandkit ubi import: {} -> {} ({}, {} blocks of {} KiB{})",
        args.raw.display(),
        args.image.display(),
        args.geometry,
        g.blocks_per_chip,
        g.block_bytes() / 1024,
        if kind == RawKind::WithOob {
            "; of the dump's OOB the free bytes are kept, the ECC is this chip's own"
        } else {
            ""
        }
    );
    println!(
        "  {} PEBs of the image written ({} blank), {} more blocks formatted, {} bad blocks skipped",
        done.image_pebs, done.blank, done.formatted, done.skipped_bad
    );
    print_volumes(&ubi);
    Ok(())
}

/// The UBI format and volumes, as `import` and `info` show them.
pub fn print_volumes(ubi: &Ubi) {
    let l = ubi.layout();
    println!(
        "  UBI (Linux format): VID header at byte {}, data at byte {}, image sequence {:#010x}",
        l.vid_hdr_offset,
        l.data_offset,
        ubi.image_seq()
    );
    let r = ubi.report();
    for v in &r.volumes {
        println!(
            "  volume {} {:?}: {}, {} LEBs, {} mapped{}",
            v.id,
            v.name,
            v.kind,
            v.lebs,
            v.mapped,
            if v.file_system {
                " (the nandkit file system)"
            } else {
                ""
            }
        );
    }
    if ubi.fs_volume().is_none() {
        println!(
            "  no volume named {:?}: nothing here for nandkit to mount; `nandkit ubifs ls` \
             reads a UBIFS volume, `nandkit ubi export` writes the image back out",
            nandkit_flash::ubi::FS_VOLUME
        );
    }
}

fn export(args: &ExportArgs) -> anyhow::Result<()> {
    image::require_exists(&args.image)?;
    let _lock = image::lock(&args.image, Access::Read)?;
    if args.raw.exists() && !args.force {
        bail!("{} exists (--force replaces it)", args.raw.display());
    }
    let mut dev = image::open_device(&args.image, DeviceOptions::default())?;
    let g = dev.geometry();
    if args.chip >= g.chips {
        bail!(
            "{} has {} chip(s): --chip {} is not one of them",
            args.image.display(),
            g.chips,
            args.chip
        );
    }
    let kind = if args.oob {
        RawKind::WithOob
    } else {
        RawKind::Plain
    };
    let tmp = tmp_path(&args.raw);
    let out = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut out = BufWriter::new(out);
    let mut bar = Progress::items(u64::from(g.blocks_per_chip), "exporting PEBs", false);
    let done = raw::export(&mut dev, args.chip, &mut out, kind, |_| bar.inc(1))?;
    bar.finish();
    out.flush()?;
    out.get_ref().sync_all()?;
    std::fs::rename(&tmp, &args.raw)
        .with_context(|| format!("renaming {} to {}", tmp.display(), args.raw.display()))?;
    println!(
        "nandkit ubi export: chip {} of {} -> {} ({} PEBs of {} bytes{}, {} bad blocks left out)",
        args.chip,
        args.image.display(),
        args.raw.display(),
        done.pebs,
        g.block_bytes_with(args.oob),
        if args.oob { " with OOB" } else { "" },
        done.skipped_bad
    );
    if !done.uncorrectable.is_empty() {
        let list: Vec<String> = done
            .uncorrectable
            .iter()
            .take(8)
            .map(|a| a.to_string())
            .collect();
        eprintln!(
            "nandkit ubi export: {} page(s) failed their ECC and were written as the chip holds \
             them (as nanddump does): {}{}",
            done.uncorrectable.len(),
            list.join(", "),
            if done.uncorrectable.len() > 8 {
                ", ..."
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// A file beside `path` to write first, so a cut export leaves no half image under its name.
fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

fn convert(args: &ConvertArgs) -> anyhow::Result<()> {
    let img = &args.image;
    image::require_exists(img)?;
    let _lock = image::lock(img, Access::Write)?;
    let config = nandkit_flash::backend::file::read_config(img)
        .with_context(|| format!("reading {}", img.display()))?;
    let chips = if config.chip_files {
        config.geometry.chips
    } else {
        1
    };
    // The files of the image, and the copies the conversion works on (an image of its own
    // beside it, IMAGE.partial, with its sidecar and chip files named as an image's are).
    use nandkit_flash::backend::file::{chip_path, sidecar_path};
    let work = tmp_path(img);
    let mut files = vec![(sidecar_path(img), sidecar_path(&work))];
    files.extend((0..chips).map(|k| (chip_path(img, k), chip_path(&work, k))));
    for (from, to) in &files {
        std::fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    let remove_copies = || {
        for (_, to) in &files {
            let _ = std::fs::remove_file(to);
        }
    };
    let result = (|| -> anyhow::Result<nandkit_flash::ubi::legacy::Converted> {
        let mut dev = image::open_device(&work, DeviceOptions::default())?;
        let done = nandkit_flash::ubi::legacy::convert(&mut dev)?;
        dev.sync()?;
        // The result must attach as Linux's format before it replaces anything.
        nandkit_flash::StripedFlash::attach_ubi(dev, true)
            .context("the converted image does not attach")?;
        Ok(done)
    })();
    let done = match result {
        Ok(d) => d,
        Err(e) => {
            remove_copies();
            return Err(e.context(format!("{} is left as it was", img.display())));
        }
    };
    // Chip files first, chip 0 and the sidecar (which names the geometry) last.
    for (to, from) in files.iter().rev() {
        std::fs::rename(from, to)
            .with_context(|| format!("putting the converted {} in place", to.display()))?;
    }
    println!(
        "nandkit ubi convert: {} now carries Linux's UBI format: {} chip(s), {} LEBs each \
         (as before), {} LEBs with data moved{}",
        img.display(),
        done.chips,
        done.lebs_per_chip,
        done.lebs_moved,
        if done.parity { ", parity kept" } else { "" }
    );
    Ok(())
}
