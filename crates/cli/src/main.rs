//! `nandkit`: the command-line face of the NAND flash kit.

mod bench;
mod device_args;
mod flash_bench;
mod heap;
mod presets_cmd;

use clap::{Parser, Subcommand};

/// Counts live heap bytes for `nandkit bench heap` (a thin wrapper over the system allocator).
#[global_allocator]
static ALLOC: heap::CountingAlloc = heap::CountingAlloc;

#[derive(Parser)]
#[command(
    name = "nandkit",
    version,
    about = "NAND flash storage kit: a trustworthy flash simulator and the file systems built on it",
    long_about = "nandkit simulates NAND flash chips (timing, wear, bit errors, power loss) and \
                  runs flash file system designs on them.\n\n\
                  Every device is simulated: no hardware or configuration is needed. \
                  Simulated times are deterministic; host (wall-clock) rates are measured separately."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in device presets and where their numbers come from.
    Presets(presets_cmd::PresetsArgs),
    /// Measure the simulator itself: host op rates and parallel timing across chips.
    #[command(after_help = "Examples:\n  \
        nandkit flash-bench\n  \
        nandkit flash-bench --geometry mlc-1g --chips 4 --json\n  \
        nandkit flash-bench --geometry tlc-1g --backend file --device-size 256MiB")]
    FlashBench(flash_bench::FlashBenchArgs),
    /// File system benchmarks: sequential write, random overwrite (cleaning), heap use.
    #[command(after_help = "Examples:\n  \
        nandkit bench seq-write --geometry mlc-1g --device-size 128MiB --file-size 64MiB\n  \
        nandkit bench random-overwrite --device-size 128MiB --utilization 0.8 --cleaner greedy\n  \
        nandkit bench heap --device-size 1GiB --json")]
    Bench(bench::BenchArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Presets(args) => presets_cmd::run(args),
        Command::FlashBench(args) => flash_bench::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
