//! NAND's rules, one test each, on the tiny preset in RAM.

use crate::common::*;
use nandkit_flash::{BlockAddr, Command, EccReport, Flash, FlashDevice, FlashError, PageAddr};

/// Exactly: the data and every OOB byte the caller owns; the ECC area holds the check bytes
/// the chip stored (`program_tagged` returns them).
#[test]
fn read_returns_exactly_the_programmed_data_and_oob() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let b = BlockAddr::new(0, 5);
    let mut expected = Vec::new();
    for p in 0..4 {
        expected.push(program_tagged(&mut dev, b.page(p)).unwrap());
    }
    for (p, want) in expected.iter().enumerate() {
        let addr = b.page(p as u32);
        let (data, oob, ecc) = read(&mut dev, addr).unwrap();
        assert_eq!(data.len(), g.page_size_bytes as usize);
        assert_eq!(oob.len(), g.oob_size_bytes as usize);
        assert_eq!(&raw_of(&data, &oob), want, "{addr}");
        assert_eq!(ecc, EccReport::default());
        assert_eq!(&dev.raw_page(addr).unwrap(), want);
        let mut oob_only = vec![0u8; g.oob_size_bytes as usize];
        dev.read_oob(addr, &mut oob_only).unwrap();
        assert_eq!(oob_only, oob);
    }
    // Pages past the write pointer are still erased.
    let (data, oob, ecc) = read(&mut dev, b.page(4)).unwrap();
    assert!(data.iter().chain(&oob).all(|&x| x == 0xFF));
    assert_eq!(ecc, EccReport::default());
}

#[test]
fn fresh_device_reads_erased_everywhere() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    for block in [0, 1, g.blocks_per_chip - 1] {
        for page in [0, 1, g.pages_per_block - 1] {
            let addr = PageAddr::new(0, block, page);
            assert_eq!(read_raw(&mut dev, addr).unwrap(), erased_raw(&g));
            assert_eq!(dev.raw_page(addr).unwrap(), erased_raw(&g));
        }
        let info = dev.block_info(BlockAddr::new(0, block)).unwrap();
        assert_eq!(info.erase_count, 0);
        assert_eq!(info.write_ptr, 0);
        assert!(!info.factory_bad && !info.grown_bad && !info.erase_torn);
    }
}

#[test]
fn programming_a_programmed_page_is_not_erased() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let b = BlockAddr::new(0, 3);
    let p0 = program_tagged(&mut dev, b.page(0)).unwrap();
    let p1 = program_tagged(&mut dev, b.page(1)).unwrap();
    let (data, oob) = page_bytes(&g, 999);
    for page in [0, 1] {
        let err = dev.program_page(b.page(page), &data, &oob).unwrap_err();
        assert!(
            matches!(err, FlashError::NotErased(a) if a == b.page(page)),
            "{err:?}"
        );
    }
    // The refused programs changed nothing.
    assert_eq!(dev.raw_page(b.page(0)).unwrap(), p0);
    assert_eq!(dev.raw_page(b.page(1)).unwrap(), p1);
    assert_eq!(dev.block_info(b).unwrap().write_ptr, 2);
    // Even identical data is refused: a page is programmed once per erase.
    let err = program_tagged(&mut dev, b.page(0)).unwrap_err();
    assert!(matches!(err, FlashError::NotErased(_)), "{err:?}");
}

#[test]
fn programming_out_of_order_is_refused_with_the_next_page() {
    let mut dev = tiny_dev();
    let b = BlockAddr::new(0, 7);
    let err = program_tagged(&mut dev, b.page(2)).unwrap_err();
    assert!(
        matches!(err, FlashError::OutOfOrder { addr, next: 0 } if addr == b.page(2)),
        "{err:?}"
    );
    program_tagged(&mut dev, b.page(0)).unwrap();
    let err = program_tagged(&mut dev, b.page(5)).unwrap_err();
    assert!(
        matches!(err, FlashError::OutOfOrder { next: 1, .. }),
        "{err:?}"
    );
    let last = dev.geometry().pages_per_block - 1;
    let err = program_tagged(&mut dev, b.page(last)).unwrap_err();
    assert!(
        matches!(err, FlashError::OutOfOrder { next: 1, .. }),
        "{err:?}"
    );
    // The skipped-to pages stay erased and the block continues in order.
    assert_eq!(
        dev.raw_page(b.page(5)).unwrap(),
        erased_raw(&dev.geometry())
    );
    program_tagged(&mut dev, b.page(1)).unwrap();
    assert_eq!(dev.block_info(b).unwrap().write_ptr, 2);
}

#[test]
fn a_full_block_accepts_no_more_programs() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let b = BlockAddr::new(0, 9);
    for p in 0..g.pages_per_block {
        program_tagged(&mut dev, b.page(p)).unwrap();
    }
    assert_eq!(dev.block_info(b).unwrap().write_ptr, g.pages_per_block);
    for p in [0, g.pages_per_block - 1] {
        let err = program_tagged(&mut dev, b.page(p)).unwrap_err();
        assert!(matches!(err, FlashError::NotErased(_)), "{err:?}");
    }
}

fn assert_out_of_range<T: std::fmt::Debug>(r: Result<T, FlashError>, what: &str) {
    match r {
        Err(FlashError::OutOfRange { .. }) => {}
        other => panic!("{what}: expected OutOfRange, got {other:?}"),
    }
}

/// Addresses just past each dimension of the tiny device.
fn bad_pages(dev: &FlashDevice) -> Vec<PageAddr> {
    let g = dev.geometry();
    vec![
        PageAddr::new(g.chips, 0, 0),
        PageAddr::new(0, g.blocks_per_chip, 0),
        PageAddr::new(0, 0, g.pages_per_block),
        PageAddr::new(u32::MAX, u32::MAX, u32::MAX),
    ]
}

#[test]
fn out_of_range_read_is_refused() {
    let mut dev = tiny_dev();
    for addr in bad_pages(&dev) {
        assert_out_of_range(read(&mut dev, addr), &format!("read {addr:?}"));
    }
    assert_eq!(dev.now_ns(), 0, "refused reads take no time");
}

#[test]
fn out_of_range_read_oob_is_refused() {
    let mut dev = tiny_dev();
    let mut oob = vec![0u8; dev.geometry().oob_size_bytes as usize];
    for addr in bad_pages(&dev) {
        assert_out_of_range(dev.read_oob(addr, &mut oob), &format!("read_oob {addr:?}"));
    }
}

#[test]
fn out_of_range_program_is_refused() {
    let mut dev = tiny_dev();
    let (data, oob) = page_bytes(&dev.geometry(), 1);
    for addr in bad_pages(&dev) {
        assert_out_of_range(
            dev.program_page(addr, &data, &oob),
            &format!("program {addr:?}"),
        );
    }
    // Nothing was written anywhere in range.
    assert_eq!(dev.block_info(BlockAddr::new(0, 0)).unwrap().write_ptr, 0);
    assert_eq!(dev.stats().total().programs, 0);
}

#[test]
fn out_of_range_erase_is_refused() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    for addr in [
        BlockAddr::new(g.chips, 0),
        BlockAddr::new(0, g.blocks_per_chip),
        BlockAddr::new(u32::MAX, u32::MAX),
    ] {
        assert_out_of_range(dev.erase_block(addr), &format!("erase {addr:?}"));
        assert_out_of_range(dev.is_bad(addr), "is_bad");
        assert_out_of_range(dev.mark_bad(addr), "mark_bad");
        assert_out_of_range(dev.erase_count(addr), "erase_count");
        assert_out_of_range(dev.block_info(addr), "block_info");
        assert_out_of_range(dev.block_endurance(addr), "block_endurance");
    }
    assert_eq!(dev.stats().total().erases, 0);
}

#[test]
fn out_of_range_in_a_batch_is_refused() {
    let mut dev = tiny_dev();
    let (data, oob) = page_bytes(&dev.geometry(), 1);
    let g = dev.geometry();
    let batch = vec![
        Command::Read {
            addr: PageAddr::new(g.chips, 0, 0),
        },
        Command::Program {
            addr: PageAddr::new(0, 0, g.pages_per_block),
            data,
            oob,
        },
        Command::Erase {
            addr: BlockAddr::new(0, g.blocks_per_chip),
        },
        Command::ReadOob {
            addr: PageAddr::new(0, g.blocks_per_chip, 0),
        },
    ];
    for c in dev.submit(batch) {
        assert_out_of_range(c.result, "batch");
        assert_eq!((c.start_ns, c.end_ns), (0, 0));
    }
    assert_eq!(dev.now_ns(), 0);
}

fn with_bad_block() -> (FlashDevice, BlockAddr) {
    let mut dev = tiny_dev();
    let b = BlockAddr::new(0, 4);
    program_tagged(&mut dev, b.page(0)).unwrap();
    assert!(!dev.is_bad(b).unwrap());
    dev.mark_bad(b).unwrap();
    (dev, b)
}

fn assert_bad_block<T: std::fmt::Debug>(r: Result<T, FlashError>, b: BlockAddr) {
    match r {
        Err(FlashError::BadBlock(a)) if a == b => {}
        other => panic!("expected BadBlock({b}), got {other:?}"),
    }
}

#[test]
fn mark_bad_is_remembered() {
    let (mut dev, b) = with_bad_block();
    assert!(dev.is_bad(b).unwrap());
    let info = dev.block_info(b).unwrap();
    assert!(info.grown_bad);
    assert!(!info.factory_bad);
    // The marker is written where Linux looks for it: first OOB byte of page 0.
    let page_size = dev.geometry().page_size_bytes as usize;
    assert_ne!(dev.raw_page(b.page(0)).unwrap()[page_size], 0xFF);
    // Marking again is harmless; neighbours stay good.
    dev.mark_bad(b).unwrap();
    assert!(dev.is_bad(b).unwrap());
    assert!(!dev.is_bad(BlockAddr::new(0, 3)).unwrap());
    assert!(!dev.is_bad(BlockAddr::new(0, 5)).unwrap());
}

#[test]
fn bad_block_refuses_read() {
    let (mut dev, b) = with_bad_block();
    assert_bad_block(read(&mut dev, b.page(0)), b);
    assert_bad_block(read(&mut dev, b.page(1)), b);
}

#[test]
fn bad_block_refuses_read_oob() {
    let (mut dev, b) = with_bad_block();
    let mut oob = vec![0u8; dev.geometry().oob_size_bytes as usize];
    assert_bad_block(dev.read_oob(b.page(0), &mut oob), b);
}

#[test]
fn bad_block_refuses_program() {
    let (mut dev, b) = with_bad_block();
    let before = dev.raw_page(b.page(1)).unwrap();
    assert_bad_block(program_tagged(&mut dev, b.page(1)), b);
    assert_eq!(dev.raw_page(b.page(1)).unwrap(), before);
}

#[test]
fn bad_block_refuses_erase() {
    let (mut dev, b) = with_bad_block();
    assert_bad_block(dev.erase_block(b), b);
    assert_eq!(dev.erase_count(b).unwrap(), 0);
    assert!(dev.is_bad(b).unwrap());
}

#[test]
fn bad_block_refuses_batched_ops() {
    let (mut dev, b) = with_bad_block();
    let (data, oob) = page_bytes(&dev.geometry(), 3);
    let batch = vec![
        Command::Read { addr: b.page(0) },
        Command::ReadOob { addr: b.page(0) },
        Command::Program {
            addr: b.page(1),
            data,
            oob,
        },
        Command::Erase { addr: b },
    ];
    for c in dev.submit(batch) {
        assert_bad_block(c.result, b);
    }
}

fn assert_buffer_size<T: std::fmt::Debug>(r: Result<T, FlashError>, got: usize, want: usize) {
    match r {
        Err(FlashError::BufferSize { got: g, want: w }) if g == got && w == want => {}
        other => panic!("expected BufferSize {{ got: {got}, want: {want} }}, got {other:?}"),
    }
}

#[test]
fn wrong_read_buffer_sizes_are_refused() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let (ps, os) = (g.page_size_bytes as usize, g.oob_size_bytes as usize);
    let addr = PageAddr::new(0, 1, 0);
    program_tagged(&mut dev, addr).unwrap();
    let now = dev.now_ns();
    for (d, o) in [
        (ps - 1, os),
        (ps + 1, os),
        (0, os),
        (ps, os - 1),
        (ps, os + 1),
        (ps, 0),
    ] {
        let mut data = vec![0u8; d];
        let mut oob = vec![0u8; o];
        let (got, want) = if d != ps { (d, ps) } else { (o, os) };
        assert_buffer_size(dev.read_page(addr, &mut data, &mut oob), got, want);
    }
    for o in [0, os - 1, os + 1, ps] {
        let mut oob = vec![0u8; o];
        assert_buffer_size(dev.read_oob(addr, &mut oob), o, os);
    }
    assert_eq!(dev.now_ns(), now, "refused reads take no time");
}

#[test]
fn wrong_program_buffer_sizes_are_refused() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let (ps, os) = (g.page_size_bytes as usize, g.oob_size_bytes as usize);
    let addr = PageAddr::new(0, 1, 0);
    for (d, o) in [
        (ps - 1, os),
        (ps + 1, os),
        (0, 0),
        (ps, os - 1),
        (ps, os + 1),
        (ps, 0),
    ] {
        let data = vec![0u8; d];
        let oob = vec![0u8; o];
        let (got, want) = if d != ps { (d, ps) } else { (o, os) };
        assert_buffer_size(dev.program_page(addr, &data, &oob), got, want);
    }
    // None of them consumed the page.
    assert_eq!(dev.block_info(addr.block_addr()).unwrap().write_ptr, 0);
    assert_eq!(dev.raw_page(addr).unwrap(), erased_raw(&g));
    program_tagged(&mut dev, addr).unwrap();
}

#[test]
fn erase_resets_the_block() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let b = BlockAddr::new(0, 2);
    for p in 0..10 {
        program_tagged(&mut dev, b.page(p)).unwrap();
    }
    let neighbour = program_tagged(&mut dev, BlockAddr::new(0, 3).page(0)).unwrap();
    dev.erase_block(b).unwrap();
    for p in 0..g.pages_per_block {
        assert_eq!(dev.raw_page(b.page(p)).unwrap(), erased_raw(&g), "page {p}");
    }
    assert_eq!(read_raw(&mut dev, b.page(0)).unwrap(), erased_raw(&g));
    let info = dev.block_info(b).unwrap();
    assert_eq!((info.erase_count, info.write_ptr), (1, 0));
    assert!(!info.erase_torn);
    // Page 0 can be programmed again, with different data.
    let (data, oob) = page_bytes(&g, 12345);
    dev.program_page(b.page(0), &data, &oob).unwrap();
    assert_eq!(
        read_raw(&mut dev, b.page(0)).unwrap(),
        stored_raw(&g, &data, &oob)
    );
    // Other blocks are untouched.
    assert_eq!(
        dev.raw_page(BlockAddr::new(0, 3).page(0)).unwrap(),
        neighbour
    );
    assert_eq!(dev.erase_count(BlockAddr::new(0, 3)).unwrap(), 0);
    // Erasing an erased block is fine and counts.
    dev.erase_block(b).unwrap();
    dev.erase_block(b).unwrap();
    assert_eq!(dev.erase_count(b).unwrap(), 3);
}

#[test]
fn erase_then_reprogram_never_shows_old_bytes() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let b = BlockAddr::new(0, 8);
    for p in 0..10 {
        program_tagged(&mut dev, b.page(p)).unwrap();
    }
    dev.erase_block(b).unwrap();
    let mut fresh = Vec::new();
    for p in 0..3 {
        let (data, oob) = page_bytes(&g, 5000 + u64::from(p));
        dev.program_page(b.page(p), &data, &oob).unwrap();
        fresh.push(stored_raw(&g, &data, &oob));
    }
    for p in 0..g.pages_per_block {
        let want = fresh
            .get(p as usize)
            .cloned()
            .unwrap_or_else(|| erased_raw(&g));
        assert_eq!(dev.raw_page(b.page(p)).unwrap(), want, "raw page {p}");
        assert_eq!(
            read_raw(&mut dev, b.page(p)).unwrap(),
            want,
            "read page {p}"
        );
    }
    assert_eq!(dev.block_info(b).unwrap().write_ptr, 3);
}

#[test]
fn stats_count_successful_operations() {
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let raw = g.raw_page_bytes() as u64;
    let b = BlockAddr::new(0, 1);
    program_tagged(&mut dev, b.page(0)).unwrap();
    program_tagged(&mut dev, b.page(1)).unwrap();
    read(&mut dev, b.page(0)).unwrap();
    let mut oob = vec![0u8; g.oob_size_bytes as usize];
    dev.read_oob(b.page(1), &mut oob).unwrap();
    dev.erase_block(b).unwrap();
    let _ = program_tagged(&mut dev, b.page(3)); // refused: not counted
    let s = dev.stats();
    assert_eq!(s.chips.len(), 1);
    let t = s.total();
    assert_eq!(t.programs, 2);
    assert_eq!(t.page_reads, 1);
    assert_eq!(t.oob_reads, 1);
    assert_eq!(t.erases, 1);
    assert_eq!(t.bytes_written, 2 * raw);
    assert_eq!(t.bytes_read, raw + u64::from(g.oob_size_bytes));
    assert_eq!(t.busy_ns, dev.now_ns());
}
