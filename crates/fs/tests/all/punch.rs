//! Hole punching, zeroing and SEEK_DATA / SEEK_HOLE, on both geometries:
//! - a punch reads back zeros, keeps the size, frees the whole chunks at once (statfs),
//!   and zeroes the partial chunks at its edges; past the end of file it changes nothing;
//! - zero_range reads zeros, grows the file unless KEEP_SIZE, and keeps the range
//!   allocated: on a device otherwise full a write into it still succeeds;
//! - seek results are exact on holes made by punches, by sparse writes, at the end of
//!   file, with a chunk still in the write cache;
//! - errors as Linux gives them;
//! - more punches than a header keeps floors for (merging), between truncations;
//! - every result survives a clean remount and a crash remount (scan), fsck clean.

use crate::common::*;
use nandkit_fs::*;

const ENXIO: i32 = 6;

fn errno<T: std::fmt::Debug>(r: Result<T>) -> i32 {
    r.expect_err("an error").errno()
}

/// Checks contents, fsck; then the same after a crash remount and a clean remount.
fn check_all_ways(mut fs: Fs, ino: Ino, want: &[u8], ctx: &str) -> Fs {
    assert_bytes(&read_all(&mut fs, ino).unwrap(), want, ctx);
    assert_fsck(&mut fs, ctx);
    let mut fs = crash_remount(fs);
    assert_bytes(
        &read_all(&mut fs, ino).unwrap(),
        want,
        &format!("{ctx}, crash remount"),
    );
    assert_fsck(&mut fs, &format!("{ctx}, crash remount"));
    let mut fs = clean_remount(fs);
    assert_bytes(
        &read_all(&mut fs, ino).unwrap(),
        want,
        &format!("{ctx}, clean remount"),
    );
    assert_fsck(&mut fs, &format!("{ctx}, clean remount"));
    fs
}

fn zero(v: &mut [u8], from: u64, to: u64) {
    let to = (to as usize).min(v.len());
    let from = (from as usize).min(to);
    v[from..to].fill(0);
}

#[test]
fn punch_whole_chunks_frees_them_at_once() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let mut want = pattern(1, 10 * c as usize);
        fs.write(f, 0, &want).unwrap();
        fs.fsync(f).unwrap();
        let free = fs.statfs().free_chunks;
        let blocks = fs.getattr(f).unwrap().blocks;
        fs.punch_hole(f, 2 * c, 3 * c).unwrap();
        zero(&mut want, 2 * c, 5 * c);
        assert_eq!(fs.statfs().free_chunks, free + 3, "{}: freed", dev.name());
        assert_eq!(fs.getattr(f).unwrap().blocks, blocks - 3);
        assert_eq!(fs.getattr(f).unwrap().size, 10 * c);
        let seeks = |fs: &mut Fs| {
            assert_eq!(fs.seek_hole(f, 0).unwrap(), 2 * c);
            assert_eq!(fs.seek_hole(f, 2 * c + 5).unwrap(), 2 * c + 5);
            assert_eq!(fs.seek_data(f, 0).unwrap(), 0);
            assert_eq!(fs.seek_data(f, 2 * c).unwrap(), 5 * c);
            assert_eq!(fs.seek_data(f, 5 * c + 1).unwrap(), 5 * c + 1);
            assert_eq!(fs.seek_hole(f, 5 * c).unwrap(), 10 * c);
            assert_eq!(errno(fs.seek_data(f, 10 * c)), ENXIO);
            assert_eq!(errno(fs.seek_hole(f, 10 * c)), ENXIO);
        };
        seeks(&mut fs);
        let mut fs = check_all_ways(fs, f, &want, dev.name());
        seeks(&mut fs);
        assert_eq!(
            fs.statfs().free_chunks,
            free + 3,
            "{}: after remounts",
            dev.name()
        );
    }
}

#[test]
fn punch_partial_edges_and_past_eof() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let len = 6 * c + c / 3;
        let mut want = pattern(2, len as usize);
        fs.write(f, 0, &want).unwrap();
        fs.fsync(f).unwrap();
        let free = fs.statfs().free_chunks;
        // Half a chunk, two whole chunks, a hundred bytes.
        fs.punch_hole(f, c / 2 + 3, 3 * c - c / 2 - 3 + 100)
            .unwrap();
        zero(&mut want, c / 2 + 3, 3 * c + 100);
        assert_eq!(fs.statfs().free_chunks, free + 2, "{}", dev.name());
        // Inside one chunk.
        fs.punch_hole(f, 4 * c + 7, 9).unwrap();
        zero(&mut want, 4 * c + 7, 4 * c + 16);
        // Over the end of file: the size stays, the last partial chunk goes.
        fs.punch_hole(f, 6 * c, 5 * c).unwrap();
        zero(&mut want, 6 * c, len);
        assert_eq!(fs.getattr(f).unwrap().size, len);
        assert_eq!(fs.seek_hole(f, 5 * c).unwrap(), 6 * c);
        // Wholly past it: nothing.
        fs.punch_hole(f, len + 1, c).unwrap();
        assert_eq!(fs.getattr(f).unwrap().size, len);
        // A write into a punched range.
        let w = pattern(3, c as usize);
        fs.write(f, c + c / 4, &w).unwrap();
        want[(c + c / 4) as usize..(2 * c + c / 4) as usize].copy_from_slice(&w);
        fs.fsync(f).unwrap();
        check_all_ways(fs, f, &want, dev.name());
    }
}

#[test]
fn seek_over_sparse_writes_and_the_cache() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        assert_eq!(errno(fs.seek_data(f, 0)), ENXIO, "empty file");
        fs.write(f, 0, &pattern(4, c as usize)).unwrap();
        fs.write(f, 5 * c, &pattern(5, 2 * c as usize)).unwrap();
        // A partial chunk, still in the write cache.
        fs.write(f, 9 * c + 10, &pattern(6, 20)).unwrap();
        let size = 9 * c + 30;
        assert_eq!(fs.getattr(f).unwrap().size, size);
        let check = |fs: &mut Fs, ctx: &str| {
            assert_eq!(fs.seek_data(f, 0).unwrap(), 0, "{ctx}");
            assert_eq!(fs.seek_hole(f, 0).unwrap(), c, "{ctx}");
            assert_eq!(fs.seek_data(f, c).unwrap(), 5 * c, "{ctx}");
            assert_eq!(fs.seek_data(f, 3 * c + 1).unwrap(), 5 * c, "{ctx}");
            assert_eq!(fs.seek_hole(f, 5 * c).unwrap(), 7 * c, "{ctx}");
            assert_eq!(fs.seek_data(f, 7 * c).unwrap(), 9 * c, "{ctx}");
            assert_eq!(fs.seek_data(f, 9 * c + 25).unwrap(), 9 * c + 25, "{ctx}");
            assert_eq!(fs.seek_hole(f, 9 * c).unwrap(), size, "{ctx}");
            assert_eq!(errno(fs.seek_hole(f, size)), ENXIO, "{ctx}");
            assert_eq!(errno(fs.seek_data(f, size + 100)), ENXIO, "{ctx}");
        };
        check(&mut fs, "cached");
        fs.fsync(f).unwrap();
        check(&mut fs, "synced");
        let mut fs = crash_remount(fs);
        check(&mut fs, "crash remount");
        // A hole at the end of file made by a truncate upwards.
        fs.setattr(
            f,
            SetAttr {
                size: Some(20 * c),
                ..SetAttr::default()
            },
        )
        .unwrap();
        assert_eq!(fs.seek_hole(f, 9 * c).unwrap(), 10 * c);
        assert_eq!(errno(fs.seek_data(f, 10 * c)), ENXIO);
    }
}

#[test]
fn errors_as_linux() {
    let dev = Dev::Tiny;
    let mut fs = format(dev);
    let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    let p = fs
        .create(ROOT_INO, b"p", special(Kind::Fifo, 0))
        .unwrap()
        .ino;
    let max = fs.max_file_size();
    assert_eq!(errno(fs.punch_hole(f, 0, 0)), 22);
    assert_eq!(errno(fs.zero_range(f, 0, 0, false)), 22);
    assert_eq!(errno(fs.punch_hole(f, max, 1)), 27);
    assert_eq!(errno(fs.zero_range(f, max - 1, 2, true)), 27);
    assert_eq!(errno(fs.punch_hole(f, u64::MAX, 2)), 27);
    assert_eq!(errno(fs.punch_hole(d, 0, 1)), 21);
    assert_eq!(errno(fs.zero_range(d, 0, 1, false)), 21);
    assert_eq!(errno(fs.punch_hole(p, 0, 1)), 19);
    assert_eq!(errno(fs.zero_range(p, 0, 1, false)), 19);
    assert_eq!(errno(fs.seek_data(d, 0)), 21);
    assert_eq!(errno(fs.seek_hole(p, 0)), 22);
    assert_eq!(fs.getattr(f).unwrap().size, 0);
    assert_fsck(&mut fs, "errors");
}

#[test]
fn zero_range_grows_and_stays_allocated() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let mut want = pattern(7, 4 * c as usize + 11);
        fs.write(f, 0, &want).unwrap();
        fs.fsync(f).unwrap();
        let free = fs.statfs().free_chunks;
        // From the middle of chunk 1 to past the end: the file grows to 8 chunks.
        fs.zero_range(f, c + 5, 7 * c - 5, false).unwrap();
        want.truncate((c + 5) as usize);
        want.resize(8 * c as usize, 0);
        assert_eq!(fs.getattr(f).unwrap().size, 8 * c);
        // Chunks 2..8 are reserved holes (3 of them were data), chunk 1 rewritten.
        assert_eq!(fs.statfs().free_chunks, free - 3, "{}", dev.name());
        assert_eq!(fs.seek_hole(f, 0).unwrap(), 2 * c);
        // KEEP_SIZE past the end: no growth.
        fs.zero_range(f, 7 * c, 4 * c, true).unwrap();
        assert_eq!(fs.getattr(f).unwrap().size, 8 * c);
        let mut fs = check_all_ways(fs, f, &want, dev.name());
        // Fill the device with another file; writes into the zeroed range still fit.
        let g = fs.create(ROOT_INO, b"g", file()).unwrap().ino;
        let block = vec![0x5Au8; 16 * c as usize];
        let mut off = 0;
        loop {
            match fs.write(g, off, &block) {
                Ok(n) => off += n as u64,
                Err(FsError::NoSpace) => break,
                Err(e) => panic!("{}: fill: {e}", dev.name()),
            }
        }
        let w = pattern(8, 6 * c as usize);
        fs.write(f, 2 * c, &w).unwrap();
        fs.fsync(f).unwrap();
        want[2 * c as usize..8 * c as usize].copy_from_slice(&w);
        check_all_ways(fs, f, &want, &format!("{} full", dev.name()));
    }
}

#[test]
fn zero_range_after_crash_keeps_the_reservation() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        fs.write(f, 0, &pattern(9, 3 * c as usize)).unwrap();
        fs.zero_range(f, 0, 3 * c, true).unwrap();
        let mut fs = crash_remount(fs);
        assert_bytes(
            &read_all(&mut fs, f).unwrap(),
            &vec![0; 3 * c as usize],
            dev.name(),
        );
        let g = fs.create(ROOT_INO, b"g", file()).unwrap().ino;
        let block = vec![0x5Au8; 16 * c as usize];
        let mut off = 0;
        while let Ok(n) = fs.write(g, off, &block) {
            off += n as u64;
        }
        fs.write(f, 0, &pattern(10, 3 * c as usize)).unwrap();
        fs.fsync(f).unwrap();
        assert_fsck(&mut fs, dev.name());
    }
}

/// More punches than a header keeps floors for, between shrinks and regrowths and over
/// chunks overwritten before: merged floors must never hide live chunks.
#[test]
fn many_punches_merge_floors() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let mut want = pattern(11, 40 * c as usize);
        fs.write(f, 0, &want).unwrap();
        fs.fsync(f).unwrap();
        for round in 0..3u64 {
            // Shrink and regrow over a gap (a truncation floor).
            let cut = (30 - round * 3) * c;
            fs.setattr(
                f,
                SetAttr {
                    size: Some(cut),
                    ..SetAttr::default()
                },
            )
            .unwrap();
            fs.setattr(
                f,
                SetAttr {
                    size: Some(40 * c),
                    ..SetAttr::default()
                },
            )
            .unwrap();
            want[cut as usize..].fill(0);
            for i in 0..10u64 {
                let at = (i * 4 + round) * c + round * 7;
                fs.punch_hole(f, at, c + 13).unwrap();
                zero(&mut want, at, at + c + 13);
                if i % 3 == 2 {
                    // Rewrite part of a chunk between punches (newer than the punch).
                    let w = pattern(round * 10 + i, (c / 2) as usize);
                    let wat = at + 2 * c;
                    fs.write(f, wat, &w).unwrap();
                    want[wat as usize..wat as usize + w.len()].copy_from_slice(&w);
                }
                fs.fsync(f).unwrap();
            }
            assert_bytes(&read_all(&mut fs, f).unwrap(), &want, dev.name());
            fs = crash_remount(fs);
            assert_bytes(
                &read_all(&mut fs, f).unwrap(),
                &want,
                &format!("{} round {round} crash", dev.name()),
            );
            assert_fsck(&mut fs, dev.name());
        }
        check_all_ways(fs, f, &want, dev.name());
    }
}

/// A punch that sets off cleaning: the punched chunks are the last valid pages of their
/// block, and the punch is tried at every write point of a few blocks, so that making room
/// for its header cleans their block. That cleaning runs before the chunks leave the map
/// (`room_for_headers`); were it to run while their pages wait for the header, copies would
/// be newer than the punch's floor and come back after a crash (cleaning drops such pages
/// instead). Either way a crash remount reads zeros.
#[test]
fn cleaning_during_a_punch() {
    for dev in Dev::ALL {
        let c = dev.chunk() as u64;
        let ppb = dev.config().geometry.pages_per_block as u64;
        let mut hits = 0;
        for pad in 0..3 * ppb {
            let mut fs = format(dev);
            let x = fs.create(ROOT_INO, b"x", file()).unwrap().ino;
            let y = fs.create(ROOT_INO, b"y", file()).unwrap().ino;
            let mut want = pattern(20, (2 * ppb * c) as usize);
            fs.write(x, 0, &want).unwrap();
            fs.fsync(x).unwrap();
            // Every chunk rewritten but two: their block is nearly all invalid.
            let j = ppb;
            for k in (0..2 * ppb).filter(|&k| k != j && k != j + 1) {
                let w = pattern(1000 + k, c as usize);
                fs.write(x, k * c, &w).unwrap();
                want[(k * c) as usize..((k + 1) * c) as usize].copy_from_slice(&w);
            }
            fs.fsync(x).unwrap();
            // Header writes, to move the write point.
            for i in 0..pad {
                let set = SetAttr {
                    perm: Some(0o600 + (i as u32 & 0o77)),
                    ..SetAttr::default()
                };
                fs.setattr(y, set).unwrap();
            }
            let before = fs.stats().blocks_cleaned;
            fs.punch_hole(x, j * c, 2 * c).unwrap();
            zero(&mut want, j * c, (j + 2) * c);
            if fs.stats().blocks_cleaned > before {
                hits += 1;
            }
            let ctx = format!("{} pad {pad}", dev.name());
            let mut fs = crash_remount(fs);
            assert_bytes(&read_all(&mut fs, x).unwrap(), &want, &ctx);
            assert_fsck(&mut fs, &ctx);
        }
        println!("{}: {hits} punches cleaned a block", dev.name());
        assert!(hits > 0, "{}: no punch cleaned a block", dev.name());
    }
}
