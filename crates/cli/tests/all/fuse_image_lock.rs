//! The image of a live mount, reached by another name: commands refuse at once.

use crate::common::fuse::*;
use crate::common::nandkit;

/// fsck, info and (without root) mount of a hard link to a mounted image say where it is
/// mounted and fail at once (the lock is the file's: before, they took the holder for another nandkit
/// process, waited a minute and said only that).
#[test]
fn a_hard_link_to_a_mounted_image_is_refused_at_once() {
    if !fuse_ready("a_hard_link_to_a_mounted_image_is_refused_at_once") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let link = rig.dir.path().join("other-name.img");
    std::fs::hard_link(&rig.img, &link).unwrap();
    let mnt2 = rig.dir.path().join("mnt2");
    std::fs::create_dir(&mnt2).unwrap();
    let mut refused = vec![vec!["fsck", s(&link)], vec!["info", s(&link)]];
    if unsafe_is_root() {
        // As root a second mount is the same file system there (`fuse_remount.rs`).
        let o = nandkit(&["mount", s(&link), s(&mnt2)]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        std::fs::write(rig.path("seen"), b"both").unwrap();
        assert_eq!(std::fs::read(mnt2.join("seen")).unwrap(), b"both");
        Mounted {
            mnt: mnt2.clone(),
            done: false,
        }
        .unmount();
    } else {
        refused.push(vec!["mount", s(&link), s(&mnt2)]);
    }
    for args in refused {
        let o = nandkit(&args);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains("is mounted on") && err.contains(s(&rig.mnt)),
            "{args:?}: {err}"
        );
    }
    m.unmount();
    rig.fsck_clean();
}

/// The image truncated under a live mount: the daemon says so in its log once and answers
/// EIO (it no longer touches its memory map of the file, which would kill it with
/// SIGBUS), and the mount still unmounts.
#[test]
fn an_image_truncated_under_the_mount_gives_eio_and_a_log_line() {
    if !fuse_ready("an_image_truncated_under_the_mount_gives_eio_and_a_log_line") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let log = rig.dir.path().join("daemon.log");
    let o = nandkit(&["mount", s(&rig.img), s(&rig.mnt), "--log", s(&log)]);
    assert!(o.status.success(), "mount: {}", text(&o.stderr));
    wait_until("the mount", std::time::Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    let m = Mounted {
        mnt: rig.mnt.clone(),
        done: false,
    };
    std::fs::write(rig.path("f"), b"before").unwrap();
    let len = std::fs::metadata(&rig.img).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&rig.img)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    for _ in 0..2 {
        let e = std::fs::write(rig.path("g"), b"after").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.matches("shrank").count(),
        1,
        "the log says it once: {text}"
    );
    m.unmount();
}
