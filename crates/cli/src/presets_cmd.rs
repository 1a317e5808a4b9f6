//! `nandkit presets`

use clap::Args;
use nandkit_flash::{presets, Preset};

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
                    "energy": p.config.energy,
                    "energy_source": p.energy_source,
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
    println!();
    print_energy(&all);
    println!();
    println!("Profiles (mkfs --profile NAME):");
    for name in nandkit_fs::PROFILES {
        println!(
            "  {:<13} {}",
            name,
            nandkit_fs::config::profile_summary(name)
        );
    }
    Ok(())
}

/// Energy per operation, then where it comes from: one line per distinct source, naming
/// the presets that share it (most share one rule, so it is not repeated for each).
/// `--json` gives every preset's full `energy_source`.
fn print_energy(all: &[Preset]) {
    println!(
        "{:<19} {:>11} {:>11} {:>11} {:>11}",
        "ENERGY", "READ", "PROGRAM", "ERASE", "BUS/BYTE"
    );
    for p in all {
        let e = p.config.energy;
        println!(
            "{:<19} {:>11} {:>11} {:>11} {:>11}",
            p.name,
            micro_joules(e.read_pj),
            micro_joules(e.program_pj),
            micro_joules(e.erase_pj),
            match e.transfer_pj_per_byte {
                0 => "-".to_string(),
                pj => format!("{}nJ", pj as f64 / 1e3),
            },
        );
    }
    println!("(READ is the array read; each byte moved over the bus adds BUS/BYTE)");
    let mut sources: Vec<&str> = Vec::new();
    for p in all {
        if !sources.contains(&p.energy_source) {
            sources.push(p.energy_source);
        }
    }
    for source in &sources {
        let names: Vec<_> = all
            .iter()
            .filter(|p| p.energy_source == *source)
            .map(|p| p.name)
            .collect();
        // A source that extends the first one (the common rule) shows only what it adds.
        let text = match source.strip_prefix(sources[0]) {
            Some(extra) if !extra.is_empty() => format!("as above{extra}"),
            _ => source.to_string(),
        };
        println!("\n{}: {text}", names.join(", "));
    }
}

fn micro_joules(pj: u64) -> String {
    format!("{}uJ", pj as f64 / 1e6)
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
