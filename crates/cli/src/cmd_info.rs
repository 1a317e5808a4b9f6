//! `nandkit info`: what an image is and how full and worn it is.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use nandkit_flash::{DeviceOptions, Flash};
use nandkit_fs::format::tags::TagLayout;
use nandkit_fs::layout::Layout;
use nandkit_fs::MountMethod;
use serde::Serialize;

use crate::image::{self, Access};
use crate::presets_cmd::human_bytes;

#[derive(Args)]
pub struct InfoArgs {
    /// Flash image to describe.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    nvram: crate::nvram_args::NvramArgs,
}

#[derive(Serialize)]
struct Info {
    image: PathBuf,
    device: nandkit_flash::DeviceConfig,
    total_bytes: u64,
    profile: nandkit_fs::FsConfig,
    chunk_bytes: u32,
    /// "oob" or "in-band".
    /// Tag layout: "large" (34 bytes in the OOB, full serials) or "small" (8 bytes, for
    /// 512-byte pages).
    tags: &'static str,
    /// Largest file the on-flash format can hold on this geometry.
    max_file_bytes: u64,
    /// Object numbers given out over the image's life, and the most its tags can name.
    object_numbers_given: u64,
    object_numbers_max: u64,
    /// Files whose map is block-granular (mnfs: one entry an erase block) and files whose
    /// map is page-mapped.
    block_granular_files: u64,
    page_mapped_files: u64,
    /// The two blocks holding the file system record copies and checkpoint pointers.
    anchor_blocks: [u32; 2],
    mount_method: MountMethod,
    mount_host_ms: f64,
    mount_simulated_ms: f64,
    statfs: nandkit_fs::StatFs,
    used_bytes: u64,
    free_bytes: u64,
    total_fs_bytes: u64,
    good_blocks: u64,
    erase_count_min: u32,
    erase_count_mean: f64,
    erase_count_max: u32,
    bad_blocks: u64,
    factory_bad_blocks: u64,
    grown_bad_blocks: u64,
    /// MODA: valid pages / all pages.
    utilization: f64,
    /// MODA: invalid pages / all pages.
    invalidity: f64,
    /// MODA: fraction of blocks that do not hold both valid and invalid pages.
    uniformity: f64,
    /// MNFS's in-RAM block allocation table: data blocks, blocks per file.
    #[serde(skip_serializing_if = "Option::is_none")]
    ibat: Option<nandkit_fs::block_placed::IbatReport>,
    /// The NVRAM of a minv file system: size, bytes in use, what the mount cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    nvram: Option<nandkit_fs::meta::minv::NvramReport>,
    /// The UBI of every chip, if the image was formatted with `--ubi on`.
    ubi: Option<nandkit_flash::ubi::UbiReport>,
    /// Parity across the chips, if the image was made with `--parity`.
    #[serde(skip_serializing_if = "Option::is_none")]
    parity: Option<nandkit_flash::striped::parity::ParityReport>,
    /// Chips that failed whole, and why: the array runs degraded.
    failed_chips: Vec<FailedChip>,
    /// "ok", or "degraded" when a chip of an array with parity has failed.
    array_state: &'static str,
}

#[derive(Serialize)]
struct FailedChip {
    chip: u32,
    why: String,
}

pub fn run(args: InfoArgs) -> anyhow::Result<()> {
    let img = &args.image;
    image::require_exists(img)?;
    let _lock = image::lock(img, Access::Read)?;
    let mut dev = image::open_device(img, DeviceOptions::default())?;

    // Wear comes from the device itself (the sidecar), so it is read before the mount.
    let g = dev.geometry();
    let (mut good, mut sum, mut min, mut max) = (0u64, 0u64, u32::MAX, 0u32);
    let (mut factory, mut grown) = (0u64, 0u64);
    for addr in image::block_addrs(g) {
        let b = dev.block_info(addr)?;
        if b.factory_bad || b.grown_bad {
            factory += u64::from(b.factory_bad);
            grown += u64::from(b.grown_bad && !b.factory_bad);
            continue;
        }
        good += 1;
        sum += u64::from(b.erase_count);
        min = min.min(b.erase_count);
        max = max.max(b.erase_count);
    }
    let device = dev.config().clone();
    let mut failed_chips: Vec<FailedChip> = dev
        .failed_chips()
        .into_iter()
        .map(|(chip, why)| FailedChip { chip, why })
        .collect();

    let start = Instant::now();
    let mut fs = match image::mount_read_only_with(img, dev, false, args.nvram.nvram.as_deref()) {
        Ok(fs) => fs,
        // A UBI image of other volumes only (one another tool made): say what it holds.
        Err(e) => return foreign_ubi(img, &device).map_or(Err(e), |()| Ok(())),
    };
    let mount_host_ms = start.elapsed().as_secs_f64() * 1e3;
    let mount_simulated_ms = fs.device().now_ns() as f64 / 1e6;
    // The counts below cover every object: a MiNV mount leaves them in the NVRAM.
    fs.load_everything()?;
    let statfs = fs.statfs();
    let (u, i, p) = fs.uip();
    let c = u64::from(statfs.chunk_bytes);
    let layout = Layout::new(fs.device().geometry())?;
    let (object_numbers_given, object_numbers_max) = fs.object_numbers();
    let (block_granular_files, page_mapped_files) = fs.file_map_shapes();
    // One device lock at a time: a guard lives to the end of its statement.
    let ubi = fs.device().ubi_report();
    let parity = fs.device().parity_report();
    // Chips that answer but are no complete members (a rebuild cut short, a blank or an
    // old chip put in): failed as far as the array is concerned.
    for (chip, why) in fs.device().excluded_chips() {
        let why = format!("it is not a complete member of the array: {why}");
        failed_chips.push(FailedChip { chip, why });
    }
    let info = Info {
        image: img.clone(),
        total_bytes: g.total_bytes(),
        device,
        profile: fs.config().clone(),
        chunk_bytes: fs.chunk_bytes(),
        tags: match layout.tags {
            TagLayout::Large => "large",
            TagLayout::Small => "small",
        },
        max_file_bytes: fs.max_file_size(),
        object_numbers_given,
        object_numbers_max,
        block_granular_files,
        page_mapped_files,
        ibat: fs.ibat_report(),
        anchor_blocks: fs.anchor_blocks(),
        mount_method: fs.mount_method(),
        mount_host_ms,
        mount_simulated_ms,
        used_bytes: statfs.used_chunks * c,
        free_bytes: statfs.free_chunks * c,
        total_fs_bytes: statfs.total_chunks * c,
        statfs,
        good_blocks: good,
        erase_count_min: if good == 0 { 0 } else { min },
        erase_count_mean: if good == 0 {
            0.0
        } else {
            sum as f64 / good as f64
        },
        erase_count_max: max,
        bad_blocks: factory + grown,
        factory_bad_blocks: factory,
        grown_bad_blocks: grown,
        utilization: u,
        invalidity: i,
        uniformity: p,
        nvram: fs.nvram(),
        ubi,
        parity,
        array_state: if failed_chips.is_empty() {
            "ok"
        } else {
            "degraded"
        },
        failed_chips,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print_text(&info);
    }
    Ok(())
}

fn print_text(x: &Info) {
    let s = &x.statfs;
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    println!("image        {}", x.image.display());
    println!("device       {}", image::describe_device(&x.device));
    if let Some(u) = &x.ubi {
        // A chip that failed whole says nothing of its blocks.
        let live = || u.chips.iter().filter(|c| !u.dead_chips.contains(&c.chip));
        let bad: u32 = live().map(|c| c.bad).sum();
        let limit: u32 = live().map(|c| c.bad_limit).sum();
        let spread = live().map(|c| c.ec_max - c.ec_min).max().unwrap_or(0);
        println!(
            "UBI          one per chip: {} LEBs each; {bad} bad PEBs of {limit} reserved; \
             erase-count spread {spread} (wear levelling at {})",
            u.lebs_per_chip, u.wl_threshold
        );
        if let Some(why) = &u.read_only {
            println!("             READ-ONLY: {why}");
        }
        println!(
            "             Linux's format: VID header at byte {}, data at byte {}, image \
             sequence {:#010x}",
            u.vid_hdr_offset, u.data_offset, u.image_seq
        );
        for v in &u.volumes {
            println!(
                "             volume {} {:?}: {}, {} LEBs{}",
                v.id,
                v.name,
                v.kind,
                v.lebs,
                if v.file_system {
                    " (this file system)"
                } else {
                    " (not nandkit's: kept as it is)"
                }
            );
        }
    }
    if let Some(p) = &x.parity {
        println!(
            "parity       across {} chips: a page is {} data pages and their XOR, the parity \
             chip rotating per stripe",
            p.chips,
            p.chips - 1
        );
        if x.failed_chips.is_empty() {
            println!("             every chip present: any one may fail without loss");
        }
        for f in &x.failed_chips {
            println!(
                "             DEGRADED: chip {} has failed ({}); its pages are rebuilt from \
                 parity on every read, and one more failure loses data. Run `nandkit rebuild \
                 {} --chip {}`",
                f.chip,
                f.why,
                x.image.display(),
                f.chip
            );
        }
    }
    println!(
        "             {:?} cells, {} us read / {} us program / {} us erase",
        x.device.cell,
        x.device.timing.read_ns as f64 / 1e3,
        x.device.timing.program_ns as f64 / 1e3,
        x.device.timing.erase_ns as f64 / 1e3
    );
    println!(
        "file system  {} profile, {} B chunks, {} tags, allocation {}, cleaner {:?}, {} reserve blocks",
        x.profile.profile,
        x.chunk_bytes,
        x.tags,
        x.profile.allocator.name(),
        x.profile.cleaner,
        x.profile.reserve_blocks
    );
    let summary = nandkit_fs::config::profile_summary(&x.profile.profile);
    if !summary.is_empty() {
        println!("             {summary}");
    }
    println!(
        "             files up to {}; anchor blocks {} and {}",
        crate::presets_cmd::human_bytes(x.max_file_bytes),
        x.anchor_blocks[0],
        x.anchor_blocks[1]
    );
    // Only where the mount reads every data page's owner (see `--recover-lost-files`).
    let page_scan = x.profile.metadata != nandkit_fs::meta::MetadataKind::Nvram
        && x.profile.records != nandkit_fs::blocks::RecordsKind::Ibat;
    if page_scan {
        println!(
            "             {}",
            if x.profile.tombs_cover_data {
                "files whose headers damage takes: restored to /lost+found (tombstones outlive their data)"
            } else {
                "files whose headers damage takes: noted by fsck, not restored (tombstones do not outlive their data)"
            }
        );
    }
    println!(
        "mounted by   {} ({:.1} ms host, {:.1} ms simulated)",
        match x.mount_method {
            MountMethod::Checkpoint => "checkpoint (last unmount was clean)",
            MountMethod::Scan if x.ibat.is_some() => {
                "iBAT scan (spare areas; the profile keeps no checkpoint)"
            }
            MountMethod::Scan if !x.profile.checkpoint => {
                "full scan (the profile keeps no checkpoint)"
            }
            MountMethod::Scan => "full scan (no checkpoint: last unmount was not clean)",
            MountMethod::Format => "format",
            MountMethod::Nvram => "NVRAM (nothing read on flash)",
        },
        x.mount_host_ms,
        x.mount_simulated_ms
    );
    if let Some(nv) = &x.nvram {
        println!(
            "NVRAM        {} in use of {}; the mount read {} and took {:.1} us",
            human_bytes(nv.bytes_in_use),
            human_bytes(nv.size_bytes),
            human_bytes(nv.stats.bytes_read),
            nv.stats.sim_time_ns as f64 / 1e3
        );
    }
    println!(
        "space        {} used of {} ({:.1}%), {} free; {} objects",
        human_bytes(x.used_bytes),
        human_bytes(x.total_fs_bytes),
        pct(s.used_chunks, s.total_chunks),
        human_bytes(x.free_bytes),
        s.objects
    );
    println!(
        "             object numbers: {} of {} given out (never reused)",
        x.object_numbers_given, x.object_numbers_max
    );
    if let Some(t) = &x.ibat {
        println!(
            "iBAT         {} data blocks in {} files ({} to {} blocks a file), {} log blocks kept exactly; {} in RAM",
            t.data_blocks,
            t.files,
            t.blocks_per_file_min,
            t.blocks_per_file_max,
            t.exact_blocks,
            human_bytes(t.table_bytes)
        );
        println!(
            "             no checkpoint and no allocation table on flash: each mount rebuilds the iBAT from one spare area per data block"
        );
    }
    if x.profile.mapping == nandkit_fs::mapping::MappingKind::BlockMapped {
        println!(
            "             file maps: {} block-granular (an entry an erase block), {} page-mapped (left the shape)",
            x.block_granular_files, x.page_mapped_files
        );
    }
    println!(
        "erase counts min {} / mean {:.2} / max {} over {} good blocks",
        x.erase_count_min, x.erase_count_mean, x.erase_count_max, x.good_blocks
    );
    println!(
        "bad blocks   {} ({} factory, {} grown)",
        x.bad_blocks, x.factory_bad_blocks, x.grown_bad_blocks
    );
    println!(
        "u / i / p    {:.4} / {:.4} / {:.4}  (utilization, invalidity, uniformity)",
        x.utilization, x.invalidity, x.uniformity
    );
}

/// `info` of an image whose UBI holds no nandkit volume: its volumes, attached read-only.
/// `None` if it is not such an image (the mount's own error then stands).
fn foreign_ubi(img: &std::path::Path, device: &nandkit_flash::DeviceConfig) -> Option<()> {
    let mut dev = image::open_device(img, DeviceOptions::default()).ok()?;
    if !nandkit_flash::ubi::probe(&mut dev).ok()? {
        return None;
    }
    let ubi = nandkit_flash::ubi::Ubi::attach(&mut dev, true, Default::default()).ok()?;
    if ubi.fs_volume().is_some() {
        return None;
    }
    println!("image        {}", img.display());
    println!("device       {}", image::describe_device(device));
    println!("UBI          attached read-only: it holds no nandkit file system");
    crate::cmd_ubi::print_volumes(&ubi);
    Some(())
}
