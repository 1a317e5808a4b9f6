//! nandkit-workloads: the papers' workloads, deterministic with a seed.
//!
//! The seven benchmarks of the MODA paper (`moda-uniformity-allocation.txt`, sec. 6.2 and
//! Table 1): Camera, Movie player, Phone, Recorder, Fax machine, PostMark and the first two
//! phases of Andrew. Each lives in its own file, whose module comment says what it models,
//! where every parameter comes from, and which parameters were fitted because the paper
//! leaves them out. Fitted parameters aim at the utilisation u and invalidity i that the
//! paper's Table 1 reports after one run on an empty 64 MB device: those two are properties
//! of how much a workload writes and overwrites, not of the allocation policy, so fitting
//! them never favours one policy. Nothing is fitted to uniformity p or cleaning cost,
//! which are what the policies are compared on.
//!
//! A workload drives a [`Target`] (path-based, so any file system can implement it; the
//! nandkit file system does in [`fs_target`]). It is built from a seed and the device's
//! capacity in bytes ([`by_name`]); the same seed and capacity give exactly the same
//! sequence of [`Target`] calls. Volumes the paper states relative to the device (Movie
//! fills it, Fax leaves it 86% full) scale with the capacity; sizes that describe the
//! modelled device's data (an SMS, a fax page, PostMark's file sizes) do not. Each module
//! says which of its parameters scale.
//!
//! Capacity means the device's data bytes: pages × page size, spare areas left out. Table
//! 1's u and i are fractions of all pages, so that is what volumes are fractions of. A file
//! system keeps part of it for itself (nandkit: a summary page per block and a few reserve
//! blocks, about 5%), which is why Movie, asked to fill 99%, runs into a full device first.
//!
//! Every file a workload touches is under its own directory (`/camera`, `/phone`, ...),
//! which it creates first. [`combined`] runs several workloads on one device at once, their
//! steps interleaved (see `combined.rs`), as the paper's "Camera + Phone" and "Movie +
//! Recorder + PostMark".

mod andrew;
mod camera;
mod combined;
mod common;
mod fax;
pub mod fs_target;
mod idle_clean;
mod movie;
mod phone;
mod postmark;
mod recorder;
mod summary;
mod target;

pub use idle_clean::{IdleCleaning, IdleStats};
pub use summary::{OpCounts, Summary};
pub use target::{Target, TargetError};

use common::{Counted, Stepper};

/// A workload: a deterministic sequence of file system calls.
pub trait Workload {
    /// Short name, as [`NAMES`] lists it ("camera+phone" for a combination).
    fn name(&self) -> &'static str;
    /// Where the workload comes from: the paper section and the sources of its parameters.
    fn source(&self) -> &'static str;
    /// Runs the workload to its end. A workload runs once: a second call finds nothing
    /// left to do and returns an empty summary.
    ///
    /// Errors: [`TargetError::NoSpace`] when the device fills under a workload that is not
    /// meant to fill it (Movie is: it stops there and reports it in
    /// [`Summary::enospc`]); any other error of the target as it came.
    fn run(&mut self, t: &mut dyn Target) -> Result<Summary, TargetError>;
}

/// The workloads [`by_name`] knows, in the order of the paper's Table 1.
pub const NAMES: &[&str] = &[
    "camera", "movie", "phone", "recorder", "fax", "postmark", "andrew",
];

/// A workload by name, seeded, for a device of `device_bytes` data bytes (pages × page
/// size). A name with `+` ("camera+phone") gives [`combined`] of its parts. `None` for an
/// unknown name.
pub fn by_name(name: &str, seed: u64, device_bytes: u64) -> Option<Box<dyn Workload>> {
    if name.contains('+') {
        let parts: Vec<&str> = name.split('+').collect();
        return combined(&parts, seed, device_bytes);
    }
    in_dir(name, seed, device_bytes, &format!("/{name}"))
}

/// A single workload (no combination) in directory `dir` instead of `/{name}`: for
/// running one several times on a device (the MODA paper's Figure 8 repeats PostMark
/// until the device is full; Figure 7 pre-fills it with Andrew). `None` for an unknown
/// name.
pub fn in_dir(name: &str, seed: u64, device_bytes: u64, dir: &str) -> Option<Box<dyn Workload>> {
    let s = stepper(name, seed, device_bytes, dir)?;
    Some(Box::new(Driver(s)))
}

/// Several workloads on one device, their steps interleaved at random (seeded), each
/// part spread evenly over the whole run; every part in its own directory and given an
/// equal share of the capacity. Named like "camera+phone". `None` if a name is unknown
/// or `names` is empty. See `combined.rs` for why interleaved and why shares.
pub fn combined(names: &[&str], seed: u64, device_bytes: u64) -> Option<Box<dyn Workload>> {
    let c = combined::Combined::new(names, seed, device_bytes)?;
    Some(Box::new(Driver(Box::new(c))))
}

/// Andrew's tree with its bytes scaled to `fraction` of the capacity (Table 1's run
/// copies 0.09), in `dir`: how the MODA paper's Figure 7 sets the initial utilization
/// ("artificially increased by executing the Andrew benchmark before each of the
/// measurements").
pub fn andrew_fill(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Box<dyn Workload> {
    Box::new(Driver(Box::new(andrew::Andrew::filling(
        seed,
        device_bytes,
        fraction,
        dir,
    ))))
}

/// What of workload `name` was fitted to the paper's Table 1, in a line (`None`: an
/// unknown name). Its module comment says how.
pub fn fitted(name: &str) -> Option<&'static str> {
    Some(match name {
        "camera" => "length: photos kept fill 30% of the capacity (Table 1's u)",
        "movie" => "length: movies copied until 99% of the capacity (Table 1's u)",
        "phone" => {
            "length: logs hold 5% of the capacity (u); the event mix, so the mean record \
             (142 bytes) gives Table 1's i / u"
        }
        "recorder" => {
            "length: logs hold 0.5% of the capacity (u); 32-byte records, for Table 1's i / u"
        }
        "fax" => "length: faxes fill 86% of the capacity (u); 50-100 KB files, for Table 1's i / u",
        "postmark" => "nothing: PostMark's own defaults",
        "andrew" => "the copied tree's bytes: 9% of the capacity (Table 1's u)",
        _ => return None,
    })
}

/// Workload `name` with its length no longer fitted to Table 1's u: it runs until its data
/// fill `fraction` of the capacity (PostMark, fitted to nothing, is as [`by_name`] gives
/// it). Parameters fitted to i / u stay (see [`fitted`]). `None` for an unknown name or a
/// combination.
pub fn filling(
    name: &str,
    seed: u64,
    device_bytes: u64,
    fraction: f64,
) -> Option<Box<dyn Workload>> {
    let dir = format!("/{name}");
    let s: Box<dyn Stepper> = match name {
        "camera" => Box::new(camera::Camera::filling(seed, device_bytes, fraction, &dir)),
        "movie" => Box::new(movie::Movie::filling(seed, device_bytes, fraction, &dir)),
        "phone" => Box::new(phone::Phone::filling(seed, device_bytes, fraction, &dir)),
        "recorder" => Box::new(recorder::Recorder::filling(
            seed,
            device_bytes,
            fraction,
            &dir,
        )),
        "fax" => Box::new(fax::Fax::filling(seed, device_bytes, fraction, &dir)),
        "andrew" => Box::new(andrew::Andrew::filling(seed, device_bytes, fraction, &dir)),
        _ => return in_dir(name, seed, device_bytes, &dir).filter(|_| name == "postmark"),
    };
    Some(Box::new(Driver(s)))
}

/// The stepwise form of a workload, in directory `dir`.
fn stepper(name: &str, seed: u64, device_bytes: u64, dir: &str) -> Option<Box<dyn Stepper>> {
    Some(match name {
        "camera" => Box::new(camera::Camera::new(seed, device_bytes, dir)),
        "movie" => Box::new(movie::Movie::new(seed, device_bytes, dir)),
        "phone" => Box::new(phone::Phone::new(seed, device_bytes, dir)),
        "recorder" => Box::new(recorder::Recorder::new(seed, device_bytes, dir)),
        "fax" => Box::new(fax::Fax::new(seed, device_bytes, dir)),
        "postmark" => Box::new(postmark::PostMark::new(seed, device_bytes, dir)),
        "andrew" => Box::new(andrew::Andrew::new(seed, device_bytes, dir)),
        _ => return None,
    })
}

/// Runs a stepper to its end: the public face of every workload.
struct Driver(Box<dyn Stepper>);

impl Workload for Driver {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn source(&self) -> &'static str {
        self.0.source()
    }

    fn run(&mut self, t: &mut dyn Target) -> Result<Summary, TargetError> {
        let mut c = Counted::new(t);
        while self.0.step(&mut c)? {}
        Ok(c.into_summary())
    }
}
