//! `nandkit`: the command-line face of the NAND flash kit.

mod device_args;
mod flash_bench;
mod presets_cmd;

use clap::{Parser, Subcommand};

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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Presets(args) => presets_cmd::run(args),
        Command::FlashBench(args) => flash_bench::run(args),
    }
}
