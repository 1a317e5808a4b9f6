//! The file system on an array of chips seen striped (MA): batches overlap in simulated
//! time, block summaries that outgrow a page are chained, and every mount finds it all.

use crate::common::*;
use nandkit_flash::{preset, Flash, FlashDevice, StripedFlash};
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// `preset` at `bytes`, split over `chips`, formatted through its striped view.
fn array(name: &str, bytes: u64, chips: u32) -> Fs {
    let config = no_bit_errors(
        preset(name)
            .unwrap()
            .with_total_bytes(bytes)
            .unwrap()
            .with_chips(chips)
            .unwrap(),
    );
    let blocks = config.geometry.blocks_per_chip;
    let flash = StripedFlash::new(FlashDevice::ram(config).unwrap());
    FileSystem::format(flash, FsConfig::profile("yaffs", blocks).unwrap(), clock()).unwrap()
}

/// Simulated nanoseconds to write `bytes` in one write and fsync it.
fn write_time(fs: &mut Fs, bytes: usize) -> u64 {
    let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    let data = pattern(1, bytes);
    let start = fs.device().now_ns();
    assert_eq!(fs.write(f, 0, &data).unwrap(), bytes);
    fs.fsync(f).unwrap();
    let t = fs.device().now_ns() - start;
    assert_bytes(&read_all(fs, f).unwrap(), &data, "read back");
    t
}

#[test]
fn a_large_write_programs_the_chips_in_parallel() {
    let one = write_time(&mut array("tiny", 16 << 20, 1), 4 << 20);
    let four = write_time(&mut array("tiny", 16 << 20, 4), 4 << 20);
    // 2,048 pages: on 4 chips a quarter of the program time, plus the fsync's header.
    let speedup = one as f64 / four as f64;
    assert!(speedup > 3.5, "4 chips: {speedup:.2}x of one chip");
}

#[test]
fn a_one_page_write_gains_nothing_from_more_chips() {
    let one = write_time(&mut array("tiny", 16 << 20, 1), 2048);
    let four = write_time(&mut array("tiny", 16 << 20, 4), 2048);
    // A data page then a header page: they queue, whatever the number of chips.
    assert!(four * 10 >= one * 9, "{one} ns vs {four} ns");
}

#[test]
fn reads_of_many_chunks_overlap_too() {
    let mut t = Vec::new();
    for chips in [1, 4] {
        let mut fs = array("tiny", 16 << 20, chips);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        fs.write(f, 0, &pattern(2, 1 << 20)).unwrap();
        fs.fsync(f).unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let start = fs.device().now_ns();
        fs.read(f, 0, &mut buf).unwrap();
        t.push(fs.device().now_ns() - start);
        assert_bytes(&buf, &pattern(2, 1 << 20), "read");
    }
    assert!(t[0] as f64 / t[1] as f64 > 3.0, "read times {t:?}");
}

/// On 512-byte pages, 8 chips make blocks of 256 pages whose tags cannot fit one summary
/// page: the summary is chained, and scan mounts read it back whole.
#[test]
fn summaries_too_big_for_a_page_are_chained() {
    let mut fs = array("smallblock-64m", 8 << 20, 8);
    let c = fs.chunk_bytes() as usize;
    let mut model = std::collections::BTreeMap::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    // Many files, overwritten at random: summary entries of several bytes each.
    let files: Vec<Ino> = (0..40)
        .map(|i| {
            let name = format!("file{i}");
            fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino
        })
        .collect();
    for &f in &files {
        let data = pattern(u64::from(f), 40 * c);
        fs.write(f, 0, &data).unwrap();
        model.insert(f, data);
    }
    for i in 0..3000u64 {
        let f = files[rng.gen_range(0..files.len())];
        let chunk = rng.gen_range(0..40usize);
        let data = pattern(1000 + i, c);
        fs.write(f, (chunk * c) as u64, &data).unwrap();
        model.get_mut(&f).unwrap()[chunk * c..(chunk + 1) * c].copy_from_slice(&data);
    }
    fs.sync().unwrap();
    let chained = fs
        .block_table()
        .iter()
        .filter(|b| b.state == blocks::BlockState::Full && b.overhead() > 1)
        .count();
    assert!(chained > 0, "no block needed more than one summary page");
    assert_fsck(&mut fs, "before remount");
    for opts in [scan_opts(), opts()] {
        let flash = fs.unmount().unwrap();
        fs = FileSystem::mount(flash, opts.clone()).unwrap();
        assert_fsck(&mut fs, "after remount");
        for (&f, want) in &model {
            assert_bytes(&read_all(&mut fs, f).unwrap(), want, "after remount");
        }
    }
    // The scan read about one page per segment, not every page of every block.
    let mut flash = fs.unmount().unwrap();
    let reads_before = flash.stats().total().page_reads;
    let mut fs = FileSystem::mount(flash, scan_opts()).unwrap();
    let reads = fs.device_mut().stats().total().page_reads - reads_before;
    let pages = fs.block_table().len() as u64 * u64::from(fs.device().geometry().pages_per_block);
    assert!(reads * 4 < pages, "the scan read {reads} of {pages} pages");
}
