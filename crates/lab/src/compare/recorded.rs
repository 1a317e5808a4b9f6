//! A paper's workload (crates/workloads: camera, phone, fax, ...) as a trace: the
//! workload runs against a recorder that keeps only what it asked for. Requests arrive
//! back to back, in the order the workload makes them; its idle time (between photos,
//! between faxes) moves the arrival clock on. A path's directories fold into its name
//! (`/camera/0001.jpg` is `camera_0001.jpg`): the trace format has one directory.

use std::collections::HashMap;

use anyhow::{bail, Context};
use nandkit_workloads::{Target, TargetError};

use crate::bench::trace::format::{Op, Request};

/// Runs the workload `name` (seeded) for a device of `device_bytes` and returns its
/// requests.
pub fn record(name: &str, seed: u64, device_bytes: u64) -> anyhow::Result<Vec<Request>> {
    let mut workload = nandkit_workloads::by_name(name, seed, device_bytes)
        .with_context(|| format!("unknown workload '{name}'"))?;
    let mut rec = Recorder::default();
    match workload.run(&mut rec) {
        // A workload meant to fill the device stops at the recorder's limit.
        Ok(_) | Err(TargetError::NoSpace) => {}
        Err(e) => bail!("recording {name}: {e}"),
    }
    if let Some(what) = rec.unsaid {
        bail!("recording {name}: the trace format cannot say {what}");
    }
    Ok(rec.requests)
}

#[derive(Default)]
struct Recorder {
    requests: Vec<Request>,
    sizes: HashMap<String, u64>,
    now_us: u64,
    /// The first call the format cannot express.
    unsaid: Option<String>,
}

/// `/camera/0001.jpg` as a name in the one directory: `camera_0001.jpg`.
fn flat(path: &str) -> String {
    path.trim_start_matches('/').replace('/', "_")
}

impl Recorder {
    fn push(&mut self, op: Op, file: String, offset: u64, size: u64) {
        self.requests.push(Request {
            arrival_us: self.now_us,
            op,
            file,
            offset,
            size,
        });
    }

    fn size_of(&self, name: &str) -> Result<u64, TargetError> {
        self.sizes.get(name).copied().ok_or(TargetError::NotFound)
    }
}

impl Target for Recorder {
    fn mkdir(&mut self, _path: &str) -> Result<(), TargetError> {
        Ok(())
    }
    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        let name = flat(path);
        if self.sizes.insert(name.clone(), 0).is_some() {
            return Err(TargetError::Other(format!("{path} exists")));
        }
        self.push(Op::Create, name, 0, 0);
        Ok(())
    }
    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        let name = flat(path);
        let size = self.size_of(&name)?;
        if !data.is_empty() {
            self.sizes
                .insert(name.clone(), size.max(offset + data.len() as u64));
            self.push(Op::Write, name, offset, data.len() as u64);
        }
        Ok(())
    }
    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        let name = flat(path);
        let n = self.size_of(&name)?.saturating_sub(offset).min(len as u64);
        if n > 0 {
            self.push(Op::Read, name, offset, n);
        }
        Ok(n as usize)
    }
    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        self.size_of(&flat(path))
    }
    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        let name = flat(path);
        let old = self.size_of(&name)?;
        if size == 0 && old > 0 {
            // Emptied: a delete and a create, as the strace importer says it.
            self.push(Op::Delete, name.clone(), 0, 0);
            self.push(Op::Create, name.clone(), 0, 0);
        } else if size < old {
            self.unsaid
                .get_or_insert(format!("a truncate of {path} to {size} bytes"));
        }
        self.sizes.insert(name, size);
        Ok(())
    }
    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        let name = flat(path);
        self.size_of(&name)?;
        self.sizes.remove(&name);
        self.push(Op::Delete, name, 0, 0);
        Ok(())
    }
    /// Every write of a replay is fsync'd before it completes: nothing to record.
    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        self.size_of(&flat(path)).map(|_| ())
    }
    fn idle(&mut self, ns: u64) -> Result<(), TargetError> {
        self.now_us += ns / 1000;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_camera_records_as_a_trace_the_format_accepts() {
        let requests = record("camera", 1, 64 << 20).unwrap();
        // Photos are written, read back and erased, with the idle time between them.
        let count = |op: Op| requests.iter().filter(|r| r.op == op).count();
        assert!(count(Op::Create) > 10 && count(Op::Write) > 100 && count(Op::Read) > 10);
        assert!(count(Op::Delete) > 0);
        assert!(requests.last().unwrap().arrival_us > 60_000_000);
        assert!(requests[0].file.starts_with("camera_"));
        // What the recorder wrote out parses again, with the same requests.
        let mut csv = Vec::new();
        crate::bench::trace::format::write(&mut csv, &[], &requests).unwrap();
        assert_eq!(crate::bench::trace::format::parse(&csv).unwrap(), requests);
    }
}
