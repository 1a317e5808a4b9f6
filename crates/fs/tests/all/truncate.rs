//! Truncation without zero-filling: a 100 MB file cut to nothing and grown back costs a
//! couple of header pages (truncation floors, docs/format.md), and the hole reads back as
//! zeros, also after a crash (a scan) and a clean remount (the checkpoint).

use crate::common::*;
use nandkit_flash::{preset, FlashDevice};
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MIB: u64 = 1 << 20;
const SIZE: u64 = 100 * MIB;

fn programs(fs: &mut Fs) -> u64 {
    fs.device_mut().stats().total().programs
}

fn resize(fs: &mut Fs, ino: Ino, size: u64) {
    fs.setattr(
        ino,
        SetAttr {
            size: Some(size),
            ..SetAttr::default()
        },
    )
    .unwrap();
}

/// Reads a chunk's worth at both ends, around the written spot, and at 64 random places:
/// zeros everywhere but `written`.
fn spot_check(fs: &mut Fs, ino: Ino, written: (u64, &[u8]), ctx: &str) {
    assert_eq!(fs.getattr(ino).unwrap().size, SIZE, "{ctx}: size");
    let c = u64::from(fs.chunk_bytes());
    let (w_off, w_data) = written;
    let w_end = w_off + w_data.len() as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut offsets = vec![
        0,
        c - 1,
        MIB + 5,
        w_off - c / 2,
        w_end - 3,
        SIZE - c,
        SIZE - 1,
    ];
    offsets.extend((0..64).map(|_| rng.gen_range(0..SIZE)));
    for off in offsets {
        let len = c.min(SIZE - off) as usize;
        let mut buf = vec![0xA5u8; len];
        let n = fs.read(ino, off, &mut buf).unwrap();
        assert_eq!(n, len, "{ctx}: short read at {off}");
        for (i, &b) in buf.iter().enumerate() {
            let at = off + i as u64;
            let want = if (w_off..w_end).contains(&at) {
                w_data[(at - w_off) as usize]
            } else {
                0
            };
            assert_eq!(b, want, "{ctx}: byte {at}");
        }
    }
}

#[test]
fn truncate_100mb_to_zero_and_back() {
    let config = no_bit_errors(
        preset("mlc-1g")
            .unwrap()
            .with_total_bytes(256 * MIB)
            .unwrap(),
    );
    let blocks = config.geometry.total_blocks() as u32;
    let fs_config = FsConfig::profile("yaffs", blocks).unwrap();
    let mut fs = FileSystem::format(
        nandkit_flash::StripedFlash::new(FlashDevice::ram(config).unwrap()),
        fs_config,
        clock(),
    )
    .unwrap();
    let f = fs.create(ROOT_INO, b"huge", file()).unwrap().ino;
    for i in 0..SIZE / MIB {
        fs.write(f, i * MIB, &pattern(i, MIB as usize)).unwrap();
    }
    fs.fsync(f).unwrap();
    let before = programs(&mut fs);
    resize(&mut fs, f, 0);
    resize(&mut fs, f, SIZE);
    fs.fsync(f).unwrap();
    let cost = programs(&mut fs) - before;
    println!("truncating 100 MB to 0 and back: {cost} pages programmed");
    assert!(
        cost <= 4,
        "truncating 100 MB to 0 and growing it back programmed {cost} pages"
    );
    // A few bytes written in the middle of the hole.
    let w_off = SIZE / 2 + 12345;
    let w_data = pattern(77, 3000);
    fs.write(f, w_off, &w_data).unwrap();
    fs.fsync(f).unwrap();
    let written = (w_off, w_data.as_slice());
    spot_check(&mut fs, f, written, "grown back");
    assert_fsck(&mut fs, "grown back");
    let mut fs = crash_remount(fs);
    assert_eq!(fs.mount_method(), MountMethod::Scan);
    spot_check(&mut fs, f, written, "after a crash");
    assert_fsck(&mut fs, "after a crash");
    let mut fs = clean_remount(fs);
    assert_eq!(fs.mount_method(), MountMethod::Checkpoint);
    spot_check(&mut fs, f, written, "after a clean remount");
    assert_fsck(&mut fs, "after a clean remount");
}
