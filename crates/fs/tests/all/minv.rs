//! The `minv` profile (metadata in NVRAM): it works like any profile, mounts without
//! reading flash, survives crashes, and refuses a damaged NVRAM with an error.

use crate::common::*;
use nandkit_fs::*;

fn fresh(dev: Dev) -> Fs {
    format_with(dev, minv(dev))
}

#[test]
fn files_round_trip_through_unmount_and_crash() {
    for dev in Dev::ALL {
        let mut fs = fresh(dev);
        let d = fs.create(ROOT_INO, b"dir", dir()).unwrap().ino;
        let mut files = Vec::new();
        for i in 0..20u64 {
            let ino = fs
                .create(d, format!("f{i}").as_bytes(), file())
                .unwrap()
                .ino;
            let data = pattern(i, (i as usize * 997) % 9000 + 1);
            fs.write(ino, 0, &data).unwrap();
            fs.fsync(ino).unwrap();
            files.push((ino, data));
        }
        fs.rename(d, b"f3", ROOT_INO, b"moved", RenameMode::Replace)
            .unwrap();
        fs.unlink(d, b"f4").unwrap();
        let (ino4, _) = files.remove(4);
        assert_fsck(&mut fs, dev.name());
        let mut fs = clean_remount(fs);
        assert_eq!(fs.mount_method(), MountMethod::Nvram);
        assert_fsck(&mut fs, dev.name());
        for (ino, data) in &files {
            assert_bytes(&read_all(&mut fs, *ino).unwrap(), data, dev.name());
        }
        assert!(fs.lookup(ROOT_INO, b"moved").is_ok());
        assert!(fs.getattr(ino4).is_err());
        let mut fs = crash_remount(fs);
        assert_fsck(&mut fs, dev.name());
        for (ino, data) in &files {
            assert_bytes(&read_all(&mut fs, *ino).unwrap(), data, dev.name());
        }
    }
}

/// Of flash, a mount reads the anchor blocks only, a fixed few pages however much the
/// file system holds: the file system record, to check that the NVRAM belongs to this
/// flash (issue 34.4), and the anchor log's last generation, to check it is the NVRAM
/// this flash goes with now (issue 59.6): two record copies, a binary search for the
/// log's end, its last entry; 3 pages when the NVRAM's hint of where that entry is holds.
#[test]
fn mount_reads_only_the_anchors_on_flash() {
    let dev = Dev::Small;
    let ppb = dev.config().geometry.pages_per_block;
    let most = 2 + u64::from(ppb.ilog2()) + 2;
    let mut fs = fresh(dev);
    let mut seen = Vec::new();
    for round in 0..3u64 {
        for i in 0..30u64 {
            let ino = fs
                .create(ROOT_INO, format!("f{round}-{i}").as_bytes(), file())
                .unwrap()
                .ino;
            fs.write(ino, 0, &pattern(i, 3000)).unwrap();
        }
        let (mut flash, nv) = fs.unmount_parts().unwrap();
        let t = flash.stats().total();
        let reads = t.page_reads + t.oob_reads;
        fs = mount_parts(flash, nv).unwrap();
        let t = fs.device().stats().total();
        let n = t.page_reads + t.oob_reads - reads;
        // The NVRAM's hint names the newest entry: it, the page after, the other record.
        assert_eq!(n, 3, "round {round}: the mount read {n} pages");
        seen.push(n);
    }
    // Without the hint (or with one that does not hold) the mount searches the log.
    let (mut flash, nv) = fs.unmount_parts().unwrap();
    let mut nv = nv.unwrap();
    nv.write_u64(72, 0).unwrap();
    nv.persist_all().unwrap();
    let t = flash.stats().total();
    let reads = t.page_reads + t.oob_reads;
    let fs = mount_parts(flash, Some(nv)).unwrap();
    let t = fs.device().stats().total();
    let n = t.page_reads + t.oob_reads - reads;
    assert!(
        n > 3 && n <= most,
        "the search read {n} pages (at most {most})"
    );
    seen.push(n);
    println!("mount reads: {seen:?}");
}

/// Erase on delete: once a delete leaves a block without a live page, that block is erased,
/// the stream's open block included, so later writes never share a block with dead pages
/// and create/delete rounds never clean (never read flash).
#[test]
fn deletes_erase_every_emptied_block_and_rounds_read_nothing() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    let ppb = dev.config().geometry.pages_per_block;
    let before = fs.device().stats().total();
    for round in 0..4u64 {
        // Five files of 1.5 blocks: the last leaves the open block half written.
        for i in 0..5u64 {
            let ino = fs
                .create(ROOT_INO, format!("f{i}").as_bytes(), file())
                .unwrap()
                .ino;
            fs.write(
                ino,
                0,
                &pattern(round * 10 + i, dev.chunk() * ppb as usize * 3 / 2),
            )
            .unwrap();
            fs.fsync(ino).unwrap();
        }
        for i in 0..5u64 {
            fs.unlink(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
        }
        let dead: Vec<usize> = fs
            .block_table()
            .iter()
            .enumerate()
            .filter(|(_, b)| b.valid() == 0 && b.next_page() > 0)
            .map(|(i, _)| i)
            .collect();
        assert!(
            dead.is_empty(),
            "round {round}: blocks {dead:?} hold only dead pages"
        );
        assert_fsck(&mut fs, "after the deletes");
    }
    let after = fs.device().stats().total();
    assert_eq!(
        after.page_reads + after.oob_reads,
        before.page_reads + before.oob_reads
    );
    assert!(after.erases > before.erases);
}

/// The space model with our structure sizes predicts the NVRAM bytes in use exactly.
#[test]
fn nvram_use_equals_the_space_model() {
    let dev = Dev::Small;
    let g = dev.config().geometry.striped();
    let name_bytes = 8;
    let nvram_bytes = fresh(dev).nvram().unwrap().size_bytes;
    let c = nandkit_fs::meta::minv::model_constants(g, nvram_bytes, name_bytes).unwrap();
    let flash = u64::from(dev.blocks()) * c.block_size;
    for (files, size) in [
        (0u64, 0u64),
        (1, 512),
        (16, 2048),
        (40, 30_000),
        (3, 300_000),
        (100, 1),
    ] {
        let mut fs = fresh(dev);
        for i in 0..files {
            let name = format!("f{i:07}");
            assert_eq!(name.len(), name_bytes);
            let ino = fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino;
            fs.write(ino, 0, &pattern(i, size as usize)).unwrap();
            fs.fsync(ino).unwrap();
        }
        let model = nandkit_models::nvram_space_uniform(&c, flash, files, size).unwrap();
        let measured = fs.nvram().unwrap().bytes_in_use;
        assert_eq!(measured, model.bytes, "{files} files of {size} bytes");
        fs.sync().unwrap();
        // And again from a mount, which holds the state the unmount saved until every
        // object is read from it (fsck reads them all).
        let mut fs = clean_remount(fs);
        let r = fs.nvram().unwrap();
        assert!(
            r.saved_state_bytes > 0 || files == 0,
            "{files} files: nothing saved"
        );
        assert_eq!(
            r.bytes_in_use - r.saved_state_bytes,
            model.bytes,
            "remounted"
        );
        // The state itself, as the model has it.
        assert_eq!(
            r.saved_state_bytes, model.saved_state_bytes,
            "{files} files of {size} bytes: the saved state"
        );
        assert!(fs.fsck().is_clean());
        let r = fs.nvram().unwrap();
        assert_eq!(
            (r.bytes_in_use, r.saved_state_bytes),
            (model.bytes, 0),
            "all read"
        );
        // And from a mount that walks everything (as after a crash: the saved state's
        // word cleared, as the first change of a mount clears it).
        let (dev, nv) = fs.into_parts();
        let mut nv = nv.unwrap();
        nv.write_u64(4096 + 1008, 0).unwrap();
        let fs = FileSystem::mount_with_nvram(dev, nv, Default::default()).unwrap();
        assert_eq!(
            fs.nvram().unwrap().bytes_in_use,
            model.bytes,
            "after a crash"
        );
    }
}

/// An attribute set leaves with its owner: deleting a file (or directory) with extended
/// attributes, at once or at its last close, frees the set's inode too, so NVRAM in use
/// goes back to what it was and fsck is clean with no remount in between (a remount
/// used to be what dropped the orphaned sets).
#[test]
fn deleting_an_object_frees_its_attribute_set() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    let before = fs.nvram().unwrap().bytes_in_use;
    let big = pattern(9, 3000); // a set too large for its record: kept in data chunks
    let mut open_one = 0;
    for i in 0..6u64 {
        let name = format!("f{i}");
        let ino = if i == 5 {
            fs.create(ROOT_INO, name.as_bytes(), dir()).unwrap().ino
        } else {
            fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino
        };
        let value: &[u8] = if i % 2 == 0 { b"small" } else { &big };
        fs.setxattr(ino, b"user.a", value, XattrMode::Set).unwrap();
        if i == 2 {
            fs.open(ino).unwrap();
            open_one = ino;
        }
    }
    for i in 0..5u64 {
        fs.unlink(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
    }
    fs.rmdir(ROOT_INO, b"f5").unwrap();
    // The open file keeps its attributes until its last close.
    assert_eq!(fs.getxattr(open_one, b"user.a").unwrap(), b"small");
    fs.release(open_one).unwrap();
    assert_fsck(&mut fs, "after the deletes");
    assert_eq!(fs.nvram().unwrap().bytes_in_use, before, "NVRAM in use");
    let (flash, nv) = fs.unmount_parts().unwrap();
    let mut fs = mount_parts(flash, nv).unwrap();
    assert_fsck(&mut fs, "remounted");
    assert_eq!(fs.nvram().unwrap().bytes_in_use, before, "remounted");
}

/// Damaged NVRAM: bytes of the metadata region flipped (at random places, seeded) give a
/// mount that works or a clear error, never a panic; both after a clean unmount (the
/// saved index) and as after a crash (the clean word cleared: the tree in place).
#[test]
fn damaged_nvram_is_an_error_not_a_panic() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    for i in 0..12u64 {
        let parent = if i < 6 { ROOT_INO } else { d };
        let ino = fs
            .create(parent, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 2000 + i as usize * 700))
            .unwrap();
    }
    fs.rename(ROOT_INO, b"f1", ROOT_INO, b"f2", RenameMode::Replace)
        .unwrap();
    let (flash, nv) = fs.unmount_parts().unwrap();
    let mut flash = flash.into_inner();
    let mut nv = nv.unwrap();
    let used = 200_000u64; // past the tables and everything the heap holds here
    let mut clean = vec![0u8; used as usize];
    nv.read(0, &mut clean).unwrap();
    let mut crashed = clean.clone();
    crashed[4096 + 1008..4096 + 1016].fill(0);
    for (image, what) in [(clean, "clean"), (crashed, "crashed")] {
        let mut refused = 0;
        let mut rng = 0x9e37_79b9_u64;
        for k in 0..400u64 {
            let mut bad = image.clone();
            // Half the time a byte of the tables (superblock, log, status, buckets), else
            // of the heap where inodes, records and offset structures are.
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = if k % 2 == 0 {
                (rng >> 33) % 16_000
            } else {
                16_000 + (rng >> 33) % (used - 16_000)
            } as usize;
            bad[at] ^= 1 << (k % 8);
            let mut nv2 = ram_nvram();
            nv2.write(0, &bad).unwrap();
            nv2.persist_all().unwrap();
            let f = clone_device(&mut flash);
            match FileSystem::mount_with_nvram(nandkit_flash::StripedFlash::new(f), nv2, opts()) {
                Ok(mut fs) => {
                    // Whatever it made of it must hold together.
                    let _ = fs.fsck();
                    let _ = dentries(&mut fs);
                }
                Err(e) => {
                    refused += 1;
                    assert!(!format!("{e}").is_empty());
                }
            }
        }
        assert!(
            refused > 30,
            "{what}: only {refused} damaged images refused"
        );
    }
}

/// Bit errors in minv's data pages, correctable or not: every read gives the data written
/// or EIO, never other bytes and never a panic; writes that make the cleaner move damaged
/// pages keep working (a page it cannot read is dropped and its chunk reads EIO); fsck
/// finds nothing but the damage, before and after a remount.
#[test]
fn data_page_bit_errors_give_eio_not_wrong_data() {
    let dev = Dev::Small;
    let g = dev.config().geometry;
    let codewords = g.page_size_bytes.div_ceil(512) + 1;
    let (mut eio, mut exact) = (0, 0);
    for seed in 0..24u64 {
        let mut fs = fresh(dev);
        let mut files = Vec::new();
        for i in 0..10u64 {
            let ino = fs
                .create(ROOT_INO, format!("f{i}").as_bytes(), file())
                .unwrap()
                .ino;
            let data = pattern(seed * 100 + i, 700 + (i as usize * 5_000) % 40_000);
            fs.write(ino, 0, &data).unwrap();
            fs.fsync(ino).unwrap();
            files.push((ino, data));
        }
        let (flash, nv) = fs.unmount_parts().unwrap();
        let mut flash = flash.into_inner();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = |n: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(n)) as u32
        };
        for _ in 0..1 + seed % 20 {
            let block = 2 + next(g.blocks_per_chip - 2);
            let addr = nandkit_flash::PageAddr::new(0, block, next(g.pages_per_block));
            flash
                .inject_bit_errors(addr, next(codewords), 1 + next(12))
                .unwrap();
        }
        let ctx = format!("seed {seed}");
        let mut fs = mount_parts(flash, nv).unwrap();
        let mut check = |fs: &mut Fs, when: &str| {
            for (ino, data) in &files {
                match read_all(fs, *ino) {
                    Ok(got) => {
                        assert_bytes(&got, data, &format!("{ctx} {when}: file {ino}"));
                        exact += 1;
                    }
                    Err(e) => {
                        assert_eq!(e.errno(), 5, "{ctx} {when}: file {ino}: {e}");
                        eio += 1;
                    }
                }
            }
            let problems: Vec<String> = fs
                .fsck()
                .problems
                .into_iter()
                .filter(|p| !p.contains("fails its checks") && !p.contains("cannot be read"))
                .collect();
            assert!(problems.is_empty(), "{ctx} {when}: fsck: {problems:#?}");
        };
        check(&mut fs, "mounted");
        // Churn that makes the cleaner move pages, damaged ones among them.
        let churn = fs.create(ROOT_INO, b"churn", file()).unwrap().ino;
        for round in 0..40u64 {
            let r = fs
                .write(churn, (round % 8) * 100_000, &pattern(round, 100_000))
                .and_then(|_| fs.fsync(churn));
            if let Err(e) = r {
                assert!(matches!(e.errno(), 5 | 28), "{ctx}: churn: {e}");
            }
        }
        fs.unlink(ROOT_INO, b"churn").unwrap();
        check(&mut fs, "after churn");
        let (flash, nv) = fs.unmount_parts().unwrap();
        let mut fs = mount_parts(flash, nv).unwrap();
        check(&mut fs, "remounted");
    }
    assert!(eio > 0 && exact > 0, "eio {eio}, exact {exact}");
}

/// NVRAM bytes a mount of `fs`'s image reads, after a clean unmount or a crash.
fn mount_reads(mut fs: Fs, crash: bool) -> (u64, Fs) {
    let (flash, nv) = if crash {
        // A change first: until one, a clean mount leaves the saved state standing (and
        // the next mount uses it), however it ends.
        fs.create(ROOT_INO, b"changed", file()).unwrap();
        let (mut flash, nv) = fs.into_parts();
        flash.power_cycle().unwrap();
        (flash, nv)
    } else {
        fs.unmount_parts().unwrap()
    };
    let nv = nv.unwrap();
    let before = nv.stats().bytes_read;
    let fs = mount_parts(flash, Some(nv)).unwrap();
    (fs.nvram().unwrap().stats.bytes_read - before, fs)
}

/// Fallocated chunks count against free space from the mount on, however it mounts: after
/// a crash, a file holding them makes the mount find it (it walks every inode), and once
/// none does, the mount reads the tree in place again, whose reads do not grow with the
/// files.
#[test]
fn a_crash_mount_counts_fallocated_chunks() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    tree(&mut fs, 60);
    let res = fs.create(ROOT_INO, b"res", file()).unwrap().ino;
    fs.fallocate(res, 0, 64 * 1024, true).unwrap();
    fs.fsync(res).unwrap();
    let free = fs.statfs().free_chunks;
    let mut fs = crash_remount(fs);
    assert_eq!(fs.statfs().free_chunks, free, "after a crash");
    assert_fsck(&mut fs, "after a crash");
    let (walked, mut fs) = mount_reads(fs, true);
    assert_eq!(fs.statfs().free_chunks, free, "after a second crash");
    fs.unlink(ROOT_INO, b"res").unwrap();
    fs.unlink(ROOT_INO, b"changed").unwrap();
    let (live, mut fs) = mount_reads(fs, true);
    assert_fsck(&mut fs, "after the last crash");
    // Each file is an inode (64 bytes) and a record of a hundred or so.
    assert!(
        walked > live + 60 * 100,
        "crash mounts read {walked} bytes with a fallocated file, {live} without"
    );
}

/// A mount reads no file's offsets: the NVRAM it reads does not grow with the data, after
/// a clean unmount or a crash.
#[test]
fn a_mount_after_a_clean_unmount_reads_no_file_offsets() {
    let dev = Dev::Small;
    let mut reads = Vec::new();
    for size in [4096usize, 1 << 20] {
        let mut fs = fresh(dev);
        let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        fs.write(ino, 0, &pattern(7, size)).unwrap();
        fs.fsync(ino).unwrap();
        let (clean, mut fs) = mount_reads(fs, false);
        assert_eq!(fs.mount_method(), MountMethod::Nvram);
        assert_bytes(&read_all(&mut fs, ino).unwrap(), &pattern(7, size), "clean");
        let (crash, mut fs) = mount_reads(fs, true);
        assert_bytes(&read_all(&mut fs, ino).unwrap(), &pattern(7, size), "crash");
        assert_fsck(&mut fs, "after the crash");
        reads.push((clean, crash));
    }
    let [(small_clean, small_crash), (big_clean, big_crash)] = reads[..] else {
        unreachable!()
    };
    // The file's size is in its record: a few bytes more at most.
    assert!(
        big_clean.abs_diff(small_clean) < 32,
        "clean mounts read {small_clean} and {big_clean} bytes"
    );
    // Nor does a mount after a crash read a file's offsets (1 MiB of 512-byte chunks is
    // 35 offset structures of 256 bytes): the page states say which pages are published.
    assert!(
        big_crash.abs_diff(small_crash) < 32,
        "crash mounts read {small_crash} and {big_crash} bytes"
    );
}

/// Everything a file system does to a file whose map a mount left in the NVRAM: read,
/// overwrite, truncate, punch, seek, link, rename over it, unlink it, and clean the
/// blocks it lives in, with nothing loading it first. Each must load it, then answer as
/// if it had never been left; the image stays clean through a crash and a remount.
#[test]
fn files_left_unread_by_a_mount_load_on_first_use() {
    let dev = Dev::Small;
    let c = dev.chunk();
    let mut fs = fresh(dev);
    let mut data: Vec<(Ino, Vec<u8>)> = Vec::new();
    for i in 0..12u64 {
        let ino = fs
            .create(ROOT_INO, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        let d = pattern(i, 40 * c + 100);
        fs.write(ino, 0, &d).unwrap();
        fs.fsync(ino).unwrap();
        data.push((ino, d));
    }
    // Fill most of the device with a file that is deleted again: cleaning has work.
    let filler = fs.create(ROOT_INO, b"filler", file()).unwrap().ino;
    let free = fs.statfs().free_chunks as usize;
    fs.write(filler, 0, &pattern(99, (free - 40) * c)).unwrap();
    fs.unlink(ROOT_INO, b"filler").unwrap();
    fs.sync().unwrap();
    let mut fs = clean_remount(fs);

    // read through the shared path: refused until loaded, then right.
    let (i0, d0) = data[0].clone();
    let mut buf = vec![0u8; 10];
    assert!(fs.read_shared(i0, 0, &mut buf).is_err());
    assert_bytes(&read_all(&mut fs, i0).unwrap(), &d0, "read");
    assert!(fs.read_shared(i0, 0, &mut buf).is_ok());
    // overwrite the middle
    let (i1, d1) = &mut data[1];
    fs.write(*i1, 5 * c as u64, &[0xab; 700]).unwrap();
    d1[5 * c..5 * c + 700].fill(0xab);
    // truncate
    let (i2, d2) = &mut data[2];
    let set = SetAttr {
        size: Some(3 * c as u64 + 1),
        ..SetAttr::default()
    };
    fs.setattr(*i2, set).unwrap();
    d2.truncate(3 * c + 1);
    // punch
    let (i3, d3) = &mut data[3];
    fs.punch_hole(*i3, 2 * c as u64, 4 * c as u64).unwrap();
    d3[2 * c..6 * c].fill(0);
    // seek
    let (i4, _) = data[4];
    assert_eq!(fs.seek_hole(i4, 0).unwrap(), 40 * c as u64 + 100);
    // link, then unlink the first name
    let (i5, _) = data[5];
    fs.link(i5, ROOT_INO, b"second").unwrap();
    fs.unlink(ROOT_INO, b"f5").unwrap();
    // rename over an unread file: it goes, its pages with it
    fs.rename(ROOT_INO, b"f6", ROOT_INO, b"f7", RenameMode::Replace)
        .unwrap();
    let (i6, d6) = data.remove(6);
    let (i7, _) = data.remove(6);
    data.push((i6, d6));
    // unlink an unread file
    fs.unlink(ROOT_INO, b"f8").unwrap();
    let (i8, _) = data.remove(6);
    // clean every block worth cleaning: the owners of the pages moved are unread
    fs.gc(u32::MAX).unwrap();
    assert!(fs.stats().blocks_cleaned > 0, "nothing was cleaned");
    assert!(fs.getattr(i7).is_err(), "the renamed-over file lives on");
    assert!(fs.getattr(i8).is_err(), "the unlinked file lives on");

    let check = |fs: &mut Fs, data: &[(Ino, Vec<u8>)], ctx: &str| {
        assert_fsck(fs, ctx);
        for (ino, d) in data {
            assert_bytes(&read_all(fs, *ino).unwrap(), d, ctx);
        }
    };
    check(&mut fs, &data, "after the ops");
    fs.sync().unwrap();
    let mut fs = crash_remount(fs);
    check(&mut fs, &data, "after a crash");
    let mut fs = clean_remount(fs);
    check(&mut fs, &data, "after a clean remount");
}

/// A tree of `n` files under nested directories, each file fsync'd.
fn tree(fs: &mut Fs, n: u64) {
    let a = fs.create(ROOT_INO, b"a", dir()).unwrap().ino;
    let b = fs.create(a, b"b", dir()).unwrap().ino;
    for i in 0..n {
        let parent = [ROOT_INO, a, b][i as usize % 3];
        let ino = fs
            .create(parent, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 600)).unwrap();
        fs.fsync(ino).unwrap();
    }
}

/// A mount puts no object but the root in RAM: after a clean unmount the saved index
/// stands in for a walk, after a crash the tree in place and the log region's counts do.
/// Either way the NVRAM it reads does not grow with the objects stored, the paper's
/// "constant mount time".
#[test]
fn a_clean_mount_reads_the_same_however_many_objects() {
    let dev = Dev::Small;
    let mut reads = Vec::new();
    for n in [2u64, 400] {
        let mut fs = fresh(dev);
        tree(&mut fs, n);
        let (clean, mut fs) = mount_reads(fs, false);
        assert_eq!(
            fs.statfs().objects,
            n + 2,
            "{n} files: statfs before any lookup"
        );
        assert_fsck(&mut fs, "after a clean mount");
        let (crash, mut fs) = mount_reads(fs, true);
        assert_eq!(
            fs.statfs().objects,
            n + 3,
            "{n} files and the one made before the cut: statfs after a crash, before any \
             lookup"
        );
        assert_fsck(&mut fs, "after a crash");
        reads.push((clean, crash));
    }
    let [(few_clean, few_crash), (many_clean, many_crash)] = reads[..] else {
        unreachable!()
    };
    // The root's entry is found by a binary search of the index: 40 bytes a probe.
    assert!(
        many_clean.abs_diff(few_clean) <= 10 * 40,
        "clean mounts read {few_clean} and {many_clean} bytes"
    );
    // The root's inode is found on its hash chain: 16 bytes a link.
    assert!(
        many_crash.abs_diff(few_crash) <= 10 * 16,
        "crash mounts read {few_crash} and {many_crash} bytes"
    );
}

/// Objects a clean mount left in the NVRAM come into RAM when a call first reaches them,
/// by name or by number, with what the unmount knew: link counts, attribute sets,
/// subdirectory counts, fallocated chunks, directory contents. Namespace changes on
/// directories never looked into stay exact through remounts and a crash.
#[test]
fn objects_left_in_nvram_load_on_first_use() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    let a = fs.create(ROOT_INO, b"a", dir()).unwrap().ino;
    let b = fs.create(a, b"b", dir()).unwrap().ino;
    let c = fs.create(b, b"c", dir()).unwrap().ino;
    let deep = fs.create(c, b"deep", file()).unwrap().ino;
    fs.write(deep, 0, &pattern(1, 5000)).unwrap();
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    fs.link(deep, d, b"hl").unwrap();
    let x = fs.create(a, b"x", file()).unwrap().ino;
    fs.setxattr(x, b"user.k", b"value", XattrMode::Set).unwrap();
    let e = fs.create(ROOT_INO, b"e", dir()).unwrap().ino;
    for i in 0..3 {
        fs.create(e, format!("k{i}").as_bytes(), file()).unwrap();
    }
    let res = fs.create(ROOT_INO, b"res", file()).unwrap().ino;
    fs.fallocate(res, 0, 64 * 1024, false).unwrap();
    let s = fs
        .create(ROOT_INO, b"s", symlink(b"a/b/c/deep"))
        .unwrap()
        .ino;
    fs.sync().unwrap();
    let tree_before = dentries(&mut fs).unwrap();
    let stat_before = fs.statfs();
    let attr_before = fs.getattr(deep).unwrap();

    let mut fs = clean_remount(fs);
    // Counts known before any object is read.
    let st = fs.statfs();
    assert_eq!(
        (st.objects, st.free_chunks),
        (stat_before.objects, stat_before.free_chunks),
        "statfs (objects, free with the reservation counted)"
    );
    // By number, never looked up: the file, with its hard link counted.
    let attr = fs.getattr(deep).unwrap();
    assert_eq!((attr.nlink, attr.size), (2, 5000));
    assert_eq!(attr.nlink, attr_before.nlink);
    assert_bytes(&read_all(&mut fs, deep).unwrap(), &pattern(1, 5000), "deep");
    assert_eq!(fs.getxattr(x, b"user.k").unwrap(), b"value");
    assert_eq!(fs.readlink(s).unwrap(), b"a/b/c/deep");
    assert_eq!(fs.getattr(a).unwrap().nlink, 3, "a has one subdirectory");
    // A directory never looked into is not empty.
    assert!(matches!(fs.rmdir(ROOT_INO, b"e"), Err(FsError::NotEmpty)));
    // Move a directory whose children were never read, then reach them through it.
    let mut fs = clean_remount(fs);
    fs.rename(ROOT_INO, b"a", ROOT_INO, b"z", RenameMode::NoReplace)
        .unwrap();
    let got = fs.resolve("/z/b/c/deep").unwrap();
    assert_eq!(got, deep);
    assert_eq!(fs.resolve("/z/b").unwrap(), b);
    // Unlink the hard link (its file never looked up by name in this mount).
    let mut fs = clean_remount(fs);
    fs.unlink(d, b"hl").unwrap();
    assert_eq!(fs.getattr(deep).unwrap().nlink, 1);
    assert_eq!(fs.getattr(res).unwrap().size, 64 * 1024);
    let mut expect = tree_before.clone();
    expect.remove(&(d, b"hl".to_vec()));
    let ino_a = expect.remove(&(ROOT_INO, b"a".to_vec())).unwrap();
    expect.insert((ROOT_INO, b"z".to_vec()), ino_a);
    let mut fs = clean_remount(fs);
    let shown = |fs: &mut Fs| show_dentries(&dentries(fs).unwrap());
    assert_eq!(shown(&mut fs), show_dentries(&expect), "remounted");
    assert_fsck(&mut fs, "remounted");
    let mut fs = crash_remount(fs);
    assert_eq!(shown(&mut fs), show_dentries(&expect), "after a crash");
    assert_eq!(fs.getxattr(x, b"user.k").unwrap(), b"value");
    assert_bytes(&read_all(&mut fs, deep).unwrap(), &pattern(1, 5000), "deep");
    assert!(fs.resolve("/e/k2").is_ok());
    assert_fsck(&mut fs, "after a crash");
    let _ = e;
}

/// Where a clean unmount saved its state in the NVRAM (the word at 4096 + 1008), how many
/// bytes it holds, and the NVRAM's bytes up to its end.
fn saved_state(nv: &mut nandkit_nvram::Nvram) -> (u64, u64, Vec<u8>) {
    let mut word = [0u8; 8];
    nv.read(4096 + 1008, &mut word).unwrap();
    let state = u64::from_le_bytes(word);
    assert_ne!(state, 0, "a clean unmount saves its state");
    nv.read(state + 8, &mut word).unwrap();
    let room = u64::from_le_bytes(word);
    let mut image = vec![0u8; (state + room) as usize];
    nv.read(0, &mut image).unwrap();
    (state, room, image)
}

/// A damaged saved state gives clear errors when an object is reached through it, never
/// a panic or a wrong object: a flipped byte in its checked head, map or extents makes the
/// mount walk instead; one in the index (entries and child lists carry their own CRCs) is
/// a `CorruptNvram` error from the call that reaches it.
#[test]
fn a_damaged_saved_state_is_an_error_not_a_wrong_tree() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    tree(&mut fs, 30);
    let want = dentries(&mut fs).unwrap();
    let (flash, nv) = fs.unmount_parts().unwrap();
    let mut flash = flash.into_inner();
    let mut nv = nv.unwrap();
    let (state, room, image) = saved_state(&mut nv);
    let (mut walked, mut refused) = (0, 0);
    for k in 0..300u64 {
        let at = (state + k * room / 300) as usize;
        let mut bad = image.clone();
        bad[at] ^= 1 << (k % 8);
        let mut nv2 = ram_nvram();
        nv2.write(0, &bad).unwrap();
        nv2.persist_all().unwrap();
        let f = clone_device(&mut flash);
        let mut fs =
            FileSystem::mount_with_nvram(nandkit_flash::StripedFlash::new(f), nv2, opts()).unwrap();
        if fs.nvram().unwrap().saved_state_bytes == 0 {
            walked += 1;
        }
        match dentries(&mut fs) {
            Ok(t) => assert_eq!(show_dentries(&t), show_dentries(&want), "byte {at}"),
            Err(e) => {
                assert!(matches!(e, FsError::CorruptNvram(_)), "byte {at}: {e}");
                assert!(!fs.fsck().is_clean(), "byte {at}: fsck saw nothing");
                refused += 1;
            }
        }
    }
    assert!(
        walked > 10 && refused > 10,
        "walked {walked}, refused {refused}"
    );
}

/// Two file systems of one geometry, unmounted: (flash, NVRAM, file system id) each.
fn two_file_systems(dev: Dev) -> Vec<(nandkit_flash::FlashDevice, nandkit_nvram::Nvram, u128)> {
    (0..2u64)
        .map(|i| {
            let mut fs = fresh(dev);
            let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
            fs.write(ino, 0, &pattern(i, 5000)).unwrap();
            let id = fs.fs_id().expect("mkfs gives an id");
            let (flash, nv) = fs.unmount_parts().unwrap();
            (flash.into_inner(), nv.unwrap(), id)
        })
        .collect()
}

/// The NVRAM of one file system with the flash of another (same geometry) is refused, by
/// a writable mount and by a read-only one (fsck), with both ids in the error, and
/// nothing is written (issue 34.4: B's files showed A's bytes, and writes damaged both).
#[test]
fn an_nvram_from_another_file_system_is_refused() {
    let dev = Dev::Small;
    let mut fss = two_file_systems(dev);
    let (a_id, b_id) = (fss[0].2, fss[1].2);
    assert_ne!(a_id, b_id, "mkfs gave two file systems one id");
    let mut b_nv = vec![0u8; 1 << 20];
    fss[1].1.read(0, &mut b_nv).unwrap();
    for options in [
        opts(),
        MountOptions {
            read_only: true,
            ..opts()
        },
    ] {
        let mut nv = ram_nvram();
        nv.write(0, &b_nv).unwrap();
        nv.persist_all().unwrap();
        let flash = nandkit_flash::StripedFlash::new(clone_device(&mut fss[0].0));
        let e = match FileSystem::mount_with_nvram(flash, nv, options) {
            Ok(_) => panic!("A's flash mounted with B's NVRAM"),
            Err(e) => e,
        };
        assert!(matches!(e, FsError::NvramMismatch { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("{b_id:032x}")),
            "NVRAM id missing: {msg}"
        );
        assert!(
            msg.contains(&format!("{a_id:032x}")),
            "flash id missing: {msg}"
        );
    }
    // Each with its own still mounts, and reads its own bytes.
    for (i, (flash, nv, id)) in fss.into_iter().enumerate() {
        let mut fs = mount_parts(flash, Some(nv)).unwrap();
        assert_eq!(fs.fs_id(), Some(id));
        let ino = fs.lookup(ROOT_INO, b"f").unwrap().ino;
        assert_bytes(
            &read_all(&mut fs, ino).unwrap(),
            &pattern(i as u64, 5000),
            "own",
        );
        assert_fsck(&mut fs, "own");
    }
}

/// A flash image without the record the NVRAM names (blank, or another profile's
/// file system) is refused too.
#[test]
fn an_nvram_on_a_blank_flash_is_refused() {
    let dev = Dev::Small;
    let fs = fresh(dev);
    let (_, nv) = fs.unmount_parts().unwrap();
    let blank =
        nandkit_flash::StripedFlash::new(nandkit_flash::FlashDevice::ram(dev.config()).unwrap());
    match FileSystem::mount_with_nvram(blank, nv.unwrap(), opts()) {
        Ok(_) => panic!("a blank flash mounted"),
        Err(e) => assert!(
            matches!(e, FsError::NvramMismatch { .. })
                && e.to_string().contains("no file system record"),
            "{e}"
        ),
    }
}

/// Damage that a clean mount meets only after mounting (an object read on first use):
/// the call that meets it gets `CorruptNvram`, the file system turns read-only, and its
/// unmount fails without writing a byte, so fsck still sees the NVRAM as it was (issue
/// 34.4: the failed unmount changed 2 bytes and fsck could no longer check it).
#[test]
fn damage_met_after_mounting_stops_every_write() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    tree(&mut fs, 30);
    let (flash, nv) = fs.unmount_parts().unwrap();
    let mut flash = flash.into_inner();
    let mut nv = nv.unwrap();
    let (state, _room, image) = saved_state(&mut nv);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.nv");
    let (mut met, mut refused, mut clean) = (0, 0, 0);
    // Flips in the heap before the saved state: inodes, records, offset structures.
    let heap = 16_000u64;
    for k in 0..120u64 {
        let at = (heap + k * (state - heap) / 120) as usize;
        let mut bad = image.clone();
        bad[at] ^= 1 << (k % 8);
        let mut nv2 =
            nandkit_nvram::Nvram::create_file(&path, ram_nvram().config().clone(), true).unwrap();
        nv2.write(0, &bad).unwrap();
        nv2.persist_all().unwrap();
        let f = nandkit_flash::StripedFlash::new(clone_device(&mut flash));
        let Ok(mut fs) = FileSystem::mount_with_nvram(f, nv2, opts()) else {
            refused += 1; // refused at mount: nothing to stop
            continue;
        };
        // (The mount itself moved the NVRAM's generation, issue 59.6.)
        let before = std::fs::read(&path).unwrap();
        let e = match dentries(&mut fs).and_then(|_| fs.load_everything()) {
            Ok(_) => {
                clean += 1;
                continue;
            }
            Err(e) => e,
        };
        assert!(matches!(e, FsError::CorruptNvram(_)), "byte {at}: {e}");
        met += 1;
        assert!(
            matches!(fs.create(ROOT_INO, b"new", file()), Err(FsError::ReadOnly)),
            "byte {at}: a create after the damage"
        );
        let out = fs.unmount_parts();
        assert!(out.is_err(), "byte {at}: the unmount succeeded");
        drop(out);
        assert!(
            std::fs::read(&path).unwrap() == before,
            "byte {at}: the NVRAM changed"
        );
        // fsck (a read-only mount) still checks it, and finds the damage.
        let nv3 = nandkit_nvram::Nvram::open_file(&path).unwrap();
        let f = nandkit_flash::StripedFlash::new(clone_device(&mut flash));
        let ro = MountOptions {
            read_only: true,
            ..opts()
        };
        let mut fs = FileSystem::mount_with_nvram(f, nv3, ro)
            .unwrap_or_else(|e| panic!("byte {at}: fsck cannot mount: {e}"));
        assert!(!fs.fsck().is_clean(), "byte {at}: fsck saw nothing");
    }
    assert!(
        met > 5,
        "only {met} flips met after mounting ({refused} refused, {clean} clean)"
    );
}

/// A close costs what changed, not the file's size (issue 34.8: every close compared the
/// whole chunk map with the published slots, 60x slower in host time than keeping the
/// file open on a file of 12,850 chunks). Counted in chunks compared, not in time.
#[test]
fn a_close_compares_what_changed_not_the_whole_file() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    let c = dev.chunk() as u64;
    let chunks = 1500u64;
    let ino = fs.create(ROOT_INO, b"big", file()).unwrap().ino;
    let mut want = pattern(1, (chunks * c) as usize);
    fs.open(ino).unwrap();
    fs.write(ino, 0, &want).unwrap();
    fs.release(ino).unwrap();
    let before = fs.nvram().unwrap().slots_compared;
    let rounds = 40u64;
    for i in 0..rounds {
        let at = (i * 97 % chunks) * c;
        let bytes = pattern(100 + i, c as usize);
        fs.open(ino).unwrap();
        fs.write(ino, at, &bytes).unwrap();
        fs.release(ino).unwrap();
        want[at as usize..(at + c) as usize].copy_from_slice(&bytes);
    }
    let per_close = (fs.nvram().unwrap().slots_compared - before) / rounds;
    // One chunk written, and what cleaning moved meanwhile: far below the file's 1,500.
    assert!(per_close < 50, "{per_close} chunks compared a close");
    assert_fsck(&mut fs, "after the closes");
    let mut fs = clean_remount(fs);
    assert_bytes(&read_all(&mut fs, ino).unwrap(), &want, "remounted");
    let mut fs = crash_remount(fs);
    assert_bytes(&read_all(&mut fs, ino).unwrap(), &want, "after a crash");
}

/// A full NVRAM refuses the call that needs room (a create, a write that maps new
/// chunks, a chmod), never the sync, close or unmount after it: the header writes a call
/// leaves for later were promised room, and the saved state's room is kept, so the
/// unmount saves it and the next mount walks nothing. Deletes still work.
#[test]
fn a_full_nvram_refuses_the_call_never_the_sync() {
    let dev = Dev::Small;
    let g = dev.config().geometry.striped();
    let layout = nandkit_fs::layout::Layout::new(g).unwrap();
    let least = nandkit_fs::meta::minv::min_nvram_bytes(layout.blocks, layout.pages_per_block);
    let config = nandkit_nvram::preset("feram")
        .unwrap()
        .with_size_bytes(least + (24 << 10))
        .unwrap();
    let nv = nandkit_nvram::Nvram::new_ram(config).unwrap();
    let mut fs = FileSystem::format_with_nvram(dev.striped(), nv, minv(dev), clock()).unwrap();
    let mut files: Vec<(Ino, Vec<u8>)> = Vec::new();
    // Files of three chunks, none synced: their headers wait for the sync.
    let mut refused = None;
    for i in 0..10_000u64 {
        let ino = match fs.create(ROOT_INO, format!("f{i:05}").as_bytes(), file()) {
            Ok(a) => a.ino,
            Err(FsError::NoSpace) => {
                refused = Some("create");
                break;
            }
            Err(e) => panic!("create {i}: {e}"),
        };
        let body = pattern(i, 3 * Dev::Small.chunk());
        match fs.write(ino, 0, &body) {
            Ok(n) => assert_eq!(n, body.len()),
            Err(FsError::NoSpace) => {
                // Refused whole: nothing was written.
                assert_eq!(fs.getattr(ino).unwrap().size, 0);
                files.push((ino, Vec::new()));
                refused = Some("write");
                break;
            }
            Err(e) => panic!("write {i}: {e}"),
        }
        files.push((ino, body));
    }
    assert!(refused.is_some(), "the NVRAM never filled");
    assert!(files.len() > 10, "only {} files fit", files.len());
    // Then empty files, smaller still, until even a create is refused: every byte the
    // NVRAM can give is given.
    for i in 0..10_000u64 {
        match fs.create(ROOT_INO, format!("e{i:05}").as_bytes(), file()) {
            Ok(a) => files.push((a.ino, Vec::new())),
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("create e{i}: {e}"),
        }
    }
    // A write far into a file needs a new offset structure: refused or done, never owed.
    let (ino, _) = files[0];
    match fs.write(ino, 1 << 20, b"far") {
        Ok(_) => files[0].1 = read_all(&mut fs, ino).unwrap(),
        Err(FsError::NoSpace) => {}
        Err(e) => panic!("far write: {e}"),
    }
    // Everything accepted is written without complaint.
    fs.sync().expect("sync on a full NVRAM");
    // The sync spent the promises: what they held beyond the headers' use is given out
    // too, until a create is refused again.
    for i in 0..10_000u64 {
        match fs.create(ROOT_INO, format!("s{i:05}").as_bytes(), file()) {
            Ok(a) => files.push((a.ino, Vec::new())),
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("create s{i}: {e}"),
        }
    }
    fs.sync().expect("sync on a full NVRAM");
    let r = fs.nvram().unwrap();
    assert!(r.bytes_in_use <= r.size_bytes);
    // The unmount saves its state: the next mount reads no inode until asked.
    let mut fs = clean_remount(fs);
    assert!(
        fs.nvram().unwrap().saved_state_bytes > 0,
        "the state was not saved"
    );
    for (ino, body) in &files {
        assert_bytes(&read_all(&mut fs, *ino).unwrap(), body, "after remount");
    }
    assert_fsck(&mut fs, "full NVRAM");
    // Deletes work on a full NVRAM, and give room back.
    let before = fs.nvram().unwrap().bytes_in_use;
    for (i, _) in files.iter().enumerate().take(5) {
        fs.unlink(ROOT_INO, format!("f{i:05}").as_bytes()).unwrap();
    }
    fs.sync().unwrap();
    assert!(fs.nvram().unwrap().bytes_in_use < before);
    let ino = fs.create(ROOT_INO, b"again", file()).unwrap().ino;
    fs.write(ino, 0, b"room again").unwrap();
    fs.sync().unwrap();
    let mut fs = clean_remount(fs);
    assert_eq!(read_all(&mut fs, ino).unwrap(), b"room again");
    assert_fsck(&mut fs, "after deletes");
}

/// A flash image and an NVRAM image in files, as `nandkit` keeps them (issue 59.6).
struct Pair {
    dir: tempfile::TempDir,
}

impl Pair {
    fn new() -> Pair {
        Pair {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn flash(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(format!("{name}.img"))
    }

    fn nvram(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(format!("{name}.nvram"))
    }

    /// mkfs into images `name`.
    fn format(&self, dev: Dev, name: &str) -> Fs {
        let flash = nandkit_flash::FlashDevice::create_image(
            &self.flash(name),
            dev.config(),
            true,
            nandkit_flash::DeviceOptions::default(),
        )
        .unwrap();
        let nv = nandkit_nvram::Nvram::create_file(
            &self.nvram(name),
            ram_nvram().config().clone(),
            true,
        )
        .unwrap();
        let flash = nandkit_flash::StripedFlash::new(flash);
        FileSystem::format_with_nvram(flash, nv, minv(dev), clock()).unwrap()
    }

    fn open(&self, flash: &str, nvram: &str) -> (nandkit_flash::FlashDevice, nandkit_nvram::Nvram) {
        let f = nandkit_flash::FlashDevice::open_image(
            &self.flash(flash),
            nandkit_flash::DeviceOptions::default(),
        )
        .unwrap();
        (
            f,
            nandkit_nvram::Nvram::open_file(&self.nvram(nvram)).unwrap(),
        )
    }

    /// Mounts flash image `flash` with NVRAM image `nvram`.
    fn mount(&self, flash: &str, nvram: &str, options: MountOptions) -> Result<Fs> {
        let (f, nv) = self.open(flash, nvram);
        let f = nandkit_flash::StripedFlash::open(f, options.read_only)?;
        FileSystem::mount_with_nvram(f, nv, options)
    }

    fn copy_flash(&self, from: &str, to: &str) {
        std::fs::copy(self.flash(from), self.flash(to)).unwrap();
        let meta = |p: std::path::PathBuf| {
            let mut s = p.into_os_string();
            s.push(".meta");
            std::path::PathBuf::from(s)
        };
        std::fs::copy(meta(self.flash(from)), meta(self.flash(to))).unwrap();
    }

    fn copy_nvram(&self, from: &str, to: &str) {
        std::fs::copy(self.nvram(from), self.nvram(to)).unwrap();
    }
}

fn ro() -> MountOptions {
    MountOptions {
        read_only: true,
        ..opts()
    }
}

/// Seven files written and synced, the file system cleanly unmounted.
fn seven_files(p: &Pair, dev: Dev) {
    let mut fs = p.format(dev, "a");
    for i in 0..7u64 {
        let ino = fs
            .create(ROOT_INO, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 3000 + 500 * i as usize))
            .unwrap();
    }
    fs.unmount().unwrap();
}

/// Overwrites files 0..5 and deletes 5 and 6 (the reproduction).
fn overwrite_and_delete(fs: &mut Fs) {
    for i in 0..5u64 {
        let ino = fs.lookup(ROOT_INO, format!("f{i}").as_bytes()).unwrap().ino;
        fs.write(ino, 0, &pattern(100 + i, 3000 + 500 * i as usize))
            .unwrap();
        fs.fsync(ino).unwrap();
    }
    for i in 5..7u64 {
        fs.unlink(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
    }
}

fn assert_new_contents(fs: &mut Fs, ctx: &str) {
    for i in 0..5u64 {
        let ino = fs.lookup(ROOT_INO, format!("f{i}").as_bytes()).unwrap().ino;
        assert_bytes(
            &read_all(fs, ino).unwrap(),
            &pattern(100 + i, 3000 + 500 * i as usize),
            ctx,
        );
    }
    for i in 5..7u64 {
        assert!(
            fs.lookup(ROOT_INO, format!("f{i}").as_bytes()).is_err(),
            "{ctx}: f{i} back"
        );
    }
}

#[track_caller]
fn assert_stale(r: Result<Fs>, older_nvram: bool, ctx: &str) {
    let e = match r {
        Ok(_) => panic!("{ctx}: mounted"),
        Err(e) => e,
    };
    match e {
        FsError::NvramStale { nvram, flash } => {
            assert_eq!(nvram < flash, older_nvram, "{ctx}: {e}");
            let msg = e.to_string();
            let which = if older_nvram {
                "NVRAM image is an older copy"
            } else {
                "flash image is an older copy"
            };
            assert!(msg.contains(which), "{ctx}: {msg}");
        }
        e => panic!("{ctx}: {e}"),
    }
}

/// An older copy of the NVRAM put back beside the flash it no longer describes is
/// refused, by a writable mount and a read-only one (fsck), whenever the copy was taken:
/// unmounted, mid-session, or before a session that crashed; so is the newer NVRAM with an
/// older copy of the flash. Before, the old NVRAM mounted and fsck was clean: 5 overwritten
/// files read their old bytes and 2 deleted files were back (issue 59.6).
#[test]
fn an_older_copy_of_the_nvram_is_refused() {
    let dev = Dev::Small;
    // Copied while unmounted, put back after a session.
    let p = Pair::new();
    seven_files(&p, dev);
    p.copy_nvram("a", "old");
    p.copy_flash("a", "oldflash");
    let mut fs = p.mount("a", "a", opts()).unwrap();
    overwrite_and_delete(&mut fs);
    fs.unmount().unwrap();
    for o in [opts(), ro()] {
        assert_stale(p.mount("a", "old", o.clone()), true, "copy taken unmounted");
        assert_stale(p.mount("oldflash", "a", o), false, "older flash");
    }
    let mut fs = p.mount("a", "a", opts()).unwrap();
    assert_new_contents(&mut fs, "own NVRAM");
    assert_fsck(&mut fs, "own NVRAM");
    fs.unmount().unwrap();

    // Copied mid-session (after the writes were synced), put back after the unmount.
    let p = Pair::new();
    seven_files(&p, dev);
    let mut fs = p.mount("a", "a", opts()).unwrap();
    let ino = fs.lookup(ROOT_INO, b"f0").unwrap().ino;
    fs.write(ino, 0, b"mid-session").unwrap();
    fs.fsync(ino).unwrap();
    p.copy_nvram("a", "old");
    overwrite_and_delete(&mut fs);
    fs.unmount().unwrap();
    for o in [opts(), ro()] {
        assert_stale(p.mount("a", "old", o), true, "copy taken mid-session");
    }

    // Copied unmounted, then a session that crashed.
    let p = Pair::new();
    seven_files(&p, dev);
    p.copy_nvram("a", "old");
    let mut fs = p.mount("a", "a", opts()).unwrap();
    overwrite_and_delete(&mut fs);
    drop(fs.into_parts()); // the images keep what the cut left
    for o in [opts(), ro()] {
        assert_stale(
            p.mount("a", "old", o),
            true,
            "copy before a crashed session",
        );
    }
    let mut fs = p.mount("a", "a", opts()).unwrap();
    assert_new_contents(&mut fs, "own NVRAM after the crash");
    assert_fsck(&mut fs, "own NVRAM after the crash");
}

/// The generation moves at every writable mount: a power cut at any NVRAM persist or
/// flash op of a mount (and of the unmount after, see `crash.rs`) leaves a pair that
/// mounts, reads what was there and goes on; a read-only mount moves nothing.
#[test]
fn a_cut_while_the_generation_moves_never_refuses_the_pair() {
    for dev in Dev::ALL {
        let p = Pair::new();
        seven_files(&p, dev);
        let mut fs = p.mount("a", "a", opts()).unwrap();
        overwrite_and_delete(&mut fs);
        fs.unmount().unwrap();
        // What an uncut writable mount does.
        let (f, nv) = p.open("a", "a");
        let (ops0, persists0) = (f.state_ops(), nv.persist_count());
        let mut fs =
            FileSystem::mount_with_nvram(nandkit_flash::StripedFlash::new(f), nv, opts()).unwrap();
        let ops = fs.device().state_ops() - ops0;
        let persists = fs.nvram_mut().unwrap().persist_count() - persists0;
        drop(fs.into_parts());
        assert!(ops >= 1 && persists >= 1, "{ops} ops, {persists} persists");
        p.copy_flash("a", "base");
        p.copy_nvram("a", "base");
        let cuts = (0..=persists)
            .map(|k| (true, k))
            .chain((0..=ops).map(|n| (false, n)));
        for (nvram, n) in cuts {
            let ctx = format!(
                "{}: cut at mount's {} {n}",
                dev.name(),
                if nvram { "persist" } else { "flash op" }
            );
            p.copy_flash("base", "w");
            p.copy_nvram("base", "w");
            let (mut f, mut nv) = p.open("w", "w");
            if nvram {
                nv.cut_at_persist(n);
            } else {
                f.arm_power_cut(nandkit_flash::PowerCut::AtOp(n));
            }
            let _ = FileSystem::mount_with_nvram(nandkit_flash::StripedFlash::new(f), nv, opts())
                .map(|fs| drop(fs.into_parts()));
            for round in 0..2 {
                let mut fs = p
                    .mount("w", "w", opts())
                    .unwrap_or_else(|e| panic!("{ctx}, round {round}: {e}"));
                assert_new_contents(&mut fs, &ctx);
                assert_fsck(&mut fs, &ctx);
                fs.unmount().unwrap();
            }
            // And a copy from before still does not mount.
            assert_stale(p.mount("w", "a", ro()), true, &ctx);
        }
        // A read-only mount writes nothing: the pair stays as it was.
        let before = std::fs::read(p.nvram("base")).unwrap();
        drop(p.mount("base", "base", ro()).unwrap());
        assert!(
            std::fs::read(p.nvram("base")).unwrap() == before,
            "a read-only mount wrote"
        );
    }
}

/// A read whose metadata is damaged fails (EIO), never returns zeros or other bytes:
/// single bytes of the NVRAM flipped in turn (tables, then the heap: inodes, records,
/// offset structures), on a cleanly unmounted image and as after a crash; every file is
/// read by name and compares, or the read fails with EIO (issue 59.6: with 6 flipped bytes
/// fsck flagged the damage but reads returned zeros).
#[test]
fn damaged_metadata_reads_fail_never_return_other_bytes() {
    let dev = Dev::Small;
    let mut fs = fresh(dev);
    let mut files = Vec::new();
    for i in 0..10u64 {
        let name = format!("f{i}");
        let ino = fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino;
        let data = pattern(i, 3000 + i as usize * 1100);
        fs.write(ino, 0, &data).unwrap();
        files.push((name, data));
    }
    let (flash, nv) = fs.unmount_parts().unwrap();
    let mut flash = flash.into_inner();
    let mut nv = nv.unwrap();
    let used = 120_000u64;
    let mut clean = vec![0u8; used as usize];
    nv.read(0, &mut clean).unwrap();
    let mut crashed = clean.clone();
    crashed[4096 + 1008..4096 + 1016].fill(0);
    let mut wrong = Vec::new();
    let (mut failed, mut read) = (0, 0);
    for (image, what) in [(clean, "clean"), (crashed, "crashed")] {
        let mut rng = 0x2545_f491_u64;
        for k in 0..1200u64 {
            let mut bad = image.clone();
            // One byte in turn, or six at random (as the campaign flipped).
            let flips: Vec<usize> = if k < 600 {
                vec![(k * 7919 % used) as usize]
            } else {
                (0..6)
                    .map(|_| {
                        rng = rng
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ((rng >> 33) % used) as usize
                    })
                    .collect()
            };
            for &at in &flips {
                bad[at] ^= 0x5a;
            }
            let at = format!("{flips:?}");
            let mut nv2 = ram_nvram();
            nv2.write(0, &bad).unwrap();
            nv2.persist_all().unwrap();
            let f = nandkit_flash::StripedFlash::new(clone_device(&mut flash));
            let Ok(mut fs) = FileSystem::mount_with_nvram(f, nv2, opts()) else {
                continue;
            };
            for (name, data) in &files {
                // Damage met finding the file (EUCLEAN) is not a read.
                let Ok(a) = fs.lookup(ROOT_INO, name.as_bytes()) else {
                    continue;
                };
                match read_all(&mut fs, a.ino) {
                    Ok(b) if b == *data => read += 1,
                    Err(e) if e.errno() == 5 => failed += 1,
                    Ok(b) => wrong.push(format!(
                        "{what}, byte {at}: {name} read {} bytes, not its {}{}",
                        b.len(),
                        data.len(),
                        if b.iter().all(|&x| x == 0) {
                            " (all zeros)"
                        } else {
                            ""
                        }
                    )),
                    Err(e) => wrong.push(format!(
                        "{what}, byte {at}: {name}: {e} (errno {})",
                        e.errno()
                    )),
                }
            }
        }
    }
    println!("{read} reads right, {failed} failed with EIO");
    assert!(
        wrong.is_empty(),
        "{} wrong: {:#?}",
        wrong.len(),
        &wrong[..wrong.len().min(30)]
    );
}
