//! Formatting a chip for UBI (ubiformat, then the layout volume as the kernel writes it when
//! a volume is made) and attaching it (ubiattach): the scan that reads both headers of
//! every PEB, rebuilds the map and reads the volume table.

use std::collections::{BTreeMap, BTreeSet};

use super::chip_map::{ChipMap, Peb, PebState};
use super::header::{EcHeader, Layout, Parsed, VidHeader};
use super::vtbl::{self, Volume, LAYOUT_VOLUME_EBS, LAYOUT_VOLUME_ID};
use super::{
    AttachOptions, Ubi, UbiParams, FS_PARITY_VOLUME, FS_VOLUME, FS_VOLUME_ID, RESERVED_PEBS,
};
use crate::command::{Command, Reply};
use crate::device::Flash;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, PageAddr};

/// Header reads per chip submitted at once (so a scan of P chips overlaps).
const SCAN_BATCH: u32 = 64;

/// What the scan found in one PEB.
#[derive(Clone, Copy)]
struct Found {
    ec: Parsed<EcHeader>,
    vid: Parsed<VidHeader>,
}

/// Reads page `page` of every PEB in `pebs[chip]`, all chips overlapping.
fn read_all<F: Flash>(
    dev: &mut F,
    pebs: &[Vec<u32>],
    page: u32,
) -> Result<Vec<Vec<Option<Vec<u8>>>>, FlashError> {
    let mut out: Vec<Vec<Option<Vec<u8>>>> = pebs.iter().map(|v| vec![None; v.len()]).collect();
    let longest = pebs.iter().map(Vec::len).max().unwrap_or(0);
    let mut from = 0;
    while from < longest {
        let to = (from + SCAN_BATCH as usize).min(longest);
        let mut batch = Vec::new();
        let mut slots = Vec::new();
        for (chip, list) in pebs.iter().enumerate() {
            for (i, &block) in list.iter().enumerate().take(to).skip(from) {
                batch.push(Command::Read {
                    addr: PageAddr {
                        chip: chip as u32,
                        block,
                        page,
                    },
                });
                slots.push((chip, i));
            }
        }
        for (c, (chip, i)) in dev.submit(batch).into_iter().zip(slots) {
            match c.result {
                Ok(Reply::Read { data, .. }) => out[chip][i] = Some(data),
                Err(FlashError::PowerLost) => return Err(FlashError::PowerLost),
                // Unreadable (beyond ECC): the header counts as corrupt.
                _ => {}
            }
        }
        from = to;
    }
    Ok(out)
}

/// Good PEBs of every chip, and the chips that failed whole (none of their PEBs listed).
fn good_pebs<F: Flash>(dev: &mut F) -> Result<(Vec<Vec<u32>>, Vec<u32>), FlashError> {
    let g = dev.geometry();
    let mut out = Vec::new();
    let mut dead = Vec::new();
    'chips: for chip in 0..g.chips {
        let mut good = Vec::new();
        for block in 0..g.blocks_per_chip {
            match dev.is_bad(BlockAddr::new(chip, block)) {
                Ok(false) => good.push(block),
                Ok(true) => {}
                Err(FlashError::ChipFailed(_)) => {
                    dead.push(chip);
                    out.push(Vec::new());
                    continue 'chips;
                }
                Err(e) => return Err(e),
            }
        }
        out.push(good);
    }
    Ok((out, dead))
}

/// True if the array carries UBI: one of the first good PEBs of its first chip that has
/// not failed whole and is not blank (chip 0, unless it died or was replaced) has a valid
/// EC header, of Linux's format or of nandkit's old one.
pub fn probe<F: Flash>(dev: &mut F) -> Result<bool, FlashError> {
    let g = dev.geometry();
    let mut data = vec![0; g.page_size_bytes as usize];
    let mut oob = vec![0; g.oob_size_bytes as usize];
    for chip in 0..g.chips {
        let mut tried = 0;
        for block in 0..g.blocks_per_chip {
            let addr = BlockAddr::new(chip, block);
            match dev.is_bad(addr) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(FlashError::ChipFailed(_)) => break,
                Err(e) => return Err(e),
            }
            match dev.read_page(addr.page(0), &mut data, &mut oob) {
                // nandkit's old headers too: the attach then says how to convert them (an
                // image taken for one without UBI would be offered a format).
                Ok(_) if super::legacy::is_legacy_ec(&data) => return Ok(true),
                Ok(_) => match EcHeader::decode(&data) {
                    Parsed::Valid(_) => return Ok(true),
                    // A blank chip (a replacement not yet rebuilt): ask the next one.
                    Parsed::Empty => break,
                    Parsed::Corrupt => {}
                },
                Err(FlashError::PowerLost) => return Err(FlashError::PowerLost),
                Err(FlashError::ChipFailed(_)) => break,
                Err(_) => {}
            }
            tried += 1;
            if tried == 4 {
                return Ok(false);
            }
        }
    }
    Ok(false)
}

/// Writes an EC header on every good PEB of every chip (keeping erase counters an earlier
/// UBI format left), then each chip's layout volume naming the file system's volume, so
/// every LEB of it starts unmapped.
pub(super) fn format<F: Flash>(dev: &mut F, params: UbiParams) -> Result<Ubi, FlashError> {
    let g = dev.geometry();
    let layout = Layout::whole_pages(g.page_size_bytes);
    if g.pages_per_block <= layout.data_page() {
        return Err(FlashError::Ubi(format!(
            "a block of {} pages leaves no room for data after UBI's {} header pages",
            g.pages_per_block,
            layout.data_page()
        )));
    }
    let leb_bytes = (g.pages_per_block - layout.data_page()) * g.page_size_bytes;
    if vtbl::slots(leb_bytes) == 0 {
        return Err(FlashError::Ubi(format!(
            "a LEB of {leb_bytes} bytes cannot hold a volume table record"
        )));
    }
    let lebs = params.lebs(g.blocks_per_chip).ok_or_else(|| {
        FlashError::Ubi(format!(
            "{} blocks per chip leave no LEB after UBI's reserves",
            g.blocks_per_chip
        ))
    })?;
    let bad_limit = params.bad_limit(g.blocks_per_chip);
    let (good, dead) = good_pebs(dev)?;
    if let Some(&chip) = dead.first() {
        return Err(FlashError::ChipFailed(chip));
    }
    let old = read_all(dev, &good, 0)?;
    // A seed-derived tag for this format, so headers of an older one are not mistaken.
    let image_seq = (dev.now_ns() as u32 ^ 0x5542_4921).wrapping_mul(2_654_435_761) | 1;
    let mut pebs: Vec<Vec<Peb>> = (0..g.chips)
        .map(|_| {
            vec![
                Peb {
                    ec: 0,
                    state: PebState::Bad,
                };
                g.blocks_per_chip as usize
            ]
        })
        .collect();
    let mut ubi = Ubi::new(g, layout, image_seq, params, false);
    let name = if params.parity {
        FS_PARITY_VOLUME
    } else {
        FS_VOLUME
    };
    ubi.volumes = vec![Volume::dynamic(FS_VOLUME_ID, name, lebs)];
    ubi.fs_vol = Some(FS_VOLUME_ID);
    ubi.fs_lebs = lebs;
    let mut batch = Vec::new();

    for (chip, list) in good.iter().enumerate() {
        for (i, &block) in list.iter().enumerate() {
            let ec = match old[chip][i].as_deref().map(EcHeader::decode) {
                Some(Parsed::Valid(h)) => h.ec.min(0x7FFF_FFFE) as u32 + 1,
                _ => 1,
            };
            pebs[chip][block as usize].ec = ec;
            batch.push(BlockAddr::new(chip as u32, block));
        }
    }
    ubi.maps = pebs
        .into_iter()
        .enumerate()
        .map(|(chip, v)| ChipMap::new(chip as u32, Some(FS_VOLUME_ID), lebs, v, bad_limit))
        .collect();
    let mut failed = BTreeSet::new();
    for chunk in batch.chunks(SCAN_BATCH as usize * g.chips as usize) {
        // An erase and the EC header after it, per PEB.
        let mut cmds = Vec::with_capacity(2 * chunk.len());
        for &addr in chunk {
            let ec = ubi.maps[addr.chip as usize].pebs[addr.block as usize].ec;
            cmds.push(Command::Erase { addr });
            cmds.push(ubi.ec_command(addr.chip, addr.block, ec, None));
        }
        let addrs = chunk.iter().flat_map(|&a| [a, a]);
        for (c, addr) in dev.submit(cmds).into_iter().zip(addrs) {
            match c.result {
                Ok(_) => {}
                Err(e) if e.is_media_failure() => {
                    failed.insert((addr.chip, addr.block));
                }
                Err(e) => return Err(e),
            }
        }
    }
    for chip in 0..g.chips {
        for &block in &good[chip as usize] {
            let m = &mut ubi.maps[chip as usize];
            if failed.contains(&(chip, block)) {
                dev.mark_bad(BlockAddr::new(chip, block))?;
            } else {
                let ec = m.pebs[block as usize].ec;
                m.put_free(block, ec);
            }
        }
        let bad = ubi.maps[chip as usize].bad();
        if bad > bad_limit {
            return Err(FlashError::Ubi(format!(
                "chip {chip} has {bad} bad blocks, more than UBI's reserve of {bad_limit} \
                 ({} per 1024)",
                params.bad_per_1024
            )));
        }
        for lnum in 0..LAYOUT_VOLUME_EBS {
            write_layout_leb(&mut ubi, dev, chip, lnum)?;
        }
    }
    Ok(ubi)
}

/// Maps LEB `lnum` of `chip`'s layout volume onto a fresh PEB holding the volume table
/// (a PEB that fails is retired and the next one tried, as UBI recovers a failed write).
pub(super) fn write_layout_leb<F: Flash>(
    ubi: &mut Ubi,
    dev: &mut F,
    chip: u32,
    lnum: u32,
) -> Result<(), FlashError> {
    let table = vtbl::table_pages(
        &ubi.volumes,
        ubi.leb_pages() * ubi.chip.page_size_bytes,
        ubi.chip.page_size_bytes as usize,
        ubi.chip.oob_size_bytes as usize,
    );
    loop {
        let (peb, mut cmds) = ubi.map_fresh(chip, LAYOUT_VOLUME_ID, lnum, None)?;
        cmds.extend(ubi.data_programs(chip, peb, table.clone()));
        let failed = dev.submit(cmds).into_iter().find_map(|c| c.result.err());
        match failed {
            None => return Ok(()),
            Some(e) if e.is_media_failure() => {
                ubi.retire(dev, chip, peb);
                if ubi.worn_out.is_some() {
                    return Err(e);
                }
            }
            Some(e) => return Err(e),
        }
    }
}

/// The scan: both headers of every good PEB, then the maps and the volume table.
pub(super) fn attach<F: Flash>(
    dev: &mut F,
    read_only: bool,
    options: AttachOptions,
) -> Result<Ubi, FlashError> {
    let g = dev.geometry();
    let (good, dead) = good_pebs(dev)?;
    let ecs = read_all(dev, &good, 0)?;
    let decoded: Vec<Vec<Parsed<EcHeader>>> = ecs
        .iter()
        .map(|chip| {
            chip.iter()
                .map(|p| p.as_deref().map_or(Parsed::Corrupt, EcHeader::decode))
                .collect()
        })
        .collect();
    // The format's layout and image sequence: from the first valid EC header (every
    // header of one format carries the same).
    let Some(first) = decoded.iter().flatten().find_map(|f| match f {
        Parsed::Valid(h) => Some(*h),
        _ => None,
    }) else {
        let legacy = ecs
            .iter()
            .flatten()
            .flatten()
            .any(|p| super::legacy::is_legacy_ec(p));
        return Err(FlashError::Ubi(if legacy {
            "these chips carry nandkit's own UBI headers of before Linux's format \
             (nandkit up to 2026-12-07), which this nandkit no longer reads; convert the \
             image with `nandkit ubi convert IMAGE`"
                .into()
        } else {
            "no UBI erase-counter header on the chips".into()
        }));
    };
    let layout =
        Layout::from_ec(&first, g.page_size_bytes, g.pages_per_block).ok_or_else(|| {
            FlashError::Ubi(format!(
                "the EC headers put the VID header at byte {} and the data at byte {}, which a \
             PEB of {} pages of {} bytes cannot hold (was the image made for another page or \
             block size?)",
                first.vid_hdr_offset, first.data_offset, g.pages_per_block, g.page_size_bytes
            ))
        })?;
    // In a shared layout the VID headers are in the pages already read.
    let separate;
    let vid_pages = if layout.shared() {
        &ecs
    } else {
        separate = read_all(dev, &good, layout.vid_page())?;
        &separate
    };
    let found: Vec<Vec<Found>> = decoded
        .iter()
        .zip(vid_pages)
        .map(|(e, v)| {
            e.iter()
                .zip(v)
                .map(|(&ec, v)| Found {
                    ec,
                    vid: v
                        .as_deref()
                        .map_or(Parsed::Corrupt, |p| VidHeader::decode(layout.vid_bytes(p))),
                })
                .collect()
        })
        .collect();
    // Only parity makes up for a chip that failed whole; whether the array has it, the
    // volume table says (below). Until then the params are provisional.
    let params = UbiParams {
        bad_per_1024: 0,
        wl_threshold: options.wl_threshold.max(1),
        parity: false,
    };
    let mut ubi = Ubi::new(g, layout, first.image_seq, params, read_only);
    for &chip in &dead {
        ubi.chip_failed(chip);
    }
    let mut holders = Vec::with_capacity(good.len());
    for (chip, list) in good.iter().enumerate() {
        holders.push(scan_chip(dev, &ubi, chip as u32, list, &found[chip])?);
    }
    // The volume table: each chip's own, else the first valid one of another chip.
    // Both copies of every chip's table, read in one batch (the chips overlap).
    let copies = read_tables(dev, &ubi, &holders)?;
    let tables: Vec<Result<Vec<Volume>, String>> = copies
        .iter()
        .map(|[a, b]| match (a, b) {
            (Ok(v), _) | (_, Ok(v)) => Ok(v.clone()),
            (Err(x), Err(y)) => Err(format!("layout LEB 0: {x}, layout LEB 1: {y}")),
        })
        .collect();
    let volumes = tables
        .iter()
        .find_map(|t| t.as_ref().ok())
        .cloned()
        .ok_or_else(|| {
            let why = tables
                .iter()
                .enumerate()
                .filter_map(|(c, t)| t.as_ref().err().map(|e| format!("chip {c}: {e}")))
                .collect::<Vec<_>>()
                .join("; ");
            FlashError::Ubi(format!("no valid UBI volume table ({why})"))
        })?;
    let fs = match options.volume {
        Some(id) => {
            let v = volumes
                .iter()
                .find(|v| v.id == id)
                .ok_or_else(|| FlashError::Ubi(format!("no UBI volume {id} on this image")))?;
            if v.vol_type != super::header::VOL_DYNAMIC {
                return Err(FlashError::Ubi(format!(
                    "volume {id} {:?} is static: a file system needs a dynamic volume",
                    v.name
                )));
            }
            ubi.chosen_volume = Some(id);
            Some(v.clone())
        }
        None => volumes
            .iter()
            .find(|v| v.name == FS_VOLUME || v.name == FS_PARITY_VOLUME)
            .cloned(),
    };
    ubi.params.parity = fs.as_ref().is_some_and(|v| v.name == FS_PARITY_VOLUME);
    if let (Some(&chip), false) = (dead.first(), ubi.params.parity) {
        return Err(FlashError::ChipFailed(chip));
    }
    ubi.fs_vol = fs.as_ref().map(|v| v.id);
    ubi.fs_lebs = fs.as_ref().map_or(0, |v| v.reserved_pebs);
    if ubi.fs_lebs >= g.blocks_per_chip {
        return Err(FlashError::Ubi(format!(
            "the volume table gives the file system {} LEBs on a chip of {} blocks",
            ubi.fs_lebs, g.blocks_per_chip
        )));
    }
    // The reserve is what the format kept out of every volume.
    let given: u32 = volumes.iter().map(|v| v.reserved_pebs).sum();
    let bad_limit = g.blocks_per_chip.saturating_sub(given + RESERVED_PEBS);
    ubi.params.bad_per_1024 =
        (u64::from(bad_limit) * 1024 / u64::from(g.blocks_per_chip.max(1))) as u32;
    ubi.volumes = volumes;
    let mut sqnums = Vec::with_capacity(holders.len());
    for (chip, h) in holders.into_iter().enumerate() {
        sqnums.push(h.sqnum);
        let mut pebs = h.pebs;
        for ((vol, lnum), (peb, _)) in h.lebs {
            let known = if vol == LAYOUT_VOLUME_ID {
                lnum < LAYOUT_VOLUME_EBS
            } else {
                ubi.volumes
                    .iter()
                    .any(|v| v.id == vol && lnum < v.reserved_pebs)
            };
            // A LEB of no volume in the table (a volume removed while its PEBs were being
            // erased, or past the volume's size) is garbage, as Linux treats it.
            pebs[peb as usize].state = if known {
                PebState::Used {
                    vol: super::chip_map::vol_key(vol),
                    leb: lnum,
                }
            } else {
                PebState::Dirty
            };
        }
        let mut map = ChipMap::new(chip as u32, ubi.fs_vol, ubi.fs_lebs, pebs, bad_limit);
        map.sqnum = sqnums[chip] + 1;
        ubi.maps.push(map);
    }
    // A chip past its spares still attaches, read-only, so its data can be copied off.
    for chip in 0..ubi.maps.len() as u32 {
        ubi.check_spares(chip);
    }
    // A chip whose table copy is missing or damaged (a cut while it was written, a
    // replaced chip) gets it again, as Linux rewrites a bad copy at attach.
    if !read_only && ubi.worn_out.is_none() {
        for (chip, pair) in copies.iter().enumerate() {
            let chip = chip as u32;
            if ubi.is_dead(chip) {
                continue;
            }
            for (lnum, copy) in (0..).zip(pair) {
                // A copy whose table differs from the one in use is rewritten too.
                if copy.as_ref().ok() == Some(&ubi.volumes) {
                    continue;
                }
                rewrite_layout_leb(&mut ubi, dev, chip, lnum)?;
            }
        }
    }
    Ok(ubi)
}

/// Maps layout LEB `lnum` of `chip` afresh with the volume table in use (the old PEB, if
/// any, waits dirty for its erase).
fn rewrite_layout_leb<F: Flash>(
    ubi: &mut Ubi,
    dev: &mut F,
    chip: u32,
    lnum: u32,
) -> Result<(), FlashError> {
    if let Some(peb) = ubi.maps[chip as usize].unmap(LAYOUT_VOLUME_ID, lnum) {
        ubi.maps[chip as usize].put_dirty(peb);
    }
    write_layout_leb(ubi, dev, chip, lnum)
}

/// Writes again each copy of `chip`'s volume table that is missing or damaged.
pub(super) fn repair_layout<F: Flash>(
    ubi: &mut Ubi,
    dev: &mut F,
    chip: u32,
) -> Result<(), FlashError> {
    for lnum in 0..LAYOUT_VOLUME_EBS {
        if !lnum_table_ok(dev, ubi, chip, lnum)? {
            rewrite_layout_leb(ubi, dev, chip, lnum)?;
        }
    }
    Ok(())
}

/// What the scan of one chip found: every PEB's erase count (with a state of Free, Dirty or
/// Bad; used PEBs are settled once the volume table is known), the PEB and header holding
/// each (volume, LEB), and the highest sequence number.
struct ChipScan {
    pebs: Vec<Peb>,
    lebs: BTreeMap<(u32, u32), (u32, VidHeader)>,
    sqnum: u64,
}

/// One chip's PEBs from what its scan found: of two PEBs claiming one LEB the newer wins,
/// unless it is a copy whose data fails its CRC.
fn scan_chip<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    chip: u32,
    good: &[u32],
    found: &[Found],
) -> Result<ChipScan, FlashError> {
    let g = ubi.chip;
    let ours = |seq: u32| seq == ubi.image_seq || ubi.image_seq == 0;
    let known: Vec<u64> = found
        .iter()
        .filter_map(|f| match f.ec {
            Parsed::Valid(h) if ours(h.image_seq) => Some(h.ec),
            _ => None,
        })
        .collect();
    // UBI gives a PEB whose counter is lost the mean of the others.
    let mean = (known.iter().sum::<u64>() / known.len().max(1) as u64) as u32;
    let mut pebs = vec![
        Peb {
            ec: 0,
            state: PebState::Bad,
        };
        g.blocks_per_chip as usize
    ];
    let mut lebs: BTreeMap<(u32, u32), (u32, VidHeader)> = BTreeMap::new();
    let mut sqnum = 0;
    let same_layout = |h: &EcHeader| {
        h.vid_hdr_offset == ubi.layout.vid_hdr_offset && h.data_offset == ubi.layout.data_offset
    };
    for (&block, f) in good.iter().zip(found) {
        let (ec, ec_ok) = match f.ec {
            Parsed::Valid(h) if ours(h.image_seq) && same_layout(&h) => (h.ec as u32, true),
            _ => (mean, false),
        };
        pebs[block as usize] = Peb {
            ec,
            state: PebState::Dirty,
        };
        // A damaged EC header costs the counter, not the data (as Linux: the PEB gets the
        // mean count); a PEB of another format, or with no EC header at all, is garbage.
        let vid_counts = match f.ec {
            Parsed::Valid(_) => ec_ok,
            Parsed::Corrupt => true,
            Parsed::Empty => false,
        };
        let vid = match f.vid {
            Parsed::Valid(v)
                if vid_counts && v.data_size <= ubi.leb_pages() * g.page_size_bytes =>
            {
                v
            }
            Parsed::Empty if ec_ok => {
                pebs[block as usize].state = PebState::Free;
                continue;
            }
            _ => continue,
        };
        sqnum = sqnum.max(vid.sqnum);
        let key = (vid.vol_id, vid.lnum);
        let winner = match lebs.get(&key).copied() {
            None => (block, vid),
            // Linux refuses such a device: it cannot tell which copy is the newer.
            Some((other, old)) if old.sqnum == vid.sqnum => {
                return Err(FlashError::Ubi(format!(
                    "chip {chip}: PEBs {other} and {block} both hold LEB {} of volume {} with \
                     sequence number {} (an image written twice, or corrupt)",
                    vid.lnum, vid.vol_id, vid.sqnum
                )));
            }
            Some((other, old)) => {
                let (newer, older) = if vid.sqnum > old.sqnum {
                    ((block, vid), (other, old))
                } else {
                    ((other, old), (block, vid))
                };
                let keep = if newer.1.copy && !copy_intact(dev, ubi, chip, newer.0, &newer.1)? {
                    older
                } else {
                    newer
                };
                let lose = if keep.0 == newer.0 { older } else { newer };
                pebs[lose.0 as usize].state = PebState::Dirty;
                keep
            }
        };
        lebs.insert(key, winner);
    }
    Ok(ChipScan { pebs, lebs, sqnum })
}

/// A chip's two copies of the volume table, each its volumes or why it is not one.
type TableCopies = [Result<Vec<Volume>, String>; 2];

/// Both copies of every chip's volume table (`Err` says why a copy is not one), read in
/// one batch.
fn read_tables<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    scans: &[ChipScan],
) -> Result<Vec<TableCopies>, FlashError> {
    let page = ubi.chip.page_size_bytes;
    let leb_bytes = ubi.leb_pages() * page;
    let slots = vtbl::slots(leb_bytes);
    let pages = (slots * vtbl::RECORD_BYTES as u32).div_ceil(page);
    let mut reads = Vec::new();
    let mut wanted = Vec::new();
    for (chip, scan) in scans.iter().enumerate() {
        for lnum in 0..LAYOUT_VOLUME_EBS {
            if let Some(&(peb, _)) = scan.lebs.get(&(LAYOUT_VOLUME_ID, lnum)) {
                for i in 0..pages {
                    reads.push(Command::Read {
                        addr: PageAddr {
                            chip: chip as u32,
                            block: peb,
                            page: ubi.layout.data_page() + i,
                        },
                    });
                }
                wanted.push((chip, lnum, peb));
            }
        }
    }
    let mut done = dev.submit(reads).into_iter();
    let mut out: Vec<TableCopies> = scans
        .iter()
        .map(|_| {
            [
                Err("layout LEB 0 is not mapped".to_string()),
                Err("layout LEB 1 is not mapped".to_string()),
            ]
        })
        .collect();
    for (chip, lnum, peb) in wanted {
        let mut bytes = Vec::with_capacity((pages * page) as usize);
        let mut readable = true;
        for c in done.by_ref().take(pages as usize) {
            match c.result {
                Ok(Reply::Read { data, .. }) => bytes.extend(data),
                Err(FlashError::PowerLost) => return Err(FlashError::PowerLost),
                _ => readable = false,
            }
        }
        out[chip][lnum as usize] = if readable {
            vtbl::decode(&bytes, slots, leb_bytes).map_err(|e| format!("PEB {peb}: {e}"))
        } else {
            Err(format!("PEB {peb} cannot be read"))
        };
    }
    Ok(out)
}

/// The table in a layout PEB.
fn table_in<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    chip: u32,
    peb: u32,
) -> Result<Result<Vec<Volume>, String>, FlashError> {
    let page = ubi.chip.page_size_bytes;
    let leb_bytes = ubi.leb_pages() * page;
    let slots = vtbl::slots(leb_bytes);
    let pages = (slots * vtbl::RECORD_BYTES as u32).div_ceil(page);
    Ok(match ubi.read_data_pages(dev, chip, peb, pages)? {
        None => Err("unreadable".to_string()),
        Some(p) => {
            let bytes: Vec<u8> = p.into_iter().flat_map(|(d, _)| d).collect();
            vtbl::decode(&bytes, slots, leb_bytes)
        }
    })
}

/// Whether layout LEB `lnum` of `chip` holds an intact table.
pub(super) fn lnum_table_ok<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    chip: u32,
    lnum: u32,
) -> Result<bool, FlashError> {
    let Some(peb) = ubi.maps[chip as usize].peb_of_vol(LAYOUT_VOLUME_ID, lnum) else {
        return Ok(false);
    };
    Ok(table_in(dev, ubi, chip, peb)?.is_ok())
}

/// A copy's data read back whole (its VID header's CRC over `data_size` bytes holds).
fn copy_intact<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    chip: u32,
    peb: u32,
    vid: &VidHeader,
) -> Result<bool, FlashError> {
    let page = ubi.chip.page_size_bytes;
    let pages = vid.data_size.div_ceil(page);
    if pages > ubi.leb_pages() {
        return Ok(false);
    }
    Ok(ubi
        .read_data_pages(dev, chip, peb, pages)?
        .is_some_and(|p| {
            let data: Vec<u8> = p.into_iter().flat_map(|(d, _)| d).collect();
            super::header::linux_crc32(&data[..vid.data_size as usize]) == vid.data_crc
        }))
}
