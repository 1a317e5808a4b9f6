//! Factory bad blocks: drawn from the seed, block 0 of every chip always good.

use std::collections::BTreeSet;

use crate::common::*;
use nandkit_flash::{preset, BlockAddr, DeviceConfig, Flash, FlashDevice, FlashError};

const MIB: u64 = 1 << 20;

/// mlc-1g cut to 64 MiB (512 blocks) with a generous factory bad fraction.
fn config(seed: u64) -> DeviceConfig {
    let mut c = preset("mlc-1g")
        .unwrap()
        .with_total_bytes(64 * MIB)
        .unwrap()
        .with_seed(seed);
    c.wear.factory_bad_fraction = 0.05;
    c
}

fn bad_set(dev: &mut FlashDevice) -> BTreeSet<BlockAddr> {
    let g = dev.geometry();
    let mut set = BTreeSet::new();
    for chip in 0..g.chips {
        for block in 0..g.blocks_per_chip {
            let b = BlockAddr::new(chip, block);
            let bad = dev.is_bad(b).unwrap();
            let info = dev.block_info(b).unwrap();
            assert_eq!(bad, info.factory_bad, "{b}");
            assert!(!info.grown_bad, "{b}");
            if bad {
                set.insert(b);
            }
        }
    }
    set
}

#[test]
fn same_seed_same_factory_bad_blocks() {
    let a = bad_set(&mut FlashDevice::ram(config(11)).unwrap());
    let b = bad_set(&mut FlashDevice::ram(config(11)).unwrap());
    assert_eq!(a, b);
    // 511 candidate blocks at 5%: about 25 expected.
    assert!((5..=60).contains(&a.len()), "{} bad blocks", a.len());
}

#[test]
fn different_seed_different_factory_bad_blocks() {
    let a = bad_set(&mut FlashDevice::ram(config(11)).unwrap());
    let b = bad_set(&mut FlashDevice::ram(config(12)).unwrap());
    assert!(!a.is_empty() && !b.is_empty());
    assert_ne!(a, b);
}

#[test]
fn block_zero_is_always_good() {
    for seed in 0..20 {
        let mut c = config(seed).with_chips(4).unwrap();
        // Even when nearly every block is bad.
        c.wear.factory_bad_fraction = 0.9;
        let mut dev = FlashDevice::ram(c).unwrap();
        for chip in 0..4 {
            assert!(!dev.is_bad(BlockAddr::new(chip, 0)).unwrap(), "seed {seed}");
        }
        let bad = bad_set(&mut dev);
        assert!(bad.len() > 300, "seed {seed}: {}", bad.len());
        assert!(bad.iter().all(|b| b.block != 0));
    }
}

#[test]
fn chips_draw_their_own_bad_blocks() {
    let mut dev = FlashDevice::ram(config(5).with_chips(2).unwrap()).unwrap();
    let bad = bad_set(&mut dev);
    let on = |chip| -> BTreeSet<u32> {
        bad.iter()
            .filter(|b| b.chip == chip)
            .map(|b| b.block)
            .collect()
    };
    assert!(!on(0).is_empty() && !on(1).is_empty());
    assert_ne!(on(0), on(1));
}

#[test]
fn zero_fraction_means_no_factory_bad_blocks() {
    let mut c = config(11);
    c.wear.factory_bad_fraction = 0.0;
    assert!(bad_set(&mut FlashDevice::ram(c).unwrap()).is_empty());
    assert!(bad_set(&mut tiny_dev()).is_empty());
}

#[test]
fn factory_bad_blocks_carry_the_marker_and_refuse_ops() {
    let mut dev = FlashDevice::ram(config(11)).unwrap();
    let g = dev.geometry();
    let bad = bad_set(&mut dev);
    let b = *bad.iter().next().unwrap();
    let page_size = g.page_size_bytes as usize;
    assert_eq!(dev.raw_page(b.page(0)).unwrap()[page_size], 0x00);
    assert!(matches!(dev.erase_block(b), Err(FlashError::BadBlock(a)) if a == b));
    assert!(matches!(
        program_tagged(&mut dev, b.page(0)),
        Err(FlashError::BadBlock(_))
    ));
    assert!(matches!(
        read(&mut dev, b.page(0)),
        Err(FlashError::BadBlock(_))
    ));
    // Good blocks read erased, marker byte included.
    let good = (1..g.blocks_per_chip)
        .map(|block| BlockAddr::new(0, block))
        .find(|a| !bad.contains(a))
        .unwrap();
    assert_eq!(dev.raw_page(good.page(0)).unwrap(), erased_raw(&g));
}
