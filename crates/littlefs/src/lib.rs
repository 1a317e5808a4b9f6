//! littlefs, the C library (through `littlefs2-sys`), on a nandkit device, so that it and
//! nandkit's profiles count the same reads, programs, erases and simulated time.
//!
//! [`Littlefs`] owns everything littlefs uses: its state, its configuration, its caches
//! (read, program, lookahead, one per open file) and the device, each boxed so the pointers
//! littlefs keeps stay valid. littlefs is built without `malloc`, so [`Littlefs::ram_bytes`]
//! is all of its RAM. It implements the workloads' [`Target`], as nandkit does.
//!
//! Configuration: one page per read and program (the only unit NAND has), one erase block
//! per littlefs block, caches of one page, wear levelling every 500 erase cycles (littlefs
//! suggests 100-1000), everything else littlefs's default.

mod block_device;

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString};

use littlefs2_sys as ll;
use nandkit_flash::Flash;
use nandkit_workloads::{Target, TargetError};

pub use block_device::BlockDevice;

/// littlefs's "corrupted" error code (what an uncorrectable read returns by default).
pub const LFS_ERR_CORRUPT: i32 = ll::lfs_error_LFS_ERR_CORRUPT;
/// littlefs's I/O error code.
pub const LFS_ERR_IO: i32 = ll::lfs_error_LFS_ERR_IO;
/// littlefs's "no such file or directory" error code.
pub const LFS_ERR_NOENT: i32 = ll::lfs_error_LFS_ERR_NOENT;

/// `config` as littlefs needs it: no factory bad blocks (littlefs has no bad-block
/// handling; a bad block would be an I/O error to it forever). Bit errors stay: ECC
/// corrects them, and one beyond correction is an I/O error, as on real NAND.
pub fn without_bad_blocks(mut config: nandkit_flash::DeviceConfig) -> nandkit_flash::DeviceConfig {
    config.wear.factory_bad_fraction = 0.0;
    config
}

/// A littlefs call failed: littlefs's error code, and what the device said if it was the
/// device.
#[derive(Debug, thiserror::Error)]
#[error("littlefs {call}: {} ({code}){}", describe(*.code), .device.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
pub struct LfsError {
    pub call: &'static str,
    pub code: i32,
    pub device: Option<String>,
}

fn describe(code: i32) -> &'static str {
    match code {
        ll::lfs_error_LFS_ERR_IO => "I/O error",
        ll::lfs_error_LFS_ERR_CORRUPT => "corrupted",
        ll::lfs_error_LFS_ERR_NOENT => "no such file or directory",
        ll::lfs_error_LFS_ERR_EXIST => "exists",
        ll::lfs_error_LFS_ERR_NOTDIR => "not a directory",
        ll::lfs_error_LFS_ERR_ISDIR => "is a directory",
        ll::lfs_error_LFS_ERR_NOTEMPTY => "directory not empty",
        ll::lfs_error_LFS_ERR_FBIG => "file too large",
        ll::lfs_error_LFS_ERR_INVAL => "invalid argument",
        ll::lfs_error_LFS_ERR_NOSPC => "no space left",
        ll::lfs_error_LFS_ERR_NOMEM => "out of memory",
        ll::lfs_error_LFS_ERR_NAMETOOLONG => "name too long",
        _ => "error",
    }
}

impl LfsError {
    pub fn is_no_space(&self) -> bool {
        self.code == ll::lfs_error_LFS_ERR_NOSPC
    }
}

/// An open file: littlefs's handle, its configuration and its cache, boxed together.
struct OpenFile {
    file: ll::lfs_file_t,
    cfg: ll::lfs_file_config,
    cache: Box<[u8]>,
    /// Written or truncated since it was opened: closing it would commit.
    dirty: bool,
    /// When it was last used (`Littlefs::tick`).
    used: u64,
}

/// Handles kept open at most, beyond those with uncommitted changes. A handle costs a page
/// of cache; a program that reads many files closes each after reading, and so does this
/// adapter, oldest first, once more than this many are open (closing a clean handle writes
/// nothing). Handles with changes stay open until their file is synced, as the workloads
/// expect.
const MAX_OPEN: usize = 16;

/// littlefs mounted on a nandkit device.
pub struct Littlefs<F: Flash> {
    lfs: Box<ll::lfs_t>,
    cfg: Box<ll::lfs_config>,
    bd: Box<BlockDevice<F>>,
    read_cache: Box<[u8]>,
    prog_cache: Box<[u8]>,
    lookahead: Box<[u64]>,
    files: HashMap<String, Box<OpenFile>>,
    tick: u64,
}

impl<F: Flash> Littlefs<F> {
    /// Formats `dev` and mounts it.
    pub fn format(dev: F) -> Result<Self, (LfsError, F)> {
        let mut fs = Self::new(dev);
        let rc = unsafe { ll::lfs_format(&mut *fs.lfs, &*fs.cfg) };
        if let Err(e) = fs.check("format", rc) {
            return Err((e, fs.into_device()));
        }
        Self::mount_built(fs)
    }

    /// Mounts what is on `dev`.
    pub fn mount(dev: F) -> Result<Self, (LfsError, F)> {
        Self::mount_built(Self::new(dev))
    }

    /// Mounts what is on `dev`, an uncorrectable read returning `code` to littlefs
    /// (`LFS_ERR_CORRUPT` or `LFS_ERR_IO`; see [`BlockDevice::uncorrectable`]).
    pub fn mount_reporting(dev: F, code: i32) -> Result<Self, (LfsError, F)> {
        let mut fs = Self::new(dev);
        fs.bd.uncorrectable = code;
        Self::mount_built(fs)
    }

    fn mount_built(mut fs: Self) -> Result<Self, (LfsError, F)> {
        let rc = unsafe { ll::lfs_mount(&mut *fs.lfs, &*fs.cfg) };
        match fs.check("mount", rc) {
            Ok(_) => Ok(fs),
            Err(e) => Err((e, fs.into_device())),
        }
    }

    fn new(dev: F) -> Self {
        let mut bd = Box::new(BlockDevice::new(dev));
        let page = bd.page_size();
        let blocks = bd.block_count();
        // A bit per block, in whole 8-byte words, at most 512 bytes (4,096 blocks a pass).
        let lookahead_bytes = blocks.div_ceil(64).clamp(1, 64) * 8;
        let mut read_cache = vec![0u8; page as usize].into_boxed_slice();
        let mut prog_cache = vec![0u8; page as usize].into_boxed_slice();
        let mut lookahead = vec![0u64; lookahead_bytes as usize / 8].into_boxed_slice();
        let cfg = Box::new(ll::lfs_config {
            context: &mut *bd as *mut BlockDevice<F> as *mut c_void,
            read: Some(block_device::read_cb::<F>),
            prog: Some(block_device::prog_cb::<F>),
            erase: Some(block_device::erase_cb::<F>),
            sync: Some(block_device::sync_cb),
            read_size: page,
            prog_size: page,
            block_size: bd.block_size(),
            block_count: blocks,
            block_cycles: 500,
            cache_size: page,
            lookahead_size: lookahead_bytes,
            compact_thresh: 0,
            read_buffer: read_cache.as_mut_ptr() as *mut c_void,
            prog_buffer: prog_cache.as_mut_ptr() as *mut c_void,
            lookahead_buffer: lookahead.as_mut_ptr() as *mut c_void,
            name_max: 0,
            file_max: 0,
            attr_max: 0,
            metadata_max: 0,
            inline_max: 0,
        });
        Self {
            // SAFETY: lfs_t is plain C data; littlefs initialises it in format and mount.
            lfs: Box::new(unsafe { std::mem::zeroed() }),
            cfg,
            bd,
            read_cache,
            prog_cache,
            lookahead,
            files: HashMap::new(),
            tick: 0,
        }
    }

    fn check(&mut self, call: &'static str, rc: c_int) -> Result<c_int, LfsError> {
        if rc >= 0 {
            self.bd.last_error = None;
            return Ok(rc);
        }
        Err(LfsError {
            call,
            code: rc,
            device: self.bd.last_error.take().map(|e| e.to_string()),
        })
    }

    /// Closes every open file and unmounts; returns the device.
    pub fn unmount(mut self) -> Result<F, (LfsError, F)> {
        if let Err(e) = self.close_all() {
            return Err((e, self.into_device()));
        }
        let rc = unsafe { ll::lfs_unmount(&mut *self.lfs) };
        match self.check("unmount", rc) {
            Ok(_) => Ok(self.into_device()),
            Err(e) => Err((e, self.into_device())),
        }
    }

    /// The device, as a power cut leaves it: nothing more is written.
    pub fn into_device(self) -> F {
        let Self { bd, .. } = self;
        bd.dev
    }

    pub fn device(&mut self) -> &mut F {
        &mut self.bd.dev
    }

    /// Programs the chip refused: NAND rules littlefs broke.
    pub fn violations(&self) -> &[String] {
        &self.bd.violations
    }

    /// All of littlefs's RAM: its state, its configuration, its caches and one handle and
    /// cache per open file.
    pub fn ram_bytes(&self) -> usize {
        std::mem::size_of::<ll::lfs_t>()
            + std::mem::size_of::<ll::lfs_config>()
            + self.read_cache.len()
            + self.prog_cache.len()
            + self.lookahead.len() * 8
            + self
                .files
                .values()
                .map(|f| std::mem::size_of::<OpenFile>() + f.cache.len())
                .sum::<usize>()
    }

    /// Blocks in use, as littlefs counts them (it walks its metadata to do so).
    pub fn blocks_in_use(&mut self) -> Result<u32, LfsError> {
        let rc = unsafe { ll::lfs_fs_size(&mut *self.lfs) };
        self.check("fs_size", rc).map(|n| n as u32)
    }

    fn path(path: &str) -> Result<CString, LfsError> {
        CString::new(path).map_err(|_| LfsError {
            call: "path",
            code: ll::lfs_error_LFS_ERR_INVAL,
            device: None,
        })
    }

    fn open(&mut self, path: &str, flags: u32) -> Result<&mut OpenFile, LfsError> {
        if !self.files.contains_key(path) {
            let c = Self::path(path)?;
            let mut f = Box::new(OpenFile {
                // SAFETY: plain C data; lfs_file_opencfg initialises it.
                file: unsafe { std::mem::zeroed() },
                cfg: ll::lfs_file_config {
                    buffer: std::ptr::null_mut(),
                    attrs: std::ptr::null_mut(),
                    attr_count: 0,
                },
                cache: vec![0u8; self.bd.page_size() as usize].into_boxed_slice(),
                dirty: false,
                used: 0,
            });
            f.cfg.buffer = f.cache.as_mut_ptr() as *mut c_void;
            let of = &mut *f;
            let rc = unsafe {
                ll::lfs_file_opencfg(
                    &mut *self.lfs,
                    &mut of.file,
                    c.as_ptr(),
                    flags as c_int,
                    &of.cfg,
                )
            };
            self.check("open", rc)?;
            self.files.insert(path.to_string(), f);
            self.close_idle(path)?;
        }
        self.tick += 1;
        let f = self.files.get_mut(path).expect("just opened");
        f.used = self.tick;
        Ok(f)
    }

    /// Closes the least recently used clean handles (never `keep`) while more than
    /// [`MAX_OPEN`] are open.
    fn close_idle(&mut self, keep: &str) -> Result<(), LfsError> {
        while self.files.len() > MAX_OPEN {
            let oldest = self
                .files
                .iter()
                .filter(|(p, f)| !f.dirty && p.as_str() != keep)
                .min_by_key(|(_, f)| f.used)
                .map(|(p, _)| p.clone());
            match oldest {
                Some(p) => self.close(&p)?,
                None => break,
            }
        }
        Ok(())
    }

    fn close(&mut self, path: &str) -> Result<(), LfsError> {
        if let Some(mut f) = self.files.remove(path) {
            let rc = unsafe { ll::lfs_file_close(&mut *self.lfs, &mut f.file) };
            self.check("close", rc)?;
        }
        Ok(())
    }

    fn close_all(&mut self) -> Result<(), LfsError> {
        let paths: Vec<String> = self.files.keys().cloned().collect();
        let mut first = Ok(());
        for p in paths {
            let r = self.close(&p);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    fn seek(&mut self, path: &str, offset: u64) -> Result<(), LfsError> {
        let lfs: *mut ll::lfs_t = &mut *self.lfs;
        let f = self.open(path, ll::lfs_open_flags_LFS_O_RDWR)?;
        let off = ll::lfs_soff_t::try_from(offset).map_err(|_| LfsError {
            call: "seek",
            code: ll::lfs_error_LFS_ERR_FBIG,
            device: None,
        })?;
        let rc = unsafe {
            ll::lfs_file_seek(
                lfs,
                &mut f.file,
                off,
                ll::lfs_whence_flags_LFS_SEEK_SET as c_int,
            )
        };
        self.check("seek", rc).map(|_| ())
    }

    pub fn mkdir(&mut self, path: &str) -> Result<(), LfsError> {
        let c = Self::path(path)?;
        let rc = unsafe { ll::lfs_mkdir(&mut *self.lfs, c.as_ptr()) };
        self.check("mkdir", rc).map(|_| ())
    }

    /// Creates an empty file and leaves it open.
    pub fn create(&mut self, path: &str) -> Result<(), LfsError> {
        let flags = ll::lfs_open_flags_LFS_O_RDWR
            | ll::lfs_open_flags_LFS_O_CREAT
            | ll::lfs_open_flags_LFS_O_EXCL;
        self.open(path, flags).map(|_| ())
    }

    pub fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), LfsError> {
        self.seek(path, offset)?;
        let lfs: *mut ll::lfs_t = &mut *self.lfs;
        let mut done = 0;
        while done < data.len() {
            let f = self.open(path, ll::lfs_open_flags_LFS_O_RDWR)?;
            f.dirty = true;
            let rest = &data[done..];
            let n = rest.len().min(1 << 30) as ll::lfs_size_t;
            let rc =
                unsafe { ll::lfs_file_write(lfs, &mut f.file, rest.as_ptr() as *const c_void, n) };
            let n = self.check("write", rc)? as usize;
            if n == 0 {
                // littlefs wrote nothing and said nothing: do not spin.
                return Err(LfsError {
                    call: "write",
                    code: ll::lfs_error_LFS_ERR_IO,
                    device: None,
                });
            }
            done += n;
        }
        Ok(())
    }

    pub fn read(&mut self, path: &str, offset: u64, buf: &mut [u8]) -> Result<usize, LfsError> {
        self.seek(path, offset)?;
        let lfs: *mut ll::lfs_t = &mut *self.lfs;
        let f = self.open(path, ll::lfs_open_flags_LFS_O_RDWR)?;
        let rc = unsafe {
            ll::lfs_file_read(
                lfs,
                &mut f.file,
                buf.as_mut_ptr() as *mut c_void,
                buf.len() as ll::lfs_size_t,
            )
        };
        self.check("read", rc).map(|n| n as usize)
    }

    pub fn size(&mut self, path: &str) -> Result<u64, LfsError> {
        let lfs: *mut ll::lfs_t = &mut *self.lfs;
        let f = self.open(path, ll::lfs_open_flags_LFS_O_RDWR)?;
        let rc = unsafe { ll::lfs_file_size(lfs, &mut f.file) };
        self.check("size", rc).map(|n| n as u64)
    }

    pub fn truncate(&mut self, path: &str, size: u64) -> Result<(), LfsError> {
        let lfs: *mut ll::lfs_t = &mut *self.lfs;
        let f = self.open(path, ll::lfs_open_flags_LFS_O_RDWR)?;
        f.dirty = true;
        let size = ll::lfs_off_t::try_from(size).map_err(|_| LfsError {
            call: "truncate",
            code: ll::lfs_error_LFS_ERR_FBIG,
            device: None,
        })?;
        let rc = unsafe { ll::lfs_file_truncate(lfs, &mut f.file, size) };
        self.check("truncate", rc).map(|_| ())
    }

    /// Removes a file (closing it first if it is open).
    pub fn remove(&mut self, path: &str) -> Result<(), LfsError> {
        self.close(path)?;
        let c = Self::path(path)?;
        let rc = unsafe { ll::lfs_remove(&mut *self.lfs, c.as_ptr()) };
        self.check("remove", rc).map(|_| ())
    }

    /// Makes the file durable and closes it (a workload syncs where its application
    /// closes or syncs a file; an open handle costs a page of RAM).
    pub fn sync(&mut self, path: &str) -> Result<(), LfsError> {
        self.close(path)
    }
}

fn target_error(e: LfsError) -> TargetError {
    match e.code {
        ll::lfs_error_LFS_ERR_NOSPC => TargetError::NoSpace,
        ll::lfs_error_LFS_ERR_NOENT => TargetError::NotFound,
        _ => TargetError::Other(e.to_string()),
    }
}

impl<F: Flash> Target for Littlefs<F> {
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError> {
        Littlefs::mkdir(self, path).map_err(target_error)
    }
    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        Littlefs::create(self, path).map_err(target_error)
    }
    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        Littlefs::write(self, path, offset, data).map_err(target_error)
    }
    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        let mut buf = vec![0u8; len];
        Littlefs::read(self, path, offset, &mut buf).map_err(target_error)
    }
    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        Littlefs::size(self, path).map_err(target_error)
    }
    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        Littlefs::truncate(self, path, size).map_err(target_error)
    }
    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        Littlefs::remove(self, path).map_err(target_error)
    }
    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        Littlefs::sync(self, path).map_err(target_error)
    }
}
