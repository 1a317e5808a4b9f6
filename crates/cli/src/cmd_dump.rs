//! `nandkit dump`: per-block state of an image, or the decoded tags of one block's pages.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use nandkit_flash::{BlockInfo, DeviceOptions, Flash, FlashDevice};
use nandkit_fs::blocks::{Block, BlockState};
use nandkit_fs::inspect::{page_view, PageView};
use nandkit_fs::layout::Layout;
use serde::Serialize;

use crate::image::{self, Access};

#[derive(Args)]
pub struct DumpArgs {
    /// Flash image to dump.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Show the tags of every page of this block (blocks count chip after chip from 0).
    #[arg(long, short = 'b', value_name = "N")]
    block: Option<u32>,
    /// List erased blocks too (by default only a count of them is shown).
    #[arg(long)]
    all: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    nvram: crate::nvram_args::NvramArgs,
}

#[derive(Serialize)]
struct BlockRow {
    block: u32,
    chip: u32,
    /// free (erased), active (open for writing), full, checkpoint, anchor, bad; or, when
    /// the image holds no mountable file system, what the device says: erased, written,
    /// bad.
    state: String,
    /// Write serial just before the block's first page (its age, for cleaning).
    first_serial: u64,
    valid: u32,
    invalid: u32,
    /// Pages holding the block's summary.
    summary: u32,
    free: u32,
    erase_count: u32,
    /// Set when a cut interrupted the block's last erase.
    erase_torn: bool,
}

#[derive(Serialize)]
struct PageRow {
    page: u32,
    #[serde(flatten)]
    view: PageView,
}

pub fn run(args: DumpArgs) -> anyhow::Result<()> {
    let img = &args.image;
    image::require_exists(img)?;
    let _lock = image::lock(img, Access::Read)?;
    let mut dev = image::open_device(img, DeviceOptions::default())?;
    let g = dev.geometry();
    let infos: Vec<BlockInfo> = image::block_addrs(g)
        .map(|a| dev.block_info(a))
        .collect::<Result<_, _>>()?;

    if let Some(n) = args.block {
        let blocks = infos.len() as u32;
        if n >= blocks {
            bail!(
                "--block {n}: the device has blocks 0..={} ({} chip(s) x {} blocks)",
                blocks - 1,
                g.chips,
                g.blocks_per_chip
            );
        }
        return dump_block(&args, dev, n, infos[n as usize]);
    }

    // The file system's block table, if the image mounts; else the device's own view.
    let table = match image::mount_read_only_with(img, dev, false, args.nvram.nvram.as_deref()) {
        Ok(fs) => Some(fs.block_table().to_vec()),
        Err(e) => {
            eprintln!("nandkit dump: {e:#}\nnandkit dump: showing the device's view only");
            None
        }
    };
    let rows: Vec<BlockRow> = infos
        .iter()
        .enumerate()
        .map(|(b, info)| row(b as u32, g, info, table.as_ref().map(|t| &t[b])))
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "{:>6} {:>4} {:<10} {:>10} {:>6} {:>7} {:>7} {:>5} {:>7}",
        "BLOCK", "CHIP", "STATE", "1ST SERIAL", "VALID", "INVALID", "SUMMARY", "FREE", "ERASES"
    );
    let mut hidden = 0u64;
    for r in &rows {
        let erased = matches!(r.state.as_str(), "free" | "erased") && r.free == g.pages_per_block;
        if erased && !args.all {
            hidden += 1;
            continue;
        }
        println!(
            "{:>6} {:>4} {:<10} {:>10} {:>6} {:>7} {:>7} {:>5} {:>7}{}",
            r.block,
            r.chip,
            r.state,
            r.first_serial,
            r.valid,
            r.invalid,
            r.summary,
            r.free,
            r.erase_count,
            if r.erase_torn { "  (erase torn)" } else { "" }
        );
    }
    if hidden > 0 {
        println!("({hidden} erased blocks not listed; --all lists them)");
    }
    Ok(())
}

fn row(b: u32, g: nandkit_flash::Geometry, info: &BlockInfo, fs: Option<&Block>) -> BlockRow {
    let ppb = g.pages_per_block;
    let (state, first_serial, valid, invalid, summary, free) = match fs {
        Some(blk) => {
            let state = match blk.state {
                BlockState::Empty => "free",
                BlockState::Active => "active",
                BlockState::Full => "full",
                BlockState::Checkpoint => "checkpoint",
                BlockState::Anchor => "anchor",
                BlockState::Bad => "bad",
            };
            let used = blk.next_page().min(ppb);
            let invalid = match blk.state {
                BlockState::Checkpoint | BlockState::Anchor => 0,
                _ => used.saturating_sub(blk.valid() + blk.overhead()),
            };
            (
                state.to_string(),
                blk.base_serial,
                blk.valid(),
                invalid,
                blk.overhead(),
                ppb - used,
            )
        }
        None => {
            let bad = info.factory_bad || info.grown_bad;
            let state = if bad {
                "bad"
            } else if info.write_ptr == 0 {
                "erased"
            } else {
                "written"
            };
            // Without a file system nothing is known to be valid or invalid.
            (state.to_string(), 0, 0, 0, 0, ppb - info.write_ptr.min(ppb))
        }
    };
    BlockRow {
        block: b,
        chip: b / g.blocks_per_chip,
        state,
        first_serial,
        valid,
        invalid,
        summary,
        free,
        erase_count: info.erase_count,
        erase_torn: info.erase_torn,
    }
}

fn dump_block(
    args: &DumpArgs,
    mut dev: FlashDevice,
    n: u32,
    info: BlockInfo,
) -> anyhow::Result<()> {
    let g = dev.geometry();
    // Tags decode the same on every chip; the file system's own view is the striped one.
    let layout = Layout::new(g.striped())?;
    let base = layout.block_addr(n);
    let page_bytes = g.page_size_bytes as usize;
    let mut pages = Vec::with_capacity(g.pages_per_block as usize);
    for page in 0..g.pages_per_block {
        let raw = dev.raw_page(base.page(page))?;
        let (data, oob) = raw.split_at(page_bytes.min(raw.len()));
        pages.push(PageRow {
            page,
            view: page_view(&layout, data, oob),
        });
    }
    if args.json {
        let out = serde_json::json!({
            "block": n,
            "chip": base.chip,
            "erase_count": info.erase_count,
            "write_ptr": info.write_ptr,
            "factory_bad": info.factory_bad,
            "grown_bad": info.grown_bad,
            "erase_torn": info.erase_torn,
            "pages": pages,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "block {n} (chip {}, block {} on the chip): {} erases, next programmable page {}{}{}",
        base.chip,
        base.block,
        info.erase_count,
        info.write_ptr,
        if info.factory_bad || info.grown_bad {
            ", BAD"
        } else {
            ""
        },
        if info.erase_torn {
            ", last erase torn"
        } else {
            ""
        }
    );
    println!(
        "{:>5} {:<10} {:>8} {:>8} {:>6} {:>10} {:>8} {:>10} {:>5}",
        "PAGE", "KIND", "OBJ", "CHUNK", "BYTES", "SERIAL", "PARENT", "SIZE", "CHECK"
    );
    let mut i = 0;
    while i < pages.len() {
        let p = &pages[i].view;
        if p.kind == "erased" {
            // A run of erased pages is one line.
            let mut j = i;
            while j + 1 < pages.len() && pages[j + 1].view.kind == "erased" {
                j += 1;
            }
            if j > i {
                println!("{:>5} erased (pages {i}..={j})", format!("{i}-"));
            } else {
                println!("{i:>5} erased");
            }
            i = j + 1;
            continue;
        }
        let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        println!(
            "{:>5} {:<10} {:>8} {:>8} {:>6} {:>10} {:>8} {:>10} {:>5}",
            pages[i].page,
            p.kind,
            opt(p.obj.map(u64::from)),
            opt(p.chunk.map(u64::from)),
            opt(p.n_bytes.map(u64::from)),
            opt(p.serial),
            opt(p.parent.map(u64::from)),
            opt(p.size),
            match p.check_ok {
                Some(true) => "ok",
                Some(false) => "BAD",
                None => "-",
            }
        );
        i += 1;
    }
    Ok(())
}
