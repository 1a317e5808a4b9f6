//! The FUSE face of the file system: each kernel request becomes one call on the
//! `FileSystem`, under one lock.
//!
//! Inode numbers pass through unchanged: nandkit's root is object 1, as FUSE's is, and
//! nandkit never reuses an object number, so the generation is always 0.
//!
//! Caching: every change reaches the daemon through this kernel mount (the image is locked
//! against anyone else), so directory entries may be cached. With the write-back cache (the
//! default; guarded on a filling device by `space_guard`) the kernel owns sizes and times of
//! files being written anyway, and a short attribute TTL saves a GETATTR on every write.
//! With `-o nowriteback` attributes are not cached (TTL 0): the kernel asks again on every
//! stat, and a link count or ctime can never be stale.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use nandkit_flash::StripedDevice;

use super::acl;
use super::commit::Writers;
use super::gate::{self, Answer, Gate};
use super::idle_clean::Activity;
use super::image_guard::ImageGuard;
use super::invalidate::Invalidations;
use super::privs::{self, Caller};
use super::refused::{self, Refused};
use super::space_guard::SpaceGuard;
use nandkit_fs::{
    AtimePolicy, Attr, FileSystem, FsError, Ino, Kind, NewObject, RenameMode, SetAttr, Time,
    XattrMode,
};

thread_local! {
    /// The read handler's buffer, one per request thread (see `read`).
    static READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The mounted file system, shared with the code that unmounts it when the session ends.
pub type SharedFs = Arc<RwLock<Option<FileSystem<StripedDevice>>>>;

/// `st_blksize`: the I/O size tools such as cp use. Much larger than a flash page, so each
/// FUSE request carries many chunks.
const BLKSIZE: u32 = 64 * 1024;

/// Largest write the kernel may send in one request.
pub const MAX_WRITE: u32 = 1 << 20;

/// How the mount behaves (from -o options).
#[derive(Clone, Debug)]
pub struct FuseOptions {
    pub read_only: bool,
    /// Ask the kernel for its write-back cache.
    pub writeback: bool,
    pub attr_ttl: Duration,
    pub entry_ttl: Duration,
    /// Seconds between commits of written-but-unsynced data (`-o commit=`).
    pub commit: Duration,
    /// When reads update access times (`-o relatime`, `strictatime`, `noatime`).
    pub atime: AtimePolicy,
    /// Whether listing a directory does too (`-o nodiratime` turns it off).
    pub dir_atime: bool,
}

/// A directory listing taken at the first read of a directory handle (and again at each
/// rewind). Offsets are positions in it, so while entries are added and removed a reader
/// still sees each entry that was there when it started exactly once; entries added since
/// may be missing and removed ones may still show, as POSIX allows.
struct DirSnapshot {
    ino: Ino,
    entries: Vec<(u64, FileType, Vec<u8>)>,
    /// A read at offset 0 after this one is a rewind: list afresh.
    served: bool,
}

pub struct NandFuse {
    fs: SharedFs,
    opts: FuseOptions,
    chunk_bytes: u32,
    dirs: Mutex<HashMap<u64, DirSnapshot>>,
    next_fh: AtomicU64,
    invalidations: Arc<Invalidations>,
    /// Files open for writing (the commit thread's cue to flush the page cache).
    writers: Arc<Writers>,
    /// The kernel left dropping privileges to us (FUSE_HANDLE_KILLPRIV_V2).
    killpriv: bool,
    /// POSIX ACLs are on (FUSE_POSIX_ACL): see `acl`.
    posix_acl: bool,
    /// Which opens may cache writes (set once the mount is up; see `space_guard`).
    guard: Arc<OnceLock<SpaceGuard>>,
    /// When requests come, for the idle cleaner.
    activity: Arc<Activity>,
    /// The image file's length, checked at every request (see `image_guard`).
    image: Option<ImageGuard>,
    /// Refused write-backs still to be reported at write(2) (see `refused`).
    refused: Refused,
    /// Less room than the kernel may hold dirty (see `gate`), as of the last request.
    tight: AtomicBool,
    /// Where cached writers ask on a nearly full device (see `gate`).
    gate: Gate,
}

/// Bytes free for new data.
pub fn room(fs: &FileSystem<StripedDevice>) -> u64 {
    fs.free_chunks().saturating_mul(u64::from(fs.chunk_bytes()))
}

/// Does an open with these flags write?
fn writes(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

fn caller(req: &Request) -> Caller {
    Caller {
        pid: req.pid(),
        uid: req.uid(),
        gid: req.gid(),
    }
}

fn errno(e: &FsError) -> Errno {
    // The caller sees only ENOSPC, on a device that may be nearly empty: say why, once.
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if matches!(e, FsError::NoObjectNumbers(_))
        && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        eprintln!("nandkit: creates fail with ENOSPC: {e}");
    }
    Errno::from_i32(e.errno())
}

fn ino32(ino: INodeNo) -> Result<Ino, Errno> {
    Ino::try_from(ino.0).map_err(|_| Errno::ENOENT)
}

fn name_bytes(name: &OsStr) -> &[u8] {
    name.as_bytes()
}

/// A nandkit time as the kernel wants it (the whole 64-bit-seconds range).
fn system_time(t: Time) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(t.nsec));
    let shifted = if t.sec >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(t.sec as u64))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(t.sec.unsigned_abs()))
    };
    shifted
        .and_then(|s| s.checked_add(nsec))
        .unwrap_or(UNIX_EPOCH)
}

/// A time the kernel sent, as seconds and nanoseconds (negative: before 1970).
pub fn nandkit_time(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Time::new(
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let sec = -i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_nanos() {
                0 => Time::new(sec, 0),
                n => Time::new(sec - 1, 1_000_000_000 - n),
            }
        }
    }
}

fn time_or_now(t: TimeOrNow) -> Time {
    match t {
        TimeOrNow::SpecificTime(t) => nandkit_time(t),
        TimeOrNow::Now => nandkit_time(SystemTime::now()),
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
        Kind::Symlink => FileType::Symlink,
        Kind::CharDev => FileType::CharDevice,
        Kind::BlockDev => FileType::BlockDevice,
        Kind::Fifo => FileType::NamedPipe,
        Kind::Socket => FileType::Socket,
        // Never shown by the file system's API (it answers with the file itself).
        Kind::HardLink | Kind::Xattrs => FileType::RegularFile,
    }
}

/// The object kind a mknod mode asks for.
fn kind_of_mode(mode: u32) -> Option<Kind> {
    match mode & libc::S_IFMT {
        libc::S_IFREG | 0 => Some(Kind::File),
        libc::S_IFCHR => Some(Kind::CharDev),
        libc::S_IFBLK => Some(Kind::BlockDev),
        libc::S_IFIFO => Some(Kind::Fifo),
        libc::S_IFSOCK => Some(Kind::Socket),
        _ => None,
    }
}

/// A new object of `kind`; its owner is filled in by `NandFuse::make`.
fn object(kind: Kind, mode: u32, rdev: u64, target: &[u8]) -> NewObject<'_> {
    NewObject {
        kind,
        perm: mode,
        uid: 0,
        gid: 0,
        rdev,
        target,
    }
}

impl NandFuse {
    pub fn new(
        fs: SharedFs,
        chunk_bytes: u32,
        opts: FuseOptions,
        invalidations: Arc<Invalidations>,
        writers: Arc<Writers>,
        guard: Arc<OnceLock<SpaceGuard>>,
        activity: Arc<Activity>,
    ) -> Self {
        let answer: Arc<Answer> = {
            let (fs, guard, ttl) = (Arc::clone(&fs), Arc::clone(&guard), opts.attr_ttl);
            Arc::new(move |ino, writers, stored| {
                let (a, ttl) = gate::answer(&fs, &guard, ttl, ino, writers, stored)?;
                Ok((Self::file_attr(&a, chunk_bytes), ttl))
            })
        };
        Self {
            gate: Gate::new(Arc::clone(&invalidations), Arc::clone(&writers), answer),
            fs,
            opts,
            chunk_bytes,
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            invalidations,
            writers,
            killpriv: false,
            posix_acl: false,
            guard,
            activity,
            refused: Refused::default(),
            image: None,
            tight: AtomicBool::new(false),
        }
    }

    /// Watches the image file for shrinking under the mount (see `image_guard`).
    pub fn with_image_guard(mut self, guard: Option<ImageGuard>) -> Self {
        self.image = guard;
        self
    }

    /// A new file handle for an open with `flags` served as `open` says (see
    /// `refused::handle`).
    fn file_handle(&self, flags: i32, open: FopenFlags) -> FileHandle {
        let n = self.next_fh.fetch_add(1, Ordering::Relaxed);
        let cached = self.opts.writeback && !open.contains(FopenFlags::FOPEN_DIRECT_IO);
        FileHandle(refused::handle(n, writes(flags), cached))
    }

    /// After each change: once the room left is below what the kernel may hold dirty,
    /// every file open for writing has its attributes forgotten, so a cached write(2)
    /// asks before it goes on (see `gate`); the flag comes first, so the answers have a
    /// zero timeout.
    fn watch_room(&self, fs: &FileSystem<StripedDevice>) {
        let Some(guard) = self.guard.get() else {
            return;
        };
        let tight = guard.tight(room(fs));
        if tight && !self.tight.swap(true, Ordering::SeqCst) {
            for ino in self.writers.inodes() {
                self.invalidations.attrs_changed(ino);
            }
        } else if !tight {
            self.tight.store(false, Ordering::SeqCst);
        }
    }

    /// How long the kernel may keep attributes: not at all while the device is nearly
    /// full, so each cached write(2) asks (see `gate`).
    fn attr_ttl(&self) -> Duration {
        if self.tight.load(Ordering::SeqCst) {
            Duration::ZERO
        } else {
            self.opts.attr_ttl
        }
    }

    /// Whether the room left covers what the kernel may hold dirty (see `space_guard`),
    /// asked under the file system's lock.
    fn room_for_cache(&self, fs: &FileSystem<StripedDevice>) -> bool {
        let Some(guard) = self.guard.get() else {
            return false;
        };
        guard.cache_writes(room(fs))
    }

    /// How a file opened with `flags` is served, given whether there is room for the
    /// kernel's dirty pages. Cached pages stay good across opens: only this mount changes
    /// the data. With the write-back cache an open for writing gets direct I/O unless the
    /// room left covers what the kernel may hold dirty (see `space_guard`).
    fn open_flags(&self, flags: i32, room_for_cache: bool) -> FopenFlags {
        let direct = self.opts.writeback && writes(flags) && !room_for_cache;
        if direct {
            FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }

    /// A write was refused (in part): the kernel may hold the refused bytes in its page
    /// cache (a write-back of an mmap'd or write-back-cached page keeps the page), where
    /// readers would see data that was never stored. Has the kernel drop its cached pages
    /// of `ino`, so what readers see is what is stored.
    fn forget_cached(&self, ino: INodeNo) {
        self.invalidations.request(ino.0);
    }

    /// Has the kernel hand over its dirty pages of `ino` before the daemon answers from
    /// what it stores: SEEK_DATA / SEEK_HOLE reach the daemon without the kernel writing
    /// back first, and bytes in the cache are data. The invalidation thread asks the kernel
    /// to drop the file's pages, which writes each dirty one back to the daemon first (as
    /// the commit thread does); another request thread serves those writes while this one
    /// waits, which it does for at most a second: with `-o threads=1` nobody can serve them
    /// meanwhile, so the answer comes from what is stored (the drop still happens).
    fn write_back_now(&self, ino: INodeNo) {
        self.invalidations.request(ino.0);
        self.invalidations.wait();
    }

    /// With the write-back cache the kernel owns a file's size: a write it accepted into
    /// its cache grew the size there, and it keeps that size even when the write-back is
    /// refused (it never asks the daemon for the size of a file it caches). So the stored
    /// file grows to `end` too, the refused range a hole: once the refused pages are
    /// dropped, readers see zeros there both through the cache and after a remount, and the
    /// writer learns of the loss from fsync or close.
    fn keep_kernel_size(&self, ino: INodeNo, end: u64) {
        let r = ino32(ino).and_then(|i| {
            self.with_fs(|fs| {
                if fs.getattr(i)?.size < end {
                    fs.setattr(
                        i,
                        SetAttr {
                            size: Some(end),
                            ..SetAttr::default()
                        },
                    )?;
                }
                Ok(())
            })
        });
        if let Err(e) = r {
            eprintln!(
                "nandkit: a refused write-back of {} left it shorter than the kernel thinks: {e:?}",
                ino.0
            );
        }
    }

    /// What a change to `ino` takes away (see `privs`): its file capability, and the
    /// setuid/setgid bits `perm_after` says go (given the bits and the file's group).
    /// Whether anything went: the kernel's copy of the mode (and ctime) is then stale,
    /// unless the reply carries the attributes (see `Invalidations::attrs_changed`).
    fn drop_privileges(
        &self,
        fs: &mut FileSystem<StripedDevice>,
        ino: Ino,
        perm_after: impl FnOnce(u32, u32) -> Option<u32>,
    ) -> Result<bool, FsError> {
        if !self.killpriv {
            return Ok(false);
        }
        let mut dropped = false;
        if fs.has_xattrs(ino) {
            match fs.removexattr(ino, privs::capability_name()) {
                Ok(()) => dropped = true,
                Err(FsError::NoData) => {}
                Err(e) => return Err(e),
            }
        }
        let a = fs.getattr(ino)?;
        if a.kind == Kind::Dir || a.perm & (libc::S_ISUID | libc::S_ISGID) == 0 {
            return Ok(dropped);
        }
        if let Some(perm) = perm_after(a.perm, a.gid).filter(|&p| p != a.perm) {
            acl::set_perm(fs, ino, perm)?;
            dropped = true;
        }
        Ok(dropped)
    }

    /// copy_file_range: up to `len` bytes (at most `COPY_MAX` a call; the caller asks
    /// again for the rest), a chunk of `COPY_STEP` under the lock at a time. Stops at the
    /// end of the source. Errors as the man page lists: EINVAL for overlapping ranges of
    /// one file, EFBIG past the largest file, EISDIR / EINVAL for what is not a file.
    fn copy_range(
        &self,
        who: Caller,
        src: Ino,
        mut from: u64,
        dst: Ino,
        mut to: u64,
        len: u64,
    ) -> Result<u32, Errno> {
        const COPY_STEP: u64 = 1 << 20;
        const COPY_MAX: u64 = 1 << 30;
        let len = len.min(COPY_MAX);
        if src == dst && from < to.saturating_add(len) && to < from.saturating_add(len) {
            return Err(Errno::EINVAL);
        }
        let mut done = 0u64;
        let mut dropped = false;
        let mut buf = vec![0u8; COPY_STEP.min(len) as usize];
        while done < len {
            let step = (len - done).min(COPY_STEP) as usize;
            let n = self.with_fs(|fs| {
                let n = fs.read(src, from, &mut buf[..step])?;
                if n == 0 {
                    return Ok(0);
                }
                if done == 0 {
                    dropped = self
                        .drop_privileges(fs, dst, |perm, gid| who.perm_after_change(perm, gid))?;
                }
                fs.write(dst, to, &buf[..n])
            });
            match n {
                Ok(0) => break,
                Ok(n) => {
                    done += n as u64;
                    from += n as u64;
                    to += n as u64;
                }
                // What was copied stands; the error comes with the next call.
                Err(_) if done > 0 => break,
                Err(e) => return Err(e),
            }
        }
        if dropped {
            self.invalidations.attrs_changed(u64::from(dst));
        }
        Ok(done as u32)
    }

    /// Runs `f` on the file system with its lock held exclusively. A lock poisoned by a
    /// panic, or a file system already handed back for unmounting, answers EIO.
    fn with_fs<T>(
        &self,
        f: impl FnOnce(&mut FileSystem<StripedDevice>) -> Result<T, FsError>,
    ) -> Result<T, Errno> {
        self.activity.touch();
        self.check_image()?;
        let mut guard = self.fs.write().map_err(|_| Errno::EIO)?;
        let fs = guard.as_mut().ok_or(Errno::EIO)?;
        let out = f(fs).map_err(|e| errno(&e));
        super::log_chip_failures(fs);
        self.watch_room(fs);
        self.activity.touch();
        out
    }

    /// Runs `f` on the file system with its lock shared: reads run together (each takes
    /// the device only for its submit).
    fn with_fs_shared<T>(
        &self,
        f: impl FnOnce(&FileSystem<StripedDevice>) -> Result<T, FsError>,
    ) -> Result<T, Errno> {
        self.activity.touch();
        self.check_image()?;
        let guard = self.fs.read().map_err(|_| Errno::EIO)?;
        let fs = guard.as_ref().ok_or(Errno::EIO)?;
        let out = f(fs).map_err(|e| errno(&e));
        self.activity.touch();
        out
    }

    /// EIO once the image file has shrunk under the mount: the file system's memory map
    /// of it must not be touched again.
    fn check_image(&self) -> Result<(), Errno> {
        match &self.image {
            Some(g) if !g.intact() => Err(Errno::EIO),
            _ => Ok(()),
        }
    }

    /// fsync and fsyncdir: the object's data and header reach flash (nothing to do on a
    /// read-only mount).
    fn fsync_ino(&self, ino: INodeNo) -> Result<(), Errno> {
        if self.opts.read_only {
            return Ok(());
        }
        ino32(ino).and_then(|i| self.with_fs(|fs| fs.fsync(i)))
    }

    fn attr(&self, a: &Attr) -> FileAttr {
        Self::file_attr(a, self.chunk_bytes)
    }

    fn file_attr(a: &Attr, chunk_bytes: u32) -> FileAttr {
        let ctime = system_time(a.ctime);
        FileAttr {
            ino: INodeNo(u64::from(a.ino)),
            size: a.size,
            // st_blocks counts 512-byte units of space held.
            blocks: (a.blocks * u64::from(chunk_bytes)).div_ceil(512),
            atime: system_time(a.atime),
            mtime: system_time(a.mtime),
            ctime,
            crtime: ctime,
            kind: file_type(a.kind),
            perm: (a.perm & 0o7777) as u16,
            nlink: a.nlink,
            uid: a.uid,
            gid: a.gid,
            // FUSE carries the kernel's 32-bit encoding of dev_t; mknod gave us that form.
            rdev: a.rdev as u32,
            blksize: BLKSIZE,
            flags: 0,
        }
    }

    fn reply_entry(&self, reply: ReplyEntry, r: Result<Attr, Errno>) {
        match r {
            Ok(a) => reply.entry_with_ttls(
                &self.attr_ttl(),
                &self.opts.entry_ttl,
                &self.attr(&a),
                Generation(0),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// Creates an object as `req`'s user (`new`'s owner fields are filled in here), and
    /// opens it if asked. A
    /// set-gid directory passes its group on, and its set-gid bit to new subdirectories
    /// (as on every Linux file system). With POSIX ACLs the directory's default ACL, or
    /// else the `umask`, applies here (see `acl`).
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mut new: NewObject<'_>,
        umask: u32,
        open: bool,
    ) -> Result<Attr, Errno> {
        let parent = ino32(parent)?;
        self.with_fs(|fs| {
            let p = fs.getattr(parent)?;
            new.perm &= 0o7777;
            new.uid = req.uid();
            new.gid = req.gid();
            if p.perm & libc::S_ISGID != 0 {
                new.gid = p.gid;
                if new.kind == Kind::Dir {
                    new.perm |= libc::S_ISGID;
                }
            }
            let inherited = if self.posix_acl {
                acl::inherit(fs, parent, new.kind, &mut new.perm, umask)?
            } else {
                acl::Inherited::default()
            };
            let a = acl::create_inheriting(fs, parent, name_bytes(name), new, inherited)?;
            // The kernel now knows the object: it stays in RAM until forgotten.
            fs.remember(a.ino)?;
            if open {
                // Under the same lock, so nobody can unlink it before it is open.
                fs.open(a.ino)?;
            }
            Ok(a)
        })
    }

    fn snapshot(&self, ino: Ino) -> Result<Vec<(u64, FileType, Vec<u8>)>, Errno> {
        self.with_fs(|fs| {
            let parent = fs.parent_of(ino)?;
            let list = fs.readdir(ino)?;
            let mut out = Vec::with_capacity(list.len() + 2);
            out.push((u64::from(ino), FileType::Directory, b".".to_vec()));
            out.push((u64::from(parent), FileType::Directory, b"..".to_vec()));
            out.extend(
                list.into_iter()
                    .map(|e| (u64::from(e.ino), file_type(e.kind), e.name)),
            );
            Ok(out)
        })
    }
}

impl Filesystem for NandFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Both only raise limits; the kernel clamps them to what it allows.
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_background(64);
        // File handles that survive the kernel forgetting an inode, and remounts.
        let _ = config.add_capabilities(InitFlags::FUSE_EXPORT_SUPPORT);
        // The daemon drops setuid, setgid and file capabilities itself (see `privs`), so
        // the kernel need not ask for security.capability before every write.
        self.killpriv = config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        // POSIX ACLs, checked by the kernel; the daemon keeps the mode and the ACLs in step,
        // and applies the umask or the directory's default ACL to new objects (see `acl`).
        // FUSE_DONT_MASK: otherwise the kernel applies the umask before we see the mode,
        // also where a default ACL means it must not. Both or neither.
        self.posix_acl = config
            .add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK)
            .is_ok();
        if self.opts.writeback
            && config
                .add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
                .is_err()
        {
            self.opts.writeback = false;
        }
        // Files opened for writing on a nearly full device get direct I/O (see
        // `space_guard`); they may still be mapped, through the page cache as before.
        if self.opts.writeback {
            let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = ino32(parent).and_then(|p| {
            self.with_fs(|fs| {
                let a = match name_bytes(name) {
                    // File handles (FUSE_EXPORT_SUPPORT): the kernel looks up "." of an
                    // object number it no longer caches, and ".." of a directory to
                    // reconnect it. Object numbers are never reused, so a handle to a
                    // deleted object finds nothing (ESTALE), and they survive remounts.
                    b"." => {
                        let a = fs.getattr(p)?;
                        if a.nlink == 0 {
                            return Err(FsError::NotFound);
                        }
                        a
                    }
                    b".." => {
                        let up = fs.parent_dir(p)?;
                        fs.getattr(up)?
                    }
                    n => fs.lookup(p, n)?,
                };
                // Each entry the kernel gets is one lookup it will forget: until then the
                // object answers getattr even if its last name goes (fstat on an open
                // descriptor of a removed file, directory or FIFO).
                fs.remember(a.ino)?;
                Ok(a)
            })
        });
        self.reply_entry(reply, r);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if let Ok(i) = ino32(ino) {
            let _ = self.with_fs(|fs| fs.forget(i, nlookup));
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        // With a handle open for writing: possibly a cached write(2) asking (see `refused`).
        if fh.is_some_and(|fh| refused::writes(fh.0)) {
            let room = || {
                self.with_fs(|fs| Ok(self.room_for_cache(fs)))
                    .unwrap_or(false)
            };
            if let Some(e) = self.refused.pending(ino.0, room) {
                return reply.error(Errno::from_i32(e));
            }
        }
        // A cached writer on a nearly full device: answered once what the kernel holds is
        // stored, ENOSPC if no room is left for more (see `gate`).
        if fh.is_some_and(|fh| refused::cached(fh.0)) && self.tight.load(Ordering::SeqCst) {
            return self.gate.ask(ino.0, reply);
        }
        match ino32(ino).and_then(|i| self.with_fs(|fs| fs.getattr(i))) {
            Ok(a) => reply.attr(&self.attr_ttl(), &self.attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time_or_now),
            mtime: mtime.map(time_or_now),
            // Sent only by the write-back cache, whose times are the kernel's.
            ctime: ctime.map(nandkit_time),
        };
        let who = caller(req);
        let r = ino32(ino).and_then(|i| {
            self.with_fs(|fs| {
                // chown, and chown(-1, -1), which reaches us as a setattr of nothing (but,
                // under the write-back cache, the kernel's ctime).
                let nothing = SetAttr {
                    ctime: None,
                    ..set.clone()
                } == SetAttr::default();
                let chown = set.uid.is_some() || set.gid.is_some() || nothing;
                if chown && set.perm.is_none() {
                    self.drop_privileges(fs, i, |perm, _| privs::after_chown(perm))?;
                }
                if set.size.is_some() && set.perm.is_none() {
                    self.drop_privileges(fs, i, |perm, gid| who.perm_after_change(perm, gid))?;
                }
                if set == SetAttr::default() {
                    // Only a flag nandkit does not keep: nothing to store.
                    fs.getattr(i)
                } else if let Some(perm) = set.perm.filter(|_| self.posix_acl) {
                    // chmod: a stored access ACL follows the mode (the kernel leaves it to
                    // us).
                    fs.setattr(i, set)?;
                    acl::chmod(fs, i, perm)?;
                    fs.getattr(i)
                } else {
                    fs.setattr(i, set)
                }
            })
        });
        match r {
            Ok(a) => reply.attr(&self.attr_ttl(), &self.attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match ino32(ino).and_then(|i| self.with_fs(|fs| fs.readlink(i))) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = match kind_of_mode(mode) {
            Some(kind) => self.make(
                req,
                parent,
                name,
                object(kind, mode, u64::from(rdev), &[]),
                umask,
                false,
            ),
            None => Err(Errno::EINVAL),
        };
        self.reply_entry(reply, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self.make(
            req,
            parent,
            name,
            object(Kind::Dir, mode, 0, &[]),
            umask,
            false,
        );
        self.reply_entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = ino32(parent).and_then(|p| self.with_fs(|fs| fs.unlink(p, name_bytes(name))));
        Self::reply_empty(reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = ino32(parent).and_then(|p| self.with_fs(|fs| fs.rmdir(p, name_bytes(name))));
        Self::reply_empty(reply, r);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        let r = self.make(
            req,
            parent,
            link_name,
            object(Kind::Symlink, 0o777, 0, target),
            0,
            false,
        );
        self.reply_entry(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mode = if flags.is_empty() {
            RenameMode::Replace
        } else if flags == RenameFlags::RENAME_NOREPLACE {
            RenameMode::NoReplace
        } else if flags == RenameFlags::RENAME_EXCHANGE {
            RenameMode::Exchange
        } else {
            // RENAME_WHITEOUT (overlayfs) or a combination the kernel should have refused.
            return reply.error(Errno::EINVAL);
        };
        let r = ino32(parent).and_then(|p| {
            let np = ino32(newparent)?;
            self.with_fs(|fs| fs.rename(p, name_bytes(name), np, name_bytes(newname), mode))
        });
        Self::reply_empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = ino32(ino).and_then(|i| {
            let np = ino32(newparent)?;
            self.with_fs(|fs| {
                let a = fs.link(i, np, name_bytes(newname))?;
                fs.remember(a.ino)?;
                Ok(a)
            })
        });
        self.reply_entry(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // The kernel serves reads from its page cache (FOPEN_KEEP_CACHE), so most never
        // reach the daemon: an open for reading counts as the access (relatime rules).
        let reads = flags.0 & libc::O_ACCMODE != libc::O_WRONLY;
        // Pages of a refused write-back are dropped after the writer's reply: a reader
        // opening the file after that write-back must not find them still cached.
        self.invalidations.wait();
        // fs.open counts handles, so a file unlinked while open lives until the last close.
        let opened = ino32(ino).and_then(|i| {
            self.with_fs(|fs| {
                fs.open(i)?;
                let moved = reads && fs.atime_due(i);
                if reads && !self.opts.read_only {
                    fs.access(i)?;
                }
                Ok((self.room_for_cache(fs), moved))
            })
        });
        match opened {
            Ok((room, moved)) => {
                // The kernel decides access times of reads from its cache by its own
                // rules (relatime, whatever this mount's policy): ours must win.
                if moved {
                    self.invalidations.attrs_changed(ino.0);
                }
                if writes(flags.0) {
                    self.writers.opened(ino.0);
                }
                let open = self.open_flags(flags.0, room);
                reply.opened(self.file_handle(flags.0, open), open)
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Each request thread reuses one buffer (no allocation and zeroing per read): the
        // file system fills every byte it returns, and the reply is sent before the next
        // request on this thread.
        READ_BUF.with_borrow_mut(|buf| {
            let size = size as usize;
            if buf.len() < size {
                buf.resize(size, 0);
            }
            let buf = &mut buf[..size];
            let read = ino32(ino).and_then(|i| {
                let shared = self.with_fs_shared(|fs| {
                    if !fs.map_loaded(i) {
                        return Ok(None);
                    }
                    let n = fs.read_shared(i, offset, buf)?;
                    Ok(Some((n, fs.atime_due(i))))
                })?;
                // A file whose map a MiNV mount has not read yet (open reads it, so only
                // a read without an open lands here): the exclusive read loads it, and
                // moves the access time itself.
                let (n, due) = match shared {
                    Some(x) => x,
                    None => (self.with_fs(|fs| fs.read(i, offset, buf))?, false),
                };
                if due {
                    // The bytes are read; a file unlinked meanwhile has no time left to move.
                    if self.with_fs(|fs| fs.access(i)).is_ok() {
                        self.invalidations.attrs_changed(ino.0);
                    }
                }
                Ok(n)
            });
            match read {
                Ok(n) => reply.data(&buf[..n]),
                Err(e) => reply.error(e),
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The kernel flags a write by a caller without CAP_FSETID.
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        // With the write-back cache the kernel keeps the times of a cached write and
        // sends them (SETATTR) once it has written the data back, possibly before the
        // last of that data reaches us: a write-back must not move them past the
        // kernel's. (Without the cache the kernel leaves the times to us.)
        let from_cache = self.opts.writeback && write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        let who = caller(req);
        let mut dropped = false;
        let written = ino32(ino).and_then(|i| {
            self.with_fs(|fs| {
                // Before the data, as Linux does: a write never lands with privileges kept.
                dropped = self.drop_privileges(fs, i, |perm, gid| {
                    kill.then(|| privs::after_change(perm, || who.in_group(gid)))
                        .flatten()
                })?;
                if from_cache {
                    fs.write_back(i, offset, data)
                } else {
                    fs.write(i, offset, data)
                }
            })
        });
        if dropped {
            self.invalidations.attrs_changed(ino.0);
        }
        // A write-back stored in part is refused as a whole: the kernel takes a short
        // count for a write-back as success, so the writer would never hear of the rest
        // (fsync and close would succeed with a hole in the file). What was stored stays.
        let written = match written {
            Ok(n) if from_cache && n < data.len() => Err(Errno::ENOSPC),
            w => w,
        };
        let refused = !matches!(written, Ok(n) if n == data.len());
        // Only a write from the page cache grew the kernel's size before we saw it (a
        // direct write that fails leaves the size alone).
        if refused && from_cache {
            self.keep_kernel_size(ino, offset + data.len() as u64);
            // The writer hears of it at its next write(2) (see `refused`); the page drop
            // below also makes the kernel ask for the attributes again.
            let errno = match &written {
                Err(e) => e.code(),
                Ok(_) => libc::EIO,
            };
            self.refused.record(ino.0, errno);
            // Before the reply, so even a write(2) right after the fsync that waited for
            // this write-back asks (the page drop comes later, from its thread).
            self.invalidations.attrs_changed(ino.0);
        }
        match written {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
        if refused {
            self.forget_cached(ino);
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() of a descriptor: the file's buffered chunk and header go to flash (YAFFS
        // flushes its cache on close too), so a closed file survives the daemon's death,
        // and close reports a failure to store it. A descriptor opened for reading stored
        // nothing: once the file system has turned itself read-only (damage found), its
        // close still succeeds (issue 59.6).
        let r = match self.fsync_ino(ino) {
            Err(e) if e == Errno::EROFS && !refused::writes(fh.0) => Ok(()),
            r => r,
        };
        Self::reply_empty(reply, r);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if writes(flags.0) {
            self.writers.closed(ino.0);
            if !self.writers.has(ino.0) {
                self.refused.forget(ino.0);
            }
        }
        let r = ino32(ino).and_then(|i| self.with_fs(|fs| fs.release(i)));
        Self::reply_empty(reply, r);
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Replies only once the data and the header that reaches it are on flash.
        Self::reply_empty(reply, self.fsync_ino(ino));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // The listing is taken at the first read (and again at each rewind), not here: a
        // reader sees the directory as it is when it starts reading.
        let r = ino32(ino).and_then(|i| self.with_fs(|fs| fs.getattr(i)));
        match r {
            Ok(a) if a.kind == Kind::Dir => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Ok(ino) = ino32(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let Ok(mut dirs) = self.dirs.lock() else {
            return reply.error(Errno::EIO);
        };
        let refresh = match dirs.get(&fh.0) {
            Some(d) => d.ino != ino || (offset == 0 && d.served),
            None => true,
        };
        if refresh {
            match self.snapshot(ino) {
                Ok(entries) => {
                    dirs.insert(
                        fh.0,
                        DirSnapshot {
                            ino,
                            entries,
                            served: false,
                        },
                    );
                }
                Err(e) => return reply.error(e),
            }
        }
        let Some(d) = dirs.get_mut(&fh.0) else {
            return reply.error(Errno::EIO);
        };
        d.served = true;
        // Offsets are positions in the snapshot: entry i carries offset i + 1, the
        // position to continue from.
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (child, kind, name)) in d.entries.iter().enumerate().skip(start) {
            if reply.add(
                INodeNo(*child),
                (i + 1) as u64,
                *kind,
                OsStr::from_bytes(name),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut dirs) = self.dirs.lock() {
            dirs.remove(&fh.0);
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(reply, self.fsync_ino(ino));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.with_fs(|fs| Ok(fs.statfs())) {
            Ok(s) => reply.statfs(
                s.total_chunks,
                s.free_chunks,
                s.free_chunks,
                // Each object needs a header page: free pages bound the objects that fit.
                s.objects + s.free_chunks,
                s.free_chunks,
                s.chunk_bytes,
                s.name_max,
                s.chunk_bytes,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let mode = match flags & (libc::XATTR_CREATE | libc::XATTR_REPLACE) {
            0 => XattrMode::Set,
            libc::XATTR_CREATE => XattrMode::Create,
            libc::XATTR_REPLACE => XattrMode::Replace,
            _ => return reply.error(Errno::EINVAL),
        };
        let (name, who) = (name_bytes(name), caller(req));
        let r = ino32(ino).and_then(|i| {
            self.with_fs(|fs| {
                if self.posix_acl && acl::is_acl(name) {
                    acl::set(fs, i, name, value, mode, who)
                } else {
                    fs.setxattr(i, name, value, mode)
                }
            })
        });
        Self::reply_empty(reply, r);
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match ino32(ino).and_then(|i| self.with_fs(|fs| fs.getxattr(i, name_bytes(name)))) {
            // size 0 asks how big the value is.
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match ino32(ino).and_then(|i| self.with_fs(|fs| fs.listxattr(i))) {
            Ok(names) => {
                let mut list = Vec::new();
                for n in names {
                    list.extend_from_slice(&n);
                    list.push(0);
                }
                if size == 0 {
                    reply.size(list.len() as u32)
                } else if list.len() > size as usize {
                    reply.error(Errno::ERANGE)
                } else {
                    reply.data(&list)
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_bytes(name);
        let r = ino32(ino).and_then(|i| {
            self.with_fs(|fs| {
                if self.posix_acl && acl::is_acl(name) {
                    acl::remove(fs, i, name)
                } else {
                    fs.removexattr(i, name)
                }
            })
        });
        Self::reply_empty(reply, r);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // The kernel checks permissions itself (default_permissions); this only answers
        // whether the object exists.
        let r = ino32(ino).and_then(|i| self.with_fs(|fs| fs.getattr(i).map(|_| ())));
        Self::reply_empty(reply, r);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self.make(
            req,
            parent,
            name,
            object(Kind::File, mode, 0, &[]),
            umask,
            true,
        );
        let room = self
            .with_fs(|fs| Ok(self.room_for_cache(fs)))
            .unwrap_or(false);
        match r {
            Ok(a) => {
                if writes(flags) {
                    self.writers.opened(a.ino.into());
                }
                reply.created(
                    &self.attr_ttl(),
                    &self.attr(&a),
                    Generation(0),
                    self.file_handle(flags, self.open_flags(flags, room)),
                    self.open_flags(flags, room),
                )
            }
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // Preallocation (the file system reserves room for the range, see its `fallocate`),
        // hole punching (Linux requires KEEP_SIZE with it) and zeroing. The kernel drops
        // its cached pages of the range itself after a punch or a zeroing
        // (truncate_pagecache_range in fuse_file_fallocate). Collapsing, inserting and
        // unsharing ranges are not supported.
        const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let op = mode & !libc::FALLOC_FL_KEEP_SIZE;
        let who = caller(req);
        let mut dropped = false;
        let r = ino32(ino).and_then(|i| {
            if op != 0 && mode != PUNCH && op != libc::FALLOC_FL_ZERO_RANGE {
                return Err(Errno::EOPNOTSUPP);
            }
            self.with_fs(|fs| {
                // As Linux's file_modified: privileges go before the file changes.
                dropped =
                    self.drop_privileges(fs, i, |perm, gid| who.perm_after_change(perm, gid))?;
                if op == 0 {
                    fs.fallocate(i, offset, length, keep_size)
                } else if mode == PUNCH {
                    fs.punch_hole(i, offset, length)
                } else {
                    fs.zero_range(i, offset, length, keep_size)
                }
            })
        });
        if dropped {
            self.invalidations.attrs_changed(ino.0);
        }
        Self::reply_empty(reply, r);
    }

    /// SEEK_DATA and SEEK_HOLE (the kernel sends only those; it handles the others).
    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        if self.opts.writeback && self.writers.has(ino.0) {
            self.write_back_now(ino);
        }
        let r = ino32(ino).and_then(|i| {
            let Ok(offset) = u64::try_from(offset) else {
                return Err(Errno::ENXIO);
            };
            match whence {
                libc::SEEK_DATA => self.with_fs(|fs| fs.seek_data(i, offset)),
                libc::SEEK_HOLE => self.with_fs(|fs| fs.seek_hole(i, offset)),
                _ => Err(Errno::EINVAL),
            }
        });
        match r {
            Ok(at) => reply.offset(at as i64),
            Err(e) => reply.error(e),
        }
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        // Copied inside the daemon: no data crosses into the kernel and back. (The kernel
        // has written back its dirty pages of both ranges first, and drops its cached
        // pages of the target range after.)
        let who = caller(req);
        let r = ino32(ino_in).and_then(|src| {
            let dst = ino32(ino_out)?;
            self.copy_range(who, src, offset_in, dst, offset_out, len)
        });
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }
}
