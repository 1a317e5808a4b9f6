//! `nandkit mount`: serve an image through FUSE.
//!
//! Life of a mount:
//! 1. Without `--foreground`, fork first (while the process has one thread): the parent
//!    waits on a pipe until the child says the mount is up, or why it failed, and exits 0
//!    or 1 with that message. The child runs as the daemon in its own session.
//! 2. Lock the image, mount the file system (checkpoint or scan), mount FUSE.
//! 3. Serve requests on several threads: reads share the file system's reader-writer lock
//!    (several run at once), every other call takes it alone.
//! 4. The session ends when the kernel drops the mount: `fusermount3 -u` / `umount`, or
//!    SIGINT/SIGTERM/SIGHUP, which this process turns into an unmount (lazy if the mount
//!    point is busy, so it ends once the last file there is closed).
//! 5. Then the file system is unmounted: everything flushed, a checkpoint written, the
//!    image synced. Only after that does the image lock go, so a following `nandkit fsck`
//!    waits for it.
//!
//! All along, from the moment the mount is up until just before the lock goes, the daemon
//! says what it is doing in `IMAGE.owner` (see [`crate::image::Owner`]): serving, detached
//! (lazy unmount, files still open), or unmounting: set the moment the FUSE session ends
//! (and on a signal, before the daemon unmounts), before anything is flushed. That is how a
//! command run meanwhile (`fusermount3 -u M && nandkit fsck IMAGE`) knows it should wait,
//! and says why, rather than fail with "is mounted".

mod acl;
mod bdi;
mod clock;
mod commit;
mod fuse;
mod gate;
pub mod helper;
mod idle_clean;
mod image_guard;
mod invalidate;
mod options;
mod privs;
mod refused;
mod remount;
mod space_guard;

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{ArgAction, Args};
use nandkit_flash::{DeviceOptions, ExecutorKind, Flash};
use nandkit_fs::MountOptions;

use crate::bench::FsArgs;
use crate::cmd_mkfs::{self, MkfsArgs};
use crate::image::{self, Access, NewDeviceArgs};
use options::MountConfig;

pub const AFTER_HELP: &str = "\
Returns once the mount is up, leaving a daemon serving it (--foreground keeps it in this \
terminal). Unmount with `fusermount3 -u MOUNTPOINT` (or umount, or SIGTERM to the daemon, \
or Ctrl-C with --foreground): every buffered write is flushed and a checkpoint written, so \
the next mount is fast and `nandkit fsck` finds it clean. fsync on the mount returns once \
the data is on flash. fsck, info, dump, mkfs and mount run right after `fusermount3 -u` wait \
(saying so) while the daemon is still writing its checkpoint; while the image is mounted \
they refuse it.

As root, mounting an image already served elsewhere makes the second directory show the \
same file system (a bind mount of the first, one daemon), as a disk mounted twice does.

To use `mount -t fuse.nandkit IMAGE DIR` and /etc/fstab lines (type fuse.nandkit), link \
this program as mount(8)'s helper: ln -s \"$(command -v nandkit)\" /sbin/mount.fuse.nandkit. \
It then prints nothing on success and, as root, mounts with suid,dev unless nosuid or nodev \
is given (mount(8) leaves out its defaults), as libfuse's mount.fuse3 does.

Mount options (-o, comma-separated or repeated):
  ro, rw                     read-only / read-write (default rw)
  remount                    change a live mount's ro/rw, suid, dev, exec, sync and
                             dirsync (root only), as `mount -o remount,ro DIR` does.
                             The daemon serves on; its own settings below stay
  allow_other, allow_root    let other users (or root) in; permissions are checked by the
                             kernel (default_permissions is always on). As a non-root user
                             allow_other needs user_allow_other in /etc/fuse.conf
  dev, suid, exec, nodev, nosuid, noexec, sync, async, dirsync
                             as for any mount (FUSE defaults to nodev,nosuid)
  relatime, strictatime, noatime
                             when reads update access times (default relatime, as on
                             Linux: a file's atime is written with its next header, at
                             most about one header page per file read per day)
  nodiratime, diratime       whether listing a directory moves its access time too
                             (default diratime, as on Linux)
  commit=S                   seconds between writing out data of files still open (default
                             5, as ext4). Closed files are written at close, fsync'd ones at
                             fsync; what the daemon holds longer is lost if it is killed
  writeback, nowriteback     the kernel's write-back cache (default on): small writes
                             land in the page cache at memory speed and reach the
                             daemon in batches, at close, fsync, or within the commit
                             interval. The kernel may hold at most dirty_limit bytes
                             unwritten, and a file opened for writing when less room
                             than that is left writes through (ENOSPC at write(2)).
                             nowriteback: every write(2) reaches the daemon
  dirty_limit=SIZE           bytes of written data the kernel may hold for the mount
                             (default an eighth of the file system, 1MiB..256MiB). Set
                             when mounted by root; otherwise the kernel's own limit
                             (1% of its allowance) applies
  idle_clean=S               seconds without a request before the daemon cleans in
                             the background, one block at a time, so later writes
                             find erased blocks (default 2; 0: never). It takes blocks
                             at least half invalid, or any while erased blocks are
                             fewer than an eighth of the device
  threads=N                  request threads (default 2). Reads run together on
                             several threads; other calls one at a time. With two,
                             one thread waits for the next request while the other
                             replies; more help when several programs do I/O at
                             once on a many-core machine
  attr_timeout=S, entry_timeout=S
                             seconds the kernel may cache attributes (default 1; 0
                             with nowriteback, so a stat never shows an old link
                             count or ctime) and names (default 1)

Examples:
  nandkit mkfs disk.img --device-size 256MiB
  nandkit mount disk.img /mnt/nand
  cp -r ~/src /mnt/nand/ && df -T /mnt/nand
  fusermount3 -u /mnt/nand
  nandkit mount --create new.img /mnt/nand --geometry tlc-1g --device-size 128MiB
  nandkit mount disk.img /mnt/nand -o ro,allow_other --foreground";

#[derive(Args)]
pub struct MountArgs {
    /// Flash image to mount.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Existing directory to mount it on.
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Stay in the foreground until unmounted (Ctrl-C unmounts) instead of returning once
    /// the mount is up.
    #[arg(long, short = 'f')]
    foreground: bool,
    /// Run the simulated device in real time: sleep for each flash operation's latency
    /// (one worker thread per chip, so the chips of an array sleep in parallel).
    #[arg(long)]
    realtime: bool,
    /// Mount options (see below).
    #[arg(short = 'o', value_name = "OPTIONS", action = ArgAction::Append)]
    options: Vec<String>,
    /// If IMAGE does not exist, create and format it (default geometry, or the device
    /// options given).
    #[arg(long)]
    create: bool,
    #[command(flatten)]
    device: NewDeviceArgs,
    #[command(flatten)]
    nvram: crate::nvram_args::NvramArgs,
    /// Where the background daemon writes its messages [default: discarded].
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Print nothing on success, and no notes while waiting for another nandkit process
    /// (as mount(8)'s helper runs it).
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Check the arguments and options, then exit without mounting (mount(8)'s -f).
    #[arg(long, hide = true)]
    fake: bool,
}

/// What the daemon tells the waiting parent: "OK\n", or an error message.
struct ReadyPipe(File);

pub fn main(args: MountArgs) -> ExitCode {
    image::set_quiet(args.quiet);
    if remount::requested(&args.options) {
        return exit_code(if args.fake {
            remount::parse(&args.options).map(drop)
        } else {
            remount::run(&args.image, &args.mountpoint, &args.options)
        });
    }
    if args.fake {
        return exit_code(MountConfig::parse(&args.options).map(drop));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        if let Some(existing) = image::mounted_at(&args.image) {
            return exit_code(mount_again(&args, &existing));
        }
    }
    let prepared = match prepare(&args) {
        Ok(p) => p,
        Err(e) => return exit_code(Err(e)),
    };
    if args.foreground {
        return exit_code(serve(&prepared, None));
    }
    daemonize(&prepared)
}

fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:?}");
            ExitCode::FAILURE
        }
    }
}

/// Everything checked and resolved before the fork.
struct Prepared {
    image: PathBuf,
    nvram: Option<PathBuf>,
    mountpoint: PathBuf,
    config: MountConfig,
    realtime: bool,
    log: Option<PathBuf>,
    quiet: bool,
}

fn prepare(args: &MountArgs) -> anyhow::Result<Prepared> {
    let config = MountConfig::parse(&args.options)?;
    let mountpoint = free_mountpoint(&args.mountpoint)?;
    if args.device.given() && !args.create {
        bail!("--geometry, --chips, --device-size and --seed only apply with --create");
    }
    if !image::image_present(&args.image) {
        if !args.create {
            bail!(
                "{}: no such flash image (make one with `nandkit mkfs {}`, or pass --create)",
                args.image.display(),
                args.image.display()
            );
        }
        if config.read_only {
            bail!("--create with -o ro would mount an empty file system read-only");
        }
        let report = cmd_mkfs::make(&MkfsArgs {
            image: args.image.clone(),
            device: args.device.clone(),
            fs: FsArgs::default(),
            nvram: Default::default(),
            force: false,
        })?;
        eprintln!("{report}");
    } else {
        image::require_exists(&args.image)?;
    }
    Ok(Prepared {
        image: image::canonical(&args.image),
        nvram: args.nvram.nvram.as_deref().map(image::canonical),
        mountpoint,
        config,
        realtime: args.realtime,
        log: args.log.clone(),
        quiet: args.quiet,
    })
}

/// The mount point, resolved, if it is a directory nothing is mounted on.
fn free_mountpoint(mnt: &Path) -> anyhow::Result<PathBuf> {
    let meta = std::fs::metadata(mnt).with_context(|| format!("mount point {}", mnt.display()))?;
    if !meta.is_dir() {
        bail!("mount point {} is not a directory", mnt.display());
    }
    let mountpoint = mnt
        .canonicalize()
        .with_context(|| format!("mount point {}", mnt.display()))?;
    if let Some(m) = image::mounts()
        .into_iter()
        .find(|m| m.mountpoint == mountpoint)
    {
        bail!(
            "{} is busy: {} ({}) is already mounted there; unmount it first",
            mountpoint.display(),
            m.source,
            m.fstype
        );
    }
    Ok(mountpoint)
}

/// `nandkit mount IMAGE DIR2` as root while IMAGE is served on DIR1: DIR2 shows the same
/// file system, as a disk's device mounted twice does (see `remount::mount_again`).
fn mount_again(args: &MountArgs, existing: &Path) -> anyhow::Result<()> {
    if args.foreground || args.realtime || args.log.is_some() || args.create {
        bail!(
            "{} is already served on {} by a running daemon: --foreground, --realtime, \
             --log and --create do not apply to mounting it again",
            args.image.display(),
            existing.display()
        );
    }
    // The daemon's settings are its own: only the kernel's flags may differ here. A bad
    // option is named before anything else.
    let flags = remount::parse(&args.options)?;
    let mountpoint = free_mountpoint(&args.mountpoint)?;
    remount::mount_again(&args.image, existing, &mountpoint, &flags)?;
    if !args.quiet {
        println!(
            "nandkit: {} is served on {}; {} now shows the same file system (its daemon \
             ends once both are unmounted)",
            args.image.display(),
            existing.display(),
            mountpoint.display()
        );
    }
    Ok(())
}

/// Forks; the parent waits for the child's word that the mount is up.
fn daemonize(p: &Prepared) -> ExitCode {
    let mut fds = [0i32; 2];
    // SAFETY: plain system calls on descriptors this function creates. The process is
    // still single-threaded here (nothing before this point spawns threads), so fork is
    // safe.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        eprintln!("Error: pipe: {}", std::io::Error::last_os_error());
        return ExitCode::FAILURE;
    }
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        eprintln!("Error: fork: {}", std::io::Error::last_os_error());
        return ExitCode::FAILURE;
    }
    if pid == 0 {
        // The daemon: its own session, so the terminal's signals do not reach it.
        unsafe {
            libc::close(fds[0]);
            libc::setsid();
        }
        let ready = ReadyPipe(unsafe { File::from_raw_fd(fds[1]) });
        let code = match serve(p, Some(ready)) {
            Ok(()) => 0,
            Err(_) => 1,
        };
        std::process::exit(code);
    }
    unsafe { libc::close(fds[1]) };
    let mut msg = String::new();
    let _ = unsafe { File::from_raw_fd(fds[0]) }.read_to_string(&mut msg);
    if msg.starts_with("OK") {
        if p.quiet {
            return ExitCode::SUCCESS;
        }
        println!(
            "nandkit: mounted {} on {} (daemon pid {pid}); unmount with: fusermount3 -u {}",
            p.image.display(),
            p.mountpoint.display(),
            p.mountpoint.display()
        );
        return ExitCode::SUCCESS;
    }
    if msg.is_empty() {
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        eprintln!("Error: the mount daemon exited before the mount was up (status {status})");
    } else {
        eprint!("{msg}");
    }
    ExitCode::FAILURE
}

/// Mounts and serves until unmounted. With `ready`, reports to the waiting parent once the
/// mount is up (or what failed before that), then detaches from the terminal.
fn serve(p: &Prepared, ready: Option<ReadyPipe>) -> anyhow::Result<()> {
    let mut ready = ready;
    let session = match start(p) {
        Ok(s) => s,
        Err(e) => {
            if let Some(ReadyPipe(mut pipe)) = ready.take() {
                let _ = writeln!(pipe, "Error: {e:?}");
            }
            return Err(e);
        }
    };
    let Started {
        session,
        shared,
        announcement,
        _lock,
    } = session;
    match ready.take() {
        Some(ReadyPipe(mut pipe)) => {
            let _ = pipe.write_all(b"OK\n");
            drop(pipe);
            detach_stdio(p.log.as_deref());
        }
        None => eprintln!(
            "nandkit: mounted {} on {}; Ctrl-C or `fusermount3 -u {}` unmounts",
            p.image.display(),
            p.mountpoint.display(),
            p.mountpoint.display()
        ),
    }
    let served = session.run();
    // The kernel has let go of the mount: say so first (a command run meanwhile waits for
    // us, and says why), then flush everything and write the checkpoint.
    announcement.session_ended();
    hold_for_tests();
    let fs = shared
        .write()
        .map_err(|_| anyhow::anyhow!("a request handler panicked; not writing a checkpoint"))?
        .take();
    let keeps_checkpoints = fs.as_ref().is_some_and(|fs| fs.config().checkpoint);
    let result = match fs {
        Some(fs) => fs
            .unmount_reporting()
            .and_then(|(mut dev, written)| {
                dev.sync()?;
                Ok(written)
            })
            .with_context(|| format!("unmounting {}", p.image.display())),
        None => Ok(false),
    };
    match (&served, &result) {
        (Err(e), _) => eprintln!("nandkit: FUSE session ended with an error: {e}"),
        (Ok(()), Ok(written)) => eprintln!(
            "nandkit: unmounted {}: everything flushed{}",
            p.image.display(),
            match (*written, keeps_checkpoints && !p.config.read_only) {
                (true, _) => ", checkpoint written",
                (false, true) => "; no checkpoint could be written, the next mount scans",
                (false, false) => "",
            }
        ),
        _ => {}
    }
    let result = result.map(|_| ());
    if let Err(e) = &result {
        eprintln!("Error: {e:?}");
    }
    result
}

/// Test hook: with `NANDKIT_TEST_UNMOUNT_GATE=PATH` (an absolute path) in its environment,
/// the daemon, once it has said it is unmounting, waits until PATH exists (at most a minute)
/// before it writes anything out, so the integration tests can hold it in that state
/// without racing it.
fn hold_for_tests() {
    let Some(gate) = std::env::var_os("NANDKIT_TEST_UNMOUNT_GATE") else {
        return;
    };
    let start = Instant::now();
    while !Path::new(&gate).exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Started {
    session: fuser::Session<fuse::NandFuse>,
    shared: fuse::SharedFs,
    announcement: Arc<image::Announcement>,
    /// Dropped last: withdraws the announcement, then releases the image.
    _lock: image::ImageLock,
}

fn start(p: &Prepared) -> anyhow::Result<Started> {
    let mut lock = image::lock(&p.image, Access::Write)?;
    let dev = image::open_device(
        &p.image,
        DeviceOptions {
            realtime: p.realtime,
            host: nandkit_flash::HostCost::ZERO,
            // In real time each chip sleeps through its operations: a worker thread per
            // chip (MA's executor) lets P chips sleep at once, so wall time scales with P.
            executor: if p.realtime {
                ExecutorKind::Threaded
            } else {
                ExecutorKind::Simulated
            },
        },
    )?;
    let mut fs = image::mount_with(
        &p.image,
        dev,
        MountOptions {
            read_only: p.config.read_only,
            force_scan: false,
            clock: Arc::new(clock::CoarseClock),
            atime: p.config.fuse.atime,
        },
        p.nvram.as_deref(),
    )?;
    fs.set_dir_atime(p.config.fuse.dir_atime);
    log_chip_failures(&mut fs);
    let chunk_bytes = fs.chunk_bytes();
    let capacity = {
        let s = fs.statfs();
        s.total_chunks.saturating_mul(u64::from(s.chunk_bytes))
    };
    let shared: fuse::SharedFs = Arc::new(RwLock::new(Some(fs)));
    let invalidations = Arc::new(invalidate::Invalidations::default());
    let writers = Arc::new(commit::Writers::default());
    let guard = Arc::new(OnceLock::new());
    let activity = Arc::new(idle_clean::Activity::default());
    let handler = fuse::NandFuse::new(
        Arc::clone(&shared),
        chunk_bytes,
        p.config.fuse.clone(),
        Arc::clone(&invalidations),
        Arc::clone(&writers),
        Arc::clone(&guard),
        Arc::clone(&activity),
    )
    .with_image_guard(image_guard::ImageGuard::new(&p.image).ok());

    // Signals are taken by one thread (below); every thread fuser starts inherits the mask.
    let signals = block_signals()?;
    let session = fuser::Session::new(handler, &p.mountpoint, &p.config.fuser_config(&p.image))
        .map_err(|e| {
            // Nothing was served: hand the file system back cleanly (a checkpoint as usual).
            if let Some(fs) = shared.write().ok().and_then(|mut g| g.take()) {
                let _ = fs.unmount();
            }
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (allow_other as a non-root user needs user_allow_other in /etc/fuse.conf)"
            } else {
                ""
            };
            anyhow::anyhow!("mounting FUSE on {}: {e}{hint}", p.mountpoint.display())
        })?;
    invalidations.start(session.notifier(), session.notifier())?;
    if p.config.fuse.writeback {
        let limit = p
            .config
            .dirty_limit
            .unwrap_or_else(|| space_guard::default_bound(capacity));
        let _ = guard.set(space_guard::SpaceGuard::start(&p.mountpoint, limit));
    }
    if !p.config.read_only {
        commit::start(
            Arc::clone(&shared),
            p.config.fuse.commit,
            writers,
            p.config.fuse.writeback.then(|| Arc::clone(&invalidations)),
        )?;
        if let Some(after) = p.config.idle_clean {
            idle_clean::start(Arc::clone(&shared), activity, after)?;
        }
    }
    // The mount is up: from now on, say what we do with the image.
    let announcement = lock.announce(&p.image, &p.mountpoint, p.config.read_only);
    let mnt = p.mountpoint.clone();
    let told = Arc::clone(&announcement);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || signal_loop(signals, &mnt, &told))
        .context("starting the signal thread")?;
    Ok(Started {
        session,
        shared,
        announcement,
        _lock: lock,
    })
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread (and so in every thread it starts).
fn block_signals() -> anyhow::Result<libc::sigset_t> {
    // SAFETY: sigset manipulation on a local set, then pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            bail!(
                "blocking signals: {}",
                std::io::Error::from_raw_os_error(rc)
            );
        }
        Ok(set)
    }
}

/// Waits for a termination signal and unmounts; the session then ends by itself. Says
/// "unmounting" before it unmounts (a command run right after the signal then waits), and
/// what came of it after.
fn signal_loop(set: libc::sigset_t, mountpoint: &Path, announcement: &image::Announcement) {
    loop {
        let mut sig = 0;
        // SAFETY: sigwait on a set of signals blocked in every thread.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            return;
        }
        eprintln!("nandkit: signal {sig}: unmounting {}", mountpoint.display());
        announcement.set(image::DaemonState::Unmounting);
        match unmount(mountpoint) {
            Ok(Unmounted::Gone) => {}
            Ok(Unmounted::Detached) => announcement.set(image::DaemonState::Detached),
            Err(e) => {
                eprintln!("nandkit: {e}");
                announcement.set(image::DaemonState::Serving);
            }
        }
    }
}

/// How an [`unmount`] went.
#[derive(Debug, PartialEq, Eq)]
pub enum Unmounted {
    /// The mount is gone; the session ends now.
    Gone,
    /// The mount point was busy and is detached: the session ends when its last file
    /// closes.
    Detached,
}

/// Unmounts a FUSE mount point: directly as root, through fusermount3 otherwise. A busy
/// mount point is detached (lazy unmount): the session ends when its last file closes.
pub fn unmount(mountpoint: &Path) -> Result<Unmounted, String> {
    if unsafe { libc::geteuid() } == 0 {
        let c = CString::new(mountpoint.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: umount2 with a NUL-terminated path.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return Ok(Unmounted::Gone);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EBUSY)
            && unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0
        {
            eprintln!(
                "nandkit: {} is busy; detached it, the file system is written out when its \
                 last open file is closed",
                mountpoint.display()
            );
            return Ok(Unmounted::Detached);
        }
        return Err(format!("unmounting {}: {err}", mountpoint.display()));
    }
    let run = |lazy: bool| {
        let mut cmd = std::process::Command::new("fusermount3");
        cmd.arg("-u").arg("-q");
        if lazy {
            cmd.arg("-z");
        }
        cmd.arg("--").arg(mountpoint);
        cmd.status().map(|s| s.success()).unwrap_or(false)
    };
    if run(false) {
        Ok(Unmounted::Gone)
    } else if run(true) {
        Ok(Unmounted::Detached)
    } else {
        Err(format!(
            "fusermount3 -u {} failed; is fuse3 installed?",
            mountpoint.display()
        ))
    }
}

/// Points stdin at /dev/null and stdout/stderr at the log (or /dev/null), so the daemon
/// holds nothing of the terminal or of a caller's pipes.
fn detach_stdio(log: Option<&Path>) {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null");
    let out = match log {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path),
        None => std::fs::OpenOptions::new().write(true).open("/dev/null"),
    };
    use std::os::unix::io::AsRawFd;
    // SAFETY: dup2 onto the standard descriptors; the sources stay open until then.
    unsafe {
        if let Ok(n) = &null {
            libc::dup2(n.as_raw_fd(), 0);
        }
        if let Ok(o) = &out {
            libc::dup2(o.as_raw_fd(), 1);
            libc::dup2(o.as_raw_fd(), 2);
        }
        libc::chdir(c"/".as_ptr());
    }
}

/// Logs, once each, the chips of an array with parity that failed since the last call (at
/// the mount's attach, or under a request): the array goes on degraded.
pub fn log_chip_failures(fs: &mut nandkit_fs::FileSystem<nandkit_flash::StripedDevice>) {
    let events = fs.device_mut().take_parity_events();
    if events.is_empty() {
        return;
    }
    let reasons = fs.device_mut().failed_chips();
    for nandkit_flash::striped::parity::ParityEvent::ChipFailed { chip, why } in events {
        let why = reasons
            .iter()
            .find(|(c, _)| *c == chip)
            .map_or(why, |(_, w)| w.clone());
        eprintln!(
            "nandkit: chip {chip} of the array has failed ({why}): running degraded, its pages \
             rebuilt from parity on every read; one more failure loses data. Unmount and run \
             `nandkit rebuild IMAGE --chip {chip}` to restore redundancy"
        );
    }
}
