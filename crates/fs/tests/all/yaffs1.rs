//! The `yaffs1` profile: YAFFS as the 2006-07 papers measured it on small-page chips. No
//! summaries and no checkpoint: every stale page is marked deleted in its spare area, a
//! rewritten chunk carries the next version, and a mount reads the tags of every page.

use crate::common::*;
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn fresh() -> Fs {
    format_with(
        Dev::Small,
        FsConfig::profile("yaffs1", Dev::Small.blocks()).unwrap(),
    )
}

fn resize(fs: &mut Fs, ino: Ino, size: u64) {
    let set = SetAttr {
        size: Some(size),
        ..SetAttr::default()
    };
    fs.setattr(ino, set).unwrap();
}

#[test]
fn large_pages_are_refused_with_a_reason() {
    let flash = nandkit_flash::FlashDevice::ram(Dev::Tiny.config()).unwrap();
    let config = FsConfig::profile("yaffs1", Dev::Tiny.blocks()).unwrap();
    let err = FileSystem::format(nandkit_flash::StripedFlash::new(flash), config, clock())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("small-page"), "{err}");
}

#[test]
fn rewrites_truncates_and_deletes_survive_crashes_and_unmounts() {
    let mut fs = fresh();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut model: std::collections::BTreeMap<Vec<u8>, (Ino, Vec<u8>)> = Default::default();
    let mut next = 0u64;
    for round in 0..30 {
        for _ in 0..rng.gen_range(1..4) {
            let name = format!("f{next}").into_bytes();
            next += 1;
            let ino = fs.create(ROOT_INO, &name, file()).unwrap().ino;
            let body = pattern(next, rng.gen_range(1..Dev::Small.chunk() * 20));
            fs.write(ino, 0, &body).unwrap();
            fs.fsync(ino).unwrap();
            model.insert(name, (ino, body));
        }
        // Rewrite part of one file, shrink another and grow it back over the cut.
        let names: Vec<Vec<u8>> = model.keys().cloned().collect();
        let name = &names[rng.gen_range(0..names.len())];
        let (ino, body) = model.get_mut(name).unwrap();
        let off = rng.gen_range(0..body.len());
        let patch = pattern(round + 1000, rng.gen_range(1..2000));
        fs.write(*ino, off as u64, &patch).unwrap();
        if body.len() < off + patch.len() {
            body.resize(off + patch.len(), 0);
        }
        body[off..off + patch.len()].copy_from_slice(&patch);
        let cut = body.len() / 3;
        resize(&mut fs, *ino, cut as u64);
        let grown = body.len();
        resize(&mut fs, *ino, grown as u64);
        body[cut..].fill(0);
        fs.fsync(*ino).unwrap();
        while model.len() > 5 {
            let k = rng.gen_range(0..model.len());
            let name = model.keys().nth(k).unwrap().clone();
            fs.unlink(ROOT_INO, &name).unwrap();
            model.remove(&name);
        }
        fs.sync().unwrap();
        fs = if round % 3 == 0 {
            clean_remount(fs)
        } else {
            crash_remount(fs)
        };
        assert_eq!(fs.mount_method(), MountMethod::Scan, "no checkpoint");
        let names: Vec<Vec<u8>> = dentries(&mut fs)
            .unwrap()
            .into_keys()
            .map(|(_, n)| n)
            .collect();
        assert_eq!(
            names,
            model.keys().cloned().collect::<Vec<_>>(),
            "round {round}"
        );
        for (ino, body) in model.values() {
            assert_bytes(
                &read_all(&mut fs, *ino).unwrap(),
                body,
                &format!("round {round}"),
            );
        }
        assert_fsck(&mut fs, &format!("round {round}"));
    }
    let s = fs.stats();
    assert_eq!(s.summary_pages_written, 0);
    assert_eq!(s.checkpoint_pages_written, 0);
}

/// A rewrite marks the old copy deleted once the new one is on flash, and gives the new
/// one the next version; the marker is a spare-area program on the chip.
#[test]
fn a_rewrite_costs_a_version_read_and_a_deletion_marker() {
    let mut fs = fresh();
    let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    fs.write(ino, 0, &pattern(1, 512 * 4)).unwrap();
    fs.sync().unwrap();
    let before = fs.stats().clone();
    let spare_before = fs.device().stats().total().spare_programs;
    fs.write(ino, 512, &pattern(2, 512)).unwrap();
    fs.sync().unwrap();
    let after = fs.stats().clone();
    assert_eq!(after.version_reads - before.version_reads, 1);
    // The old copy of chunk 1 and the file's old header.
    assert_eq!(
        after.deletion_markers_written - before.deletion_markers_written,
        2
    );
    assert_eq!(fs.device().stats().total().spare_programs - spare_before, 2);
}

/// The mount reads the tags of every programmed page of every used block (and one page
/// of each empty block), as YAFFS1's scan did.
#[test]
fn the_mount_reads_every_page_of_every_used_block() {
    let mut fs = fresh();
    for i in 0..6u64 {
        let ino = fs
            .create(ROOT_INO, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        fs.write(ino, 0, &pattern(i, 512 * 50)).unwrap();
    }
    let (mut flash, _) = fs.unmount_parts().unwrap();
    let g = flash.inner().config().geometry;
    let programmed: u64 = (0..g.blocks_per_chip)
        .map(|b| {
            let info = flash
                .inner_mut()
                .block_info(nandkit_flash::BlockAddr::new(0, b))
                .unwrap();
            u64::from(info.write_ptr.min(g.pages_per_block))
        })
        .sum();
    let base = flash.inner_mut().stats().total();
    let fs = mount_parts(flash, None).unwrap();
    let reads = fs.device().stats().total();
    let oob = reads.oob_reads - base.oob_reads;
    // Every page programmed outside the two anchor blocks, plus the first page of each
    // empty block; the anchors' own reads are few.
    assert!(
        oob >= programmed - 2 * u64::from(g.pages_per_block),
        "{oob} of {programmed}"
    );
    assert!(
        oob <= programmed + u64::from(g.blocks_per_chip) + 64,
        "{oob} of {programmed}"
    );
}

/// Power lost between a chunk's new copy and the marker of its old one leaves both
/// unmarked: the mount keeps the newer version and marks the other.
#[test]
fn a_cut_before_the_marker_keeps_the_newer_copy() {
    let mut fs = fresh();
    let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    let old = pattern(1, 512 * 4);
    fs.write(ino, 0, &old).unwrap();
    fs.sync().unwrap();
    let (pages, markers) = (
        fs.stats().data_pages_written,
        fs.stats().deletion_markers_written,
    );
    let new = pattern(2, 512);
    fs.write(ino, 512, &new).unwrap();
    assert_eq!(fs.stats().data_pages_written, pages + 1, "written through");
    assert_eq!(
        fs.stats().deletion_markers_written,
        markers,
        "marker still owed"
    );
    let mut fs = crash_remount(fs);
    let mut want = old.clone();
    want[512..1024].copy_from_slice(&new);
    assert_bytes(
        &read_all(&mut fs, ino).unwrap(),
        &want,
        "newer version wins",
    );
    assert_eq!(
        fs.stats().deletion_markers_written,
        1,
        "the mount marked the old copy"
    );
    assert_fsck(&mut fs, "after the cut");
    let mut fs = clean_remount(fs);
    assert_bytes(
        &read_all(&mut fs, ino).unwrap(),
        &want,
        "after a clean remount",
    );
}

/// A delete marks none of the file's chunks (YAFFS1's soft deletion: its name-less header
/// drops them at any mount), and a crash right after it does not bring the file back.
#[test]
fn a_delete_is_soft_and_stays_deleted() {
    let mut fs = fresh();
    let ino = fs.create(ROOT_INO, b"big", file()).unwrap().ino;
    fs.write(ino, 0, &pattern(3, 512 * 40)).unwrap();
    fs.sync().unwrap();
    let markers = fs.stats().deletion_markers_written;
    fs.unlink(ROOT_INO, b"big").unwrap();
    fs.sync().unwrap();
    let spent = fs.stats().deletion_markers_written - markers;
    assert!(spent <= 2, "{spent} markers for a delete of 40 chunks");
    let mut fs = crash_remount(fs);
    assert!(dentries(&mut fs).unwrap().is_empty());
    assert_eq!(
        fs.stats().deletion_markers_written,
        0,
        "nothing to mark at mount"
    );
    assert_fsck(&mut fs, "after the delete");
}

/// Cleaning copies a victim's live pages with the next version taken from the tags it
/// read (no extra read) and writes no marker on the victim it is about to erase, as
/// YAFFS1's cleaning did; the data survives a crash right after.
#[test]
fn cleaning_reads_no_versions_and_marks_no_victim() {
    let mut fs = fresh();
    let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    let mut want = pattern(5, 512 * 96);
    fs.write(ino, 0, &want).unwrap();
    fs.sync().unwrap();
    // Make most of the first blocks stale, so they are worth cleaning.
    let patch = pattern(6, 512 * 40);
    fs.write(ino, 0, &patch).unwrap();
    want[..patch.len()].copy_from_slice(&patch);
    fs.sync().unwrap();
    let before = fs.stats().clone();
    let cleaned = fs.gc(4).unwrap();
    let after = fs.stats().clone();
    assert!(
        cleaned > 0 && after.pages_copied > before.pages_copied,
        "{after:?}"
    );
    assert_eq!(
        after.version_reads, before.version_reads,
        "versions from the read tags"
    );
    fs.sync().unwrap();
    assert_eq!(
        fs.stats().deletion_markers_written,
        before.deletion_markers_written,
        "no marker on a victim"
    );
    let mut fs = crash_remount(fs);
    assert_bytes(
        &read_all(&mut fs, ino).unwrap(),
        &want,
        "after cleaning and a cut",
    );
    assert_fsck(&mut fs, "after cleaning");
}

/// `yaffs_search_reads` (the MODA paper's account of YAFFS: no block status in RAM):
/// a victim search reads the tags of every programmed page of every block it passes, one
/// page of an erased block, as flash reads; without it, a search reads nothing.
#[test]
fn a_search_without_status_in_ram_reads_the_blocks_it_passes() {
    let fill = |search_reads: bool| {
        let mut config = FsConfig::profile("yaffs1", Dev::Small.blocks()).unwrap();
        config.yaffs_search_reads = search_reads;
        let mut fs = format_with(Dev::Small, config);
        // Files rewritten in part: blocks with some invalid pages to clean.
        for k in 0..6u64 {
            let ino = fs
                .create(ROOT_INO, format!("f{k}").as_bytes(), file())
                .unwrap()
                .ino;
            fs.write(ino, 0, &pattern(k, 512 * 40)).unwrap();
            fs.write(ino, 512 * 8, &pattern(k + 10, 512 * 4)).unwrap();
        }
        fs.sync().unwrap();
        fs
    };
    let mut plain = fill(false);
    let mut reading = fill(true);
    let expected: u64 = {
        // One explicit gc is one search from block 0: it passes the first window.
        let window = reading
            .config()
            .yaffs_window_blocks
            .min(Dev::Small.blocks());
        let table = reading.block_table();
        (0..window)
            .map(|b| {
                let blk = table[b as usize];
                match blk.state {
                    blocks::BlockState::Bad => 0,
                    blocks::BlockState::Empty => 1,
                    _ => u64::from(blk.next_page().max(1)),
                }
            })
            .sum()
    };
    let before = reading.stats().search_reads;
    let oob_before = reading.device().stats().total().oob_reads;
    assert_eq!(reading.gc(1).unwrap(), 1);
    let reads = reading.stats().search_reads - before;
    assert_eq!(reads, expected, "every programmed page of the window, once");
    assert!(
        reading.device().stats().total().oob_reads - oob_before >= reads,
        "the reads are flash operations"
    );
    assert_eq!(plain.gc(1).unwrap(), 1);
    assert_eq!(plain.stats().search_reads, 0);
    // The choice is the same either way: only the cost differs.
    assert_eq!(plain.stats().pages_copied, reading.stats().pages_copied);
}
