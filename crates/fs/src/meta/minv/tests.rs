//! Targeted crash tests of the invariants MiNV's fsck checks (`check`), fast enough for
//! the crate's unit tests, so a broken invariant fails here and not only in the long
//! crash sweeps and model runs of `tests/all`. Each test states the rule it pins; after
//! every crash the mount must succeed and fsck be clean.

use std::sync::Arc;

use nandkit_flash::{preset, FlashDevice};
use nandkit_nvram::Nvram;

use super::layout::{HIGH_WATER_OFF, HIGH_WATER_STEP, SERIAL_OFF};
use crate::types::{Kind, RenameMode, SetAttr, XattrMode, ROOT_INO};
use crate::{CountingClock, FileSystem, FsConfig, MountOptions, NewObject, Result};

type Fs = FileSystem<FlashDevice>;

fn clock() -> Arc<CountingClock> {
    Arc::new(CountingClock::new(1_000_000_000))
}

/// MiNV on the MODA paper's small-block chip cut to 2 MiB (512-byte pages, 32 pages a
/// block, 128 blocks), with a 4 MiB FeRAM.
fn fresh() -> Fs {
    let mut c = preset("smallblock-64m")
        .unwrap()
        .with_total_bytes(2 << 20)
        .unwrap();
    c.ecc.rber_fresh = 0.0;
    c.ecc.rber_at_endurance = 0.0;
    let blocks = c.geometry.total_blocks() as u32;
    let nv = nandkit_nvram::preset("feram")
        .unwrap()
        .with_size_bytes(4 << 20)
        .unwrap();
    FileSystem::format_with_nvram(
        FlashDevice::ram(c).unwrap(),
        Nvram::new_ram(nv).unwrap(),
        FsConfig::profile("minv", blocks).unwrap(),
        clock(),
    )
    .unwrap()
}

/// Power fails: the flash loses nothing programmed, the NVRAM keeps, drops or tears each
/// unpersisted word as `seed` says. Then a mount from the NVRAM.
fn crash(fs: Fs, seed: u64) -> Fs {
    let (flash, nv) = power_fails(fs, seed);
    mount(flash, nv, false)
}

fn power_fails(fs: Fs, seed: u64) -> (FlashDevice, Nvram) {
    let (mut flash, nv) = fs.into_parts();
    flash.power_cycle().unwrap();
    let mut nv = nv.expect("an NVRAM");
    nv.crash(seed);
    (flash, nv)
}

fn mount(flash: FlashDevice, nv: Nvram, read_only: bool) -> Fs {
    let options = MountOptions {
        clock: clock(),
        read_only,
        ..MountOptions::default()
    };
    FileSystem::mount_with_nvram(flash, nv, options).expect("mount after a crash")
}

fn assert_clean(fs: &mut Fs, ctx: &str) {
    let r = fs.fsck();
    assert!(r.is_clean(), "{ctx}: fsck: {:#?}", r.problems);
}

fn file() -> NewObject<'static> {
    NewObject::regular_file()
}

fn dir() -> NewObject<'static> {
    NewObject {
        kind: Kind::Dir,
        perm: 0o755,
        ..NewObject::regular_file()
    }
}

fn word(fs: &mut Fs, off: u64) -> u64 {
    fs.nvram_mut().unwrap().read_u64(off).unwrap()
}

/// fsck: "a record has version v, not below the version mark". A mount after a crash
/// gives versions from the stored mark on (`recover`), so the first record it publishes
/// has a version exactly at the mark, which must raise it first (`>=`, not `>`): a crash,
/// a mount, one create, a crash, and the record must still be below the mark. Three
/// rounds, checking the stored mark against the next version after each create.
#[test]
fn the_version_mark_is_raised_for_a_record_exactly_at_it() {
    let mut fs = fresh();
    let a = fs.create(ROOT_INO, b"a", file()).unwrap().ino;
    fs.write(a, 0, b"first").unwrap();
    fs.fsync(a).unwrap();
    for round in 0..3u64 {
        let mut m = crash(fs, 7 + round);
        let mark = word(&mut m, SERIAL_OFF);
        assert_eq!(
            m.next_serial, mark,
            "round {round}: a crash mount starts at the mark"
        );
        let name = format!("new{round}");
        m.create(ROOT_INO, name.as_bytes(), file()).unwrap();
        let raised = word(&mut m, SERIAL_OFF);
        assert!(
            raised >= m.next_serial,
            "round {round}: mark {raised}, versions given up to {}",
            m.next_serial - 1
        );
        assert_clean(&mut m, &format!("round {round}, mounted"));
        fs = crash(m, 100 + round);
        assert_clean(&mut fs, &format!("round {round}, after the second crash"));
        fs.lookup(ROOT_INO, name.as_bytes()).unwrap();
    }
}

/// fsck: "object n is at or past the object number high-water mark". A mount after a
/// crash gives numbers from the stored mark on, so the first create after it takes a
/// number exactly at the mark, which must raise it first; numbers are never given twice,
/// deleted ones included, across crashes; the mark runs ahead in steps.
#[test]
fn object_numbers_stay_below_the_high_water_mark_and_never_come_back() {
    let mut fs = fresh();
    let mut given = std::collections::BTreeSet::new();
    for round in 0..3u64 {
        for k in 0..HIGH_WATER_STEP + 3 {
            let name = format!("f{round}-{k}");
            let ino = fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino;
            assert!(
                given.insert(ino),
                "round {round}: object number {ino} given twice"
            );
            if k % 2 == 0 {
                fs.unlink(ROOT_INO, name.as_bytes()).unwrap();
            }
            let mark = word(&mut fs, HIGH_WATER_OFF);
            assert!(u64::from(ino) < mark, "object {ino}, mark {mark}");
        }
        assert_clean(&mut fs, &format!("round {round}"));
        fs = crash(fs, round);
        assert_clean(&mut fs, &format!("round {round}, after a crash"));
        let first = fs.create(ROOT_INO, b"after", file()).unwrap().ino;
        assert!(
            given.insert(first),
            "round {round}: {first} given again after a crash"
        );
        assert!(u64::from(first) < word(&mut fs, HIGH_WATER_OFF));
        assert_clean(
            &mut fs,
            &format!("round {round}, first create after a crash"),
        );
        fs.unlink(ROOT_INO, b"after").unwrap();
        fs = crash(fs, 50 + round);
        assert_clean(&mut fs, &format!("round {round}, second crash"));
    }
}

type Workload = fn(&mut Fs) -> Result<()>;

/// Every transaction of the namespace: the tree (child lists, link counts, attribute
/// sets, names in the child), the inode counts, the heap and its bitmap, the dying list.
fn namespace(fs: &mut Fs) -> Result<()> {
    let d = fs.create(ROOT_INO, b"d", dir())?.ino;
    let a = fs.create(d, b"a", file())?.ino;
    fs.write(a, 0, &[1; 1500])?;
    fs.fsync(a)?;
    fs.setxattr(a, b"user.k", b"value", XattrMode::Set)?;
    let b = fs.create(ROOT_INO, b"b", file())?.ino;
    fs.write(b, 0, &[2; 700])?;
    fs.link(b, d, b"b2")?;
    fs.fsync(b)?;
    fs.rename(d, b"a", ROOT_INO, b"b", RenameMode::Replace)?;
    fs.unlink(d, b"b2")?;
    let e = fs.create(d, b"e", dir())?.ino;
    fs.create(e, b"inner", file())?;
    fs.unlink(e, b"inner")?;
    fs.rmdir(d, b"e")?;
    fs.rename(ROOT_INO, b"b", d, b"moved", RenameMode::Replace)?;
    fs.sync()
}

/// Every transaction of the data: pages published at fsync, overwritten, cut by a
/// truncate, fallocated chunks, a delete, and cleaning erasing blocks (pages published
/// before the block holding their old copies is erased; page states and block status).
fn data(fs: &mut Fs) -> Result<()> {
    let chunk = fs.chunk_bytes() as usize;
    let f = fs.create(ROOT_INO, b"f", file())?.ino;
    let g = fs.create(ROOT_INO, b"g", file())?.ino;
    for k in 0..40u8 {
        fs.write(f, u64::from(k) * chunk as u64, &vec![k; chunk])?;
        fs.write(g, u64::from(k) * chunk as u64, &vec![k ^ 0x55; chunk])?;
    }
    fs.fsync(f)?;
    fs.fsync(g)?;
    fs.write(f, chunk as u64, &vec![0xAA; 2 * chunk])?;
    fs.fsync(f)?;
    fs.setattr(
        f,
        SetAttr {
            size: Some(3 * chunk as u64 + 10),
            ..SetAttr::default()
        },
    )?;
    fs.fsync(f)?;
    let h = fs.create(ROOT_INO, b"h", file())?.ino;
    fs.fallocate(h, 0, 4 * chunk as u64, true)?;
    fs.fsync(h)?;
    fs.unlink(ROOT_INO, b"g")?;
    fs.gc(8)?;
    fs.write(f, 0, &vec![0xBB; chunk])?;
    fs.sync()
}

/// NVRAM persists `w` makes on a fresh file system.
fn persists(w: Workload) -> u64 {
    let mut fs = fresh();
    let base = fs.nvram().unwrap().stats.persists;
    w(&mut fs).unwrap();
    assert_clean(&mut fs, "uncut");
    fs.nvram().unwrap().stats.persists - base
}

/// `w` cut at every NVRAM persist: a read-only mount and then a writable one after the
/// crash succeed and fsck is clean on both (every invariant `check` holds, read through a
/// committed transaction or a dying list by the first, applied by the second), and so
/// after one more create and a second crash.
fn sweep(name: &str, w: Workload) -> u64 {
    let total = persists(w);
    println!("{name}: {total} NVRAM persist points");
    for k in 0..=total {
        let ctx = format!("{name}: power cut at NVRAM persist {k} of {total}");
        let mut fs = fresh();
        fs.nvram_mut().unwrap().cut_at_persist(k);
        let done = w(&mut fs);
        assert_eq!(done.is_ok(), k == total, "{ctx}: {done:?}");
        // A read-only mount first: it applies nothing (a committed transaction, the dying
        // list) and must see the same whole file system through them.
        let (flash, nv) = power_fails(fs, k);
        let mut ro = mount(flash, nv, true);
        assert_clean(&mut ro, &format!("{ctx}, read-only"));
        let (flash, nv) = ro.into_parts();
        let mut fs = mount(flash, nv.unwrap(), false);
        assert_clean(&mut fs, &ctx);
        fs.create(ROOT_INO, b"zz-after", file())
            .unwrap_or_else(|e| panic!("{ctx}: create after the crash: {e}"));
        let mut fs = crash(fs, k + 1000);
        assert_clean(&mut fs, &format!("{ctx}, then a create and a crash"));
    }
    total
}

/// fsck's tree, counts, store, heap, bitmap and dying-list checks, at a cut in every
/// namespace transaction.
#[test]
fn a_cut_in_any_namespace_transaction_leaves_every_invariant() {
    let total = sweep("namespace", namespace);
    assert!(total > 20, "{total} persists");
}

/// fsck's page-state, offset-structure, published-page and block-status checks, at a
/// cut in every data transaction.
#[test]
fn a_cut_in_any_data_transaction_leaves_every_invariant() {
    let total = sweep("data", data);
    assert!(total > 20, "{total} persists");
}
