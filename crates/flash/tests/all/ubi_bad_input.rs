//! UBI images that are damaged or malformed, put on a chip as `ubiformat -f` would
//! ([`raw::import`]): every attach gives a clear answer (the data, or an error saying what
//! is wrong), never a panic and never another LEB's bytes.

use std::io::Cursor;

use crate::common::*;
use nandkit_flash::ubi::raw::{self, RawKind};
use nandkit_flash::ubi::vtbl::LAYOUT_VOLUME_ID;
use nandkit_flash::ubi::{AttachOptions, Ubi, UbiParams, FS_VOLUME_ID};
use nandkit_flash::{preset, Flash, FlashDevice, StripedFlash};

fn chip() -> FlashDevice {
    let mut c = no_bit_errors(preset("tiny").unwrap());
    c.wear.factory_bad_fraction = 0.0;
    FlashDevice::ram(c).unwrap()
}

/// A raw image of a fresh UBI with LEBs 0..3 of the file system's volume written (LEB k's
/// pages all `0x10 + k`), and the PEB holding each of them.
fn image() -> (Vec<u8>, Vec<u32>) {
    let mut s = StripedFlash::format_ubi(chip(), UbiParams::default()).unwrap();
    for leb in 0..3 {
        write_leb(&mut s, leb, 4, u64::from(leb)).unwrap();
    }
    let pebs = (0..3)
        .map(|l| s.ubi().unwrap().peb_of(0, l).unwrap())
        .collect();
    let mut dev = s.into_inner();
    let mut out = Vec::new();
    raw::export(&mut dev, 0, &mut out, RawKind::Plain, |_| {}).unwrap();
    (out, pebs)
}

/// Puts `bytes` on a fresh chip and attaches it read-only.
fn attach(bytes: &[u8]) -> (FlashDevice, Result<Ubi, nandkit_flash::FlashError>) {
    let mut dev = chip();
    raw::import(&mut dev, 0, Cursor::new(bytes), RawKind::Plain, |_| {}).unwrap();
    let ubi = Ubi::attach(&mut dev, true, AttachOptions::default());
    (dev, ubi)
}

fn peb_bytes() -> usize {
    let g = preset("tiny").unwrap().geometry;
    (g.page_size_bytes * g.pages_per_block) as usize
}

#[test]
fn a_truncated_image_is_refused_with_where_it_ends() {
    let (img, _) = image();
    let g = preset("tiny").unwrap().geometry;
    let cut = &img[..peb_bytes() * 2 + 100];
    let err = raw::detect(
        cut,
        cut.len() as u64,
        g.page_size_bytes,
        g.oob_size_bytes,
        64,
    )
    .unwrap_err();
    assert!(err.contains("not a whole number"), "{err}");
    let err = raw::import(&mut chip(), 0, Cursor::new(cut), RawKind::Plain, |_| {}).unwrap_err();
    assert!(err.to_string().contains("short of a whole block"), "{err}");
    let err = raw::detect(&[0u8; 300], 300, 2048, 64, 64).unwrap_err();
    assert!(err.contains("does not start with a UBI EC header"), "{err}");
}

/// A flipped bit in any byte of the EC or the VID header of the PEB holding LEB 1: the CRC
/// catches it. A damaged EC header costs the counter, not the data (Linux gives the PEB the
/// mean count); a damaged VID header loses that LEB, which then reads erased; every other
/// LEB reads back whole.
#[test]
fn a_flipped_bit_in_any_header_field_is_caught() {
    let (img, pebs) = image();
    let page = preset("tiny").unwrap().geometry.page_size_bytes as usize;
    let at = pebs[1] as usize * peb_bytes();
    for (header, offset) in [("EC", at), ("VID", at + page)] {
        // One bit of every byte, a different bit position from byte to byte.
        for bit in (0..64).map(|byte| byte * 8 + byte % 8) {
            let mut bad = img.clone();
            bad[offset + bit / 8] ^= 1 << (bit % 8);
            let (mut dev, ubi) = attach(&bad);
            let ubi = ubi.unwrap_or_else(|e| panic!("{header} bit {bit}: {e}"));
            let leb1 = ubi.read_leb(&mut dev, 0, FS_VOLUME_ID, 1).unwrap().unwrap();
            if header == "EC" {
                assert!(
                    leb1[..page].iter().all(|&b| b != 0xFF),
                    "{header} bit {bit}"
                );
            } else {
                assert!(
                    leb1.iter().all(|&b| b == 0xFF),
                    "{header} bit {bit}: LEB 1 kept"
                );
            }
            for leb in [0, 2] {
                let data = ubi
                    .read_leb(&mut dev, 0, FS_VOLUME_ID, leb)
                    .unwrap()
                    .unwrap();
                assert_eq!(data, leb_bytes(leb, &dev), "{header} bit {bit}: LEB {leb}");
            }
        }
    }
}

/// LEB `leb`'s bytes as [`image`] wrote them (4 pages, the rest erased).
fn leb_bytes(leb: u32, dev: &FlashDevice) -> Vec<u8> {
    let g = dev.geometry();
    let mut want = Vec::new();
    for k in 0..g.pages_per_block - 2 {
        if k < 4 {
            want.extend(page_bytes(&g, u64::from(leb) * 1000 + u64::from(k)).0);
        } else {
            want.extend(vec![0xFF; g.page_size_bytes as usize]);
        }
    }
    want
}

/// A PEB copied whole onto a free one: two PEBs claim one LEB with one sequence number,
/// which Linux refuses as it cannot tell which is newer; so does this.
#[test]
fn two_pebs_with_the_same_leb_and_sequence_number_are_refused() {
    let (mut img, pebs) = image();
    let n = peb_bytes();
    let free = (0..img.len() / n)
        .find(|&p| {
            !pebs.contains(&(p as u32))
                && img[p * n + 2048..p * n + 4096].iter().all(|&b| b == 0xFF)
        })
        .unwrap();
    let src = img[pebs[2] as usize * n..][..n].to_vec();
    img[free * n..][..n].copy_from_slice(&src);
    let (_, ubi) = attach(&img);
    let err = ubi.err().expect("refused").to_string();
    assert!(err.contains("both hold LEB 2 of volume 0"), "{err}");
}

/// A volume table copy whose CRC fails: the other copy serves (and a writable attach
/// writes the bad one again); with both bad the attach is refused, saying why.
#[test]
fn a_volume_table_that_fails_its_crc_is_not_used() {
    let (img, _) = image();
    let n = peb_bytes();
    let mut dev = chip();
    raw::import(&mut dev, 0, Cursor::new(&img[..]), RawKind::Plain, |_| {}).unwrap();
    let ubi = Ubi::attach(&mut dev, true, AttachOptions::default()).unwrap();
    let layout: Vec<u32> = (0u32..)
        .zip(ubi.pebs_of(0))
        .filter(|(_, (_, h))| matches!(h, Some((v, _)) if *v == LAYOUT_VOLUME_ID))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(layout.len(), 2);
    // A byte of the first record (the file system's volume) in the first copy.
    let mut one = img.clone();
    one[layout[0] as usize * n + 2 * 2048 + 20] ^= 0x40;
    let (dev, ubi) = attach(&one);
    let ubi = ubi.expect("the other copy serves");
    assert!(ubi.fs_volume().is_some());
    let mut w = StripedFlash::attach_ubi(dev, false).unwrap();
    assert_eq!(w.ubi_check().unwrap(), Vec::<String>::new(), "rewritten");
    let mut both = one.clone();
    both[layout[1] as usize * n + 2 * 2048 + 20] ^= 0x40;
    let (_, ubi) = attach(&both);
    let err = ubi.err().expect("refused").to_string();
    assert!(
        err.contains("no valid UBI volume table") && err.contains("CRC"),
        "{err}"
    );
}

/// An old nandkit header (40 bytes: magic, version 1, the fields at their offsets, a
/// CRC-32C of the first 36), as nandkit wrote them up to 2026-12-07, in a page of 0xFF.
fn old_header(magic: &[u8; 4], fields: &[(usize, &[u8])], page: usize) -> Vec<u8> {
    let mut b = vec![0u8; 36];
    b[..4].copy_from_slice(magic);
    b[4] = 1;
    for (at, bytes) in fields {
        b[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b.resize(page, 0xFF);
    b
}

/// A tiny chip in the old format: 13 LEBs (16 PEBs less a bad-block limit of 1 and 2), LEB
/// 2 - k in PEB k for k < 3 with 5 pages each (data and OOB as `page_bytes` makes them).
fn old_format_chip() -> FlashDevice {
    let mut dev = chip();
    let g = dev.geometry();
    let page = g.page_size_bytes as usize;
    let oob = vec![0xFF; g.oob_size_bytes as usize];
    let seq = 0x1234_5679u32.to_le_bytes();
    for block in 0..g.blocks_per_chip {
        let addr = nandkit_flash::BlockAddr::new(0, block);
        dev.erase_block(addr).unwrap();
        let ec = old_header(
            b"UBI#",
            &[
                (8, &3u64.to_le_bytes()),
                (16, &13u32.to_le_bytes()),
                (20, &1u32.to_le_bytes()),
                (24, &4096u32.to_le_bytes()),
                (28, &seq),
            ],
            page,
        );
        dev.program_page(addr.page(0), &ec, &oob).unwrap();
        if block < 3 {
            let leb = 2 - block;
            let vid = old_header(
                b"UBI!",
                &[
                    (8, &leb.to_le_bytes()),
                    (16, &u64::from(block + 1).to_le_bytes()),
                    (28, &seq),
                ],
                page,
            );
            dev.program_page(addr.page(1), &vid, &oob).unwrap();
            for k in 0..5u32 {
                let (d, o) = page_bytes(&g, u64::from(leb) * 1000 + u64::from(k));
                dev.program_page(addr.page(2 + k), &d, &o).unwrap();
            }
        }
    }
    dev
}

/// An image in the old format is refused with the conversion command; the conversion
/// keeps every LEB (its data and OOB) where it was, at the same LEB count, in a format
/// that attaches clean.
#[test]
fn an_image_of_the_old_format_is_refused_and_converts_keeping_every_leb() {
    let err = StripedFlash::attach_ubi(old_format_chip(), true)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("nandkit ubi convert"), "{err}");
    let mut dev = old_format_chip();
    let done = nandkit_flash::ubi::legacy::convert(&mut dev).unwrap();
    assert_eq!(
        (done.lebs_per_chip, done.lebs_moved, done.parity),
        (13, 3, false)
    );
    let mut s = StripedFlash::attach_ubi(dev, false).unwrap();
    assert_eq!(s.geometry().blocks_per_chip, 13, "the LEB count is kept");
    assert_eq!(s.ubi_check().unwrap(), Vec::<String>::new());
    let g = s.geometry();
    for leb in 0..3u32 {
        for k in 0..6u32 {
            let mut data = vec![0; g.page_size_bytes as usize];
            let mut oob = vec![0; g.oob_size_bytes as usize];
            s.read_page(nandkit_flash::PageAddr::new(0, leb, k), &mut data, &mut oob)
                .unwrap();
            if k < 5 {
                let (d, o) = page_bytes(&g, u64::from(leb) * 1000 + u64::from(k));
                assert_eq!(data, d, "LEB {leb} page {k}");
                let free = g.oob_free_range();
                assert_eq!(oob[free.clone()], o[free], "LEB {leb} page {k}'s OOB");
            } else {
                assert!(data.iter().all(|&b| b == 0xFF), "LEB {leb} page {k}");
            }
        }
    }
}

/// Two PEBs holding one LEB with different data: the one with the higher sequence number
/// wins (an old PEB whose erase a cut prevented loses to the LEB's new mapping), unless
/// the newer one is a copy whose data fails its CRC (a wear-levelling move cut short), when
/// the older stands.
#[test]
fn of_two_pebs_holding_one_leb_the_newer_wins_unless_it_is_a_torn_copy() {
    use nandkit_flash::ubi::header::{Parsed, VidHeader};
    let (img, pebs) = image();
    let n = peb_bytes();
    let page = 2048;
    let free = (0..img.len() / n)
        .find(|&p| {
            !pebs.contains(&(p as u32))
                && img[p * n + page..p * n + 2 * page]
                    .iter()
                    .all(|&b| b == 0xFF)
        })
        .unwrap();
    let src = pebs[2] as usize * n;
    let Parsed::Valid(old) = VidHeader::decode(&img[src + page..]) else {
        panic!("LEB 2's VID header");
    };
    // The same LEB again at `free`, newer, its first data page changed.
    let newer = |copy: Option<u32>| {
        let mut bad = img.clone();
        bad.copy_within(src..src + n, free * n);
        let vid = VidHeader {
            sqnum: old.sqnum + 100,
            copy: copy.is_some(),
            data_size: if copy.is_some() { 4 * page as u32 } else { 0 },
            data_crc: copy.unwrap_or(0),
            ..old
        };
        bad[free * n + page..free * n + page + 64].copy_from_slice(&vid.encode());
        bad[free * n + 2 * page..free * n + 3 * page].fill(0x5A);
        bad
    };
    let first_page = |bytes: &[u8]| -> Vec<u8> {
        let (mut dev, ubi) = attach(bytes);
        let leb = ubi
            .unwrap()
            .read_leb(&mut dev, 0, FS_VOLUME_ID, 2)
            .unwrap()
            .unwrap();
        leb[..page].to_vec()
    };
    assert_eq!(
        first_page(&newer(None)),
        vec![0x5A; page],
        "the newer mapping wins"
    );
    // A copy whose CRC does not cover what it holds: torn, so the older PEB stands.
    let kept = first_page(&newer(Some(0x1234_5678)));
    assert_ne!(kept, vec![0x5A; page], "a torn copy is not taken");
    assert_eq!(
        kept,
        page_bytes(&chip().geometry(), 2000).0,
        "LEB 2's own first page"
    );
}
