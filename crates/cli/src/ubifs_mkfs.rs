//! `nandkit ubifs mkfs`: a new image with UBI and nandkit's UBIFS on it, filled from a host
//! directory as mkfs.ubifs -r fills one.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use anyhow::{bail, Context};
use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{DeviceOptions, Flash, FlashDevice, StripedFlash};
use nandkit_fs::ubifs::fs::{UbifsFs, UbifsOptions};
use nandkit_fs::ubifs::media::{Time, ROOT_INO};
use nandkit_fs::ubifs::ops::{NewInode, SetAttr};

use crate::image::{self, Access};

type Fs = UbifsFs<StripedFlash<FlashDevice>>;

/// A host timestamp (seconds, nanoseconds) as UBIFS keeps one (times before 1970 as 0).
fn t(sec: i64, nsec: i64) -> Time {
    Time {
        sec: sec.max(0) as u64,
        nsec: nsec as u32,
    }
}

fn now() -> Time {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time {
        sec: d.as_secs(),
        nsec: d.subsec_nanos(),
    }
}

pub fn run(
    img: &Path,
    geometry: &str,
    device_size: Option<u64>,
    root: Option<&Path>,
    force: bool,
) -> anyhow::Result<()> {
    if let Some(r) = root {
        if !r.is_dir() {
            bail!("{} is not a directory", r.display());
        }
    }
    let config = crate::device_args::DeviceArgs {
        geometry: geometry.to_string(),
        chips: 1,
        device_size,
        seed: None,
    }
    .config()?;
    if image::image_present(img) && !force {
        bail!(
            "{} exists (--force replaces it, losing its contents)",
            img.display()
        );
    }
    let dev = FlashDevice::create_image(img, config, force, DeviceOptions::default())
        .with_context(|| format!("creating {}", img.display()))?;
    let _lock = image::lock(img, Access::Write)?;
    let ubi = StripedFlash::format_ubi(dev, UbiParams::default()).context("formatting UBI")?;
    let mut fs = UbifsFs::format(ubi, UbifsOptions::default(), now()).context("making UBIFS")?;
    let mut count = Counts::default();
    if let Some(r) = root {
        let mut links = BTreeMap::new();
        copy_dir(&mut fs, r, ROOT_INO, &mut links, &mut count)?;
        copy_attrs(&mut fs, r, ROOT_INO)?;
    }
    let sb = fs.superblock().clone();
    let mut dev = fs.unmount().context("committing")?.into_inner();
    dev.sync()?;
    println!(
        "nandkit ubifs mkfs: {} ({} LEBs of {} bytes, UBIFS in UBI volume \"nandkit\"): {} files, {} directories, {} symlinks, {} other, {} hard links, {} bytes",
        img.display(),
        sb.leb_cnt,
        sb.leb_size,
        count.files,
        count.dirs,
        count.symlinks,
        count.other,
        count.hard_links,
        count.bytes
    );
    Ok(())
}

#[derive(Default)]
struct Counts {
    files: u64,
    dirs: u64,
    symlinks: u64,
    other: u64,
    hard_links: u64,
    bytes: u64,
}

/// Copies the entries of host directory `from` into directory `dir`.
fn copy_dir(
    fs: &mut Fs,
    from: &Path,
    dir: u32,
    links: &mut BTreeMap<(u64, u64), u32>,
    count: &mut Counts,
) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .with_context(|| format!("reading {}", from.display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name();
        let m = std::fs::symlink_metadata(&path)?;
        let ft = m.file_type();
        if !ft.is_dir() && m.nlink() > 1 {
            if let Some(&inum) = links.get(&(m.dev(), m.ino())) {
                fs.link(inum, dir, name.as_bytes(), t(m.ctime(), m.ctime_nsec()))
                    .with_context(|| format!("linking {}", path.display()))?;
                count.hard_links += 1;
                continue;
            }
        }
        let mode = m.mode();
        let target;
        let data: &[u8] = if ft.is_symlink() {
            target = std::fs::read_link(&path)?;
            target.as_os_str().as_bytes()
        } else {
            &[]
        };
        let dev_bytes;
        let data = if ft.is_block_device() || ft.is_char_device() {
            // Linux's `new_encode_dev`, as UBIFS keeps a device number.
            let (major, minor) = (libc::major(m.rdev()), libc::minor(m.rdev()));
            let enc = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
            dev_bytes = enc.to_le_bytes();
            &dev_bytes[..]
        } else {
            data
        };
        let inum = fs
            .mknod(
                dir,
                name.as_bytes(),
                NewInode {
                    mode,
                    uid: m.uid(),
                    gid: m.gid(),
                    data,
                },
                t(m.ctime(), m.ctime_nsec()),
            )
            .with_context(|| format!("making {}", path.display()))?;
        if ft.is_dir() {
            count.dirs += 1;
            copy_dir(fs, &path, inum, links, count)?;
        } else if ft.is_file() {
            count.files += 1;
            count.bytes += copy_file(fs, &path, inum, m.len())?;
            links.insert((m.dev(), m.ino()), inum);
        } else if ft.is_symlink() {
            count.symlinks += 1;
        } else {
            count.other += 1;
            links.insert((m.dev(), m.ino()), inum);
        }
        copy_attrs(fs, &path, inum)?;
    }
    Ok(())
}

/// A file's bytes, block by block, whole zero blocks left as holes.
fn copy_file(fs: &mut Fs, path: &Path, inum: u32, size: u64) -> anyhow::Result<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 4096];
    let mut off = 0u64;
    loop {
        let mut n = 0;
        while n < buf.len() {
            let k = f.read(&mut buf[n..])?;
            if k == 0 {
                break;
            }
            n += k;
        }
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            fs.write(inum, off, &buf[..n], now())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        off += n as u64;
    }
    if off != size {
        bail!("{} changed while it was copied", path.display());
    }
    // The size, holes at the end included.
    fs.truncate(inum, size, now())?;
    Ok(size)
}

/// Times and extended attributes of a host path onto `inum`.
fn copy_attrs(fs: &mut Fs, path: &Path, inum: u32) -> anyhow::Result<()> {
    let m = std::fs::symlink_metadata(path)?;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let mut names = vec![0u8; 65536];
    // SAFETY: a valid path and a buffer of the length given.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    for name in names[..n.max(0) as usize]
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
    {
        let cn = std::ffi::CString::new(name)?;
        let mut v = vec![0u8; 65536];
        // SAFETY: valid strings and a buffer of the length given.
        let len =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
        if len < 0 {
            continue;
        }
        v.truncate(len as usize);
        fs.set_xattr(inum, name, &v, now()).with_context(|| {
            format!(
                "xattr {} of {}",
                String::from_utf8_lossy(name),
                path.display()
            )
        })?;
    }
    fs.setattr(
        inum,
        SetAttr {
            atime: Some(t(m.atime(), m.atime_nsec())),
            mtime: Some(t(m.mtime(), m.mtime_nsec())),
            ..SetAttr::default()
        },
        t(m.ctime(), m.ctime_nsec()),
    )?;
    Ok(())
}
