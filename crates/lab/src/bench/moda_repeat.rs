//! `nandkit bench moda-repeat`: the MODA paper's Figure 8, and idle-time cleaning measured
//! on it. From an empty device PostMark runs again and again, each run in a directory of
//! its own (so the device fills run by run), until a run can no longer complete. Between
//! runs the device sits idle for `--gap` seconds, and one of three things happens there:
//!
//! - `none`: nothing (Figures 8(a), 8(c));
//! - `between`: cleaning of every invalid page, however long it takes (Figures 8(b),
//!   8(d): "block cleaning is performed between benchmark executions"), its time reported
//!   as what a user would wait for it;
//! - `idle`: idle-time cleaning (`nandkit_workloads::IdleCleaning`, the rule the mount
//!   daemon follows): once the device has been idle for `--idle-after`, one block at a
//!   time for as long as the gap lasts. Only a step still running when the next run
//!   starts is waited for (`overrun_s`).
//!
//! Each row is one run: the utilization before it (the paper's x axis), its running time,
//! the blocks on-demand cleaning reclaimed during it (what makes a run slow), and what
//! the gap after it did.

use anyhow::Context;
use clap::{Args, ValueEnum};
use nandkit_flash::Flash;
use nandkit_workloads::{IdleCleaning, Target, TargetError};
use serde::Serialize;

use super::energy::Mark;
use super::moda_common::{clean_everything, format_with, ModaArgs};
use super::{print_json, Fs};

pub const LONG_ABOUT: &str = "The MODA paper's Figure 8 with idle-time cleaning added: \
    PostMark repeated from an empty device, each run in its own directory, until a run \
    cannot complete (the device is full). Between runs the device is idle for --gap \
    seconds, and either nothing happens (none), every invalid page is cleaned however long \
    it takes (between: the paper's periodic cleaning), or idle-time cleaning runs (idle: \
    after --idle-after of no requests, one block at a time while the gap lasts). Per run: \
    utilization before it, running time, blocks cleaned on demand during it, and the \
    gap's cleaning. Times are simulated seconds; run_energy_j and gap_energy_j are joules \
    (idle time itself costs none).";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    None,
    Between,
    Idle,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Between => "between",
            Mode::Idle => "idle",
        }
    }
}

#[derive(Args)]
pub struct ModaRepeatArgs {
    #[command(flatten)]
    moda: ModaArgs,
    /// What happens between runs, comma-separated [default: none,between,idle].
    #[arg(long, value_enum, value_delimiter = ',', value_name = "MODES")]
    modes: Vec<Mode>,
    /// Simulated seconds the device is idle between runs.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    gap: f64,
    /// Idle-time cleaning starts after this many seconds without a request.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    idle_after: f64,
    /// Stop after this many runs even if the device is not full.
    #[arg(long, default_value_t = 200, value_name = "N")]
    max_runs: u32,
}

#[derive(Serialize)]
struct Row {
    policy: &'static str,
    mode: &'static str,
    /// Run number, from 0.
    run: u32,
    /// Utilization before the run (the paper's x axis).
    u_before: f64,
    run_s: f64,
    run_energy_j: f64,
    /// Blocks on-demand cleaning reclaimed during the run.
    run_erases: u64,
    /// Blocks the gap after the run reclaimed (between, idle).
    gap_erases: u64,
    /// Simulated seconds the gap spent cleaning.
    gap_clean_s: f64,
    /// Joules the gap spent (its cleaning: idle time itself costs nothing).
    gap_energy_j: f64,
    /// Idle mode: how long the next run waited for a cleaning step still running.
    overrun_s: f64,
    /// "ok", or "enospc": this run could not complete, the sequence ends.
    outcome: &'static str,
}

fn secs_to_ns(s: f64) -> anyhow::Result<u64> {
    anyhow::ensure!(s.is_finite() && s >= 0.0, "{s}: seconds must be >= 0");
    Ok((s * 1e9) as u64)
}

pub fn run(args: ModaRepeatArgs) -> anyhow::Result<()> {
    let config = args.moda.device()?;
    let policies = args.moda.policies(&["sequential", "moda"])?;
    let modes = if args.modes.is_empty() {
        vec![Mode::None, Mode::Between, Mode::Idle]
    } else {
        args.modes.clone()
    };
    let gap_ns = secs_to_ns(args.gap).context("--gap")?;
    let after_ns = secs_to_ns(args.idle_after).context("--idle-after")?;
    let device_bytes = config.geometry.total_bytes();
    let mut rows = Vec::new();
    for &policy in &policies {
        for &mode in &modes {
            let mut fs = format_with(&config, &args.moda, policy)?;
            for run in 0..args.max_runs {
                let u_before = fs.uip().0;
                let cleaned_before = fs.stats().blocks_cleaned;
                let start = Mark::of_fs(&fs);
                let seed = args.moda.workload_seed.wrapping_add(u64::from(run));
                let mut load = nandkit_workloads::in_dir(
                    "postmark",
                    seed,
                    device_bytes,
                    &format!("/postmark{run}"),
                )
                .context("postmark")?;
                let full = match load.run(&mut fs).and_then(|_| Ok(fs.sync()?)) {
                    Ok(()) => false,
                    Err(TargetError::NoSpace) => true,
                    Err(e) => {
                        return Err(e).context(format!(
                            "postmark run {run} under {} ({})",
                            policy.name(),
                            mode.name()
                        ))
                    }
                };
                let spent = start.to_fs(&fs);
                let mut row = Row {
                    policy: policy.name(),
                    mode: mode.name(),
                    run,
                    u_before,
                    run_s: spent.sim_s(),
                    run_energy_j: spent.energy_j(),
                    run_erases: fs.stats().blocks_cleaned - cleaned_before,
                    gap_erases: 0,
                    gap_clean_s: 0.0,
                    gap_energy_j: 0.0,
                    overrun_s: 0.0,
                    outcome: if full { "enospc" } else { "ok" },
                };
                if full {
                    rows.push(row);
                    break;
                }
                gap(&mut fs, mode, gap_ns, after_ns, &mut row)?;
                rows.push(row);
            }
            if !args.moda.json {
                eprintln!("{} / {}: done", policy.name(), mode.name());
            }
        }
    }
    if args.moda.json {
        return print_json(&rows);
    }
    print_table(&rows);
    Ok(())
}

/// The idle time between two runs.
fn gap(fs: &mut Fs, mode: Mode, gap_ns: u64, after_ns: u64, row: &mut Row) -> anyhow::Result<()> {
    let start = Mark::of_fs(fs);
    match mode {
        Mode::None => fs.device_mut().advance_clock_ns(gap_ns),
        Mode::Between => {
            let c = clean_everything(fs)?;
            row.gap_erases = c.erases;
            row.gap_clean_s = c.seconds;
        }
        Mode::Idle => {
            let mut t = IdleCleaning::new(fs, after_ns);
            t.idle(gap_ns).context("idle-time cleaning")?;
            let s = t.stats();
            row.gap_erases = s.blocks;
            row.gap_clean_s = s.clean_ns as f64 / 1e9;
            row.overrun_s = s.overrun_ns as f64 / 1e9;
        }
    }
    row.gap_energy_j = start.to_fs(fs).energy_j();
    Ok(())
}

/// Per policy and mode: every run's time and on-demand cleaning, then the totals.
fn print_table(rows: &[Row]) {
    println!(
        "{:<11} {:<8} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "policy",
        "mode",
        "run",
        "u_before",
        "run_s",
        "run_J",
        "run_ers",
        "gap_ers",
        "gap_s",
        "gap_J",
        "overrun"
    );
    for r in rows {
        println!(
            "{:<11} {:<8} {:>4} {:>8.3} {:>8.2} {:>8.3} {:>8} {:>8} {:>8.2} {:>8.3} {:>8.3}{}",
            r.policy,
            r.mode,
            r.run,
            r.u_before,
            r.run_s,
            r.run_energy_j,
            r.run_erases,
            r.gap_erases,
            r.gap_clean_s,
            r.gap_energy_j,
            r.overrun_s,
            if r.outcome == "ok" {
                ""
            } else {
                "  (could not complete)"
            }
        );
    }
    println!();
    println!(
        "{:<11} {:<8} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "policy", "mode", "runs", "sum_run_s", "max_run_s", "sum_gap_s", "overrun_s", "energy_J"
    );
    let mut keys: Vec<(&str, &str)> = rows.iter().map(|r| (r.policy, r.mode)).collect();
    keys.dedup();
    for (policy, mode) in keys {
        let rs: Vec<&Row> = rows
            .iter()
            .filter(|r| r.policy == policy && r.mode == mode && r.outcome == "ok")
            .collect();
        println!(
            "{:<11} {:<8} {:>5} {:>10.2} {:>10.2} {:>10.2} {:>10.3} {:>10.3}",
            policy,
            mode,
            rs.len(),
            rs.iter().map(|r| r.run_s).sum::<f64>(),
            rs.iter().map(|r| r.run_s).fold(0.0, f64::max),
            rs.iter().map(|r| r.gap_clean_s).sum::<f64>(),
            rs.iter().map(|r| r.overrun_s).sum::<f64>(),
            // Runs and the gaps after them: everything the sequence spent.
            rs.iter()
                .map(|r| r.run_energy_j + r.gap_energy_j)
                .sum::<f64>(),
        );
    }
}
