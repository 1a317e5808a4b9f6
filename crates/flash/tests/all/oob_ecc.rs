//! ECC bytes stored in the OOB: where they go, and how they expose damage that is stored in
//! the cells (torn programs, half-erased pages, bytes changed in an image file), which the
//! statistical bit-error model cannot see.

use crate::common::*;
use nandkit_flash::{
    preset, BlockAddr, DeviceConfig, DeviceOptions, EccModel, Flash, FlashDevice, FlashError,
    Geometry, PageAddr, PowerCut,
};

/// The check bytes of one codeword, computed here independently of the simulator: the
/// little-endian crc32c of the codeword, then of the codeword followed by 1u32 (LE).
fn expected_check(codeword: &[u8], n: usize) -> Vec<u8> {
    let mut out = crc32c::crc32c(codeword).to_le_bytes().to_vec();
    let suffixed = [codeword, &1u32.to_le_bytes()].concat();
    out.extend(crc32c::crc32c(&suffixed).to_le_bytes());
    assert!(n <= out.len());
    out.truncate(n);
    out
}

/// The OOB a program of (data, oob) stores on a device of this configuration.
fn stored(config: &DeviceConfig, data: &[u8], oob: &[u8]) -> Vec<u8> {
    let mut o = oob.to_vec();
    config.ecc.store_check_bytes(&config.geometry, data, &mut o);
    o
}

/// A small-page device (MTD software Hamming ECC), 64 blocks, nothing random.
fn smallblock() -> DeviceConfig {
    let mut c = no_bit_errors(preset("smallblock-64m").unwrap());
    c.wear.factory_bad_fraction = 0.0;
    let block = c.geometry.block_bytes();
    c.with_total_bytes(64 * block).unwrap()
}

/// The tiny device (BCH 4 bits per 512 B), nothing random.
fn large_page() -> DeviceConfig {
    no_bit_errors(tiny())
}

/// Data with some codewords entirely 0xFF (as a file system's padding is), the rest
/// without any 0xFF byte; an OOB without 0xFF.
fn sparse_bytes(g: &Geometry, tag: u64, codeword: usize) -> (Vec<u8>, Vec<u8>) {
    let (mut data, oob) = page_bytes(g, tag);
    for (i, cw) in data.chunks_mut(codeword).enumerate() {
        if (i as u64 + tag).is_multiple_of(2) {
            cw.fill(0xFF);
        }
    }
    (data, oob)
}

fn assert_uncorrectable<T: std::fmt::Debug>(r: Result<T, FlashError>, codewords: u32, what: &str) {
    assert!(
        matches!(r, Err(FlashError::Uncorrectable { codewords: n, .. }) if n == codewords),
        "{what}: expected Uncorrectable with {codewords} codeword(s), got {r:?}"
    );
}

#[test]
fn check_bytes_per_codeword_follow_the_code() {
    // BCH over GF(2^m), m the bits needed to index the codeword's bits: ceil(m * t / 8).
    assert_eq!(EccModel::bch(512, 4).check_bytes, 7); // m = 13
    assert_eq!(EccModel::bch(512, 8).check_bytes, 13);
    assert_eq!(EccModel::bch(1024, 8).check_bytes, 14); // m = 14
    assert_eq!(EccModel::bch(1024, 24).check_bytes, 42);
    assert_eq!(EccModel::bch(256, 1).check_bytes, 2); // m = 12
    let h = EccModel::hamming(256);
    assert_eq!(
        (
            h.codeword_bytes,
            h.correctable_bits,
            h.check_bytes,
            h.scrub_threshold_bits
        ),
        (256, 1, 3, 1)
    );
    assert_eq!(EccModel::bch(512, 4).oob_ecc_bytes(2048), 28);
    assert_eq!(h.oob_ecc_bytes(512), 6);
}

#[test]
fn presets_leave_the_documented_free_oob() {
    for (name, ecc, free) in [
        ("slc-1g", 28, 34),
        ("mlc-1g", 28, 34),
        ("tlc-1g", 56, 70),
        ("smallblock-64m", 6, 8),
        ("smallblock-64m-mtd", 6, 8),
        ("mnfs-128m", 6, 8),
        ("mlc-8k", 112, 334),
        ("tiny", 28, 34),
    ] {
        let c = preset(name).unwrap();
        let g = c.geometry;
        assert_eq!(
            (Geometry::OOB_BBM_BYTES, g.oob_free_offset()),
            (2, 2),
            "{name}"
        );
        assert_eq!(g.oob_ecc_bytes, ecc, "{name}");
        assert_eq!(g.oob_free_bytes(), free, "{name}");
        assert_eq!(g.oob_free_range(), 2..2 + free, "{name}");
        assert_eq!(g.oob_ecc_offset(), 2 + free, "{name}");
        assert_eq!(2 + free + ecc as usize, g.oob_size_bytes as usize, "{name}");
        c.validate().unwrap();
    }
}

/// Programs one page with the given OOB and checks the stored layout against an
/// independent computation of the check bytes.
fn check_layout(config: DeviceConfig) {
    let mut dev = FlashDevice::ram(config.clone()).unwrap();
    let g = dev.geometry();
    let cw = config.ecc.codeword_bytes as usize;
    let per = config.ecc.check_bytes as usize;
    let addr = PageAddr::new(0, 1, 0);
    let (data, oob) = page_bytes(&g, 42);
    dev.program_page(addr, &data, &oob).unwrap();
    let raw = dev.raw_page(addr).unwrap();
    let (d, o) = raw.split_at(g.page_size_bytes as usize);
    assert_eq!(d, &data[..]);
    // Marker and free bytes: exactly the caller's.
    assert_eq!(&o[..g.oob_ecc_offset()], &oob[..g.oob_ecc_offset()]);
    // ECC area: the check bytes of each data codeword, in order.
    let mut want = Vec::new();
    for codeword in data.chunks(cw) {
        want.extend(expected_check(codeword, per));
    }
    assert_eq!(want.len(), g.oob_ecc_bytes as usize);
    assert_eq!(&o[g.oob_ecc_offset()..], &want[..]);
    // Reads return the stored page; an OOB read the stored OOB.
    let (rd, ro, ecc) = read(&mut dev, addr).unwrap();
    assert_eq!(ecc, Default::default());
    assert!(rd == data);
    assert_eq!(ro, o);
    let mut oob_only = vec![0; g.oob_size_bytes as usize];
    dev.read_oob(addr, &mut oob_only).unwrap();
    assert_eq!(oob_only, o);
    // Whatever the caller passes in the ECC area is replaced, as a hardware ECC engine does.
    let mut junk = oob.clone();
    junk[g.oob_ecc_offset()..].fill(0x00);
    dev.program_page(addr.block_addr().page(1), &data, &junk)
        .unwrap();
    let raw1 = dev.raw_page(addr.block_addr().page(1)).unwrap();
    assert_eq!(raw1, raw);
}

#[test]
fn check_bytes_land_in_the_ecc_area_and_the_free_area_reads_back_exactly() {
    check_layout(large_page());
    check_layout(smallblock());
    check_layout(no_bit_errors(preset("mlc-8k").unwrap()));
}

#[test]
fn small_page_parts_keep_eight_free_oob_bytes() {
    let c = smallblock();
    let g = c.geometry;
    assert_eq!((g.page_size_bytes, g.oob_size_bytes), (512, 16));
    assert_eq!(g.oob_free_range(), 2..10);
    assert_eq!(g.oob_ecc_offset(), 10);
    let mut dev = FlashDevice::ram(c.clone()).unwrap();
    let addr = PageAddr::new(0, 3, 0);
    let data: Vec<u8> = (0..512).map(|i| (i % 251) as u8).collect();
    let mut oob = vec![0xFF; 16];
    oob[2..10].copy_from_slice(b"FREE8BYT");
    dev.program_page(addr, &data, &oob).unwrap();
    let (d, o, _) = read(&mut dev, addr).unwrap();
    assert!(d == data);
    assert_eq!(&o[..10], b"\xFF\xFFFREE8BYT");
    assert_eq!(&o[10..13], &expected_check(&data[..256], 3)[..]);
    assert_eq!(&o[13..16], &expected_check(&data[256..], 3)[..]);
}

#[test]
fn an_all_ff_page_programmed_explicitly_reads_fine() {
    for config in [large_page(), smallblock()] {
        let mut dev = FlashDevice::ram(config.clone()).unwrap();
        let g = dev.geometry();
        let addr = PageAddr::new(0, 2, 0);
        let data = vec![0xFF; g.page_size_bytes as usize];
        let oob = vec![0xFF; g.oob_size_bytes as usize];
        dev.program_page(addr, &data, &oob).unwrap();
        // The check bytes of an all-0xFF codeword are not all 0xFF: the page is programmed.
        let raw = dev.raw_page(addr).unwrap();
        let ecc_area = &raw[g.page_size_bytes as usize + g.oob_ecc_offset()..];
        assert!(ecc_area.iter().any(|&b| b != 0xFF));
        assert_eq!(
            &raw[g.page_size_bytes as usize..],
            &stored(&config, &data, &oob)[..]
        );
        let (d, o, ecc) = read(&mut dev, addr).unwrap();
        assert_eq!(ecc, Default::default());
        assert!(d.iter().all(|&b| b == 0xFF));
        assert!(o[..g.oob_ecc_offset()].iter().all(|&b| b == 0xFF));
        assert_eq!(dev.stats().total().uncorrectable_reads, 0);
    }
}

/// Outcomes of full reads of torn pages.
#[derive(Debug, Default)]
struct Outcomes {
    /// The intended data came back (every codeword matched its stored check).
    exact: u32,
    /// Nothing was programmed: the page still reads as erased.
    erased: u32,
    uncorrectable: u32,
}

/// Cuts power during the program of page 1 of block 1, for each seed; checks every full
/// read of the torn page either returns the intended data, fails Uncorrectable, or finds a
/// page on which nothing was programmed at all. Never other data.
fn torn_programs(
    config: &DeviceConfig,
    seeds: std::ops::Range<u64>,
    make: impl Fn(&Geometry, u64) -> (Vec<u8>, Vec<u8>),
) -> Outcomes {
    let mut out = Outcomes::default();
    let cw = config.ecc.codeword_bytes as usize;
    let per = config.ecc.check_bytes as usize;
    for seed in seeds {
        let c = config.clone().with_seed(seed);
        let mut dev = FlashDevice::ram(c.clone()).unwrap();
        let g = dev.geometry();
        let b = BlockAddr::new(0, 1);
        let (d0, o0) = page_bytes(&g, seed + 1_000);
        dev.program_page(b.page(0), &d0, &o0).unwrap();
        let before = raw_of(&d0, &stored(&c, &d0, &o0));
        let (data, oob) = make(&g, seed);
        dev.arm_power_cut(PowerCut::AtOp(0));
        let r = dev.program_page(b.page(1), &data, &oob);
        assert!(
            matches!(r, Err(FlashError::PowerLost)),
            "seed {seed}: {r:?}"
        );
        dev.power_cycle().unwrap();
        let intended = stored(&c, &data, &oob);
        let raw = dev.raw_page(b.page(1)).unwrap();
        let reads_before = dev.stats().total().uncorrectable_reads;
        match read(&mut dev, b.page(1)) {
            Ok((d, o, _)) if d == data => {
                // Every codeword matched: its check bytes are the intended ones (or it is an
                // all-0xFF codeword whose check bytes were never programmed).
                let area = &o[g.oob_ecc_offset()..];
                let want = &intended[g.oob_ecc_offset()..];
                for (i, codeword) in data.chunks(cw).enumerate() {
                    let (got, want) = (&area[i * per..][..per], &want[i * per..][..per]);
                    let erased = codeword.iter().chain(got).all(|&x| x == 0xFF);
                    assert!(got == want || erased, "seed {seed}: codeword {i}");
                }
                out.exact += 1;
            }
            Ok((d, o, _)) => {
                assert!(
                    raw.iter().all(|&x| x == 0xFF),
                    "seed {seed}: a torn page read back different data without an error"
                );
                assert!(d.iter().chain(&o).all(|&x| x == 0xFF));
                out.erased += 1;
            }
            Err(FlashError::Uncorrectable { addr, codewords }) => {
                assert_eq!(addr, b.page(1));
                assert!(codewords >= 1);
                // The stored bytes come back, as MTD returns them with -EBADMSG.
                let (mut d, mut o) = (vec![0; data.len()], vec![0; oob.len()]);
                let _ = dev.read_page(b.page(1), &mut d, &mut o);
                assert_eq!(raw_of(&d, &o), raw, "seed {seed}");
                assert_eq!(dev.stats().total().uncorrectable_reads, reads_before + 2);
                out.uncorrectable += 1;
            }
            Err(e) => panic!("seed {seed}: {e}"),
        }
        // An OOB read cannot check the data and does not.
        let mut o = vec![0; g.oob_size_bytes as usize];
        dev.read_oob(b.page(1), &mut o).unwrap();
        assert_eq!(o, &raw[g.page_size_bytes as usize..]);
        // The page before is untouched, and the torn page is used up.
        assert_eq!(read_raw(&mut dev, b.page(0)).unwrap(), before);
        let r = dev.program_page(b.page(1), &data, &oob);
        assert!(matches!(r, Err(FlashError::NotErased(_))), "{r:?}");
    }
    out
}

#[test]
fn torn_programs_read_back_exactly_or_fail_uncorrectable() {
    let seeds = 0..300;
    for (name, config) in [("tiny", large_page()), ("smallblock", smallblock())] {
        let cw = config.ecc.codeword_bytes as usize;
        let dense = torn_programs(&config, seeds.clone(), page_bytes);
        let sparse = torn_programs(&config, seeds.clone(), |g, s| sparse_bytes(g, s, cw));
        // Nearly every tear leaves a codeword or its check bytes half-written.
        assert!(dense.uncorrectable > 250, "{name} dense: {dense:?}");
        assert!(sparse.uncorrectable > 200, "{name} sparse: {sparse:?}");
    }
}

#[test]
fn torn_erases_leave_pages_that_fail_or_read_erased() {
    let mut failed = 0;
    for seed in 0..60 {
        for config in [large_page(), smallblock()] {
            let cw = config.ecc.codeword_bytes as usize;
            let mut dev = FlashDevice::ram(config.with_seed(seed)).unwrap();
            let g = dev.geometry();
            let b = BlockAddr::new(0, 2);
            for p in 0..6 {
                let (data, oob) = if p % 2 == 0 {
                    page_bytes(&g, seed * 100 + p)
                } else {
                    sparse_bytes(&g, seed * 100 + p, cw)
                };
                dev.program_page(b.page(p as u32), &data, &oob).unwrap();
                // Read clean before the erase: the chip must not trust that check after it.
                assert!(read(&mut dev, b.page(p as u32)).is_ok());
            }
            dev.arm_power_cut(PowerCut::AtOp(0));
            assert!(matches!(dev.erase_block(b), Err(FlashError::PowerLost)));
            dev.power_cycle().unwrap();
            assert!(dev.block_info(b).unwrap().erase_torn);
            for p in 0..g.pages_per_block {
                match read(&mut dev, b.page(p)) {
                    Ok((d, _, _)) => {
                        assert!(
                            d.iter().all(|&x| x == 0xFF),
                            "seed {seed} page {p}: half-erased data read without an error"
                        );
                        // Pages that were erased stay erased, and read so.
                        if p >= 6 {
                            assert_eq!(dev.raw_page(b.page(p)).unwrap(), erased_raw(&g));
                        }
                    }
                    Err(FlashError::Uncorrectable { .. }) => {
                        assert!(p < 6, "seed {seed}: erased page {p} failed ECC");
                        failed += 1;
                    }
                    Err(e) => panic!("seed {seed} page {p}: {e}"),
                }
            }
        }
    }
    assert!(failed > 600, "{failed} of 720 half-erased pages failed ECC");
}

#[test]
fn a_byte_changed_in_an_image_file_is_uncorrectable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flash.img");
    let config = large_page().with_total_bytes(2 << 20).unwrap();
    let mut dev =
        FlashDevice::create_image(&path, config.clone(), false, DeviceOptions::default()).unwrap();
    let g = dev.geometry();
    let addr = PageAddr::new(0, 3, 2);
    for p in 0..=addr.page {
        program_tagged(&mut dev, addr.block_addr().page(p)).unwrap();
    }
    let (data, oob) = page_bytes(&g, tag(addr));
    drop(dev);

    let raw = g.raw_page_bytes();
    let page_off = ((addr.block * g.pages_per_block + addr.page) as usize) * raw;
    let edit = |offset: usize, f: &dyn Fn(u8) -> u8| {
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[page_off + offset] = f(bytes[page_off + offset]);
        std::fs::write(&path, bytes).unwrap();
    };
    let reopen = || FlashDevice::open_image(&path, DeviceOptions::default()).unwrap();

    // One bit of data codeword 1 flipped on disk.
    edit(600, &|b| b ^ 0x10);
    let mut dev = reopen();
    let (mut d, mut o) = (vec![0; data.len()], vec![0; oob.len()]);
    assert_uncorrectable(dev.read_page(addr, &mut d, &mut o), 1, "data bit flipped");
    assert_eq!(d[600], data[600] ^ 0x10, "the stored bytes come back");
    assert_eq!(d[..600], data[..600]);
    assert_eq!(dev.stats().total().uncorrectable_reads, 1);
    // Other pages are unaffected, and the OOB alone reads fine.
    read(&mut dev, addr.block_addr().page(1)).unwrap();
    dev.read_oob(addr, &mut o).unwrap();
    // Random bit errors beyond t in another codeword: two codewords, counted once each.
    dev.inject_bit_errors(addr, 3, 5).unwrap();
    assert_uncorrectable(read(&mut dev, addr), 2, "stored damage and bit errors");
    dev.inject_bit_errors(addr, 1, 5).unwrap();
    assert_uncorrectable(read(&mut dev, addr), 2, "both in one codeword");
    drop(dev);
    edit(600, &|b| b ^ 0x10);
    let mut dev = reopen();
    assert_eq!(
        read_raw(&mut dev, addr).unwrap(),
        stored_raw(&g, &data, &oob)
    );
    drop(dev);

    // A changed check byte is caught too.
    let ecc_byte = g.page_size_bytes as usize + g.oob_ecc_offset() + 7 * 2;
    edit(ecc_byte, &|b| !b);
    assert_uncorrectable(read(&mut reopen(), addr), 1, "check byte changed");
    edit(ecc_byte, &|b| !b);

    // The free OOB bytes are not covered (as with MTD's software ECC): a file system
    // checks its own tags.
    let free_byte = g.page_size_bytes as usize + g.oob_free_offset() + 5;
    edit(free_byte, &|b| b ^ 1);
    let (d, o, _) = read(&mut reopen(), addr).unwrap();
    assert!(d == data);
    assert_eq!(o[g.oob_free_offset() + 5], oob[g.oob_free_offset() + 5] ^ 1);
}

#[test]
fn inconsistent_ecc_layouts_are_refused() {
    let expect_invalid = |c: DeviceConfig, what: &str| {
        let r = FlashDevice::ram(c.clone());
        assert!(
            matches!(r, Err(FlashError::InvalidGeometry(_))),
            "{what}: {:?}",
            r.err()
        );
        let dir = tempfile::tempdir().unwrap();
        let r = FlashDevice::create_image(
            &dir.path().join("x.img"),
            c,
            false,
            DeviceOptions::default(),
        );
        assert!(
            matches!(r, Err(FlashError::InvalidGeometry(_))),
            "{what}: {:?}",
            r.err()
        );
    };
    let mut c = large_page();
    c.geometry.oob_ecc_bytes = 27;
    expect_invalid(c, "one byte short of 4 x 7");
    let mut c = large_page();
    c.ecc = EccModel::hamming(256);
    expect_invalid(c, "BCH's 28 bytes with Hamming's 8 x 3 = 24");
    let mut c = large_page();
    c.ecc.codeword_bytes = 1000;
    expect_invalid(c, "codewords that do not divide the page");
    let mut c = smallblock();
    c.geometry.oob_ecc_bytes = 15;
    expect_invalid(c, "ECC over the bad block marker");
    // The message says what would be consistent.
    let mut c = large_page();
    c.geometry.oob_ecc_bytes = 27;
    let msg = c.validate().unwrap_err().to_string();
    assert!(msg.contains("28") && msg.contains("27"), "{msg}");
}

#[test]
fn legacy_configs_store_and_check_nothing() {
    let mut c = large_page();
    c.geometry.oob_ecc_bytes = 0;
    c.validate().unwrap();
    let g = c.geometry;
    assert_eq!(g.oob_free_bytes(), 62);
    assert_eq!(g.oob_ecc_offset(), 64);
    let mut dev = FlashDevice::ram(c.clone()).unwrap();
    let addr = PageAddr::new(0, 1, 0);
    let (data, oob) = page_bytes(&g, 5);
    dev.program_page(addr, &data, &oob).unwrap();
    assert_eq!(dev.raw_page(addr).unwrap(), raw_of(&data, &oob));
    assert_eq!(read_raw(&mut dev, addr).unwrap(), raw_of(&data, &oob));
    // A torn program reads back without an error, as before stored ECC.
    let mut silent = 0;
    for seed in 0..20 {
        let mut dev = FlashDevice::ram(c.clone().with_seed(seed)).unwrap();
        dev.arm_power_cut(PowerCut::AtOp(0));
        let _ = dev.program_page(addr, &data, &oob);
        dev.power_cycle().unwrap();
        let got = read_raw(&mut dev, addr).unwrap();
        assert_eq!(got, dev.raw_page(addr).unwrap());
        silent += u32::from(got != raw_of(&data, &oob));
    }
    assert_eq!(silent, 20);
}

#[test]
fn an_old_sidecar_without_ecc_fields_opens_as_legacy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.img");
    let config = large_page().with_total_bytes(2 << 20).unwrap();
    let addr = PageAddr::new(0, 1, 0);
    let mut dev =
        FlashDevice::create_image(&path, config, false, DeviceOptions::default()).unwrap();
    let written = program_tagged(&mut dev, addr).unwrap();
    drop(dev);
    // Strip the fields this change added, as a sidecar written before it lacks them.
    let side = nandkit_flash::backend::file::sidecar_path(&path);
    let mut bytes = std::fs::read(&side).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(bytes[..4096].trim_ascii_end()).unwrap();
    let c = v["config"].as_object_mut().unwrap();
    assert!(c["geometry"]
        .as_object_mut()
        .unwrap()
        .remove("oob_ecc_bytes")
        .is_some());
    assert!(c["ecc"]
        .as_object_mut()
        .unwrap()
        .remove("check_bytes")
        .is_some());
    let mut text = serde_json::to_vec(&v).unwrap();
    text.resize(4096, b' ');
    bytes[..4096].copy_from_slice(&text);
    std::fs::write(&side, bytes).unwrap();

    let mut dev = FlashDevice::open_image(&path, DeviceOptions::default()).unwrap();
    assert_eq!(dev.config().geometry.oob_ecc_bytes, 0);
    assert_eq!(dev.config().ecc.check_bytes, 0);
    assert_eq!(read_raw(&mut dev, addr).unwrap(), written);
    let next = addr.block_addr().page(1);
    let (data, oob) = page_bytes(&dev.geometry(), 9);
    dev.program_page(next, &data, &oob).unwrap();
    assert_eq!(dev.raw_page(next).unwrap(), raw_of(&data, &oob));
}
