//! Helpers shared by the integration tests (each test file is its own crate and uses a part).
#![allow(dead_code)]

use nandkit_flash::{
    preset, DeviceConfig, EccModel, EccReport, Flash, FlashDevice, FlashError, Geometry, PageAddr,
};

/// The "tiny" preset: 8 MiB SLC, 2 KiB pages + 64 B OOB, 64 pages/block, 64 blocks.
pub fn tiny() -> DeviceConfig {
    preset("tiny").expect("tiny preset")
}

/// The same device with raw bit errors switched off, so ECC outcomes are exact.
pub fn no_bit_errors(mut config: DeviceConfig) -> DeviceConfig {
    config.ecc.rber_fresh = 0.0;
    config.ecc.rber_at_endurance = 0.0;
    config
}

/// A fresh tiny device in RAM with no random bit errors.
pub fn tiny_dev() -> FlashDevice {
    FlashDevice::ram(no_bit_errors(tiny())).expect("tiny device")
}

/// Page contents (data, OOB) that depend on `tag` and contain no 0xFF byte, so a page
/// holding them can never be mistaken for an erased or partly programmed one.
pub fn page_bytes(g: &Geometry, tag: u64) -> (Vec<u8>, Vec<u8>) {
    let mut x = tag
        .wrapping_add(1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17)
        | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 255) as u8
    };
    let data = (0..g.page_size_bytes).map(|_| next()).collect();
    let oob = (0..g.oob_size_bytes).map(|_| next()).collect();
    (data, oob)
}

/// Data followed by OOB (for a programmed page, see [`stored_raw`]).
pub fn raw_of(data: &[u8], oob: &[u8]) -> Vec<u8> {
    let mut raw = data.to_vec();
    raw.extend_from_slice(oob);
    raw
}

/// The ECC of every device these tests program through `stored_*` (tiny, mlc-1g): BCH 4 bits
/// per 512 bytes, 7 check bytes per codeword.
pub fn test_ecc() -> EccModel {
    EccModel::bch(512, 4)
}

/// The OOB the chip stores when it programs (data, oob): the caller's bytes, with the ECC
/// engine's check bytes in the ECC area at the end.
pub fn stored_oob(g: &Geometry, data: &[u8], oob: &[u8]) -> Vec<u8> {
    let ecc = test_ecc();
    assert!(
        g.oob_ecc_bytes == 0 || g.oob_ecc_bytes == ecc.oob_ecc_bytes(g.page_size_bytes),
        "stored_oob assumes BCH 4 bits per 512 bytes"
    );
    let mut stored = oob.to_vec();
    ecc.store_check_bytes(g, data, &mut stored);
    stored
}

/// Raw bytes of a page cleanly programmed with (data, oob): data, then the stored OOB.
pub fn stored_raw(g: &Geometry, data: &[u8], oob: &[u8]) -> Vec<u8> {
    raw_of(data, &stored_oob(g, data, oob))
}

/// What `raw_page` returns for an erased page.
pub fn erased_raw(g: &Geometry) -> Vec<u8> {
    vec![0xFF; g.raw_page_bytes()]
}

/// A stable tag for the contents programmed at an address.
pub fn tag(addr: PageAddr) -> u64 {
    (u64::from(addr.chip) << 40) | (u64::from(addr.block) << 20) | u64::from(addr.page)
}

/// Programs the page with `page_bytes(tag(addr))` and returns the raw bytes it should hold
/// (with the check bytes the chip stores in the OOB).
pub fn program_tagged<F: Flash>(dev: &mut F, addr: PageAddr) -> Result<Vec<u8>, FlashError> {
    let g = dev.geometry();
    let (data, oob) = page_bytes(&g, tag(addr));
    dev.program_page(addr, &data, &oob)?;
    Ok(stored_raw(&g, &data, &oob))
}

/// Reads a whole page through the ECC path.
pub fn read<F: Flash>(
    dev: &mut F,
    addr: PageAddr,
) -> Result<(Vec<u8>, Vec<u8>, EccReport), FlashError> {
    let g = dev.geometry();
    let mut data = vec![0u8; g.page_size_bytes as usize];
    let mut oob = vec![0u8; g.oob_size_bytes as usize];
    let ecc = dev.read_page(addr, &mut data, &mut oob)?;
    Ok((data, oob, ecc))
}

/// Reads a page and returns data followed by OOB.
pub fn read_raw<F: Flash>(dev: &mut F, addr: PageAddr) -> Result<Vec<u8>, FlashError> {
    read(dev, addr).map(|(d, o, _)| raw_of(&d, &o))
}

/// Erases block `leb` of an array's view and writes its first `pages` pages with contents
/// from `tag` (page k: `page_bytes(tag * 1000 + k)`), in one batch.
pub fn write_leb<F: Flash>(s: &mut F, leb: u32, pages: u32, tag: u64) -> Result<(), FlashError> {
    s.erase_block(nandkit_flash::BlockAddr::new(0, leb))?;
    let g = s.geometry();
    let batch = (0..pages)
        .map(|k| {
            let (data, oob) = page_bytes(&g, tag * 1000 + u64::from(k));
            nandkit_flash::Command::Program {
                addr: PageAddr::new(0, leb, k),
                data,
                oob,
            }
        })
        .collect();
    for c in s.submit(batch) {
        c.result?;
    }
    Ok(())
}
