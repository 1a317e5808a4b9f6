//! Runs experiments: each is a `nandkit` command (a bench or a model, with `--json`) run
//! as a child process of this binary, several at once (one per core), each with a
//! progress bar. What a run prints is kept as `data/<id>.<scale>.json`, its host
//! (wall-clock) measurements dropped so the same seed gives the same bytes; an experiment
//! whose file exists is not run again (resume).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::Value;

use super::catalogue::Experiment;
use super::Scale;

/// Where an experiment's output is kept.
pub fn data_path(out: &Path, e: &Experiment, scale: Scale) -> PathBuf {
    out.join("data")
        .join(format!("{}.{}.json", e.id, scale.name()))
}

/// Removes, at any depth, object fields that are host measurements (wall-clock times and
/// rates, host heap peaks): they differ between runs of the same seed.
pub fn drop_host_fields(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.contains("host"));
            m.values_mut().for_each(drop_host_fields);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_host_fields),
        _ => {}
    }
}

/// What running the experiments did.
pub struct Outcome {
    /// Experiments run now, with their host seconds.
    pub ran: Vec<(&'static str, f64)>,
    pub reused: Vec<&'static str>,
    pub failed: Vec<(&'static str, String)>,
}

/// Runs `todo` (those without data yet) on `jobs` workers; `quiet` hides the bars.
pub fn run(
    out: &Path,
    todo: &[&'static Experiment],
    scale: Scale,
    seed: u64,
    jobs: usize,
    quiet: bool,
) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(out.join("data"))
        .with_context(|| format!("creating {}", out.join("data").display()))?;
    let exe = std::env::current_exe().context("finding the nandkit binary")?;
    let mut outcome = Outcome {
        ran: Vec::new(),
        reused: Vec::new(),
        failed: Vec::new(),
    };
    let mut queue = VecDeque::new();
    for &e in todo {
        let path = data_path(out, e, scale);
        let done = std::fs::read(&path)
            .ok()
            .is_some_and(|b| serde_json::from_slice::<Value>(&b).is_ok());
        if done {
            outcome.reused.push(e.id);
        } else {
            queue.push_back(e);
        }
    }
    let bars = MultiProgress::new();
    if quiet {
        bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let style =
        ProgressStyle::with_template("{spinner} {prefix:<26} [{bar:24}] {elapsed:>4} of ~{msg}")
            .expect("a valid template")
            .progress_chars("=> ");
    let queue = Arc::new(Mutex::new(queue));
    let results = Arc::new(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            let (queue, results, bars, style, exe) = (&queue, &results, &bars, &style, &exe);
            s.spawn(move || loop {
                let Some(e) = queue.lock().expect("queue").pop_front() else {
                    break;
                };
                let expected = e.expected_s(scale);
                let bar = bars.add(ProgressBar::new((expected * 10.0).max(1.0) as u64));
                bar.set_style(style.clone());
                bar.set_prefix(e.id);
                bar.set_message(format!("{expected:.0}s"));
                let start = Instant::now();
                let r = run_one(exe, out, e, scale, seed, &bar);
                let took = start.elapsed().as_secs_f64();
                bar.finish_with_message(match &r {
                    Ok(()) => "done".to_string(),
                    Err(_) => "FAILED".to_string(),
                });
                results.lock().expect("results").push((e.id, took, r));
            });
        }
    });
    let mut results = std::mem::take(&mut *results.lock().expect("results"));
    results.sort_by_key(|r| r.0);
    for (id, took, r) in results {
        match r {
            Ok(()) => outcome.ran.push((id, took)),
            Err(e) => outcome.failed.push((id, format!("{e:#}"))),
        }
    }
    Ok(outcome)
}

/// One experiment: its command, its output checked and kept.
fn run_one(
    exe: &Path,
    out: &Path,
    e: &Experiment,
    scale: Scale,
    seed: u64,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let args = e.args(scale, seed);
    let start = Instant::now();
    let mut child = Command::new(exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting nandkit {}", args.join(" ")))?;
    // The bar moves with time against the expected time (a bench prints nothing until
    // done); the output is read by a thread so a full pipe never stalls the child.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut b).map(|_| b)
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut b);
        b
    });
    let status = loop {
        if let Some(st) = child.try_wait().context("waiting for the experiment")? {
            break st;
        }
        bar.set_position((start.elapsed().as_secs_f64() * 10.0) as u64);
        bar.tick();
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let stdout = reader
        .join()
        .expect("reader thread")
        .context("reading the output")?;
    let stderr = err_reader.join().expect("reader thread");
    if !status.success() {
        let tail = String::from_utf8_lossy(&stderr);
        let tail: Vec<&str> = tail.lines().rev().take(5).collect();
        anyhow::bail!(
            "nandkit {} exited with {status}: {}",
            args.join(" "),
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        );
    }
    let mut v: Value = serde_json::from_slice(&stdout)
        .with_context(|| format!("nandkit {} printed no JSON", args.join(" ")))?;
    drop_host_fields(&mut v);
    let path = data_path(out, e, scale);
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, serde_json::to_string_pretty(&v)? + "\n")
        .with_context(|| format!("writing {}", tmp.display()))?;
    // Renamed into place only when whole: an interrupted run leaves no half file.
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_fields_go_at_any_depth() {
        let mut v: Value = serde_json::json!({
            "mount_sim_us": 1.0, "mount_host_ms": 2.0,
            "rows": [{"host_s": 1, "sim_s": 2, "inner": {"x_host_rate": 3, "y": 4}}]
        });
        drop_host_fields(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"mount_sim_us": 1.0, "rows": [{"sim_s": 2, "inner": {"y": 4}}]})
        );
    }
}
