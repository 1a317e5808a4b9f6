//! Flash images for the file system commands (mkfs, mount, fsck, info, dump): locking,
//! opening with clear errors, and read-only mounts.
//!
//! An image is two files (`IMAGE` in nanddump layout and the `IMAGE.meta` sidecar, see
//! `nandkit_flash::backend::file`). Only one process may change an image at a time, and no
//! one should read it while a mount holds its state in RAM: every command takes an advisory
//! `flock` on `IMAGE` (exclusive to change it, shared to read it).
//!
//! A lock says only *that* someone holds the image, not what they are doing. So the mount
//! daemon, while it holds the lock, also says what it does in a third file, `IMAGE.owner`
//! ([`Owner`]): its pid, mount point and state: serving, detached (a lazy unmount with
//! files still open), or unmounting (the kernel has let go and it is flushing and writing
//! its checkpoint). A command that finds the image locked reads it to decide between
//! failing at once (the image is mounted) and waiting (the daemon is on its way out).
//!
//! Why a file, and why it cannot mislead anyone:
//! - the kernel drops the mount when `fusermount3 -u` returns, but the daemon only learns of
//!   it when its next read of /dev/fuse fails, and then needs time to write out; the mount
//!   table alone cannot tell "unmounting" from "some other holder", and the daemon's word
//!   can tell it;
//! - it is replaced atomically (written beside, then renamed), so a reader sees one whole
//!   version or none;
//! - it is consulted only when the lock is held by someone else, and believed only if its
//!   pid is alive *and* that process started when the file says (pid reuse), so a file
//!   left behind by a killed daemon blocks nobody; whoever next takes the lock exclusively
//!   removes it;
//! - the daemon removes it before it releases the lock.

use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nandkit_flash::{DeviceOptions, FlashDevice, FlashError, StripedDevice, StripedFlash};
use nandkit_fs::{FileSystem, FsError, MountOptions, SystemClock};

/// The file system type `df -T` and /proc/mounts show for a nandkit mount.
pub const FUSE_TYPE: &str = "fuse.nandkit";

/// How long a command waits for another nandkit process (a mount that is flushing after
/// `fusermount3 -u`, an mkfs) to let go of an image before it gives up.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// How often a waiting command looks again.
const LOCK_POLL: Duration = Duration::from_millis(20);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Access {
    /// Read the image (fsck, info, dump): many readers at once.
    Read,
    /// Change the image (mkfs, mount): nobody else.
    Write,
}

/// Holds the image's lock until dropped. A mount daemon's lock also carries its
/// [`Announcement`], withdrawn (the `IMAGE.owner` file removed) before the lock goes.
pub struct ImageLock {
    announcement: Option<Arc<Announcement>>,
    _file: File,
}

impl ImageLock {
    /// Starts telling other processes, through `IMAGE.owner`, that this process serves the
    /// image on `mountpoint` (state [`DaemonState::Serving`]). A file that cannot be
    /// written is reported and otherwise ignored: commands then fall back to the mount
    /// table and waiting.
    pub fn announce(
        &mut self,
        image: &Path,
        mountpoint: &Path,
        read_only: bool,
    ) -> Arc<Announcement> {
        let pid = std::process::id() as i32;
        let owner = Owner {
            pid,
            start: process_start(pid),
            state: DaemonState::Serving,
            read_only,
            mountpoint: mountpoint.to_path_buf(),
        };
        let announcement = Arc::new(Announcement {
            path: owner_path(image),
            inner: Mutex::new(Announced {
                owner: Some(owner),
                session_ended: false,
            }),
        });
        announcement.write_locked(&mut announcement.inner.lock().unwrap());
        self.announcement = Some(Arc::clone(&announcement));
        announcement
    }
}

impl Drop for ImageLock {
    fn drop(&mut self) {
        // Before the descriptor (and so the lock) goes: nobody may see our file without our
        // lock.
        if let Some(a) = self.announcement.take() {
            a.withdraw();
        }
    }
}

/// What a mount daemon is doing with the image it holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DaemonState {
    /// The mount is up (or was detached by someone else: the mount table tells).
    Serving,
    /// The daemon detached its mount (lazy unmount on a signal): it serves the files still
    /// open there and writes everything out when the last one is closed.
    Detached,
    /// The kernel has let go of the mount (or the daemon is unmounting on a signal): it is
    /// flushing, writing its checkpoint and syncing, then it releases the image.
    Unmounting,
}

impl DaemonState {
    fn name(self) -> &'static str {
        match self {
            DaemonState::Serving => "serving",
            DaemonState::Detached => "detached",
            DaemonState::Unmounting => "unmounting",
        }
    }

    fn from_name(name: &str) -> Option<DaemonState> {
        [
            DaemonState::Serving,
            DaemonState::Detached,
            DaemonState::Unmounting,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// The contents of `IMAGE.owner`: which process holds the image for a mount, and what it is
/// doing. Text, one `key=value` a line, the mount point last (to the end of the file, so any
/// path fits):
///
/// ```text
/// pid=4242
/// start=123456
/// state=unmounting
/// access=rw
/// mountpoint=/mnt/nand
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: i32,
    /// When the process started (clock ticks after boot, /proc/PID/stat), to tell it from a
    /// later process that got the same pid. None if unknown.
    pub start: Option<u64>,
    pub state: DaemonState,
    /// The daemon mounted the file system read-only (`-o ro`): a remount cannot make it
    /// writable. A file without the line (an older daemon) is read as read-write.
    pub read_only: bool,
    pub mountpoint: PathBuf,
}

impl Owner {
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("pid={}\n", self.pid);
        if let Some(start) = self.start {
            out.push_str(&format!("start={start}\n"));
        }
        out.push_str(&format!("state={}\n", self.state.name()));
        let access = if self.read_only { "ro" } else { "rw" };
        out.push_str(&format!("access={access}\nmountpoint="));
        let mut out = out.into_bytes();
        out.extend_from_slice(self.mountpoint.as_os_str().as_bytes());
        out
    }

    fn parse(bytes: &[u8]) -> Option<Owner> {
        let (head, mountpoint) = match bytes.windows(12).position(|w| w == b"\nmountpoint=") {
            Some(i) => (&bytes[..i], &bytes[i + 12..]),
            None => return None,
        };
        let head = std::str::from_utf8(head).ok()?;
        let (mut pid, mut start, mut state) = (None, None, None);
        let mut read_only = false;
        for line in head.lines() {
            match line.split_once('=')? {
                ("pid", v) => pid = Some(v.parse::<i32>().ok().filter(|&p| p > 0)?),
                ("start", v) => start = Some(v.parse::<u64>().ok()?),
                ("state", v) => state = Some(DaemonState::from_name(v)?),
                ("access", v) => read_only = v == "ro",
                _ => {} // a later version's field
            }
        }
        Some(Owner {
            pid: pid?,
            start,
            state: state?,
            read_only,
            mountpoint: PathBuf::from(std::ffi::OsStr::from_bytes(mountpoint)),
        })
    }

    /// Is the process that wrote this still running (the same process, not a later one with
    /// its pid)?
    pub fn is_live(&self) -> bool {
        if !process_exists(self.pid) {
            return false;
        }
        match (self.start, process_start(self.pid)) {
            (Some(said), Some(now)) => said == now,
            // Cannot tell (no /proc): trust the pid.
            _ => true,
        }
    }
}

/// Where a mount daemon says what it is doing with `image`: `IMAGE.owner`, beside the
/// image as the mount recorded it (its canonical path).
pub fn owner_path(image: &Path) -> PathBuf {
    let mut name = canonical(image).into_os_string();
    name.push(".owner");
    PathBuf::from(name)
}

/// The live daemon's word about `image`, if there is one (a missing, unreadable or stale
/// file is no word).
pub fn read_owner(image: &Path) -> Option<Owner> {
    let bytes = std::fs::read(owner_path(image)).ok()?;
    Owner::parse(&bytes).filter(Owner::is_live)
}

fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists (EPERM: it does, not ours).
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// When process `pid` started (field 22 of /proc/PID/stat), if it can be read.
fn process_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses (which may hold anything) come fields 3...
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// A mount daemon's running statement in `IMAGE.owner` (see [`ImageLock::announce`]).
/// Shared by the thread that serves and the one that takes signals.
pub struct Announcement {
    path: PathBuf,
    inner: Mutex<Announced>,
}

struct Announced {
    /// None once withdrawn: nothing is written again.
    owner: Option<Owner>,
    /// After the FUSE session has ended the state stays `unmounting`, whatever a signal
    /// handler still has to say.
    session_ended: bool,
}

impl Announcement {
    /// A change of state while the session runs (a signal's unmount, or its failure).
    pub fn set(&self, state: DaemonState) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.session_ended {
            return;
        }
        if let Some(owner) = inner.owner.as_mut() {
            owner.state = state;
        }
        self.write_locked(&mut inner);
    }

    /// The FUSE session has ended: from now on the daemon is unmounting, until it withdraws.
    pub fn session_ended(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.session_ended = true;
        if let Some(owner) = inner.owner.as_mut() {
            owner.state = DaemonState::Unmounting;
        }
        self.write_locked(&mut inner);
    }

    fn write_locked(&self, inner: &mut Announced) {
        let Some(owner) = &inner.owner else {
            return;
        };
        if let Err(e) = write_replacing(&self.path, &owner.to_bytes()) {
            eprintln!(
                "nandkit: cannot write {}: {e} (commands run right after unmounting may \
                 report the image as in use)",
                self.path.display()
            );
        }
    }

    fn withdraw(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.owner.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Replaces `path` atomically: a reader sees the old contents or the new, never a part.
fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// What a command that found the image locked makes of it.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// The image is mounted (on this path) and served: fail at once.
    Mounted(PathBuf),
    /// A daemon is writing the image out after its mount ended: wait for it.
    Unmounting(Owner),
    /// A daemon still serves the image, but its mount is not in this mount table: detached
    /// with files open (or mounted in another mount namespace), or the kernel has just let
    /// go and the daemon has not noticed yet. Wait, as for any other holder.
    Detached(Owner),
    /// Someone else (an mkfs, a daemon still starting): wait.
    Other,
}

/// Decides from the live daemon's word (if any) and where this process's mount table shows
/// the image mounted (if it does). An unmounting daemon's word wins over the mount table
/// (on a signal it says so before it unmounts); the mount table wins over "serving" (the
/// daemon learns only after the kernel that its mount is gone).
fn judge(owner: Option<Owner>, listed: Option<PathBuf>) -> Verdict {
    match (owner, listed) {
        (Some(o), _) if o.state == DaemonState::Unmounting => Verdict::Unmounting(o),
        (_, Some(mountpoint)) => Verdict::Mounted(mountpoint),
        (Some(o), None) => Verdict::Detached(o),
        (None, None) => Verdict::Other,
    }
}

/// The absolute path of an image, as mounts record it (the FUSE fsname).
pub fn canonical(image: &Path) -> PathBuf {
    image.canonicalize().unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(image))
            .unwrap_or_else(|_| image.to_path_buf())
    })
}

/// Whether any file of an image is there: its page file or its sidecar (an image with a
/// file per chip that lost chip 0's file still has its sidecar and the other chips).
pub fn image_present(image: &Path) -> bool {
    image.exists() || nandkit_flash::backend::file::sidecar_path(image).exists()
}

/// Fails with a hint if the image's page file does not exist (an image with a file per
/// chip may have lost its chip 0 file: its sidecar says so, and it opens degraded).
pub fn require_exists(image: &Path) -> anyhow::Result<()> {
    let chip_files =
        || nandkit_flash::backend::file::read_config(image).is_ok_and(|c| c.chip_files);
    let sidecar = nandkit_flash::backend::file::sidecar_path(image);
    if !image.exists() && !sidecar.exists() {
        bail!(
            "{}: no such flash image (create one with `nandkit mkfs {}`)",
            image.display(),
            image.display()
        );
    }
    if !image.exists() && !chip_files() {
        // Its pages are gone; a command that makes a new image here would also replace
        // the sidecar, so none is suggested.
        bail!(
            "{}: the image's page file is missing (its sidecar {} is there, but holds no data)",
            image.display(),
            sidecar.display()
        );
    }
    if image.is_dir() {
        bail!("{}: is a directory, not a flash image", image.display());
    }
    Ok(())
}

/// Whether waits for another nandkit process go unannounced (`nandkit mount --quiet`, as
/// mount(8)'s helper: a mount prints nothing unless it fails).
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Takes the image's lock. If a nandkit mount of this image is up and serving, fails at once
/// and says where. If its daemon is unmounting (after `fusermount3 -u`, it still flushes and
/// writes its checkpoint), or another nandkit process holds the image (an mkfs), waits for
/// it, saying so, up to a minute.
pub fn lock(image: &Path, access: Access) -> anyhow::Result<ImageLock> {
    lock_within(image, access, LOCK_WAIT)
}

/// The file whose `flock` guards an image: the image itself, or, for an image with a file
/// per chip, its sidecar, which such an image keeps whichever chip files are gone (chip 0's
/// file, `IMAGE`, may be one of them); the sidecar too when the page file is gone.
fn lock_path(image: &Path) -> PathBuf {
    let sidecar = nandkit_flash::backend::file::sidecar_path(image);
    let chip_files = nandkit_flash::backend::file::read_config(image).is_ok_and(|c| c.chip_files);
    if chip_files || (!image.exists() && sidecar.exists()) {
        sidecar
    } else {
        image.to_path_buf()
    }
}

fn lock_within(image: &Path, access: Access, limit: Duration) -> anyhow::Result<ImageLock> {
    let path = lock_path(image);
    let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let op = match access {
        Access::Read => libc::LOCK_SH,
        Access::Write => libc::LOCK_EX,
    } | libc::LOCK_NB;
    let start = Instant::now();
    // A quiet process has, as it were, said everything already.
    let quiet = QUIET.load(Ordering::Relaxed);
    let (mut said_unmounting, mut said_detached, mut said_waiting) = (quiet, quiet, quiet);
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            if access == Access::Write {
                // Nobody else holds the image, so an owner file is a dead daemon's.
                let _ = std::fs::remove_file(owner_path(image));
            }
            return Ok(ImageLock {
                announcement: None,
                _file: file,
            });
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err).with_context(|| format!("locking {}", image.display()));
        }
        let verdict = judge(read_owner(image), mounted_at(image));
        let waited = start.elapsed();
        match &verdict {
            Verdict::Mounted(mountpoint) => bail!(
                "{} is mounted on {}; unmount it first (fusermount3 -u {})",
                image.display(),
                mountpoint.display(),
                mountpoint.display()
            ),
            Verdict::Unmounting(o) if waited >= limit => bail!(
                "{} is in use by the nandkit daemon (pid {}), still unmounting it (waited {} \
                 s); try again once it has exited",
                image.display(),
                o.pid,
                limit.as_secs()
            ),
            Verdict::Detached(o) if waited >= limit => bail!(
                "{} is in use by the nandkit daemon (pid {}) that served it on {} (waited {} \
                 s): its mount is detached but files are still open there (or it is mounted \
                 in another mount namespace)",
                image.display(),
                o.pid,
                o.mountpoint.display(),
                limit.as_secs()
            ),
            Verdict::Other if waited >= limit => bail!(
                "{} is in use by another nandkit process (waited {} s)",
                image.display(),
                limit.as_secs()
            ),
            Verdict::Unmounting(o) if !said_unmounting => {
                eprintln!(
                    "nandkit: waiting for the daemon (pid {}) to finish unmounting {} \
                     (flushing, and writing its checkpoint if the profile keeps one)...",
                    o.pid,
                    image.display()
                );
                said_unmounting = true;
            }
            // Serving without a mount here is usually the moment between the kernel's
            // unmount and the daemon noticing it: say nothing unless it lasts.
            Verdict::Detached(o)
                if !said_detached
                    && (o.state == DaemonState::Detached || waited > Duration::from_secs(1)) =>
            {
                eprintln!(
                    "nandkit: waiting for the daemon (pid {}) to let go of {}: its mount on {} \
                     is detached but still in use; it writes the image out once the last file \
                     open there is closed",
                    o.pid,
                    image.display(),
                    o.mountpoint.display()
                );
                said_detached = true;
            }
            Verdict::Other if !said_waiting && waited > Duration::from_secs(1) => {
                eprintln!(
                    "nandkit: waiting for another nandkit process to finish with {}",
                    image.display()
                );
                said_waiting = true;
            }
            _ => {}
        }
        std::thread::sleep(LOCK_POLL);
    }
}

/// One line of /proc/self/mounts.
pub struct MountEntry {
    pub source: String,
    pub mountpoint: PathBuf,
    pub fstype: String,
    /// The mount's options as /proc/mounts lists them (`rw,nosuid,...,allow_other`).
    pub options: String,
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
            let options = f.next().unwrap_or("").to_string();
            Some(MountEntry {
                source,
                mountpoint,
                fstype,
                options,
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
    // By the file too, not only by name: a hard link (or a bind mount's other path) to a
    // mounted image is the same image, and would otherwise wait for the lock a minute.
    let id = file_id(image);
    mounts()
        .into_iter()
        .find(|m| {
            m.fstype == FUSE_TYPE
                && (Path::new(&m.source) == want
                    || id.is_some() && file_id(Path::new(&m.source)) == id)
        })
        .map(|m| m.mountpoint)
}

/// (device, inode) of a file: which file it is, whatever the name.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Opens an existing image with errors that name the file and say what to do.
pub fn open_device(image: &Path, options: DeviceOptions) -> anyhow::Result<FlashDevice> {
    require_exists(image)?;
    let sidecar = nandkit_flash::backend::file::sidecar_path(image);
    FlashDevice::open_image(image, options).map_err(|e| match e {
        FlashError::Io { path, source }
            if source.kind() == std::io::ErrorKind::NotFound
                && Path::new(&path) == sidecar.as_path() =>
        {
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
) -> anyhow::Result<FileSystem<StripedDevice>> {
    mount_read_only_with(image, dev, force_scan, None)
}

/// `mount_read_only`, from the NVRAM image when one is given (a `minv` file system).
pub fn mount_read_only_with(
    image: &Path,
    dev: FlashDevice,
    force_scan: bool,
    nvram: Option<&Path>,
) -> anyhow::Result<FileSystem<StripedDevice>> {
    let options = MountOptions {
        read_only: true,
        force_scan,
        clock: Arc::new(SystemClock),
        atime: nandkit_fs::AtimePolicy::Never,
    };
    mount_with(image, dev, options, nvram)
}

/// Mounts from flash, or from the NVRAM image when one is given.
pub fn mount_with(
    image: &Path,
    dev: FlashDevice,
    options: MountOptions,
    nvram: Option<&Path>,
) -> anyhow::Result<FileSystem<StripedDevice>> {
    // Chips formatted with UBI are attached (the scan of their headers); others striped.
    let dev = StripedFlash::open(dev, options.read_only)
        .with_context(|| format!("attaching UBI on {}", image.display()))?;
    match nvram {
        None => FileSystem::mount(dev, options).map_err(|e| mount_error(image, e)),
        Some(path) => {
            let nv = crate::nvram_args::open(path)?;
            let fs = FileSystem::mount_with_nvram(dev, nv, options).map_err(|e| {
                anyhow::Error::new(e).context(format!(
                    "mounting {} with the NVRAM image {}",
                    image.display(),
                    path.display()
                ))
            })?;
            if fs.fs_id().is_none() {
                eprintln!(
                    "nandkit: {} and {} carry no file system id (made before ids): nothing \
                     checks that this NVRAM image belongs to this flash image",
                    image.display(),
                    path.display()
                );
            }
            Ok(fs)
        }
    }
}

/// A mount failure as the user should read it.
pub fn mount_error(image: &Path, e: FsError) -> anyhow::Error {
    match e {
        // An array's chips may be the ones lost or replaced: a format is never the answer.
        FsError::NotFormatted(why)
            if nandkit_flash::backend::file::read_config(image).is_ok_and(|c| c.chip_files) =>
        {
            anyhow::anyhow!(
                "{}: no nandkit file system found on the chips of this array ({why})",
                image.display()
            )
        }
        FsError::NotFormatted(why) => anyhow::anyhow!(
            "{}: no nandkit file system on this image ({why}); format it with `nandkit mkfs {}`",
            image.display(),
            image.display()
        ),
        e @ FsError::OldFormat { .. } => anyhow::anyhow!(
            "{}: {e}. Copy its files off with the nandkit that made it, then reformat it \
             with `nandkit mkfs --force {}`",
            image.display(),
            image.display()
        ),
        FsError::NoSpace => anyhow::anyhow!(
            "{}: no room left on the device for the repairs a writable mount makes after a \
             crash (its good blocks are used up or worn out); mount it read-only (`-o ro`) \
             to copy the files off",
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

    fn me(state: DaemonState) -> Owner {
        let pid = std::process::id() as i32;
        Owner {
            pid,
            start: process_start(pid),
            state,
            read_only: state == DaemonState::Detached,
            mountpoint: PathBuf::from("/mnt/odd\nname=x"),
        }
    }

    /// A pid no process can have (above the kernel's largest pid_max).
    const NO_PID: i32 = i32::MAX;

    #[test]
    fn owner_file_round_trips_and_rejects_garbage() {
        for state in [
            DaemonState::Serving,
            DaemonState::Detached,
            DaemonState::Unmounting,
        ] {
            let o = me(state);
            assert_eq!(Owner::parse(&o.to_bytes()), Some(o));
        }
        let no_start = Owner {
            start: None,
            ..me(DaemonState::Serving)
        };
        assert_eq!(Owner::parse(&no_start.to_bytes()), Some(no_start));
        assert_eq!(Owner::parse(b""), None);
        assert_eq!(Owner::parse(b"pid=1\nstate=serving\n"), None);
        assert_eq!(Owner::parse(b"pid=0\nstate=serving\nmountpoint=/m"), None);
        assert_eq!(Owner::parse(b"pid=1\nstate=dancing\nmountpoint=/m"), None);
        assert_eq!(Owner::parse(b"state=serving\nmountpoint=/m"), None);
        // A field from a later version is skipped.
        let o = Owner::parse(b"pid=7\nshiny=yes\nstate=detached\nmountpoint=/m").unwrap();
        assert_eq!((o.pid, o.state), (7, DaemonState::Detached));
    }

    #[test]
    fn stale_owners_are_not_believed() {
        assert!(me(DaemonState::Serving).is_live());
        let dead = Owner {
            pid: NO_PID,
            ..me(DaemonState::Unmounting)
        };
        assert!(!dead.is_live());
        // Our pid, but another process's start time: the pid was reused.
        let mut reused = me(DaemonState::Unmounting);
        assert!(reused.start.is_some(), "no /proc/self/stat start time");
        reused.start = reused.start.map(|t| t + 1);
        assert!(!reused.is_live());
    }

    #[test]
    fn judge_waits_for_unmounting_and_fails_on_a_mount() {
        let m = PathBuf::from("/mnt/nand");
        let serving = me(DaemonState::Serving);
        let unmounting = me(DaemonState::Unmounting);
        let detached = me(DaemonState::Detached);
        assert_eq!(
            judge(Some(serving.clone()), Some(m.clone())),
            Verdict::Mounted(m.clone())
        );
        assert_eq!(judge(None, Some(m.clone())), Verdict::Mounted(m.clone()));
        // Marked on a signal, before its umount: still in the table, but on its way out.
        assert_eq!(
            judge(Some(unmounting.clone()), Some(m.clone())),
            Verdict::Unmounting(unmounting.clone())
        );
        assert_eq!(
            judge(Some(unmounting.clone()), None),
            Verdict::Unmounting(unmounting)
        );
        // The kernel dropped the mount and the daemon has not noticed yet, or a lazy
        // unmount: wait, never "is mounted".
        assert_eq!(
            judge(Some(serving.clone()), None),
            Verdict::Detached(serving)
        );
        assert_eq!(
            judge(Some(detached.clone()), None),
            Verdict::Detached(detached)
        );
        assert_eq!(judge(None, None), Verdict::Other);
    }

    /// An image file whose lock is held by another open file description of this process
    /// (flock locks conflict between descriptions, even within one process).
    fn held_image() -> (tempfile::TempDir, PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("x.img");
        std::fs::write(&img, b"").unwrap();
        let holder = File::open(&img).unwrap();
        // SAFETY: flock on a descriptor the test owns.
        assert_eq!(unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX) }, 0);
        (dir, img, holder)
    }

    fn lock_error(img: &Path) -> String {
        match lock_within(img, Access::Read, Duration::ZERO) {
            Ok(_) => panic!("locked a held image"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn lock_reads_the_holders_word() {
        let (_dir, img, holder) = held_image();
        // Nobody says anything: another nandkit process.
        assert!(
            lock_error(&img).contains("in use by another nandkit process"),
            "{}",
            lock_error(&img)
        );
        // A live daemon that is unmounting.
        write_replacing(&owner_path(&img), &me(DaemonState::Unmounting).to_bytes()).unwrap();
        let e = lock_error(&img);
        let pid = std::process::id();
        assert!(
            e.contains(&format!("daemon (pid {pid}), still unmounting")),
            "{e}"
        );
        // Serving, but its mount is not in the mount table (detached).
        write_replacing(&owner_path(&img), &me(DaemonState::Detached).to_bytes()).unwrap();
        let e = lock_error(&img);
        assert!(e.contains("detached"), "{e}");
        // A dead daemon's file is ignored.
        let dead = Owner {
            pid: NO_PID,
            ..me(DaemonState::Unmounting)
        };
        write_replacing(&owner_path(&img), &dead.to_bytes()).unwrap();
        assert!(lock_error(&img).contains("in use by another nandkit process"));
        // Once free, a reader leaves the stale file alone; a writer removes it.
        drop(holder);
        drop(lock_within(&img, Access::Read, Duration::ZERO).unwrap());
        assert!(owner_path(&img).exists());
        drop(lock_within(&img, Access::Write, Duration::ZERO).unwrap());
        assert!(!owner_path(&img).exists());
    }

    #[test]
    fn an_announcement_lives_exactly_as_long_as_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("x.img");
        std::fs::write(&img, b"").unwrap();
        let mnt = dir.path().join("m");
        let mut lock = lock_within(&img, Access::Write, Duration::ZERO).unwrap();
        let a = lock.announce(&img, &mnt, false);
        let read = || Owner::parse(&std::fs::read(owner_path(&img)).unwrap()).unwrap();
        assert_eq!(
            (read().state, read().mountpoint),
            (DaemonState::Serving, mnt)
        );
        assert_eq!(read_owner(&img), Some(read()));
        a.set(DaemonState::Detached);
        assert_eq!(read().state, DaemonState::Detached);
        a.session_ended();
        assert_eq!(read().state, DaemonState::Unmounting);
        // A signal handler late with its news cannot undo "unmounting".
        a.set(DaemonState::Serving);
        assert_eq!(read().state, DaemonState::Unmounting);
        drop(lock);
        assert!(!owner_path(&img).exists());
        // Nor write the file again once withdrawn.
        a.set(DaemonState::Serving);
        assert!(!owner_path(&img).exists());
        assert!(!dir.path().join("x.img.owner.tmp").exists());
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

/// The largest flash image mkfs makes: 64 GiB of pages. mkfs writes the whole image
/// (every page erased, 0xFF) and every command maps it, and the file system keeps state
/// per block and per page in RAM (and numbers pages in 32 bits).
pub const MAX_DEVICE_BYTES: u64 = 64 << 30;

/// Refuses a device larger than [`MAX_DEVICE_BYTES`], before any file is made.
pub fn check_device_size(config: &nandkit_flash::DeviceConfig) -> anyhow::Result<()> {
    let g = config.geometry;
    let bytes = u64::from(g.page_size_bytes)
        .saturating_mul(g.pages_per_chip())
        .saturating_mul(u64::from(g.chips));
    if bytes > MAX_DEVICE_BYTES {
        anyhow::bail!(
            "a device of {} is more than nandkit makes an image of: at most {} (mkfs writes \
             the whole image, every page erased, and the file system keeps state per block \
             and per page in RAM); give a smaller --device-size",
            crate::presets_cmd::human_bytes(bytes),
            crate::presets_cmd::human_bytes(MAX_DEVICE_BYTES)
        );
    }
    Ok(())
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

pub use nandkit_lab::bench::block_addrs;
