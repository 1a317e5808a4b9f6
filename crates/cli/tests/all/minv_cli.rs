//! The `minv` profile's two images as a user handles them (issue 34): an NVRAM image
//! belongs to the flash image mkfs made it with, and a failed mkfs leaves nothing behind.
//! No FUSE needed: fsck and info open the pair the way a mount does.

use crate::common::*;
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A minv file system on a small image: (flash image, NVRAM image).
fn minv_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let img = dir.join(format!("{name}.img"));
    let nv = dir.join(format!("{name}.nv"));
    let o = nandkit(&[
        "mkfs",
        s(&img),
        "--profile",
        "minv",
        "--geometry",
        "smallblock-64m",
        "--device-size",
        "4MiB",
        "--nvram",
        s(&nv),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    (img, nv)
}

/// The file system id a command's message gives for `what` ("flash" or "NVRAM"):
/// the 32 hex digits after "`what` image holds file system ".
fn ids_in(msg: &str) -> Vec<String> {
    msg.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|w| w.len() == 32)
        .map(str::to_string)
        .collect()
}

#[test]
fn an_nvram_image_is_refused_on_another_flash_image() {
    let dir = tempfile::tempdir().unwrap();
    let (a_img, a_nv) = minv_pair(dir.path(), "a");
    let (b_img, b_nv) = minv_pair(dir.path(), "b");
    let b_nv_before = std::fs::read(&b_nv).unwrap();
    for (cmd, extra) in [("fsck", None), ("info", None), ("fsck", Some("--json"))] {
        let mut args = vec![cmd, s(&a_img), "--nvram", s(&b_nv)];
        args.extend(extra);
        let o = nandkit(&args);
        let err = stderr(&o);
        assert!(
            !o.status.success(),
            "{cmd} accepted another file system's NVRAM"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("belongs to another file system"), "{err}");
        // Both ids are named, and they differ.
        let ids = ids_in(&err);
        assert_eq!(ids.len(), 2, "{err}");
        assert_ne!(ids[0], ids[1], "{err}");
    }
    // The refusal wrote nothing, and each pair still checks clean.
    assert_eq!(std::fs::read(&b_nv).unwrap(), b_nv_before);
    for (img, nv) in [(&a_img, &a_nv), (&b_img, &b_nv)] {
        let o = nandkit(&["fsck", s(img), "--nvram", s(nv)]);
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    }
}

/// Every file in `dir`, by name.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A minv mkfs that must fail: 1 KiB of NVRAM holds nothing.
fn too_small_nvram_mkfs<'a>(img: &'a Path, nv: &'a Path) -> [&'a str; 8] {
    [
        "mkfs",
        s(img),
        "--profile",
        "minv",
        "--nvram",
        s(nv),
        "--nvram-size",
        "1KiB",
    ]
}

#[test]
fn a_failed_minv_mkfs_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let nv = dir.path().join("x.nv");
    let args = too_small_nvram_mkfs(&img, &nv);
    let o = nandkit(&args);
    let err = stderr(&o);
    assert!(!o.status.success(), "a 1 KiB NVRAM was accepted");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("NVRAM"), "{err}");
    assert_eq!(listing(dir.path()), Vec::<String>::new(), "{err}");
    // Run again: the same error, not a refusal to touch what the first run left.
    let again = nandkit(&args);
    assert_eq!(stderr(&again), err);
}

#[test]
fn a_failed_minv_mkfs_leaves_existing_files_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let (img, nv) = minv_pair(dir.path(), "x");
    let meta = PathBuf::from(format!("{}.meta", s(&img)));
    let before: Vec<Vec<u8>> = [&img, &meta, &nv]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let mut args = too_small_nvram_mkfs(&img, &nv).to_vec();
    args.push("--force");
    let o = nandkit(&args);
    assert!(!o.status.success(), "a 1 KiB NVRAM was accepted");
    let after: Vec<Vec<u8>> = [&img, &meta, &nv]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert!(before == after, "a failed mkfs changed the existing images");
    let o = nandkit(&["fsck", s(&img), "--nvram", s(&nv)]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}
