//! `nandkit presets`

use clap::Args;
use nandkit_flash::presets;

#[derive(Args)]
pub struct PresetsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: PresetsArgs) -> anyhow::Result<()> {
    let all = presets();
    if args.json {
        let rows: Vec<_> = all
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name,
                    "summary": p.summary,
                    "source": p.source,
                    "config": p.config,
                    "total_bytes": p.config.geometry.total_bytes(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:<19} {:>9} {:>6} {:>5} {:>5} {:>6} {:>7} {:>8} {:>9} {:>8} {:>4} {:>7}",
        "NAME",
        "SIZE",
        "PAGE",
        "OOB",
        "FREE",
        "PG/BLK",
        "BLOCKS",
        "READ",
        "PROGRAM",
        "ERASE",
        "CELL",
        "BUS"
    );
    for p in &all {
        let g = p.config.geometry;
        let t = p.config.timing;
        println!(
            "{:<19} {:>9} {:>6} {:>5} {:>5} {:>6} {:>7} {:>8} {:>9} {:>8} {:>4} {:>7}",
            p.name,
            human_bytes(g.total_bytes()),
            g.page_size_bytes,
            g.oob_size_bytes,
            g.oob_free_bytes(),
            g.pages_per_block,
            g.blocks_per_chip,
            micros(t.read_ns),
            micros(t.program_ns),
            micros(t.erase_ns),
            p.config.cell.name(),
            if t.bus_mb_per_s == 0 {
                "-".to_string()
            } else {
                format!("{}MB/s", t.bus_mb_per_s)
            },
        );
    }
    println!();
    for p in &all {
        println!("{:<19} {}", p.name, p.source);
    }
    Ok(())
}

fn micros(ns: u64) -> String {
    format!("{}us", ns as f64 / 1000.0)
}

pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value}{}", UNITS[unit])
    } else {
        format!("{value:.1}{}", UNITS[unit])
    }
}
