//! One design's row of `compare`: the workload replayed through `bench trace`'s replay
//! (`replay::prepare`, `replay::replay`, `Summary::of`, the same lifetime projection),
//! then a clean remount, then the power-cut sweep.

use std::time::Instant;

use nandkit_flash::DeviceConfig;
use serde::{Deserialize, Serialize};

use super::design::{Design, Subject};
use super::power_cut::{self, Sweep};
use crate::bench::trace::format::Request;
use crate::bench::trace::replay::{self, Served, Summary};
use crate::bench::{BenchNvramArgs, Fs};

/// What every design is measured on.
pub struct Spec {
    pub config: DeviceConfig,
    pub trace: Vec<Request>,
    /// Seed of the data written.
    pub seed: u64,
    pub queue_depth: usize,
    /// Cuts of the power-cut sweep (0: none).
    pub cuts: u32,
    pub nvram: BenchNvramArgs,
}

/// One design's measurements. A figure is null where it has no value (no request of
/// that kind, a design that did not run).
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Row {
    pub design: String,
    pub what: String,
    /// "ok", or why the design has no figures (does not fit this chip, failed).
    pub status: String,
    pub requests: u64,
    /// Bytes read and written over the time the device spent serving requests (MB/s).
    pub busy_mb_per_s: Option<f64>,
    /// Bytes over the makespan, idle time included (bench trace's MB/s).
    pub mb_per_s: Option<f64>,
    /// Request latency: from a request's issue to its completion (what one request costs
    /// on this design; queueing behind earlier requests left out), percentiles and max.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Response time: from arrival to completion, queueing included (bench trace's).
    pub mean_response_ms: Option<f64>,
    pub p99_response_ms: Option<f64>,
    /// Flash pages programmed per page of data the workload wrote.
    pub write_amplification: Option<f64>,
    pub flash_programs: u64,
    pub flash_erases: u64,
    /// Erase blocks of the chip(s) erased at least once during the replay.
    pub blocks_erased: u64,
    pub endurance_cycles: u32,
    pub erases_per_day: Option<f64>,
    /// Years until the most-erased block reaches the endurance at the trace's rate (null
    /// when the replay erased nothing: no end in sight).
    pub years_first_block: Option<f64>,
    /// Years if wear were spread evenly over every block.
    pub years_levelled: Option<f64>,
    /// The most-erased block's erases over the mean's.
    pub wear_spread: Option<f64>,
    /// Heap the file system holds after a clean remount, and the most it held during the
    /// replay (bytes; the simulated chip's page store left out).
    pub ram_after_mount_bytes: u64,
    pub ram_peak_bytes: u64,
    /// Simulated mount time after a clean unmount (UBI's attach included).
    pub mount_clean_ms: Option<f64>,
    pub power_cut: Sweep,
    /// Response time CDF: (ms, fraction of requests at most that long), at most 200 points.
    pub latency_cdf: Vec<(f64, f64)>,
    /// Blocks by erases during the replay: (erases, blocks).
    pub wear_histogram: Vec<(u64, u64)>,
    /// Host seconds the design took (replay, remount, sweep).
    pub host_s: f64,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl Row {
    /// A design with no figures, and why.
    pub fn without(design: &Design, status: String) -> Row {
        Row {
            design: design.name.into(),
            what: design.what.into(),
            status,
            ..Row::default()
        }
    }

    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

/// Measures `design` on `spec`: a row, with the reason in its status if it cannot run.
pub fn measure(spec: &Spec, design: &Design) -> Row {
    if let Some(why) = design.unfit(&spec.config) {
        return Row::without(design, format!("not run: {why}"));
    }
    let result = if design.is_littlefs() {
        measure_on::<nandkit_littlefs::Littlefs<nandkit_flash::FlashDevice>>(spec, design)
    } else {
        measure_on::<Fs>(spec, design)
    };
    result.unwrap_or_else(|e| Row::without(design, format!("failed: {e:#}")))
}

fn measure_on<S: Subject>(spec: &Spec, design: &Design) -> anyhow::Result<Row> {
    let host = Instant::now();
    let (mut fs, base) = S::format(design, &spec.config, &spec.nvram)?;
    let prepared = replay::prepare(&mut fs, &spec.trace, spec.seed, true)?;
    let worn_before = fs.erase_counts();
    let before = fs.chips().stats().total();
    let ops_before = fs.chips().state_ops();
    // The replay's own memory, held beside the file system's and not counted as its:
    // the served requests (allocated here, before the peak starts), its data buffers
    // and the erase counts taken before it.
    let mut served = Vec::with_capacity(spec.trace.len());
    let own = served.capacity() * std::mem::size_of::<Served>()
        + replay::buffer_bytes(&spec.trace)
        + worn_before.capacity() * std::mem::size_of::<u64>();
    crate::heap::reset_peak();
    replay::replay_into(
        &mut fs,
        prepared,
        &spec.trace,
        spec.seed,
        spec.queue_depth,
        true,
        &mut served,
    )?;
    let peak = crate::heap::peak_bytes();
    let grown = fs.chips().storage_heap_bytes().saturating_sub(base.pages);
    let ram_peak_bytes = peak
        .saturating_sub(base.live)
        .saturating_sub(grown)
        .saturating_sub(own) as u64;
    let ops = fs.chips().state_ops() - ops_before;
    let after = fs.chips().stats().total();
    let erased = fs.erases_since(&worn_before);
    drop(worn_before);
    let summary = Summary::of(&served);
    let geometry = spec.config.geometry;
    let endurance = spec.config.wear.endurance_cycles;
    let life = replay::projected_life(&spec.trace, &summary, &erased, endurance);
    let programs = after.programs - before.programs;
    let written_pages = summary
        .bytes_written
        .div_ceil(u64::from(geometry.page_size_bytes));
    let busy_ns: u64 = served.iter().map(|s| s.service_ns).sum();
    let latency = Latency::of(&served);
    drop(served);
    let (p50_ms, p99_ms, max_ms) = (
        latency.percentile(0.50),
        latency.percentile(0.99),
        latency.percentile(1.0),
    );
    let latency_cdf = latency.cdf(200);
    drop(latency);
    let wear_histogram = histogram(&erased);
    let blocks_erased = erased.iter().filter(|&&e| e > 0).count() as u64;
    drop(erased);
    // What the row keeps from here on is not the file system's either.
    let kept = (latency_cdf.capacity() + wear_histogram.capacity()) * 16;
    let (fs, mount_ms) = fs.remount()?;
    let mut fs = fs;
    let ram_after_mount_bytes = fs.heap_bytes(base).saturating_sub(kept as u64);
    drop(fs);
    let power_cut = if spec.cuts > 0 {
        power_cut::sweep::<S>(spec, design, ops, spec.cuts)?
    } else {
        Sweep::default()
    };
    Ok(Row {
        design: design.name.into(),
        what: design.what.into(),
        status: "ok".into(),
        requests: summary.requests,
        busy_mb_per_s: (busy_ns > 0).then(|| {
            (summary.bytes_read + summary.bytes_written) as f64 / 1e6 / (busy_ns as f64 / 1e9)
        }),
        mb_per_s: finite(summary.mb_per_s),
        p50_ms,
        p99_ms,
        max_ms,
        mean_response_ms: finite(summary.mean_response_ms),
        p99_response_ms: finite(summary.p99_response_ms),
        write_amplification: (written_pages > 0).then(|| programs as f64 / written_pages as f64),
        flash_programs: programs,
        flash_erases: after.erases - before.erases,
        blocks_erased,
        endurance_cycles: endurance,
        erases_per_day: life.and_then(|l| finite(l.erases_per_day)),
        years_first_block: life.and_then(|l| finite(l.years_first_block)),
        years_levelled: life.and_then(|l| finite(l.years_levelled)),
        wear_spread: life.and_then(|l| finite(l.wear_spread)),
        ram_after_mount_bytes,
        ram_peak_bytes,
        mount_clean_ms: Some(mount_ms),
        power_cut,
        latency_cdf,
        wear_histogram,
        host_s: host.elapsed().as_secs_f64(),
    })
}

/// Request latencies (issue to completion), sorted.
struct Latency(Vec<u64>);

impl Latency {
    fn of(served: &[Served]) -> Latency {
        let mut ns: Vec<u64> = served.iter().map(|s| s.service_ns).collect();
        ns.sort_unstable();
        Latency(ns)
    }

    /// Nearest-rank percentile in ms (`q` = 1: the largest).
    fn percentile(&self, q: f64) -> Option<f64> {
        let n = self.0.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n.max(1));
        self.0.get(rank - 1).map(|&ns| ns as f64 / 1e6)
    }

    /// The CDF at (at most) `points` evenly spaced ranks, the last included.
    fn cdf(&self, points: usize) -> Vec<(f64, f64)> {
        let ns = &self.0;
        let n = ns.len();
        if n == 0 {
            return Vec::new();
        }
        let step = n.div_ceil(points).max(1);
        let mut out: Vec<(f64, f64)> = (step - 1..n)
            .step_by(step)
            .map(|i| (ns[i] as f64 / 1e6, (i + 1) as f64 / n as f64))
            .collect();
        if out.last().map(|p| p.1) != Some(1.0) {
            out.push((ns[n - 1] as f64 / 1e6, 1.0));
        }
        out
    }
}

/// Blocks by their erase count, every count from 0 to the largest.
fn histogram(erased: &[u64]) -> Vec<(u64, u64)> {
    let max = erased.iter().copied().max().unwrap_or(0);
    let mut counts = vec![0u64; max as usize + 1];
    for &e in erased {
        counts[e as usize] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(e, n)| (e as u64, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cdf_ends_at_the_largest_and_climbs() {
        let served: Vec<Served> = (1..=1000u64)
            .map(|i| Served {
                op: crate::bench::trace::format::Op::Read,
                arrival_ns: 0,
                wait_ns: 0,
                service_ns: i * 1_000_000,
                bytes: 1,
            })
            .collect();
        let latency = Latency::of(&served);
        assert_eq!(latency.percentile(0.5), Some(500.0));
        assert_eq!(latency.percentile(1.0), Some(1000.0));
        assert_eq!(Latency(Vec::new()).percentile(0.5), None);
        let c = latency.cdf(200);
        assert!(c.len() <= 201);
        assert_eq!(*c.last().unwrap(), (1000.0, 1.0));
        assert_eq!(c[0], (5.0, 0.005));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(histogram(&[0, 2, 2, 1]), vec![(0, 1), (1, 1), (2, 2)]);
    }
}
