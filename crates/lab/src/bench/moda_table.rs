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
    (sequential, moda, moda-split, dac, page-hotcold, per-file, hybrid; --ablation: \
    sequential, moda-split and moda, with each level's share of MODA's gain). After the run it reports u, i, p, the model's \
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
    /// MODA in parts: sequential, then moda-split (MODA's first level alone: system data
    /// apart from user data), then moda (the multi-queue classifier over user data as
    /// well), and per workload the share of MODA's cleaning-time gain each level gives.
    /// JSON: {"rows": [...], "ablation": [...]}.
    #[arg(long, conflicts_with = "policies")]
    ablation: bool,
    /// Run each workload until its data fill this fraction of the capacity, instead of
    /// the utilization u of the paper's Table 1 its length was fitted to (PostMark, fitted
    /// to nothing, is unchanged): what the fit does to the results. Parameters fitted to
    /// i / u stay; every row's `fitted` says what was fitted.
    #[arg(long, value_name = "FRACTION", value_parser = parse_fill)]
    fill: Option<f64>,
}

fn parse_fill(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f > 0.0 && f < 1.0 => Ok(f),
        _ => Err(format!(
            "{s}: a fraction of the capacity, above 0 and below 1"
        )),
    }
}

/// One workload's cleaning time under MODA's levels.
#[derive(Serialize)]
struct Ablation {
    workload: String,
    sequential_clean_s: f64,
    split_clean_s: f64,
    moda_clean_s: f64,
    /// Shares of sequential's minus moda's cleaning time (absent when MODA gains
    /// nothing): level 1 (the system/user split) and level 2 (the classifier). They add
    /// up to 1; a negative share is a level that costs.
    split_share: Option<f64>,
    classifier_share: Option<f64>,
}

/// What of `w` was fitted to Table 1, and what `--fill` replaced.
fn fitted_note(w: &str, fill: Option<f64>) -> String {
    let parts: Vec<String> = w
        .split('+')
        .map(|p| format!("{p}: {}", nandkit_workloads::fitted(p).unwrap_or("-")))
        .collect();
    let mut note = parts.join("; ");
    if let Some(f) = fill {
        if w != "postmark" {
            note = format!(
                "length replaced: runs to {:.0}% of the capacity ({note})",
                f * 100.0
            );
        }
    }
    note
}

/// Each level's share, per workload, from the three policies' rows.
fn ablation(rows: &[Row]) -> Vec<Ablation> {
    let mut out = Vec::new();
    let mut names: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
    names.dedup();
    for w in names {
        let clean = |policy: &str| {
            rows.iter()
                .find(|r| r.workload == w && r.policy == policy)
                .map(|r| r.clean_s)
        };
        let (Some(seq), Some(split), Some(moda)) =
            (clean("sequential"), clean("moda-split"), clean("moda"))
        else {
            continue;
        };
        let gain = seq - moda;
        let share = |part: f64| (gain > 1e-9).then(|| part / gain);
        out.push(Ablation {
            workload: w.to_string(),
            sequential_clean_s: seq,
            split_clean_s: split,
            moda_clean_s: moda,
            split_share: share(seq - split),
            classifier_share: share(split - moda),
        });
    }
    out
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
    /// OOB reads of the victim searches while cleaning everything (0 unless
    /// `--search-reads`).
    search_reads: u64,
    clean_s: f64,
    clean_energy_j: f64,
    run_s: f64,
    run_energy_j: f64,
    /// "ok", or where the workload met a full device.
    outcome: String,
    /// What of the workload was fitted to Table 1 (and `--fill`'s override).
    fitted: String,
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
    let policies = if args.ablation {
        vec![
            AllocatorKind::Sequential,
            AllocatorKind::ModaSplit,
            AllocatorKind::Moda,
        ]
    } else {
        args.moda.policies(AllocatorKind::NAMES)?
    };
    let g = config.geometry;
    let device_bytes = g.total_bytes();
    let t = config.timing;
    let mut rows = Vec::new();
    for w in &workloads {
        for &policy in &policies {
            let mut fs = format_with(&config, &args.moda, policy)?;
            let seed = args.moda.workload_seed;
            let mut load = match args.fill {
                Some(f) => nandkit_workloads::filling(w, seed, device_bytes, f),
                None => nandkit_workloads::by_name(w, seed, device_bytes),
            }
            .with_context(|| match args.fill {
                Some(_) => format!("--fill takes single workloads of the seven: not {w}"),
                None => format!("unknown workload {w}"),
            })?;
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
                search_reads: cleaned.search_reads,
                clean_s: cleaned.seconds,
                clean_energy_j: cleaned.energy_j,
                run_s: run.sim_s(),
                run_energy_j: run.energy_j(),
                outcome: match summary.enospc {
                    Some(n) => format!("enospc at op {n}"),
                    None => "ok".into(),
                },
                fitted: fitted_note(w, args.fill),
            });
            if !args.moda.json {
                eprintln!("{w} / {}: done", policy.name());
            }
        }
    }
    let parts = args.ablation.then(|| ablation(&rows));
    if args.moda.json {
        return match parts {
            Some(a) => print_json(&serde_json::json!({ "rows": rows, "ablation": a })),
            None => print_json(&rows),
        };
    }
    let ww = rows
        .iter()
        .map(|r| r.workload.len())
        .max()
        .unwrap_or(0)
        .max(8);
    let reads = args.moda.search_reads;
    let reads_head = if reads {
        format!(" {:>8}", "s_reads")
    } else {
        String::new()
    };
    println!(
        "{:<ww$} {:<13} {:>6} {:>7} {:>5} {:>9} {:>9} {:>8} {:>7} {:>7}{reads_head} {:>8} {:>8} {:>8} {:>8}",
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
        let reads_cell = if reads {
            format!(" {:>8}", r.search_reads)
        } else {
            String::new()
        };
        println!(
            "{:<ww$} {:<13} {:>6.3} {:>7.4} {:>5.2} {:>9.0} {:>9.0} {:>8.2} {:>7} {:>7}{reads_cell} {:>8.2} {:>8.3} {:>8.1} {:>8.3}{}",
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
    if let Some(parts) = parts {
        println!();
        println!(
            "{:<ww$} {:>10} {:>10} {:>10} {:>14} {:>16}",
            "workload", "seq clean_s", "split", "moda", "split's share", "classifier's"
        );
        let pct = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.0}%", x * 100.0));
        for a in &parts {
            println!(
                "{:<ww$} {:>10.2} {:>10.2} {:>10.2} {:>14} {:>16}",
                a.workload,
                a.sequential_clean_s,
                a.split_clean_s,
                a.moda_clean_s,
                pct(a.split_share),
                pct(a.classifier_share)
            );
        }
    }
    Ok(())
}
