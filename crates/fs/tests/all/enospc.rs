//! A full device answers ENOSPC, never corrupts, and works again after deletes: fill,
//! delete, refill, many times, with fsck and full content checks throughout.

use std::collections::BTreeMap;

use crate::common::*;
use nandkit_flash::{Flash, FlashDevice, StripedFlash};
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const ENOSPC: i32 = 28;
const ENOENT: i32 = 2;

/// The files the test wrote and what each must hold.
#[derive(Default)]
struct Files {
    content: BTreeMap<Vec<u8>, (Ino, Vec<u8>)>,
}

impl Files {
    fn verify(&self, fs: &mut Fs, ctx: &str) {
        let names: Vec<Vec<u8>> = fs
            .readdir(ROOT_INO)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        let expect: Vec<Vec<u8>> = self.content.keys().cloned().collect();
        assert_eq!(names, expect, "{ctx}: directory listing");
        for (name, (ino, data)) in &self.content {
            let got = read_all(fs, *ino)
                .unwrap_or_else(|e| panic!("{ctx}: read {}: {e}", String::from_utf8_lossy(name)));
            assert_bytes(
                &got,
                data,
                &format!("{ctx}: {}", String::from_utf8_lossy(name)),
            );
        }
        assert_fsck(fs, ctx);
    }
}

/// Appends to `ino` in pieces of `piece` bytes until the device is full. Returns bytes
/// written. Every refusal must be ENOSPC and change nothing. Once refused, the device stays
/// full: rewriting a partial last chunk leaves a little garbage that cleaning can reclaim,
/// so a few more pages may fit, but never more than an erase block.
fn fill_file(fs: &mut Fs, ino: Ino, data: &mut Vec<u8>, seed: u64, piece: usize) -> usize {
    let block_bytes = 64 * 2048;
    let mut refusals = 0;
    let mut after_first_refusal = 0;
    for k in 0.. {
        let buf = pattern(seed * 1_000_003 + k, piece);
        let size = data.len() as u64;
        match fs.write(ino, size, &buf) {
            Ok(n) => {
                assert!(n > 0 && n <= piece);
                data.extend_from_slice(&buf[..n]);
                if refusals > 0 {
                    after_first_refusal += n;
                }
                if n < piece {
                    refusals += 1;
                }
            }
            Err(e) => {
                assert_eq!(e.errno(), ENOSPC, "write refused with {e}");
                assert_eq!(
                    fs.getattr(ino).unwrap().size,
                    size,
                    "a refused write grew the file"
                );
                refusals += 1;
            }
        }
        if refusals >= 3 {
            break;
        }
    }
    assert!(
        after_first_refusal <= block_bytes,
        "{after_first_refusal} bytes accepted after the device first said it was full"
    );
    assert_eq!(fs.getattr(ino).unwrap().size, data.len() as u64);
    data.len()
}

fn fill_cycles(dev: Dev, cycles: u32, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut fs = format(dev);
    let mut files = Files::default();
    let capacity = fs.statfs().total_chunks as usize * dev.chunk();
    let mut next = 0u32;
    for cycle in 0..cycles {
        let ctx = format!("{} seed {seed} cycle {cycle}", dev.name());
        // Fill with new files of random sizes; the last one runs into ENOSPC.
        let mut written = 0;
        loop {
            let name = format!("f{next:04}").into_bytes();
            next += 1;
            let ino = match fs.create(ROOT_INO, &name, file()) {
                Ok(a) => a.ino,
                Err(e) => {
                    assert_eq!(e.errno(), ENOSPC, "{ctx}: create: {e}");
                    break;
                }
            };
            let target = rng.gen_range(1..capacity / 6);
            let mut data = Vec::new();
            let mut full = false;
            while data.len() < target {
                let n = (target - data.len()).min(rng.gen_range(1..40_000));
                let buf = pattern(u64::from(next) << 32 | data.len() as u64, n);
                match fs.write(ino, data.len() as u64, &buf) {
                    Ok(k) => {
                        data.extend_from_slice(&buf[..k]);
                        if k < n {
                            full = true;
                            break;
                        }
                    }
                    Err(e) => {
                        assert_eq!(e.errno(), ENOSPC, "{ctx}: write: {e}");
                        full = true;
                        break;
                    }
                }
            }
            written += data.len();
            files.content.insert(name, (ino, data));
            if full {
                break;
            }
        }
        // The device really was (nearly) full of live data.
        let live: usize = files.content.values().map(|(_, d)| d.len()).sum();
        assert!(
            live * 10 >= capacity * 7,
            "{ctx}: ENOSPC with only {live} of {capacity} bytes live"
        );
        assert!(written > 0 || cycle > 0, "{ctx}: nothing written");
        // Full: more data is refused, fsync and a metadata change still work or say ENOSPC.
        let (last, &(ino, _)) = files.content.iter().next_back().unwrap();
        let last = last.clone();
        let e = fs.write(ino, 0, &vec![1u8; 8 * dev.chunk()]);
        if let Err(e) = &e {
            assert_eq!(e.errno(), ENOSPC, "{ctx}");
        } else {
            // An overwrite in place may still find room by cleaning: keep the model right.
            let n = e.unwrap();
            let d = &mut files.content.get_mut(&last).unwrap().1;
            if d.len() < n {
                d.resize(n, 0);
            }
            d[..n].fill(1);
        }
        let mut synced = match fs.sync() {
            Ok(()) => true,
            Err(e) => {
                assert_eq!(e.errno(), ENOSPC, "{ctx}: sync: {e}");
                false
            }
        };
        files.verify(&mut fs, &format!("{ctx} full"));
        if cycle % 3 == 1 {
            fs = clean_remount(fs);
            files.verify(&mut fs, &format!("{ctx} full, remounted"));
            if synced {
                // What the sync made durable survives a crash too, byte for byte.
                fs = crash_remount(fs);
                files.verify(&mut fs, &format!("{ctx} full, remounted, crashed"));
            }
        } else if cycle % 3 == 2 {
            synced |= fs.sync().is_ok();
            fs = crash_remount(fs);
            if synced {
                // A sync returned Ok: every byte written before it is durable. Not a
                // prefix: exactly what was written.
                files.verify(&mut fs, &format!("{ctx} full, synced, crashed"));
                fs = clean_remount(fs);
                files.verify(&mut fs, &format!("{ctx} full, synced, crashed, remounted"));
            } else {
                // Both syncs said ENOSPC: the data that had no room to be flushed may be
                // gone (only the tail of a file: its chunks reached flash in order).
                for (ino, data) in files.content.values_mut() {
                    let got = read_all(&mut fs, *ino).unwrap();
                    assert!(
                        got.len() <= data.len() && got[..] == data[..got.len()],
                        "{ctx}: file {ino} after crash on a full device is not a prefix"
                    );
                    *data = got;
                }
                files.verify(&mut fs, &format!("{ctx} full, crashed"));
            }
        }
        // Delete: unlink must work on a full device. Remove about half the files.
        let names: Vec<Vec<u8>> = files.content.keys().cloned().collect();
        for name in names {
            if rng.gen_bool(0.5) {
                fs.unlink(ROOT_INO, &name)
                    .unwrap_or_else(|e| panic!("{ctx}: unlink on a full device: {e}"));
                files.content.remove(&name);
            }
        }
        files.verify(&mut fs, &format!("{ctx} after deletes"));
        // Writes succeed again after the deletes.
        let ino = fs
            .create(ROOT_INO, format!("g{cycle:03}").as_bytes(), file())
            .unwrap_or_else(|e| panic!("{ctx}: create after deletes: {e}"))
            .ino;
        let data = pattern(u64::from(cycle), 4 * dev.chunk() + 3);
        assert_eq!(fs.write(ino, 0, &data).unwrap(), data.len(), "{ctx}");
        files
            .content
            .insert(format!("g{cycle:03}").into_bytes(), (ino, data));
        fs.fsync(ino).unwrap();
        files.verify(&mut fs, &format!("{ctx} after refill start"));
    }
    let mut fs = crash_remount(fs);
    files.verify(&mut fs, "final crash remount");
}

#[test]
fn fill_delete_refill_tiny() {
    fill_cycles(Dev::Tiny, 10, 1);
}

#[test]
fn fill_delete_refill_inband() {
    fill_cycles(Dev::Small, 6, 2);
}

#[test]
fn fill_one_file_then_free_it() {
    for dev in Dev::ALL {
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"big", file()).unwrap().ino;
        let mut data = Vec::new();
        let n = fill_file(&mut fs, f, &mut data, 3, 3 * dev.chunk() + 5);
        let total = fs.statfs().total_chunks as usize * dev.chunk();
        assert!(
            n * 100 >= total * 90,
            "{dev:?}: only {n} of {total} bytes fit"
        );
        assert_fsck(&mut fs, "full");
        // Other objects: creating may still fit (metadata has its own reserve) or not.
        let other = match fs.create(ROOT_INO, b"other", file()) {
            Ok(a) => {
                let e = fs.write(a.ino, 0, &vec![1; 2 * dev.chunk()]).unwrap_err();
                assert_eq!(e.errno(), ENOSPC);
                assert_eq!(fs.getattr(a.ino).unwrap().size, 0);
                Some(a.ino)
            }
            Err(e) => {
                assert_eq!(e.errno(), ENOSPC);
                None
            }
        };
        assert_bytes(&read_all(&mut fs, f).unwrap(), &data, "full");
        let mut fs = clean_remount(fs);
        assert_bytes(&read_all(&mut fs, f).unwrap(), &data, "full, remount");
        assert_fsck(&mut fs, "full, remounted");
        // Shrinking on a full device works and frees space.
        let half = data.len() / 2;
        fs.setattr(
            f,
            SetAttr {
                size: Some(half as u64),
                ..SetAttr::default()
            },
        )
        .unwrap();
        data.truncate(half);
        let g = match other {
            Some(g) => g,
            None => fs.create(ROOT_INO, b"other", file()).unwrap().ino,
        };
        let more = pattern(5, half / 2);
        assert_eq!(fs.write(g, 0, &more).unwrap(), more.len());
        fs.sync().unwrap();
        let mut fs = crash_remount(fs);
        assert_bytes(&read_all(&mut fs, f).unwrap(), &data, "after shrink");
        assert_bytes(&read_all(&mut fs, g).unwrap(), &more, "other after shrink");
        assert_fsck(&mut fs, "after shrink");
        // Unlink both; the whole device is usable again.
        fs.unlink(ROOT_INO, b"big").unwrap();
        fs.unlink(ROOT_INO, b"other").unwrap();
        let h = fs.create(ROOT_INO, b"again", file()).unwrap().ino;
        let mut again = Vec::new();
        let m = fill_file(&mut fs, h, &mut again, 4, 8 * dev.chunk());
        assert!(m * 100 >= n * 95, "{dev:?}: refill {m} vs first fill {n}");
        let mut fs = crash_remount(fs);
        assert_bytes(&read_all(&mut fs, h).unwrap(), &again, "refilled");
        assert_fsck(&mut fs, "refilled");
    }
}

#[test]
fn metadata_ops_on_a_full_device() {
    let dev = Dev::Tiny;
    let mut fs = format(dev);
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    let keep = fs.create(d, b"keep", file()).unwrap().ino;
    fs.write(keep, 0, b"keep me").unwrap();
    let f = fs.create(ROOT_INO, b"big", file()).unwrap().ino;
    let mut data = Vec::new();
    fill_file(&mut fs, f, &mut data, 6, 64 * 1024);
    // Every metadata operation either works or says ENOSPC; none corrupts.
    let mut outcomes = Vec::new();
    let mut keep_name: &[u8] = b"keep";
    for i in 0..200u32 {
        let name = format!("n{i}").into_bytes();
        let other: &[u8] = if keep_name == b"keep" {
            b"kept"
        } else {
            b"keep"
        };
        let r = match i % 5 {
            0 => fs.create(ROOT_INO, &name, dir()).map(|_| ()),
            1 => fs.rename(d, keep_name, d, other, RenameMode::NoReplace),
            2 => fs.rename(d, keep_name, d, other, RenameMode::Replace),
            3 => fs.setxattr(keep, b"user.i", &i.to_le_bytes(), XattrMode::Set),
            _ => fs.link(keep, ROOT_INO, &name).map(|_| ()),
        };
        if r.is_ok() && (i % 5 == 1 || i % 5 == 2) {
            keep_name = other;
        }
        if let Err(e) = &r {
            assert_eq!(e.errno(), ENOSPC, "op {i}: {e}");
        }
        outcomes.push(r.is_ok());
    }
    assert_fsck(&mut fs, "metadata on a full device");
    let expect = dentries(&mut fs).unwrap();
    let mut fs = crash_remount(fs);
    assert_eq!(dentries(&mut fs).unwrap(), expect);
    assert_eq!(read_all(&mut fs, keep).unwrap(), b"keep me");
    assert_bytes(&read_all(&mut fs, f).unwrap(), &data, "big after crash");
    assert_fsck(&mut fs, "metadata on a full device, crash");
    // Unlink every name we made, then the big file: all must work.
    for ((p, n), ino) in expect {
        if p == ROOT_INO && ino != d {
            if fs.getattr(ino).unwrap().kind == Kind::Dir {
                fs.rmdir(p, &n).unwrap();
            } else {
                fs.unlink(p, &n).unwrap();
            }
        }
    }
    let mut fs = clean_remount(fs);
    assert_eq!(fs.readdir(ROOT_INO).unwrap().len(), 1);
    assert_fsck(&mut fs, "after unlinks");
    assert!(
        outcomes.iter().filter(|&&ok| ok).count() > 0,
        "no metadata operation fitted at all"
    );
}

#[test]
fn fill_with_empty_objects() {
    for dev in Dev::ALL {
        let mut fs = format(dev);
        let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
        let mut n = 0u32;
        loop {
            match fs.create(d, format!("{n}").as_bytes(), file()) {
                Ok(_) => n += 1,
                Err(e) => {
                    assert_eq!(e.errno(), ENOSPC, "{dev:?}: {e}");
                    break;
                }
            }
            assert!(n < 1_000_000);
        }
        let total = fs.statfs().total_chunks;
        assert!(
            u64::from(n) * 100 >= total * 85,
            "{dev:?}: {n} objects of {total} chunks"
        );
        assert_fsck(&mut fs, "full of objects");
        let mut fs = crash_remount(fs);
        assert_eq!(fs.readdir(d).unwrap().len(), n as usize);
        assert_fsck(&mut fs, "full of objects, crash");
        // Delete all of them (a full device must allow it), then fill again.
        for i in 0..n {
            fs.unlink(d, format!("{i}").as_bytes())
                .unwrap_or_else(|e| panic!("{dev:?}: unlink {i} of {n}: {e}"));
        }
        assert_fsck(&mut fs, "emptied");
        let mut m = 0u32;
        while fs.create(d, format!("{m}").as_bytes(), file()).is_ok() {
            m += 1;
        }
        assert!(m * 100 >= n * 95, "{dev:?}: refilled {m} of {n}");
        let mut fs = clean_remount(fs);
        assert_eq!(fs.readdir(d).unwrap().len(), m as usize);
        assert_fsck(&mut fs, "refilled with objects");
    }
}

/// Every mount finds the block that was being written part-full. Space left in such blocks
/// must come back through cleaning, or each remount leaks up to a block.
#[test]
fn remounts_do_not_leak_space() {
    for dev in Dev::ALL {
        let mut fs = format(dev);
        let blocks = dev.blocks();
        for i in 0..blocks + 10 {
            fs.create(ROOT_INO, format!("{i}").as_bytes(), file())
                .unwrap_or_else(|e| panic!("{dev:?}: create {i}: {e}"));
            // Power cuts only: a clean unmount rewrites the root's header, which leaves an
            // invalid page in the old block and so hides the leak.
            fs = crash_remount(fs);
        }
        let f = fs.create(ROOT_INO, b"data", file()).unwrap().ino;
        let capacity = fs.statfs().total_chunks as usize * dev.chunk();
        let want = capacity * 7 / 10;
        let data = pattern(11, want);
        let n = fs
            .write(f, 0, &data)
            .unwrap_or_else(|e| panic!("{dev:?}: after {} remounts: {e}", blocks + 10));
        assert_eq!(n, want, "{dev:?}: short write after remounts");
        fs.fsync(f).unwrap();
        let mut fs = crash_remount(fs);
        assert_bytes(&read_all(&mut fs, f).unwrap(), &data, "after many remounts");
        assert_fsck(&mut fs, "after many remounts");
    }
}

/// Fills the device with one file written in `piece`-byte appends; returns its content.
fn fill_up(fs: &mut Fs, name: &[u8], seed: u64, piece: usize) -> (Ino, Vec<u8>) {
    let ino = fs.create(ROOT_INO, name, file()).unwrap().ino;
    let mut data = Vec::new();
    fill_file(fs, ino, &mut data, seed, piece);
    (ino, data)
}

/// A write refused with ENOSPC changes nothing: not the bytes it would have replaced
/// (found: they stayed in the write cache and read back), not the size.
#[test]
fn refused_writes_change_nothing() {
    for dev in Dev::ALL {
        let c = dev.chunk();
        let mut fs = format(dev);
        let a = fs.create(ROOT_INO, b"a", file()).unwrap().ino;
        let old = pattern(1, 3 * c + 10);
        fs.write(a, 0, &old).unwrap();
        fs.fsync(a).unwrap();
        // A file truncated short, so growing it must write zeros over stale chunks.
        let t = fs.create(ROOT_INO, b"t", file()).unwrap().ino;
        fs.write(t, 0, &pattern(2, 6 * c)).unwrap();
        fs.setattr(
            t,
            SetAttr {
                size: Some(c as u64 / 2),
                ..SetAttr::default()
            },
        )
        .unwrap();
        fs.fsync(t).unwrap();
        let t_old = read_all(&mut fs, t).unwrap();
        let (_big, _) = fill_up(&mut fs, b"big", 3, 7 * c);
        for (off, len) in [(0, c), (0, 3 * c), (c as u64 + 5, c), (5, 2 * c + 7)] {
            let r = fs.write(a, off, &vec![0xAB; len]);
            assert_eq!(
                r.unwrap_err().errno(),
                ENOSPC,
                "{dev:?} overwrite {off}+{len}"
            );
            assert_bytes(
                &read_all(&mut fs, a).unwrap(),
                &old,
                "after a refused overwrite",
            );
        }
        // Past the end: the hole would need zero chunks; the file must not grow.
        let r = fs.write(t, 5 * c as u64, &vec![0xCD; 3 * c]);
        assert_eq!(r.unwrap_err().errno(), ENOSPC, "{dev:?} write past the end");
        assert_eq!(fs.getattr(t).unwrap().size, t_old.len() as u64);
        assert_bytes(
            &read_all(&mut fs, t).unwrap(),
            &t_old,
            "after a refused extend",
        );
        assert_fsck(&mut fs, "refused writes");
        // Nothing of the refused writes may come back after a crash either.
        fs.sync().unwrap();
        let mut fs = crash_remount(fs);
        assert_eq!(
            fs.getattr(t).unwrap().size,
            t_old.len() as u64,
            "{dev:?} after crash"
        );
        assert_bytes(&read_all(&mut fs, a).unwrap(), &old, "crashed");
        assert_bytes(&read_all(&mut fs, t).unwrap(), &t_old, "crashed t");
        let mut fs = clean_remount(fs);
        assert_bytes(&read_all(&mut fs, a).unwrap(), &old, "remounted");
        assert_bytes(&read_all(&mut fs, t).unwrap(), &t_old, "remounted t");
        assert_fsck(&mut fs, "refused writes, remounted");
    }
}

/// Bytes `write` accepted into the write cache can always be made durable: fsync, sync and
/// unmount work on a full device, with more files holding a cached chunk than the cache
/// may flush from the reserve. On every profile: per-file allocation (mnfs) once needed a
/// fresh block per file flushed there, and sync failed with ENOSPC.
#[test]
fn sync_and_unmount_work_on_a_full_device() {
    for &profile in nandkit_fs::PROFILES {
        for dev in Dev::ALL {
            if profile == "yaffs1" && dev != Dev::Small {
                continue; // small-page chips only, as YAFFS1
            }
            sync_on_a_full_device(dev, profile);
        }
    }
}

fn sync_on_a_full_device(dev: Dev, profile: &str) {
    let ctx = format!("{profile} on {dev:?}");
    let mut fs = format_with(dev, FsConfig::profile(profile, dev.blocks()).unwrap());
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    let mut small = Vec::new();
    // mnfs gives every file a block of its own: a quarter of the device's in small files.
    let files = if profile == "mnfs" {
        dev.blocks() / 4
    } else {
        150
    };
    for i in 0..files {
        let ino = fs.create(d, format!("{i}").as_bytes(), file()).unwrap().ino;
        let data = pattern(u64::from(i), 100 + i as usize);
        fs.write(ino, 0, &data).unwrap();
        small.push((ino, data));
    }
    let (big, data) = fill_up(&mut fs, b"big", 5, 3 * dev.chunk() + 1);
    // More small writes into the cache, until refused.
    for (ino, d) in small.iter_mut().take(40) {
        match fs.write(*ino, d.len() as u64, b"more") {
            Ok(n) => d.extend_from_slice(&b"more"[..n]),
            Err(e) => assert_eq!(e.errno(), ENOSPC),
        }
    }
    fs.fsync(small[0].0)
        .unwrap_or_else(|e| panic!("{ctx}: fsync on a full device: {e}"));
    fs.sync()
        .unwrap_or_else(|e| panic!("{ctx}: sync on a full device: {e}"));
    let (flash, nv) = fs
        .unmount_parts()
        .unwrap_or_else(|e| panic!("{ctx}: unmount of a full device: {e}"));
    let mut fs = mount_parts(flash, nv).unwrap();
    assert_bytes(&read_all(&mut fs, big).unwrap(), &data, &ctx);
    for (ino, d) in &small {
        assert_bytes(&read_all(&mut fs, *ino).unwrap(), d, &ctx);
    }
    assert_fsck(&mut fs, &format!("{ctx}: full, unmounted and mounted"));
    // And after a crash instead of an unmount.
    let mut fs = crash_remount(fs);
    for (ino, d) in &small {
        assert_bytes(&read_all(&mut fs, *ino).unwrap(), d, &ctx);
    }
    assert_fsck(&mut fs, &format!("{ctx}: full, crashed"));
}

/// The FUSE mount's sequence on a full device, with a commit (`sync`) landing after any
/// one of its steps: fill a file in 128 KiB writes until refused, close it, try a second
/// file, delete the first, write a third. The kernel still references the deleted file
/// (it tells the daemon it forgot an inode only later, asynchronously), so the delete must
/// free its data at once: the third file must fit.
#[test]
fn a_delete_makes_room_at_once_though_the_kernel_still_holds_the_file() {
    for dev in Dev::ALL {
        let mut commit_at = 0;
        loop {
            let mut fs = format(dev);
            let mut step = 0;
            let mut maybe_commit = |fs: &mut Fs| {
                if step == commit_at {
                    fs.sync()
                        .unwrap_or_else(|e| panic!("commit after step {step}: {e}"));
                }
                step += 1;
            };
            let fill = fs.create(ROOT_INO, b"fill", file()).unwrap().ino;
            fs.remember(fill).unwrap();
            fs.open(fill).unwrap();
            let piece = pattern(7, 128 << 10);
            let mut size = 0u64;
            loop {
                match fs.write(fill, size, &piece) {
                    Ok(n) => size += n as u64,
                    Err(e) => {
                        assert_eq!(e.errno(), ENOSPC, "{e}");
                        break;
                    }
                }
                maybe_commit(&mut fs);
            }
            // close(): FUSE flush, then release.
            let _ = fs.fsync(fill);
            maybe_commit(&mut fs);
            let _ = fs.release(fill);
            maybe_commit(&mut fs);
            if let Ok(more) = fs.create(ROOT_INO, b"more", file()) {
                maybe_commit(&mut fs);
                let _ = fs.write(more.ino, 0, &piece);
                maybe_commit(&mut fs);
                let _ = fs.fsync(more.ino);
            }
            maybe_commit(&mut fs);
            let ctx = format!("{}: commit after step {commit_at}", dev.name());
            fs.unlink(ROOT_INO, b"fill")
                .unwrap_or_else(|e| panic!("{ctx}: unlink on a full device: {e}"));
            maybe_commit(&mut fs);
            let _ = fs.unlink(ROOT_INO, b"more");
            maybe_commit(&mut fs);
            let after = fs
                .create(ROOT_INO, b"after", file())
                .unwrap_or_else(|e| panic!("{ctx}: create after the delete: {e}"))
                .ino;
            fs.write(after, 0, &piece)
                .unwrap_or_else(|e| panic!("{ctx}: write after the delete: {e}"));
            fs.fsync(after).unwrap();
            assert_eq!(fs.getattr(fill).unwrap().nlink, 0, "{ctx}: held");
            assert_eq!(
                errno(fs.open(fill)),
                ENOENT,
                "{ctx}: reopen of a hollow file"
            );
            assert_fsck(&mut fs, &ctx);
            fs.forget(fill, 1).unwrap();
            assert_eq!(errno(fs.getattr(fill)), ENOENT, "{ctx}: forgotten");
            assert_fsck(&mut fs, &ctx);
            let mut fs = clean_remount(fs);
            assert_eq!(read_all(&mut fs, after).unwrap(), piece, "{ctx}");
            if commit_at >= step {
                break;
            }
            commit_at += 1;
        }
    }
}

fn errno<T>(r: Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}

/// With several write streams (each policy's classes keep an open block of their own),
/// statfs stays honest: when writes are refused, what statfs calls free is no more than
/// the unwritten pages of the streams' open blocks, and data filled nearly all it
/// promised.
#[test]
fn statfs_is_honest_with_several_streams() {
    for policy in [
        AllocatorKind::Moda,
        AllocatorKind::ModaSplit,
        AllocatorKind::Dac,
        AllocatorKind::PageHotcold,
    ] {
        for dev in Dev::ALL {
            let flash = FlashDevice::ram(dev.config()).expect("ram device");
            let blocks = flash.geometry().blocks_per_chip * flash.geometry().chips;
            let ppb = flash.geometry().pages_per_block as u64;
            let config = yaffs(dev).with_allocator(policy, blocks);
            let streams = nandkit_fs::alloc::stream_count(policy, &config.alloc_params) as u64;
            let mut fs =
                FileSystem::format(StripedFlash::new(flash), config, clock()).expect("format");
            let ctx = format!("{} on {dev:?}", policy.name());
            let total = fs.statfs().total_chunks;
            // Files written, some rewritten often (hot), some once (cold), until refused.
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
            let mut inos = Vec::new();
            let mut refused = None;
            'fill: for k in 0u64.. {
                if k % 3 == 0 || inos.is_empty() {
                    match fs.create(ROOT_INO, format!("f{k}").as_bytes(), file()) {
                        Ok(a) => inos.push(a.ino),
                        Err(e) => {
                            assert_eq!(e.errno(), ENOSPC, "{ctx}: create: {e}");
                            refused = Some(fs.statfs());
                            break 'fill;
                        }
                    }
                }
                let ino = if rng.gen_bool(0.5) {
                    inos[0]
                } else {
                    inos[rng.gen_range(0..inos.len())]
                };
                let size = fs.getattr(ino).unwrap().size;
                let at = if ino == inos[0] { 0 } else { size };
                let buf = pattern(k, rng.gen_range(1..4 * dev.chunk()));
                match fs.write(ino, at, &buf) {
                    Ok(n) if n == buf.len() => {}
                    Ok(_) => {
                        refused = Some(fs.statfs());
                        break 'fill;
                    }
                    Err(e) => {
                        assert_eq!(e.errno(), ENOSPC, "{ctx}: write: {e}");
                        refused = Some(fs.statfs());
                        break 'fill;
                    }
                }
                if k % 5 == 0 {
                    fs.fsync(ino).unwrap();
                }
            }
            let s = refused.unwrap();
            assert!(
                s.free_chunks <= streams * ppb,
                "{ctx}: refused with {} chunks called free ({streams} streams of {ppb})",
                s.free_chunks
            );
            assert!(
                s.used_chunks * 100 >= total * 90,
                "{ctx}: refused at {} of {total} chunks used",
                s.used_chunks
            );
            assert_fsck(&mut fs, &ctx);
        }
    }
}
