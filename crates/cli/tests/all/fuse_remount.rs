//! `-o remount` and running as mount(8)'s helper (`mount -t fuse.nandkit`, fstab).

use std::path::Path;
use std::process::Command;

use crate::common::fuse::*;
use crate::common::nandkit;

/// The options /proc/mounts lists for the mount on `mnt`.
fn mount_options(mnt: &Path) -> Vec<String> {
    let mnt = mnt.canonicalize().unwrap();
    let table = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let line = table
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(1) == mnt.to_str())
        .unwrap_or_else(|| panic!("{} not in /proc/mounts", mnt.display()));
    let opts = line.split(' ').nth(3).unwrap();
    opts.split(',').map(str::to_string).collect()
}

/// The command failed, and its message says `why`.
fn refused(o: &std::process::Output, why: &str) {
    assert!(!o.status.success(), "succeeded; expected: {why}");
    assert!(text(&o.stderr).contains(why), "{}", text(&o.stderr));
}

fn remount(rig: &Rig, image: &Path, opts: &str) -> std::process::Output {
    nandkit(&["mount", "-o", opts, s(image), s(&rig.mnt)])
}

/// remount,ro and back to rw while the daemon serves on, as for a disk file system: what
/// was written before (still in the kernel's write-back cache) stays readable and reaches
/// the image, writes meanwhile get EROFS, and what cannot be done is refused with why.
#[test]
fn remount_read_only_and_back() {
    if !fuse_ready("remount_read_only_and_back") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    std::fs::write(rig.path("before"), b"cached, not synced").unwrap();
    if !unsafe_is_root() {
        let o = remount(&rig, &rig.img, "remount,ro");
        refused(&o, "needs root");
        m.unmount();
        rig.fsck_clean();
        return;
    }

    // A file open for writing: the kernel refuses, and the error says why.
    let open = std::fs::OpenOptions::new()
        .append(true)
        .open(rig.path("before"))
        .unwrap();
    let o = remount(&rig, &rig.img, "remount,ro");
    refused(&o, "open for writing");
    drop(open);

    let o = remount(&rig, &rig.img, "remount,ro");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(mount_options(&rig.mnt)[0], "ro");
    assert_eq!(
        std::fs::read(rig.path("before")).unwrap(),
        b"cached, not synced"
    );
    let e = std::fs::write(rig.path("during"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    // What mount(8) passes for `mount -o remount,rw DIR`: the mount's own list back.
    let o = remount(
        &rig,
        &rig.img,
        "rw,nosuid,nodev,relatime,remount,user_id=0,group_id=0,default_permissions",
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(mount_options(&rig.mnt)[0], "rw");
    std::fs::write(rig.path("after"), b"written after rw").unwrap();

    // Refused, each with its reason, and nothing changed.
    let other = rig.dir.path().join("other.img");
    std::fs::copy(&rig.img, &other).unwrap();
    for (opts, image, why) in [
        ("remount,ro,commit=9", &rig.img, "fixed when it started"),
        (
            "remount,noatime",
            &rig.img,
            "access times are kept by the daemon",
        ),
        ("remount,ro,allow_other", &rig.img, "mounted without it"),
        ("remount,ro", &other, "not"),
    ] {
        let o = remount(&rig, image, opts);
        refused(&o, why);
    }
    assert_eq!(mount_options(&rig.mnt)[0], "rw");
    m.unmount();
    refused(&remount(&rig, &rig.img, "remount,ro"), "nothing is mounted");
    rig.fsck_clean();

    // Both files are on the image.
    let m = rig.mount(&["-o", "ro"]);
    assert_eq!(
        std::fs::read(rig.path("before")).unwrap(),
        b"cached, not synced"
    );
    assert_eq!(
        std::fs::read(rig.path("after")).unwrap(),
        b"written after rw"
    );
    // The daemon of a read-only mount opened the image read-only: no way to rw.
    let o = remount(&rig, &rig.img, "remount,rw");
    refused(&o, "mounted with -o ro");
    m.unmount();
    rig.fsck_clean();
}

/// Linked as /sbin/mount.fuse.nandkit, nandkit takes mount(8)'s arguments, says nothing
/// on success, and (as root, like libfuse's mount.fuse3) mounts with suid and dev, which
/// mount(8) leaves out because they are its defaults: a device node then opens.
#[test]
fn answers_mount8_as_its_helper() {
    if !fuse_ready("answers_mount8_as_its_helper") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let helper = rig.dir.path().join("mount.fuse.nandkit");
    std::os::unix::fs::symlink(BIN, &helper).unwrap();
    // mount(8)'s call: `mount.fuse.nandkit IMG DIR -o OPTIONS`.
    let helper_with = |opts: &str| {
        Command::new(&helper)
            .args([s(&rig.img), s(&rig.mnt), "-o", opts])
            .output()
            .unwrap()
    };
    // `mount -t fuse.nandkit -o noauto IMG DIR`.
    let o = helper_with("rw,noauto");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "", "a helper prints nothing on success");
    wait_until("the mount", std::time::Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    let m = Mounted {
        mnt: rig.mnt.clone(),
        done: false,
    };
    let opts = mount_options(&rig.mnt);
    let root = unsafe_is_root();
    assert_eq!(
        opts.iter().any(|o| o == "nosuid" || o == "nodev"),
        !root,
        "{opts:?}"
    );
    if root {
        sh(
            &rig.mnt,
            &[],
            "mknod null c 1 3\necho gone > null\nhead -c 4 null | wc -c | grep -qx 0",
        );
        let o = helper_with("ro,remount");
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(mount_options(&rig.mnt)[0], "ro");
    }
    let o = helper_with("bogus");
    refused(&o, "bogus");
    m.unmount();
    rig.fsck_clean();
}

/// As root, an image mounted a second time shows the same file system there (a bind
/// mount of the first, one daemon), with its own flags; the daemon serves until both are
/// gone. Without root the second mount is refused, saying where the image is mounted.
#[test]
fn a_second_mount_shows_the_same_file_system() {
    if !fuse_ready("a_second_mount_shows_the_same_file_system") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let first = rig.mount(&[]);
    let mnt2 = rig.dir.path().join("mnt2");
    std::fs::create_dir(&mnt2).unwrap();
    let o = nandkit(&["mount", s(&rig.img), s(&mnt2), "-o", "ro"]);
    if !unsafe_is_root() {
        refused(&o, "is mounted on");
        first.unmount();
        rig.fsck_clean();
        return;
    }
    assert!(o.status.success(), "{}", text(&o.stderr));
    let second = Mounted {
        mnt: mnt2.clone(),
        done: false,
    };
    assert_eq!(mount_options(&mnt2)[0], "ro");
    assert_eq!(mount_options(&rig.mnt)[0], "rw");
    std::fs::write(rig.path("shared"), b"one file system").unwrap();
    assert_eq!(
        std::fs::read(mnt2.join("shared")).unwrap(),
        b"one file system"
    );
    let e = std::fs::write(mnt2.join("no"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    // The first mount goes; the daemon serves the second until it goes too.
    first.unmount();
    assert_eq!(
        std::fs::read(mnt2.join("shared")).unwrap(),
        b"one file system"
    );
    let o = nandkit(&["fsck", s(&rig.img)]);
    assert!(text(&o.stderr).contains(s(&mnt2)), "{}", text(&o.stderr));
    second.unmount();
    rig.fsck_clean();
}
