//! A UBI per chip under the striped view (MA's Figure 5): LEB mapping, bad-block reserve,
//! erase counters, wear levelling, and power cuts at every operation, UBI's own included.

use std::collections::BTreeMap;

use crate::common::*;
use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{
    preset, BlockAddr, Command, Flash, FlashDevice, FlashError, PageAddr, PowerCut, StripedFlash,
};

type Ubi = StripedFlash<FlashDevice>;

fn device(name: &str, chips: u32, bad_fraction: f64) -> FlashDevice {
    let mut c = no_bit_errors(preset(name).unwrap().with_chips(chips).unwrap());
    c.wear.factory_bad_fraction = bad_fraction;
    FlashDevice::ram(c).unwrap()
}

fn params(wl_threshold: u32) -> UbiParams {
    UbiParams {
        wl_threshold,
        ..UbiParams::default()
    }
}

/// What virtual page k of a LEB holds: its tag's page, or erased (None).
fn read(s: &mut Ubi, leb: u32, k: u32) -> Result<Vec<u8>, FlashError> {
    let g = s.geometry();
    let mut data = vec![0; g.page_size_bytes as usize];
    let mut oob = vec![0; g.oob_size_bytes as usize];
    s.read_page(PageAddr::new(0, leb, k), &mut data, &mut oob)?;
    Ok(data)
}

fn holds(s: &mut Ubi, leb: u32, pages: u32, tag: u64) -> bool {
    let g = s.geometry();
    (0..pages).all(|k| read(s, leb, k).unwrap() == page_bytes(&g, tag * 1000 + u64::from(k)).0)
        && read(s, leb, pages).unwrap().iter().all(|&b| b == 0xFF)
}

#[test]
fn a_leb_is_the_same_leb_of_every_chip_and_survives_attach() {
    let mut s = Ubi::format_ubi(device("tiny", 4, 0.0), UbiParams::default()).unwrap();
    let g = s.geometry();
    let phys = s.inner().geometry();
    assert_eq!(g.pages_per_block, 4 * (phys.pages_per_block - 2));
    // 16 PEBs a chip: 1 kept for bad blocks, 2 for wear levelling and remapping, 2 for
    // the layout volume (the volume table, twice).
    assert_eq!(g.blocks_per_chip, 11);
    // An unmapped LEB reads erased without touching flash.
    let reads = s.inner_mut().stats().total().page_reads;
    assert!(read(&mut s, 3, 0).unwrap().iter().all(|&b| b == 0xFF));
    assert_eq!(s.inner_mut().stats().total().page_reads, reads);
    write_leb(&mut s, 3, 9, 7).unwrap();
    write_leb(&mut s, 10, g.pages_per_block, 8).unwrap();
    assert!(holds(&mut s, 3, 9, 7));
    // Rewriting a LEB maps fresh PEBs: the old ones are erased in the background.
    write_leb(&mut s, 3, 5, 9).unwrap();
    let mut s = Ubi::attach_ubi(s.into_inner(), false).unwrap();
    assert!(holds(&mut s, 3, 5, 9));
    let g = s.geometry();
    let last = g.pages_per_block - 1;
    assert_eq!(
        read(&mut s, 10, last).unwrap(),
        page_bytes(&g, 8000 + u64::from(last)).0
    );
    assert_eq!(s.ubi_check().unwrap(), Vec::<String>::new());
    let r = s.ubi_report().unwrap();
    assert_eq!(r.chips.iter().map(|c| c.mapped_lebs).sum::<u32>(), 8);
}

#[test]
fn an_unformatted_array_is_not_ubi() {
    let mut dev = device("tiny", 2, 0.0);
    assert!(!nandkit_flash::ubi::probe(&mut dev).unwrap());
    let err = Ubi::attach_ubi(dev, true).err().expect("no UBI there");
    assert!(
        err.to_string().contains("no UBI erase-counter header"),
        "{err}"
    );
    let mut s = Ubi::format_ubi(device("tiny", 2, 0.0), UbiParams::default()).unwrap();
    write_leb(&mut s, 0, 2, 1).unwrap();
    let s = Ubi::open(s.into_inner(), true).unwrap();
    assert!(s.ubi().is_some());
}

#[test]
fn a_bad_block_costs_one_block_of_one_chip() {
    // Same chips, with and without factory bad blocks: the volume is the same size, since
    // every chip keeps the same reserve, and the bad PEBs are each one chip's.
    let clean = Ubi::format_ubi(device("mlc-1g", 8, 0.0), UbiParams::default()).unwrap();
    let mut bad = Ubi::format_ubi(device("mlc-1g", 8, 0.004), UbiParams::default()).unwrap();
    assert_eq!(clean.geometry(), bad.geometry());
    let r = bad.ubi_report().unwrap();
    let bads: Vec<u32> = r.chips.iter().map(|c| c.bad).collect();
    assert!(
        bads.iter().sum::<u32>() > 0,
        "the seed gave no bad block: {bads:?}"
    );
    assert!(bads.contains(&0), "every chip hit: {bads:?}");
    // Without UBI, block b of a chip with a bad block b takes stripe b out.
    let mut raw = StripedFlash::new(device("mlc-1g", 8, 0.004));
    let g = raw.geometry();
    let out = (0..g.blocks_per_chip)
        .filter(|&b| raw.is_bad(BlockAddr::new(0, b)).unwrap())
        .count() as u32;
    // (two chips may have the same block bad: one stripe for both)
    assert!(out >= *bads.iter().max().unwrap() && out <= bads.iter().sum::<u32>());
    assert!(
        out > bad.ubi_report().unwrap().chips.len() as u32,
        "{out} stripes lost"
    );
    // Every LEB works on the UBI array.
    let last = bad.geometry().blocks_per_chip - 1;
    write_leb(&mut bad, last, 8, 3).unwrap();
    assert!(holds(&mut bad, last, 8, 3));
    // Too many bad blocks for the reserve: a clear error at format.
    let err = Ubi::format_ubi(device("mlc-1g", 8, 0.05), UbiParams::default())
        .err()
        .expect("past the reserve");
    assert!(err.to_string().contains("more than UBI's reserve"), "{err}");
}

/// Writes cold LEBs once, then rewrites a few hot ones `rounds` times; the spread of erase
/// counts per chip after.
fn hot_and_cold(wl_threshold: u32, rounds: u32) -> (Ubi, Vec<u32>) {
    let mut s = Ubi::format_ubi(device("tiny", 2, 0.0), params(wl_threshold)).unwrap();
    let lebs = s.geometry().blocks_per_chip;
    for leb in 0..lebs - 3 {
        write_leb(&mut s, leb, 4, u64::from(leb)).unwrap();
    }
    for r in 0..rounds {
        let leb = lebs - 3 + r % 3;
        write_leb(&mut s, leb, 4, 100 + u64::from(r)).unwrap();
    }
    let spread = s
        .ubi_report()
        .unwrap()
        .chips
        .iter()
        .map(|c| c.ec_max - c.ec_min)
        .collect();
    (s, spread)
}

#[test]
fn wear_levelling_keeps_the_spread_within_its_threshold() {
    // UBI picks the target of a move within twice the threshold of the least-worn free
    // PEB (WL_FREE_MAX_DIFF), so that is the bound on the spread it keeps.
    let (_, off) = hot_and_cold(u32::MAX, 600);
    assert!(off.iter().all(|&d| d > 64), "without levelling: {off:?}");
    let (mut s, on) = hot_and_cold(8, 600);
    assert!(on.iter().all(|&d| d <= 16), "with levelling at 8: {on:?}");
    let r = s.ubi_report().unwrap();
    assert!(r.wl_moves > 0);
    // The cold data moved and reads back, before and after an attach.
    let lebs = s.geometry().blocks_per_chip;
    for leb in 0..lebs - 3 {
        assert!(holds(&mut s, leb, 4, u64::from(leb)), "LEB {leb}");
    }
    let mut s = Ubi::attach_ubi(s.into_inner(), false).unwrap();
    for leb in 0..lebs - 3 {
        assert!(
            holds(&mut s, leb, 4, u64::from(leb)),
            "LEB {leb} after attach"
        );
    }
    assert_eq!(s.ubi_check().unwrap(), Vec::<String>::new());
}

/// The crash sweep's workload: (LEB, pages, tag) writes, cold then hot, on 4 chips with a
/// low threshold so wear-levelling moves run inside it.
fn sweep_steps(lebs: u32) -> Vec<(u32, u32, u64)> {
    let mut steps = Vec::new();
    for leb in 0..lebs - 2 {
        steps.push((leb, 3 + leb % 5, u64::from(leb) + 1));
    }
    for r in 0..24u32 {
        steps.push((lebs - 2 + r % 2, 2 + r % 7, 100 + u64::from(r)));
    }
    steps
}

#[test]
fn a_power_cut_at_any_operation_loses_only_the_leb_in_flight() {
    let fresh = || Ubi::format_ubi(device("tiny", 4, 0.0), params(3)).unwrap();
    let lebs = fresh().geometry().blocks_per_chip;
    let steps = sweep_steps(lebs);
    // How many state-changing operations the whole workload takes.
    let mut s = fresh();
    let base = s.inner().state_ops();
    for &(leb, n, tag) in &steps {
        write_leb(&mut s, leb, n, tag).unwrap();
    }
    let total = s.inner().state_ops() - base;
    assert!(
        s.ubi_report().unwrap().wl_moves > 0,
        "no move to cut inside"
    );
    for cut in 0..total {
        let mut s = fresh();
        s.inner_mut().arm_power_cut(PowerCut::AtOp(cut));
        let mut model: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
        let mut in_flight = None;
        for &(leb, n, tag) in &steps {
            if write_leb(&mut s, leb, n, tag).is_err() {
                in_flight = Some(leb);
                break;
            }
            model.insert(leb, (n, tag));
        }
        let mut dev = s.into_inner();
        dev.power_cycle().unwrap();
        let mut s = Ubi::attach_ubi(dev, false).unwrap();
        let problems = s.ubi_check().unwrap();
        assert!(problems.is_empty(), "cut {cut}: {problems:?}");
        for (&leb, &(n, tag)) in &model {
            if Some(leb) != in_flight {
                assert!(holds(&mut s, leb, n, tag), "cut {cut}: LEB {leb} lost");
            }
        }
        // The array goes on: the LEB in flight can be written again and everything attaches.
        if let Some(leb) = in_flight {
            write_leb(&mut s, leb, 2, 999).unwrap();
            let mut s = Ubi::attach_ubi(s.into_inner(), true).unwrap();
            assert!(
                holds(&mut s, leb, 2, 999),
                "cut {cut}: rewrite of LEB {leb}"
            );
        }
    }
}

/// The host's cost is charged in simulated time the same way on both executors: the same
/// batches give the same completions and clock, and every hand-off and page is counted.
#[test]
fn host_cost_is_the_same_on_both_executors() {
    use nandkit_flash::{DeviceOptions, ExecutorKind, HostCost};
    let host = HostCost {
        request_ns: 10_000,
        handoff_ns: 3_000,
        page_ns: 2_000,
        device_ns: 50_000,
    };
    let run = |executor| {
        let mut c = no_bit_errors(preset("tiny").unwrap().with_chips(4).unwrap());
        c.wear.factory_bad_fraction = 0.0;
        let dev = FlashDevice::ram_with(
            c,
            DeviceOptions {
                executor,
                realtime: false,
                host,
            },
        )
        .unwrap();
        let mut s = Ubi::format_ubi(dev, UbiParams::default()).unwrap();
        let start = s.now_ns();
        let charged = s.inner().host_charged_ns();
        s.inner_mut().charge_mount();
        s.inner_mut().charge_request();
        write_leb(&mut s, 2, 12, 5).unwrap();
        let ends: Vec<u64> = s
            .submit(
                (0..8)
                    .map(|k| Command::Read {
                        addr: PageAddr::new(0, 2, k),
                    })
                    .collect(),
            )
            .into_iter()
            .map(|c| c.end_ns)
            .collect();
        (
            s.now_ns() - start,
            ends,
            s.inner().host_charged_ns() - charged,
        )
    };
    let (sim_ns, sim_ends, sim_host) = run(ExecutorKind::Simulated);
    let (thr_ns, thr_ends, thr_host) = run(ExecutorKind::Threaded);
    assert_eq!((sim_ns, &sim_ends), (thr_ns, &thr_ends));
    assert_eq!(sim_host, thr_host);
    // 4 workers at mount, one request, then: the erase of an unmapped LEB (nothing to
    // hand off), 12 data pages + 4 VID headers programmed over 4 chips (16 hand-offs, 16
    // pages), 8 reads (8 hand-offs, 8 pages).
    let want = 4 * 50_000 + 10_000 + 16 * (3_000 + 2_000) + 8 * (3_000 + 2_000);
    assert_eq!(sim_host, want);
}

/// A chip whose bad blocks passed its spares still attaches, read-only as Linux UBI goes:
/// its data reads back, and every write is refused with the reason.
#[test]
fn a_chip_past_its_spares_attaches_read_only() {
    let mut s = Ubi::format_ubi(device("tiny", 2, 0.0), UbiParams::default()).unwrap();
    write_leb(&mut s, 1, 6, 4).unwrap();
    // The PEBs of chip 0 that hold something (LEB 1, the volume table's two copies).
    let used: Vec<u32> = (0..)
        .zip(s.ubi().unwrap().pebs_of(0))
        .filter(|(_, (_, holds))| holds.is_some())
        .map(|(peb, _)| peb)
        .collect();
    assert_eq!(used.len(), 3);
    // Chip 0 loses four free PEBs: its reserve (1) and spares (2) cannot cover them.
    let mut dev = s.into_inner();
    let mut lost = 0;
    for b in 0..dev.geometry().blocks_per_chip {
        if !used.contains(&b) && lost < 4 {
            dev.mark_bad(BlockAddr::new(0, b)).unwrap();
            lost += 1;
        }
    }
    let mut s = Ubi::attach_ubi(dev, false).unwrap();
    let why = s.ubi().unwrap().worn_out().expect("read-only").to_string();
    assert!(why.contains("chip 0 has 4 bad blocks"), "{why}");
    assert!(holds(&mut s, 1, 6, 4));
    let err = write_leb(&mut s, 2, 1, 5).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert!(
        !s.ubi_check().unwrap().is_empty(),
        "fsck says the reserve is gone"
    );
}
