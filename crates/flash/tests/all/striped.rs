//! MA's striped view: p chips as one device with p-times-wider erase blocks.

use crate::common::*;
use nandkit_flash::{
    preset, BlockAddr, Command, DeviceOptions, ExecutorKind, Flash, FlashDevice, FlashError,
    PageAddr, StripedFlash,
};

fn striped(kind: ExecutorKind, chips: u32) -> StripedFlash<FlashDevice> {
    let mut c = no_bit_errors(preset("mlc-1g").unwrap().with_chips(chips).unwrap());
    c.wear.factory_bad_fraction = 0.0;
    let dev = FlashDevice::ram_with(
        c,
        DeviceOptions {
            executor: kind,
            realtime: false,
            host: nandkit_flash::HostCost::ZERO,
        },
    )
    .unwrap();
    StripedFlash::new(dev)
}

fn program_cost(s: &StripedFlash<FlashDevice>) -> u64 {
    let inner = s.inner();
    inner
        .config()
        .timing
        .program_cost_ns(inner.geometry().raw_page_bytes())
}

#[test]
fn geometry_is_one_wide_chip() {
    for p in [1, 2, 4] {
        let s = striped(ExecutorKind::Simulated, p);
        let phys = s.inner().geometry();
        let g = s.geometry();
        assert_eq!(g.chips, 1);
        assert_eq!(g.pages_per_block, p * phys.pages_per_block);
        assert_eq!(g.blocks_per_chip, phys.blocks_per_chip);
        assert_eq!(g.page_size_bytes, phys.page_size_bytes);
        assert_eq!(g.oob_size_bytes, phys.oob_size_bytes);
        assert_eq!(g.total_bytes(), phys.total_bytes());
    }
}

#[test]
fn virtual_pages_map_round_robin_over_the_chips() {
    for p in [2, 4] {
        let mut s = striped(ExecutorKind::Simulated, p);
        let g = s.geometry();
        let b = 3;
        let n = 3 * p + 1;
        let mut want = Vec::new();
        for k in 0..n {
            want.push(program_tagged(&mut s, PageAddr::new(0, b, k)).unwrap());
        }
        for k in 0..n {
            let phys = PageAddr::new(k % p, b, k / p);
            assert_eq!(s.physical(PageAddr::new(0, b, k)).unwrap(), phys);
            assert_eq!(
                s.inner_mut().raw_page(phys).unwrap(),
                want[k as usize],
                "p={p} virtual page {k}"
            );
            assert_eq!(
                read_raw(&mut s, PageAddr::new(0, b, k)).unwrap(),
                want[k as usize]
            );
        }
        // The rest of each chip's block is erased.
        for chip in 0..p {
            let next = n / p + u32::from(chip < n % p);
            let info = s.inner_mut().block_info(BlockAddr::new(chip, b)).unwrap();
            assert_eq!(info.write_ptr, next, "chip {chip}");
            assert_eq!(
                s.inner_mut()
                    .raw_page(PageAddr::new(chip, b, next))
                    .unwrap(),
                erased_raw(&g)
            );
        }
        // The last virtual page is the last page of the last chip.
        let last = g.pages_per_block - 1;
        assert_eq!(
            s.physical(PageAddr::new(0, b, last)).unwrap(),
            PageAddr::new(p - 1, b, last / p)
        );
    }
}

#[test]
fn out_of_range_virtual_addresses_are_refused() {
    let mut s = striped(ExecutorKind::Simulated, 4);
    let g = s.geometry();
    for addr in [
        PageAddr::new(1, 0, 0),
        PageAddr::new(0, g.blocks_per_chip, 0),
        PageAddr::new(0, 0, g.pages_per_block),
    ] {
        assert!(matches!(
            s.physical(addr),
            Err(FlashError::OutOfRange { .. })
        ));
        assert!(matches!(
            read(&mut s, addr),
            Err(FlashError::OutOfRange { .. })
        ));
        let done = s.submit(vec![Command::Read { addr }]);
        assert!(matches!(done[0].result, Err(FlashError::OutOfRange { .. })));
    }
    assert!(matches!(
        s.erase_block(BlockAddr::new(1, 0)),
        Err(FlashError::OutOfRange { .. })
    ));
}

#[test]
fn a_batch_of_p_virtual_pages_takes_one_program_cost() {
    for kind in [ExecutorKind::Simulated, ExecutorKind::Threaded] {
        for p in [1, 2, 4] {
            let mut s = striped(kind, p);
            let g = s.geometry();
            let cost = program_cost(&s);
            for round in 0..3 {
                let t0 = s.now_ns();
                let batch = (round * p..(round + 1) * p)
                    .map(|k| {
                        let addr = PageAddr::new(0, 1, k);
                        let (data, oob) = page_bytes(&g, tag(addr));
                        Command::Program { addr, data, oob }
                    })
                    .collect();
                for c in s.submit(batch) {
                    assert!(c.result.is_ok(), "{:?}", c.result);
                    assert_eq!((c.start_ns, c.end_ns), (t0, t0 + cost));
                }
                assert_eq!(s.now_ns() - t0, cost, "{kind:?} p={p} round {round}");
            }
            // One at a time, the same pages cost p programs.
            let t0 = s.now_ns();
            for k in 0..p {
                program_tagged(&mut s, PageAddr::new(0, 2, k)).unwrap();
            }
            assert_eq!(s.now_ns() - t0, u64::from(p) * cost);
        }
    }
}

#[test]
fn erase_block_erases_the_block_on_every_chip() {
    for p in [2, 4] {
        let mut s = striped(ExecutorKind::Simulated, p);
        let g = s.geometry();
        let erase_ns = s.inner().config().timing.erase_cost_ns();
        let b = BlockAddr::new(0, 6);
        for k in 0..2 * p {
            program_tagged(&mut s, b.page(k)).unwrap();
        }
        let t0 = s.now_ns();
        s.erase_block(b).unwrap();
        assert_eq!(s.now_ns() - t0, erase_ns, "the chips erase in parallel");
        for chip in 0..p {
            let phys = BlockAddr::new(chip, 6);
            assert_eq!(s.inner_mut().erase_count(phys).unwrap(), 1, "chip {chip}");
            let info = s.inner_mut().block_info(phys).unwrap();
            assert_eq!(info.write_ptr, 0);
            for page in 0..2 {
                assert_eq!(
                    s.inner_mut().raw_page(phys.page(page)).unwrap(),
                    erased_raw(&g)
                );
            }
            // Neighbouring blocks are untouched.
            assert_eq!(
                s.inner_mut().erase_count(BlockAddr::new(chip, 5)).unwrap(),
                0
            );
        }
        assert_eq!(s.erase_count(b).unwrap(), 1);
        // A batched striped erase does the same.
        let t1 = s.now_ns();
        let done = s.submit(vec![Command::Erase { addr: b }]);
        assert_eq!(done.len(), 1);
        assert!(done[0].result.is_ok());
        assert_eq!((done[0].start_ns, done[0].end_ns), (t1, t1 + erase_ns));
        for chip in 0..p {
            assert_eq!(
                s.inner_mut().erase_count(BlockAddr::new(chip, 6)).unwrap(),
                2
            );
        }
        // Page 0 of the virtual block is programmable again.
        program_tagged(&mut s, b.page(0)).unwrap();
    }
}

#[test]
fn a_block_is_bad_if_any_chip_has_it_bad() {
    let p = 4;
    let mut s = striped(ExecutorKind::Simulated, p);
    let b = BlockAddr::new(0, 9);
    assert!(!s.is_bad(b).unwrap());
    s.inner_mut().mark_bad(BlockAddr::new(2, 9)).unwrap();
    assert!(s.is_bad(b).unwrap());
    assert!(!s.is_bad(BlockAddr::new(0, 8)).unwrap());
    // Erasing the striped block fails on the bad chip.
    assert!(matches!(s.erase_block(b), Err(FlashError::BadBlock(a)) if a.chip == 2));
    // Virtual pages on the bad chip are refused; others still map to good blocks.
    for k in 0..2 {
        let want = program_tagged(&mut s, b.page(k)).unwrap();
        let phys = PageAddr::new(k, 9, 0);
        assert_eq!(s.inner_mut().raw_page(phys).unwrap(), want);
    }
    assert!(matches!(
        program_tagged(&mut s, b.page(2)),
        Err(FlashError::BadBlock(_))
    ));
    // Marking through the striped view retires the block on every chip.
    let other = BlockAddr::new(0, 10);
    s.mark_bad(other).unwrap();
    for chip in 0..p {
        assert!(s.inner_mut().is_bad(BlockAddr::new(chip, 10)).unwrap());
    }
    assert!(s.is_bad(other).unwrap());
}
