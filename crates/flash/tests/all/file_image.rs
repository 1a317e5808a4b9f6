//! File images: nanddump layout, byte-exact persistence, and refusal of damaged images.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::common::*;
use nandkit_flash::backend::file::sidecar_path;
use nandkit_flash::{
    BlockAddr, BlockInfo, DeviceConfig, DeviceOptions, Flash, FlashDevice, FlashError, PageAddr,
};

const HEADER_BYTES: u64 = 4096;
const RECORD_BYTES: u64 = 16;

/// tiny cut to 16 blocks and split over two chips: 8 blocks of 64 pages per chip.
fn config() -> DeviceConfig {
    no_bit_errors(tiny())
        .with_total_bytes(2 << 20)
        .unwrap()
        .with_chips(2)
        .unwrap()
}

fn create(path: &Path) -> FlashDevice {
    FlashDevice::create_image(path, config(), false, DeviceOptions::default()).unwrap()
}

fn open(path: &Path) -> Result<FlashDevice, FlashError> {
    FlashDevice::open_image(path, DeviceOptions::default())
}

fn image(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("flash.img")
}

fn all_blocks(dev: &FlashDevice) -> Vec<BlockAddr> {
    let g = dev.geometry();
    (0..g.chips)
        .flat_map(|c| (0..g.blocks_per_chip).map(move |b| BlockAddr::new(c, b)))
        .collect()
}

fn raw_pages(dev: &mut FlashDevice) -> Vec<Vec<u8>> {
    let ppb = dev.geometry().pages_per_block;
    all_blocks(dev)
        .into_iter()
        .flat_map(|b| (0..ppb).map(move |p| b.page(p)))
        .map(|a| dev.raw_page(a).unwrap())
        .collect()
}

fn infos(dev: &mut FlashDevice) -> Vec<BlockInfo> {
    all_blocks(dev)
        .into_iter()
        .map(|b| dev.block_info(b).unwrap())
        .collect()
}

/// Programs, erases and a bad-block mark on both chips. Returns (programmed block, its next
/// free page) for a later write-pointer check.
fn fill(dev: &mut FlashDevice) -> (BlockAddr, u32) {
    for p in 0..5 {
        program_tagged(dev, PageAddr::new(0, 1, p)).unwrap();
    }
    for p in 0..64 {
        program_tagged(dev, PageAddr::new(1, 2, p)).unwrap();
    }
    for _ in 0..3 {
        dev.erase_block(BlockAddr::new(0, 3)).unwrap();
    }
    program_tagged(dev, PageAddr::new(0, 4, 0)).unwrap();
    dev.erase_block(BlockAddr::new(0, 4)).unwrap();
    program_tagged(dev, PageAddr::new(1, 7, 0)).unwrap();
    dev.mark_bad(BlockAddr::new(1, 5)).unwrap();
    (BlockAddr::new(0, 1), 5)
}

#[test]
fn new_image_is_erased_and_sized_as_nanddump() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let dev = create(&path);
    let g = dev.geometry();
    assert_eq!(dev.image_path(), Some(path.as_path()));
    drop(dev);
    let bytes = std::fs::read(&path).unwrap();
    let expect = g.raw_page_bytes() as u64 * g.pages_per_chip() * u64::from(g.chips);
    assert_eq!(bytes.len() as u64, expect);
    assert!(bytes.iter().all(|&b| b == 0xFF));
    let meta = std::fs::metadata(sidecar_path(&path)).unwrap();
    assert_eq!(meta.len(), HEADER_BYTES + RECORD_BYTES * g.total_blocks());
}

#[test]
fn page_file_uses_the_nanddump_layout() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let mut dev = create(&path);
    let g = dev.geometry();
    let mut written = Vec::new();
    for addr in [
        PageAddr::new(0, 0, 0),
        PageAddr::new(0, 0, 1),
        PageAddr::new(0, 6, 0),
        PageAddr::new(1, 0, 0),
        PageAddr::new(1, 3, 0),
        PageAddr::new(1, 3, 1),
        PageAddr::new(1, 3, 2),
        PageAddr::new(1, 7, 0),
    ] {
        written.push((addr, program_tagged(&mut dev, addr).unwrap()));
    }
    dev.sync().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let raw = g.raw_page_bytes();
    let mut expected = vec![0xFFu8; bytes.len()];
    for (a, want) in &written {
        let index = (u64::from(a.chip) * u64::from(g.blocks_per_chip) + u64::from(a.block))
            * u64::from(g.pages_per_block)
            + u64::from(a.page);
        let off = index as usize * raw;
        // Data first, then OOB.
        assert_eq!(&bytes[off..off + raw], &want[..], "{a}");
        let (data, oob) = page_bytes(&g, tag(*a));
        assert_eq!(&bytes[off..off + g.page_size_bytes as usize], &data[..]);
        // The OOB holds the caller's bytes, the check bytes in its ECC area.
        let stored = &bytes[off + g.page_size_bytes as usize..off + raw];
        assert_eq!(&stored[..g.oob_ecc_offset()], &oob[..g.oob_ecc_offset()]);
        assert_eq!(stored, &stored_oob(&g, &data, &oob)[..]);
        expected[off..off + raw].copy_from_slice(want);
    }
    // And nothing else was written.
    assert!(
        bytes == expected,
        "bytes outside the programmed pages changed"
    );
}

#[test]
fn reopened_image_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let mut dev = create(&path);
    fill(&mut dev);
    let pages = raw_pages(&mut dev);
    let records = infos(&mut dev);
    let config = dev.config().clone();
    drop(dev);
    let file = std::fs::read(&path).unwrap();
    let side = std::fs::read(sidecar_path(&path)).unwrap();

    let mut dev = open(&path).unwrap();
    assert_eq!(dev.config(), &config);
    assert_eq!(raw_pages(&mut dev), pages);
    assert_eq!(infos(&mut dev), records);
    drop(dev);
    assert!(std::fs::read(&path).unwrap() == file, "page file changed");
    assert!(
        std::fs::read(sidecar_path(&path)).unwrap() == side,
        "sidecar changed"
    );

    // The page file on disk is exactly what raw_page reported.
    let expected: Vec<u8> = pages.concat();
    assert!(file == expected);
}

#[test]
fn reopened_image_keeps_erase_counts_and_bad_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let mut dev = create(&path);
    fill(&mut dev);
    drop(dev);
    let mut dev = open(&path).unwrap();
    assert_eq!(dev.erase_count(BlockAddr::new(0, 3)).unwrap(), 3);
    assert_eq!(dev.erase_count(BlockAddr::new(0, 4)).unwrap(), 1);
    assert_eq!(dev.erase_count(BlockAddr::new(1, 2)).unwrap(), 0);
    let bad = BlockAddr::new(1, 5);
    assert!(dev.is_bad(bad).unwrap());
    assert!(dev.block_info(bad).unwrap().grown_bad);
    assert!(matches!(dev.erase_block(bad), Err(FlashError::BadBlock(_))));
    assert!(matches!(
        read(&mut dev, bad.page(0)),
        Err(FlashError::BadBlock(_))
    ));
    for b in all_blocks(&dev) {
        assert_eq!(dev.is_bad(b).unwrap(), b == bad, "{b}");
    }
}

#[test]
fn reopened_image_keeps_write_pointers() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let mut dev = create(&path);
    let (block, next) = fill(&mut dev);
    drop(dev);
    let mut dev = open(&path).unwrap();
    assert_eq!(dev.block_info(block).unwrap().write_ptr, next);
    // Programmed pages stay programmed, skipping ahead is still out of order.
    for p in 0..next {
        let r = program_tagged(&mut dev, block.page(p));
        assert!(matches!(r, Err(FlashError::NotErased(_))), "{r:?}");
    }
    let r = program_tagged(&mut dev, block.page(next + 1));
    assert!(
        matches!(r, Err(FlashError::OutOfOrder { next: n, .. }) if n == next),
        "{r:?}"
    );
    // A full block is still full.
    let r = program_tagged(&mut dev, PageAddr::new(1, 2, 63));
    assert!(matches!(r, Err(FlashError::NotErased(_))), "{r:?}");
    // The next page is where programming continues, and data reads back.
    let want = program_tagged(&mut dev, block.page(next)).unwrap();
    assert_eq!(read_raw(&mut dev, block.page(next)).unwrap(), want);
    for p in 0..next {
        let a = block.page(p);
        let (d, o) = page_bytes(&dev.geometry(), tag(a));
        assert_eq!(
            read_raw(&mut dev, a).unwrap(),
            stored_raw(&dev.geometry(), &d, &o)
        );
    }
}

#[test]
fn reopened_image_keeps_factory_bad_blocks_and_lifetimes() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let mut c = config();
    c.wear.factory_bad_fraction = 0.3;
    let mut dev =
        FlashDevice::create_image(&path, c.clone(), false, DeviceOptions::default()).unwrap();
    let before = infos(&mut dev);
    let limits: Vec<u32> = all_blocks(&dev)
        .into_iter()
        .map(|b| dev.block_endurance(b).unwrap())
        .collect();
    assert!(before.iter().any(|i| i.factory_bad));
    drop(dev);
    let mut dev = open(&path).unwrap();
    assert_eq!(infos(&mut dev), before);
    let again: Vec<u32> = all_blocks(&dev)
        .into_iter()
        .map(|b| dev.block_endurance(b).unwrap())
        .collect();
    assert_eq!(again, limits);
    // And a RAM device of the same config has the same factory bad blocks.
    let mut ram = FlashDevice::ram(c).unwrap();
    assert_eq!(infos(&mut ram), before);
}

#[test]
fn create_refuses_an_existing_image_without_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    let mut dev = create(&path);
    let want = program_tagged(&mut dev, PageAddr::new(0, 1, 0)).unwrap();
    drop(dev);
    let before = std::fs::read(&path).unwrap();
    let r = FlashDevice::create_image(&path, config(), false, DeviceOptions::default());
    assert!(r.is_err(), "created over an existing image");
    assert!(std::fs::read(&path).unwrap() == before);
    let mut dev = open(&path).unwrap();
    assert_eq!(dev.raw_page(PageAddr::new(0, 1, 0)).unwrap(), want);
    drop(dev);

    // With overwrite, the image starts over, erased.
    let mut dev =
        FlashDevice::create_image(&path, config(), true, DeviceOptions::default()).unwrap();
    let g = dev.geometry();
    assert_eq!(
        dev.raw_page(PageAddr::new(0, 1, 0)).unwrap(),
        erased_raw(&g)
    );
    assert_eq!(dev.block_info(BlockAddr::new(0, 1)).unwrap().write_ptr, 0);
}

#[test]
fn create_refuses_any_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(&dir);
    std::fs::write(&path, b"precious").unwrap();
    let r = FlashDevice::create_image(&path, config(), false, DeviceOptions::default());
    assert!(r.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
}

#[test]
fn open_missing_image_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let r = open(&dir.path().join("nope.img"));
    assert!(matches!(r, Err(FlashError::Io { .. })), "{:?}", r.err());
}

/// A fresh image with some data in it, closed.
fn closed_image(dir: &tempfile::TempDir) -> PathBuf {
    let path = image(dir);
    let mut dev = create(&path);
    fill(&mut dev);
    drop(dev);
    path
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

fn assert_bad_image(r: Result<FlashDevice, FlashError>, what: &str) {
    match r {
        Err(FlashError::BadImage { why, .. }) => assert!(!why.is_empty()),
        Err(e) => panic!("{what}: expected BadImage, got {e:?}"),
        Ok(_) => panic!("{what}: opened a damaged image"),
    }
}

#[test]
fn garbage_sidecar_header_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    patch(
        &sidecar_path(&path),
        0,
        b"\x00\xde\xad\xbe\xefnot json at all {{{",
    );
    assert_bad_image(open(&path), "garbage header start");

    // A header that is all garbage.
    let garbage: Vec<u8> = (0..HEADER_BYTES).map(|i| (i * 131 % 251) as u8).collect();
    patch(&sidecar_path(&path), 0, &garbage);
    assert_bad_image(open(&path), "garbage header");
}

#[test]
fn sidecar_of_another_format_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    let side = sidecar_path(&path);
    let mut bytes = std::fs::read(&side).unwrap();
    let header = String::from_utf8(bytes[..HEADER_BYTES as usize].to_vec()).unwrap();
    let at = header.find("nandkit-flash-image").unwrap();
    bytes[at..at + 7].copy_from_slice(b"notkit!");
    std::fs::write(&side, &bytes).unwrap();
    assert_bad_image(open(&path), "other format");
}

#[test]
fn short_sidecar_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    let side = sidecar_path(&path);
    // Shorter than its header.
    OpenOptions::new()
        .write(true)
        .open(&side)
        .unwrap()
        .set_len(100)
        .unwrap();
    assert_bad_image(open(&path), "sidecar shorter than header");
}

#[test]
fn sidecar_missing_records_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    let side = sidecar_path(&path);
    let len = std::fs::metadata(&side).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&side)
        .unwrap()
        .set_len(len - RECORD_BYTES)
        .unwrap();
    assert_bad_image(open(&path), "sidecar one record short");
}

#[test]
fn truncated_page_file_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 1).unwrap();
    assert_bad_image(open(&path), "page file one byte short");
    f.set_len(len / 2).unwrap();
    assert_bad_image(open(&path), "page file cut in half");
    f.set_len(0).unwrap();
    assert_bad_image(open(&path), "empty page file");
}

#[test]
fn overlong_page_file_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len + 2112)
        .unwrap();
    assert_bad_image(open(&path), "page file one page long");
}

fn record_offset(chip: u64, block: u64) -> u64 {
    let blocks_per_chip = u64::from(config().geometry.blocks_per_chip);
    HEADER_BYTES + RECORD_BYTES * (chip * blocks_per_chip + block)
}

#[test]
fn record_with_write_pointer_past_the_block_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    let ppb = config().geometry.pages_per_block;
    // A full block (write_ptr == pages_per_block) is fine ...
    patch(
        &sidecar_path(&path),
        record_offset(1, 6) + 4,
        &ppb.to_le_bytes(),
    );
    let mut dev = open(&path).unwrap();
    assert_eq!(dev.block_info(BlockAddr::new(1, 6)).unwrap().write_ptr, ppb);
    drop(dev);
    // ... one past it is not.
    patch(
        &sidecar_path(&path),
        record_offset(1, 6) + 4,
        &(ppb + 1).to_le_bytes(),
    );
    assert_bad_image(open(&path), "write_ptr = pages_per_block + 1");
    patch(
        &sidecar_path(&path),
        record_offset(1, 6) + 4,
        &u32::MAX.to_le_bytes(),
    );
    assert_bad_image(open(&path), "write_ptr = u32::MAX");
}

#[test]
fn record_with_unknown_flags_is_a_bad_image() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    patch(
        &sidecar_path(&path),
        record_offset(0, 2) + 8,
        &(1u32 << 9).to_le_bytes(),
    );
    assert_bad_image(open(&path), "unknown flag bit");
}

/// Rewrites the sidecar header with an edited configuration, keeping the file sizes.
fn rewrite_header(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let side = sidecar_path(path);
    let mut bytes = std::fs::read(&side).unwrap();
    let header = &bytes[..HEADER_BYTES as usize];
    let mut v: serde_json::Value = serde_json::from_slice(header.trim_ascii_end()).unwrap();
    edit(&mut v);
    let mut text = serde_json::to_vec(&v).unwrap();
    assert!(text.len() < HEADER_BYTES as usize);
    text.resize(HEADER_BYTES as usize, b' ');
    bytes[..HEADER_BYTES as usize].copy_from_slice(&text);
    std::fs::write(&side, &bytes).unwrap();
}

#[test]
fn sidecar_geometry_that_disagrees_with_the_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    rewrite_header(&path, |v| {
        v["config"]["geometry"]["blocks_per_chip"] = 9.into();
    });
    assert_bad_image(open(&path), "one block more than the files hold");
}

#[test]
fn sidecar_with_an_absurd_geometry_is_refused_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    // Valid on its own terms, but far larger than any file: sizes must not overflow.
    rewrite_header(&path, |v| {
        let g = &mut v["config"]["geometry"];
        g["page_size_bytes"] = (1u32 << 31).into();
        g["oob_size_bytes"] = (1u32 << 31).into();
        g["pages_per_block"] = 65_536.into();
        g["blocks_per_chip"] = u32::MAX.into();
        g["chips"] = 64.into();
    });
    let r = std::panic::catch_unwind(|| open(&path).map(|_| ()));
    let r = r.expect("opening an image with an absurd geometry panicked");
    assert!(r.is_err());
}

#[test]
fn sidecar_with_an_invalid_geometry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = closed_image(&dir);
    rewrite_header(&path, |v| {
        v["config"]["geometry"]["page_size_bytes"] = 3000.into();
    });
    assert!(open(&path).is_err());
}
