//! Simulated time on 1, 2 and 4 chips, with both executors: chips overlap, one chip queues,
//! and the two executors agree to the nanosecond.

use crate::common::*;
use nandkit_flash::{
    preset, BlockAddr, Command, Completion, DeviceOptions, ExecutorKind, Flash, FlashDevice,
    Geometry, PageAddr,
};

const KINDS: [ExecutorKind; 2] = [ExecutorKind::Simulated, ExecutorKind::Threaded];
const CHIPS: [u32; 3] = [1, 2, 4];

/// mlc-1g split over `chips` chips (RAM is allocated lazily, so 1 GiB is cheap).
fn device(kind: ExecutorKind, chips: u32) -> FlashDevice {
    let mut c = preset("mlc-1g").unwrap().with_chips(chips).unwrap();
    c.wear.factory_bad_fraction = 0.0;
    FlashDevice::ram_with(
        c,
        DeviceOptions {
            executor: kind,
            realtime: false,
            host: nandkit_flash::HostCost::ZERO,
        },
    )
    .unwrap()
}

struct Costs {
    program: u64,
    read: u64,
    read_oob: u64,
    erase: u64,
}

fn costs(dev: &FlashDevice) -> Costs {
    let t = dev.config().timing;
    let g = dev.geometry();
    Costs {
        program: t.program_cost_ns(g.raw_page_bytes()),
        read: t.read_cost_ns(g.raw_page_bytes()),
        read_oob: t.read_cost_ns(g.oob_size_bytes as usize),
        erase: t.erase_cost_ns(),
    }
}

fn program_cmd(g: Geometry, addr: PageAddr) -> Command {
    let (data, oob) = page_bytes(&g, tag(addr));
    Command::Program { addr, data, oob }
}

#[test]
fn mlc_costs_are_the_table_one_latencies_plus_the_bus() {
    let dev = device(ExecutorKind::Simulated, 1);
    let c = costs(&dev);
    // 2112 bytes over a 40 MB/s bus take 52.8 us.
    assert_eq!(c.program, 52_800 + 600_000);
    assert_eq!(c.read, 25_000 + 52_800);
    assert_eq!(c.read_oob, 25_000 + 1_600);
    assert_eq!(c.erase, 2_000_000);
}

#[test]
fn single_ops_advance_the_clock_by_one_cost() {
    for kind in KINDS {
        for p in CHIPS {
            let mut dev = device(kind, p);
            let c = costs(&dev);
            assert_eq!(dev.now_ns(), 0);
            let mut expect = 0;
            for chip in 0..p {
                let addr = PageAddr::new(chip, 1, 0);
                program_tagged(&mut dev, addr).unwrap();
                expect += c.program;
                assert_eq!(dev.now_ns(), expect, "{kind:?} p={p} program");
                read(&mut dev, addr).unwrap();
                expect += c.read;
                assert_eq!(dev.now_ns(), expect, "{kind:?} p={p} read");
                let mut oob = vec![0u8; dev.geometry().oob_size_bytes as usize];
                dev.read_oob(addr, &mut oob).unwrap();
                expect += c.read_oob;
                assert_eq!(dev.now_ns(), expect, "{kind:?} p={p} read_oob");
                dev.erase_block(addr.block_addr()).unwrap();
                expect += c.erase;
                assert_eq!(dev.now_ns(), expect, "{kind:?} p={p} erase");
                assert_eq!(dev.chip_busy_until_ns(chip), expect);
                // Queries and refused operations take no time.
                dev.is_bad(addr.block_addr()).unwrap();
                dev.block_info(addr.block_addr()).unwrap();
                let _ = program_tagged(&mut dev, PageAddr::new(chip, 1, 5));
                assert_eq!(dev.now_ns(), expect);
            }
            let busy: u64 = dev.stats().chips.iter().map(|s| s.busy_ns).sum();
            assert_eq!(busy, expect, "single ops never overlap");
        }
    }
}

#[test]
fn advance_clock_moves_the_next_op_start() {
    for kind in KINDS {
        let mut dev = device(kind, 2);
        let c = costs(&dev);
        let g = dev.geometry();
        dev.advance_clock_ns(1_000);
        assert_eq!(dev.now_ns(), 1_000);
        let done = dev.submit(vec![program_cmd(g, PageAddr::new(1, 1, 0))]);
        assert_eq!(done[0].start_ns, 1_000);
        assert_eq!(done[0].end_ns, 1_000 + c.program);
        assert_eq!(dev.now_ns(), 1_000 + c.program);
        dev.advance_clock_ns(5_000_000);
        let t0 = dev.now_ns();
        dev.erase_block(BlockAddr::new(0, 2)).unwrap();
        assert_eq!(dev.now_ns(), t0 + c.erase);
        dev.advance_clock_ns(0);
        assert_eq!(dev.now_ns(), t0 + c.erase);
    }
}

fn check_parallel(kind: ExecutorKind, p: u32) {
    let mut dev = device(kind, p);
    let c = costs(&dev);
    let g = dev.geometry();
    dev.advance_clock_ns(123);
    let t0 = dev.now_ns();
    let batch = (0..p)
        .map(|chip| program_cmd(g, PageAddr::new(chip, 1, 0)))
        .collect();
    let done = dev.submit(batch);
    assert_eq!(done.len(), p as usize);
    for (chip, d) in done.iter().enumerate() {
        assert!(d.result.is_ok(), "{:?}", d.result);
        assert_eq!((d.start_ns, d.end_ns), (t0, t0 + c.program), "chip {chip}");
        assert_eq!(dev.chip_busy_until_ns(chip as u32), t0 + c.program);
    }
    assert_eq!(dev.now_ns() - t0, c.program, "{kind:?} p={p}");
    // Erases and reads overlap the same way.
    let t1 = dev.now_ns();
    let batch = (0..p)
        .map(|chip| Command::Erase {
            addr: BlockAddr::new(chip, 2),
        })
        .collect();
    dev.submit(batch);
    assert_eq!(dev.now_ns() - t1, c.erase, "{kind:?} p={p}");
    let t2 = dev.now_ns();
    let batch = (0..p)
        .map(|chip| Command::Read {
            addr: PageAddr::new(chip, 1, 0),
        })
        .collect();
    for d in dev.submit(batch) {
        assert!(d.result.is_ok());
    }
    assert_eq!(dev.now_ns() - t2, c.read, "{kind:?} p={p}");
}

#[test]
fn programs_on_p_chips_take_one_program_cost() {
    for kind in KINDS {
        for p in CHIPS {
            check_parallel(kind, p);
        }
    }
}

fn check_serial(kind: ExecutorKind, p: u32) {
    let mut dev = device(kind, p);
    let c = costs(&dev);
    let g = dev.geometry();
    let t0 = dev.now_ns();
    let batch = (0..p)
        .map(|page| program_cmd(g, PageAddr::new(0, 1, page)))
        .collect();
    let done = dev.submit(batch);
    for (k, d) in done.iter().enumerate() {
        assert!(d.result.is_ok(), "{:?}", d.result);
        let k = k as u64;
        assert_eq!(d.start_ns, t0 + k * c.program);
        assert_eq!(d.end_ns, t0 + (k + 1) * c.program);
    }
    assert_eq!(
        dev.now_ns() - t0,
        u64::from(p) * c.program,
        "{kind:?} p={p}"
    );
    // The other chips stayed idle.
    for chip in 1..p {
        assert_eq!(dev.chip_busy_until_ns(chip), 0);
    }
}

#[test]
fn programs_on_one_chip_take_p_costs() {
    for kind in KINDS {
        for p in CHIPS {
            check_serial(kind, p);
        }
    }
}

#[test]
fn a_batch_lasts_as_long_as_its_busiest_chip() {
    for kind in KINDS {
        let mut dev = device(kind, 4);
        let c = costs(&dev);
        let g = dev.geometry();
        let mut batch = Vec::new();
        // Chip 0: three programs; chip 1: one; chip 2: one erase; chip 3: idle.
        for page in 0..3 {
            batch.push(program_cmd(g, PageAddr::new(0, 1, page)));
        }
        batch.push(program_cmd(g, PageAddr::new(1, 1, 0)));
        batch.push(Command::Erase {
            addr: BlockAddr::new(2, 1),
        });
        let done = dev.submit(batch);
        assert_eq!(done[3].end_ns, c.program);
        assert_eq!(done[4].end_ns, c.erase);
        assert_eq!(dev.now_ns(), (3 * c.program).max(c.erase));
        assert_eq!(dev.chip_busy_until_ns(3), 0);
    }
}

/// What a completion shows, comparable across executors.
fn summary(done: &[Completion]) -> Vec<(String, u64, u64)> {
    done.iter()
        .map(|c| (format!("{:?}", c.result), c.start_ns, c.end_ns))
        .collect()
}

/// Everything observable after a run: completions, final clock, stats, raw pages.
type Observed = (Vec<(String, u64, u64)>, u64, String, Vec<Vec<u8>>);

/// Setup and two mixed batches; returns everything observable.
fn mixed_run(kind: ExecutorKind, p: u32) -> Observed {
    let mut dev = device(kind, p);
    let c = costs(&dev);
    for chip in 0..p {
        for page in 0..2 {
            program_tagged(&mut dev, PageAddr::new(chip, 1, page)).unwrap();
        }
    }
    dev.mark_bad(BlockAddr::new(0, 5)).unwrap();
    let t0 = dev.now_ns();
    let g = dev.geometry();
    let mut batch = Vec::new();
    let per_chip: Vec<Box<dyn Fn(u32) -> Command>> = vec![
        Box::new(|chip| Command::Read {
            addr: PageAddr::new(chip, 1, 0),
        }),
        Box::new(|chip| Command::ReadOob {
            addr: PageAddr::new(chip, 1, 1),
        }),
        Box::new(|chip| program_cmd(g, PageAddr::new(chip, 1, 2))),
        Box::new(|chip| program_cmd(g, PageAddr::new(chip, 1, 9))), // out of order
        Box::new(|chip| Command::Erase {
            addr: BlockAddr::new(chip, 2),
        }),
        Box::new(|chip| program_cmd(g, PageAddr::new(chip, 1, 3))),
        Box::new(|chip| Command::Read {
            addr: PageAddr::new(chip, 1, 3),
        }),
        Box::new(|chip| Command::Read {
            addr: PageAddr::new(chip, 5, 0), // bad on chip 0
        }),
        Box::new(|chip| Command::ReadOob {
            addr: PageAddr::new(chip, 1_000_000, 0), // out of range
        }),
    ];
    for make in &per_chip {
        for chip in 0..p {
            batch.push(make(chip));
        }
    }
    batch.push(Command::Read {
        addr: PageAddr::new(p, 0, 0), // no such chip
    });
    let n = batch.len();
    let done = dev.submit(batch);
    assert_eq!(done.len(), n);
    // Each chip: read, OOB read, two programs, an erase, a read, and (not on chip 0) the
    // read of block 5. The batch lasts as long as the busiest chip.
    let chip0 = c.read + c.read_oob + 2 * c.program + c.erase + c.read;
    let expect = if p > 1 { chip0 + c.read } else { chip0 };
    assert_eq!(dev.now_ns() - t0, expect, "{kind:?} p={p}");
    let s = summary(&done);
    let errors = s.iter().filter(|x| x.0.starts_with("Err")).count();
    assert_eq!(errors, p as usize * 2 + 1 + 1, "{s:?}");
    // The program of page 3 after the refused page 9 landed, and reads back in the batch.
    let read3 = &done[6 * p as usize];
    let g = dev.geometry();
    let (data, oob) = page_bytes(&g, tag(PageAddr::new(0, 1, 3)));
    let oob = stored_oob(&g, &data, &oob);
    match &read3.result {
        Ok(nandkit_flash::Reply::Read {
            data: d, oob: o, ..
        }) => {
            assert!(d == &data && o == &oob)
        }
        other => panic!("{other:?}"),
    }

    let mut all = s;
    let second = (0..p)
        .flat_map(|chip| {
            [
                Command::Erase {
                    addr: BlockAddr::new(chip, 1),
                },
                Command::Read {
                    addr: PageAddr::new(chip, 1, 0),
                },
                Command::Read {
                    addr: PageAddr::new(chip, 3, 0),
                },
            ]
        })
        .collect();
    all.extend(summary(&dev.submit(second)));
    let stats = format!("{:?}", dev.stats());
    let mut raw = Vec::new();
    for chip in 0..p {
        for (b, pg) in [(1, 0), (1, 3), (2, 0), (3, 0), (5, 0)] {
            raw.push(dev.raw_page(PageAddr::new(chip, b, pg)).unwrap());
        }
    }
    (all, dev.now_ns(), stats, raw)
}

#[test]
fn executors_agree_on_a_mixed_batch() {
    for p in CHIPS {
        let sim = mixed_run(ExecutorKind::Simulated, p);
        let thr = mixed_run(ExecutorKind::Threaded, p);
        assert_eq!(sim.0.len(), thr.0.len());
        for (i, (a, b)) in sim.0.iter().zip(&thr.0).enumerate() {
            assert_eq!(a, b, "p={p}: completion {i}");
        }
        assert_eq!(sim.1, thr.1, "p={p}: final clock");
        assert_eq!(sim.2, thr.2, "p={p}: stats");
        assert!(sim.3 == thr.3, "p={p}: raw pages");
    }
}

#[test]
fn executors_agree_on_random_bit_errors() {
    // With a high raw error rate, reads draw errors from each chip's generator; the
    // executor must not change which read gets which errors.
    let run = |kind| {
        let mut c = preset("mlc-1g").unwrap().with_chips(4).unwrap();
        c.ecc.rber_fresh = 5e-4;
        let mut dev = FlashDevice::ram_with(
            c,
            DeviceOptions {
                executor: kind,
                realtime: false,
                host: nandkit_flash::HostCost::ZERO,
            },
        )
        .unwrap();
        for chip in 0..4 {
            program_tagged(&mut dev, PageAddr::new(chip, 0, 0)).unwrap();
        }
        let mut out = Vec::new();
        for _ in 0..20 {
            let batch = (0..4)
                .flat_map(|chip| {
                    [
                        Command::Read {
                            addr: PageAddr::new(chip, 0, 0),
                        },
                        Command::ReadOob {
                            addr: PageAddr::new(chip, 0, 0),
                        },
                    ]
                })
                .collect();
            out.extend(summary(&dev.submit(batch)));
        }
        (out, format!("{:?}", dev.stats()))
    };
    let sim = run(ExecutorKind::Simulated);
    let thr = run(ExecutorKind::Threaded);
    assert!(sim.0.iter().any(|c| c.0.contains("Uncorrectable")));
    assert!(sim.0.iter().any(|c| c.0.contains("max_corrected_bits: 2")));
    assert!(sim == thr);
}
