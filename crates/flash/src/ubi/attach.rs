//! Formatting a chip for UBI (ubiformat) and attaching it (ubiattach): the scan that reads
//! both header pages of every PEB and rebuilds the map.

use std::collections::BTreeSet;

use super::chip_map::{ChipMap, Peb, PebState};
use super::header::{EcHeader, Parsed, VidHeader, HEADER_PAGES};
use super::{Ubi, UbiParams};
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
/// EC header.
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
/// UBI format left), so every LEB starts unmapped.
pub(super) fn format<F: Flash>(dev: &mut F, params: UbiParams) -> Result<Ubi, FlashError> {
    let g = dev.geometry();
    if g.pages_per_block <= HEADER_PAGES {
        return Err(FlashError::Ubi(format!(
            "a block of {} pages leaves no room for data after UBI's {HEADER_PAGES} header pages",
            g.pages_per_block
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
    let mut ubi = Ubi::new(g, image_seq, params, false);
    let mut batch = Vec::new();

    for (chip, list) in good.iter().enumerate() {
        for (i, &block) in list.iter().enumerate() {
            let ec = match old[chip][i].as_deref().map(EcHeader::decode) {
                Some(Parsed::Valid(h)) => h.ec.min(u64::from(u32::MAX - 1)) as u32 + 1,
                _ => 1,
            };
            pebs[chip][block as usize].ec = ec;
            batch.push(BlockAddr::new(chip as u32, block));
        }
    }
    // The EC headers need the maps' shape; fill the maps first, then program.
    ubi.maps = pebs
        .into_iter()
        .enumerate()
        .map(|(chip, v)| ChipMap::new(chip as u32, lebs, v, bad_limit))
        .collect();
    let mut failed = BTreeSet::new();
    for chunk in batch.chunks(SCAN_BATCH as usize * g.chips as usize) {
        // An erase and the EC header after it, per PEB.
        let mut cmds = Vec::with_capacity(2 * chunk.len());
        for &addr in chunk {
            let ec = ubi.maps[addr.chip as usize].pebs[addr.block as usize].ec;
            cmds.push(Command::Erase { addr });
            cmds.push(ubi.ec_command(addr.chip, addr.block, ec));
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
    }
    Ok(ubi)
}

/// The scan: both headers of every good PEB, then the map.
pub(super) fn attach<F: Flash>(dev: &mut F, read_only: bool) -> Result<Ubi, FlashError> {
    let g = dev.geometry();
    let (good, dead) = good_pebs(dev)?;
    let ecs = read_all(dev, &good, 0)?;
    let vids = read_all(dev, &good, 1)?;
    let found: Vec<Vec<Found>> = ecs
        .iter()
        .zip(&vids)
        .map(|(e, v)| {
            e.iter()
                .zip(v)
                .map(|(e, v)| Found {
                    ec: e.as_deref().map_or(Parsed::Corrupt, EcHeader::decode),
                    vid: v.as_deref().map_or(Parsed::Corrupt, VidHeader::decode),
                })
                .collect()
        })
        .collect();
    // The volume's shape: from the first valid EC header of chip 0 (every header of the
    // format carries it).
    let shape = found
        .iter()
        .flatten()
        .find_map(|f| match f.ec {
            Parsed::Valid(h) => Some(h),
            _ => None,
        })
        .ok_or_else(|| FlashError::Ubi("no UBI erase-counter header on the chips".into()))?;
    if shape.lebs == 0 || shape.lebs >= g.blocks_per_chip {
        return Err(FlashError::Ubi(format!(
            "the EC headers give {} LEBs on a chip of {} blocks",
            shape.lebs, g.blocks_per_chip
        )));
    }
    let params = UbiParams {
        // Only the limit is stored; the per-1024 rate is what it came from.
        bad_per_1024: (u64::from(shape.bad_limit) * 1024 / u64::from(g.blocks_per_chip)) as u32,
        wl_threshold: shape.wl_threshold.max(1),
        parity: shape.parity,
    };
    // Only parity makes up for a chip that failed whole.
    if let (Some(&chip), false) = (dead.first(), shape.parity) {
        return Err(FlashError::ChipFailed(chip));
    }
    let mut ubi = Ubi::new(g, shape.image_seq, params, read_only);
    for &chip in &dead {
        ubi.chip_failed(chip);
    }
    for (chip, list) in good.iter().enumerate() {
        let map = attach_chip(dev, &ubi, chip as u32, list, &found[chip], &shape)?;
        ubi.maps.push(map);
    }
    // A chip past its spares still attaches, read-only, so its data can be copied off.
    for chip in 0..ubi.maps.len() as u32 {
        ubi.check_spares(chip);
    }
    Ok(ubi)
}

/// One chip's map from what its scan found.
fn attach_chip<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    chip: u32,
    good: &[u32],
    found: &[Found],
    shape: &EcHeader,
) -> Result<ChipMap, FlashError> {
    let g = ubi.chip;
    let ours = |seq: u32| seq == shape.image_seq;
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
    // Per LEB: the PEB holding it and its VID header.
    let mut holder: Vec<Option<(u32, VidHeader)>> = vec![None; shape.lebs as usize];
    let mut sqnum = 0;
    for (&block, f) in good.iter().zip(found) {
        let (ec, ec_ok) = match f.ec {
            Parsed::Valid(h) if ours(h.image_seq) => (h.ec.min(u64::from(u32::MAX)) as u32, true),
            _ => (mean, false),
        };
        pebs[block as usize] = Peb {
            ec,
            state: PebState::Dirty,
        };
        let vid = match f.vid {
            Parsed::Valid(v) if ours(v.image_seq) && v.leb < shape.lebs => v,
            Parsed::Empty if ec_ok => {
                pebs[block as usize].state = PebState::Free;
                continue;
            }
            _ => continue,
        };
        sqnum = sqnum.max(vid.sqnum);
        let leb = vid.leb as usize;
        let winner = match holder[leb] {
            None => Some((block, vid)),
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
                Some(keep)
            }
        };
        holder[leb] = winner;
    }
    for (leb, h) in holder.iter().enumerate() {
        if let Some((peb, _)) = h {
            pebs[*peb as usize].state = PebState::Used { leb: leb as u32 };
        }
    }
    let mut map = ChipMap::new(chip, shape.lebs, pebs, shape.bad_limit);
    map.sqnum = sqnum + 1;
    Ok(map)
}

/// A copy's pages read back whole (its VID header's CRC over them holds).
fn copy_intact<F: Flash>(
    dev: &mut F,
    ubi: &Ubi,
    chip: u32,
    peb: u32,
    vid: &VidHeader,
) -> Result<bool, FlashError> {
    let g = ubi.chip;
    if vid.data_pages > g.pages_per_block - HEADER_PAGES {
        return Ok(false);
    }
    Ok(ubi
        .read_data_pages(dev, chip, peb, vid.data_pages)?
        .is_some_and(|pages| ubi.pages_crc(&pages) == vid.data_crc))
}
