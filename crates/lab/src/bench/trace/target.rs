//! What the replay drives: a file system with a clock. nandkit's file system and littlefs
//! both are one, so `bench trace` and `compare` replay every design through the same code.

use anyhow::Context;
use nandkit_flash::{Flash, FlashDevice};
use nandkit_fs::{NewObject, ROOT_INO};
use nandkit_littlefs::Littlefs;

use super::super::Fs;

/// A file system a trace can be replayed on: files in one directory, and the device's
/// caller clock, which the replay sets at each request's issue.
pub trait Replayable {
    /// An open file: nandkit's inode number, littlefs's path.
    type File: Clone;
    /// The device's caller clock (simulated ns).
    fn now_ns(&mut self) -> u64;
    fn set_clock_ns(&mut self, ns: u64);
    /// A request begins: the host software's cost of taking it (`--software-cost`).
    fn charge_request(&mut self);
    /// Bytes the file system can still store.
    fn free_bytes(&mut self) -> anyhow::Result<u64>;
    /// The largest file it can hold.
    fn max_file_size(&self) -> u64;
    fn create(&mut self, name: &str) -> anyhow::Result<Self::File>;
    /// The file `name`, if it exists (a check after a power cut).
    fn open(&mut self, name: &str) -> anyhow::Result<Option<Self::File>>;
    /// Writes `data` at `offset`; returns the bytes written (fewer: the device is full).
    fn write(&mut self, f: &Self::File, offset: u64, data: &[u8]) -> anyhow::Result<usize>;
    fn fsync(&mut self, f: &Self::File) -> anyhow::Result<()>;
    fn read(&mut self, f: &Self::File, offset: u64, buf: &mut [u8]) -> anyhow::Result<usize>;
    fn size(&mut self, f: &Self::File) -> anyhow::Result<u64>;
    fn unlink(&mut self, name: &str) -> anyhow::Result<()>;
}

impl Replayable for Fs {
    type File = nandkit_fs::Ino;

    fn now_ns(&mut self) -> u64 {
        self.device().now_ns()
    }
    fn set_clock_ns(&mut self, ns: u64) {
        self.device_mut().set_clock_ns(ns);
    }
    fn charge_request(&mut self) {
        self.device_mut().charge_request();
    }
    fn free_bytes(&mut self) -> anyhow::Result<u64> {
        let s = self.statfs();
        Ok(s.free_chunks * u64::from(s.chunk_bytes))
    }
    fn max_file_size(&self) -> u64 {
        nandkit_fs::FileSystem::max_file_size(self)
    }
    fn create(&mut self, name: &str) -> anyhow::Result<Self::File> {
        Ok(self
            .create(ROOT_INO, name.as_bytes(), NewObject::regular_file())?
            .ino)
    }
    fn open(&mut self, name: &str) -> anyhow::Result<Option<Self::File>> {
        match self.lookup(ROOT_INO, name.as_bytes()) {
            Ok(attr) => Ok(Some(attr.ino)),
            Err(nandkit_fs::FsError::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    fn write(&mut self, f: &Self::File, offset: u64, data: &[u8]) -> anyhow::Result<usize> {
        Ok(nandkit_fs::FileSystem::write(self, *f, offset, data)?)
    }
    fn fsync(&mut self, f: &Self::File) -> anyhow::Result<()> {
        Ok(nandkit_fs::FileSystem::fsync(self, *f)?)
    }
    fn read(&mut self, f: &Self::File, offset: u64, buf: &mut [u8]) -> anyhow::Result<usize> {
        Ok(nandkit_fs::FileSystem::read(self, *f, offset, buf)?)
    }
    fn size(&mut self, f: &Self::File) -> anyhow::Result<u64> {
        Ok(self.getattr(*f)?.size)
    }
    fn unlink(&mut self, name: &str) -> anyhow::Result<()> {
        Ok(nandkit_fs::FileSystem::unlink(
            self,
            ROOT_INO,
            name.as_bytes(),
        )?)
    }
}

/// littlefs's own limit (LFS_FILE_MAX).
const LFS_FILE_MAX: u64 = i32::MAX as u64;

impl Replayable for Littlefs<FlashDevice> {
    type File = String;

    fn now_ns(&mut self) -> u64 {
        self.device().now_ns()
    }
    fn set_clock_ns(&mut self, ns: u64) {
        self.device().set_clock_ns(ns);
    }
    /// littlefs is a library in the caller: no host cost is modelled for it.
    fn charge_request(&mut self) {}
    fn free_bytes(&mut self) -> anyhow::Result<u64> {
        let g = Flash::geometry(self.device());
        let block = u64::from(g.page_size_bytes) * u64::from(g.pages_per_block);
        let used = u64::from(self.blocks_in_use()?);
        Ok(g.total_blocks().saturating_sub(used) * block)
    }
    fn max_file_size(&self) -> u64 {
        LFS_FILE_MAX
    }
    fn create(&mut self, name: &str) -> anyhow::Result<Self::File> {
        let path = format!("/{name}");
        Littlefs::create(self, &path)?;
        Ok(path)
    }
    fn open(&mut self, name: &str) -> anyhow::Result<Option<Self::File>> {
        let path = format!("/{name}");
        match Littlefs::size(self, &path) {
            Ok(_) => Ok(Some(path)),
            Err(e) if e.code == nandkit_littlefs::LFS_ERR_NOENT => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
    fn write(&mut self, f: &Self::File, offset: u64, data: &[u8]) -> anyhow::Result<usize> {
        match Littlefs::write(self, f, offset, data) {
            Ok(()) => Ok(data.len()),
            Err(e) if e.is_no_space() => Ok(0),
            Err(e) => Err(e.into()),
        }
    }
    fn fsync(&mut self, f: &Self::File) -> anyhow::Result<()> {
        Ok(Littlefs::sync(self, f)?)
    }
    fn read(&mut self, f: &Self::File, offset: u64, buf: &mut [u8]) -> anyhow::Result<usize> {
        Ok(Littlefs::read(self, f, offset, buf)?)
    }
    fn size(&mut self, f: &Self::File) -> anyhow::Result<u64> {
        Ok(Littlefs::size(self, f)?)
    }
    fn unlink(&mut self, name: &str) -> anyhow::Result<()> {
        Littlefs::remove(self, &format!("/{name}")).with_context(|| format!("removing {name}"))
    }
}
