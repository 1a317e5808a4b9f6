//! `nandkit bench moda-utilization`: the MODA paper's Figure 7. PostMark runs on a device
//! first filled to an initial utilization u0 (0 .. 0.9), under each policy; reported are
//! PostMark's running time and the cost of then cleaning every invalid page.
//!
//! The paper raised utilization "by executing the Andrew benchmark before each of the
//! measurements". Here the pre-fill is Andrew's tree scaled to u0 of the capacity (one
//! run, so u0 is hit closely rather than in steps of Table 1's 0.09). The paper says
//! nothing of cleaning after it, so by default nothing is cleaned: Andrew's few superseded
//! headers stay, scattered over the pre-fill's blocks, and the cleaning measured after
//! PostMark reclaims them too. `--clean-fill` cleans everything after the pre-fill
//! instead, so that PostMark starts with no invalid pages and the cleaning measured is
//! PostMark's alone.

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::energy::Mark;
use super::moda_common::{clean_everything, format_with, ModaArgs};
use super::print_json;

pub const LONG_ABOUT: &str = "The MODA paper's Figure 7: PostMark after pre-filling the \
    device to an initial utilization u0 with Andrew's tree (scaled to u0 of the capacity; \
    --clean-fill cleans after it, so PostMark starts with no invalid pages). For each u0 and \
    policy: PostMark's running time, the blocks cleaned while it ran (on-demand cleaning), \
    the bytes it wrote (less than a full run's when the device filled), u, i, p after it, and the measured cost of cleaning every invalid page. Times are \
    simulated seconds, each with its energy in joules (run_energy_j, clean_energy_j).";

#[derive(Args)]
pub struct ModaUtilizationArgs {
    #[command(flatten)]
    moda: ModaArgs,
    /// Initial utilizations, comma-separated fractions [default: 0,0.1,...,0.9].
    #[arg(long, value_delimiter = ',', value_name = "FRACTIONS")]
    utilizations: Vec<f64>,
    /// Clean every invalid page after the pre-fill, so PostMark starts with none (the
    /// paper does not say it did).
    #[arg(long)]
    clean_fill: bool,
}

#[derive(Serialize)]
struct Row {
    /// The initial utilization asked for ...
    u0: f64,
    /// ... and the one reached (all pages valid / all pages).
    u_start: f64,
    policy: &'static str,
    /// PostMark's running time, and its energy.
    run_s: f64,
    run_energy_j: f64,
    /// Blocks reclaimed by on-demand cleaning while PostMark ran.
    run_erases: u64,
    /// Bytes PostMark wrote (all of them unless it ran out of space).
    written_bytes: u64,
    u: f64,
    i: f64,
    p: f64,
    erases: u64,
    copies: u64,
    clean_s: f64,
    clean_energy_j: f64,
    outcome: String,
}

pub fn run(args: ModaUtilizationArgs) -> anyhow::Result<()> {
    let config = args.moda.device()?;
    let policies = args.moda.policies(&["sequential", "moda"])?;
    let utilizations = if args.utilizations.is_empty() {
        (0..10).map(|k| f64::from(k) / 10.0).collect()
    } else {
        args.utilizations
    };
    if let Some(bad) = utilizations.iter().find(|u| !(0.0..1.0).contains(*u)) {
        anyhow::bail!("--utilizations {bad}: a fraction in [0, 1)");
    }
    let device_bytes = config.geometry.total_bytes();
    let seed = args.moda.workload_seed;
    let mut rows = Vec::new();
    for &u0 in &utilizations {
        for &policy in &policies {
            let mut fs = format_with(&config, &args.moda, policy)?;
            if u0 > 0.0 {
                nandkit_workloads::andrew_fill(seed, device_bytes, u0, "/fill")
                    .run(&mut fs)
                    .with_context(|| format!("pre-filling to u = {u0}"))?;
                fs.sync().context("sync after the pre-fill")?;
                if args.clean_fill {
                    clean_everything(&mut fs)?;
                }
            }
            let u_start = fs.uip().0;
            let cleaned_before = fs.stats().blocks_cleaned;
            let written_before = fs.stats().user_bytes_written;
            let start = Mark::of_fs(&fs);
            let mut load =
                nandkit_workloads::by_name("postmark", seed, device_bytes).context("postmark")?;
            let outcome = match load.run(&mut fs) {
                Ok(_) => "ok".to_string(),
                Err(nandkit_workloads::TargetError::NoSpace) => "enospc".to_string(),
                Err(e) => return Err(e).context(format!("postmark under {}", policy.name())),
            };
            fs.sync().or_else(|e| match e {
                nandkit_fs::FsError::NoSpace => Ok(()),
                e => Err(e),
            })?;
            let run = start.to_fs(&fs);
            let run_erases = fs.stats().blocks_cleaned - cleaned_before;
            let (u, i, p) = fs.uip();
            let cleaned = clean_everything(&mut fs)?;
            rows.push(Row {
                u0,
                u_start,
                policy: policy.name(),
                run_s: run.sim_s(),
                run_energy_j: run.energy_j(),
                run_erases,
                written_bytes: fs.stats().user_bytes_written - written_before,
                u,
                i,
                p,
                erases: cleaned.erases,
                copies: cleaned.copies,
                clean_s: cleaned.seconds,
                clean_energy_j: cleaned.energy_j,
                outcome,
            });
            if !args.moda.json {
                eprintln!("u0 {u0} / {}: done", policy.name());
            }
        }
    }
    if args.moda.json {
        return print_json(&rows);
    }
    println!(
        "{:>5} {:>7} {:<13} {:>8} {:>8} {:>8} {:>8} {:>6} {:>7} {:>5} {:>7} {:>7} {:>8} {:>8}",
        "u0",
        "u_start",
        "policy",
        "run_s",
        "run_J",
        "run_ers",
        "wrote_kb",
        "u",
        "i",
        "p",
        "erases",
        "copies",
        "clean_s",
        "clean_J"
    );
    for r in &rows {
        println!(
            "{:>5.2} {:>7.3} {:<13} {:>8.2} {:>8.3} {:>8} {:>8} {:>6.3} {:>7.4} {:>5.2} {:>7} {:>7} {:>8.2} {:>8.3}{}",
            r.u0,
            r.u_start,
            r.policy,
            r.run_s,
            r.run_energy_j,
            r.run_erases,
            r.written_bytes / 1000,
            r.u,
            r.i,
            r.p,
            r.erases,
            r.copies,
            r.clean_s,
            r.clean_energy_j,
            if r.outcome == "ok" {
                String::new()
            } else {
                format!("  ({})", r.outcome)
            }
        );
    }
    Ok(())
}
