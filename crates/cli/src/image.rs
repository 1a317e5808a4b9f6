//! Flash images for the file system commands (mkfs, mount, fsck, info, dump): locking,
//! opening with clear errors, and read-only mounts.
//!
//! An image is two files (`IMAGE` in nanddump layout and the `IMAGE.meta` sidecar, see
//! `nandkit_flash::backend::file`). Only one process may change an image at a time, and no
//! one should read it while a mount holds its state in RAM: every command takes an advisory
//! `flock` on `IMAGE` (exclusive to change it, shared to read it).

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nandkit_flash::{DeviceOptions, FlashDevice, FlashError};
use nandkit_fs::{FileSystem, FsError, MountOptions, SystemClock};

/// The file system type `df -T` and /proc/mounts show for a nandkit mount.
pub const FUSE_TYPE: &str = "fuse.nandkit";

/// How long a command waits for another nandkit process (a mount that is flushing after
/// `fusermount3 -u`, an mkfs) to let go of an image before it gives up.
const LOCK_WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Access {
    /// Read the image (fsck, info, dump): many readers at once.
    Read,
    /// Change the image (mkfs, mount): nobody else.
    Write,
}

/// Holds the image's lock until dropped.
pub struct ImageLock {
    _file: File,
}

/// The absolute path of an image, as mounts record it (the FUSE fsname).
pub fn canonical(image: &Path) -> PathBuf {
    image.canonicalize().unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(image))
            .unwrap_or_else(|_| image.to_path_buf())
    })
}

/// Fails with a hint if the image's page file does not exist.
pub fn require_exists(image: &Path) -> anyhow::Result<()> {
    if !image.exists() {
        bail!(
            "{}: no such flash image (create one with `nandkit mkfs {}`)",
            image.display(),
            image.display()
        );
    }
    if image.is_dir() {
        bail!("{}: is a directory, not a flash image", image.display());
    }
    Ok(())
}

/// Takes the image's lock. If a nandkit mount of this image is up, fails at once and says
/// where; if another nandkit process holds it otherwise (a mount flushing its last writes
/// after an unmount, an mkfs), waits for it, up to a minute.
pub fn lock(image: &Path, access: Access) -> anyhow::Result<ImageLock> {
    let file = File::open(image).with_context(|| format!("opening {}", image.display()))?;
    let op = match access {
        Access::Read => libc::LOCK_SH,
        Access::Write => libc::LOCK_EX,
    } | libc::LOCK_NB;
    let start = Instant::now();
    let mut said_waiting = false;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(ImageLock { _file: file });
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err).with_context(|| format!("locking {}", image.display()));
        }
        if let Some(mountpoint) = mounted_at(image) {
            bail!(
                "{} is mounted on {}; unmount it first (fusermount3 -u {})",
                image.display(),
                mountpoint.display(),
                mountpoint.display()
            );
        }
        if start.elapsed() > LOCK_WAIT {
            bail!(
                "{} is in use by another nandkit process (waited {} s)",
                image.display(),
                LOCK_WAIT.as_secs()
            );
        }
        if !said_waiting && start.elapsed() > Duration::from_secs(1) {
            eprintln!(
                "nandkit: waiting for another nandkit process to finish with {}",
                image.display()
            );
            said_waiting = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One line of /proc/self/mounts.
pub struct MountEntry {
    pub source: String,
    pub mountpoint: PathBuf,
    pub fstype: String,
}

/// The mount table, or nothing if it cannot be read (not Linux).
pub fn mounts() -> Vec<MountEntry> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mounts") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let source = unescape_mount_field(f.next()?);
            let mountpoint = PathBuf::from(unescape_mount_field(f.next()?));
            let fstype = f.next()?.to_string();
            Some(MountEntry {
                source,
                mountpoint,
                fstype,
            })
        })
        .collect()
}

/// /proc/mounts writes space, tab, newline and backslash as octal escapes.
fn unescape_mount_field(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where a nandkit mount of this image is, if one is up.
pub fn mounted_at(image: &Path) -> Option<PathBuf> {
    let want = canonical(image);
    mounts()
        .into_iter()
        .find(|m| m.fstype == FUSE_TYPE && Path::new(&m.source) == want)
        .map(|m| m.mountpoint)
}

/// Opens an existing image with errors that name the file and say what to do.
pub fn open_device(image: &Path, options: DeviceOptions) -> anyhow::Result<FlashDevice> {
    require_exists(image)?;
    FlashDevice::open_image(image, options).map_err(|e| match e {
        FlashError::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
            anyhow::anyhow!(
                "{}: the sidecar {path} is missing, so the image's geometry is unknown \
                 (recreate the image with `nandkit mkfs --force {}`)",
                image.display(),
                image.display()
            )
        }
        e => anyhow::Error::new(e).context(format!("opening flash image {}", image.display())),
    })
}

/// Mounts read-only (nothing is written to the image). `force_scan` ignores a checkpoint.
pub fn mount_read_only(
    image: &Path,
    dev: FlashDevice,
    force_scan: bool,
) -> anyhow::Result<FileSystem<FlashDevice>> {
    let options = MountOptions {
        read_only: true,
        force_scan,
        clock: Arc::new(SystemClock),
    };
    FileSystem::mount(dev, options).map_err(|e| mount_error(image, e))
}

/// A mount failure as the user should read it.
pub fn mount_error(image: &Path, e: FsError) -> anyhow::Error {
    match e {
        FsError::NotFormatted(why) => anyhow::anyhow!(
            "{}: no nandkit file system on this image ({why}); format it with `nandkit mkfs {}`",
            image.display(),
            image.display()
        ),
        e => anyhow::Error::new(e).context(format!("mounting {}", image.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_unescape() {
        assert_eq!(unescape_mount_field(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape_mount_field(r"x\134y"), r"x\y");
        assert_eq!(unescape_mount_field(r"trailing\04"), r"trailing\04");
    }
}

/// Device options for a command that may create an image (mkfs, mount --create). Unlike
/// [`crate::device_args::DeviceArgs`], nothing has a default, so a command can tell "use the
/// existing image's geometry" from "make it this".
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NewDeviceArgs {
    /// Device preset for a new image (see `nandkit presets`) [default: mlc-1g].
    #[arg(long, short = 'g', value_name = "NAME")]
    pub geometry: Option<String>,
    /// Split the device's capacity over P chips.
    #[arg(long, short = 'p', value_name = "P")]
    pub chips: Option<u32>,
    /// Total capacity instead of the preset's, e.g. 64MiB (whole blocks on every chip).
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes)]
    pub device_size: Option<u64>,
    /// Seed for the device's random draws (factory bad blocks, bit errors).
    #[arg(long)]
    pub seed: Option<u64>,
}

impl NewDeviceArgs {
    /// Did the user ask for any particular device?
    pub fn given(&self) -> bool {
        self.geometry.is_some()
            || self.chips.is_some()
            || self.device_size.is_some()
            || self.seed.is_some()
    }

    pub fn config(&self) -> anyhow::Result<nandkit_flash::DeviceConfig> {
        crate::device_args::DeviceArgs {
            geometry: self
                .geometry
                .clone()
                .unwrap_or_else(|| nandkit_flash::DEFAULT_PRESET.to_string()),
            chips: self.chips.unwrap_or(1),
            device_size: self.device_size,
            seed: self.seed,
        }
        .config()
    }

    /// Does an existing image's device differ from the one asked for?
    pub fn differs_from(
        &self,
        wanted: &nandkit_flash::DeviceConfig,
        existing: &nandkit_flash::DeviceConfig,
    ) -> bool {
        wanted.geometry != existing.geometry
            || wanted.name != existing.name
            || (self.seed.is_some() && wanted.seed != existing.seed)
    }
}

/// One line describing a device: "mlc-1g: 1 chip x 8192 blocks x 64 pages x (2048+64) B = 1GiB".
pub fn describe_device(config: &nandkit_flash::DeviceConfig) -> String {
    let g = config.geometry;
    format!(
        "{}: {} chip{} x {} blocks x {} pages x ({}+{}) B = {}",
        config.name,
        g.chips,
        if g.chips == 1 { "" } else { "s" },
        g.blocks_per_chip,
        g.pages_per_block,
        g.page_size_bytes,
        g.oob_size_bytes,
        crate::presets_cmd::human_bytes(g.total_bytes())
    )
}

/// Every block address of a device, chip after chip (the file system's block order).
pub fn block_addrs(g: nandkit_flash::Geometry) -> impl Iterator<Item = nandkit_flash::BlockAddr> {
    (0..g.chips)
        .flat_map(move |c| (0..g.blocks_per_chip).map(move |b| nandkit_flash::BlockAddr::new(c, b)))
}
