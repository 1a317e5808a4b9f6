//! Five synthetic smartphone traces after the MA paper's Table 3 (section 5.1), each made
//! from a seed. The paper's traces are not public; what it states about them is used as
//! given, everything else is OUR assumption, chosen once for plausibility and not tuned to
//! make any result come out. The paper's KB / MB / GB are read as KiB / MiB / GiB.
//!
//! Stated by the paper (Table 3 and the prose of section 5.1/5.2):
//!
//! | trace       | run    | reads of requests | volume             | other                  |
//! |-------------|--------|-------------------|--------------------|------------------------|
//! | AngryBird   | 1 h    | 96.9%             | 2.79 GB read       |                        |
//! | GoogleMap   | 30 min | 63.8%             | read ~ written (*) |                        |
//! | Movie       | 15 min | 87.4%             | 110.3 MB read      |                        |
//! | CameraVideo | 3 min  | 4.4% (95.6% wr.)  | 373.8 MB written   |                        |
//! | WebBrowsing | 15 min | 42.3%             | read ~ written (*) | mean request 1.8 KB, mean inter-arrival 14.5 ms |
//!
//! (*) "GoogleMap and WebBrowsing have a similar amount of input and output data": read
//! here as bytes read = bytes written within each of the two traces.
//!
//! OUR assumptions, for every trace: arrivals are a Poisson process (exponential gaps);
//! a request's size is uniform on [mean/2, 3 mean/2]; random accesses start 4 KiB aligned;
//! all files live in the root directory. Per trace:
//!
//! - AngryBird: reads of 64 KiB at random in 24 asset files of 4 MiB; writes (game state)
//!   of 4 KiB at random in one 1 MiB save file. Mean gap derived from the read volume:
//!   2.79 GiB / 64 KiB reads = 96.9% of the requests in one hour (about 82 ms).
//! - GoogleMap: mean gap 50 ms; reads of 16 KiB (map tiles) at random in 16 tile-cache
//!   files of 4 MiB; writes into the same files, mean size from read bytes = written
//!   bytes (16 KiB x 63.8 / 36.2, about 28 KiB).
//! - Movie: reads of 128 KiB front to back through 8 clips of 16 MiB (wrapping); writes
//!   (player state) of 4 KiB at random in one 1 MiB file. Mean gap derived from the read
//!   volume (110.3 MiB / 128 KiB = 87.4% of the requests in 15 min, about 0.93 s).
//! - CameraVideo: writes of 256 KiB appended to one video file the trace creates at its
//!   start; reads of 4 KiB at random in one 2 MiB camera file. Mean gap derived from the
//!   written volume (373.8 MiB / 256 KiB = 95.6% of the requests in 3 min, about 121 ms).
//! - WebBrowsing: reads and writes at random in 256 cache files of 32 KiB; mean sizes from
//!   the 1.8 KiB mean and read bytes = written bytes (about 2.1 KiB reads, 1.6 KiB writes).
//!
//! One more trace is ours, not the paper's: TwoWriters, two files the trace creates and
//! then writes front to back in 4 KiB records (256 each, 2 MiB in all), the requests
//! alternating between the two files and all arriving at time 0. Each write is O_SYNC (the
//! replay makes every write durable before it completes), so at a queue depth of 1 the
//! writes run one at a time, and with requests in flight (`--queue-depth`) the records of
//! the two files overlap on the chips of an array. Its `--scale` is the fraction of the
//! 256 records per file; the seed changes only the data written.
//!
//! Scaling (`fit`): a replay covers a fraction `time` of the application's run (the first
//! minutes of it), so request sizes, the mix and the arrival rate, and therefore response
//! times, are those of the whole run while the run takes seconds. File sizes are scaled
//! by `files` only when the working set would not fit in half the device.

use anyhow::{bail, ensure};
use clap::ValueEnum;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::format::{Op, Request};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Alignment of random accesses (a page-cache page).
const ALIGN: u64 = 4 * KIB;

/// With no --scale, a replay moves at most this much data (reads + writes), so a run takes
/// about a second of host time on a 2-core machine.
pub const TRAFFIC_BUDGET: u64 = 256 * MIB;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum App {
    #[value(name = "AngryBird")]
    AngryBird,
    #[value(name = "GoogleMap")]
    GoogleMap,
    #[value(name = "Movie")]
    Movie,
    #[value(name = "CameraVideo")]
    CameraVideo,
    #[value(name = "WebBrowsing")]
    WebBrowsing,
    /// Ours: two files written in alternating 4 KiB O_SYNC records, arriving at once.
    #[value(name = "TwoWriters")]
    TwoWriters,
}

/// TwoWriters: records per file at scale 1, their size, and the files' names.
const TWO_WRITERS_RECORDS: u64 = 256;
const TWO_WRITERS_RECORD: u64 = 4 * KIB;
const TWO_WRITERS_FILES: [&str; 2] = ["writer0", "writer1"];

impl App {
    /// The paper's five traces (TwoWriters is not one).
    #[cfg(test)]
    pub const ALL: [App; 5] = [
        App::AngryBird,
        App::GoogleMap,
        App::Movie,
        App::CameraVideo,
        App::WebBrowsing,
    ];

    pub fn name(self) -> &'static str {
        match self {
            App::AngryBird => "AngryBird",
            App::GoogleMap => "GoogleMap",
            App::Movie => "Movie",
            App::CameraVideo => "CameraVideo",
            App::WebBrowsing => "WebBrowsing",
            App::TwoWriters => "TwoWriters",
        }
    }

    /// Length of the application's run in the paper (Table 3), seconds (0 for TwoWriters,
    /// whose requests all arrive at once).
    pub fn run_s(self) -> f64 {
        self.model().map_or(0.0, |m| m.run_s)
    }

    /// The model of one of the paper's traces (None for TwoWriters, which has none).
    fn model(self) -> Option<Model> {
        Some(match self {
            App::AngryBird => {
                let (share, read) = (0.969, 64 * KIB);
                Model {
                    run_s: 3600.0,
                    read_share: share,
                    mean_gap_us: gap_for_volume(3600.0, share, read, 2.79 * GIB as f64),
                    read_mean: read,
                    write_mean: 4 * KIB,
                    reads: Place::Random(0),
                    writes: Place::Random(1),
                    sets: vec![set("asset", 24, 4 * MIB), set("save", 1, MIB)],
                }
            }
            App::GoogleMap => {
                let (share, read) = (0.638, 16 * KIB);
                Model {
                    run_s: 1800.0,
                    read_share: share,
                    mean_gap_us: 50_000.0,
                    read_mean: read,
                    write_mean: same_volume(read, share),
                    reads: Place::Random(0),
                    writes: Place::Random(0),
                    sets: vec![set("tile", 16, 4 * MIB)],
                }
            }
            App::Movie => {
                let (share, read) = (0.874, 128 * KIB);
                Model {
                    run_s: 900.0,
                    read_share: share,
                    mean_gap_us: gap_for_volume(900.0, share, read, 110.3 * MIB as f64),
                    read_mean: read,
                    write_mean: 4 * KIB,
                    reads: Place::Sequential(0),
                    writes: Place::Random(1),
                    sets: vec![set("clip", 8, 16 * MIB), set("player", 1, MIB)],
                }
            }
            App::CameraVideo => {
                let (share, write) = (0.044, 256 * KIB);
                Model {
                    run_s: 180.0,
                    read_share: share,
                    mean_gap_us: gap_for_volume(180.0, 1.0 - share, write, 373.8 * MIB as f64),
                    read_mean: 4 * KIB,
                    write_mean: write,
                    reads: Place::Random(0),
                    writes: Place::Append,
                    sets: vec![set("camera", 1, 2 * MIB)],
                }
            }
            App::WebBrowsing => {
                let share = 0.423;
                // Mean request 1.8 KiB with equal bytes each way: reads carry half the
                // bytes in 42.3% of the requests.
                let mean = 1.8 * KIB as f64;
                Model {
                    run_s: 900.0,
                    read_share: share,
                    mean_gap_us: 14_500.0,
                    read_mean: (mean * 0.5 / share).round() as u64,
                    write_mean: (mean * 0.5 / (1.0 - share)).round() as u64,
                    reads: Place::Random(0),
                    writes: Place::Random(0),
                    sets: vec![set("cache", 256, 32 * KIB)],
                }
            }
            App::TwoWriters => return None,
        })
    }
}

/// Mean gap (us) at which `share` of the requests, each of `mean` bytes on average, move
/// `volume` bytes in `run_s` seconds.
fn gap_for_volume(run_s: f64, share: f64, mean: u64, volume: f64) -> f64 {
    let requests = volume / mean as f64 / share;
    run_s * 1e6 / requests
}

/// Mean write size that makes bytes written equal bytes read.
fn same_volume(read_mean: u64, read_share: f64) -> u64 {
    (read_mean as f64 * read_share / (1.0 - read_share)).round() as u64
}

/// Where the requests of one kind (reads or writes) go.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    /// A random aligned spot of a random file of set n.
    Random(usize),
    /// On from where the previous one ended, through the files of set n in turn, back to
    /// the first after the last; a request that would cross a file's end starts the next.
    Sequential(usize),
    /// At the end of the one file the trace creates at its start.
    Append,
}

const APPEND_FILE: &str = "video";

struct FileSet {
    prefix: &'static str,
    count: u32,
    bytes: u64,
}

fn set(prefix: &'static str, count: u32, bytes: u64) -> FileSet {
    FileSet {
        prefix,
        count,
        bytes,
    }
}

struct Model {
    run_s: f64,
    read_share: f64,
    mean_gap_us: f64,
    read_mean: u64,
    write_mean: u64,
    reads: Place,
    writes: Place,
    sets: Vec<FileSet>,
}

impl Model {
    fn expected_requests(&self) -> f64 {
        self.run_s * 1e6 / self.mean_gap_us
    }

    /// Bytes a whole run moves (reads and writes), on average.
    fn expected_traffic(&self) -> f64 {
        let s = self.read_share;
        self.expected_requests() * (s * self.read_mean as f64 + (1.0 - s) * self.write_mean as f64)
    }

    /// Bytes a whole run appends to the file it creates, on average.
    fn expected_append(&self) -> f64 {
        let n = self.expected_requests();
        let mut bytes = 0.0;
        if self.reads == Place::Append {
            bytes += n * self.read_share * self.read_mean as f64;
        }
        if self.writes == Place::Append {
            bytes += n * (1.0 - self.read_share) * self.write_mean as f64;
        }
        bytes
    }

    /// Largest request that goes to set n: files are never smaller.
    fn largest_into(&self, n: usize) -> u64 {
        let mut largest = 0;
        for (place, mean) in [(self.reads, self.read_mean), (self.writes, self.write_mean)] {
            if matches!(place, Place::Random(k) | Place::Sequential(k) if k == n) {
                largest = largest.max(size_range(mean).1);
            }
        }
        largest
    }

    /// Size of each file of set n with file sizes scaled by `files`.
    fn file_bytes(&self, n: usize, files: f64) -> u64 {
        let scaled = (self.sets[n].bytes as f64 * files) as u64;
        scaled.max(self.largest_into(n)).div_ceil(ALIGN).max(1) * ALIGN
    }

    fn static_bytes(&self, files: f64) -> u64 {
        (0..self.sets.len())
            .map(|n| u64::from(self.sets[n].count) * self.file_bytes(n, files))
            .sum()
    }
}

/// Smallest and largest size of a request of mean `mean`: uniform on [mean/2, 3 mean/2].
fn size_range(mean: u64) -> (u64, u64) {
    let half = mean / 2;
    ((mean - half).max(1), mean + half)
}

/// How much of an application's run a trace covers, and how its files are sized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    /// Fraction of the run generated (0 < time <= 1).
    pub time: f64,
    /// Factor on the model's file sizes (1 unless the device is small).
    pub files: f64,
    /// Whether `time` was chosen by `fit` (no --scale).
    pub auto: bool,
}

/// The scale for `app` on a device of `device_bytes`: `time` if given, else the largest
/// fraction of the run that moves at most TRAFFIC_BUDGET; file sizes shrink only if the
/// working set (files plus what the run appends) would not fit in half the device (the
/// rest is the file system's, cleaning's and bad blocks' room).
pub fn fit(app: App, device_bytes: u64, time: Option<f64>) -> anyhow::Result<Scale> {
    if let Some(t) = time {
        ensure!(
            t > 0.0 && t <= 1.0,
            "--scale must be above 0 and at most 1, not {t}"
        );
    }
    let room = device_bytes as f64 / 2.0;
    let Some(m) = app.model() else {
        return fit_two_writers(device_bytes, time);
    };
    let append = m.expected_append();
    let (time, auto) = match time {
        Some(t) => (t, false),
        // What is appended takes at most half the room, the files the rest.
        None => {
            let by_traffic = TRAFFIC_BUDGET as f64 / m.expected_traffic();
            let by_room = if append > 0.0 {
                room / 2.0 / append
            } else {
                1.0
            };
            (by_traffic.min(by_room).min(1.0), true)
        }
    };
    let appended = append * time;
    if appended >= room {
        bail!(
            "{} at --scale {time} appends about {} MiB, more than half the device ({} MiB); \
             use a smaller --scale or a bigger device",
            app.name(),
            (appended / MIB as f64).round(),
            device_bytes / MIB
        );
    }
    let mut files = ((room - appended) / m.static_bytes(1.0) as f64).min(1.0);
    // Sizes round up to whole 4 KiB and never go below the largest request: shrink a
    // little more until the rounded set fits, or give up at the floor.
    let needed = |files: f64| m.static_bytes(files) as f64 + appended;
    while needed(files) > room && files > 1e-6 {
        files *= 0.98;
    }
    let needed = needed(files);
    if needed > room {
        bail!(
            "{}'s files need {:.1} MiB even at their smallest, more than half the device \
             ({} MiB); use a bigger --device-size or --geometry",
            app.name(),
            needed / MIB as f64,
            device_bytes / MIB
        );
    }
    Ok(Scale { time, files, auto })
}

/// TwoWriters' scale: every record unless --scale says fewer; its files must fit in half
/// the device.
fn fit_two_writers(device_bytes: u64, time: Option<f64>) -> anyhow::Result<Scale> {
    let scale = Scale {
        time: time.unwrap_or(1.0),
        files: 1.0,
        auto: time.is_none(),
    };
    let bytes = TWO_WRITERS_FILES.len() as u64 * two_writers_records(scale) * TWO_WRITERS_RECORD;
    ensure!(
        bytes <= device_bytes / 2,
        "TwoWriters writes {} KiB, more than half the device ({} KiB); use a smaller \
         --scale or a bigger device",
        bytes / KIB,
        device_bytes / KIB
    );
    Ok(scale)
}

/// Records TwoWriters writes to each file at `scale`: at least one.
fn two_writers_records(scale: Scale) -> u64 {
    ((TWO_WRITERS_RECORDS as f64 * scale.time).round() as u64).clamp(1, TWO_WRITERS_RECORDS)
}

/// TwoWriters at `scale`, in a few words (the table's title, an emitted trace's comment).
pub fn two_writers_summary(scale: Scale) -> String {
    format!(
        "{} files x {} records of {} KiB, alternating, all arriving at 0",
        TWO_WRITERS_FILES.len(),
        two_writers_records(scale),
        TWO_WRITERS_RECORD / KIB
    )
}

/// TwoWriters: both files created, then written front to back, a record to each in turn.
fn generate_two_writers(scale: Scale) -> Vec<Request> {
    let records = two_writers_records(scale);
    let mut requests: Vec<Request> = TWO_WRITERS_FILES
        .iter()
        .map(|f| Request {
            arrival_us: 0,
            op: Op::Create,
            file: f.to_string(),
            offset: 0,
            size: 0,
        })
        .collect();
    for k in 0..records {
        for f in TWO_WRITERS_FILES {
            requests.push(Request {
                arrival_us: 0,
                op: Op::Write,
                file: f.to_string(),
                offset: k * TWO_WRITERS_RECORD,
                size: TWO_WRITERS_RECORD,
            });
        }
    }
    requests
}

/// Generates the first `scale.time` of the run of `app`, reproducibly from `seed`.
pub fn generate(app: App, seed: u64, scale: Scale) -> Vec<Request> {
    let Some(m) = app.model() else {
        return generate_two_writers(scale);
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let end_us = m.run_s * 1e6 * scale.time;
    let sizes: Vec<u64> = (0..m.sets.len())
        .map(|n| m.file_bytes(n, scale.files))
        .collect();
    let mut requests = Vec::new();
    if m.reads == Place::Append || m.writes == Place::Append {
        requests.push(Request {
            arrival_us: 0,
            op: Op::Create,
            file: APPEND_FILE.into(),
            offset: 0,
            size: 0,
        });
    }
    // Where the next sequential request of a set starts: (file, offset).
    let mut cursors = vec![(0u32, 0u64); m.sets.len()];
    let mut append_at = 0u64;
    let mut t_us = 0.0;
    loop {
        // Exponential gap; 1 - u is in (0, 1], so the log is finite.
        t_us += -m.mean_gap_us * (1.0 - rng.gen::<f64>()).ln();
        if t_us > end_us {
            break;
        }
        let (op, place, mean) = if rng.gen::<f64>() < m.read_share {
            (Op::Read, m.reads, m.read_mean)
        } else {
            (Op::Write, m.writes, m.write_mean)
        };
        let (lo, hi) = size_range(mean);
        let size = rng.gen_range(lo..=hi);
        let (file, offset) = match place {
            Place::Random(n) => {
                let k = rng.gen_range(0..m.sets[n].count);
                let offset = rng.gen_range(0..=sizes[n] - size) / ALIGN * ALIGN;
                (file_name(&m.sets[n], k), offset)
            }
            Place::Sequential(n) => {
                let (k, offset) = &mut cursors[n];
                if *offset + size > sizes[n] {
                    *k = (*k + 1) % m.sets[n].count;
                    *offset = 0;
                }
                let at = *offset;
                *offset += size;
                (file_name(&m.sets[n], *k), at)
            }
            Place::Append => {
                let at = append_at;
                append_at += size;
                (APPEND_FILE.to_string(), at)
            }
        };
        requests.push(Request {
            arrival_us: t_us as u64,
            op,
            file,
            offset,
            size,
        });
    }
    requests
}

fn file_name(set: &FileSet, k: u32) -> String {
    if set.count == 1 {
        set.prefix.to_string()
    } else {
        format!("{}{k:03}", set.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::check;
    use super::*;

    const FULL: Scale = Scale {
        time: 1.0,
        files: 1.0,
        auto: false,
    };

    struct Stats {
        requests: usize,
        reads: usize,
        bytes_read: u64,
        bytes_written: u64,
        span_us: u64,
    }

    fn stats(trace: &[Request]) -> Stats {
        let data: Vec<&Request> = trace.iter().filter(|r| r.op.moves_data()).collect();
        let reads: Vec<&&Request> = data.iter().filter(|r| r.op == Op::Read).collect();
        Stats {
            requests: data.len(),
            reads: reads.len(),
            bytes_read: reads.iter().map(|r| r.size).sum(),
            bytes_written: data
                .iter()
                .filter(|r| r.op == Op::Write)
                .map(|r| r.size)
                .sum(),
            span_us: trace.last().map_or(0, |r| r.arrival_us),
        }
    }

    fn near(got: f64, want: f64, tolerance: f64) -> bool {
        (got / want - 1.0).abs() <= tolerance
    }

    #[test]
    fn read_shares_match_the_paper() {
        let paper = [0.969, 0.638, 0.874, 0.044, 0.423];
        for (app, share) in App::ALL.into_iter().zip(paper) {
            let s = stats(&generate(app, 7, FULL));
            let got = s.reads as f64 / s.requests as f64;
            // Four standard deviations of a binomial share, plus half a point.
            let sigma = (share * (1.0 - share) / s.requests as f64).sqrt();
            assert!(
                (got - share).abs() <= 4.0 * sigma + 0.005,
                "{}: {got:.4} of {} requests are reads, paper {share}",
                app.name(),
                s.requests
            );
        }
    }

    #[test]
    fn stated_volumes_and_rates_come_out() {
        let s = stats(&generate(App::AngryBird, 3, FULL));
        assert!(
            near(s.bytes_read as f64, 2.79 * GIB as f64, 0.03),
            "{}",
            s.bytes_read
        );
        let s = stats(&generate(App::Movie, 3, FULL));
        assert!(
            near(s.bytes_read as f64, 110.3 * MIB as f64, 0.08),
            "{}",
            s.bytes_read
        );
        let s = stats(&generate(App::CameraVideo, 3, FULL));
        assert!(
            near(s.bytes_written as f64, 373.8 * MIB as f64, 0.05),
            "{}",
            s.bytes_written
        );
        let s = stats(&generate(App::WebBrowsing, 3, FULL));
        let mean = (s.bytes_read + s.bytes_written) as f64 / s.requests as f64;
        assert!(near(mean, 1.8 * KIB as f64, 0.02), "mean request {mean}");
        let gap_ms = s.span_us as f64 / 1e3 / s.requests as f64;
        assert!(near(gap_ms, 14.5, 0.02), "mean gap {gap_ms} ms");
        for app in [App::GoogleMap, App::WebBrowsing] {
            let s = stats(&generate(app, 3, FULL));
            let ratio = s.bytes_read as f64 / s.bytes_written as f64;
            assert!(
                near(ratio, 1.0, 0.05),
                "{}: read/written {ratio}",
                app.name()
            );
        }
        // Every trace spans (nearly) the paper's run.
        for app in App::ALL {
            let span = stats(&generate(app, 3, FULL)).span_us as f64 / 1e6;
            assert!(near(span, app.run_s(), 0.02), "{}: {span} s", app.name());
        }
    }

    #[test]
    fn a_seed_gives_one_trace() {
        for app in App::ALL {
            let scale = Scale { time: 0.05, ..FULL };
            let a = generate(app, 11, scale);
            assert_eq!(a, generate(app, 11, scale), "{}", app.name());
            assert_ne!(a, generate(app, 12, scale), "{}", app.name());
        }
    }

    #[test]
    fn traces_are_valid_and_stay_inside_their_files() {
        for app in App::ALL {
            for files in [1.0, 0.01] {
                let scale = Scale {
                    time: 0.1,
                    files,
                    auto: false,
                };
                let trace = generate(app, 5, scale);
                check(&trace, |i| i + 2).unwrap_or_else(|e| panic!("{}: {e}", app.name()));
                let m = app.model().unwrap();
                for r in trace.iter().filter(|r| r.file != APPEND_FILE) {
                    let n = m
                        .sets
                        .iter()
                        .position(|s| r.file.starts_with(s.prefix))
                        .unwrap();
                    assert!(r.offset + r.size <= m.file_bytes(n, files), "{r:?}");
                }
            }
        }
    }

    #[test]
    fn the_fit_keeps_a_run_small_and_on_the_device() {
        // 1 GiB: files at full size, time cut by the traffic budget where needed.
        for app in App::ALL {
            let s = fit(app, GIB, None).unwrap();
            assert_eq!(s.files, 1.0, "{}", app.name());
            let traffic = app.model().unwrap().expected_traffic() * s.time;
            assert!(traffic <= TRAFFIC_BUDGET as f64 * 1.0001, "{}", app.name());
        }
        assert_eq!(fit(App::WebBrowsing, GIB, None).unwrap().time, 1.0);
        // 8 MiB: files shrink to fit half the device.
        let s = fit(App::WebBrowsing, 8 * MIB, Some(0.01)).unwrap();
        assert!(s.files < 1.0);
        assert!(App::WebBrowsing.model().unwrap().static_bytes(s.files) <= 4 * MIB);
        // Appending a whole video to 64 MiB cannot fit; the automatic scale does.
        assert!(fit(App::CameraVideo, 64 * MIB, Some(1.0)).is_err());
        let s = fit(App::CameraVideo, 64 * MIB, None).unwrap();
        assert!(App::CameraVideo.model().unwrap().expected_append() * s.time <= 16.0 * MIB as f64);
        assert!(fit(App::Movie, 64 * MIB, Some(0.0)).is_err());
    }

    #[test]
    fn two_writers_alternates_4k_records_arriving_at_once() {
        let scale = fit(App::TwoWriters, 16 * MIB, None).unwrap();
        assert!(scale.auto);
        let trace = generate(App::TwoWriters, 1, scale);
        check(&trace, |i| i + 2).unwrap();
        assert_eq!(trace.len(), 2 + 2 * 256);
        assert!(trace.iter().all(|r| r.arrival_us == 0));
        assert_eq!(trace[0].op, Op::Create);
        assert_eq!(trace[1].op, Op::Create);
        let writes = &trace[2..];
        for (i, r) in writes.iter().enumerate() {
            assert_eq!(r.op, Op::Write);
            assert_eq!(r.file, TWO_WRITERS_FILES[i % 2]);
            assert_eq!((r.offset, r.size), ((i / 2) as u64 * 4 * KIB, 4 * KIB));
        }
        // The seed changes nothing but the data; --scale takes a fraction of the records.
        assert_eq!(trace, generate(App::TwoWriters, 9, scale));
        let quarter = fit(App::TwoWriters, 16 * MIB, Some(0.25)).unwrap();
        assert_eq!(generate(App::TwoWriters, 1, quarter).len(), 2 + 2 * 64);
        // 2 MiB does not fit in half of 2 MiB.
        assert!(fit(App::TwoWriters, 2 * MIB, None).is_err());
    }
}
