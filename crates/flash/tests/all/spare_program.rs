//! Partial programs of a page's spare area (NOP): what YAFFS1's deletion marker needs from
//! a small-page chip, and the rules a chip holds them to.

use crate::common::*;
use nandkit_flash::{preset, BlockAddr, Command, Flash, FlashDevice, FlashError, PowerCut};

/// The small-page SLC chip of the MNFS paper, without random bit errors.
fn small_page_dev() -> FlashDevice {
    let mut c = no_bit_errors(preset("mnfs-128m").unwrap());
    c.geometry = c.geometry.resized(4 << 20).unwrap();
    FlashDevice::ram(c).unwrap()
}

/// Programs a page with bytes of its address; returns what the chip stored (ECC included).
fn program_tagged(
    dev: &mut FlashDevice,
    addr: nandkit_flash::PageAddr,
) -> Result<Vec<u8>, FlashError> {
    let g = dev.geometry();
    let (data, oob) = page_bytes(&g, tag(addr));
    dev.program_page(addr, &data, &oob)?;
    dev.raw_page(addr)
}

/// A spare with only the given byte cleared (the rest left as programmed).
fn marker(g: &nandkit_flash::Geometry, at: usize) -> Vec<u8> {
    let mut m = vec![0xFF; g.oob_size_bytes as usize];
    m[at] = 0;
    m
}

#[test]
fn a_spare_program_clears_bits_and_leaves_the_data_readable() {
    let mut dev = small_page_dev();
    let g = dev.geometry();
    let addr = BlockAddr::new(0, 3).page(0);
    let before = program_tagged(&mut dev, addr).unwrap();
    let at = g.oob_free_offset();
    dev.program_spare(addr, &marker(&g, at)).unwrap();
    let (data, oob, _) = read(&mut dev, addr).unwrap();
    let ps = g.page_size_bytes as usize;
    assert_eq!(data, before[..ps], "data untouched");
    assert_eq!(oob[at], 0, "marker programmed");
    for (i, (&got, &was)) in oob.iter().zip(&before[ps..]).enumerate() {
        if i != at {
            assert_eq!(got, was, "spare byte {i} untouched");
        }
    }
    // Only 0 bits program: a 1 in the request never sets a programmed bit back.
    assert_eq!(dev.stats().total().spare_programs, 1);
}

#[test]
fn the_chip_allows_as_many_spare_programs_as_its_nop() {
    let mut dev = small_page_dev();
    let g = dev.geometry();
    let addr = BlockAddr::new(0, 3).page(0);
    program_tagged(&mut dev, addr).unwrap();
    let m = marker(&g, g.oob_free_offset());
    dev.program_spare(addr, &m).unwrap();
    assert!(matches!(
        dev.program_spare(addr, &m),
        Err(FlashError::PartialProgramLimit { times: 2, .. })
    ));
    // An erase gives the page its programs back.
    dev.erase_block(addr.block_addr()).unwrap();
    program_tagged(&mut dev, addr).unwrap();
    dev.program_spare(addr, &m).unwrap();
}

#[test]
fn an_erased_page_takes_no_spare_program() {
    let mut dev = small_page_dev();
    let g = dev.geometry();
    let addr = BlockAddr::new(0, 3).page(0);
    let r = dev.program_spare(addr, &marker(&g, g.oob_free_offset()));
    assert!(matches!(r, Err(FlashError::SpareOfErasedPage(_))), "{r:?}");
    // And the page can still be programmed normally.
    program_tagged(&mut dev, addr).unwrap();
}

#[test]
fn mlc_cells_allow_no_partial_program() {
    let mut c = no_bit_errors(preset("mlc-1g").unwrap());
    c.geometry = c.geometry.resized(64 << 20).unwrap();
    let mut dev = FlashDevice::ram(c).unwrap();
    let g = dev.geometry();
    let addr = BlockAddr::new(0, 3).page(0);
    program_tagged(&mut dev, addr).unwrap();
    let r = dev.program_spare(addr, &marker(&g, g.oob_free_offset()));
    assert!(
        matches!(r, Err(FlashError::PartialProgramLimit { times: 1, .. })),
        "{r:?}"
    );
}

#[test]
fn a_spare_program_costs_a_program_time_and_goes_through_batches() {
    let mut dev = small_page_dev();
    let g = dev.geometry();
    let b = BlockAddr::new(0, 3);
    program_tagged(&mut dev, b.page(0)).unwrap();
    program_tagged(&mut dev, b.page(1)).unwrap();
    let t0 = dev.now_ns();
    dev.program_spare(b.page(0), &marker(&g, g.oob_free_offset()))
        .unwrap();
    let cost = dev.now_ns() - t0;
    assert!(cost >= 200_000, "tPROG of the chip: {cost} ns");
    let done = dev.submit(vec![Command::ProgramSpare {
        addr: b.page(1),
        oob: marker(&g, g.oob_free_offset()),
    }]);
    assert!(done[0].result.is_ok(), "{:?}", done[0].result);
}

#[test]
fn a_cut_spare_program_leaves_part_of_its_bits_and_nothing_else() {
    let mut dev = small_page_dev();
    let g = dev.geometry();
    let addr = BlockAddr::new(0, 3).page(0);
    let before = program_tagged(&mut dev, addr).unwrap();
    dev.arm_power_cut(PowerCut::AtOp(0));
    let all_zero = vec![0u8; g.oob_size_bytes as usize];
    assert!(matches!(
        dev.program_spare(addr, &all_zero),
        Err(FlashError::PowerLost)
    ));
    let raw = dev.raw_page(addr).unwrap();
    let ps = g.page_size_bytes as usize;
    assert_eq!(raw[..ps], before[..ps], "data untouched");
    for (&got, &was) in raw[ps..].iter().zip(&before[ps..]) {
        assert_eq!(got & !was, 0, "a cut program only clears bits");
    }
}
