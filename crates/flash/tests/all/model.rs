//! Random operation sequences against a trivial model of NAND's rules.

use std::collections::HashMap;

use crate::common::*;
use nandkit_flash::{BlockAddr, Flash, FlashError, PageAddr};
use proptest::prelude::*;

const BLOCKS: u32 = 3;
const PAGES: u32 = 6;

#[derive(Clone, Copy, Debug)]
enum Op {
    Program(u32, u32),
    Erase(u32),
    Read(u32, u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..BLOCKS, 0..PAGES).prop_map(|(b, p)| Op::Program(b, p)),
        1 => (0..BLOCKS).prop_map(Op::Erase),
        3 => (0..BLOCKS, 0..PAGES).prop_map(|(b, p)| Op::Read(b, p)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn device_follows_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let mut dev = tiny_dev();
        let g = dev.geometry();
        let mut pages: HashMap<(u32, u32), Vec<u8>> = HashMap::new();
        let mut next = [0u32; BLOCKS as usize];
        let mut erases = [0u32; BLOCKS as usize];
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Program(b, p) => {
                    let (data, oob) = page_bytes(&g, ((i as u64) << 32) | u64::from(b * PAGES + p));
                    let r = dev.program_page(PageAddr::new(0, b, p), &data, &oob);
                    let want = next[b as usize];
                    if p == want {
                        prop_assert!(r.is_ok(), "op {}: {:?}", i, r);
                        pages.insert((b, p), stored_raw(&g, &data, &oob));
                        next[b as usize] += 1;
                    } else if p < want {
                        prop_assert!(matches!(r, Err(FlashError::NotErased(_))), "op {}: {:?}", i, r);
                    } else {
                        prop_assert!(
                            matches!(r, Err(FlashError::OutOfOrder { next: n, .. }) if n == want),
                            "op {}: {:?}", i, r
                        );
                    }
                }
                Op::Erase(b) => {
                    dev.erase_block(BlockAddr::new(0, b)).unwrap();
                    pages.retain(|&(blk, _), _| blk != b);
                    next[b as usize] = 0;
                    erases[b as usize] += 1;
                }
                Op::Read(b, p) => {
                    let got = read_raw(&mut dev, PageAddr::new(0, b, p)).unwrap();
                    let want = pages.get(&(b, p)).cloned().unwrap_or_else(|| erased_raw(&g));
                    prop_assert!(got == want, "op {}: read {}/{} differs", i, b, p);
                }
            }
        }
        for b in 0..BLOCKS {
            let info = dev.block_info(BlockAddr::new(0, b)).unwrap();
            prop_assert_eq!(info.write_ptr, next[b as usize]);
            prop_assert_eq!(info.erase_count, erases[b as usize]);
            for p in 0..PAGES {
                let want = pages.get(&(b, p)).cloned().unwrap_or_else(|| erased_raw(&g));
                prop_assert!(dev.raw_page(PageAddr::new(0, b, p)).unwrap() == want);
            }
        }
    }
}
