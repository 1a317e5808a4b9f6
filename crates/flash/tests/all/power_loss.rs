//! Power loss at every state-changing operation of a sequence, in RAM and in a file image.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::common::*;
use nandkit_flash::{
    BlockAddr, BlockInfo, Command, DeviceConfig, DeviceOptions, Flash, FlashDevice, FlashError,
    Geometry, PageAddr, PowerCut,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Erase(u32),
    Program(u32, u32),
    MarkBad(u32),
}

/// Blocks the setup and the sequence touch.
const TOUCHED: [u32; 6] = [1, 2, 3, 4, 5, 6];
/// A block nothing touches, for checking the device works after power returns.
const SPARE: u32 = 10;

/// Done before the cut is armed: blocks 3, 4 and 6 hold data the sequence later erases or
/// appends to.
fn setup_ops() -> Vec<Op> {
    let mut ops = Vec::new();
    ops.extend((0..5).map(|p| Op::Program(3, p)));
    ops.extend((0..3).map(|p| Op::Program(4, p)));
    ops.extend((0..2).map(|p| Op::Program(6, p)));
    ops
}

/// The sequence a cut is armed over: 19 programs, erases and a bad-block mark.
fn sequence() -> Vec<Op> {
    let mut ops = vec![Op::Erase(1)];
    ops.extend((0..8).map(|p| Op::Program(1, p)));
    ops.push(Op::Erase(2));
    ops.extend((0..3).map(|p| Op::Program(2, p)));
    ops.push(Op::Erase(3)); // over five programmed pages
    ops.push(Op::Program(3, 0));
    ops.push(Op::Program(4, 3));
    ops.push(Op::MarkBad(5));
    ops.push(Op::Program(4, 4));
    ops.push(Op::Erase(6)); // over two programmed pages
    ops
}

/// What the device should hold, given the operations that completed.
#[derive(Clone, Debug, Default)]
struct Model {
    pages: HashMap<(u32, u32), Vec<u8>>,
    erases: HashMap<u32, u32>,
    write_ptr: HashMap<u32, u32>,
    bad: HashSet<u32>,
}

impl Model {
    /// Contents programmed at (block, page): different for each erase generation.
    fn intended(&self, g: &Geometry, block: u32, page: u32) -> (Vec<u8>, Vec<u8>) {
        let generation = u64::from(self.erases.get(&block).copied().unwrap_or(0));
        page_bytes(g, tag(PageAddr::new(0, block, page)) ^ (generation << 50))
    }

    /// Raw bytes of the page once programmed: the check bytes are in its OOB.
    fn intended_raw(&self, g: &Geometry, block: u32, page: u32) -> Vec<u8> {
        let (d, o) = self.intended(g, block, page);
        stored_raw(g, &d, &o)
    }

    fn apply(&mut self, g: &Geometry, op: Op) {
        match op {
            Op::Erase(b) => {
                self.pages.retain(|&(blk, _), _| blk != b);
                *self.erases.entry(b).or_default() += 1;
                self.write_ptr.insert(b, 0);
            }
            Op::Program(b, p) => {
                let raw = self.intended_raw(g, b, p);
                self.pages.insert((b, p), raw);
                self.write_ptr.insert(b, p + 1);
            }
            Op::MarkBad(b) => {
                self.bad.insert(b);
                let page = self.pages.entry((b, 0)).or_insert_with(|| erased_raw(g));
                page[g.page_size_bytes as usize] = 0x00;
            }
        }
    }

    fn raw(&self, g: &Geometry, block: u32, page: u32) -> Vec<u8> {
        self.pages
            .get(&(block, page))
            .cloned()
            .unwrap_or_else(|| erased_raw(g))
    }
}

fn run(dev: &mut FlashDevice, model: &Model, op: Op) -> Result<(), FlashError> {
    let g = dev.geometry();
    match op {
        Op::Erase(b) => dev.erase_block(BlockAddr::new(0, b)),
        Op::Program(b, p) => {
            let (data, oob) = model.intended(&g, b, p);
            dev.program_page(PageAddr::new(0, b, p), &data, &oob)
        }
        Op::MarkBad(b) => dev.mark_bad(BlockAddr::new(0, b)),
    }
}

/// Runs the setup; returns the model after it.
fn setup(dev: &mut FlashDevice) -> Model {
    let g = dev.geometry();
    let mut model = Model::default();
    for op in setup_ops() {
        run(dev, &model, op).unwrap();
        model.apply(&g, op);
    }
    assert_eq!(dev.state_ops(), setup_ops().len() as u64);
    model
}

fn assert_power_lost<T: std::fmt::Debug>(r: Result<T, FlashError>, what: &str) {
    assert!(
        matches!(r, Err(FlashError::PowerLost)),
        "{what}: expected PowerLost, got {r:?}"
    );
}

/// Arms a cut at sequence op `n`, runs the sequence and checks every op's outcome. Returns
/// the model of the ops that completed and the torn op.
fn cut_at(dev: &mut FlashDevice, n: usize) -> (Model, Op) {
    let g = dev.geometry();
    let mut model = setup(dev);
    dev.arm_power_cut(PowerCut::AtOp(n as u64));
    let seq = sequence();
    for (i, &op) in seq.iter().enumerate() {
        let r = run(dev, &model, op);
        if i < n {
            r.unwrap_or_else(|e| panic!("cut at {n}: op {i} {op:?} failed: {e}"));
            model.apply(&g, op);
            assert!(!dev.power_lost());
        } else {
            assert_power_lost(r, &format!("cut at {n}: op {i} {op:?}"));
            assert!(dev.power_lost());
        }
    }
    (model, seq[n])
}

/// While power is out, everything is refused, reads included.
fn check_everything_refused(dev: &mut FlashDevice, model: &Model) {
    let g = dev.geometry();
    let good = PageAddr::new(0, 1, 0);
    assert_power_lost(read(dev, good), "read");
    let mut oob = vec![0u8; g.oob_size_bytes as usize];
    assert_power_lost(dev.read_oob(good, &mut oob), "read_oob");
    assert_power_lost(dev.is_bad(BlockAddr::new(0, SPARE)), "is_bad");
    assert_power_lost(
        run(dev, model, Op::Program(SPARE, 0)),
        "program after the cut",
    );
    assert_power_lost(dev.erase_block(BlockAddr::new(0, SPARE)), "erase");
    assert_power_lost(dev.mark_bad(BlockAddr::new(0, SPARE)), "mark_bad");
    let (data, oob) = model.intended(&g, SPARE, 0);
    let batch = vec![
        Command::Read { addr: good },
        Command::ReadOob { addr: good },
        Command::Program {
            addr: PageAddr::new(0, SPARE, 0),
            data,
            oob,
        },
        Command::Erase {
            addr: BlockAddr::new(0, SPARE),
        },
    ];
    for c in dev.submit(batch) {
        assert_power_lost(c.result, "batched op");
    }
    let info = dev.block_info(BlockAddr::new(0, SPARE)).unwrap();
    assert_eq!((info.erase_count, info.write_ptr), (0, 0));
    assert!(!info.grown_bad);
}

/// Every page and block record of the touched blocks against the model, allowing only the
/// torn op's damage.
fn check_state(dev: &mut FlashDevice, model: &Model, torn: Op) {
    let g = dev.geometry();
    for &b in &TOUCHED {
        let info = dev.block_info(BlockAddr::new(0, b)).unwrap();
        let erases = model.erases.get(&b).copied().unwrap_or(0);
        let wp = model.write_ptr.get(&b).copied().unwrap_or(0);
        match torn {
            Op::Erase(tb) if tb == b => {
                assert!(info.erase_torn, "block {b}");
                assert_eq!(info.erase_count, erases + 1, "a started erase counts");
                assert_eq!(info.write_ptr, g.pages_per_block);
            }
            Op::Program(tb, tp) if tb == b => {
                assert!(!info.erase_torn);
                assert_eq!(info.erase_count, erases);
                assert_eq!(info.write_ptr, tp + 1, "a torn page is used up");
            }
            _ => {
                assert!(!info.erase_torn, "block {b}");
                assert_eq!(info.erase_count, erases, "block {b}");
                assert_eq!(info.write_ptr, wp, "block {b}");
            }
        }
        assert_eq!(info.grown_bad, model.bad.contains(&b), "block {b}");
        for p in 0..g.pages_per_block {
            let raw = dev.raw_page(PageAddr::new(0, b, p)).unwrap();
            let want = model.raw(&g, b, p);
            // Interrupted programs and erases only leave bits between the two states.
            let between = |target: &[u8]| raw.iter().zip(target).all(|(r, t)| r & t == *t);
            match torn {
                Op::Program(tb, tp) if (tb, tp) == (b, p) => {
                    let intended = model.intended_raw(&g, b, p);
                    assert_ne!(raw, intended, "torn program at {b}/{p} left the full page");
                    assert!(between(&intended), "torn program at {b}/{p}");
                }
                Op::Erase(tb) if tb == b => {
                    assert!(between(&want), "torn erase at {b}/{p}");
                    if want == erased_raw(&g) {
                        assert_eq!(raw, want, "an erased page stays erased");
                    }
                }
                _ => assert_eq!(raw, want, "block {b} page {p}"),
            }
        }
    }
}

/// Raw bytes and records of the touched blocks.
fn snapshot(dev: &mut FlashDevice) -> (Vec<Vec<u8>>, Vec<BlockInfo>) {
    let g = dev.geometry();
    let mut pages = Vec::new();
    let mut infos = Vec::new();
    for &b in TOUCHED.iter().chain(&[SPARE]) {
        infos.push(dev.block_info(BlockAddr::new(0, b)).unwrap());
        for p in 0..g.pages_per_block {
            pages.push(dev.raw_page(PageAddr::new(0, b, p)).unwrap());
        }
    }
    (pages, infos)
}

/// After power returns: the torn state is what NAND rules make of it, and the rest works.
fn check_recovery(dev: &mut FlashDevice, model: &Model, torn: Op) {
    let g = dev.geometry();
    assert!(!dev.power_lost());
    match torn {
        Op::Program(b, p) => {
            let r = run(dev, model, Op::Program(b, p));
            assert!(matches!(r, Err(FlashError::NotErased(_))), "{r:?}");
            run(dev, model, Op::Program(b, p + 1)).unwrap();
            assert_eq!(
                read_raw(dev, PageAddr::new(0, b, p + 1)).unwrap(),
                model.intended_raw(&g, b, p + 1)
            );
        }
        Op::Erase(b) => {
            for p in [0, 1, g.pages_per_block - 1] {
                let r = run(dev, model, Op::Program(b, p));
                assert!(
                    matches!(r, Err(FlashError::NotErased(a)) if a == PageAddr::new(0, b, p)),
                    "{r:?}"
                );
            }
            dev.erase_block(BlockAddr::new(0, b)).unwrap();
            let info = dev.block_info(BlockAddr::new(0, b)).unwrap();
            assert!(!info.erase_torn);
            assert_eq!(info.write_ptr, 0);
            for p in 0..g.pages_per_block {
                assert_eq!(
                    dev.raw_page(PageAddr::new(0, b, p)).unwrap(),
                    erased_raw(&g)
                );
            }
            run(dev, model, Op::Program(b, 0)).unwrap();
            assert_eq!(
                read_raw(dev, PageAddr::new(0, b, 0)).unwrap(),
                model.intended_raw(&g, b, 0)
            );
        }
        Op::MarkBad(b) => {
            // The marker never reached the chip.
            assert!(!dev.is_bad(BlockAddr::new(0, b)).unwrap());
            dev.mark_bad(BlockAddr::new(0, b)).unwrap();
            assert!(dev.is_bad(BlockAddr::new(0, b)).unwrap());
        }
    }
    // Completed data reads back through ECC.
    for (&(b, p), raw) in &model.pages {
        if model.bad.contains(&b) || matches!(torn, Op::Erase(tb) if tb == b) {
            continue;
        }
        assert_eq!(&read_raw(dev, PageAddr::new(0, b, p)).unwrap(), raw);
    }
    // And an untouched block takes new data.
    dev.erase_block(BlockAddr::new(0, SPARE)).unwrap();
    run(dev, model, Op::Program(SPARE, 0)).unwrap();
    assert_eq!(
        read_raw(dev, PageAddr::new(0, SPARE, 0)).unwrap(),
        model.intended_raw(&g, SPARE, 0)
    );
}

#[test]
fn the_sequence_is_long_enough_and_valid_without_a_cut() {
    let seq = sequence();
    assert!(seq.len() >= 15);
    let mut dev = tiny_dev();
    let g = dev.geometry();
    let mut model = setup(&mut dev);
    for op in seq {
        run(&mut dev, &model, op).unwrap();
        model.apply(&g, op);
    }
    assert_eq!(
        dev.state_ops(),
        (setup_ops().len() + sequence().len()) as u64
    );
    assert!(!dev.power_lost());
    // No torn op: compare against the model with a "torn" op on a block nobody touches.
    check_state(&mut dev, &model, Op::Erase(SPARE));
}

#[test]
fn power_cut_at_every_op_in_ram() {
    for n in 0..sequence().len() {
        let mut dev = tiny_dev();
        let (model, torn) = cut_at(&mut dev, n);
        check_everything_refused(&mut dev, &model);
        check_state(&mut dev, &model, torn);
        let before = snapshot(&mut dev);
        dev.power_cycle().unwrap();
        assert!(!dev.power_lost());
        assert_eq!(
            snapshot(&mut dev),
            before,
            "cut at {n}: power cycle changed bytes"
        );
        check_state(&mut dev, &model, torn);
        check_recovery(&mut dev, &model, torn);
    }
}

/// tiny cut to 16 blocks, so an image is 2 MiB.
fn small_config() -> DeviceConfig {
    no_bit_errors(tiny()).with_total_bytes(2 << 20).unwrap()
}

#[test]
fn power_cut_at_every_op_in_a_file_image() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..sequence().len() {
        let path = dir.path().join(format!("cut-{n}.img"));
        let mut dev =
            FlashDevice::create_image(&path, small_config(), false, DeviceOptions::default())
                .unwrap();
        let (model, torn) = cut_at(&mut dev, n);
        check_everything_refused(&mut dev, &model);
        check_state(&mut dev, &model, torn);
        let before = snapshot(&mut dev);
        drop(dev); // the process dies with the power

        let bytes = read_image(&path);
        let mut dev = FlashDevice::open_image(&path, DeviceOptions::default()).unwrap();
        assert!(!dev.power_lost());
        assert_eq!(
            snapshot(&mut dev),
            before,
            "cut at {n}: reopen changed bytes"
        );
        check_state(&mut dev, &model, torn);
        drop(dev);
        assert_eq!(read_image(&path), bytes, "cut at {n}: open + close wrote");

        let mut dev = FlashDevice::open_image(&path, DeviceOptions::default()).unwrap();
        check_recovery(&mut dev, &model, torn);
    }
}

fn read_image(path: &Path) -> (Vec<u8>, Vec<u8>) {
    let meta = nandkit_flash::backend::file::sidecar_path(path);
    (std::fs::read(path).unwrap(), std::fs::read(meta).unwrap())
}

/// Runs the sequence under a random cut; returns the op that was torn and the state after.
fn random_cut(seed: u64, within: u64) -> (usize, (Vec<Vec<u8>>, Vec<BlockInfo>)) {
    let mut dev = tiny_dev();
    let mut model = setup(&mut dev);
    let g = dev.geometry();
    dev.arm_power_cut(PowerCut::Random { seed, within });
    let mut torn = None;
    for (i, op) in sequence().into_iter().enumerate() {
        match run(&mut dev, &model, op) {
            Ok(()) => {
                assert!(torn.is_none(), "op {i} ran after the cut");
                model.apply(&g, op);
            }
            Err(FlashError::PowerLost) => {
                torn.get_or_insert(i);
            }
            Err(e) => panic!("op {i}: {e}"),
        }
    }
    let torn = torn.expect("the cut falls inside the sequence");
    check_state(&mut dev, &model, sequence()[torn]);
    (torn, snapshot(&mut dev))
}

#[test]
fn random_power_cut_is_deterministic_for_a_seed() {
    let within = sequence().len() as u64;
    let mut seen = HashSet::new();
    for seed in 0..16 {
        let (a, state_a) = random_cut(seed, within);
        let (b, state_b) = random_cut(seed, within);
        assert_eq!(a, b, "seed {seed}");
        assert_eq!(state_a, state_b, "seed {seed}");
        assert!((a as u64) < within);
        seen.insert(a);
    }
    assert!(seen.len() > 3, "seeds pick different ops: {seen:?}");
    // A window of one cuts the very next op.
    assert_eq!(random_cut(99, 1).0, 0);
}

#[test]
fn reads_do_not_count_toward_the_cut() {
    let mut dev = tiny_dev();
    let model = Model::default();
    dev.arm_power_cut(PowerCut::AtOp(1));
    for _ in 0..5 {
        read(&mut dev, PageAddr::new(0, 1, 0)).unwrap();
        dev.is_bad(BlockAddr::new(0, 1)).unwrap();
    }
    run(&mut dev, &model, Op::Program(1, 0)).unwrap();
    assert_eq!(dev.state_ops(), 1);
    read(&mut dev, PageAddr::new(0, 1, 0)).unwrap();
    assert_power_lost(run(&mut dev, &model, Op::Program(1, 1)), "op 1");
    assert!(dev.power_lost());
}

#[test]
fn a_cut_counts_from_arming_and_can_be_disarmed() {
    let mut dev = tiny_dev();
    let mut model = setup(&mut dev);
    let g = dev.geometry();
    dev.arm_power_cut(PowerCut::AtOp(2));
    dev.disarm_power_cut();
    for op in sequence() {
        run(&mut dev, &model, op).unwrap();
        model.apply(&g, op);
    }
    assert!(!dev.power_lost());
    // Armed late, AtOp(0) is the next op, not op 0 of the device.
    dev.arm_power_cut(PowerCut::AtOp(0));
    assert_power_lost(dev.erase_block(BlockAddr::new(0, SPARE)), "first op");
    assert!(dev.block_info(BlockAddr::new(0, SPARE)).unwrap().erase_torn);
}

#[test]
fn power_cycle_clears_a_pending_cut() {
    let mut dev = tiny_dev();
    let model = Model::default();
    dev.arm_power_cut(PowerCut::AtOp(3));
    dev.power_cycle().unwrap();
    for p in 0..8 {
        run(&mut dev, &model, Op::Program(1, p)).unwrap();
    }
    assert!(!dev.power_lost());
}
