//! `nandkit reproduce`: every paper's headline results from one command. It runs the
//! experiments the papers' issues built (`nandkit bench ...`, `nandkit model ...`),
//! keeps their JSON, judges each claim against the paper's number, redraws the papers'
//! figures and writes a self-contained report (`index.html`, `claims.json`, the SVGs and
//! the data beside them).

mod catalogue;
pub mod plot;
mod report;
mod runner;
mod verdict;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

pub use catalogue::Paper;

/// How big the experiments are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scale {
    /// Seconds in all: the CI's check that the report is whole.
    Smoke,
    /// Reduced devices and sweeps: a few minutes on two cores.
    Quick,
    /// The papers' scales (or the benches' defaults).
    Full,
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Smoke => "smoke",
            Scale::Quick => "quick",
            Scale::Full => "full",
        }
    }
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ReproduceArgs {
    #[command(subcommand)]
    command: Option<ReproduceCommand>,
    /// Which paper's results (all: every one).
    #[arg(value_enum, default_value = "all")]
    paper: Paper,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Reduced scale: everything in a few minutes on a 2-core machine.
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,
    /// Tiny scale, seconds in all (checks the report is whole, not the claims).
    #[arg(long, hide = true)]
    smoke: bool,
    /// Where the report goes (made if missing; finished experiments there are kept).
    #[arg(long, default_value = "reproduce-out", value_name = "DIR")]
    out: PathBuf,
    /// Seed of every workload (the benches' workload seed; MiNV's benches call it --seed):
    /// the same seed gives byte-identical JSON.
    #[arg(long, default_value_t = 1, value_name = "N")]
    seed: u64,
    /// Run only the I-th of N slices of the experiments (1-based), e.g. a job array's
    /// task; `nandkit reproduce merge` joins the slices' outputs.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Experiments run at once [default: the machine's cores].
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum ReproduceCommand {
    /// Joins the outputs of sharded runs (their data directories) into one report.
    Merge(MergeArgs),
}

#[derive(Args)]
struct MergeArgs {
    /// Output directories of `nandkit reproduce --shard I/N` runs.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where the joined report goes.
    #[arg(long, default_value = "reproduce-out", value_name = "DIR")]
    out: PathBuf,
    /// The scale the shards ran at.
    #[arg(long, value_enum, default_value = "quick")]
    scale: Scale,
    /// The seed the shards ran with (recorded in the report).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}': expected I/N, e.g. 2/8"))?;
    let i: usize = i
        .trim()
        .parse()
        .map_err(|_| format!("'{i}': not a number"))?;
    let n: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("'{n}': not a number"))?;
    if n == 0 || i == 0 || i > n {
        return Err(format!("'{s}': need 1 <= I <= N"));
    }
    Ok((i, n))
}

pub fn run(args: ReproduceArgs) -> anyhow::Result<()> {
    if let Some(ReproduceCommand::Merge(m)) = args.command {
        return merge(m);
    }
    let r = args.run;
    let scale = if r.smoke {
        Scale::Smoke
    } else if r.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
    let mut chosen: Vec<&'static catalogue::Experiment> = catalogue::EXPERIMENTS
        .iter()
        .filter(|e| args.paper == Paper::All || e.paper == args.paper)
        .collect();
    if let Some((i, n)) = r.shard {
        chosen = chosen
            .into_iter()
            .enumerate()
            .filter(|(k, _)| k % n == i - 1)
            .map(|(_, e)| e)
            .collect();
    }
    let expected: f64 = chosen.iter().map(|e| e.expected_s(scale)).sum();
    let jobs = r
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    eprintln!(
        "nandkit reproduce {} ({}): {} experiments, about {} of work on {jobs} at once; \
         output in {} (finished experiments there are not run again)",
        args.paper.name(),
        scale.name(),
        chosen.len(),
        human_s(expected),
        r.out.display()
    );
    let outcome = runner::run(&r.out, &chosen, scale, r.seed, jobs, r.quiet)?;
    if !outcome.ran.is_empty() {
        let took: Vec<String> = outcome
            .ran
            .iter()
            .map(|(id, s)| format!("{id} {s:.1} s"))
            .collect();
        eprintln!("ran: {}", took.join(", "));
    }
    if !outcome.reused.is_empty() {
        eprintln!("kept from an earlier run: {}", outcome.reused.join(", "));
    }
    let summary = report::write(&r.out, args.paper, scale, r.seed, r.shard, &outcome.failed)?;
    println!("{summary}");
    if !outcome.failed.is_empty() {
        for (id, why) in &outcome.failed {
            eprintln!("{id} failed: {why}");
        }
        anyhow::bail!("{} experiments failed", outcome.failed.len());
    }
    Ok(())
}

/// Copies every shard's data into `out` and writes the report over all of it.
fn merge(m: MergeArgs) -> anyhow::Result<()> {
    let data = m.out.join("data");
    std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    let mut copied = 0;
    for d in &m.dirs {
        let from = d.join("data");
        let entries =
            std::fs::read_dir(&from).with_context(|| format!("reading {}", from.display()))?;
        for entry in entries {
            let p = entry?.path();
            if p.extension().is_some_and(|x| x == "json") {
                let to = data.join(p.file_name().expect("a file"));
                if to != p {
                    std::fs::copy(&p, &to).with_context(|| format!("copying {}", p.display()))?;
                }
                copied += 1;
            }
        }
    }
    eprintln!(
        "merged {copied} experiment outputs into {}",
        m.out.display()
    );
    let summary = report::write(&m.out, Paper::All, m.scale, m.seed, None, &[])?;
    println!("{summary}");
    Ok(())
}

fn human_s(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}
