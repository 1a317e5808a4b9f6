//! `nandkit model`: the papers' closed-form models (crate nandkit-models) on the command line,
//! so a figure can be checked without running a workload.

use clap::{Args, Subcommand};
use nandkit_models::{cleaning_cost, lfs_write_cost, CleaningCost, CleaningCostInput};
use serde::Serialize;

#[derive(Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Subcommand)]
enum ModelCommand {
    /// MODA equation 2: block erases, page copies and seconds to reclaim every invalid page.
    #[command(
        long_about = "MODA equation 2: block erases, page copies and seconds to reclaim every \
            invalid page of a flash partition in the state u, i, p.\n\n  \
            erases  = B((1-p) + i*p)\n  \
            copies  = P(1-p) * u/(u+i)    (0 when u + i = 0)\n  \
            seconds = erases * erase time + copies * (read time + write time)\n\n\
            B is --blocks and P is B * --pages-per-block. The counts are expected values, so \
            they can be fractional.",
        after_help = "`nandkit info IMAGE` reports u, i and p of an image.\n\n\
            Example (the MODA paper's Table 1, Fax YAFFS row: its partition and the times it \
            measured above MTD):\n  \
            nandkit model cleaning-cost --blocks 3706 --pages-per-block 32 --u 0.86 \
            --i 0.0087 --p 0.73 --read-us 200 --write-us 1030 --erase-us 1740 --json"
    )]
    CleaningCost(CleaningCostArgs),
    /// LFS write cost 2/(1-u) (MODA equation 1): I/O per unit of new data when cleaning
    /// segments of utilization u.
    #[command(after_help = "Examples:\n  \
        nandkit model lfs-write-cost --u 0.8\n  \
        nandkit model lfs-write-cost --u 0.5 --json")]
    LfsWriteCost(LfsWriteCostArgs),
}

// Numeric flags accept a leading minus so that a negative value reaches the model and is
// refused with its range, instead of clap taking it for an unknown flag.
#[derive(Args)]
struct CleaningCostArgs {
    /// Blocks in the flash partition (B).
    #[arg(long, value_name = "N")]
    blocks: u64,
    /// Pages per erase block (P = blocks x pages per block).
    #[arg(long, value_name = "N")]
    pages_per_block: u32,
    /// Utilization: valid pages / all pages, from 0 to 1.
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    u: f64,
    /// Invalidity: invalid pages / all pages, from 0 to 1 - u.
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    i: f64,
    /// Uniformity: share of blocks that do not hold both valid and invalid pages, from 0 to 1.
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    p: f64,
    /// Time to read one page, in microseconds.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    read_us: f64,
    /// Time to write (program) one page, in microseconds.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    write_us: f64,
    /// Time to erase one block, in microseconds.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    erase_us: f64,
    /// Print one JSON object (the inputs, then the estimate) instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LfsWriteCostArgs {
    /// Utilization of the segments cleaned: live data / segment size, from 0 to below 1.
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    u: f64,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    json: bool,
}

/// `cleaning-cost --json`: the inputs echoed, so the output stands on its own, then the
/// estimate's fields at the top level.
#[derive(Serialize)]
struct CleaningCostReport {
    inputs: CleaningCostInput,
    #[serde(flatten)]
    cost: CleaningCost,
}

#[derive(Serialize)]
struct LfsWriteCostReport {
    u: f64,
    write_cost: f64,
}

pub fn run(args: ModelArgs) -> anyhow::Result<()> {
    match args.command {
        ModelCommand::CleaningCost(args) => run_cleaning_cost(args),
        ModelCommand::LfsWriteCost(args) => run_lfs_write_cost(args),
    }
}

fn run_cleaning_cost(args: CleaningCostArgs) -> anyhow::Result<()> {
    let inputs = CleaningCostInput {
        blocks: args.blocks,
        pages_per_block: args.pages_per_block,
        u: args.u,
        i: args.i,
        p: args.p,
        read_us: args.read_us,
        write_us: args.write_us,
        erase_us: args.erase_us,
    };
    let cost = cleaning_cost(&inputs)?;
    if args.json {
        let report = CleaningCostReport { inputs, cost };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "blocks            {} of {} pages",
        inputs.blocks, inputs.pages_per_block
    );
    println!("utilization u     {}", inputs.u);
    println!("invalidity i      {}", inputs.i);
    println!("uniformity p      {}", inputs.p);
    println!(
        "read/write/erase  {} / {} / {} us",
        inputs.read_us, inputs.write_us, inputs.erase_us
    );
    println!();
    println!("erases            {:.1} blocks", cost.erases);
    println!("copies            {:.1} pages", cost.copies);
    println!(
        "seconds           {:.3} s (erases {:.3} s + copies {:.3} s)",
        cost.seconds, cost.erase_seconds, cost.copy_seconds
    );
    Ok(())
}

fn run_lfs_write_cost(args: LfsWriteCostArgs) -> anyhow::Result<()> {
    let write_cost = lfs_write_cost(args.u)?;
    if args.json {
        let report = LfsWriteCostReport {
            u: args.u,
            write_cost,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "write cost {write_cost:.3} at u = {} (bytes read and written per byte of new data)",
            args.u
        );
    }
    Ok(())
}
