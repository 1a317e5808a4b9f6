//! What the workloads share: the stepwise form every workload takes, the counting wrapper
//! around a target, the random number generator, the bytes written, and small file
//! helpers.

use std::sync::OnceLock;

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::{Summary, Target, TargetError};

pub type Rng = Xoshiro256PlusPlus;

/// The generator a workload draws every choice from.
pub fn rng(seed: u64) -> Rng {
    Rng::seed_from_u64(seed)
}

/// A workload as a sequence of steps, so that `combined` can interleave several. A step
/// is what the modelled device does as one unit: a transaction, an event, a write request.
pub trait Stepper {
    fn name(&self) -> &'static str;
    fn source(&self) -> &'static str;
    /// Does the next step; `Ok(false)` when the workload has nothing left to do.
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError>;
    /// About how many steps are still to come (0 when done). `combined` picks parts in
    /// proportion to it, so that each part is spread over the whole run.
    fn steps_left(&self) -> u64;
}

/// A target that counts what goes through it into a [`Summary`].
pub struct Counted<'t> {
    inner: &'t mut dyn Target,
    summary: Summary,
}

impl<'t> Counted<'t> {
    pub fn new(inner: &'t mut dyn Target) -> Self {
        Self {
            inner,
            summary: Summary::default(),
        }
    }

    /// Records that the last call found the device full and the workload stops there, as
    /// it is meant to (the first such call, if several parts of a combination do).
    pub fn note_enospc(&mut self) {
        let last = self.summary.ops.total().saturating_sub(1);
        self.summary.enospc.get_or_insert(last);
    }

    pub fn into_summary(self) -> Summary {
        self.summary
    }
}

impl Target for Counted<'_> {
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError> {
        self.summary.ops.mkdir += 1;
        self.inner.mkdir(path)
    }

    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        self.summary.ops.create += 1;
        self.inner.create(path)?;
        self.summary.files_created += 1;
        Ok(())
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        self.summary.ops.write += 1;
        self.summary.bytes_written += data.len() as u64;
        self.inner.write(path, offset, data)
    }

    fn append(&mut self, path: &str, data: &[u8]) -> Result<(), TargetError> {
        self.summary.ops.append += 1;
        self.summary.bytes_written += data.len() as u64;
        self.inner.append(path, data)
    }

    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        self.summary.ops.read += 1;
        let n = self.inner.read(path, offset, len)?;
        self.summary.bytes_read += n as u64;
        Ok(n)
    }

    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        self.summary.ops.size += 1;
        self.inner.size(path)
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        self.summary.ops.truncate += 1;
        self.inner.truncate(path, size)
    }

    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        self.summary.ops.unlink += 1;
        self.inner.unlink(path)?;
        self.summary.files_deleted += 1;
        Ok(())
    }

    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        self.summary.ops.fsync += 1;
        self.inner.fsync(path)
    }

    fn idle(&mut self, ns: u64) -> Result<(), TargetError> {
        self.summary.ops.idle += 1;
        self.summary.idle_ns += ns;
        self.inner.idle(ns)
    }
}

/// Bytes every workload writes from: 64 KiB of pseudo-random data, the same in every run.
/// What the bytes are does not matter to the workloads (nothing here compresses or
/// deduplicates); random bytes keep a compressing target honest.
pub fn payload() -> &'static [u8] {
    static PAYLOAD: OnceLock<Vec<u8>> = OnceLock::new();
    PAYLOAD.get_or_init(|| {
        let mut bytes = vec![0; 64 << 10];
        // Any fixed seed would do: this one is "nandkit" in ASCII.
        rng(0x006e_616e_646b_6974).fill_bytes(&mut bytes);
        bytes
    })
}

/// `len` bytes of the payload, starting at a place that depends on `salt` so that
/// consecutive writes differ. `len` is at most 32 KiB.
pub fn bytes(salt: u64, len: usize) -> &'static [u8] {
    let p = payload();
    debug_assert!(len <= p.len() / 2);
    let start = (salt as usize).wrapping_mul(4099) % (p.len() / 2);
    &p[start..start + len]
}

/// Writes `len` bytes to the file from offset 0 in requests of `request` bytes, as an
/// application copying data in does.
pub fn write_sequential(
    t: &mut dyn Target,
    path: &str,
    len: u64,
    request: usize,
) -> Result<(), TargetError> {
    let mut off = 0;
    while off < len {
        let n = (len - off).min(request as u64) as usize;
        t.write(path, off, bytes(off / request as u64, n))?;
        off += n as u64;
    }
    Ok(())
}

/// Reads a whole file of `len` bytes in requests of `request` bytes.
pub fn read_sequential(
    t: &mut dyn Target,
    path: &str,
    len: u64,
    request: usize,
) -> Result<(), TargetError> {
    let mut off = 0;
    while off < len {
        let n = t.read(path, off, (len - off).min(request as u64) as usize)?;
        if n == 0 {
            return Err(TargetError::Other(format!(
                "{path}: ends at {off} bytes, expected {len}"
            )));
        }
        off += n as u64;
    }
    Ok(())
}

/// Bytes of the device a fraction of it comes to.
pub fn bytes_of_fraction(device_bytes: u64, fraction: f64) -> u64 {
    (device_bytes as f64 * fraction) as u64
}

/// Nanoseconds in `s` seconds.
pub const fn secs(s: u64) -> u64 {
    s * 1_000_000_000
}
