//! The power-cut sweep of `compare`: the replay cut at evenly spread flash operations,
//! each cut on a fresh device; after each, the device powers up, the file system mounts,
//! every file the replay had acknowledged (every write is fsync'd before it completes)
//! must read back byte for byte, files it had deleted must stay gone, and the file
//! system's checker must find nothing wrong.
//!
//! The request in flight when power failed may or may not have happened, so its file is
//! not checked (counted as unsettled). Cuts fall on flash operations only; minv's NVRAM
//! loses, keeps or tears its unpersisted words at each cut as its crash model says
//! (`Nvram::crash`); the fs crate's own sweeps also cut at every NVRAM persist point.

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::design::{Design, Subject};
use super::measure::Spec;
use crate::bench::trace::format::{Op, Request};
use crate::bench::trace::replay::{self, initial_files, setup_data, write_data, SETUP_STEP};

/// What the files must hold once some requests of a trace were acknowledged.
pub struct Model {
    files: HashMap<String, Vec<u8>>,
    write_data: Vec<u8>,
}

impl Model {
    /// The files setup leaves, before the first request.
    pub fn after_setup(trace: &[Request], seed: u64) -> Model {
        let setup = setup_data(seed);
        let files = initial_files(trace)
            .into_iter()
            .map(|(name, bytes)| {
                let content = (0..bytes)
                    .map(|i| setup[(i % SETUP_STEP) as usize])
                    .collect();
                (name, content)
            })
            .collect();
        Model {
            files,
            write_data: write_data(trace, seed),
        }
    }

    /// `r` was acknowledged.
    pub fn apply(&mut self, r: &Request) {
        match r.op {
            Op::Read => {}
            Op::Write => {
                let f = self.files.entry(r.file.clone()).or_default();
                let (start, end) = (r.offset as usize, (r.offset + r.size) as usize);
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[start..end].copy_from_slice(&self.write_data[..end - start]);
            }
            Op::Create => {
                self.files.insert(r.file.clone(), Vec::new());
            }
            Op::Delete => {
                self.files.remove(&r.file);
            }
        }
    }

    /// What `fs` holds that it should not, or lacks: the first problem found, if any.
    /// `unsettled`: a file not to check.
    pub fn check<S: Subject>(
        &self,
        fs: &mut S,
        names: &BTreeSet<&str>,
        unsettled: Option<&str>,
    ) -> anyhow::Result<Option<String>> {
        let mut buf = Vec::new();
        for name in names.iter().copied().filter(|n| Some(*n) != unsettled) {
            let found = fs
                .open(name)
                .with_context(|| format!("looking '{name}' up"))?;
            let (want, file) = match (self.files.get(name), found) {
                (None, None) => continue,
                (None, Some(_)) => return Ok(Some(format!("deleted file '{name}' is back"))),
                (Some(_), None) => return Ok(Some(format!("file '{name}' is lost"))),
                (Some(want), Some(file)) => (want, file),
            };
            let size = fs.size(&file)?;
            if size != want.len() as u64 {
                return Ok(Some(format!(
                    "'{name}' holds {size} bytes, {} were acknowledged",
                    want.len()
                )));
            }
            buf.resize(want.len(), 0);
            let n = fs
                .read(&file, 0, &mut buf)
                .with_context(|| format!("reading '{name}'"))?;
            if n != want.len() || buf[..] != want[..] {
                let at = buf.iter().zip(want).position(|(a, b)| a != b).unwrap_or(n);
                return Ok(Some(format!("'{name}' differs at byte {at}")));
            }
        }
        Ok(None)
    }
}

/// The sweep's result for one design.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Sweep {
    /// Cuts made (each during the replay).
    pub cuts: u32,
    /// Cuts after which the file system mounted.
    pub mounted: u32,
    /// Cuts after which every acknowledged file read back and no deleted one came back.
    pub data_kept: u32,
    /// Cuts after which the checker found nothing (littlefs: broke no NAND rule).
    pub fsck_clean: u32,
    /// Mean and largest simulated mount time after a cut, ms.
    pub mount_mean_ms: Option<f64>,
    pub mount_max_ms: Option<f64>,
    /// The first few problems, with the cut they followed.
    pub problems: Vec<String>,
}

impl Sweep {
    pub fn passed(&self) -> bool {
        self.cuts > 0
            && self.mounted == self.cuts
            && self.data_kept == self.cuts
            && self.fsck_clean == self.cuts
    }
}

/// Cuts the replay at `cuts` operations spread evenly over its `ops` state-changing
/// flash operations (the full replay's count), each on a fresh device.
pub fn sweep<S: Subject>(
    spec: &Spec,
    design: &Design,
    ops: u64,
    cuts: u32,
) -> anyhow::Result<Sweep> {
    let mut out = Sweep::default();
    let names: BTreeSet<&str> = spec.trace.iter().map(|r| r.file.as_str()).collect();
    let mut mounts = Vec::new();
    for i in 1..=u64::from(cuts) {
        let at = (ops * i / (u64::from(cuts) + 1)).max(1);
        let (mut fs, _) = S::format(design, &spec.config, &spec.nvram)?;
        let prepared = replay::prepare(&mut fs, &spec.trace, spec.seed, true)?;
        fs.chips().arm_power_cut(nandkit_flash::PowerCut::AtOp(at));
        let mut served = Vec::new();
        let result = replay::replay_into(
            &mut fs,
            prepared,
            &spec.trace,
            spec.seed,
            spec.queue_depth,
            true,
            &mut served,
        );
        if !fs.chips().power_lost() {
            // The replay ended before the cut: nothing to check.
            result.context("the replay failed without a power cut")?;
            continue;
        }
        out.cuts += 1;
        let mut model = Model::after_setup(&spec.trace, spec.seed);
        for r in &spec.trace[..served.len()] {
            model.apply(r);
        }
        let unsettled = spec.trace.get(served.len()).map(|r| r.file.as_str());
        let problem = |out: &mut Sweep, what: String| {
            if out.problems.len() < 5 {
                out.problems.push(format!("cut at flash op {at}: {what}"));
            }
        };
        let (mut fs, ms) = match fs.crash_and_mount(at) {
            Ok(m) => m,
            Err(e) => {
                problem(&mut out, format!("no mount: {e:#}"));
                continue;
            }
        };
        out.mounted += 1;
        mounts.push(ms);
        match model.check(&mut fs, &names, unsettled) {
            Ok(None) => out.data_kept += 1,
            Ok(Some(p)) => problem(&mut out, p),
            Err(e) => problem(&mut out, format!("{e:#}")),
        }
        match fs.fsck() {
            Some(p) if !p.is_empty() => problem(&mut out, format!("fsck: {}", p[0])),
            _ => out.fsck_clean += 1,
        }
    }
    if !mounts.is_empty() {
        out.mount_mean_ms = Some(mounts.iter().sum::<f64>() / mounts.len() as f64);
        out.mount_max_ms = mounts.iter().copied().reduce(f64::max);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::trace::format::parse;
    use crate::bench::trace::target::Replayable;
    use crate::bench::{format as mkfs, FsArgs};

    const TRACE: &str = "arrival_us,op,file,offset,size\n\
                         0,write,old,0,5000\n\
                         1,create,new,0,0\n\
                         2,write,new,100,3000\n\
                         3,delete,old,0,0\n\
                         4,write,new,0,50\n";

    #[test]
    fn the_model_finds_a_lost_a_changed_and_a_resurrected_file() {
        let trace = parse(TRACE.as_bytes()).unwrap();
        let names: BTreeSet<&str> = trace.iter().map(|r| r.file.as_str()).collect();
        let mut fs = mkfs(nandkit_flash::preset("tiny").unwrap(), &FsArgs::default()).unwrap();
        let prepared = replay::prepare(&mut fs, &trace, 7, true).unwrap();
        // Setup wrote 'old' from the setup pattern; nothing of the trace ran yet.
        let mut model = Model::after_setup(&trace, 7);
        assert_eq!(model.check(&mut fs, &names, None).unwrap(), None);
        replay::replay(&mut fs, prepared, &trace, 7, 1, true).unwrap();
        for r in &trace {
            model.apply(r);
        }
        assert_eq!(model.check(&mut fs, &names, None).unwrap(), None);
        assert_eq!(model.files["new"].len(), 3100);
        // A byte changed.
        let new = Replayable::open(&mut fs, "new").unwrap().unwrap();
        Replayable::write(&mut fs, &new, 2000, b"x").unwrap();
        let p = model.check(&mut fs, &names, None).unwrap().unwrap();
        assert!(p.contains("differs at byte 2000"), "{p}");
        // Unsettled files are not checked.
        assert_eq!(model.check(&mut fs, &names, Some("new")).unwrap(), None);
        // A deleted file back.
        Replayable::create(&mut fs, "old").unwrap();
        let p = model.check(&mut fs, &names, Some("new")).unwrap().unwrap();
        assert!(p.contains("'old' is back"), "{p}");
        // A file lost.
        Replayable::unlink(&mut fs, "new").unwrap();
        Replayable::unlink(&mut fs, "old").unwrap();
        let p = model.check(&mut fs, &names, None).unwrap().unwrap();
        assert!(p.contains("'new' is lost"), "{p}");
    }
}
