//! `nandkit dump`: per-block state of an image, or the decoded tags of one block's pages.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use nandkit_flash::{BlockInfo, DeviceOptions, Flash, FlashDevice};
use nandkit_fs::blocks::{Block, BlockState};
use nandkit_fs::format::{crc, TagRead, TAG_BYTES};
use nandkit_fs::layout::{Layout, TagPlace, OOB_TAG_OFFSET};
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
}

#[derive(Serialize)]
struct BlockRow {
    block: u32,
    chip: u32,
    /// free (erased), active (open for writing), full, checkpoint, bad; or, when the image
    /// holds no mountable file system, what the device says: erased, written, bad.
    state: String,
    seq: u32,
    valid: u32,
    invalid: u32,
    free: u32,
    erase_count: u32,
    /// Set when a cut interrupted the block's last erase.
    erase_torn: bool,
}

#[derive(Serialize)]
struct PageRow {
    page: u32,
    /// data, header, checkpoint, erased, or garbage (torn or corrupt tags).
    kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    obj: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chunk: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block_seq: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    serial: Option<u64>,
    /// Does the data area match the CRC in the tags?
    #[serde(skip_serializing_if = "Option::is_none")]
    data_crc_ok: Option<bool>,
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
    let table = match image::mount_read_only(img, dev, false) {
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
        "{:>6} {:>4} {:<10} {:>8} {:>6} {:>7} {:>5} {:>7}",
        "BLOCK", "CHIP", "STATE", "SEQ", "VALID", "INVALID", "FREE", "ERASES"
    );
    let mut hidden = 0u64;
    for r in &rows {
        let erased = matches!(r.state.as_str(), "free" | "erased") && r.free == g.pages_per_block;
        if erased && !args.all {
            hidden += 1;
            continue;
        }
        println!(
            "{:>6} {:>4} {:<10} {:>8} {:>6} {:>7} {:>5} {:>7}{}",
            r.block,
            r.chip,
            r.state,
            r.seq,
            r.valid,
            r.invalid,
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
    let (state, seq, valid, invalid, free) = match fs {
        Some(blk) => {
            let state = match blk.state {
                BlockState::Empty => "free",
                BlockState::Active => "active",
                BlockState::Full => "full",
                BlockState::Checkpoint => "checkpoint",
                BlockState::Bad => "bad",
            };
            let used = blk.next_page.min(ppb);
            (
                state.to_string(),
                blk.seq,
                blk.valid,
                used.saturating_sub(blk.valid),
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
            (state.to_string(), 0, 0, 0, ppb - info.write_ptr.min(ppb))
        }
    };
    BlockRow {
        block: b,
        chip: b / g.blocks_per_chip,
        state,
        seq,
        valid,
        invalid,
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
    let layout = Layout::new(g);
    let base = layout.block_addr(n);
    let page_bytes = g.page_size_bytes as usize;
    let mut pages = Vec::with_capacity(g.pages_per_block as usize);
    for page in 0..g.pages_per_block {
        let raw = dev.raw_page(base.page(page))?;
        let (data, oob) = raw.split_at(page_bytes.min(raw.len()));
        let tag_bytes = match layout.tags {
            TagPlace::Oob => &oob[OOB_TAG_OFFSET.min(oob.len())..],
            TagPlace::InBand => &data[data.len().saturating_sub(TAG_BYTES)..],
        };
        let mut r = PageRow {
            page,
            kind: String::new(),
            obj: None,
            chunk: None,
            n_bytes: None,
            block_seq: None,
            serial: None,
            data_crc_ok: None,
        };
        match nandkit_fs::format::Tags::decode(tag_bytes) {
            TagRead::Erased => r.kind = "erased".into(),
            TagRead::Garbage => r.kind = "garbage".into(),
            TagRead::Valid(t) => {
                r.kind = format!("{:?}", t.kind).to_lowercase();
                r.obj = Some(t.obj);
                r.chunk = Some(t.chunk);
                r.n_bytes = Some(t.n_bytes);
                r.block_seq = Some(t.block_seq);
                r.serial = Some(t.serial);
                r.data_crc_ok = Some(
                    data.get(..t.n_bytes as usize)
                        .is_some_and(|d| crc(d) == t.data_crc),
                );
            }
        }
        pages.push(r);
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
        "{:>5} {:<10} {:>8} {:>8} {:>6} {:>8} {:>10} {:>4}",
        "PAGE", "KIND", "OBJ", "CHUNK", "BYTES", "SEQ", "SERIAL", "CRC"
    );
    let mut i = 0;
    while i < pages.len() {
        let p = &pages[i];
        if p.kind == "erased" {
            // A run of erased pages is one line.
            let mut j = i;
            while j + 1 < pages.len() && pages[j + 1].kind == "erased" {
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
            "{:>5} {:<10} {:>8} {:>8} {:>6} {:>8} {:>10} {:>4}",
            p.page,
            p.kind,
            opt(p.obj.map(u64::from)),
            opt(p.chunk.map(u64::from)),
            opt(p.n_bytes.map(u64::from)),
            opt(p.block_seq.map(u64::from)),
            opt(p.serial),
            match p.data_crc_ok {
                Some(true) => "ok",
                Some(false) => "BAD",
                None => "-",
            }
        );
        i += 1;
    }
    Ok(())
}
