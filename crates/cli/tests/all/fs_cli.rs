//! The file system commands (mkfs, fsck, info, dump, mount's argument checks) as a user
//! runs them: exit codes, messages for bad input, JSON contracts. No FUSE needed.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

/// Asserts a failure that is an ordinary error (exit `code`), never a panic, with a
/// message on stderr containing every one of `needles`.
fn assert_fails(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stderr:\n{err}\nstdout:\n{}",
        stdout(o)
    );
    assert!(!err.contains("panicked"), "panic:\n{err}");
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in:\n{err}");
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A formatted 8 MiB image in a fresh directory.
fn tiny_image() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("nand.img");
    let o = nandkit(&["mkfs", s(&img), "--geometry", "tiny"]);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir, img)
}

#[test]
fn mkfs_then_fsck_info_dump_are_clean() {
    let (_dir, img) = tiny_image();
    assert!(img.exists());
    assert!(Path::new(&format!("{}.meta", s(&img))).exists());

    let o = nandkit(&["fsck", s(&img)]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("is clean"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("agrees with the scan"),
        "{}",
        stdout(&o)
    );

    let o = nandkit(&["fsck", s(&img), "--json"]);
    assert!(o.status.success());
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["clean"], true);
    assert_eq!(r["problems"].as_array().unwrap().len(), 0);
    assert_eq!(r["checkpoint"], "agrees");

    let o = nandkit(&["info", s(&img), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["device"]["name"], "tiny");
    assert_eq!(r["profile"]["profile"], "yaffs");
    assert_eq!(r["chunk_bytes"], 2048);
    assert_eq!(r["tags"], "large");
    assert_eq!(r["mount_method"], "Checkpoint");
    assert_eq!(r["good_blocks"], 64);
    assert_eq!(r["bad_blocks"], 0);
    assert!(r["erase_count_min"].as_u64().unwrap() >= 1);
    let (u, i, p) = (
        r["utilization"].as_f64().unwrap(),
        r["invalidity"].as_f64().unwrap(),
        r["uniformity"].as_f64().unwrap(),
    );
    assert!(u > 0.0 && u < 0.01 && i >= 0.0 && (0.0..=1.0).contains(&p));
    let o = nandkit(&["info", s(&img)]);
    let text = stdout(&o);
    for field in [
        "device",
        "profile",
        "erase counts",
        "bad blocks",
        "u / i / p",
    ] {
        assert!(text.contains(field), "{field} missing from:\n{text}");
    }

    let o = nandkit(&["dump", s(&img), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 64);
    // The first two blocks are the anchors (file system record copies); the log starts
    // after them.
    assert_eq!(rows[0]["state"], "anchor");
    assert_eq!(rows[1]["state"], "anchor");
    let b2 = &rows[2];
    assert_eq!(b2["state"], "active");
    assert!(b2["valid"].as_u64().unwrap() >= 1);
    assert_eq!(
        b2["valid"].as_u64().unwrap()
            + b2["invalid"].as_u64().unwrap()
            + b2["summary"].as_u64().unwrap()
            + b2["free"].as_u64().unwrap(),
        64
    );
    assert!(rows.iter().any(|r| r["state"] == "checkpoint"));

    // Anchor block 0: the file system record (page 0), then checkpoint pointers.
    let o = nandkit(&["dump", s(&img), "--block", "0", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let b: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pages = b["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 64);
    assert_eq!(pages[0]["kind"], "anchor");
    assert_eq!(pages[0]["check_ok"], true);
    assert_eq!(pages[1]["kind"], "anchor");
    assert_eq!(pages[63]["kind"], "erased");
    // Block 2: mkfs wrote the root directory's header (object 1) first.
    let o = nandkit(&["dump", s(&img), "--block", "2", "--json"]);
    let b: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pages = b["pages"].as_array().unwrap();
    assert_eq!(pages[0]["kind"], "header");
    assert_eq!(pages[0]["obj"], 1);
    assert_eq!(pages[0]["check_ok"], true);
    let o = nandkit(&["dump", s(&img), "--block", "2"]);
    assert!(stdout(&o).contains("header"), "{}", stdout(&o));
}

#[test]
fn mkfs_refuses_to_overwrite_without_force() {
    let (_dir, img) = tiny_image();
    let o = nandkit(&["mkfs", s(&img)]);
    assert_fails(&o, 1, &["already holds a nandkit file system", "--force"]);
    let o = nandkit(&["mkfs", s(&img), "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("formatted"));
    // Still the tiny device: mkfs without device options keeps the image's geometry.
    let o = nandkit(&["info", s(&img), "--json"]);
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["device"]["name"], "tiny");
}

#[test]
fn mkfs_with_another_geometry_needs_force_and_recreates() {
    let (_dir, img) = tiny_image();
    let other = ["--geometry", "smallblock-64m", "--device-size", "4MiB"];
    let mut args = vec!["mkfs", s(&img)];
    args.extend(other);
    let o = nandkit(&args);
    assert_fails(
        &o,
        1,
        &["different device", "tiny", "smallblock-64m", "--force"],
    );
    args.push("--force");
    let o = nandkit(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = nandkit(&["info", s(&img), "--json"]);
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["device"]["name"], "smallblock-64m");
    // 512-byte pages with a 16-byte OOB use the small tag layout: whole 512-byte chunks.
    assert_eq!(r["tags"], "small");
    assert_eq!(r["chunk_bytes"], 512);
    let o = nandkit(&["fsck", s(&img)]);
    assert!(o.status.success(), "{}", stdout(&o));
}

#[test]
fn wrong_geometry_or_profile_is_a_clear_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("x.img");
    let o = nandkit(&["mkfs", s(&img), "--geometry", "nope"]);
    assert_fails(&o, 1, &["unknown preset 'nope'", "mlc-1g"]);
    assert!(!img.exists());
    let o = nandkit(&["mkfs", s(&img), "-g", "tiny", "--profile", "nope"]);
    assert_fails(&o, 1, &["--profile nope", "yaffs"]);
    assert!(!img.exists());
    let o = nandkit(&["mkfs", s(&img), "-g", "tiny", "--chips", "3"]);
    assert_fails(&o, 1, &["--chips 3"]);
    assert!(!img.exists());
    let o = nandkit(&["mkfs", s(dir.path())]);
    assert_fails(&o, 1, &["is a directory"]);
    // yaffs1 is YAFFS1 on small pages: large pages and MLC cells are refused up front.
    for g in ["tiny", "mlc-1g"] {
        let o = nandkit(&["mkfs", s(&img), "-g", g, "--profile", "yaffs1"]);
        assert_fails(&o, 1, &["yaffs1", "small-page", "smallblock-64m"]);
        assert!(!img.exists(), "{g}");
    }
    let o = nandkit(&[
        "mkfs",
        s(&img),
        "-g",
        "smallblock-64m",
        "--profile",
        "yaffs1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = nandkit(&["info", s(&img)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("the profile keeps no checkpoint"), "{out}");
    assert!(
        out.contains("YAFFS as the 2006-07 papers measured it"),
        "{out}"
    );
}

#[test]
fn missing_image_is_a_clear_error_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("missing.img");
    let o = nandkit(&["fsck", s(&img)]);
    assert_fails(&o, 8, &["no such flash image", "nandkit mkfs"]);
    for cmd in ["info", "dump"] {
        let o = nandkit(&[cmd, s(&img)]);
        assert_fails(&o, 1, &["no such flash image"]);
    }
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let o = nandkit(&["mount", s(&img), s(&mnt)]);
    assert_fails(&o, 1, &["no such flash image", "--create"]);
}

#[test]
fn corrupt_images_are_clear_errors_never_panics() {
    // A page file of the wrong length.
    let (_d1, img) = tiny_image();
    let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.set_len(12345).unwrap();
    drop(f);
    let o = nandkit(&["fsck", s(&img)]);
    assert_fails(&o, 8, &["page file is 12345 bytes"]);
    let o = nandkit(&["info", s(&img)]);
    assert_fails(&o, 1, &["page file is 12345 bytes"]);

    // A sidecar that is not one.
    let (_d2, img) = tiny_image();
    std::fs::write(format!("{}.meta", s(&img)), b"not json at all").unwrap();
    let o = nandkit(&["fsck", s(&img)]);
    assert_fails(&o, 8, &["sidecar"]);
    let o = nandkit(&["dump", s(&img)]);
    assert_fails(&o, 1, &["sidecar"]);

    // No sidecar at all.
    let (_d3, img) = tiny_image();
    std::fs::remove_file(format!("{}.meta", s(&img))).unwrap();
    let o = nandkit(&["fsck", s(&img)]);
    assert_fails(&o, 8, &["sidecar", "missing"]);
    // mkfs --force recovers it (as the message says).
    let o = nandkit(&["mkfs", s(&img), "-g", "tiny"]);
    assert_fails(&o, 1, &["--force"]);
    let o = nandkit(&["mkfs", s(&img), "-g", "tiny", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(nandkit(&["fsck", s(&img)]).status.success());

    // Every page erased: a valid device with no file system on it.
    let (_d4, img) = tiny_image();
    let len = std::fs::metadata(&img).unwrap().len();
    std::fs::write(&img, vec![0xFFu8; len as usize]).unwrap();
    let o = nandkit(&["fsck", s(&img)]);
    assert_fails(&o, 8, &["no nandkit file system", "nandkit mkfs"]);
    // dump still shows the device's own view.
    let o = nandkit(&["dump", s(&img)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("device's view"), "{}", stderr(&o));

    // Random garbage over the pages: whatever fsck makes of it, it says so and exits
    // non-zero, without panicking.
    let (_d5, img) = tiny_image();
    let mut junk = vec![0u8; len as usize];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for b in junk.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    std::fs::write(&img, &junk).unwrap();
    let o = nandkit(&["fsck", s(&img)]);
    assert!(matches!(o.status.code(), Some(1) | Some(8)), "{o:?}");
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    for cmd in ["info", "dump"] {
        let o = nandkit(&[cmd, s(&img)]);
        assert_ne!(o.status.code(), Some(101), "{cmd} panicked: {}", stderr(&o));
    }
}

#[test]
fn fsck_reports_damage_to_a_used_page() {
    let (_dir, img) = tiny_image();
    // Damage the data area of the root directory's header page without touching its tags:
    // the chip's ECC and the record's CRC no longer hold.
    let g = nandkit_flash::preset("tiny").unwrap().geometry;
    let layout = nandkit_fs::layout::Layout::new(g).unwrap();
    let raw = g.raw_page_bytes();
    let page = g.page_size_bytes as usize;
    let mut bytes = std::fs::read(&img).unwrap();
    let root_header = (0..bytes.len() / raw)
        .find(|&p| {
            matches!(
                layout.decode_tags(&bytes[p * raw + page..(p + 1) * raw]),
                nandkit_fs::format::TagRead::Valid(nandkit_fs::format::Tags::Header(h))
                    if h.obj == nandkit_fs::ROOT_INO
            )
        })
        .expect("the root's header");
    let at = root_header * raw;
    for b in &mut bytes[at..at + 16] {
        *b ^= 0x5A;
    }
    std::fs::write(&img, &bytes).unwrap();
    let o = nandkit(&["fsck", s(&img)]);
    let out = stdout(&o);
    assert_ne!(o.status.code(), Some(0), "damage went unnoticed:\n{out}");
    assert_ne!(o.status.code(), Some(101), "panic: {}", stderr(&o));
    assert!(!out.is_empty() || !stderr(&o).is_empty());
}

#[test]
fn dump_rejects_a_block_out_of_range() {
    let (_dir, img) = tiny_image();
    let o = nandkit(&["dump", s(&img), "--block", "64"]);
    assert_fails(&o, 1, &["--block 64", "0..=63"]);
}

#[test]
fn mount_rejects_bad_arguments_before_mounting() {
    let (dir, img) = tiny_image();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let o = nandkit(&["mount", s(&img), s(&file)]);
    assert_fails(&o, 1, &["not a directory"]);
    let o = nandkit(&["mount", s(&img), s(&dir.path().join("nowhere"))]);
    assert_fails(&o, 1, &["mount point"]);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let o = nandkit(&["mount", s(&img), s(&mnt), "-o", "bogus"]);
    assert_fails(&o, 1, &["unknown mount option -o bogus"]);
    let o = nandkit(&["mount", s(&img), s(&mnt), "-o", "threads=0"]);
    assert_fails(&o, 1, &["threads=0"]);
    let o = nandkit(&["mount", s(&img), s(&mnt), "--geometry", "tiny"]);
    assert_fails(&o, 1, &["only apply with --create"]);
}

#[test]
fn every_command_has_help_with_examples() {
    for cmd in ["mkfs", "mount", "fsck", "info", "dump"] {
        let o = nandkit(&[cmd, "--help"]);
        assert!(o.status.success(), "{cmd}");
        let text = stdout(&o);
        assert!(
            text.contains("Examples:"),
            "{cmd} --help lacks examples:\n{text}"
        );
        assert!(text.contains(&format!("nandkit {cmd}")), "{cmd}:\n{text}");
    }
}

/// MA: an image of 4 chips formats, checks and mounts through its striped view.
#[test]
fn an_array_image_formats_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("array.img");
    let o = nandkit(&["mkfs", s(&img), "-g", "tiny", "--chips", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("4 chips"), "{}", stdout(&o));
    let o = nandkit(&["fsck", s(&img)]);
    assert!(o.status.success(), "{}", stdout(&o));
    let o = nandkit(&["info", s(&img), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["device"]["geometry"]["chips"], 4, "{v}");
}
