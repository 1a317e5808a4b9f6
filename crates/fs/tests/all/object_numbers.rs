//! Object numbers are never given twice, not even after a crash: a file handle (NFS,
//! `open_by_handle_at`) names an object by its number, and a handle to a deleted object
//! must be stale, never another file. The deleted object with the highest number may
//! have had every page it wrote erased by cleaning since, so a mount cannot learn the
//! number from its pages; the flash log keeps that object's last header as a tombstone,
//! and the NVRAM keeps a high-water mark.

use crate::common::*;
use nandkit_fs::*;

/// Creates `a` and `b`, deletes `b` (the newest number), then overwrites `a` until
/// cleaning has long since erased the blocks `b` was written in.
fn delete_newest_then_churn(profile: &str) -> (Fs, Ino, Ino) {
    // yaffs1 formats small-page chips only.
    let dev = if profile == "yaffs1" {
        Dev::Small
    } else {
        Dev::Tiny
    };
    let mut fs = format_with(dev, FsConfig::profile(profile, dev.blocks()).unwrap());
    let a = fs.create(ROOT_INO, b"a", file()).unwrap().ino;
    let b = fs.create(ROOT_INO, b"b", file()).unwrap().ino;
    fs.write(b, 0, b"bee").unwrap();
    fs.fsync(b).unwrap();
    fs.unlink(ROOT_INO, b"b").unwrap();
    fs.sync().unwrap();
    let c = dev.chunk();
    for round in 0..3000u64 {
        let off = (round % 40) as usize * c;
        fs.write(a, off as u64, &pattern(round, c)).unwrap();
        if round % 16 == 0 {
            fs.fsync(a).unwrap();
        }
    }
    fs.sync().unwrap();
    (fs, a, b)
}

#[test]
fn a_deleted_objects_number_is_never_given_again_after_a_crash() {
    for &profile in PROFILES {
        let (fs, a, b) = delete_newest_then_churn(profile);
        let mut fs = crash_remount(fs);
        let n = fs.create(ROOT_INO, b"n", file()).unwrap().ino;
        assert!(
            n > b,
            "{profile}: the new file got number {n}, deleted b had {b}"
        );
        // And after the repairs, another crash: the mark is still on flash / in NVRAM.
        fs.unlink(ROOT_INO, b"n").unwrap();
        fs.sync().unwrap();
        let mut fs = crash_remount(fs);
        let m = fs.create(ROOT_INO, b"m", file()).unwrap().ino;
        assert!(m > n, "{profile}: number {m} after {n} was deleted");
        let mut fs = clean_remount(fs);
        let k = fs.create(ROOT_INO, b"k", file()).unwrap().ino;
        assert!(
            k > m,
            "{profile}: number {k} after a clean remount, {m} before"
        );
        assert!(read_all(&mut fs, a).is_ok());
        assert_fsck(&mut fs, profile);
    }
}
