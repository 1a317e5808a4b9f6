//! `nandkit bench moda-table`: the MODA paper's Table 1. Each of its seven workloads runs
//! on a fresh device under each allocation policy; then the device's utilization u,
//! invalidity i and uniformity p, the cleaning model's estimate of what reclaiming every
//! invalid page costs (equation 2, `nandkit model cleaning-cost`), and what it costs when
//! done: explicit cleaning until no block is left to reclaim, counted in erases, page
//! copies and simulated seconds.

use anyhow::Context;
use clap::Args;
use nandkit_fs::AllocatorKind;
use nandkit_models::cleaning_cost::{cleaning_cost, CleaningCostInput};
use serde::Serialize;

use super::energy::Mark;
use super::moda_common::{clean_everything, format_with, ModaArgs};
use super::print_json;

pub const LONG_ABOUT: &str = "Runs each workload of the MODA paper (camera, movie, phone, \
    recorder, fax, postmark, andrew) on a fresh device under each allocation policy \
    (sequential, moda, dac, page-hotcold). After the run it reports u, i, p, the model's \
    estimated erases, copies and cleaning seconds (equation 2 with the device's read, \
    program and erase times), and the measured ones: explicit cleaning until nothing is \
    left to reclaim. run_s and clean_s are simulated seconds; run_energy_j and \
    clean_energy_j the joules the same spans spent.";

#[derive(Args)]
pub struct ModaTableArgs {
    #[command(flatten)]
    moda: ModaArgs,
    /// Workloads to run, comma-separated [default: all seven].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    workloads: Vec<String>,
}

#[derive(Serialize)]
struct Row {
    workload: String,
    policy: &'static str,
    u: f64,
    i: f64,
    p: f64,
    est_erases: f64,
    est_copies: f64,
    est_clean_s: f64,
    erases: u64,
    copies: u64,
    clean_s: f64,
    clean_energy_j: f64,
    run_s: f64,
    run_energy_j: f64,
    /// "ok", or where the workload met a full device.
    outcome: String,
}

pub fn run(args: ModaTableArgs) -> anyhow::Result<()> {
    let config = args.moda.device()?;
    let workloads: Vec<String> = if args.workloads.is_empty() {
        nandkit_workloads::NAMES
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        args.workloads
    };
    let policies = args.moda.policies(AllocatorKind::NAMES)?;
    let g = config.geometry;
    let device_bytes = g.total_bytes();
    let t = config.timing;
    let mut rows = Vec::new();
    for w in &workloads {
        for &policy in &policies {
            let mut fs = format_with(&config, &args.moda.profile, policy)?;
            let mut load = nandkit_workloads::by_name(w, args.moda.workload_seed, device_bytes)
                .with_context(|| format!("unknown workload {w}"))?;
            let start = Mark::of_fs(&fs);
            let summary = load
                .run(&mut fs)
                .with_context(|| format!("{w} under {}", policy.name()))?;
            fs.sync().context("sync after the workload")?;
            let run = start.to_fs(&fs);
            let (u, i, p) = fs.uip();
            let est = cleaning_cost(&CleaningCostInput {
                blocks: fs.block_table().len() as u64,
                pages_per_block: g.pages_per_block,
                u,
                i,
                p,
                read_us: t.read_ns as f64 / 1e3,
                write_us: t.program_ns as f64 / 1e3,
                erase_us: t.erase_ns as f64 / 1e3,
            })
            .context("the cleaning model")?;
            let cleaned = clean_everything(&mut fs)?;
            rows.push(Row {
                workload: w.clone(),
                policy: policy.name(),
                u,
                i,
                p,
                est_erases: est.erases,
                est_copies: est.copies,
                est_clean_s: est.seconds,
                erases: cleaned.erases,
                copies: cleaned.copies,
                clean_s: cleaned.seconds,
                clean_energy_j: cleaned.energy_j,
                run_s: run.sim_s(),
                run_energy_j: run.energy_j(),
                outcome: match summary.enospc {
                    Some(n) => format!("enospc at op {n}"),
                    None => "ok".into(),
                },
            });
            if !args.moda.json {
                eprintln!("{w} / {}: done", policy.name());
            }
        }
    }
    if args.moda.json {
        return print_json(&rows);
    }
    let ww = rows
        .iter()
        .map(|r| r.workload.len())
        .max()
        .unwrap_or(0)
        .max(8);
    println!(
        "{:<ww$} {:<13} {:>6} {:>7} {:>5} {:>9} {:>9} {:>8} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        "workload",
        "policy",
        "u",
        "i",
        "p",
        "est_erase",
        "est_copy",
        "est_s",
        "erases",
        "copies",
        "clean_s",
        "clean_J",
        "run_s",
        "run_J"
    );
    for r in &rows {
        println!(
            "{:<ww$} {:<13} {:>6.3} {:>7.4} {:>5.2} {:>9.0} {:>9.0} {:>8.2} {:>7} {:>7} {:>8.2} {:>8.3} {:>8.1} {:>8.3}{}",
            r.workload,
            r.policy,
            r.u,
            r.i,
            r.p,
            r.est_erases,
            r.est_copies,
            r.est_clean_s,
            r.erases,
            r.copies,
            r.clean_s,
            r.clean_energy_j,
            r.run_s,
            r.run_energy_j,
            if r.outcome == "ok" { String::new() } else { format!("  ({})", r.outcome) }
        );
    }
    Ok(())
}
