//! ECC: BCH t=4 per 512 bytes, scrub at 3 corrected bits, damage beyond that; raw bit
//! errors that grow with wear.

use crate::common::*;
use nandkit_flash::{BlockAddr, EccModel, EccReport, Flash, FlashDevice, FlashError, PageAddr};

const CW: usize = 512;

/// A tiny device with no random bit errors and one programmed page: the device, the
/// address, the data and the OOB as stored (the caller's, with the check bytes).
fn programmed() -> (FlashDevice, PageAddr, Vec<u8>, Vec<u8>) {
    let mut dev = tiny_dev();
    let addr = PageAddr::new(0, 2, 0);
    let g = dev.geometry();
    let (data, oob) = page_bytes(&g, 77);
    dev.program_page(addr, &data, &oob).unwrap();
    let oob = stored_oob(&g, &data, &oob);
    (dev, addr, data, oob)
}

fn oob_codeword(dev: &FlashDevice) -> u32 {
    dev.geometry().page_size_bytes / CW as u32
}

fn report(bits: u32, scrub: bool) -> EccReport {
    EccReport {
        max_corrected_bits: bits,
        scrub,
    }
}

#[test]
fn the_ma_code_corrects_four_and_scrubs_at_three() {
    let ecc = EccModel::bch(512, 4);
    assert_eq!(ecc.codeword_bytes, 512);
    assert_eq!(ecc.correctable_bits, 4);
    assert_eq!(ecc.scrub_threshold_bits, 3);
    assert_eq!(tiny().ecc, ecc);
}

/// Injects `bits` errors in data codeword 1 and checks a corrected read.
fn corrected_data_read(bits: u32, scrub: bool) {
    let (mut dev, addr, data, oob) = programmed();
    dev.inject_bit_errors(addr, 1, bits).unwrap();
    let (d, o, ecc) = read(&mut dev, addr).unwrap();
    assert_eq!(ecc, report(bits, scrub), "{bits} bits");
    assert!(d == data, "{bits} bits: data not corrected");
    assert_eq!(o, oob);
    // The OOB codeword is clean, so an OOB read sees nothing.
    let mut o2 = vec![0u8; oob.len()];
    assert_eq!(dev.read_oob(addr, &mut o2).unwrap(), EccReport::default());
    assert_eq!(o2, oob);
    let stats = dev.stats().total();
    assert_eq!(stats.corrected_reads, u64::from(bits > 0));
    assert_eq!(stats.uncorrectable_reads, 0);
    // Injected errors persist: a second read reports the same.
    assert_eq!(read(&mut dev, addr).unwrap().2, report(bits, scrub));
}

#[test]
fn no_bit_errors_reads_clean() {
    corrected_data_read(0, false);
}

#[test]
fn one_bit_error_is_corrected_without_scrub() {
    corrected_data_read(1, false);
}

#[test]
fn two_bit_errors_are_corrected_without_scrub() {
    corrected_data_read(2, false);
}

#[test]
fn three_bit_errors_are_corrected_and_ask_for_scrub() {
    corrected_data_read(3, true);
}

#[test]
fn four_bit_errors_are_corrected_and_ask_for_scrub() {
    corrected_data_read(4, true);
}

#[test]
fn five_bit_errors_are_uncorrectable_and_damage_only_that_codeword() {
    let (mut dev, addr, data, oob) = programmed();
    let bad_cw = 2;
    dev.inject_bit_errors(addr, bad_cw as u32, 5).unwrap();
    let g = dev.geometry();
    let mut d = vec![0u8; g.page_size_bytes as usize];
    let mut o = vec![0u8; g.oob_size_bytes as usize];
    let r = dev.read_page(addr, &mut d, &mut o);
    assert!(
        matches!(r, Err(FlashError::Uncorrectable { addr: a, codewords: 1 }) if a == addr),
        "{r:?}"
    );
    for (i, (got, want)) in d.chunks(CW).zip(data.chunks(CW)).enumerate() {
        if i == bad_cw {
            assert_ne!(got, want, "the damaged codeword came back clean");
            let flipped: u32 = got
                .iter()
                .zip(want)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert!((1..=5).contains(&flipped) && flipped % 2 == 1, "{flipped}");
        } else {
            assert_eq!(got, want, "codeword {i} was damaged too");
        }
    }
    assert_eq!(o, oob);
    let stats = dev.stats().total();
    assert_eq!(stats.uncorrectable_reads, 1);
    assert_eq!(stats.corrected_reads, 0);
    // The cells themselves are unchanged; the damage is in what the read returns.
    assert_eq!(dev.raw_page(addr).unwrap(), raw_of(&data, &oob));
}

#[test]
fn uncorrectable_codewords_are_counted() {
    let (mut dev, addr, ..) = programmed();
    dev.inject_bit_errors(addr, 0, 6).unwrap();
    dev.inject_bit_errors(addr, 3, 9).unwrap();
    dev.inject_bit_errors(addr, 1, 2).unwrap();
    let r = read(&mut dev, addr);
    assert!(
        matches!(r, Err(FlashError::Uncorrectable { codewords: 2, .. })),
        "{r:?}"
    );
}

#[test]
fn injected_errors_accumulate() {
    let (mut dev, addr, data, _) = programmed();
    dev.inject_bit_errors(addr, 0, 2).unwrap();
    assert_eq!(read(&mut dev, addr).unwrap().2, report(2, false));
    dev.inject_bit_errors(addr, 0, 2).unwrap();
    let (d, _, ecc) = read(&mut dev, addr).unwrap();
    assert_eq!(ecc, report(4, true));
    assert!(d == data);
    dev.inject_bit_errors(addr, 0, 1).unwrap();
    assert!(matches!(
        read(&mut dev, addr),
        Err(FlashError::Uncorrectable { codewords: 1, .. })
    ));
}

#[test]
fn the_report_is_the_worst_codeword() {
    let (mut dev, addr, data, _) = programmed();
    dev.inject_bit_errors(addr, 0, 1).unwrap();
    dev.inject_bit_errors(addr, 3, 3).unwrap();
    dev.inject_bit_errors(addr, oob_codeword(&dev), 2).unwrap();
    let (d, _, ecc) = read(&mut dev, addr).unwrap();
    assert_eq!(ecc, report(3, true));
    assert!(d == data);
}

fn oob_read(bits: u32) -> (Result<EccReport, FlashError>, Vec<u8>, Vec<u8>) {
    let (mut dev, addr, _, oob) = programmed();
    let cw = oob_codeword(&dev);
    assert_eq!(cw, 4);
    dev.inject_bit_errors(addr, cw, bits).unwrap();
    let mut o = vec![0u8; oob.len()];
    (dev.read_oob(addr, &mut o), o, oob)
}

#[test]
fn oob_codeword_corrects_up_to_two_without_scrub() {
    for bits in 0..=2 {
        let (r, got, want) = oob_read(bits);
        assert_eq!(r.unwrap(), report(bits, false));
        assert_eq!(got, want);
    }
}

#[test]
fn oob_codeword_corrects_three_and_four_with_scrub() {
    for bits in 3..=4 {
        let (r, got, want) = oob_read(bits);
        assert_eq!(r.unwrap(), report(bits, true));
        assert_eq!(got, want);
    }
}

#[test]
fn oob_codeword_with_five_errors_is_uncorrectable() {
    let (r, got, want) = oob_read(5);
    assert!(
        matches!(r, Err(FlashError::Uncorrectable { codewords: 1, .. })),
        "{r:?}"
    );
    assert_ne!(got, want);
}

#[test]
fn oob_errors_show_in_full_page_reads_too() {
    let (mut dev, addr, data, oob) = programmed();
    dev.inject_bit_errors(addr, oob_codeword(&dev), 5).unwrap();
    let g = dev.geometry();
    let mut d = vec![0u8; g.page_size_bytes as usize];
    let mut o = vec![0u8; g.oob_size_bytes as usize];
    let r = dev.read_page(addr, &mut d, &mut o);
    assert!(
        matches!(r, Err(FlashError::Uncorrectable { codewords: 1, .. })),
        "{r:?}"
    );
    assert!(d == data, "data codewords were clean");
    assert_ne!(o, oob);
}

#[test]
fn data_errors_do_not_show_in_oob_reads() {
    let (mut dev, addr, _, oob) = programmed();
    dev.inject_bit_errors(addr, 0, 7).unwrap();
    let mut o = vec![0u8; oob.len()];
    assert_eq!(dev.read_oob(addr, &mut o).unwrap(), EccReport::default());
    assert_eq!(o, oob);
    assert!(read(&mut dev, addr).is_err());
}

#[test]
fn errors_are_per_page() {
    let (mut dev, addr, ..) = programmed();
    let next = PageAddr::new(0, 2, 1);
    program_tagged(&mut dev, next).unwrap();
    dev.inject_bit_errors(addr, 0, 5).unwrap();
    assert_eq!(read(&mut dev, next).unwrap().2, EccReport::default());
}

#[test]
fn erasing_the_block_clears_injected_errors() {
    let (mut dev, addr, data, oob) = programmed();
    dev.inject_bit_errors(addr, 0, 5).unwrap();
    dev.inject_bit_errors(addr, oob_codeword(&dev), 3).unwrap();
    assert!(read(&mut dev, addr).is_err());
    dev.erase_block(addr.block_addr()).unwrap();
    dev.program_page(addr, &data, &oob).unwrap();
    let (d, o, ecc) = read(&mut dev, addr).unwrap();
    assert_eq!(ecc, EccReport::default());
    assert_eq!(raw_of(&d, &o), raw_of(&data, &oob));
}

#[test]
fn erased_pages_skip_ecc() {
    let mut dev = tiny_dev();
    let addr = PageAddr::new(0, 3, 0);
    dev.inject_bit_errors(addr, 0, 9).unwrap();
    let (d, o, ecc) = read(&mut dev, addr).unwrap();
    assert_eq!(ecc, EccReport::default());
    assert!(d.iter().chain(&o).all(|&b| b == 0xFF));
}

/// Reads one page `n` times.
fn tally(dev: &mut FlashDevice, addr: PageAddr, want: &[u8], n: u32) -> Tally {
    let mut counts = (0, 0, 0);
    for _ in 0..n {
        match read(dev, addr) {
            Ok((d, o, ecc)) => {
                assert_eq!(raw_of(&d, &o), want, "a corrected read returned bad data");
                assert_eq!(ecc.scrub, ecc.max_corrected_bits >= 3);
                assert!(ecc.max_corrected_bits <= 4);
                if ecc.max_corrected_bits == 0 {
                    counts.0 += 1;
                } else {
                    counts.1 += 1;
                }
            }
            Err(FlashError::Uncorrectable { .. }) => counts.2 += 1,
            Err(e) => panic!("{e}"),
        }
    }
    counts
}

/// Reads of a page: (clean, corrected, uncorrectable).
type Tally = (u32, u32, u32);

/// Reads a fresh block and a block worn to just under its rating: the (fresh, worn) tallies
/// and how far the corrected and uncorrectable counters moved during the worn reads.
fn wear_experiment(seed: u64) -> (Tally, Tally, u64, u64) {
    let mut c = tiny().with_seed(seed);
    c.wear.endurance_cycles = 100;
    c.ecc.rber_at_endurance = 5e-4;
    let mut dev = FlashDevice::ram(c).unwrap();
    let fresh = BlockAddr::new(0, 1);
    let worn = BlockAddr::new(0, 2);
    for _ in 0..99 {
        dev.erase_block(worn).unwrap();
    }
    assert_eq!(dev.erase_count(worn).unwrap(), 99);
    let f = program_tagged(&mut dev, fresh.page(0)).unwrap();
    let w = program_tagged(&mut dev, worn.page(0)).unwrap();
    let n = 300;
    let fresh_counts = tally(&mut dev, fresh.page(0), &f, n);
    let before = dev.stats().total();
    assert_eq!(before.corrected_reads, u64::from(fresh_counts.1));
    assert_eq!(before.uncorrectable_reads, u64::from(fresh_counts.2));
    let worn_counts = tally(&mut dev, worn.page(0), &w, n);
    let after = dev.stats().total();
    (
        fresh_counts,
        worn_counts,
        after.corrected_reads - before.corrected_reads,
        after.uncorrectable_reads - before.uncorrectable_reads,
    )
}

#[test]
fn raw_bit_errors_grow_with_wear() {
    let (fresh, worn, corrected, uncorrectable) = wear_experiment(2024);
    // rber(fresh) = 1e-9: ~4e-6 errors per codeword read, so effectively never.
    assert_eq!(fresh, (300, 0, 0), "fresh block");
    // rber(99 of 100 cycles) ~ 4.9e-4: ~2 raw errors per 512-byte codeword.
    assert!(worn.1 > 100, "worn block: {worn:?}");
    assert!(worn.2 > 10, "worn block: {worn:?}");
    assert!(worn.1 + worn.2 > fresh.1 + fresh.2);
    // The stats counters moved with them.
    assert_eq!(corrected, u64::from(worn.1));
    assert_eq!(uncorrectable, u64::from(worn.2));
}

#[test]
fn random_bit_errors_are_deterministic_for_a_seed() {
    assert_eq!(wear_experiment(7), wear_experiment(7));
    assert_ne!(wear_experiment(7).1, wear_experiment(8).1);
}

#[test]
fn rber_follows_the_wear_curve() {
    let mut ecc = EccModel::bch(512, 4);
    ecc.rber_fresh = 1e-9;
    ecc.rber_at_endurance = 1e-4;
    assert_eq!(ecc.rber(0, 100), 1e-9);
    assert!((ecc.rber(100, 100) - (1e-9 + 1e-4)).abs() < 1e-15);
    assert!((ecc.rber(50, 100) - (1e-9 + 1e-4 / 8.0)).abs() < 1e-15);
    assert!(ecc.rber(10, 100) < ecc.rber(20, 100));
}
