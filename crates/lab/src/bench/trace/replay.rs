//! Replaying a trace on the file system in simulated time, with up to N requests in flight.
//!
//! Setup (not measured) creates the files that exist before the trace starts and fills each
//! up to the last byte the trace touches in it, so every read finds data.
//!
//! The replay issues requests in trace order (FIFO) with at most `queue_depth` of them in
//! flight. Request i is issued at its arrival, or, if `queue_depth` earlier requests are
//! still outstanding then, when the first of them completes; the device's caller clock is
//! put at that issue time (`Flash::set_clock_ns`, which may move it back) and the file
//! system serves the request. Its completion is the device clock when the file system
//! returns, and its response time is completion minus arrival. The file system runs each
//! request to its end in the host, but every chip keeps its own timeline (`busy_until`):
//! a request's flash operations queue behind what earlier requests left on the same chip
//! and start at once on idle chips, so requests in flight overlap on different chips.
//!
//! With a depth of 1 (the default) this is a single queue: request i starts at
//! max(its arrival, the end of request i - 1), and the device clock jumps over idle time.
//! After the last request the clock is put at the last completion, so the replay's
//! simulated time ends with its makespan.
//!
//! A write is durable before it completes (write, then fsync: O_SYNC), as are a create
//! (fsync of the new file) and a delete (the file system writes the header that records it
//! before returning).
//!
//! Only flash time passes in the simulation unless `--software-cost` charges the host's own
//! work (per request, per page, per hand-off to a chip's worker) in simulated time. Requests in
//! flight are not ordered against each other beyond their chips' queues: a request whose
//! flash work lands on idle chips may complete before an earlier one.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use anyhow::{bail, ensure, Context};
use serde::Serialize;

use super::super::{noise, Progress};
use super::format::{Op, Request};
use super::target::Replayable;

/// What setup writes into the trace's initial files: this, over and over, from the
/// start of each 1 MiB of the file (seeded with the workload seed).
pub const SETUP_STEP: u64 = 1 << 20;

/// The bytes setup writes, 1 MiB of them.
pub fn setup_data(seed: u64) -> Vec<u8> {
    noise(SETUP_STEP as usize, seed ^ 0x5e70)
}

/// The bytes a write of the replay writes: the first `size` of these (as long as the
/// trace's largest write).
pub fn write_data(trace: &[Request], seed: u64) -> Vec<u8> {
    noise(largest(trace, Op::Write), seed)
}

/// Heap the replay's data buffers take (its largest write and its largest read).
pub fn buffer_bytes(trace: &[Request]) -> usize {
    largest(trace, Op::Write) + largest(trace, Op::Read)
}

fn largest(trace: &[Request], op: Op) -> usize {
    trace
        .iter()
        .filter(|r| r.op == op)
        .map(|r| r.size as usize)
        .max()
        .unwrap_or(0)
}

/// The files setup made, by name.
pub struct Prepared<F> {
    inos: HashMap<String, F>,
    /// Bytes setup wrote.
    pub bytes: u64,
}

impl<F> Prepared<F> {
    pub fn files(&self) -> usize {
        self.inos.len()
    }
}

/// Files that exist before the trace starts (whose first request is not `create`), in order
/// of first mention, with the bytes each must hold: the furthest byte a read or write
/// reaches before the file is first deleted.
pub fn initial_files(trace: &[Request]) -> Vec<(String, u64)> {
    // Per file: index into `files`, or None if the trace creates it; and whether its first
    // life is still going.
    let mut seen: HashMap<&str, (Option<usize>, bool)> = HashMap::new();
    let mut files: Vec<(String, u64)> = Vec::new();
    for r in trace {
        let entry = seen.entry(&r.file).or_insert_with(|| {
            if r.op == Op::Create {
                (None, false)
            } else {
                files.push((r.file.clone(), 0));
                (Some(files.len() - 1), true)
            }
        });
        if let (Some(i), true) = *entry {
            match r.op {
                Op::Read | Op::Write => files[i].1 = files[i].1.max(r.offset + r.size),
                Op::Delete | Op::Create => entry.1 = false,
            }
        }
    }
    files
}

/// Creates and fills the trace's initial files (fsynced; not measured).
pub fn prepare<T: Replayable>(
    fs: &mut T,
    trace: &[Request],
    seed: u64,
    quiet: bool,
) -> anyhow::Result<Prepared<T::File>> {
    let files = initial_files(trace);
    let total: u64 = files.iter().map(|f| f.1).sum();
    let free = fs.free_bytes()?;
    ensure!(
        total <= free,
        "the trace's files hold {:.1} MiB before it starts, more than the file system's \
         {:.1} MiB free; use a bigger --device-size or --geometry",
        total as f64 / (1 << 20) as f64,
        free as f64 / (1 << 20) as f64
    );
    let max_file = fs.max_file_size();
    let step = SETUP_STEP;
    let data = setup_data(seed);
    let mut progress = Progress::bytes(total, "setting up", quiet);
    let mut inos = HashMap::new();
    for (name, bytes) in files {
        ensure!(
            bytes <= max_file,
            "the trace reaches byte {bytes} of '{name}', beyond the largest file ({max_file})"
        );
        let ino = fs
            .create(&name)
            .with_context(|| format!("creating '{name}'"))?;
        let mut offset = 0;
        while offset < bytes {
            let n = step.min(bytes - offset) as usize;
            let done = fs
                .write(&ino, offset, &data[..n])
                .with_context(|| format!("filling '{name}' at {offset}"))?;
            ensure!(
                done == n,
                "filling '{name}': the device is full at {offset}"
            );
            offset += n as u64;
            progress.inc(n as u64);
        }
        fs.fsync(&ino)
            .with_context(|| format!("fsync of '{name}'"))?;
        inos.insert(name, ino);
    }
    progress.finish();
    Ok(Prepared { inos, bytes: total })
}

/// One request as the file system served it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    pub op: Op,
    /// Its arrival, nanoseconds after the replay started (arrival 0).
    pub arrival_ns: u64,
    /// Queueing: from arrival until it was issued (with a queue depth of 1, until the
    /// previous request completed; with N, until fewer than N were in flight).
    pub wait_ns: u64,
    /// From its issue to its completion (including time its flash operations waited for
    /// chips busy with other requests in flight).
    pub service_ns: u64,
    /// Bytes read or written.
    pub bytes: u64,
}

impl Served {
    pub fn response_ns(&self) -> u64 {
        self.wait_ns + self.service_ns
    }

    /// Its completion, nanoseconds after the replay started.
    pub fn completion_ns(&self) -> u64 {
        self.arrival_ns + self.response_ns()
    }
}

/// Replays `trace` on `fs`, set up by `prepare`, with at most `queue_depth` (>= 1)
/// requests in flight. Arrival 0 is the device clock when the replay starts.
pub fn replay<T: Replayable>(
    fs: &mut T,
    prepared: Prepared<T::File>,
    trace: &[Request],
    seed: u64,
    queue_depth: usize,
    quiet: bool,
) -> anyhow::Result<Vec<Served>> {
    let mut served = Vec::with_capacity(trace.len());
    replay_into(fs, prepared, trace, seed, queue_depth, quiet, &mut served)?;
    Ok(served)
}

/// `replay`, leaving in `served` the requests that completed before an error (a power
/// cut, a full device): what the file system acknowledged.
pub fn replay_into<T: Replayable>(
    fs: &mut T,
    mut prepared: Prepared<T::File>,
    trace: &[Request],
    seed: u64,
    queue_depth: usize,
    quiet: bool,
    served: &mut Vec<Served>,
) -> anyhow::Result<()> {
    ensure!(queue_depth >= 1, "the queue depth must be at least 1");
    let data = write_data(trace, seed);
    let mut buf = vec![0u8; largest(trace, Op::Read)];
    let t0 = fs.now_ns();
    let mut progress = Progress::items(trace.len() as u64, "replaying", quiet);
    // Completion times (device clock) of the requests in flight, earliest first.
    let mut in_flight: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(queue_depth + 1);
    let mut last_issue = t0;
    let mut last_completion = t0;
    for (i, r) in trace.iter().enumerate() {
        let arrival = r
            .arrival_us
            .checked_mul(1000)
            .and_then(|ns| ns.checked_add(t0))
            .with_context(|| format!("request {}: arrival time out of range", i + 1))?;
        // Requests done by the time this one arrives are no longer in flight.
        while in_flight.peek().is_some_and(|&Reverse(end)| end <= arrival) {
            in_flight.pop();
        }
        // FIFO: never issued before the request ahead of it.
        let mut start = arrival.max(last_issue);
        if in_flight.len() >= queue_depth {
            if let Some(Reverse(end)) = in_flight.pop() {
                start = start.max(end);
            }
        }
        fs.set_clock_ns(start);
        let bytes = serve(fs, &mut prepared.inos, r, &data, &mut buf).with_context(|| {
            format!(
                "request {} ({} of '{}', {} bytes at {})",
                i + 1,
                r.op.name(),
                r.file,
                r.size,
                r.offset
            )
        })?;
        let end = fs.now_ns();
        in_flight.push(Reverse(end));
        last_issue = start;
        last_completion = last_completion.max(end);
        served.push(Served {
            op: r.op,
            arrival_ns: arrival - t0,
            wait_ns: start - arrival,
            service_ns: end - start,
            bytes,
        });
        progress.inc(1);
    }
    // The replay ends when its last request completes, whichever was issued last.
    fs.set_clock_ns(last_completion);
    progress.finish();
    Ok(())
}

/// Serves one request; returns the bytes it moved.
fn serve<T: Replayable>(
    fs: &mut T,
    inos: &mut HashMap<String, T::File>,
    r: &Request,
    data: &[u8],
    buf: &mut [u8],
) -> anyhow::Result<u64> {
    // The host's cost of taking the request (0 unless --software-cost).
    fs.charge_request();
    let ino_of = |inos: &HashMap<String, T::File>| {
        inos.get(&r.file)
            .cloned()
            .with_context(|| format!("no file '{}' at this point of the trace", r.file))
    };
    let size = r.size as usize;
    Ok(match r.op {
        Op::Read => fs.read(&ino_of(inos)?, r.offset, &mut buf[..size])? as u64,
        Op::Write => {
            let ino = ino_of(inos)?;
            let done = fs.write(&ino, r.offset, &data[..size])?;
            if done != size {
                bail!("short write ({done} bytes): the device is full");
            }
            fs.fsync(&ino)?;
            r.size
        }
        Op::Create => {
            let ino = fs.create(&r.file)?;
            fs.fsync(&ino)?;
            inos.insert(r.file.clone(), ino);
            0
        }
        Op::Delete => {
            fs.unlink(&r.file)?;
            inos.remove(&r.file);
            0
        }
    })
}

/// Response times and volumes of a replay.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub creates: u64,
    pub deletes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Mean response time (completion - arrival) over all requests.
    pub mean_response_ms: f64,
    /// Response time percentiles (nearest rank) and the largest.
    pub p50_response_ms: f64,
    pub p90_response_ms: f64,
    pub p99_response_ms: f64,
    pub max_response_ms: f64,
    /// Mean time requests waited before they were issued (for the one before them, at a
    /// queue depth of 1; for a free slot, at N).
    pub mean_wait_ms: f64,
    /// Mean time from a request's issue to its completion.
    pub mean_service_ms: f64,
    pub mean_read_response_ms: f64,
    pub mean_write_response_ms: f64,
    /// From the first request's arrival to the last completion.
    pub makespan_ms: f64,
    /// Bytes read and written over the makespan, in MB (10^6 bytes) per second.
    pub mb_per_s: f64,
}

impl Summary {
    pub fn of(served: &[Served]) -> Summary {
        let count = |op: Op| served.iter().filter(|s| s.op == op).count() as u64;
        let bytes = |op: Op| -> u64 { served.iter().filter(|s| s.op == op).map(|s| s.bytes).sum() };
        let mean_ms = |it: &mut dyn Iterator<Item = u64>| {
            let (mut n, mut sum) = (0u64, 0u128);
            for ns in it {
                n += 1;
                sum += u128::from(ns);
            }
            if n == 0 {
                f64::NAN
            } else {
                sum as f64 / n as f64 / 1e6
            }
        };
        let mut sorted: Vec<u64> = served.iter().map(Served::response_ns).collect();
        sorted.sort_unstable();
        let response_of = |op: Op| {
            mean_ms(
                &mut served
                    .iter()
                    .filter(move |s| s.op == op)
                    .map(Served::response_ns),
            )
        };
        let first_arrival = served.iter().map(|s| s.arrival_ns).min().unwrap_or(0);
        let last_completion = served.iter().map(Served::completion_ns).max().unwrap_or(0);
        let makespan_ns = last_completion.saturating_sub(first_arrival);
        let bytes_read = bytes(Op::Read);
        let bytes_written = bytes(Op::Write);
        Summary {
            requests: served.len() as u64,
            reads: count(Op::Read),
            writes: count(Op::Write),
            creates: count(Op::Create),
            deletes: count(Op::Delete),
            bytes_read,
            bytes_written,
            mean_response_ms: mean_ms(&mut sorted.iter().copied()),
            p50_response_ms: percentile_ms(&sorted, 0.50),
            p90_response_ms: percentile_ms(&sorted, 0.90),
            p99_response_ms: percentile_ms(&sorted, 0.99),
            max_response_ms: sorted.last().map_or(f64::NAN, |&ns| ns as f64 / 1e6),
            mean_wait_ms: mean_ms(&mut served.iter().map(|s| s.wait_ns)),
            mean_service_ms: mean_ms(&mut served.iter().map(|s| s.service_ns)),
            mean_read_response_ms: response_of(Op::Read),
            mean_write_response_ms: response_of(Op::Write),
            makespan_ms: makespan_ns as f64 / 1e6,
            mb_per_s: if makespan_ns == 0 {
                f64::NAN
            } else {
                (bytes_read + bytes_written) as f64 / 1e6 / (makespan_ns as f64 / 1e9)
            },
        }
    }
}

/// The chip's projected life from each block's erases during a replay of `trace`
/// (`erased`): carried forward at the trace's rate, unless the device could not keep it
/// (then at the makespan's). None when the replay took no time.
pub fn projected_life(
    trace: &[Request],
    summary: &Summary,
    erased: &[u64],
    endurance: u32,
) -> Option<nandkit_models::Lifetime> {
    let trace_span_s = trace.last().map_or(0, |r| r.arrival_us) as f64 / 1e6;
    let span_s = trace_span_s.max(summary.makespan_ms / 1e3);
    nandkit_models::project(erased, span_s, u64::from(endurance)).ok()
}

/// Nearest-rank percentile of sorted values, in ms (NaN, JSON null, if there are none).
fn percentile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::super::super::{format as mkfs, Fs, FsArgs};
    use super::super::format::parse;
    use super::super::target::Replayable;
    use super::*;

    fn tiny_fs() -> Fs {
        let config = nandkit_flash::preset("tiny").unwrap();
        mkfs(config, &FsArgs::default()).unwrap()
    }

    fn run(csv: &str) -> Vec<Served> {
        run_on(1, 1, csv)
    }

    /// Replays `csv` on the tiny preset split over `chips` chips, `depth` requests in flight.
    fn run_on(chips: u32, depth: usize, csv: &str) -> Vec<Served> {
        let trace = parse(csv.as_bytes()).unwrap();
        let mut config = nandkit_flash::preset("tiny").unwrap();
        if chips > 1 {
            config = config.with_chips(chips).unwrap();
        }
        let mut fs = mkfs(config, &FsArgs::default()).unwrap();
        let prepared = prepare(&mut fs, &trace, 1, true).unwrap();
        let t0 = Replayable::now_ns(&mut fs);
        let served = replay(&mut fs, prepared, &trace, 1, depth, true).unwrap();
        // The replay leaves the clock at its last completion.
        let last = served.iter().map(Served::completion_ns).max().unwrap();
        assert_eq!(Replayable::now_ns(&mut fs), t0 + last);
        served
    }

    /// Four one-page reads of consecutive pages of a file, all arriving at 0.
    const FOUR_READS: &str = "arrival_us,op,file,offset,size\n\
                              0,read,f,0,2048\n\
                              0,read,f,2048,2048\n\
                              0,read,f,4096,2048\n\
                              0,read,f,6144,2048\n";

    /// One 2 KiB page read on the tiny preset: tR 25 us, then 2,048 + 64 bytes over a
    /// 40 MB/s bus (52.8 us).
    const PAGE_READ_NS: u64 = 25_000 + 52_800;

    #[test]
    fn setup_fills_what_the_trace_touches_before_its_first_delete() {
        let trace = parse(
            b"arrival_us,op,file,offset,size\n\
              0,read,a,4096,100\n\
              1,write,b,0,10\n\
              2,create,c,0,0\n\
              3,write,a,8192,1\n\
              4,delete,a,0,0\n\
              5,create,a,0,0\n\
              6,write,a,0,99999\n\
              7,read,c,0,5\n",
        )
        .unwrap();
        assert_eq!(
            initial_files(&trace),
            vec![("a".to_string(), 8193), ("b".to_string(), 10)]
        );
    }

    #[test]
    fn requests_far_apart_do_not_wait() {
        // Page-aligned one-page reads 10 ms apart: each costs exactly one page read.
        let served = run("arrival_us,op,file,offset,size\n\
                          0,read,f,0,2048\n\
                          10000,read,f,2048,2048\n");
        for s in &served {
            assert_eq!(s.wait_ns, 0);
            assert_eq!(s.service_ns, PAGE_READ_NS);
        }
    }

    #[test]
    fn back_to_back_requests_queue() {
        // Both arrive at 0: the second waits for the first, then takes its own page read.
        let served = run("arrival_us,op,file,offset,size\n\
                          0,read,f,0,2048\n\
                          0,read,f,2048,2048\n\
                          50,read,f,4096,2048\n");
        assert_eq!(served[0].response_ns(), PAGE_READ_NS);
        assert_eq!(served[1].wait_ns, PAGE_READ_NS);
        assert_eq!(served[1].response_ns(), 2 * PAGE_READ_NS);
        // The third arrives at 50 us, while the second is being read; it waits until
        // 2 x 77.8 us.
        assert_eq!(served[2].wait_ns, 2 * PAGE_READ_NS - 50_000);
        let summary = Summary::of(&served);
        assert_eq!(summary.reads, 3);
        assert_eq!(summary.bytes_read, 3 * 2048);
        let total_ns = PAGE_READ_NS + 2 * PAGE_READ_NS + (3 * PAGE_READ_NS - 50_000);
        let mean_ms = total_ns as f64 / 3.0 / 1e6;
        assert!((summary.mean_response_ms - mean_ms).abs() < 1e-12);
        assert_eq!(summary.p50_response_ms, 2.0 * PAGE_READ_NS as f64 / 1e6);
    }

    #[test]
    fn on_one_chip_requests_in_flight_complete_when_one_at_a_time_would() {
        // The chip serves its reads in issue order whatever the depth: the same
        // completions, only the split of response time into wait and service moves.
        let one = run_on(1, 1, FOUR_READS);
        let four = run_on(1, 4, FOUR_READS);
        for (k, (a, b)) in one.iter().zip(&four).enumerate() {
            let k = k as u64;
            assert_eq!(a.response_ns(), (k + 1) * PAGE_READ_NS);
            assert_eq!(b.response_ns(), a.response_ns());
            assert_eq!((a.wait_ns, a.service_ns), (k * PAGE_READ_NS, PAGE_READ_NS));
            // All four are issued at once; each waits on the chip instead.
            assert_eq!((b.wait_ns, b.service_ns), (0, (k + 1) * PAGE_READ_NS));
        }
        assert_eq!(
            Summary::of(&four).makespan_ms,
            Summary::of(&one).makespan_ms
        );
    }

    #[test]
    fn requests_in_flight_overlap_on_different_chips() {
        // Consecutive pages of a file are on alternate chips of two: with two requests in
        // flight, pages 0 and 1 are read at once, then 2 and 3.
        let served = run_on(2, 2, FOUR_READS);
        let responses: Vec<u64> = served.iter().map(Served::response_ns).collect();
        let p = PAGE_READ_NS;
        assert_eq!(responses, [p, p, 2 * p, 2 * p]);
        // The third waits for the first to complete: at most two in flight.
        assert_eq!(served[2].wait_ns, p);
        let summary = Summary::of(&served);
        assert_eq!(summary.makespan_ms, 2.0 * p as f64 / 1e6);
        let mb_per_s = 4.0 * 2048.0 / 1e6 / (2.0 * p as f64 / 1e9);
        assert!((summary.mb_per_s - mb_per_s).abs() < 1e-9, "{summary:?}");
        // One at a time, the two chips take turns: no overlap.
        let single = run_on(2, 1, FOUR_READS);
        assert_eq!(Summary::of(&single).makespan_ms, 4.0 * p as f64 / 1e6);
        // More depth than chips gains nothing more.
        let deep = run_on(2, 8, FOUR_READS);
        assert_eq!(Summary::of(&deep).makespan_ms, summary.makespan_ms);
    }

    #[test]
    fn a_request_arriving_after_the_queue_drained_is_not_held() {
        // Depth 1: the second arrives while the first is read, waits; the third arrives
        // long after both and starts at once. Same with depth 2 on one chip.
        for depth in [1, 2] {
            let served = run_on(
                1,
                depth,
                "arrival_us,op,file,offset,size\n\
                 0,read,f,0,2048\n\
                 10,read,f,2048,2048\n\
                 10000,read,f,4096,2048\n",
            );
            assert_eq!(served[1].response_ns(), 2 * PAGE_READ_NS - 10_000);
            assert_eq!(served[2].wait_ns, 0);
            assert_eq!(served[2].response_ns(), PAGE_READ_NS);
            let summary = Summary::of(&served);
            assert_eq!(
                summary.makespan_ms,
                (10_000_000 + PAGE_READ_NS) as f64 / 1e6
            );
        }
    }

    #[test]
    fn a_write_is_durable_before_it_completes() {
        let served = run("arrival_us,op,file,offset,size\n\
                          0,create,log,0,0\n\
                          1000,write,log,0,100\n\
                          900000,read,log,0,100\n");
        // The write programs at least its data page and the file's header (200 us each
        // on the tiny preset, plus transfers) before it completes.
        assert!(served[1].service_ns >= 2 * 200_000, "{:?}", served[1]);
        assert_eq!(served[2].bytes, 100);
        let summary = Summary::of(&served);
        assert_eq!(
            (summary.creates, summary.writes, summary.bytes_written),
            (1, 1, 100)
        );
    }

    #[test]
    fn a_full_device_is_an_error_not_a_panic() {
        let trace =
            parse(b"arrival_us,op,file,offset,size\n0,read,big,0,1\n0,read,big,67108863,1\n")
                .unwrap();
        let mut fs = tiny_fs();
        let e = prepare(&mut fs, &trace, 1, true).err().unwrap();
        assert!(e.to_string().contains("free"), "{e}");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<u64> = (1..=100).map(|ms| ms * 1_000_000).collect();
        assert_eq!(percentile_ms(&sorted, 0.5), 50.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 99.0);
        assert_eq!(percentile_ms(&[7_000_000], 0.99), 7.0);
        assert!(percentile_ms(&[], 0.5).is_nan());
    }
}
