//! Helpers shared by the workload tests: a real file system on a RAM device, and a
//! target that records every call.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use nandkit_flash::{preset, Flash, FlashDevice};
use nandkit_fs::{CountingClock, FileSystem, FsConfig};
use nandkit_workloads::{Summary, Target, TargetError};

/// The MODA paper's chip with the latencies seen above MTD, cut to `bytes`, with random
/// bit errors off so that every figure is exact.
pub fn device(bytes: u64) -> FlashDevice {
    let mut config = preset("smallblock-64m-mtd")
        .expect("preset")
        .with_total_bytes(bytes)
        .expect("device size");
    config.ecc.rber_fresh = 0.0;
    config.ecc.rber_at_endurance = 0.0;
    FlashDevice::ram(config).expect("ram device")
}

/// A fresh `profile` file system (Table 1's runs start from an empty device).
pub fn format(bytes: u64, profile: &str) -> FileSystem<FlashDevice> {
    let dev = device(bytes);
    let blocks = dev.geometry().blocks_per_chip * dev.geometry().chips;
    let config = FsConfig::profile(profile, blocks).expect("profile");
    FileSystem::format(dev, config, Arc::new(CountingClock::new(1_000_000_000))).expect("format")
}

/// Runs a workload on a fresh yaffs file system of `bytes`; returns its summary and the
/// device's (u, i, p) once everything is synced.
pub fn run_on_fs(name: &str, seed: u64, bytes: u64) -> (Summary, (f64, f64, f64)) {
    let mut fs = format(bytes, "yaffs");
    let mut w = nandkit_workloads::by_name(name, seed, bytes).expect("known workload");
    let summary = w.run(&mut fs).unwrap_or_else(|e| panic!("{name}: {e}"));
    fs.sync().expect("sync");
    let report = fs.fsck();
    assert!(report.is_clean(), "{name}: {:?}", report.problems);
    (summary, fs.uip())
}

/// A target that keeps only file sizes and records every call, for comparing runs.
#[derive(Default)]
pub struct Recorder {
    pub calls: Vec<String>,
    files: HashMap<String, u64>,
    dirs: Vec<String>,
    /// Bytes the device holds; writes past it fail with NoSpace.
    pub capacity: Option<u64>,
    used: u64,
}

impl Recorder {
    fn file(&mut self, path: &str) -> Result<&mut u64, TargetError> {
        self.files.get_mut(path).ok_or(TargetError::NotFound)
    }

    fn parent_exists(&self, path: &str) -> Result<(), TargetError> {
        let parent = &path[..path.rfind('/').unwrap_or(0)];
        if parent.is_empty() || self.dirs.iter().any(|d| d == parent) {
            Ok(())
        } else {
            Err(TargetError::NotFound)
        }
    }
}

/// A cheap fingerprint of written bytes, so that the record shows what was written.
fn fingerprint(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

impl Target for Recorder {
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError> {
        self.calls.push(format!("mkdir {path}"));
        self.parent_exists(path)?;
        self.dirs.push(path.to_string());
        Ok(())
    }

    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        self.calls.push(format!("create {path}"));
        self.parent_exists(path)?;
        if self.files.insert(path.to_string(), 0).is_some() {
            return Err(TargetError::Other(format!("{path} exists")));
        }
        Ok(())
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        self.calls.push(format!(
            "write {path} {offset} {} {:x}",
            data.len(),
            fingerprint(data)
        ));
        let capacity = self.capacity;
        let used = self.used;
        let size = self.file(path)?;
        let end = (offset + data.len() as u64).max(*size);
        let grow = end - *size;
        if capacity.is_some_and(|c| used + grow > c) {
            return Err(TargetError::NoSpace);
        }
        *size = end;
        self.used += grow;
        Ok(())
    }

    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        self.calls.push(format!("read {path} {offset} {len}"));
        let size = *self.file(path)?;
        Ok(size.saturating_sub(offset).min(len as u64) as usize)
    }

    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        self.calls.push(format!("size {path}"));
        Ok(*self.file(path)?)
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        self.calls.push(format!("truncate {path} {size}"));
        let old = std::mem::replace(self.file(path)?, size);
        self.used = self.used + size - old;
        Ok(())
    }

    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        self.calls.push(format!("unlink {path}"));
        let size = self.files.remove(path).ok_or(TargetError::NotFound)?;
        self.used -= size;
        Ok(())
    }

    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        self.calls.push(format!("fsync {path}"));
        self.file(path)?;
        Ok(())
    }

    fn idle(&mut self, ns: u64) -> Result<(), TargetError> {
        self.calls.push(format!("idle {ns}"));
        Ok(())
    }
}
