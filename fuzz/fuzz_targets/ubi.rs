//! UBI images in Linux's format, damaged as the input says, put on a chip as `ubiformat -f`
//! would and attached (read-only, then writable, then read-only again), every LEB of every
//! volume read: no panic, no hang, whatever the bytes. The base is made once: a UBI on a
//! small chip with a few LEBs of the file system's volume written, one of them twice; its
//! headers and both volume-table copies are what the input damages.
//!
//! The input is a list of patches as the `image` target's (see `nandkit_fuzz::patch`).
#![no_main]

use std::io::Cursor;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nandkit_flash::ubi::raw::{self, RawKind};
use nandkit_flash::ubi::{AttachOptions, Ubi, UbiParams};
use nandkit_flash::StripedFlash;
use nandkit_flash::{preset, BlockAddr, Command, DeviceConfig, Flash, FlashDevice, PageAddr};

/// A small-page chip of 16 PEBs (256 KiB), no bit errors or bad blocks.
fn config() -> DeviceConfig {
    let mut c = preset("smallblock-64m")
        .unwrap()
        .with_total_bytes(16 * 16 * 1024)
        .unwrap();
    c.ecc.rber_fresh = 0.0;
    c.ecc.rber_at_endurance = 0.0;
    c.wear.factory_bad_fraction = 0.0;
    c
}

/// The base raw image: 4 LEBs written, one rewritten (so a PEB waits dirty).
fn base() -> &'static [u8] {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| {
        let mut s =
            StripedFlash::format_ubi(FlashDevice::ram(config()).unwrap(), UbiParams::default())
                .unwrap();
        let g = s.geometry();
        for (leb, pages) in [(0u32, 3u32), (1, 5), (2, 1), (3, 8), (1, 2)] {
            s.erase_block(BlockAddr::new(0, leb)).unwrap();
            let batch = (0..pages)
                .map(|k| Command::Program {
                    addr: PageAddr::new(0, leb, k),
                    data: vec![leb as u8 ^ k as u8; g.page_size_bytes as usize],
                    oob: vec![0xFF; g.oob_size_bytes as usize],
                })
                .collect();
            for c in s.submit(batch) {
                c.result.unwrap();
            }
        }
        let mut dev = s.into_inner();
        let mut out = Vec::new();
        raw::export(&mut dev, 0, &mut out, RawKind::Plain, |_| {}).unwrap();
        out
    })
}

fn read_everything(ubi: &Ubi, dev: &mut FlashDevice) {
    for v in ubi.volumes().to_vec() {
        for leb in 0..v.reserved_pebs.min(64) {
            let _ = ubi.read_leb(dev, 0, v.id, leb);
        }
    }
    let _ = ubi.check(dev);
    let _ = ubi.report();
}

fuzz_target!(|data: &[u8]| {
    let mut image = base().to_vec();
    nandkit_fuzz::patch(&mut image, data);
    let g = config().geometry;
    // A damaged first header makes no raw image: `detect` must say so, not panic.
    let _ = raw::detect(
        &image,
        image.len() as u64,
        g.page_size_bytes,
        g.oob_size_bytes,
        g.pages_per_block,
    );
    let mut dev = FlashDevice::ram(config()).unwrap();
    if raw::import(&mut dev, 0, Cursor::new(&image), RawKind::Plain, |_| {}).is_err() {
        return;
    }
    if let Ok(ubi) = Ubi::attach(&mut dev, true, AttachOptions::default()) {
        read_everything(&ubi, &mut dev);
    }
    // Writable: attach may rewrite a damaged table copy; then a write, and attach again.
    let Ok(mut s) = StripedFlash::attach_ubi(dev, false) else {
        return;
    };
    let gs = s.geometry();
    if gs.blocks_per_chip > 0 {
        let _ = s.erase_block(BlockAddr::new(0, 0));
        let _ = s.program_page(
            PageAddr::new(0, 0, 0),
            &vec![0xA5; gs.page_size_bytes as usize],
            &vec![0xFF; gs.oob_size_bytes as usize],
        );
    }
    let mut dev = s.into_inner();
    if let Ok(ubi) = Ubi::attach(&mut dev, true, AttachOptions::default()) {
        read_everything(&ubi, &mut dev);
    }
});
