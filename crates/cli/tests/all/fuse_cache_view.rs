//! What a program sees through the kernel's write-back cache (the default) right after
//! the daemon changed something the kernel did not ask it to change, or while written
//! bytes are still in the kernel's cache:
//! - setgid (setuid) cleared by the daemon on a write, fallocate, punch, zero range or
//!   O_DIRECT write by a user outside the file's group shows at once in `stat`, not
//!   after the attribute timeout (xfstests generic/683-685, 355);
//! - the access time a read moved shows at once (generic/003);
//! - a cached file's change time, which the kernel keeps while it writes, is the one the
//!   file has after a remount (generic/003);
//! - SEEK_DATA / SEEK_HOLE count bytes still in the page cache as data.

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::process::Command;
use std::time::Duration;

use crate::common::fuse::*;

/// Runs `script` with `sh -c` as uid and gid 1000 with no other groups.
fn as_other_user(script: &str) -> String {
    let o = Command::new("setpriv")
        .args(["--reuid=1000", "--regid=1000", "--clear-groups", "sh", "-c"])
        .arg(script)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(o.status.success(), "{script}: {}", text(&o.stderr));
    text(&o.stdout)
}

fn can_switch_users(name: &str) -> bool {
    if unsafe_is_root() && have("setpriv") && have("xfs_io") {
        return true;
    }
    assert!(
        std::env::var("CI").ok().as_deref() != Some("true"),
        "{name} needs root, setpriv and xfs_io under CI=true"
    );
    eprintln!("SKIPPED {name}: needs root, setpriv and xfs_io");
    false
}

/// Each change by a user outside the file's group: `stat` right before (so the kernel
/// holds the attributes, fresh for the attribute timeout) and right after, in one script.
#[test]
fn privileges_the_daemon_drops_show_at_once() {
    if !fuse_ready("privileges_the_daemon_drops_show_at_once")
        || !can_switch_users("privileges_the_daemon_drops_show_at_once")
    {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    std::fs::set_permissions(rig.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = rig.mount(&["-o", "allow_other"]);
    std::fs::set_permissions(&rig.mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    // (file, mode before, xfs_io arguments, mode after)
    let cases = [
        ("write", 0o2666, "-c 'pwrite 0 1'", "666"),
        ("falloc", 0o2666, "-c 'falloc 0 8192'", "666"),
        ("punch", 0o2666, "-c 'fpunch 0 2048'", "666"),
        ("zero", 0o2666, "-c 'fzero 0 2048'", "666"),
        ("direct", 0o4666, "-d -c 'pwrite 0 4096'", "666"),
    ];
    for (name, mode, io, want) in cases {
        let p = rig.path(name);
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        let f = s(&p);
        let out = as_other_user(&format!(
            "stat -c %a {f} && xfs_io {io} {f} >/dev/null && stat -c %a {f}"
        ));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], format!("{mode:o}"), "{name}: before");
        assert_eq!(lines[1], want, "{name}: mode right after `xfs_io {io}`");
    }
    m.unmount();
    rig.fsck_clean();
}

/// An open for reading counts as the access (the kernel serves most reads from its cache,
/// so the daemon moves the access time at open; relatime: the time was not after the last
/// change), and `stat` right after the read shows the moved time, not the kernel's copy
/// (generic/003 saw the old time until the attribute timeout passed). Run as a shell
/// script: coreutils' `stat` asks only for what it prints, so the kernel answers from its
/// copy while that is fresh (Rust's metadata asks for the birth time too, which FUSE
/// never caches, so it would always see the daemon's).
#[test]
fn the_access_time_a_read_moves_shows_at_once() {
    if !fuse_ready("the_access_time_a_read_moves_shows_at_once") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let p = rig.path("f");
    std::fs::write(&p, b"some bytes").unwrap();
    // A change the kernel takes the attributes back from (the reply to the chmod); the
    // file's pages stay cached, so the read below never reaches the daemon.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    let f = s(&p);
    let before = atime_now(f);
    // At a later tick of the coarse real-time clock the daemon stamps with, so the time
    // can move.
    wait_until("the coarse clock to tick", Duration::from_secs(5), || {
        coarse_now() > before
    });
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("cat {f} >/dev/null && stat -c %.9X {f}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let after = text(&o.stdout);
    assert_ne!(
        after.trim(),
        format!("{}.{:09}", before.0, before.1),
        "atime right after a read"
    );
    m.unmount();
}

/// The access time as coreutils' `stat` sees it.
fn atime_now(f: &str) -> (i64, i64) {
    let o = Command::new("stat")
        .args(["-c", "%.9X", f])
        .output()
        .unwrap();
    let t = text(&o.stdout);
    let (sec, nsec) = t.trim().split_once('.').expect("sec.nsec");
    (sec.parse().unwrap(), nsec.parse().unwrap())
}

/// CLOCK_REALTIME_COARSE as (seconds, nanoseconds), the clock the daemon stamps with.
fn coarse_now() -> (i64, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) },
        0
    );
    (ts.tv_sec, ts.tv_nsec)
}

/// Bytes written and not yet written back (no fsync, no close) are data to SEEK_DATA and
/// SEEK_HOLE; a hole before them is still a hole.
#[test]
fn seek_data_sees_bytes_still_in_the_page_cache() {
    if !fuse_ready("seek_data_sees_bytes_still_in_the_page_cache") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let f = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(rig.path("a"))
        .unwrap();
    f.write_all_at(&[1u8; 10_000], 0).unwrap();
    assert_eq!(seek(&f, 0, libc::SEEK_DATA), Ok(0));
    assert_eq!(seek(&f, 0, libc::SEEK_HOLE), Ok(10_000));
    let g = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(rig.path("b"))
        .unwrap();
    g.write_all_at(&[2u8; 4096], 1 << 20).unwrap();
    assert_eq!(seek(&g, 0, libc::SEEK_DATA), Ok(1 << 20));
    assert_eq!(seek(&g, 0, libc::SEEK_HOLE), Ok(0));
    assert_eq!(seek(&g, 1 << 20, libc::SEEK_HOLE), Ok((1 << 20) + 4096));
    drop((f, g));
    m.unmount();
    rig.fsck_clean();
}

/// The kernel keeps a cached file's mtime and ctime itself and sends both with its writes;
/// the daemon stored the mtime but stamped ctime with its own clock, so `stat` showed
/// another ctime after a remount (generic/003: "change time has changed for file1 after
/// remount").
#[test]
fn a_cached_files_change_time_survives_a_remount() {
    if !fuse_ready("a_cached_files_change_time_survives_a_remount") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let path = rig.path("f");
    let f = std::fs::File::create(&path).unwrap();
    // The write lands at a later clock tick than the create (the kernel's clock is coarse:
    // a few ms a tick), so the kernel's ctime differs from the one the daemon gave.
    let created = std::time::SystemTime::now();
    while created.elapsed().unwrap_or_default() < Duration::from_millis(30) {
        std::hint::spin_loop();
    }
    f.write_at(b"aaa", 0).unwrap();
    drop(f);
    let times = |p: &std::path::Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
    };
    let before = times(&path);
    m.unmount();
    let m = rig.mount(&[]);
    assert_eq!(times(&path), before, "(mtime, ctime) after a remount");
    m.unmount();
    rig.fsck_clean();
}
