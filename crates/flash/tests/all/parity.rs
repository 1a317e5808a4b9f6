//! Parity across chips: every stripe survives the loss of any one chip, a piece beyond ECC
//! is rebuilt, a rebuild restores redundancy and resumes after a power cut at any op.

use crate::common::*;
use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{Flash, FlashDevice, FlashError, PageAddr, PowerCut, StripedFlash};

type Array = StripedFlash<FlashDevice>;

const CHIPS: u32 = 4;

fn config() -> nandkit_flash::DeviceConfig {
    let mut c = no_bit_errors(tiny().with_chips(CHIPS).unwrap());
    c.wear.factory_bad_fraction = 0.0;
    c
}

fn params() -> UbiParams {
    UbiParams {
        parity: true,
        ..UbiParams::default()
    }
}

fn array() -> Array {
    Array::format_ubi(FlashDevice::ram(config()).unwrap(), params()).unwrap()
}

fn read(s: &mut Array, leb: u32, k: u32) -> Result<(Vec<u8>, Vec<u8>, bool), FlashError> {
    let g = s.geometry();
    let mut data = vec![0; g.page_size_bytes as usize];
    let mut oob = vec![0; g.oob_size_bytes as usize];
    let ecc = s.read_page(PageAddr::new(0, leb, k), &mut data, &mut oob)?;
    Ok((data, oob, ecc.scrub))
}

/// Pages 0..pages of `leb` hold their tags' data (and the free OOB bytes), the rest is erased.
fn holds(s: &mut Array, leb: u32, pages: u32, tag: u64) -> bool {
    let g = s.geometry();
    let free = g.oob_free_range();
    (0..pages).all(|k| {
        let (d, o, _) = read(s, leb, k).unwrap();
        let (want_d, want_o) = page_bytes(&g, tag * 1000 + u64::from(k));
        d == want_d && o[free.clone()] == want_o[free.clone()]
    }) && (pages..g.pages_per_block).all(|k| read(s, leb, k).unwrap().0.iter().all(|&b| b == 0xFF))
}

#[test]
fn a_page_is_a_stripe_and_parity_rotates() {
    let mut s = array();
    let g = s.geometry();
    let chip = s.inner().geometry();
    assert_eq!(g.page_size_bytes, chip.page_size_bytes * (CHIPS - 1));
    assert_eq!(
        g.pages_per_block,
        chip.pages_per_block - 2,
        "UBI's two header pages"
    );
    write_leb(&mut s, 3, 10, 7).unwrap();
    assert!(holds(&mut s, 3, 10, 7));
    let before = s.inner_mut().stats();
    write_leb(&mut s, 4, CHIPS, 8).unwrap();
    let after = s.inner_mut().stats();
    // One stripe per page, every chip programmed once per stripe (plus its LEB's VID
    // header: the PEB came from the format with its EC header).
    for c in 0..CHIPS as usize {
        let programs = after.chips[c].programs - before.chips[c].programs;
        assert_eq!(
            programs,
            u64::from(CHIPS) + 1,
            "chip {c}: {programs} programs"
        );
    }
    let r = s.parity_report().unwrap();
    assert_eq!(r.stripes_written, 14);
    assert!(r.dead_chips.is_empty());
}

#[test]
fn any_one_dead_chip_loses_nothing_and_writes_go_on() {
    for dead in 0..CHIPS {
        let mut s = array();
        write_leb(&mut s, 1, 20, 1).unwrap();
        s.inner_mut().fail_chip(dead, "test");
        assert!(holds(&mut s, 1, 20, 1), "chip {dead} dead");
        // Degraded writes: a new LEB, and the data reads back.
        write_leb(&mut s, 2, 20, 2).unwrap();
        assert!(holds(&mut s, 2, 20, 2));
        let r = s.parity_report().unwrap();
        assert_eq!(r.dead_chips, vec![dead]);
        assert!(
            r.pieces_rebuilt > 0,
            "every chip holds data pieces of some rows"
        );
        let events = s.take_parity_events();
        assert_eq!(events.len(), 1, "reported once: {events:?}");
        assert!(s.take_parity_events().is_empty());
        // It still reads after an attach without the chip.
        let mut s = s.reattach(false).unwrap();
        assert!(holds(&mut s, 1, 20, 1) && holds(&mut s, 2, 20, 2));
        // A second dead chip is beyond parity.
        s.inner_mut().fail_chip((dead + 1) % CHIPS, "test");
        assert!(write_leb(&mut s, 3, 4, 3).is_err());
    }
}

#[test]
fn a_piece_beyond_ecc_is_rebuilt_and_scrubbed() {
    let mut s = array();
    write_leb(&mut s, 2, 6, 5).unwrap();
    let ecc = s.inner().config().ecc;
    // Ruin one codeword of a data piece of row 3 (PEB page 5, after UBI's headers): the
    // parity of LEB 2's row 3 is on chip (2 + 3) mod 4 = 1, its first data piece on chip 2.
    let peb = s.ubi().unwrap().peb_of(2, 2).unwrap();
    s.inner_mut()
        .inject_bit_errors(PageAddr::new(2, peb, 5), 0, ecc.correctable_bits + 2)
        .unwrap();
    let (d, _, scrub) = read(&mut s, 2, 3).unwrap();
    assert_eq!(d, page_bytes(&s.geometry(), 5003).0);
    assert!(scrub, "a rebuilt piece asks for a scrub");
    assert!(s.parity_report().unwrap().pieces_rebuilt >= 1);
}

#[test]
fn rebuild_restores_redundancy() {
    let mut s = array();
    for leb in 0..6 {
        write_leb(&mut s, leb, 5 + leb * 7, u64::from(leb)).unwrap();
    }
    s.inner_mut().fail_chip(2, "test");
    write_leb(&mut s, 6, 9, 6).unwrap(); // degraded
    let mut dev = s.into_inner();
    dev.replace_chip(2).unwrap();
    let mut s = Array::open(dev, false).unwrap();
    assert!(s.has_parity());
    // Readable before the rebuild too (the new chip's pieces come from parity).
    assert!(holds(&mut s, 0, 5, 0));
    let mut calls = 0;
    let r = s.rebuild_chip(2, &mut |_, _| calls += 1).unwrap();
    assert_eq!(r.lebs_written, 7);
    assert_eq!(calls, r.lebs);
    assert_eq!(s.rebuild_chip(2, &mut |_, _| {}).unwrap().lebs_kept, 7);
    // Lose another chip: everything still reads.
    s.inner_mut().fail_chip(0, "test");
    for leb in 0..6 {
        assert!(holds(&mut s, leb, 5 + leb * 7, u64::from(leb)), "LEB {leb}");
    }
    assert!(holds(&mut s, 6, 9, 6));
}

#[test]
fn a_rebuild_cut_at_any_op_resumes() {
    let base = || {
        let mut s = array();
        for leb in 0..3 {
            write_leb(&mut s, leb, 6 + leb * 5, u64::from(leb)).unwrap();
        }
        let mut dev = s.into_inner();
        dev.replace_chip(1).unwrap();
        dev
    };
    // Ops of an uncut rebuild.
    let ops = {
        let mut s = Array::open(base(), false).unwrap();
        let before = s.inner().state_ops();
        s.rebuild_chip(1, &mut |_, _| {}).unwrap();
        s.inner().state_ops() - before
    };
    assert!(ops > 10);
    for cut in 0..ops {
        let mut s = Array::open(base(), false).unwrap();
        s.inner_mut().arm_power_cut(PowerCut::AtOp(cut));
        assert!(s.rebuild_chip(1, &mut |_, _| {}).is_err(), "cut {cut}");
        let mut dev = s.into_inner();
        dev.power_cycle().unwrap();
        let mut s = Array::open(dev, false).unwrap();
        // Readable in between, and the rebuild finishes.
        assert!(holds(&mut s, 2, 16, 2), "cut {cut}");
        s.rebuild_chip(1, &mut |_, _| {}).unwrap();
        let again = s.rebuild_chip(1, &mut |_, _| {}).unwrap();
        assert_eq!(
            again.lebs_written, 0,
            "cut {cut}: a finished rebuild writes nothing"
        );
        s.inner_mut().fail_chip(3, "test");
        for leb in 0..3 {
            assert!(
                holds(&mut s, leb, 6 + leb * 5, u64::from(leb)),
                "cut {cut}, LEB {leb}"
            );
        }
    }
}

#[test]
fn a_cut_inside_a_stripe_tears_it_and_the_next_stripe_fills_the_gap() {
    let mut s = array();
    write_leb(&mut s, 1, 3, 1).unwrap();
    let g = s.geometry();
    // Cut at the second piece of row 3: piece 0 programmed, the rest never.
    s.inner_mut().arm_power_cut(PowerCut::AtOp(1));
    let (data, oob) = page_bytes(&g, 1003);
    assert!(s.program_page(PageAddr::new(0, 1, 3), &data, &oob).is_err());
    let mut dev = s.into_inner();
    dev.power_cycle().unwrap();
    let mut s = Array::open(dev, false).unwrap();
    let mut o = vec![0; g.oob_size_bytes as usize];
    assert!(matches!(
        s.read_oob(PageAddr::new(0, 1, 3), &mut o),
        Err(FlashError::Uncorrectable { .. })
    ));
    // Row 4 lands after fillers on the chips the cut left behind.
    let (data, oob) = page_bytes(&g, 1004);
    s.program_page(PageAddr::new(0, 1, 4), &data, &oob).unwrap();
    assert!(s.parity_report().unwrap().fillers > 0);
    assert_eq!(read(&mut s, 1, 4).unwrap().0, data);
    // And survives a dead chip.
    s.inner_mut().fail_chip(2, "test");
    assert_eq!(read(&mut s, 1, 4).unwrap().0, data);
    assert!(holds_prefix(&mut s, 1, 3, 1));
}

fn holds_prefix(s: &mut Array, leb: u32, pages: u32, tag: u64) -> bool {
    let g = s.geometry();
    (0..pages).all(|k| read(s, leb, k).unwrap().0 == page_bytes(&g, tag * 1000 + u64::from(k)).0)
}

#[test]
fn a_missing_chip_image_is_a_dead_chip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img");
    let mut c = config();
    c.chip_files = true;
    let dev = FlashDevice::create_image(&path, c, false, Default::default()).unwrap();
    let mut s = Array::format_ubi(dev, params()).unwrap();
    write_leb(&mut s, 0, 12, 9).unwrap();
    // Removed while open: noticed at the next operation.
    std::fs::remove_file(nandkit_flash::backend::file::chip_path(&path, 2)).unwrap();
    assert!(holds(&mut s, 0, 12, 9));
    write_leb(&mut s, 1, 3, 10).unwrap();
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![2]);
    drop(s);
    // Reopened without it.
    let dev = FlashDevice::open_image(&path, Default::default()).unwrap();
    let mut s = Array::open(dev, false).unwrap();
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![2]);
    assert!(holds(&mut s, 0, 12, 9) && holds(&mut s, 1, 3, 10));
}

/// Programs rows `from..to` of `leb` (already open) with `tag`'s pages, as `write_leb` does.
fn append_rows(s: &mut Array, leb: u32, from: u32, to: u32, tag: u64) {
    let g = s.geometry();
    for k in from..to {
        let (data, oob) = page_bytes(&g, tag * 1000 + u64::from(k));
        s.program_page(PageAddr::new(0, leb, k), &data, &oob)
            .unwrap();
    }
}

/// An image with a file per chip in `dir`, formatted with parity.
fn file_array(dir: &std::path::Path) -> (std::path::PathBuf, Array) {
    let path = dir.join("img");
    let mut c = config();
    c.chip_files = true;
    let dev = FlashDevice::create_image(&path, c, false, Default::default()).unwrap();
    (path, Array::format_ubi(dev, params()).unwrap())
}

fn reopen(path: &std::path::Path) -> Array {
    Array::open(
        FlashDevice::open_image(path, Default::default()).unwrap(),
        false,
    )
    .unwrap()
}

/// A new (blank) chip, and one whose rebuild was cut, are not members: the array runs
/// degraded without them, so stripes written into a LEB the chip does not hold yet cannot
/// make its rows read wrong (they did: fillers on the new chip were read as data); a rebuild
/// run again completes the chip.
#[test]
fn a_chip_whose_rebuild_did_not_complete_is_treated_as_failed() {
    let base = || {
        let mut s = array();
        write_leb(&mut s, 0, 9, 1).unwrap();
        // LEB 1 left open at row 5, as a file system's open block.
        write_leb(&mut s, 1, 5, 2).unwrap();
        let mut dev = s.into_inner();
        dev.replace_chip(2).unwrap();
        dev
    };
    let ops = {
        let mut s = Array::open(base(), false).unwrap();
        let before = s.inner().state_ops();
        s.rebuild_chip(2, &mut |_, _| {}).unwrap();
        s.inner().state_ops() - before
    };
    // No rebuild at all, then cuts at its first op, inside LEB 0, and at its last op.
    for cut in [None, Some(0), Some(3), Some(ops - 1)] {
        let ctx = format!("rebuild cut at {cut:?} of {ops}");
        let mut dev = base();
        if let Some(cut) = cut {
            let mut s = Array::open(dev, false).unwrap();
            s.inner_mut().arm_power_cut(PowerCut::AtOp(cut));
            assert!(s.rebuild_chip(2, &mut |_, _| {}).is_err(), "{ctx}");
            dev = s.into_inner();
            dev.power_cycle().unwrap();
        }
        let mut s = Array::open(dev, false).unwrap();
        assert_eq!(s.parity_report().unwrap().dead_chips, vec![2], "{ctx}");
        assert_eq!(s.excluded_chips()[0].0, 2, "{ctx}");
        append_rows(&mut s, 1, 5, 12, 2);
        assert!(holds(&mut s, 0, 9, 1) && holds(&mut s, 1, 12, 2), "{ctx}");
        // Still not a member after an attach; a rebuild makes it one.
        let mut s = s.reattach(false).unwrap();
        assert_eq!(s.parity_report().unwrap().dead_chips, vec![2], "{ctx}");
        s.rebuild_chip(2, &mut |_, _| {}).unwrap();
        let mut s = s.reattach(false).unwrap();
        assert!(s.parity_report().unwrap().dead_chips.is_empty(), "{ctx}");
        s.inner_mut().fail_chip(0, "test");
        assert!(holds(&mut s, 0, 9, 1) && holds(&mut s, 1, 12, 2), "{ctx}");
    }
}

/// A blank file in place of a chip's image is no member (it was read as the chip, erased
/// pieces and all, and fillers on it as data).
#[test]
fn a_blank_chip_file_is_a_failed_chip() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut s) = file_array(dir.path());
    write_leb(&mut s, 0, 9, 1).unwrap();
    write_leb(&mut s, 1, 5, 2).unwrap();
    drop(s);
    let chip1 = nandkit_flash::backend::file::chip_path(&path, 1);
    let len = std::fs::metadata(&chip1).unwrap().len();
    std::fs::write(&chip1, vec![0xFF; len as usize]).unwrap();
    let mut s = reopen(&path);
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![1]);
    append_rows(&mut s, 1, 5, 12, 2);
    assert!(holds(&mut s, 0, 9, 1) && holds(&mut s, 1, 12, 2));
    s.rebuild_chip(1, &mut |_, _| {}).unwrap();
    drop(s);
    let mut s = reopen(&path);
    assert!(s.parity_report().unwrap().dead_chips.is_empty());
    s.inner_mut().fail_chip(3, "test");
    assert!(holds(&mut s, 0, 9, 1) && holds(&mut s, 1, 12, 2));
}

/// A chip the array went on without, put back as it was (an old copy of its file), is out
/// of date: its record's generation says so, and it is treated as failed.
#[test]
fn an_old_copy_of_a_chip_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut s) = file_array(dir.path());
    write_leb(&mut s, 0, 9, 1).unwrap();
    drop(s);
    let chip2 = nandkit_flash::backend::file::chip_path(&path, 2);
    let old = dir.path().join("chip2.old");
    std::fs::copy(&chip2, &old).unwrap();
    std::fs::remove_file(&chip2).unwrap();
    let mut s = reopen(&path);
    write_leb(&mut s, 0, 7, 3).unwrap();
    drop(s);
    std::fs::rename(&old, &chip2).unwrap();
    let mut s = reopen(&path);
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![2]);
    assert!(s.excluded_chips()[0].1.contains("went on without it"));
    assert!(holds(&mut s, 0, 7, 3));
    // And a chip that dies under a running array is out of the records at once.
    s.rebuild_chip(2, &mut |_, _| {}).unwrap();
    std::fs::copy(&chip2, &old).unwrap();
    s.inner_mut().fail_chip(2, "test");
    write_leb(&mut s, 0, 4, 4).unwrap();
    drop(s);
    std::fs::rename(&old, &chip2).unwrap();
    let mut s = reopen(&path);
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![2]);
    assert!(holds(&mut s, 0, 4, 4));
}

/// A chip file cut short (a rebuild killed while it wrote the new file) is a failed chip,
/// not a broken image: the array opens degraded, and a rebuild starts the chip afresh.
#[test]
fn a_short_chip_file_is_a_failed_chip_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut s) = file_array(dir.path());
    write_leb(&mut s, 0, 9, 1).unwrap();
    drop(s);
    let chip3 = nandkit_flash::backend::file::chip_path(&path, 3);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&chip3)
        .unwrap()
        .set_len(1000)
        .unwrap();
    let mut dev = FlashDevice::open_image(&path, Default::default()).unwrap();
    let failed = dev.failed_chips();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, 3);
    assert!(failed[0].1.contains("is 1000 bytes"), "{}", failed[0].1);
    let mut s = Array::open(dev, false).unwrap();
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![3]);
    assert!(holds(&mut s, 0, 9, 1));
    let mut dev = s.into_inner();
    dev.replace_chip(3).unwrap();
    let mut s = Array::open(dev, false).unwrap();
    s.rebuild_chip(3, &mut |_, _| {}).unwrap();
    drop(s);
    let mut s = reopen(&path);
    assert!(s.parity_report().unwrap().dead_chips.is_empty());
    s.inner_mut().fail_chip(0, "test");
    assert!(holds(&mut s, 0, 9, 1));
}

/// Chip 0 may be the chip lost even when every other chip was rebuilt (their first PEBs
/// then hold no UBI header, which the probe of headers relied on): the chips' membership
/// records say the array has parity.
#[test]
fn chip_0_lost_after_every_other_chip_was_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut s) = file_array(dir.path());
    write_leb(&mut s, 0, 9, 1).unwrap();
    drop(s);
    for chip in 1..CHIPS {
        std::fs::remove_file(nandkit_flash::backend::file::chip_path(&path, chip)).unwrap();
        let mut dev = FlashDevice::open_image(&path, Default::default()).unwrap();
        dev.replace_chip(chip).unwrap();
        let mut s = Array::open(dev, false).unwrap();
        s.rebuild_chip(chip, &mut |_, _| {}).unwrap();
    }
    std::fs::remove_file(&path).unwrap();
    let mut s = reopen(&path);
    assert!(s.has_parity());
    assert_eq!(s.parity_report().unwrap().dead_chips, vec![0]);
    assert!(holds(&mut s, 0, 9, 1));
}
