//! What a workload does to a file system: a few path-based calls, so that any file system
//! (nandkit's, a littlefs adapter, an NVRAM-metadata one) can be driven by the same
//! workloads.

/// Why a [`Target`] call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The device is full (ENOSPC): a workload meant to fill the device stops here.
    #[error("no space left on device")]
    NoSpace,
    /// No such file or directory: a workload bug, or a file system that lost a file.
    #[error("no such file or directory")]
    NotFound,
    /// Anything else, described by the target.
    #[error("{0}")]
    Other(String),
}

/// A file system as a workload sees it. Paths are absolute ("/camera/0001.jpg"). A call
/// that changes the file system need not be durable until `fsync` of that file; a
/// workload calls `fsync` where the modelled application closes or syncs a file.
pub trait Target {
    /// Creates a directory; its parent exists.
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError>;
    /// Creates an empty regular file; an error if `path` exists.
    fn create(&mut self, path: &str) -> Result<(), TargetError>;
    /// Writes all of `data` at `offset`, growing the file as needed. A full device is
    /// [`TargetError::NoSpace`], even if part of `data` was written.
    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError>;
    /// Writes `data` at the end of the file.
    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), TargetError> {
        let end = self.size(path)?;
        self.write(path, end, data)
    }
    /// Reads up to `len` bytes at `offset`; returns how many there were (fewer at the end
    /// of the file).
    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError>;
    /// The file's size in bytes.
    fn size(&mut self, path: &str) -> Result<u64, TargetError>;
    /// Shrinks or grows the file to `size` bytes.
    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError>;
    /// Removes a file.
    fn unlink(&mut self, path: &str) -> Result<(), TargetError>;
    /// Makes the file's data and attributes durable.
    fn fsync(&mut self, path: &str) -> Result<(), TargetError>;
    /// The device would sit idle for `ns` nanoseconds here (between a fax and the next,
    /// between photos): a driver may run background cleaning in that simulated time.
    /// Doing nothing is right for a target without such a notion.
    fn idle(&mut self, ns: u64) -> Result<(), TargetError> {
        let _ = ns;
        Ok(())
    }
}
