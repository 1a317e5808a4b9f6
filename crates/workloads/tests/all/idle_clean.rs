//! Idle-time cleaning in simulated time: when it starts, how much it does, what a request
//! arriving during a step waits, and that it changes no file.

use crate::common::format;
use nandkit_flash::Flash;
use nandkit_workloads::{by_name, IdleCleaning, Target};

const MIB: u64 = 1 << 20;
const SECOND: u64 = 1_000_000_000;

/// A device with reclaimable blocks: PostMark's deletes and appends leave invalid pages
/// scattered over many blocks.
fn dirty_fs(profile: &str) -> nandkit_fs::FileSystem<nandkit_flash::FlashDevice> {
    let mut fs = format(8 * MIB, profile);
    by_name("postmark", 3, 8 * MIB)
        .unwrap()
        .run(&mut fs)
        .expect("postmark");
    fs.sync().unwrap();
    assert!(fs.uip().1 > 0.0, "postmark left no invalid pages");
    fs
}

/// How many blocks an explicit clean-everything would still reclaim.
fn reclaimable(fs: &mut nandkit_fs::FileSystem<nandkit_flash::FlashDevice>) -> u32 {
    let mut n = 0;
    loop {
        let k = fs.gc(64).unwrap();
        if k == 0 {
            return n;
        }
        n += k;
    }
}

#[test]
fn a_short_pause_cleans_nothing_and_only_passes_time() {
    let mut fs = dirty_fs("yaffs");
    let before = fs.stats().blocks_cleaned;
    let t0 = fs.device().now_ns();
    let mut t = IdleCleaning::new(&mut fs, SECOND);
    t.idle(SECOND - 1).unwrap();
    let stats = t.stats().clone();
    assert_eq!((stats.periods, stats.idle_periods, stats.blocks), (1, 0, 0));
    assert_eq!(fs.stats().blocks_cleaned, before);
    assert_eq!(fs.device().now_ns(), t0 + SECOND - 1);
}

#[test]
fn a_long_pause_cleans_what_is_worth_it_and_ends_on_time() {
    let mut fs = dirty_fs("moda");
    let t0 = fs.device().now_ns();
    let mut t = IdleCleaning::new(&mut fs, SECOND);
    t.idle(3600 * SECOND).unwrap();
    let stats = t.stats().clone();
    assert_eq!(stats.idle_periods, 1);
    assert!(stats.blocks > 0);
    assert_eq!(stats.overrun_ns, 0);
    assert!(stats.clean_ns > 0);
    // The pause lasted what it was asked to, cleaning inside it ...
    assert_eq!(fs.device().now_ns(), t0 + 3600 * SECOND);
    // ... and left nothing the idle rule would take, but blocks with a few invalid pages
    // (see the rule's own tests in nandkit-fs).
    assert!(!fs.clean_idle_step().unwrap());
    assert!(
        reclaimable(&mut fs) > 0,
        "cleaned blocks not worth their copies"
    );
    let report = fs.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// On a device nearly full of data, the idle cleaner takes even expensive blocks: the
/// next writes would otherwise clean on demand.
#[test]
fn a_nearly_full_device_is_cleaned_whatever_it_costs() {
    let mut fs = dirty_fs("yaffs");
    nandkit_workloads::andrew_fill(1, 8 * MIB, 0.8, "/fill")
        .run(&mut fs)
        .expect("fill");
    fs.sync().unwrap();
    let mut t = IdleCleaning::new(&mut fs, SECOND);
    t.idle(3600 * SECOND).unwrap();
    assert!(t.stats().blocks > 0);
    assert_eq!(
        reclaimable(&mut fs),
        0,
        "blocks left while erased blocks are short"
    );
}

/// A pause just past the threshold: one step starts and the next request waits for it
/// (bounded by one block), and the rest stays for the next pause.
#[test]
fn a_step_in_progress_delays_the_next_request_by_at_most_one_block() {
    let mut fs = dirty_fs("yaffs");
    let g = fs.device().geometry();
    let timing = nandkit_flash::preset("smallblock-64m-mtd").unwrap().timing;
    let one_block = u64::from(g.pages_per_block) * (timing.read_ns + timing.program_ns)
        + timing.erase_ns
        // Transfer times and the odd metadata page besides.
        + 2 * SECOND / 1000;
    let t0 = fs.device().now_ns();
    let mut t = IdleCleaning::new(&mut fs, SECOND);
    t.idle(SECOND + 1).unwrap();
    let stats = t.stats().clone();
    assert_eq!(stats.blocks, 1);
    assert!(stats.overrun_ns > 0, "a block cleaned in 1 ns");
    assert!(
        stats.overrun_ns <= one_block,
        "waited {} ns, more than one block's {one_block}",
        stats.overrun_ns
    );
    assert_eq!(fs.device().now_ns(), t0 + SECOND + 1 + stats.overrun_ns);
    assert!(reclaimable(&mut fs) > 0, "one step cleaned everything");
}

/// Fax pauses 60 s between faxes: with idle cleaning its files read back the same and
/// the device ends with nothing left to reclaim, while without it cleaning is left over.
#[test]
fn a_workload_with_pauses_ends_clean_and_reads_the_same() {
    let bytes = 8 * MIB;
    let mut plain = format(bytes, "moda");
    by_name("fax", 5, bytes).unwrap().run(&mut plain).unwrap();
    plain.sync().unwrap();
    let mut fs = format(bytes, "moda");
    let mut t = IdleCleaning::new(&mut fs, SECOND);
    let summary = by_name("fax", 5, bytes).unwrap().run(&mut t).unwrap();
    let stats = t.stats().clone();
    assert!(summary.ops.idle > 0);
    assert_eq!(stats.periods, summary.ops.idle);
    fs.sync().unwrap();
    assert!(stats.blocks > 0, "fax left nothing to clean while idle");
    assert!(reclaimable(&mut plain) > reclaimable(&mut fs));
    // Same files, same bytes.
    let root = fs.resolve("/fax").unwrap();
    let names: Vec<_> = fs
        .readdir(root)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    let proot = plain.resolve("/fax").unwrap();
    let pnames: Vec<_> = plain
        .readdir(proot)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, pnames);
    for name in names {
        let path = format!("/fax/{}", String::from_utf8_lossy(&name));
        let a = read(&mut fs, &path);
        let b = read(&mut plain, &path);
        assert!(a == b, "{path} differs");
    }
    let report = fs.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
}

fn read(fs: &mut nandkit_fs::FileSystem<nandkit_flash::FlashDevice>, path: &str) -> Vec<u8> {
    let ino = fs.resolve(path).unwrap();
    let size = fs.getattr(ino).unwrap().size as usize;
    let mut buf = vec![0; size];
    assert_eq!(fs.read(ino, 0, &mut buf).unwrap(), size);
    buf
}
