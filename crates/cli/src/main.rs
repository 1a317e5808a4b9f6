//! `nandkit`: the command-line face of the NAND flash kit.

mod cmd_dump;
mod cmd_fsck;
mod cmd_info;
mod cmd_mkfs;
mod cmd_rebuild;
mod cmd_ubi;
mod cmd_ubifs;
mod image;
mod model_cmd;
mod mount;
mod nvram_args;
mod presets_cmd;
mod trace_cmd;
mod ubifs_mkfs;

use std::process::ExitCode;

use nandkit_lab::{bench, compare, device_args, flash_bench, heap, reproduce};

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
    /// Which design for my workload on my chip: every design replays one workload; one report.
    #[command(long_about = compare::LONG_ABOUT, after_help = "Examples:\n  \
        nandkit compare --workload camera --geometry tlc-1g --device-size 256MiB\n  \
        nandkit trace import strace app.log --out app.csv\n  \
        nandkit compare --trace app.csv --geometry mlc-1g --device-size 256MiB --out app-report\n  \
        nandkit compare --workload CameraVideo --chips 4 --profiles yaffs,ma,ma-parity,littlefs")]
    Compare(compare::CompareArgs),
    /// Create a flash image (if absent) and format it with a nandkit file system.
    #[command(
        after_help = "The image is two files: IMAGE (every page's data then OOB, as \
        nanddump --oob writes it) and IMAGE.meta (geometry and per-block wear); with \
        --parity, a file per chip (IMAGE holds chip 0, IMAGE.chip<k> chip k), so one chip \
        can fail or be replaced on its own.\n\
        mkfs refuses to format an image that already holds a file system or data unless \
        --force is given; with --force and different device options it recreates the image.\n\n\
        Examples:\n  \
        nandkit mkfs disk.img\n  \
        nandkit mkfs disk.img --geometry mlc-1g --device-size 256MiB\n  \
        nandkit mkfs disk.img --geometry tlc-1g --chips 4 --force\n  \
        nandkit mkfs disk.img --geometry tlc-1g --chips 4 --parity --force"
    )]
    Mkfs(cmd_mkfs::MkfsArgs),
    /// Mount an image through FUSE (returns once the mount is up; `fusermount3 -u` unmounts).
    #[command(after_help = mount::AFTER_HELP)]
    Mount(mount::MountArgs),
    /// Check an image's file system without changing it.
    #[command(
        after_help = "Mounts the image read-only by a full scan and checks every \
        invariant (page ownership, tags and CRCs, block table, directory tree, sizes). If a \
        checkpoint is present, the mount it gives is checked too and compared with the scan.\n\n\
        Exit status: 0 clean, 1 problems found (listed), 8 the image could not be checked.\n\n\
        Examples:\n  \
        nandkit fsck disk.img\n  \
        nandkit fsck disk.img --json"
    )]
    Fsck(cmd_fsck::FsckArgs),
    /// Describe an image: device, profile, space, wear, bad blocks, u/i/p.
    #[command(
        after_help = "u, i and p are the MODA paper's utilization (valid pages / all \
        pages), invalidity (invalid pages / all pages) and uniformity (fraction of blocks \
        that do not hold both valid and invalid pages).\n\n\
        Examples:\n  \
        nandkit info disk.img\n  \
        nandkit info disk.img --json"
    )]
    Info(cmd_info::InfoArgs),
    /// Rebuild a chip of an array with parity onto a new chip, restoring redundancy.
    #[command(
        after_help = "An array made with `mkfs --chips P --parity` loses no data when \
        one chip fails: it runs degraded, rebuilding that chip's pages from the others on \
        every read. `rebuild` puts a new erased chip in place of the failed one (its image \
        file IMAGE.chip<K>, or IMAGE for chip 0) and writes back every page it should hold. \
        A rebuild cut short (a power loss, Ctrl-C) is resumed by running it again.\n\n\
        Examples:\n  \
        nandkit rebuild disk.img --chip 2\n  \
        nandkit rebuild disk.img --chip 0 --new-chip --json"
    )]
    Rebuild(cmd_rebuild::RebuildArgs),
    /// Raw UBI images in and out: import what ubinize made or nanddump read off a board,
    /// export a chip as the raw image nandwrite would flash.
    Ubi(cmd_ubi::UbiArgs),
    /// UBIFS volumes read as Linux mounts them: list, extract, check (images from
    /// mkfs.ubifs or a board, through `nandkit ubi import`, or mkfs.ubifs's own output).
    Ubifs(cmd_ubifs::UbifsArgs),
    /// Per-block state of an image, or the decoded tags of one block's pages.
    #[command(after_help = "Examples:\n  \
        nandkit dump disk.img\n  \
        nandkit dump disk.img --all --json\n  \
        nandkit dump disk.img --block 0")]
    Dump(cmd_dump::DumpArgs),
    /// Closed-form models from the papers: MODA cleaning cost (eq. 2), LFS write cost (eq. 1).
    #[command(after_help = "Examples:\n  \
        nandkit model cleaning-cost --blocks 3706 --pages-per-block 32 --u 0.86 --i 0.0087 \
        --p 0.73 --read-us 200 --write-us 1030 --erase-us 1740\n  \
        nandkit model lfs-write-cost --u 0.8 --json")]
    Model(model_cmd::ModelArgs),
    /// Reproduce the papers' headline results: run their experiments, judge every claim
    /// against the paper's number, redraw the figures, write a report.
    #[command(
        after_help = "Writes DIR/index.html (self-contained), DIR/claims.json (a \
        row per claim: paper, claim, paper_value, ours, holds), the figures as SVG, \
        DIR/meta.json and each experiment's JSON in DIR/data. Finished experiments are \
        kept, so an interrupted run resumes; --shard I/N runs one slice (e.g. a Slurm \
        array task) and `reproduce merge` joins the slices.\n\n\
        Examples:\n  \
        nandkit reproduce --quick\n  \
        nandkit reproduce minv --out minv-report\n  \
        nandkit reproduce all --shard 2/4 --out part2\n  \
        nandkit reproduce merge part1 part2 part3 part4 --out report"
    )]
    Reproduce(reproduce::ReproduceArgs),
    /// Make traces for `bench trace` from what other tools record (strace).
    #[command(after_help = "Examples:\n  \
        nandkit trace import strace app.log > app.csv\n  \
        nandkit trace import strace app.log --out app.csv")]
    Trace(trace_cmd::TraceArgs),
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`nandkit dump IMAGE | head`) instead of panicking on a broken pipe.
    // The mount daemon keeps Rust's default (ignored), so a vanished log reader cannot kill
    // it with dirty data in RAM.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let cli = match mount::helper::translate(&argv, root) {
        None => Cli::parse(),
        Some(Ok(args)) => Cli::parse_from(args),
        Some(Err(e)) => {
            eprintln!("{}: {e}", mount::helper::HELPER_NAME);
            // mount(8)'s code for a usage error.
            return ExitCode::from(1);
        }
    };
    if !matches!(cli.command, Command::Mount(_)) {
        // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match cli.command {
        Command::Presets(args) => presets_cmd::run(args),
        Command::FlashBench(args) => flash_bench::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Mkfs(args) => cmd_mkfs::run(args),
        Command::Mount(args) => return mount::main(args),
        Command::Fsck(args) => return cmd_fsck::main(args),
        Command::Info(args) => cmd_info::run(args),
        Command::Rebuild(args) => cmd_rebuild::run(args),
        Command::Ubi(args) => cmd_ubi::run(args),
        Command::Ubifs(args) => cmd_ubifs::run(args),
        Command::Dump(args) => cmd_dump::run(args),
        Command::Model(args) => model_cmd::run(args),
        Command::Reproduce(args) => reproduce::run(args),
        Command::Trace(args) => trace_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The same form anyhow's own `main` would print.
            eprintln!("Error: {e:?}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every subcommand's flags are well formed: no flag defined twice (a flattened group
    /// meeting a command's own flag), no bad defaults.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
