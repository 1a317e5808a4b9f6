//! An array with parity whose chips are lost, blanked, cut short or replaced, as a user
//! meets it through `info`, `fsck`, `mkfs` and `rebuild` (files written and read through the
//! library, so no FUSE is needed): a chip that is not a complete member is a failed chip,
//! never data; any chip may be the one lost, chip 0 too; nothing is replaced unasked.

use std::path::{Path, PathBuf};

use crate::common::*;
use nandkit_flash::backend::file::{chip_path, sidecar_path};
use nandkit_flash::{FlashDevice, StripedDevice, StripedFlash};
use nandkit_fs::{FileSystem, MountOptions, NewObject, ROOT_INO};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// A 4-chip tiny image with parity in a fresh directory.
fn parity_image() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("p.img");
    let o = nandkit(&[
        "mkfs",
        s(&img),
        "--geometry",
        "tiny",
        "--chips",
        "4",
        "--parity",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, img)
}

fn mount(img: &Path, read_only: bool) -> FileSystem<StripedDevice> {
    let dev = FlashDevice::open_image(img, Default::default()).unwrap();
    let dev = StripedFlash::open(dev, read_only).unwrap();
    let options = MountOptions {
        read_only,
        ..MountOptions::default()
    };
    FileSystem::mount(dev, options).unwrap()
}

/// Writes each file whole and fsyncs it, as `cp` and `sync` would through the mount.
fn write_files(img: &Path, files: &[(String, Vec<u8>)]) {
    let mut fs = mount(img, false);
    for (name, bytes) in files {
        let a = fs
            .create(ROOT_INO, name.as_bytes(), NewObject::regular_file())
            .unwrap();
        assert_eq!(fs.write(a.ino, 0, bytes).unwrap(), bytes.len());
        fs.fsync(a.ino).unwrap();
    }
    fs.unmount().unwrap();
}

/// Every file reads back whole (an error or a wrong byte fails, naming the file).
fn assert_files(img: &Path, files: &[(String, Vec<u8>)], ctx: &str) {
    let mut fs = mount(img, true);
    for (name, want) in files {
        let ino = fs.resolve(&format!("/{name}")).unwrap();
        let mut got = vec![0u8; want.len() + 1];
        let n = fs
            .read(ino, 0, &mut got)
            .unwrap_or_else(|e| panic!("{ctx}: {name} reads {e}"));
        assert!(
            n == want.len() && got[..n] == want[..],
            "{ctx}: {name} differs"
        );
    }
}

fn out(o: &std::process::Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

fn ok(args: &[&str]) -> String {
    let o = nandkit(args);
    assert!(o.status.success(), "nandkit {args:?}:\n{}", out(&o));
    assert!(!out(&o).contains("panicked"), "{}", out(&o));
    out(&o)
}

/// Case 2 of issue 59: a blank chip file put in place of chip 1 was read as the chip, so a
/// file written afterwards left an earlier one reading wrong bytes with no error, and
/// `info` said every chip was present. It is a failed chip: the earlier file reads back,
/// info and fsck say why, and `rebuild` makes it a member again (redundancy back).
#[test]
fn a_blank_chip_in_place_of_one_is_a_failed_chip_not_data() {
    let (_dir, img) = parity_image();
    let mut files: Vec<(String, Vec<u8>)> = (0..3)
        .map(|i| (format!("f{i}"), data(i, 20_000 + 17_000 * i as usize)))
        .collect();
    write_files(&img, &files);
    let chip1 = chip_path(&img, 1);
    let len = std::fs::metadata(&chip1).unwrap().len();
    std::fs::write(&chip1, vec![0xFF; len as usize]).unwrap();
    let later = vec![("later".to_string(), data(9, 50_000))];
    write_files(&img, &later);
    files.extend(later);
    assert_files(&img, &files, "blank chip 1");
    let info = ok(&["info", s(&img)]);
    assert!(
        info.contains("DEGRADED: chip 1 has failed (it is not a complete member"),
        "{info}"
    );
    let fsck = ok(&["fsck", s(&img)]);
    assert!(
        fsck.contains("is clean") && fsck.contains("chip 1 has failed"),
        "{fsck}"
    );
    let r = ok(&["rebuild", s(&img), "--chip", "1"]);
    assert!(r.contains("a member of the array again"), "{r}");
    assert!(ok(&["info", s(&img)]).contains("every chip present"));
    // A rebuilt chip is trusted, and redundancy is back: another chip may go.
    std::fs::remove_file(chip_path(&img, 3)).unwrap();
    assert_files(&img, &files, "rebuilt chip 1, chip 3 gone");
}

/// Case 3 of issue 59: a chip file cut short (a rebuild killed while it made the file) made
/// rebuild, info, mount and fsck fail on the size. It is a failed chip; rebuild starts it
/// afresh by itself.
#[test]
fn a_short_chip_file_is_a_failed_chip_and_rebuild_restarts_it() {
    let (_dir, img) = parity_image();
    let files = vec![("a".to_string(), data(1, 70_000))];
    write_files(&img, &files);
    let chip2 = chip_path(&img, 2);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&chip2)
        .unwrap()
        .set_len(1_000_000)
        .unwrap();
    let info = ok(&["info", s(&img)]);
    assert!(
        info.contains("DEGRADED: chip 2 has failed")
            && info.contains("is 1000000 bytes, the geometry needs"),
        "{info}"
    );
    assert!(ok(&["fsck", s(&img)]).contains("is clean"));
    assert_files(&img, &files, "chip 2 short");
    let r = ok(&["rebuild", s(&img), "--chip", "2"]);
    assert!(
        r.contains("a new erased chip") && r.contains("rebuilt"),
        "{r}"
    );
    assert!(ok(&["info", s(&img)]).contains("every chip present"));
    std::fs::remove_file(chip_path(&img, 0)).unwrap();
    assert_files(&img, &files, "rebuilt chip 2, chip 0 gone");
}

/// Case 4 of issue 59: with chip 0's file (`IMAGE` itself) gone, info, fsck and
/// `rebuild --chip 0` failed, and `mkfs IMAGE` without --force replaced the sidecar with a
/// one-chip geometry, orphaning the other chips. Chip 0 fails like any other; mkfs refuses
/// to replace any file of an image without --force, and names it.
#[test]
fn chip_0_can_fail_and_mkfs_replaces_nothing_without_force() {
    let (_dir, img) = parity_image();
    let files = vec![("a".to_string(), data(2, 90_000))];
    write_files(&img, &files);
    std::fs::remove_file(&img).unwrap();
    let sidecar = std::fs::read(sidecar_path(&img)).unwrap();
    let info = ok(&["info", s(&img)]);
    assert!(info.contains("DEGRADED: chip 0 has failed"), "{info}");
    assert!(ok(&["fsck", s(&img)]).contains("is clean"));
    assert_files(&img, &files, "chip 0 gone");
    for args in [
        vec!["mkfs", s(&img)],
        vec!["mkfs", s(&img), "--geometry", "tiny"],
    ] {
        let o = nandkit(&args);
        assert!(
            !o.status.success(),
            "{args:?} replaced the image:\n{}",
            out(&o)
        );
        assert!(out(&o).contains("--force"), "{}", out(&o));
        assert!(!out(&o).contains("panicked"), "{}", out(&o));
        assert_eq!(
            std::fs::read(sidecar_path(&img)).unwrap(),
            sidecar,
            "{args:?}"
        );
        assert!(!img.exists(), "{args:?}");
    }
    let r = ok(&["rebuild", s(&img), "--chip", "0"]);
    assert!(r.contains("rebuilt"), "{r}");
    assert!(ok(&["info", s(&img)]).contains("every chip present"));
    std::fs::remove_file(chip_path(&img, 1)).unwrap();
    assert_files(&img, &files, "rebuilt chip 0, chip 1 gone");
}

/// A one-file image whose page file is gone: mkfs does not replace the sidecar left behind
/// without --force, and no command suggests one that would.
#[test]
fn mkfs_keeps_a_lone_sidecar_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("one.img");
    ok(&["mkfs", s(&img), "--geometry", "tiny"]);
    std::fs::remove_file(&img).unwrap();
    let sidecar = std::fs::read(sidecar_path(&img)).unwrap();
    let o = nandkit(&["mkfs", s(&img), "--geometry", "tiny", "--chips", "2"]);
    assert!(
        !o.status.success() && out(&o).contains("--force"),
        "{}",
        out(&o)
    );
    assert_eq!(std::fs::read(sidecar_path(&img)).unwrap(), sidecar);
    let o = nandkit(&["info", s(&img)]);
    assert!(!o.status.success(), "{}", out(&o));
    assert!(out(&o).contains("page file is missing"), "{}", out(&o));
    assert!(!out(&o).contains("nandkit mkfs"), "{}", out(&o));
    ok(&["mkfs", s(&img), "--geometry", "tiny", "--force"]);
}

/// Two chips out (a blank chip 1, chip 2 cut short): parity cannot cover both, and rebuild
/// says so before it replaces anything.
#[test]
fn rebuild_refuses_before_replacing_when_another_chip_is_out() {
    let (_dir, img) = parity_image();
    write_files(&img, &[("a".to_string(), data(3, 40_000))]);
    let chip1 = chip_path(&img, 1);
    let len = std::fs::metadata(&chip1).unwrap().len();
    std::fs::write(&chip1, vec![0xFF; len as usize]).unwrap();
    let chip2 = chip_path(&img, 2);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&chip2)
        .unwrap()
        .set_len(1_000_000)
        .unwrap();
    let o = nandkit(&["rebuild", s(&img), "--chip", "2"]);
    assert!(!o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains("chip 1 is not a complete member of the array either"),
        "{}",
        out(&o)
    );
    assert!(!out(&o).contains("panicked"), "{}", out(&o));
    assert_eq!(std::fs::metadata(&chip2).unwrap().len(), 1_000_000);
}
