//! Energy: each operation adds exactly its preset's figure, on both executors and through
//! the striped view, and p chips doing the same operations as one spend the same energy in
//! less time.

use crate::common::*;
use nandkit_flash::{
    preset, BlockAddr, Command, DeviceOptions, ExecutorKind, Flash, FlashDevice, Geometry,
    PageAddr, PowerCut, StripedFlash,
};

const KINDS: [ExecutorKind; 2] = [ExecutorKind::Simulated, ExecutorKind::Threaded];
const CHIPS: [u32; 3] = [1, 2, 4];

/// mlc-1g split over `chips` chips, no factory bad blocks.
fn device(kind: ExecutorKind, chips: u32) -> FlashDevice {
    let mut c = preset("mlc-1g").unwrap().with_chips(chips).unwrap();
    c.wear.factory_bad_fraction = 0.0;
    let options = DeviceOptions {
        executor: kind,
        realtime: false,
        host: nandkit_flash::HostCost::ZERO,
    };
    FlashDevice::ram_with(c, options).unwrap()
}

fn program_cmd(g: Geometry, addr: PageAddr) -> Command {
    let (data, oob) = page_bytes(&g, tag(addr));
    Command::Program { addr, data, oob }
}

#[test]
fn each_operation_adds_exactly_its_preset_figure() {
    for kind in KINDS {
        let mut dev = device(kind, 1);
        let e = dev.config().energy;
        let g = dev.geometry();
        let page = g.raw_page_bytes() as u64;
        let oob = u64::from(g.oob_size_bytes);
        assert_eq!(dev.stats().energy_pj(), 0);
        let addr = PageAddr::new(0, 1, 0);
        let steps: [(&str, u64); 4] = [
            ("program", e.program_pj + page * e.transfer_pj_per_byte),
            ("read", e.read_pj + page * e.transfer_pj_per_byte),
            ("read_oob", e.read_pj + oob * e.transfer_pj_per_byte),
            ("erase", e.erase_pj),
        ];
        for (op, want) in steps {
            let before = dev.stats().energy_pj();
            match op {
                "program" => drop(program_tagged(&mut dev, addr).unwrap()),
                "read" => drop(read(&mut dev, addr).unwrap()),
                "read_oob" => {
                    let mut buf = vec![0u8; g.oob_size_bytes as usize];
                    dev.read_oob(addr, &mut buf).unwrap();
                }
                _ => dev.erase_block(addr.block_addr()).unwrap(),
            }
            assert_eq!(dev.stats().energy_pj() - before, want, "{kind:?} {op}");
        }
        // mlc-1g: 49.5 uJ program, 2.0625 uJ read, 165 uJ erase, 2.063 nJ a bus byte.
        let total = dev.stats().energy_pj();
        assert_eq!(
            total,
            49_500_000 + 2 * 2_062_500 + 165_000_000 + (2 * 2112 + 64) * 2_063
        );
        assert!((dev.stats().energy_j() - total as f64 * 1e-12).abs() < 1e-15);
    }
}

#[test]
fn refused_operations_cost_nothing_torn_ones_cost_in_full() {
    let mut dev = device(ExecutorKind::Simulated, 1);
    let e = dev.config().energy;
    // Out of order: refused before the chip does anything.
    assert!(program_tagged(&mut dev, PageAddr::new(0, 1, 3)).is_err());
    assert_eq!(dev.stats().energy_pj(), 0);
    // A program cut by power loss was running: it spent its energy.
    dev.arm_power_cut(PowerCut::AtOp(0));
    assert!(program_tagged(&mut dev, PageAddr::new(0, 1, 0)).is_err());
    let page = dev.geometry().raw_page_bytes() as u64;
    assert_eq!(
        dev.stats().energy_pj(),
        e.program_pj + page * e.transfer_pj_per_byte
    );
}

/// Four programs, reads and erases, spread over the chips (all on chip 0 when p = 1).
/// Returns (energy in pJ, simulated ns).
fn spread_work(kind: ExecutorKind, p: u32) -> (u64, u64) {
    let mut dev = device(kind, p);
    let g = dev.geometry();
    let addrs: Vec<_> = (0..4u32)
        .map(|k| PageAddr::new(k % p, 1 + k / p, 0))
        .collect();
    let programs = addrs.iter().map(|&a| program_cmd(g, a)).collect();
    let reads = addrs.iter().map(|&addr| Command::Read { addr }).collect();
    let erases = addrs
        .iter()
        .map(|a| Command::Erase {
            addr: a.block_addr(),
        })
        .collect();
    for batch in [programs, reads, erases] {
        for c in dev.submit(batch) {
            c.result.unwrap();
        }
    }
    (dev.stats().energy_pj(), dev.now_ns())
}

#[test]
fn p_chips_spend_the_energy_of_one_in_less_time() {
    for kind in KINDS {
        let (one_pj, one_ns) = spread_work(kind, 1);
        let e = device(kind, 1).config().energy;
        let page = 2112;
        let want = 4 * (e.program_pj + e.read_pj + e.erase_pj + 2 * page * e.transfer_pj_per_byte);
        assert_eq!(one_pj, want, "{kind:?}");
        for p in [2, 4] {
            let (pj, ns) = spread_work(kind, p);
            assert_eq!(pj, one_pj, "{kind:?} p={p}: energy is not parallel time");
            assert!(
                ns < one_ns,
                "{kind:?} p={p}: {ns} ns vs {one_ns} ns on one chip"
            );
        }
    }
}

#[test]
fn striped_writes_spend_one_program_per_page_on_any_array() {
    // The same 16 virtual pages through MA's striped view on 1, 2 and 4 chips: same energy.
    let mut spent = Vec::new();
    for p in CHIPS {
        let mut dev = StripedFlash::new(device(ExecutorKind::Simulated, p));
        let g = dev.geometry();
        let batch = (0..16)
            .map(|k| program_cmd(g, PageAddr::new(0, 1, k)))
            .collect();
        for c in dev.submit(batch) {
            c.result.unwrap();
        }
        let stats = dev.stats();
        assert_eq!(stats.total().programs, 16, "p={p}");
        spent.push(stats.energy_pj());
    }
    assert!(spent.iter().all(|&pj| pj == spent[0]), "{spent:?}");
    // Erasing a virtual block erases block b of every chip: p erases, p times the energy.
    for p in CHIPS {
        let mut dev = StripedFlash::new(device(ExecutorKind::Simulated, p));
        let erase_pj = dev.config().energy.erase_pj;
        dev.erase_block(BlockAddr::new(0, 1)).unwrap();
        assert_eq!(dev.stats().energy_pj(), u64::from(p) * erase_pj, "p={p}");
    }
}
