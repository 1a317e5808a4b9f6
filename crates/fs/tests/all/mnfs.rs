//! The `mnfs` profile: each file's data in blocks of its own, erased when the file is
//! deleted, so later writes find erased blocks and never wait for cleaning; a delete
//! never comes back after a crash. `hybrid` does the same for large files only.

use crate::common::*;
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn fresh(dev: Dev) -> Fs {
    fresh_as(dev, "mnfs")
}

fn fresh_as(dev: Dev, profile: &str) -> Fs {
    format_with(dev, FsConfig::profile(profile, dev.blocks()).unwrap())
}

/// Blocks with no live page that are not erased, apart from those holding headers (the
/// metadata log's, left to cleaning).
fn dead_data_blocks(fs: &Fs) -> usize {
    fs.block_table()
        .iter()
        .filter(|b| b.valid() == 0 && b.next_page() > 0)
        .count()
}

#[test]
fn a_file_owns_its_blocks_and_deleting_it_erases_them() {
    for dev in Dev::ALL {
        let mut fs = fresh(dev);
        let ppb = dev.config().geometry.pages_per_block as usize;
        let size = dev.chunk() * ppb * 3 / 2;
        let mut inos = Vec::new();
        // Two files written in turns: each still gets blocks of its own.
        for i in 0..2u64 {
            inos.push(
                fs.create(ROOT_INO, format!("f{i}").as_bytes(), file())
                    .unwrap()
                    .ino,
            );
        }
        let step = dev.chunk() * 4;
        for off in (0..size).step_by(step) {
            for (i, &ino) in inos.iter().enumerate() {
                let body = pattern(i as u64, size);
                fs.write(ino, off as u64, &body[off..(off + step).min(size)])
                    .unwrap();
            }
        }
        for &ino in &inos {
            fs.fsync(ino).unwrap();
        }
        let before = fs.device().stats().total().erases;
        fs.unlink(ROOT_INO, b"f0").unwrap();
        let after = fs.device().stats().total().erases;
        assert!(
            after >= before + 2,
            "{}: deleting f0 erased {} blocks",
            dev.name(),
            after - before
        );
        assert_eq!(
            read_all(&mut fs, inos[1]).unwrap(),
            pattern(1, size),
            "{}",
            dev.name()
        );
        assert_fsck(&mut fs, dev.name());
        let mut fs = crash_remount(fs);
        assert!(
            fs.lookup(ROOT_INO, b"f0").is_err(),
            "{}: f0 came back",
            dev.name()
        );
        assert_eq!(
            read_all(&mut fs, inos[1]).unwrap(),
            pattern(1, size),
            "{}",
            dev.name()
        );
        assert_fsck(&mut fs, dev.name());
    }
}

/// Rounds of creating, writing, renaming and deleting, a power loss after each: the names
/// are exactly the model's every time (no delete undone by an erase), and deleted files'
/// blocks do not linger.
#[test]
fn churn_with_crashes_matches_the_model() {
    for (dev, profile) in Dev::ALL
        .into_iter()
        .flat_map(|d| [(d, "mnfs"), (d, "hybrid")])
    {
        let mut fs = fresh_as(dev, profile);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut model: std::collections::BTreeMap<Vec<u8>, (Ino, Vec<u8>)> = Default::default();
        let mut next = 0u64;
        for round in 0..40 {
            for _ in 0..rng.gen_range(1..5) {
                let name = format!("n{next}").into_bytes();
                next += 1;
                let ino = fs.create(ROOT_INO, &name, file()).unwrap().ino;
                let body = pattern(next, rng.gen_range(1..dev.chunk() * 40));
                fs.write(ino, 0, &body).unwrap();
                fs.fsync(ino).unwrap();
                model.insert(name, (ino, body));
            }
            while model.len() > 6 {
                let k = rng.gen_range(0..model.len());
                let name = model.keys().nth(k).unwrap().clone();
                fs.unlink(ROOT_INO, &name).unwrap();
                model.remove(&name);
            }
            fs.sync().unwrap();
            fs = crash_remount(fs);
            let names: Vec<Vec<u8>> = dentries(&mut fs)
                .unwrap()
                .into_keys()
                .map(|(_, n)| n)
                .collect();
            let want: Vec<Vec<u8>> = model.keys().cloned().collect();
            assert_eq!(names, want, "{} round {round}", dev.name());
            for (ino, body) in model.values() {
                assert_eq!(
                    &read_all(&mut fs, *ino).unwrap(),
                    body,
                    "{} round {round}",
                    dev.name()
                );
            }
            assert_fsck(&mut fs, &format!("{} round {round}", dev.name()));
        }
        assert!(
            dead_data_blocks(&fs) < dev.blocks() as usize / 4,
            "{}",
            dev.name()
        );
    }
}

/// hybrid: a small file's pages share blocks with others (none of its own to erase); a
/// large file's pages past its first block's worth get blocks of their own, which its
/// delete erases.
#[test]
fn hybrid_keeps_small_files_in_the_log_and_gives_large_ones_blocks() {
    let dev = Dev::Small;
    let mut fs = fresh_as(dev, "hybrid");
    let ppb = dev.config().geometry.pages_per_block as usize;
    for i in 0..20u64 {
        let ino = fs
            .create(ROOT_INO, format!("s{i}").as_bytes(), file())
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 300)).unwrap();
        fs.fsync(ino).unwrap();
    }
    let e0 = fs.device().stats().total().erases;
    fs.unlink(ROOT_INO, b"s3").unwrap();
    assert_eq!(
        fs.device().stats().total().erases,
        e0,
        "a small file had a block of its own"
    );
    let big = fs.create(ROOT_INO, b"big", file()).unwrap().ino;
    fs.write(big, 0, &pattern(99, dev.chunk() * ppb * 5))
        .unwrap();
    fs.fsync(big).unwrap();
    let e1 = fs.device().stats().total().erases;
    fs.unlink(ROOT_INO, b"big").unwrap();
    let erased = fs.device().stats().total().erases - e1;
    assert!(
        erased >= 4,
        "deleting the large file erased {erased} blocks"
    );
    assert_fsck(&mut fs, "hybrid");
}

/// MNFS maps a file by its blocks: a file written in order keeps one map entry an erase
/// block through a crash mount and a clean one (both rebuild the iBAT); a rewrite copies
/// the block and keeps it so, reading the same bytes. (The shapes are counted by
/// `file_map_shapes`; the bytes are what matters, and they are checked at every step.)
#[test]
fn files_written_in_order_stay_block_granular() {
    for dev in Dev::ALL {
        let mut fs = fresh(dev);
        let ppb = dev.config().geometry.pages_per_block as usize;
        let size = dev.chunk() * ppb * 3 + 100;
        let body = pattern(7, size);
        let ino = fs.create(ROOT_INO, b"clip", file()).unwrap().ino;
        for off in (0..size).step_by(dev.chunk() * 8) {
            fs.write(
                ino,
                off as u64,
                &body[off..(off + dev.chunk() * 8).min(size)],
            )
            .unwrap();
        }
        fs.fsync(ino).unwrap();
        assert_eq!(
            fs.file_map_shapes(),
            (1, 0),
            "{}: after writing",
            dev.name()
        );
        let mut fs = crash_remount(fs);
        assert_eq!(fs.file_map_shapes(), (1, 0), "{}: after a scan", dev.name());
        assert_bytes(&read_all(&mut fs, ino).unwrap(), &body, dev.name());
        let mut fs = clean_remount(fs);
        assert_eq!(
            fs.file_map_shapes(),
            (1, 0),
            "{}: after a clean remount",
            dev.name()
        );
        assert_bytes(&read_all(&mut fs, ino).unwrap(), &body, dev.name());
        // A rewrite in the middle copies its block (block mapping): still one entry a
        // block, the same bytes.
        let mut want = body.clone();
        let at = dev.chunk() * ppb + 3;
        want[at..at + 10].copy_from_slice(b"0123456789");
        fs.write(ino, at as u64, b"0123456789").unwrap();
        fs.fsync(ino).unwrap();
        assert_eq!(
            fs.file_map_shapes(),
            (1, 0),
            "{}: after a rewrite",
            dev.name()
        );
        let mut fs = clean_remount(fs);
        assert_bytes(&read_all(&mut fs, ino).unwrap(), &want, dev.name());
        assert_fsck(&mut fs, dev.name());
        // yaffs keeps page maps.
        let mut y = format(dev);
        let ino = y.create(ROOT_INO, b"clip", file()).unwrap().ino;
        y.write(ino, 0, &body).unwrap();
        assert_eq!(y.file_map_shapes(), (0, 1), "{}: yaffs", dev.name());
    }
}
