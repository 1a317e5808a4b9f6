//! UBI's static wear levelling: when a worn free PEB of a chip (the most worn within twice
//! the threshold of the least worn free one) has been erased `wl_threshold` times more than
//! the least-worn used one, the LEB in that used PEB has sat
//! there long (cold data keeps a PEB young while the others age), so it is copied onto the
//! worn PEB and its young PEB goes back to the pool for the hot data. Dynamic wear levelling
//! is the allocator's part ([`super::chip_map::ChipMap::take_for_new_data`]): as UBI's
//! `find_mean_wl_entry`, a new mapping takes a PEB of middling wear, not the least worn,
//! which would make fresh (likely hot) data the least-worn used LEB and have it moved
//! onto a worn PEB at once, only to be rewritten there.
//!
//! A PEB that was just given new data is young for `PROTECTION_ERASES` erases of its chip
//! (UBI's protection queue) and is not a source: fresh data is likely hot.
//!
//! A move runs like UBI's background thread: its reads, programs and erase keep the chip
//! busy but not the caller, whose clock is put back when the move is done. A move is crash
//! safe: the copy's VID header (newer sequence number, copy flag, data CRC) is written
//! before its pages and the source is erased only after the last of them, so a cut leaves
//! either the source alone, or both (attach keeps the copy only if its CRC holds).

use super::header::HEADER_PAGES;
use super::Ubi;
use crate::command::Command;
use crate::device::Flash;
use crate::geometry::{BlockAddr, PageAddr};

/// Moves, on every chip, as long as its spread calls for them (as UBI queues a move each
/// time a worn PEB returns to the pool), at most `MAX_MOVES` per chip per call.
pub(super) fn run<F: Flash>(ubi: &mut Ubi, dev: &mut F) {
    if ubi.read_only || ubi.worn_out.is_some() {
        return;
    }
    for chip in 0..ubi.maps.len() as u32 {
        if ubi.is_dead(chip) {
            continue;
        }
        for _ in 0..MAX_MOVES {
            if !one(ubi, dev, chip) {
                break;
            }
        }
    }
}

/// Moves a call makes on one chip at most (a batch returns a few PEBs at most).
const MAX_MOVES: usize = 8;

/// One move on `chip` if its spread calls for one: whether one was made.
fn one<F: Flash>(ubi: &mut Ubi, dev: &mut F, chip: u32) -> bool {
    let threshold = ubi.params.wl_threshold;
    {
        let m = &ubi.maps[chip as usize];
        let Some((free_ec, _)) = m.wl_target(threshold) else {
            return false;
        };
        // Only PEBs young enough to be worth a move; the rest of the pool is not looked at.
        let source = m
            .used
            .iter()
            .take_while(|(ec, _)| ec.saturating_add(threshold) <= free_ec)
            .find(|(_, peb)| !ubi.wl_skip.contains(&(chip, *peb)) && !m.is_protected(*peb))
            .copied();
        let Some((used_ec, src)) = source else {
            return false;
        };
        if free_ec < used_ec.saturating_add(threshold) {
            return false;
        }
        let clock = dev.now_ns();
        let moved = move_leb(ubi, dev, chip, src);
        if !moved {
            ubi.wl_skip.insert((chip, src));
        }
        dev.set_clock_ns(clock);
        moved
    }
}

/// Copies the LEB in `src` onto the most-worn free PEB and recycles `src`. False if the
/// move could not be made (a read or program failed); the source then stays as it was.
fn move_leb<F: Flash>(ubi: &mut Ubi, dev: &mut F, chip: u32, src: u32) -> bool {
    let g = ubi.chip;
    let super::chip_map::PebState::Used { leb } = ubi.maps[chip as usize].pebs[src as usize].state
    else {
        return false;
    };
    let Ok(Some(mut pages)) = ubi.read_data_pages(dev, chip, src, g.pages_per_block - HEADER_PAGES)
    else {
        return false;
    };
    // Pages are programmed in order: the LEB's data ends after its last written page.
    let erased = |(d, o): &(Vec<u8>, Vec<u8>)| d.iter().chain(o).all(|&b| b == 0xFF);
    let n = pages.iter().rposition(|p| !erased(p)).map_or(0, |i| i + 1);
    pages.truncate(n);
    let crc = ubi.pages_crc(&pages);

    let threshold = ubi.params.wl_threshold;
    let Some((_, dst)) = ubi.maps[chip as usize].wl_target(threshold) else {
        return false;
    };
    let (ec, dirty) = ubi.maps[chip as usize].take(dst);
    let mut cmds = Vec::with_capacity(n + 3);
    let ec = ubi.reset_if_dirty(chip, dst, ec, dirty, &mut cmds);
    cmds.push(ubi.vid_command(chip, dst, leb, Some((n as u32, crc))));
    for (i, (data, oob)) in pages.into_iter().enumerate() {
        cmds.push(Command::Program {
            addr: PageAddr {
                chip,
                block: dst,
                page: HEADER_PAGES + i as u32,
            },
            data,
            oob,
        });
    }
    for c in dev.submit(cmds) {
        if let Err(e) = c.result {
            if e.is_media_failure() {
                ubi.retire(dev, chip, dst);
            } else {
                ubi.maps[chip as usize].pebs[dst as usize].ec = ec;
                ubi.maps[chip as usize].put_dirty(dst);
            }
            return false;
        }
    }
    // The copy is whole: switch the LEB to it, then recycle the source.
    let m = &mut ubi.maps[chip as usize];
    m.unmap(leb);
    m.map(leb, dst, ec);
    let src_ec = m.pebs[src as usize].ec + 1;
    let recycle = vec![
        Command::Erase {
            addr: BlockAddr::new(chip, src),
        },
        ubi.ec_command(chip, src, src_ec),
    ];
    let failed = dev.submit(recycle).into_iter().find_map(|c| c.result.err());
    match failed {
        None => ubi.maps[chip as usize].put_free(src, src_ec),
        Some(e) if e.is_media_failure() => ubi.retire(dev, chip, src),
        Some(_) => ubi.maps[chip as usize].put_dirty(src),
    }
    ubi.counters.wl_moves += 1;
    ubi.counters.wl_pages_copied += n as u64;
    true
}
