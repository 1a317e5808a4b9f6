//! `nandkit flash-bench`: how fast the simulator itself runs on this host, and a check that
//! its parallel timing is right (p programs on p chips cost one program time).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{ensure, Context};
use clap::{Args, ValueEnum};
use nandkit_flash::{
    BlockAddr, Command, DeviceConfig, DeviceOptions, ExecutorKind, Flash, FlashDevice, PageAddr,
};
use serde::Serialize;

use crate::device_args::{parse_bytes, DeviceArgs};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Backend {
    /// Pages in memory, allocated per block on first program.
    Ram,
    /// A nanddump-layout image file with a sidecar (in --image, or a temporary directory).
    File,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExecutorArg {
    /// Every chip's operations in the calling thread.
    Sim,
    /// A dispatcher and one worker thread per chip (the MA design).
    Threaded,
}

#[derive(Args)]
pub struct FlashBenchArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Where the device's bytes live.
    #[arg(long, value_enum, default_value = "ram")]
    backend: Backend,
    /// Image path for --backend file (default: a temporary file, removed afterwards).
    #[arg(long, value_name = "PATH")]
    image: Option<PathBuf>,
    /// Executor for the host-rate runs (the timing check always runs both).
    #[arg(long, value_enum, default_value = "sim")]
    executor: ExecutorArg,
    /// User data to program, read back and erase for the host rates (capped at the device).
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes, value_name = "SIZE")]
    bytes: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ParallelCheck {
    chips: u32,
    /// Simulated ns for a batch of `chips` programs all on chip 0.
    one_chip_batch_ns: u64,
    /// Simulated ns for the same batch spread one program per chip.
    spread_batch_ns: u64,
    /// one_chip_batch_ns / spread_batch_ns: equals `chips` when chips overlap perfectly.
    speedup: f64,
    /// The simulated and threaded executors gave identical simulated times.
    executors_agree: bool,
}

#[derive(Serialize)]
struct Report {
    geometry: String,
    chips: u32,
    backend: String,
    executor: String,
    page_size_bytes: u32,
    pages: u64,
    blocks: u64,
    /// Host page programs per second (single-op API, one core), device memory resident.
    programs_per_s: f64,
    /// The same on the first pass, when every page of host memory is touched for the first time.
    programs_first_touch_per_s: f64,
    /// Host page reads (data + OOB, with ECC modelling) per second.
    reads_per_s: f64,
    /// Host block erases per second.
    erases_per_s: f64,
    /// Simulated sequential program bandwidth of one chip, MB/s of data.
    sim_program_mb_per_s: f64,
    /// Speedup of the configured chip count (see `parallel`).
    parallel_speedup: f64,
    parallel: Vec<ParallelCheck>,
}

pub fn executor_kind(e: ExecutorArg) -> ExecutorKind {
    match e {
        ExecutorArg::Sim => ExecutorKind::Simulated,
        ExecutorArg::Threaded => ExecutorKind::Threaded,
    }
}

pub fn run(args: FlashBenchArgs) -> anyhow::Result<()> {
    let config = args.device.config()?;
    let options = DeviceOptions {
        executor: executor_kind(args.executor),
        realtime: false,
        host: nandkit_flash::HostCost::ZERO,
    };
    let mut _tempdir = None;
    let mut dev = match args.backend {
        Backend::Ram => FlashDevice::ram_with(config.clone(), options)?,
        Backend::File => {
            let path = match &args.image {
                Some(p) => p.clone(),
                None => {
                    let dir = tempfile::tempdir().context("creating a temporary directory")?;
                    let p = dir.path().join("flash-bench.img");
                    _tempdir = Some(dir);
                    p
                }
            };
            if !args.json {
                eprintln!("creating image {} ...", path.display());
            }
            FlashDevice::create_image(&path, config.clone(), args.image.is_none(), options)?
        }
    };
    let g = config.geometry;
    let blocks = (args.bytes / g.block_bytes()).clamp(1, g.total_blocks());
    let good = good_blocks(&mut dev, blocks)?;
    let pages = good.len() as u64 * u64::from(g.pages_per_block);

    let data: Vec<u8> = (0..g.page_size_bytes).map(|i| (i * 7) as u8).collect();
    let oob = vec![0x5A; g.oob_size_bytes as usize];
    // First pass: the backend's memory (RAM buffers, or the image's page cache) is touched
    // for the first time, so this measures the host's page faults as much as the simulator.
    let t = Instant::now();
    program_all(&mut dev, &good, &data, &oob)?;
    let first_program_s = t.elapsed().as_secs_f64();
    for &b in &good {
        dev.erase_block(b)?;
    }
    // Second pass: a device in use, its memory resident. This is the reported rate.
    let sim_start = dev.now_ns();
    let t = Instant::now();
    program_all(&mut dev, &good, &data, &oob)?;
    let program_s = t.elapsed().as_secs_f64();
    let sim_program_ns = dev.now_ns() - sim_start;

    let mut rdata = vec![0; g.page_size_bytes as usize];
    let mut roob = vec![0; g.oob_size_bytes as usize];
    let t = Instant::now();
    for &b in &good {
        for page in 0..g.pages_per_block {
            // Worn-out bit errors are not expected on a fresh device; a report says so.
            dev.read_page(b.page(page), &mut rdata, &mut roob)?;
        }
    }
    let read_s = t.elapsed().as_secs_f64();
    ensure!(rdata == data, "read back differs from what was programmed");

    let t = Instant::now();
    for &b in &good {
        dev.erase_block(b)?;
    }
    let erase_s = t.elapsed().as_secs_f64();

    let mut parallel = Vec::new();
    for p in [1, 2, 4] {
        if p != g.chips && g.split_over(p).is_ok() {
            parallel.push(parallel_check(&config, p)?);
        }
    }
    parallel.push(parallel_check(&config, g.chips)?);
    parallel.sort_by_key(|c| c.chips);
    parallel.dedup_by_key(|c| c.chips);
    let mine = parallel
        .iter()
        .find(|c| c.chips == g.chips)
        .expect("configured chip count checked");

    let report = Report {
        geometry: config.name.clone(),
        chips: g.chips,
        backend: format!("{:?}", args.backend).to_lowercase(),
        executor: format!("{:?}", args.executor).to_lowercase(),
        page_size_bytes: g.page_size_bytes,
        pages,
        blocks: good.len() as u64,
        programs_per_s: pages as f64 / program_s,
        programs_first_touch_per_s: pages as f64 / first_program_s,
        reads_per_s: pages as f64 / read_s,
        erases_per_s: good.len() as f64 / erase_s,
        sim_program_mb_per_s: pages as f64 * f64::from(g.page_size_bytes)
            / (sim_program_ns as f64 / 1e9)
            / 1e6,
        parallel_speedup: mine.speedup,
        parallel,
    };
    ensure!(
        report.parallel.iter().all(|c| c.executors_agree),
        "simulated and threaded executors disagree on simulated time"
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn program_all(
    dev: &mut FlashDevice,
    blocks: &[BlockAddr],
    data: &[u8],
    oob: &[u8],
) -> anyhow::Result<()> {
    let pages_per_block = dev.geometry().pages_per_block;
    for &b in blocks {
        for page in 0..pages_per_block {
            dev.program_page(b.page(page), data, oob)?;
        }
    }
    Ok(())
}

/// The first `want` good blocks, taken round-robin over the chips.
fn good_blocks(dev: &mut FlashDevice, want: u64) -> anyhow::Result<Vec<BlockAddr>> {
    let g = dev.geometry();
    let mut out = Vec::new();
    'outer: for block in 0..g.blocks_per_chip {
        for chip in 0..g.chips {
            if out.len() as u64 >= want {
                break 'outer;
            }
            let b = BlockAddr::new(chip, block);
            if !dev.is_bad(b)? {
                out.push(b);
            }
        }
    }
    Ok(out)
}

/// Times p programs on one chip against p programs on p chips, on both executors.
fn parallel_check(config: &DeviceConfig, chips: u32) -> anyhow::Result<ParallelCheck> {
    let config = DeviceConfig {
        geometry: config.geometry.split_over(chips)?,
        ..config.clone()
    };
    let mut runs = Vec::new();
    for executor in [ExecutorKind::Simulated, ExecutorKind::Threaded] {
        let g = config.geometry;
        let program = |addr| Command::Program {
            addr,
            data: vec![0xA5; g.page_size_bytes as usize],
            oob: vec![0x3C; g.oob_size_bytes as usize],
        };
        // Block 0 is guaranteed good on every chip; each batch gets a fresh device.
        let one_chip: Vec<_> = (0..chips)
            .map(|k| program(PageAddr::new(0, 0, k)))
            .collect();
        let spread: Vec<_> = (0..chips)
            .map(|c| program(PageAddr::new(c, 0, 0)))
            .collect();
        let mut times = Vec::new();
        for batch in [one_chip, spread] {
            let options = DeviceOptions {
                executor,
                realtime: false,
                host: nandkit_flash::HostCost::ZERO,
            };
            let mut dev = FlashDevice::ram_with(config.clone(), options)?;
            for c in dev.submit(batch) {
                c.result?;
            }
            times.push(dev.now_ns());
        }
        runs.push(times);
    }
    Ok(ParallelCheck {
        chips,
        one_chip_batch_ns: runs[0][0],
        spread_batch_ns: runs[0][1],
        speedup: runs[0][0] as f64 / runs[0][1] as f64,
        executors_agree: runs[0] == runs[1],
    })
}

fn print_table(r: &Report) {
    println!(
        "device      {} x{} chip(s), {} backend, {} executor",
        r.geometry, r.chips, r.backend, r.executor
    );
    println!(
        "workload    {} blocks, {} pages of {} B programmed, read, erased",
        r.blocks, r.pages, r.page_size_bytes
    );
    println!("host        {:>12.0} page programs/s", r.programs_per_s);
    println!(
        "host        {:>12.0} page programs/s on first touch of host memory",
        r.programs_first_touch_per_s
    );
    println!("host        {:>12.0} page reads/s", r.reads_per_s);
    println!("host        {:>12.0} block erases/s", r.erases_per_s);
    println!(
        "simulated   {:>12.2} MB/s sequential program, one op at a time",
        r.sim_program_mb_per_s
    );
    println!();
    println!("chips  p programs on 1 chip  p programs on p chips  speedup  executors agree");
    for c in &r.parallel {
        println!(
            "{:>5}  {:>17.1} us  {:>18.1} us  {:>7.2}  {}",
            c.chips,
            c.one_chip_batch_ns as f64 / 1000.0,
            c.spread_batch_ns as f64 / 1000.0,
            c.speedup,
            if c.executors_agree { "yes" } else { "NO" }
        );
    }
}
