//! Page programs per operation: the format must not make the common operations cost more
//! flash writes (they are counted exactly, on a fresh device, so the numbers are
//! deterministic).

use crate::common::*;
use nandkit_flash::{preset, Flash, FlashDevice};
use nandkit_fs::*;

fn programs(fs: &mut Fs) -> u64 {
    fs.device_mut().stats().total().programs
}

/// Creating, writing and closing a small file: its header, its data, its header again.
#[test]
fn a_small_file_costs_three_programs() {
    for dev in Dev::ALL {
        let mut fs = format(dev);
        // Warm up: the first file shares the root's block; count a few files after it.
        for k in 0..20u32 {
            let before = programs(&mut fs);
            let summaries = fs.stats().summary_pages_written;
            let f = fs
                .create(ROOT_INO, format!("f{k}").as_bytes(), file())
                .unwrap()
                .ino;
            fs.open(f).unwrap();
            fs.write(f, 0, &pattern(u64::from(k), 300)).unwrap();
            fs.release(f).unwrap();
            let summary = fs.stats().summary_pages_written - summaries;
            let cost = programs(&mut fs) - before - summary;
            assert_eq!(
                cost,
                3,
                "{}: file {k} cost {cost} programs besides {summary} summary page(s)",
                dev.name()
            );
        }
    }
}

/// A 1 MiB file written in 4 KiB writes on 2 KiB pages: 512 data pages and two headers.
/// Its blocks end in runs, so they need no summary pages.
#[test]
fn a_sequential_mebibyte_costs_514_programs() {
    let config = no_bit_errors(
        preset("mlc-1g")
            .unwrap()
            .with_total_bytes(64 << 20)
            .unwrap(),
    );
    let flash = FlashDevice::ram(config).unwrap();
    let blocks = flash.geometry().total_blocks() as u32;
    let cfg = FsConfig::profile("yaffs", blocks).unwrap();
    let mut fs = FileSystem::format(nandkit_flash::StripedFlash::new(flash), cfg, clock()).unwrap();
    let before = programs(&mut fs);
    let f = fs.create(ROOT_INO, b"big", file()).unwrap().ino;
    fs.open(f).unwrap();
    let data = pattern(7, 1 << 20);
    for (k, piece) in data.chunks(4096).enumerate() {
        assert_eq!(fs.write(f, (k * 4096) as u64, piece).unwrap(), 4096);
    }
    fs.release(f).unwrap();
    let cost = programs(&mut fs) - before;
    assert!(cost <= 514, "1 MiB in 4 KiB writes cost {cost} programs");
    assert_eq!(fs.stats().summary_pages_written, 0);
    let mut fs = crash_remount(fs);
    let f = fs.resolve("/big").unwrap();
    assert_bytes(&read_all(&mut fs, f).unwrap(), &data, "after a crash");
}

/// On 512-byte pages with a 16-byte OOB a chunk is the whole page: a 4 KiB aligned write
/// programs 8 pages (plus, once every 31 data pages, a block summary).
#[test]
fn small_pages_hold_512_byte_chunks() {
    let mut fs = format(Dev::Small);
    assert_eq!(fs.chunk_bytes(), 512);
    let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    fs.fsync(f).unwrap();
    let mut counted = 0;
    for k in 0..16u64 {
        let before = programs(&mut fs);
        let summaries = fs.stats().summary_pages_written;
        fs.write(f, k * 4096, &pattern(k, 4096)).unwrap();
        let summary = fs.stats().summary_pages_written - summaries;
        assert_eq!(
            programs(&mut fs) - before - summary,
            8,
            "4 KiB write {k} (besides {summary} summary page(s))"
        );
        counted += summary;
    }
    // 128 data pages and the file's headers fill four blocks of 31 data pages.
    assert!((3..=5).contains(&counted), "{counted} summaries");
}
