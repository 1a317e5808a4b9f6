//! Wear-out: blocks fail at their own lifetime, drawn from the seed.

use crate::common::*;
use nandkit_flash::{BlockAddr, DeviceConfig, Flash, FlashDevice, FlashError, PageAddr};

/// tiny with a rated endurance of 50 cycles (limits 50..75) and exact ECC.
fn short_lived() -> DeviceConfig {
    let mut c = no_bit_errors(tiny());
    c.wear.endurance_cycles = 50;
    c
}

fn dev() -> FlashDevice {
    FlashDevice::ram(short_lived()).unwrap()
}

/// Erases until an erase fails; returns the number of successful erases and the error.
fn wear_out(dev: &mut FlashDevice, b: BlockAddr) -> (u32, FlashError) {
    for done in 0..10_000 {
        if let Err(e) = dev.erase_block(b) {
            return (done, e);
        }
    }
    panic!("{b} never wore out");
}

#[test]
fn block_lifetimes_lie_within_the_rated_spread() {
    let mut dev = dev();
    let g = dev.geometry();
    let limits: Vec<u32> = (0..g.blocks_per_chip)
        .map(|b| dev.block_endurance(BlockAddr::new(0, b)).unwrap())
        .collect();
    for (b, &l) in limits.iter().enumerate() {
        assert!((50..75).contains(&l), "block {b}: limit {l}");
    }
    // Blocks differ.
    let distinct: std::collections::BTreeSet<_> = limits.iter().collect();
    assert!(distinct.len() > 10, "{limits:?}");
    // Same seed, same lifetimes; another seed, others.
    let mut again = FlashDevice::ram(short_lived()).unwrap();
    let mut other = FlashDevice::ram(short_lived().with_seed(1)).unwrap();
    let same: Vec<u32> = (0..g.blocks_per_chip)
        .map(|b| again.block_endurance(BlockAddr::new(0, b)).unwrap())
        .collect();
    let diff: Vec<u32> = (0..g.blocks_per_chip)
        .map(|b| other.block_endurance(BlockAddr::new(0, b)).unwrap())
        .collect();
    assert_eq!(same, limits);
    assert_ne!(diff, limits);
}

#[test]
fn erase_fails_exactly_at_the_block_endurance() {
    let mut dev = dev();
    for block in [1, 2, 9] {
        let b = BlockAddr::new(0, block);
        let limit = dev.block_endurance(b).unwrap();
        let (ok, err) = wear_out(&mut dev, b);
        assert_eq!(ok, limit, "{b}: erases that succeeded");
        assert!(
            matches!(err, FlashError::EraseFailed(a) if a == b),
            "{err:?}"
        );
        assert!(err.is_media_failure());
        // The failed attempt counts: the erase count is now past the limit.
        assert_eq!(dev.erase_count(b).unwrap(), limit + 1);
        assert!(dev.erase_count(b).unwrap() >= limit);
        // It keeps failing.
        let again = dev.erase_block(b).unwrap_err();
        assert!(matches!(again, FlashError::EraseFailed(_)), "{again:?}");
    }
    let t = dev.stats().total();
    assert_eq!(t.erase_failures, 6);
    // Other blocks did not age.
    assert_eq!(dev.erase_count(BlockAddr::new(0, 3)).unwrap(), 0);
    dev.erase_block(BlockAddr::new(0, 3)).unwrap();
}

#[test]
fn a_failed_erase_leaves_the_block_unusable() {
    let mut dev = dev();
    let b = BlockAddr::new(0, 4);
    let limit = dev.block_endurance(b).unwrap();
    for _ in 0..limit - 1 {
        dev.erase_block(b).unwrap();
    }
    for p in 0..3 {
        program_tagged(&mut dev, b.page(p)).unwrap();
    }
    dev.erase_block(b).unwrap(); // the last good erase
    let (_, err) = wear_out(&mut dev, b);
    assert!(matches!(err, FlashError::EraseFailed(_)));
    let info = dev.block_info(b).unwrap();
    assert!(info.erase_torn, "a failed erase leaves half-erased cells");
    let r = program_tagged(&mut dev, b.page(0));
    assert!(r.is_err(), "programmed a block whose erase failed");
}

#[test]
fn program_into_a_worn_block_fails() {
    let mut dev = dev();
    let b = BlockAddr::new(0, 5);
    let limit = dev.block_endurance(b).unwrap();
    // One erase short of the limit, the block still works.
    for _ in 0..limit - 1 {
        dev.erase_block(b).unwrap();
    }
    let want = program_tagged(&mut dev, b.page(0)).unwrap();
    assert_eq!(read_raw(&mut dev, b.page(0)).unwrap(), want);
    // The limit-th erase succeeds; at the limit, programs fail.
    dev.erase_block(b).unwrap();
    assert_eq!(dev.erase_count(b).unwrap(), limit);
    let (data, oob) = page_bytes(&dev.geometry(), 1);
    let err = dev.program_page(b.page(0), &data, &oob).unwrap_err();
    assert!(
        matches!(err, FlashError::ProgramFailed(a) if a == b.page(0)),
        "{err:?}"
    );
    assert!(err.is_media_failure());
    // What the cells hold is not the page, and a read says so.
    let g = dev.geometry();
    assert_ne!(
        dev.raw_page(b.page(0)).unwrap(),
        stored_raw(&g, &data, &oob)
    );
    assert!(
        matches!(
            read(&mut dev, b.page(0)),
            Err(FlashError::Uncorrectable { .. })
        ),
        "a failed program reads back without an ECC error"
    );
    let t = dev.stats().total();
    assert_eq!(t.program_failures, 1);
    // The failed page is used up like any programmed page.
    let r = dev.program_page(b.page(0), &data, &oob);
    assert!(matches!(r, Err(FlashError::NotErased(_))), "{r:?}");
    let r = dev.program_page(b.page(1), &data, &oob);
    assert!(matches!(r, Err(FlashError::ProgramFailed(_))), "{r:?}");
}

#[test]
fn a_worn_block_marked_bad_refuses_everything() {
    let mut dev = dev();
    let b = BlockAddr::new(0, 6);
    let (_, err) = wear_out(&mut dev, b);
    assert!(err.is_media_failure());
    assert!(!dev.is_bad(b).unwrap(), "the caller decides to retire it");
    dev.mark_bad(b).unwrap();
    assert!(dev.is_bad(b).unwrap());
    let info = dev.block_info(b).unwrap();
    assert!(info.grown_bad && !info.factory_bad);
    let count = dev.erase_count(b).unwrap();
    assert!(matches!(dev.erase_block(b), Err(FlashError::BadBlock(_))));
    assert!(matches!(
        program_tagged(&mut dev, b.page(0)),
        Err(FlashError::BadBlock(_))
    ));
    assert!(matches!(
        read(&mut dev, b.page(0)),
        Err(FlashError::BadBlock(_))
    ));
    let mut oob = vec![0u8; dev.geometry().oob_size_bytes as usize];
    assert!(matches!(
        dev.read_oob(b.page(0), &mut oob),
        Err(FlashError::BadBlock(_))
    ));
    assert_eq!(dev.erase_count(b).unwrap(), count);
}

#[test]
fn only_media_failures_are_media_failures() {
    let a = PageAddr::new(0, 1, 2);
    assert!(FlashError::ProgramFailed(a).is_media_failure());
    assert!(FlashError::EraseFailed(a.block_addr()).is_media_failure());
    for e in [
        FlashError::NotErased(a),
        FlashError::OutOfOrder { addr: a, next: 0 },
        FlashError::BadBlock(a.block_addr()),
        FlashError::PowerLost,
        FlashError::Uncorrectable {
            addr: a,
            codewords: 1,
        },
        FlashError::BufferSize { got: 1, want: 2 },
        FlashError::OutOfRange { what: "x".into() },
    ] {
        assert!(!e.is_media_failure(), "{e:?}");
    }
}

#[test]
fn erase_counts_track_every_erase() {
    let mut dev = dev();
    for (block, n) in [(1u32, 3u32), (2, 10), (3, 0), (4, 1)] {
        for _ in 0..n {
            dev.erase_block(BlockAddr::new(0, block)).unwrap();
        }
    }
    for (block, n) in [(1u32, 3u32), (2, 10), (3, 0), (4, 1)] {
        let b = BlockAddr::new(0, block);
        assert_eq!(dev.erase_count(b).unwrap(), n);
        assert_eq!(dev.block_info(b).unwrap().erase_count, n);
    }
    assert_eq!(dev.stats().total().erases, 14);
}
