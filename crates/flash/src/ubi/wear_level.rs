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

use super::header::VOL_STATIC;
use super::Ubi;
use crate::command::Command;
use crate::device::Flash;
use crate::geometry::BlockAddr;

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
    let super::chip_map::PebState::Used { vol, leb } =
        ubi.maps[chip as usize].pebs[src as usize].state
    else {
        return false;
    };
    let vol = super::chip_map::vol_id(vol);
    // A static volume's LEB carries its data size and CRC in every header, which a copy
    // would have to keep: nandkit never writes static volumes, so it leaves them in place.
    if ubi
        .volumes
        .iter()
        .any(|v| v.id == vol && v.vol_type == VOL_STATIC)
    {
        return false;
    }
    let data_page = ubi.layout.data_page();
    let Ok(Some(mut pages)) = ubi.read_data_pages(dev, chip, src, g.pages_per_block - data_page)
    else {
        return false;
    };
    // Pages are programmed in order: the LEB's data ends after its last written page.
    let erased = |(d, o): &(Vec<u8>, Vec<u8>)| d.iter().chain(o).all(|&b| b == 0xFF);
    let n = pages.iter().rposition(|p| !erased(p)).map_or(0, |i| i + 1);
    pages.truncate(n);
    let copy = Ubi::data_crc(&pages);

    let threshold = ubi.params.wl_threshold;
    let Some((_, dst)) = ubi.maps[chip as usize].wl_target(threshold) else {
        return false;
    };
    let (ec, dirty) = ubi.maps[chip as usize].take(dst);
    let mut cmds = Vec::with_capacity(n + 3);
    let vid = ubi.vid_header(chip, vol, leb, Some(copy));
    let ec = ubi.prepare(chip, dst, ec, dirty, &vid, &mut cmds);
    cmds.extend(ubi.data_programs(chip, dst, pages));
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
    m.unmap(vol, leb);
    m.map(vol, leb, dst, ec);
    let src_ec = m.pebs[src as usize].ec + 1;
    let recycle = vec![
        Command::Erase {
            addr: BlockAddr::new(chip, src),
        },
        ubi.ec_command(chip, src, src_ec, None),
    ];
    let failed = dev.submit(recycle).into_iter().find_map(|c| c.result.err());
    match failed {
        None => ubi.maps[chip as usize].put_free(src, src_ec),
        Some(e) if e.is_media_failure() => ubi.retire(dev, chip, src),
        Some(_) => ubi.maps[chip as usize].put_dirty(src),
    }
    ubi.counters.wl_moves += 1;
    if Some(vol) != ubi.fs_vol {
        ubi.counters.wl_moves_other_volumes += 1;
    }
    ubi.counters.wl_pages_copied += n as u64;
    true
}

#[cfg(test)]
mod tests {
    use super::super::chip_map::{PebState, PROTECTION_ERASES};
    use super::super::header::{EcHeader, Parsed};
    use super::super::UbiParams;
    use super::*;
    use crate::device::FlashDevice;
    use crate::geometry::BlockAddr;
    use crate::geometry::PageAddr;
    use proptest::prelude::*;

    /// A fresh RAM device of `chips` "tiny" chips (64 PEBs of 64 pages), no bad blocks, no
    /// bit errors, formatted with UBI at `threshold`.
    fn fresh(chips: u32, threshold: u32) -> (FlashDevice, Ubi) {
        let mut c = crate::preset("tiny").unwrap().with_chips(chips).unwrap();
        c.ecc.rber_fresh = 0.0;
        c.ecc.rber_at_endurance = 0.0;
        c.wear.factory_bad_fraction = 0.0;
        let mut dev = FlashDevice::ram(c).unwrap();
        let params = UbiParams {
            wl_threshold: threshold,
            ..UbiParams::default()
        };
        let ubi = Ubi::format(&mut dev, params).unwrap();
        (dev, ubi)
    }

    /// Writes `pages` pages of `leb` (unmapped), tagged `tag`.
    fn write(ubi: &mut Ubi, dev: &mut FlashDevice, leb: u32, pages: u32, tag: u8) {
        let g = ubi.geometry();
        let cmds = (0..pages)
            .map(|page| Command::Program {
                addr: PageAddr {
                    chip: 0,
                    block: leb,
                    page,
                },
                data: vec![tag; g.page_size_bytes as usize],
                oob: vec![0xFF; g.oob_size_bytes as usize],
            })
            .collect();
        for c in ubi.submit(dev, cmds) {
            c.result.unwrap();
        }
    }

    /// Unmaps `leb` (its PEBs erased in the background).
    fn unmap(ubi: &mut Ubi, dev: &mut FlashDevice, leb: u32) {
        for c in ubi.submit(
            dev,
            vec![Command::Erase {
                addr: BlockAddr::new(0, leb),
            }],
        ) {
            c.result.unwrap();
        }
    }

    /// The erase count in `peb`'s EC header on flash.
    fn header_ec(dev: &mut FlashDevice, chip: u32, peb: u32) -> u64 {
        let raw = dev.raw_page(PageAddr::new(chip, peb, 0)).unwrap();
        let page = dev.geometry().page_size_bytes as usize;
        match EcHeader::decode(&raw[..page]) {
            Parsed::Valid(h) => h.ec,
            other => panic!("PEB {peb} of chip {chip}: EC header {other:?}"),
        }
    }

    /// Every PEB: the erase count UBI keeps in RAM, the one in its EC header and the
    /// erases the device counted are one number.
    fn counters_agree(ubi: &Ubi, dev: &mut FlashDevice) -> Result<(), String> {
        for m in &ubi.maps {
            for (peb, p) in m.pebs.iter().enumerate() {
                let peb = peb as u32;
                let device = dev.block_info(BlockAddr::new(m.chip, peb)).unwrap();
                let header = header_ec(dev, m.chip, peb);
                if (u64::from(p.ec), header)
                    != (u64::from(device.erase_count), u64::from(device.erase_count))
                {
                    return Err(format!(
                        "chip {} PEB {peb} ({:?}): RAM {}, header {header}, device {}",
                        m.chip, p.state, p.ec, device.erase_count
                    ));
                }
            }
        }
        Ok(())
    }

    /// Ends the protection of every PEB but the layout volume's (whose two PEBs, as
    /// young as the data's, would otherwise be the sources these tests pick).
    fn unprotect_data(ubi: &mut Ubi) {
        let m = &mut ubi.maps[0];
        let layout: Vec<u32> = (0..2)
            .filter_map(|l| m.peb_of_vol(crate::ubi::vtbl::LAYOUT_VOLUME_ID, l))
            .collect();
        m.protected.retain(|peb, _| layout.contains(peb));
    }

    /// Moves a free PEB's erase count in RAM only (a choice test: the headers are not
    /// looked at).
    fn set_free_ec(ubi: &mut Ubi, peb: u32, ec: u32) {
        let m = &mut ubi.maps[0];
        let old = m.pebs[peb as usize].ec;
        assert!(m.free.remove(&(old, peb)), "PEB {peb} is free");
        m.pebs[peb as usize].ec = ec;
        m.free.insert((ec, peb));
    }

    /// UBI's `wear_leveling_worker`: the LEB in the least worn used PEB moves onto the WL
    /// target when the target has been erased at least `wl_threshold` times more
    /// (`e2->ec - e1->ec >= UBI_WL_THRESHOLD`): at threshold - 1 it stays, at exactly the
    /// threshold it moves. A protected PEB is never the source.
    #[test]
    fn a_move_needs_a_target_at_least_the_threshold_more_worn_than_an_unprotected_source() {
        let (mut dev, mut ubi) = fresh(1, 4);
        write(&mut ubi, &mut dev, 0, 3, 0x11);
        let src = ubi.peb_of(0, 0).unwrap();
        let src_ec = ubi.maps[0].pebs[src as usize].ec;
        let target = *ubi.maps[0].free.iter().last().unwrap();
        set_free_ec(&mut ubi, target.1, src_ec + 4);
        assert!(ubi.maps[0].is_protected(src));
        assert!(!one(&mut ubi, &mut dev, 0), "the source is protected");
        unprotect_data(&mut ubi);
        set_free_ec(&mut ubi, target.1, src_ec + 3);
        assert!(
            !one(&mut ubi, &mut dev, 0),
            "threshold - 1 more worn: no move"
        );
        assert_eq!(ubi.peb_of(0, 0), Some(src));
        set_free_ec(&mut ubi, target.1, src_ec + 4);
        assert!(one(&mut ubi, &mut dev, 0), "exactly the threshold: a move");
        assert_eq!(ubi.peb_of(0, 0), Some(target.1), "onto the WL target");
        assert_eq!(ubi.maps[0].pebs[target.1 as usize].ec, src_ec + 4);
        assert_eq!(ubi.maps[0].pebs[src as usize].state, PebState::Free);
        assert_eq!(ubi.report().wl_moves, 1);
        assert_eq!(
            ubi.report().wl_pages_copied,
            3,
            "the LEB's written pages only"
        );
        assert!(!one(&mut ubi, &mut dev, 0), "nothing left to level");
    }

    /// Of several used PEBs the least worn unprotected one is the source, and one the move
    /// could not read is skipped (`wl_skip`) for the next.
    #[test]
    fn the_source_is_the_least_worn_used_peb_not_protected_or_skipped() {
        let (mut dev, mut ubi) = fresh(1, 4);
        for leb in 0..3 {
            write(&mut ubi, &mut dev, leb, 2, leb as u8 + 1);
        }
        unprotect_data(&mut ubi);
        let pebs: Vec<u32> = (0..3).map(|l| ubi.peb_of(0, l).unwrap()).collect();
        // Wear them apart in RAM: LEB 1's PEB the least worn, then LEB 2's, then LEB 0's.
        for (leb, ec) in [(0u32, 9u32), (1, 1), (2, 2)] {
            let m = &mut ubi.maps[0];
            let peb = pebs[leb as usize];
            let old = m.pebs[peb as usize].ec;
            m.used.remove(&(old, peb));
            m.pebs[peb as usize].ec = ec;
            m.used.insert((ec, peb));
        }
        let target = *ubi.maps[0].free.iter().last().unwrap();
        set_free_ec(&mut ubi, target.1, 6);
        ubi.maps[0].protect(pebs[1]);
        ubi.wl_skip.insert((0, pebs[2]));
        assert!(
            !one(&mut ubi, &mut dev, 0),
            "LEB 1's PEB protected, LEB 2's skipped, LEB 0's too worn: no source"
        );
        ubi.wl_skip.clear();
        assert!(one(&mut ubi, &mut dev, 0));
        assert_eq!(
            ubi.peb_of(0, 2),
            Some(target.1),
            "LEB 1's PEB is protected: LEB 2"
        );
        assert_eq!(ubi.peb_of(0, 1), Some(pebs[1]));
        assert_eq!(ubi.peb_of(0, 0), Some(pebs[0]));
    }

    /// A move erases its source and writes the source's EC header with the erase counted
    /// (the planted bug left it one short): the RAM count, the header and the device's
    /// own count agree for every PEB after moves made by hot and cold data.
    #[test]
    fn a_move_counts_the_erase_of_its_source() {
        let (mut dev, mut ubi) = fresh(1, 2);
        write(&mut ubi, &mut dev, 0, 4, 0xC0); // cold
        let cold_peb = ubi.peb_of(0, 0).unwrap();
        let mut round = 0u8;
        // The layout volume's PEBs, as cold, may move first.
        while ubi.peb_of(0, 0) == Some(cold_peb) {
            // Hot data: a LEB rewritten over and over.
            unmap(&mut ubi, &mut dev, 1);
            write(&mut ubi, &mut dev, 1, 2, round);
            round = round.wrapping_add(1);
            assert!(round < 200, "no move after 200 rewrites");
        }
        assert_ne!(ubi.peb_of(0, 0), Some(cold_peb), "the cold LEB moved");
        let before = 1; // erased once by the format
        assert_eq!(ubi.maps[0].pebs[cold_peb as usize].ec, before + 1);
        assert_eq!(header_ec(&mut dev, 0, cold_peb), u64::from(before) + 1);
        assert!(
            u64::from(round) >= PROTECTION_ERASES,
            "not while the cold PEB was young"
        );
        counters_agree(&ubi, &mut dev).unwrap();
        // The moved LEB reads back from its new PEB.
        let g = ubi.geometry();
        let c = ubi.submit(
            &mut dev,
            vec![Command::Read {
                addr: PageAddr::new(0, 0, 3),
            }],
        );
        match &c[0].result {
            Ok(crate::command::Reply::Read { data, .. }) => {
                assert_eq!(data, &vec![0xC0; g.page_size_bytes as usize])
            }
            other => panic!("{other:?}"),
        }
    }

    /// One step of the property test's program.
    #[derive(Clone, Debug)]
    enum Step {
        /// Write `pages` pages to LEB `leb` (unmapping it first if it is mapped).
        Map(u32, u32),
        Unmap(u32),
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 48,
            // Deterministic: the same cases every run, and no regression files.
            rng_seed: proptest::test_runner::RngSeed::Fixed(62),
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// For any sequence of maps, unmaps and the wear-levelling moves they set off (on
        /// one or two chips, at a low threshold so moves are many), every PEB's EC header
        /// holds the number of erases the device counted, and so does UBI's RAM.
        #[test]
        fn ec_headers_count_the_erases_the_device_made(
            chips in 1u32..3,
            threshold in 1u32..4,
            steps in proptest::collection::vec(
                prop_oneof![
                    3 => (0u32..4, 1u32..5).prop_map(|(l, p)| Step::Map(l, p)),
                    1 => (0u32..12, 1u32..3).prop_map(|(l, p)| Step::Map(l, p)),
                    2 => (0u32..12).prop_map(Step::Unmap),
                ],
                1..150,
            ),
        ) {
            let (mut dev, mut ubi) = fresh(chips, threshold);
            for s in &steps {
                match *s {
                    Step::Map(leb, pages) => {
                        if ubi.is_mapped(0, leb) {
                            unmap(&mut ubi, &mut dev, leb);
                        }
                        write(&mut ubi, &mut dev, leb, pages * chips, leb as u8);
                    }
                    Step::Unmap(leb) => unmap(&mut ubi, &mut dev, leb),
                }
            }
            let agree = counters_agree(&ubi, &mut dev);
            proptest::prop_assert!(agree.is_ok(), "{:?} after {} moves", agree, ubi.report().wl_moves);
        }
    }
}
