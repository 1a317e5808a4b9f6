//! A program of one's own that calls nandkit's experiments: the MODA paper's phone
//! workload, recorded as a trace, measured on two designs in this process.
//!
//!     cargo run --release -p nandkit-lab --example compare_two

use nandkit_lab::bench::BenchNvramArgs;
use nandkit_lab::compare::{design, measure, recorded};

/// Counts the heap, so the RAM figures mean something.
#[global_allocator]
static ALLOC: nandkit_lab::heap::CountingAlloc = nandkit_lab::heap::CountingAlloc;

fn main() -> anyhow::Result<()> {
    let config = nandkit_flash::preset("tiny")?;
    let trace = recorded::record("phone", 1, config.geometry.total_bytes())?;
    let spec = measure::Spec {
        config,
        trace,
        seed: 1,
        queue_depth: 1,
        cuts: 2,
        nvram: BenchNvramArgs {
            nvram_preset: nandkit_nvram::DEFAULT_PRESET.into(),
            nvram_size: None,
        },
    };
    for name in ["yaffs", "minv"] {
        let row = measure::measure(&spec, &design::by_name(name)?);
        println!(
            "{name:<6} {}: p99 {:.3} ms, WA {:.2}, {} KiB after mount, power cut {}/{} kept",
            row.status,
            row.p99_ms.unwrap_or(f64::NAN),
            row.write_amplification.unwrap_or(f64::NAN),
            row.ram_after_mount_bytes / 1024,
            row.power_cut.data_kept,
            row.power_cut.cuts
        );
    }
    Ok(())
}
