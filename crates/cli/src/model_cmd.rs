//! `nandkit model`: the papers' closed-form models (crate nandkit-models) on the command line,
//! so a figure can be checked without running a workload.

use clap::{Args, Subcommand};
use nandkit_models::{
    cleaning_cost, lfs_write_cost, nvram_space_uniform, CleaningCost, CleaningCostInput,
    NvramConstants, NvramSpace,
};
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
    /// MiNV equations 1-4: NVRAM bytes needed to hold all metadata of N files of one size
    /// on a flash of a given size.
    #[command(
        long_about = "MiNV equations 1-4: the NVRAM needed to keep every piece of metadata \
            of N files of S bytes each on a flash of the given size.\n\n  \
            R = f + g + h\n  \
            f = manager + (flash / block) x block info + inode table + inode (the root)\n  \
            g = inode x N\n  \
            h = N x ceil(ceil(S / allocation unit) / pointers per offset structure) x offset structure\n\n\
            --paper-constants uses the sizes of the paper's implementation (16 KB blocks, \
            512-byte allocation unit, 28-byte manager, 16 bytes per block, 3,072-byte inode \
            table, 140-byte inodes, 140-byte offset structures of 32 pointers), which give \
            its Table 2.",
        after_help = "Examples (the paper's Table 2):\n  \
            nandkit model nvram-space --flash 32MiB --files 16 --file-size 2MiB --paper-constants\n  \
            nandkit model nvram-space --flash 32MiB --files 65536 --file-size 512 --paper-constants --json\n  \
            nandkit model nvram-space --flash 32MiB --grid --paper-constants"
    )]
    NvramSpace(NvramSpaceArgs),
}

#[derive(Args)]
struct NvramSpaceArgs {
    /// NVRAM the allocation bitmap of nandkit's structures covers (a bit per 32-byte
    /// unit: part of the manager's fixed bytes).
    #[arg(long, value_name = "SIZE", default_value = "12MiB", value_parser = crate::device_args::parse_bytes)]
    nvram_size: u64,
    /// Flash capacity (S_NAND), e.g. 32MiB.
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes, required_unless_present = "capacity_sweep")]
    flash: Option<u64>,
    /// Number of files (n).
    #[arg(long, value_name = "N", required_unless_present_any = ["grid", "capacity_sweep", "mix_sweep"])]
    files: Option<u64>,
    /// Size of each file (S_k), e.g. 2MiB or 512.
    #[arg(long, value_name = "SIZE", value_parser = crate::device_args::parse_bytes, required_unless_present_any = ["grid", "capacity_sweep", "mix_sweep"])]
    file_size: Option<u64>,
    /// MiNV Figure 4 instead of one cell: for flash of 4 MiB to 8 GiB (x2 each step), the
    /// worst case (every file 512 B), the best (one file filling the flash), MP3 (4 MiB
    /// files) and photo (330 KiB files) cases; --flash is not needed.
    #[arg(long, conflicts_with_all = ["files", "file_size", "grid"])]
    capacity_sweep: bool,
    /// MiNV Figure 5 instead of one cell: on --flash, 512-byte metadata files taking 0 to
    /// 20% of it and the rest MP3 (4 MiB) or photo (330 KiB) files.
    #[arg(long, conflicts_with_all = ["files", "file_size", "grid", "capacity_sweep"])]
    mix_sweep: bool,
    /// Every cell of the paper's Table 2 layout instead of one: file sizes 512 B to 32 MiB
    /// (x4 each step) by file counts 1 to 65,536 (x4), on --flash; a cell whose files do
    /// not fit is blank (null).
    #[arg(long, conflicts_with_all = ["files", "file_size"])]
    grid: bool,
    /// Use the structure sizes of the paper's implementation (else nandkit's minv profile's).
    #[arg(long)]
    paper_constants: bool,
    /// Our sizes: the flash device (its block and page size) [default: smallblock-64m,
    /// the paper's chip].
    #[arg(
        long,
        value_name = "NAME",
        default_value = "smallblock-64m",
        conflicts_with = "paper_constants"
    )]
    geometry: String,
    /// Our sizes: bytes in each file's name (our inode holds the name).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 12,
        conflicts_with = "paper_constants"
    )]
    name_bytes: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct NvramSpaceReport {
    flash_bytes: u64,
    files: u64,
    file_size_bytes: u64,
    constants: &'static str,
    sizes: NvramConstants,
    #[serde(flatten)]
    space: NvramSpace,
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
    /// Vary one parameter (u, i or p), or two (u,p), from 0 to 1 in steps of 0.05, the
    /// others as given: a JSON array of rows (MODA Figures 3 and 4). States with
    /// u + i > 1 are left out.
    #[arg(long, value_delimiter = ',', value_name = "PARAMS", value_parser = ["u", "i", "p"])]
    sweep: Vec<String>,
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
        ModelCommand::NvramSpace(args) => run_nvram_space(args),
    }
}

fn run_cleaning_cost(args: CleaningCostArgs) -> anyhow::Result<()> {
    if !args.sweep.is_empty() {
        return print_cleaning_sweep(&args);
    }
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

/// Equation 2 over a grid of states: the swept parameters take 0, 0.05, .., 1.
fn print_cleaning_sweep(args: &CleaningCostArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.sweep.len() <= 2 && args.sweep.first() != args.sweep.get(1),
        "--sweep: one parameter, or two different ones"
    );
    let steps: Vec<f64> = (0..=20).map(|k| f64::from(k) * 0.05).collect();
    let base = [args.u, args.i, args.p];
    let index = |name: &str| match name {
        "u" => 0,
        "i" => 1,
        _ => 2,
    };
    let axes: Vec<usize> = args.sweep.iter().map(|n| index(n)).collect();
    let mut states = vec![base];
    for &a in &axes {
        states = states
            .into_iter()
            .flat_map(|st| {
                steps.iter().map(move |&v| {
                    let mut st = st;
                    st[a] = v;
                    st
                })
            })
            .collect();
    }
    let mut rows = Vec::new();
    for [u, i, p] in states {
        if u + i > 1.0 + 1e-9 {
            continue;
        }
        let inputs = CleaningCostInput {
            blocks: args.blocks,
            pages_per_block: args.pages_per_block,
            u,
            i,
            p,
            read_us: args.read_us,
            write_us: args.write_us,
            erase_us: args.erase_us,
        };
        let cost = cleaning_cost(&inputs)?;
        rows.push(CleaningCostReport { inputs, cost });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!("{:>6} {:>6} {:>6} {:>12}", "u", "i", "p", "seconds");
    for r in &rows {
        println!(
            "{:>6.2} {:>6.2} {:>6.2} {:>12.3}",
            r.inputs.u, r.inputs.i, r.inputs.p, r.cost.seconds
        );
    }
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

#[derive(Serialize)]
struct GridCell {
    file_size_bytes: u64,
    files: u64,
    /// None: the files do not fit on the flash (a blank cell).
    kib: Option<u64>,
    bytes: Option<u64>,
}

#[derive(Serialize)]
struct CapacityRow {
    flash_bytes: u64,
    case: &'static str,
    files: u64,
    file_size_bytes: u64,
    kib: u64,
}

/// Figure 4: R in KiB against flash capacity, four cases; a case whose files do not fit
/// (a 4 MiB file on 4 MiB of flash is the best case, not MP3) is left out.
fn print_capacities(sizes: &NvramConstants, json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for k in 0..12 {
        let flash = (4u64 << 20) << k;
        for (case, size) in [
            ("worst", 512u64),
            ("best", flash),
            ("mp3", 4 << 20),
            ("photo", 330 * 1024),
        ] {
            let files = flash / size;
            if files == 0 {
                continue;
            }
            if let Ok(r) = nvram_space_uniform(sizes, flash, files, size) {
                rows.push(CapacityRow {
                    flash_bytes: flash,
                    case,
                    files,
                    file_size_bytes: size,
                    kib: r.kib,
                });
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:>12} {:>6} {:>9} {:>10} {:>10}",
        "flash", "case", "files", "file size", "KiB"
    );
    for r in &rows {
        println!(
            "{:>12} {:>6} {:>9} {:>10} {:>10}",
            r.flash_bytes, r.case, r.files, r.file_size_bytes, r.kib
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct MixRow {
    /// Share of the flash the metadata files take, in percent.
    metadata_percent: f64,
    content: &'static str,
    metadata_files: u64,
    content_files: u64,
    kib: u64,
}

/// Figure 5: R in KiB on `flash` as 512-byte metadata files take a growing share of it and
/// content files of one kind fill the rest.
fn print_mix(sizes: &NvramConstants, flash: u64, json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for percent in [0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0] {
        let meta = (flash as f64 * percent / 100.0) as u64 / 512;
        for (content, size) in [("mp3", 4u64 << 20), ("photo", 330 * 1024)] {
            let n = (flash - meta * 512) / size;
            let mut files = vec![512u64; meta as usize];
            files.extend(std::iter::repeat_n(size, n as usize));
            let r = nandkit_models::nvram_space(sizes, flash, &files)?;
            rows.push(MixRow {
                metadata_percent: percent,
                content,
                metadata_files: meta,
                content_files: n,
                kib: r.kib,
            });
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:>6} {:>7} {:>9} {:>8} {:>10}",
        "meta%", "content", "metadata", "content", "KiB"
    );
    for r in &rows {
        println!(
            "{:>6} {:>7} {:>9} {:>8} {:>10}",
            r.metadata_percent, r.content, r.metadata_files, r.content_files, r.kib
        );
    }
    Ok(())
}

/// The Table 2 layout: R in KiB for each (file size, file count) on `flash`.
fn print_grid(sizes: &NvramConstants, flash: u64, which: &str, json: bool) -> anyhow::Result<()> {
    let file_sizes: Vec<u64> = (0..9).map(|k| 512u64 << (2 * k)).collect();
    let counts: Vec<u64> = (0..9).map(|k| 1u64 << (2 * k)).collect();
    let mut cells = Vec::new();
    for &s in &file_sizes {
        for &n in &counts {
            let r = nvram_space_uniform(sizes, flash, n, s).ok();
            cells.push(GridCell {
                file_size_bytes: s,
                files: n,
                kib: r.as_ref().map(|r| r.kib),
                bytes: r.as_ref().map(|r| r.bytes),
            });
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&cells)?);
        return Ok(());
    }
    println!("NVRAM needed (KiB) on {flash} bytes of flash, {which} structure sizes");
    print!("{:>10}", "size\\files");
    for n in &counts {
        print!(" {n:>7}");
    }
    println!();
    for (row, &s) in cells.chunks(counts.len()).zip(&file_sizes) {
        print!("{s:>10}");
        for c in row {
            match c.kib {
                Some(k) => print!(" {k:>7}"),
                None => print!(" {:>7}", ""),
            }
        }
        println!();
    }
    Ok(())
}

fn run_nvram_space(args: NvramSpaceArgs) -> anyhow::Result<()> {
    let sizes = if args.paper_constants {
        NvramConstants::PAPER
    } else {
        let g = nandkit_flash::preset(&args.geometry)?.geometry.striped();
        nandkit_fs::meta::minv::model_constants(g, args.nvram_size, args.name_bytes)?
    };
    let which = if args.paper_constants {
        "paper"
    } else {
        "nandkit-minv"
    };
    if args.capacity_sweep {
        return print_capacities(&sizes, args.json);
    }
    let flash = args.flash.unwrap_or(0);
    if args.mix_sweep {
        return print_mix(&sizes, flash, args.json);
    }
    if args.grid {
        return print_grid(&sizes, flash, which, args.json);
    }
    let (files, file_size) = (args.files.unwrap_or(0), args.file_size.unwrap_or(0));
    let space = nvram_space_uniform(&sizes, flash, files, file_size)?;
    if args.json {
        let report = NvramSpaceReport {
            flash_bytes: flash,
            files,
            file_size_bytes: file_size,
            constants: which,
            sizes,
            space,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "flash             {} bytes ({} blocks of {})",
        flash,
        flash / sizes.block_size,
        sizes.block_size
    );
    println!("files             {files} of {file_size} bytes");
    println!(
        "structure sizes   {}",
        if args.paper_constants {
            "the paper's".to_string()
        } else {
            format!(
                "nandkit's minv ({}: {} B inode+record per file, {} pointers per {} B \
                 offset structure)",
                args.geometry, sizes.inode, sizes.offsets_per_struct, sizes.offset_struct
            )
        }
    );
    println!();
    println!("fixed   f         {} bytes", space.fixed_bytes);
    println!("inodes  g         {} bytes", space.inode_bytes);
    println!("offsets h         {} bytes", space.offset_bytes);
    println!(
        "NVRAM   R         {} bytes = {} KiB",
        space.bytes, space.kib
    );
    if space.saved_state_bytes > 0 {
        println!(
            "saved state       {} bytes more at a clean unmount (the namespace index), {} \
             in all",
            space.saved_state_bytes,
            space.bytes + space.saved_state_bytes
        );
    }
    Ok(())
}
