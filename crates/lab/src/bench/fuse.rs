//! `nandkit bench fuse`: small reads and writes through a real FUSE mount, against bindfs
//! over tmpfs (a pass-through FUSE file system on RAM) and tmpfs itself, in the same run.
//!
//! Host time, not simulated time: this measures the FUSE path and the file system code
//! (the simulated chip costs nothing in host time without `--realtime`).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::print_json;
use crate::device_args::parse_bytes;

pub const LONG_ABOUT: &str = "Measures small I/O through FUSE, the way a program on the \
    mount sees it: 4-byte O_APPEND writes, random 4 KiB pwrites into a file, random 4 KiB \
    preads of the same offsets through a new open (each CALLS times, one process), and a logging workload \
    (LOG_APPENDS 4-byte appends to one file, then close: durable once close returns). \
    Each runs on a fresh nandkit image mounted with the default options (and again with \
    each --options given), on bindfs over a tmpfs directory (/dev/shm) and on tmpfs \
    itself, in the same run. Rates are calls per second of host time. Needs FUSE \
    (fusermount3) and, for the reference, bindfs.";

#[derive(Args)]
pub struct FuseArgs {
    /// Calls in each of the append, random-write and random-read workloads.
    #[arg(long, default_value_t = 50_000, value_name = "N")]
    calls: u64,
    /// Size of the file the random 4 KiB writes and reads go to.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes, value_name = "SIZE")]
    file_size: u64,
    /// 4-byte appends of the logging workload (0: skip it).
    #[arg(long, default_value_t = 3_000_000, value_name = "N")]
    log_appends: u64,
    /// Mount options of a further nandkit run (repeat for more), e.g. `nowriteback`.
    #[arg(long = "options", value_name = "OPTS")]
    options: Vec<String>,
    /// Device size of the nandkit image (mlc-1g geometry).
    #[arg(long, default_value = "1GiB", value_name = "SIZE")]
    device_size: String,
    /// Leave out bindfs and tmpfs.
    #[arg(long)]
    no_reference: bool,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = 1, value_name = "SEED")]
    workload_seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// One file system measured.
#[derive(Serialize, Debug)]
struct Target {
    name: String,
    append_per_s: f64,
    pwrite_4k_per_s: f64,
    pread_4k_per_s: f64,
    /// Seconds for the logging workload's appends and its close.
    log_s: Option<f64>,
}

#[derive(Serialize, Debug)]
struct Report {
    bench: &'static str,
    calls: u64,
    file_size_bytes: u64,
    log_appends: u64,
    workload_seed: u64,
    targets: Vec<Target>,
    /// nandkit (default options) over bindfs, per workload.
    ratio_to_bindfs: Option<Ratios>,
}

#[derive(Serialize, Debug)]
struct Ratios {
    append: f64,
    pwrite_4k: f64,
    pread_4k: f64,
}

fn rate(calls: u64, took: Duration) -> f64 {
    calls as f64 / took.as_secs_f64().max(1e-9)
}

fn say(json: bool, msg: &str) {
    if !json {
        eprintln!("{msg}");
    }
}

/// The three small-I/O workloads and the logging one, in `dir`.
fn measure(name: &str, dir: &Path, a: &FuseArgs) -> anyhow::Result<Target> {
    // 4-byte appends.
    let p = dir.join("append.log");
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .with_context(|| format!("creating {}", p.display()))?;
    let t = Instant::now();
    for _ in 0..a.calls {
        f.write_all(b"abcd")?;
    }
    let append = rate(a.calls, t.elapsed());
    drop(f);

    // Random 4 KiB writes, then reads of the same offsets.
    let p = dir.join("random.dat");
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .mode(0o644)
        .open(&p)
        .with_context(|| format!("creating {}", p.display()))?;
    f.set_len(a.file_size)?;
    let pages = (a.file_size / 4096).max(1);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.workload_seed);
    let offsets: Vec<u64> = (0..a.calls)
        .map(|_| rng.gen_range(0..pages) * 4096)
        .collect();
    let mut buf = vec![0u8; 4096];
    rng.fill(&mut buf[..]);
    let t = Instant::now();
    for &off in &offsets {
        f.write_all_at(&buf, off)?;
    }
    let pwrite = rate(a.calls, t.elapsed());
    drop(f);
    // Read back through a new open, as a reader of an existing file would.
    let f = std::fs::File::open(&p)?;
    let t = Instant::now();
    for &off in &offsets {
        f.read_exact_at(&mut buf, off)?;
    }
    let pread = rate(a.calls, t.elapsed());
    drop(f);

    // The logging workload: appends, then close (FUSE's flush makes it durable).
    let log_s = if a.log_appends > 0 {
        let p = dir.join("app.log");
        let t = Instant::now();
        let mut f = OpenOptions::new().create(true).append(true).open(&p)?;
        for _ in 0..a.log_appends {
            f.write_all(b"abcd")?;
        }
        f.sync_all().ok();
        drop(f);
        Some(t.elapsed().as_secs_f64())
    } else {
        None
    };
    Ok(Target {
        name: name.to_string(),
        append_per_s: append,
        pwrite_4k_per_s: pwrite,
        pread_4k_per_s: pread,
        log_s,
    })
}

/// Runs `cmd`; its output becomes the error if it fails.
pub(super) fn run_quiet(cmd: &mut Command) -> anyhow::Result<()> {
    let o = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !o.status.success() {
        bail!(
            "{cmd:?} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(())
}

/// Unmounts `mnt` (and, for nandkit, waits for the daemon: the next command does).
pub(super) fn unmount(mnt: &Path) {
    let _ = Command::new("fusermount3").arg("-u").arg(mnt).output();
}

/// A fresh nandkit image mounted with `options`; measured; unmounted.
fn nandkit(a: &FuseArgs, work: &Path, options: &str) -> anyhow::Result<Target> {
    let exe = std::env::current_exe().context("finding the nandkit binary")?;
    let img = work.join("bench.img");
    let mnt = work.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    run_quiet(Command::new(&exe).args(["mkfs"]).arg(&img).args([
        "--geometry",
        "mlc-1g",
        "--device-size",
        &a.device_size,
        "--force",
    ]))?;
    let mut mount = Command::new(&exe);
    mount.arg("mount").arg(&img).arg(&mnt);
    if !options.is_empty() {
        mount.args(["-o", options]);
    }
    run_quiet(&mut mount)?;
    let name = if options.is_empty() {
        "nandkit".to_string()
    } else {
        format!("nandkit -o {options}")
    };
    let r = measure(&name, &mnt, a);
    unmount(&mnt);
    // `fsck` waits for the daemon to finish unmounting, and says the image is sound.
    run_quiet(Command::new(&exe).arg("fsck").arg(&img))?;
    std::fs::remove_file(&img).ok();
    r
}

/// bindfs over a directory in /dev/shm, and that directory itself.
fn reference(a: &FuseArgs, work: &Path, json: bool) -> anyhow::Result<Vec<Target>> {
    let shm = tempfile::Builder::new()
        .prefix("nandkit-bench-")
        .tempdir_in("/dev/shm")
        .context("a directory in /dev/shm (tmpfs)")?;
    let src = shm.path().join("src");
    std::fs::create_dir_all(&src)?;
    let mnt: PathBuf = work.join("bindfs");
    std::fs::create_dir_all(&mnt)?;
    let mut out = Vec::new();
    say(json, "bench fuse: bindfs over tmpfs");
    run_quiet(Command::new("bindfs").arg(&src).arg(&mnt))
        .context("mounting bindfs (install it with scripts/setup.sh, or pass --no-reference)")?;
    let r = measure("bindfs over tmpfs", &mnt, a);
    unmount(&mnt);
    out.push(r?);
    for e in std::fs::read_dir(&src)? {
        std::fs::remove_file(e?.path()).ok();
    }
    say(json, "bench fuse: tmpfs");
    out.push(measure("tmpfs (no FUSE)", &src, a)?);
    Ok(out)
}

pub fn run(a: FuseArgs) -> anyhow::Result<()> {
    let work = tempfile::Builder::new()
        .prefix("nandkit-bench-fuse-")
        .tempdir()
        .context("a work directory")?;
    let mut targets = Vec::new();
    let mut runs = vec![String::new()];
    runs.extend(a.options.iter().cloned());
    for opts in &runs {
        say(
            a.json,
            &format!(
                "bench fuse: nandkit{}",
                if opts.is_empty() {
                    String::new()
                } else {
                    format!(" -o {opts}")
                }
            ),
        );
        targets.push(nandkit(&a, work.path(), opts)?);
    }
    if !a.no_reference {
        targets.extend(reference(&a, work.path(), a.json)?);
    }
    let bindfs = targets.iter().find(|t| t.name.starts_with("bindfs"));
    let ratio_to_bindfs = bindfs.map(|b| Ratios {
        append: targets[0].append_per_s / b.append_per_s,
        pwrite_4k: targets[0].pwrite_4k_per_s / b.pwrite_4k_per_s,
        pread_4k: targets[0].pread_4k_per_s / b.pread_4k_per_s,
    });
    let report = Report {
        bench: "fuse",
        calls: a.calls,
        file_size_bytes: a.file_size,
        log_appends: a.log_appends,
        workload_seed: a.workload_seed,
        targets,
        ratio_to_bindfs,
    };
    if a.json {
        return print_json(&report);
    }
    println!(
        "{} calls each; random I/O over a {} MiB file; logging: {} appends then close",
        report.calls,
        report.file_size_bytes >> 20,
        report.log_appends
    );
    println!(
        "{:<28} {:>14} {:>14} {:>14} {:>10}",
        "CALLS PER SECOND", "4 B APPEND", "4 KiB PWRITE", "4 KiB PREAD", "LOG S"
    );
    for t in &report.targets {
        println!(
            "{:<28} {:>14.0} {:>14.0} {:>14.0} {:>10}",
            t.name,
            t.append_per_s,
            t.pwrite_4k_per_s,
            t.pread_4k_per_s,
            t.log_s.map_or("-".to_string(), |s| format!("{s:.2}"))
        );
    }
    if let Some(r) = &report.ratio_to_bindfs {
        println!(
            "nandkit / bindfs: append {:.1}x, pwrite {:.1}x, pread {:.1}x",
            r.append, r.pwrite_4k, r.pread_4k
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_calls_per_second() {
        assert_eq!(rate(100, Duration::from_secs(2)), 50.0);
        assert!(rate(1, Duration::ZERO).is_finite());
    }

    #[test]
    fn workloads_run_in_a_plain_directory() {
        let dir = tempfile::tempdir().unwrap();
        let a = FuseArgs {
            calls: 50,
            file_size: 1 << 20,
            log_appends: 10,
            options: Vec::new(),
            device_size: "64MiB".into(),
            no_reference: true,
            workload_seed: 1,
            json: true,
        };
        let t = measure("plain", dir.path(), &a).unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join("append.log"))
                .unwrap()
                .len(),
            200
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("app.log")).unwrap().len(),
            40
        );
        assert_eq!(
            std::fs::metadata(dir.path().join("random.dat"))
                .unwrap()
                .len(),
            1 << 20
        );
        assert!(t.log_s.is_some());
    }
}
