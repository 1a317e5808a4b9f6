//! `nandkit ubifs`: UBIFS volumes read as Linux mounts them. `ls` lists the tree, `extract`
//! copies it into a directory (as `ubireader_extract_files` does), `check` reads every node
//! the index holds and every file, and checks links and sizes. The image is a nandkit image
//! holding a UBI (e.g. from `nandkit ubi import`), or mkfs.ubifs's own output file.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use nandkit_flash::ubi::Ubi;
use nandkit_flash::{DeviceOptions, Flash};
use nandkit_fs::ubifs::media::{self, InoNode};
use nandkit_fs::ubifs::{LebSource, MemVolume, UbiVolume, UbifsImage};

use crate::image::{self, Access};

#[derive(Args)]
pub struct UbifsArgs {
    #[command(subcommand)]
    command: UbifsCommand,
}

#[derive(Subcommand)]
enum UbifsCommand {
    /// List every file of a UBIFS volume: mode, links, owner, size, path.
    #[command(after_help = "Examples:\n  \
        nandkit ubifs ls board.img\n  \
        nandkit ubifs ls rootfs.ubifs          (mkfs.ubifs's output, as it is)")]
    Ls(VolumeArgs),
    /// Copy a UBIFS volume's tree into a directory: files, holes, directories, symlinks,
    /// hard links, FIFOs, modes, times and xattrs.
    #[command(after_help = "Device files are made only when run as root (otherwise \
        counted and skipped); xattrs outside the user namespace need root too. DEST must \
        not exist or be empty.\n\nExample:\n  nandkit ubifs extract board.img rootfs/")]
    Extract(ExtractArgs),
    /// Read every node the index holds (CRC and key), every file's data, and check links,
    /// sizes and entries; exit 1 on a problem.
    #[command(after_help = "Example:\n  nandkit ubifs check board.img")]
    Check(VolumeArgs),
    /// Make a new image holding UBI and nandkit's UBIFS, filled from a directory as
    /// mkfs.ubifs -r fills one: files (holes kept), directories, symlinks, hard links,
    /// FIFOs and device files, modes, owners, times and xattrs.
    #[command(after_help = "The image is a nandkit image (IMAGE plus its sidecar); \
        `nandkit ubi export` writes it out as the raw UBI image a board flashes.\n\n\
        Examples:\n  \
        nandkit ubifs mkfs rootfs.img -g mlc-1g --device-size 64MiB --root rootfs/\n  \
        nandkit ubi export rootfs.img rootfs.ubi")]
    Mkfs(MkfsArgs),
}

#[derive(Args)]
struct MkfsArgs {
    /// The image to make.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Device preset (see `nandkit presets`).
    #[arg(long, short = 'g', value_name = "NAME")]
    geometry: String,
    /// The chip's capacity instead of the preset's, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    device_size: Option<u64>,
    /// The tree to copy in.
    #[arg(long, short = 'r', value_name = "DIR")]
    root: Option<PathBuf>,
    /// Replace IMAGE if it exists.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct VolumeArgs {
    /// A nandkit image holding a UBI, or a UBIFS image file from mkfs.ubifs.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// The UBI volume (name or number); by default the one UBIFS volume.
    #[arg(long, value_name = "VOLUME")]
    volume: Option<String>,
}

#[derive(Args)]
struct ExtractArgs {
    #[command(flatten)]
    vol: VolumeArgs,
    /// Where the tree goes.
    #[arg(value_name = "DEST")]
    dest: PathBuf,
}

pub fn run(args: UbifsArgs) -> anyhow::Result<()> {
    let vol = match &args.command {
        UbifsCommand::Ls(v) | UbifsCommand::Check(v) => v,
        UbifsCommand::Extract(e) => &e.vol,
        UbifsCommand::Mkfs(m) => {
            return crate::ubifs_mkfs::run(
                &m.image,
                &m.geometry,
                m.device_size,
                m.root.as_deref(),
                m.force,
            )
        }
    };
    if is_raw_ubifs(&vol.image)? {
        if vol.volume.is_some() {
            bail!(
                "--volume is for UBI images; {} is a bare UBIFS image",
                vol.image.display()
            );
        }
        let bytes = std::fs::read(&vol.image)
            .with_context(|| format!("reading {}", vol.image.display()))?;
        let (_, sb) = media::SbNode::decode(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a UBIFS volume: superblock: {e}",
                vol.image.display()
            )
        })?;
        if sb.leb_size < 15 * 1024 || sb.leb_size > 1 << 24 || sb.leb_cnt > 1 << 20 {
            bail!(
                "{}: superblock gives LEBs of {} bytes, {} of them",
                vol.image.display(),
                sb.leb_size,
                sb.leb_cnt
            );
        }
        let src = MemVolume::from_image(&bytes, sb.leb_size as usize, sb.leb_cnt);
        return run_on(&args.command, &vol.image, src);
    }
    let _lock = image::lock(&vol.image, Access::Read)?;
    let mut dev = image::open_device(&vol.image, DeviceOptions::default())?;
    if !nandkit_flash::ubi::probe(&mut dev)? {
        bail!(
            "{}: no UBI on this image (nor a UBIFS image file)",
            vol.image.display()
        );
    }
    let ubi = Ubi::attach(&mut dev, true, Default::default())
        .with_context(|| format!("attaching the UBI of {}", vol.image.display()))?;
    if dev.geometry().chips > 1 {
        bail!(
            "{}: UBIFS over an array of chips is not read yet",
            vol.image.display()
        );
    }
    let id = pick_volume(&mut dev, &ubi, vol.volume.as_deref())?;
    let src = UbiVolume::new(&mut dev, &ubi, id).context("volume vanished")?;
    run_on(&args.command, &vol.image, src)
}

/// Whether the file starts with a UBIFS node (mkfs.ubifs's `-o` output).
fn is_raw_ubifs(path: &Path) -> anyhow::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let Ok(mut f) = std::fs::File::open(path) else {
        return Ok(false);
    };
    Ok(f.read_exact(&mut magic).is_ok() && u32::from_le_bytes(magic) == media::NODE_MAGIC)
}

/// The volume to read: the one asked for, or the only one whose LEB 0 holds a UBIFS
/// superblock.
fn pick_volume<F: Flash>(dev: &mut F, ubi: &Ubi, want: Option<&str>) -> anyhow::Result<u32> {
    let names = || {
        ubi.volumes()
            .iter()
            .map(|v| format!("{} ({})", v.name, v.id))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(w) = want {
        return ubi
            .volumes()
            .iter()
            .find(|v| v.name == w || v.id.to_string() == w)
            .map(|v| v.id)
            .with_context(|| format!("no volume {w:?}; the volumes are {}", names()));
    }
    let mut found = Vec::new();
    for v in ubi.volumes() {
        if let Some(leb) = ubi.read_leb(dev, 0, v.id, 0)? {
            if media::SbNode::decode(&leb).is_ok() {
                found.push(v.id);
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => bail!("no volume holds UBIFS; the volumes are {}", names()),
        _ => bail!(
            "several volumes hold UBIFS ({}); name one with --volume",
            names()
        ),
    }
}

fn run_on<S: LebSource>(cmd: &UbifsCommand, image: &Path, src: S) -> anyhow::Result<()> {
    let mut fs =
        UbifsImage::open(src).with_context(|| format!("opening UBIFS on {}", image.display()))?;
    match cmd {
        UbifsCommand::Ls(_) => ls(&mut fs),
        UbifsCommand::Extract(e) => extract(&mut fs, &e.dest),
        UbifsCommand::Check(_) => check(&mut fs, image),
        UbifsCommand::Mkfs(_) => unreachable!("mkfs makes its own image"),
    }
}

fn mode_string(mode: u32) -> String {
    let kind = match mode & 0o170000 {
        0o040000 => 'd',
        0o120000 => 'l',
        0o020000 => 'c',
        0o060000 => 'b',
        0o010000 => 'p',
        0o140000 => 's',
        _ => '-',
    };
    let mut s = String::from(kind);
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if mode & (1 << (8 - i)) != 0 { c } else { '-' });
    }
    s
}

fn ls<S: LebSource>(fs: &mut UbifsImage<S>) -> anyhow::Result<()> {
    let tree = fs.walk()?;
    for (path, ino) in &tree {
        let shown = if path.is_empty() {
            b"/".to_vec()
        } else {
            [b"/", path.as_slice()].concat()
        };
        let mut line = format!(
            "{} {:>3} {:>5}:{:<5} {:>10} {}",
            mode_string(ino.mode),
            ino.nlink,
            ino.uid,
            ino.gid,
            ino.size,
            String::from_utf8_lossy(&shown)
        );
        if ino.mode & 0o170000 == 0o120000 {
            line += &format!(" -> {}", String::from_utf8_lossy(&ino.data));
        }
        println!("{line}");
    }
    let (keys, nodes) = fs.key_count();
    println!(
        "{} names; index {} nodes, height {}; {} keys, {} nodes; journal: {} buds, {} nodes replayed",
        tree.len(),
        fs.stats.index.index_nodes,
        fs.stats.index.height,
        keys,
        nodes,
        fs.stats.replay.buds,
        fs.stats.replay.nodes
    );
    Ok(())
}

fn extract<S: LebSource>(fs: &mut UbifsImage<S>, dest: &Path) -> anyhow::Result<()> {
    if dest.exists() && std::fs::read_dir(dest)?.next().is_some() {
        bail!("{} is not empty", dest.display());
    }
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    let tree = fs.walk()?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut first_path: BTreeMap<u32, PathBuf> = BTreeMap::new();
    let (mut files, mut skipped, mut xattr_skipped) = (0u64, 0u64, 0u64);
    let mut dirs = Vec::new();
    for (path, ino) in &tree {
        let target = dest.join(OsStr::from_bytes(path));
        let kind = ino.mode & 0o170000;
        if kind != 0o040000 {
            if let Some(first) = first_path.get(&ino.inum) {
                std::fs::hard_link(first, &target)
                    .with_context(|| format!("linking {}", target.display()))?;
                continue;
            }
            first_path.insert(ino.inum, target.clone());
        }
        match kind {
            0o040000 => {
                if !path.is_empty() {
                    std::fs::create_dir(&target)
                        .with_context(|| format!("creating {}", target.display()))?;
                }
                dirs.push((target.clone(), ino.clone()));
            }
            0o100000 => {
                let bytes = fs.read_file(ino)?;
                write_sparse(&target, &bytes, ino.size)?;
            }
            0o120000 => {
                std::os::unix::fs::symlink(OsStr::from_bytes(&ino.data), &target)
                    .with_context(|| format!("creating symlink {}", target.display()))?;
            }
            0o010000 => mknod(&target, ino, 0)?,
            0o020000 | 0o060000 | 0o140000 if root => mknod(&target, ino, dev_number(ino))?,
            _ => {
                skipped += 1;
                continue;
            }
        }
        files += 1;
        for (name, value) in fs.xattrs(ino.inum)? {
            if !root && !name.starts_with(b"user.") {
                xattr_skipped += 1;
                continue;
            }
            set_xattr(&target, &name, &value)?;
        }
        if kind != 0o040000 {
            set_attrs(&target, ino, root)?;
        }
    }
    // Directories last, deepest first, so their times and modes survive their filling.
    for (path, ino) in dirs.iter().rev() {
        set_attrs(path, ino, root)?;
    }
    println!(
        "extracted {files} objects into {}{}{}",
        dest.display(),
        if skipped > 0 {
            format!("; {skipped} device files or sockets skipped (not root)")
        } else {
            String::new()
        },
        if xattr_skipped > 0 {
            format!("; {xattr_skipped} xattrs outside user.* skipped (not root)")
        } else {
            String::new()
        },
    );
    Ok(())
}

/// Writes a file, leaving whole zero blocks as holes (UBIFS keeps no data node for them).
fn write_sparse(path: &Path, bytes: &[u8], size: u64) -> anyhow::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    for (i, block) in bytes.chunks(media::BLOCK_SIZE as usize).enumerate() {
        if block.iter().any(|&b| b != 0) {
            f.seek(SeekFrom::Start(i as u64 * media::BLOCK_SIZE))?;
            f.write_all(block)?;
        }
    }
    f.set_len(size)?;
    Ok(())
}

/// The device number a device inode holds (`ubifs_dev_desc`: 4 or 8 bytes, Linux's
/// `new_encode_dev` form).
fn dev_number(ino: &InoNode) -> u64 {
    let raw = match ino.data.len() {
        4 => u64::from(u32::from_le_bytes(ino.data[..4].try_into().expect("4"))),
        8 => u64::from_le_bytes(ino.data[..8].try_into().expect("8")),
        _ => 0,
    };
    let major = (raw & 0xfff00) >> 8;
    let minor = (raw & 0xff) | ((raw >> 12) & 0xfff00);
    libc::makedev(major as u32, minor as u32)
}

fn cpath(path: &Path) -> anyhow::Result<std::ffi::CString> {
    Ok(std::ffi::CString::new(path.as_os_str().as_bytes())?)
}

fn mknod(path: &Path, ino: &InoNode, dev: u64) -> anyhow::Result<()> {
    let c = cpath(path)?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mknod(c.as_ptr(), ino.mode & 0o170777, dev as libc::dev_t) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("creating {}", path.display()));
    }
    Ok(())
}

fn set_xattr(path: &Path, name: &[u8], value: &[u8]) -> anyhow::Result<()> {
    let c = cpath(path)?;
    let n = std::ffi::CString::new(name)?;
    // SAFETY: valid NUL-terminated strings and a buffer of `value.len()` bytes.
    let rc = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| {
            format!(
                "setting xattr {} on {}",
                String::from_utf8_lossy(name),
                path.display()
            )
        });
    }
    Ok(())
}

/// Mode, owner (as root) and times of an extracted object.
fn set_attrs(path: &Path, ino: &InoNode, root: bool) -> anyhow::Result<()> {
    let c = cpath(path)?;
    let symlink = ino.mode & 0o170000 == 0o120000;
    if root {
        // SAFETY: a valid path.
        unsafe { libc::lchown(c.as_ptr(), ino.uid, ino.gid) };
    }
    if !symlink {
        // SAFETY: a valid path.
        if unsafe { libc::chmod(c.as_ptr(), ino.mode & 0o7777) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("chmod {}", path.display()));
        }
    }
    let ts = |t: media::Time| libc::timespec {
        tv_sec: t.sec as libc::time_t,
        tv_nsec: t.nsec.min(999_999_999) as libc::c_long,
    };
    let times = [ts(ino.atime), ts(ino.mtime)];
    // SAFETY: a valid path and two timespecs.
    unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    Ok(())
}

fn check<S: LebSource>(fs: &mut UbifsImage<S>, image: &Path) -> anyhow::Result<()> {
    let r = nandkit_fs::ubifs::check::check(fs)?;
    println!(
        "{}: UBIFS, {} LEBs of {} bytes, commit {}; {} nodes checked, {} objects, {} bytes of \
         file data, LPT checked on {} LEBs; journal {} buds, {} nodes replayed{}",
        image.display(),
        fs.sb.leb_cnt,
        fs.sb.leb_size,
        fs.mst.cmt_no,
        r.nodes,
        r.objects,
        r.file_bytes,
        r.lpt_lebs_checked,
        fs.stats.replay.buds,
        fs.stats.replay.nodes,
        if fs.stats.replay.torn_tails > 0 {
            format!(", {} torn bud tails (a cut)", fs.stats.replay.torn_tails)
        } else {
            String::new()
        }
    );
    if r.problems.is_empty() {
        println!("clean");
        Ok(())
    } else {
        for p in &r.problems {
            println!("problem: {p}");
        }
        bail!("{} problems", r.problems.len())
    }
}
