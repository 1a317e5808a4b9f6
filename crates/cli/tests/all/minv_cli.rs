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

/// Once the file system turns itself read-only (damage met in the NVRAM after mounting),
/// closing a descriptor opened for reading succeeds: close() of read-only descriptors
/// failed with EROFS, as FUSE's flush asked the file system to sync the file (issue 59.6).
/// Through FUSE (needs /dev/fuse, as the fuse_* tests).
#[test]
fn closing_a_reader_succeeds_once_damage_turned_the_mount_read_only() {
    use crate::common::fuse::fuse_ready;
    use std::io::{Read, Seek, SeekFrom, Write};
    if !fuse_ready("closing_a_reader_succeeds_once_damage_turned_the_mount_read_only") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, nv) = minv_pair(dir.path(), "d");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mount = || mount_pair(&img, &nv, &mnt);
    let m = mount();
    std::fs::create_dir(mnt.join("d")).unwrap();
    for name in ["a", "d/b", "d/c"] {
        std::fs::write(mnt.join(name), vec![7u8; 5000]).unwrap();
    }
    m.unmount();
    // Where the unmount saved the namespace index (the saved state's word in the log
    // region, after the image's 4 KiB header; the state's room in its second word).
    let image = std::fs::read(&nv).unwrap();
    let word = |at: usize| u64::from_le_bytes(image[at..at + 8].try_into().unwrap()) as usize;
    let state = 4096 + word(4096 + 4096 + 1024 - 16);
    let room = word(state + 8);
    assert!(state > 8192 && room > 80, "no saved state: {state} {room}");
    let m = mount();
    let mut reader = std::fs::File::open(mnt.join("a")).unwrap();
    let mut buf = Vec::new();
    reader.read_to_end(&mut buf).unwrap();
    assert_eq!(buf, vec![7u8; 5000]);
    // Damage the saved index under the running daemon (it maps the image): the objects
    // it has not read yet (d's) fail their checks when a call reaches them.
    let mut f = std::fs::OpenOptions::new().write(true).open(&nv).unwrap();
    f.seek(SeekFrom::Start(state as u64 + 80)).unwrap();
    f.write_all(&vec![0x5a; room - 80]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let met = ["d/b", "d/c"]
        .iter()
        .filter(|n| std::fs::read(mnt.join(n)).is_err())
        .count();
    assert!(met > 0, "the damage was not met");
    // The file system is read-only now: writes fail, a reader's close does not.
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert!(
        matches!(e.raw_os_error(), Some(libc::EROFS) | Some(libc::EUCLEAN)),
        "{e}; the daemon's log: {}",
        std::fs::read_to_string(mnt.with_extension("log")).unwrap_or_default()
    );
    let fd = std::os::fd::IntoRawFd::into_raw_fd(reader);
    let r = unsafe { libc::close(fd) };
    let e = std::io::Error::last_os_error();
    assert_eq!(r, 0, "close of a reader: {e}");
    let again = std::fs::File::open(mnt.join("a")).unwrap();
    drop(again);
    m.unmount();
}

/// `nandkit mount` of a minv pair, once the mount is up.
struct Pair {
    m: crate::common::fuse::Mounted,
    pid: i32,
}

fn mount_pair(img: &Path, nv: &Path, mnt: &Path) -> Pair {
    use crate::common::fuse::{daemon_pid, is_mounted, wait_until, Mounted};
    let log = mnt.with_extension("log");
    let o = nandkit(&["mount", s(img), s(mnt), "--nvram", s(nv), "--log", s(&log)]);
    assert!(o.status.success(), "mount: {}", stderr(&o));
    wait_until("the mount", std::time::Duration::from_secs(20), || {
        is_mounted(mnt)
    });
    Pair {
        m: Mounted {
            mnt: mnt.to_path_buf(),
            done: false,
        },
        pid: daemon_pid(&o),
    }
}

impl Pair {
    /// Unmounts, and waits for the daemon to finish writing the images.
    fn unmount(self) {
        use crate::common::fuse::{gone, wait_until};
        self.m.unmount();
        wait_until(
            "the daemon's exit",
            std::time::Duration::from_secs(20),
            || gone(self.pid),
        );
    }
}

/// An older copy of the NVRAM image put back beside the flash image is refused by fsck,
/// info and mount, saying so; the NVRAM image last used still mounts (issue 59.6: it
/// mounted, fsck was clean, and overwritten files read their old bytes).
#[test]
fn an_older_copy_of_the_nvram_image_is_refused() {
    use crate::common::fuse::fuse_ready;
    if !fuse_ready("an_older_copy_of_the_nvram_image_is_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (img, nv) = minv_pair(dir.path(), "g");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let m = mount_pair(&img, &nv, &mnt);
    std::fs::write(mnt.join("f"), b"old bytes").unwrap();
    std::fs::write(mnt.join("gone"), b"deleted later").unwrap();
    m.unmount();
    let old = dir.path().join("old.nv");
    std::fs::copy(&nv, &old).unwrap();
    let m = mount_pair(&img, &nv, &mnt);
    std::fs::write(mnt.join("f"), b"new bytes").unwrap();
    std::fs::remove_file(mnt.join("gone")).unwrap();
    m.unmount();
    for cmd in ["fsck", "info"] {
        let o = nandkit(&[cmd, s(&img), "--nvram", s(&old)]);
        assert!(!o.status.success(), "{cmd} took the old NVRAM image");
        let e = stderr(&o);
        assert!(e.contains("the NVRAM image is an older copy"), "{cmd}: {e}");
    }
    let o = nandkit(&["mount", s(&img), s(&mnt), "--nvram", s(&old)]);
    assert!(!o.status.success(), "mount took the old NVRAM image");
    assert!(stderr(&o).contains("older copy"), "{}", stderr(&o));
    let o = nandkit(&["fsck", s(&img), "--nvram", s(&nv)]);
    assert!(o.status.success(), "fsck: {}", stderr(&o));
    let m = mount_pair(&img, &nv, &mnt);
    assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"new bytes");
    assert!(!mnt.join("gone").exists());
    m.unmount();
}

/// mkfs reserves the disk space of every file it makes (flash image, sidecar, NVRAM
/// image), so a full host file system is an error at mkfs, not a SIGBUS in mkfs or in a
/// mount's daemon when a page of a sparse image is first written (issue 59.8).
#[test]
fn mkfs_reserves_the_space_of_its_images() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (img, nv) = minv_pair(dir.path(), "r");
    let meta = dir.path().join("r.img.meta");
    for p in [&img, &meta, &nv] {
        let m = std::fs::metadata(p).unwrap();
        assert!(
            m.blocks() * 512 >= m.len(),
            "{}: {} bytes, {} allocated",
            p.display(),
            m.len(),
            m.blocks() * 512
        );
    }
}

/// Sizes past what nandkit can use are refused at once, saying the limit and why, with
/// nothing left behind: `--nvram-size 1TiB` grew mkfs by 32 MB of RAM per GiB until memory
/// ran out (issue 59.8), and a device as large would be written whole.
#[test]
fn mkfs_refuses_sizes_past_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("big.img");
    let nv = dir.path().join("big.nv");
    let base = [
        "mkfs",
        s(&img),
        "--profile",
        "minv",
        "--geometry",
        "smallblock-64m",
        "--nvram",
        s(&nv),
    ];
    for (extra, want) in [
        (["--nvram-size", "1TiB"], "at most 1GiB"),
        (["--nvram-size", "2GiB"], "at most 1GiB"),
        (["--device-size", "1TiB"], "at most 64GiB"),
    ] {
        let mut args = base.to_vec();
        args.extend(extra);
        let start = std::time::Instant::now();
        let o = nandkit(&args);
        assert!(!o.status.success(), "{extra:?} accepted");
        let e = stderr(&o);
        assert!(e.contains(want) && e.contains("RAM"), "{extra:?}: {e}");
        assert!(start.elapsed().as_secs() < 10, "{extra:?}: slow refusal");
        assert_eq!(listing(dir.path()), Vec::<String>::new(), "{extra:?}");
    }
    // The largest NVRAM allowed is made.
    let mut args = base.to_vec();
    args.extend(["--device-size", "4MiB", "--nvram-size", "1GiB"]);
    let o = nandkit(&args);
    assert!(o.status.success(), "{}", stderr(&o));
}
