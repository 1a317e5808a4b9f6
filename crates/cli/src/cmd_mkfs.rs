//! `nandkit mkfs`: create a flash image (if needed) and format it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use nandkit_flash::{DeviceConfig, DeviceOptions, Flash, FlashDevice};
use nandkit_fs::{FileSystem, StatFs, SystemClock};

use crate::bench::FsArgs;
use crate::image::{self, Access, NewDeviceArgs};
use crate::presets_cmd::human_bytes;

#[derive(Args)]
pub struct MkfsArgs {
    /// Flash image file (its geometry lives beside it in IMAGE.meta). Created if absent.
    #[arg(value_name = "IMAGE")]
    pub image: PathBuf,
    #[command(flatten)]
    pub device: NewDeviceArgs,
    #[command(flatten)]
    pub fs: FsArgs,
    #[command(flatten)]
    pub nvram: crate::nvram_args::NewNvramArgs,
    /// Format even if the image already holds a file system or data, and recreate the image
    /// if it exists with a different geometry.
    #[arg(long, short = 'f')]
    pub force: bool,
}

pub fn run(args: MkfsArgs) -> anyhow::Result<()> {
    let report = make(&args)?;
    println!("{report}");
    Ok(())
}

/// What mkfs did, for the caller to print.
pub struct MkfsReport {
    image: PathBuf,
    created: bool,
    device: DeviceConfig,
    profile: String,
    statfs: StatFs,
}

impl std::fmt::Display for MkfsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.statfs;
        let c = u64::from(s.chunk_bytes);
        writeln!(
            f,
            "nandkit mkfs: {} {}",
            if self.created {
                "created and formatted"
            } else {
                "formatted"
            },
            self.image.display()
        )?;
        writeln!(f, "  device   {}", image::describe_device(&self.device))?;
        writeln!(f, "  profile  {}, {} B chunks", self.profile, s.chunk_bytes)?;
        write!(
            f,
            "  space    {} usable, {} free",
            human_bytes(s.total_chunks * c),
            human_bytes(s.free_chunks * c)
        )
    }
}

/// Creates (or reuses) the image and formats it; used by `mkfs` and `mount --create`.
pub fn make(args: &MkfsArgs) -> anyhow::Result<MkfsReport> {
    let image = &args.image;
    // A bad --geometry or --profile is reported before any file is touched.
    let mut wanted = args.device.config()?;
    // Linux takes the threshold from its build (CONFIG_MTD_UBI_WL_THRESHOLD), not from
    // flash, and so does an attach here: a value given to mkfs would be lost at the mount.
    if args.fs.ubi_wl_threshold != nandkit_flash::ubi::AttachOptions::default().wl_threshold {
        bail!(
            "--ubi-wl-threshold is not kept on flash (Linux's UBI takes it from the kernel's \
             configuration, and a mount here uses its default, {}); the benches take it per run",
            nandkit_flash::ubi::AttachOptions::default().wl_threshold
        );
    }
    // Parity: a file per chip, so one chip can go (or be replaced) on its own.
    wanted.chip_files = args.fs.parity;
    // (An existing image formatted as it is has its own chip count: `stripe` checks it.)
    if !image::image_present(image) || args.device.given() {
        args.fs.check_parity_chips(wanted.geometry.chips)?;
    }
    nandkit_fs::FsConfig::profile(&args.fs.profile, wanted.geometry.blocks_per_chip).with_context(
        || {
            format!(
                "--profile {} (known: {})",
                args.fs.profile,
                nandkit_fs::PROFILES.join(", ")
            )
        },
    )?;
    let small_tags =
        nandkit_fs::format::tags::TagLayout::for_free_oob(wanted.geometry.oob_free_bytes())
            == Some(nandkit_fs::format::tags::TagLayout::Small);
    if args.fs.profile == "yaffs1" && (wanted.spare_programs() < 2 || !small_tags) {
        bail!(
            "the yaffs1 profile is YAFFS1 on small-page chips: 512-byte pages whose spare area \
             takes a second program (its deletion marker), which {} ({:?} cells, {} B pages) \
             is not; use a small-page SLC preset (smallblock-64m, mnfs-128m) or the yaffs \
             profile",
            wanted.name,
            wanted.cell,
            wanted.geometry.page_size_bytes
        );
    }
    let minv = args.fs.profile == "minv";
    if minv != args.nvram.nvram.is_some() {
        bail!(if minv {
            "the minv profile keeps its metadata in NVRAM: give --nvram FILE (a new NVRAM \
             image; --nvram-preset and --nvram-size choose it)"
        } else {
            "--nvram is for the minv profile only (the others keep their metadata on flash)"
        });
    }
    if image.is_dir() {
        bail!("{}: is a directory, not a flash image", image.display());
    }
    if !image::image_present(image) || args.device.given() {
        // The device is the one asked for: a too small NVRAM is refused before any file
        // is made (for an existing image, `format` checks against its device).
        image::check_device_size(&wanted)?;
        args.nvram.check(wanted.geometry)?;
    }
    // An image is there if any of its files is (chip 0's may be gone): never replaced
    // without --force.
    if !image::image_present(image) {
        // A mkfs that fails leaves nothing it made: the image, its sidecar, the NVRAM.
        let mut made = Made::default();
        for p in nandkit_flash::backend::file::image_files(image, &wanted) {
            made.add(p);
        }
        let dev = FlashDevice::create_image(image, wanted, false, DeviceOptions::default())
            .with_context(|| format!("creating flash image {}", image.display()))?;
        let _lock = image::lock(image, Access::Write)?;
        let report = format(image, dev, args, true, &mut made)?;
        made.keep();
        return Ok(report);
    }

    let _lock = image::lock(image, Access::Write)?;
    let mut dev = match image::open_device(image, DeviceOptions::default()) {
        Ok(dev) => dev,
        Err(e) if args.force => {
            eprintln!("nandkit mkfs: {e:#}; recreating the image");
            return recreate(image, wanted, args);
        }
        Err(e) => bail!("{e:#}\n(--force recreates the image)"),
    };
    let existing = dev.config().clone();
    // What --force recreates when it must: the same device unless device options say
    // otherwise, with a file per chip if --parity.
    let renewed = if args.device.given() {
        wanted.clone()
    } else {
        DeviceConfig {
            chip_files: wanted.chip_files,
            ..existing.clone()
        }
    };
    if let Some((chip, why)) = dev.failed_chips().into_iter().next() {
        if !args.force {
            bail!(
                "{}: chip {chip} has failed ({why}); `nandkit rebuild {} --chip {chip}` \
                 brings it back with its data, --force recreates the image empty",
                image.display(),
                image.display()
            );
        }
        drop(dev);
        return recreate(image, renewed, args);
    }
    if existing.chip_files != wanted.chip_files {
        if !args.force {
            bail!(
                "{} keeps {}; {} (--force recreates it, losing its contents)",
                image.display(),
                if existing.chip_files {
                    "a file per chip (it was made with --parity)"
                } else {
                    "all its chips in one file"
                },
                if wanted.chip_files {
                    "--parity needs a file per chip"
                } else {
                    "give --parity to format it with parity again"
                }
            );
        }
        drop(dev);
        return recreate(image, renewed, args);
    }
    if args.device.given() && args.device.differs_from(&wanted, &existing) {
        if !args.force {
            bail!(
                "{} exists with a different device:\n  image:     {}\n  requested: {}\n\
                 (--force recreates it, losing its contents; without device options mkfs \
                 formats it as it is)",
                image.display(),
                image::describe_device(&existing),
                image::describe_device(&wanted)
            );
        }
        drop(dev);
        return recreate(image, wanted, args);
    }
    let mut made = Made::default();
    if !args.force {
        refuse_if_in_use(image, dev)?;
        let dev = image::open_device(image, DeviceOptions::default())?;
        let report = format(image, dev, args, false, &mut made)?;
        made.keep();
        return Ok(report);
    }
    let report = format(image, dev, args, false, &mut made)?;
    made.keep();
    Ok(report)
}

/// An image recreated replaces one that was there: a failure after this cannot bring
/// the old one back (the new NVRAM image, if mkfs made it, is still removed).
fn recreate(image: &Path, config: DeviceConfig, args: &MkfsArgs) -> anyhow::Result<MkfsReport> {
    // Chip files an image with parity left, which the new one does not have.
    let chips = if config.chip_files {
        config.geometry.chips
    } else {
        1
    };
    for k in chips..64 {
        let p = nandkit_flash::backend::file::chip_path(image, k);
        if p.exists() {
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    let dev = FlashDevice::create_image(image, config, true, DeviceOptions::default())
        .with_context(|| format!("recreating flash image {}", image.display()))?;
    let mut made = Made::default();
    let report = format(image, dev, args, true, &mut made)?;
    made.keep();
    Ok(report)
}

/// Files this mkfs made, removed if it fails (dropped without `keep`), so a failed mkfs
/// leaves nothing that a later one would refuse to replace without --force.
#[derive(Default)]
struct Made {
    paths: Vec<PathBuf>,
}

impl Made {
    fn add(&mut self, path: PathBuf) {
        self.paths.push(path);
    }

    fn keep(mut self) {
        self.paths.clear();
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for p in &self.paths {
            if let Err(e) = std::fs::remove_file(p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("nandkit mkfs: cannot remove {}: {e}", p.display());
                }
            }
        }
    }
}

/// Fails if any page of the image was ever programmed: it holds a file system or data.
fn refuse_if_in_use(image: &Path, mut dev: FlashDevice) -> anyhow::Result<()> {
    let g = dev.geometry();
    let mut written = 0u64;
    for addr in image::block_addrs(g) {
        let info = dev.block_info(addr)?;
        if info.write_ptr > 0 || info.erase_torn {
            written += 1;
        }
    }
    if written == 0 {
        return Ok(());
    }
    match image::mount_read_only(image, dev, false) {
        Ok(fs) => {
            let s = fs.statfs();
            bail!(
                "{} already holds a nandkit file system ({} profile, {} files and directories, {} used); \
                 use --force to format it anyway, destroying its contents",
                image.display(),
                fs.config().profile,
                s.objects,
                human_bytes(s.used_chunks * u64::from(s.chunk_bytes))
            )
        }
        Err(_) => bail!(
            "{} holds data ({written} blocks written) but no mountable nandkit file system; \
             use --force to format it anyway",
            image.display()
        ),
    }
}

fn format(
    image: &Path,
    dev: FlashDevice,
    args: &MkfsArgs,
    created: bool,
    made: &mut Made,
) -> anyhow::Result<MkfsReport> {
    let device = dev.config().clone();
    // Before anything is erased: the NVRAM must fit this device.
    args.nvram.check(device.geometry)?;
    // The file system sees the chips as one striped device (MA), over a UBI per chip if
    // asked.
    let dev = args.fs.stripe(dev)?;
    let config = args.fs.config(&dev)?;
    let mut profile = format!("{}, allocation {}", config.profile, config.allocator.name());
    if let Some(p) = dev.parity_report() {
        profile.push_str(&format!(
            ", parity across {} chips (a page is {} data pages and their XOR)",
            p.chips,
            p.chips - 1
        ));
    }
    let in_nvram = config.metadata == nandkit_fs::meta::MetadataKind::Nvram;
    let mut fs = match (in_nvram, &args.nvram.nvram) {
        (true, None) => bail!(
            "the {} profile keeps its metadata in NVRAM: give --nvram FILE (a new NVRAM \
             image; --nvram-preset and --nvram-size choose it)",
            config.profile
        ),
        (false, Some(path)) => bail!(
            "--nvram {}: the {} profile keeps its metadata on flash (only minv uses NVRAM)",
            path.display(),
            config.profile
        ),
        (true, Some(path)) => {
            if !path.exists() {
                made.add(path.clone());
            }
            let nv = args.nvram.create(args.force)?.expect("a path was given");
            FileSystem::format_with_nvram(dev, nv, config, Arc::new(SystemClock))
        }
        (false, None) => FileSystem::format(dev, config, Arc::new(SystemClock)),
    }
    .with_context(|| format!("formatting {}", image.display()))?;
    // As mke2fs does, the root directory belongs to whoever made the file system: a user
    // who makes an image and mounts it (through fusermount3) can then write in it.
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if (uid, gid) != (0, 0) {
        let owner = nandkit_fs::SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            ..Default::default()
        };
        fs.setattr(nandkit_fs::ROOT_INO, owner)
            .with_context(|| format!("formatting {}", image.display()))?;
    }
    let statfs = fs.statfs();
    // A clean unmount leaves a checkpoint, so the first mount needs no scan (a minv file
    // system persists its NVRAM instead).
    let (mut dev, _nvram) = fs
        .unmount_parts()
        .with_context(|| format!("writing {}", image.display()))?;
    dev.sync()
        .with_context(|| format!("syncing {}", image.display()))?;
    Ok(MkfsReport {
        image: image.to_path_buf(),
        created,
        device,
        profile,
        statfs,
    })
}
