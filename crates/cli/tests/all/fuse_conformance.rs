//! What a conformance suite found on the mount, each as a test through the kernel:
//! - file handles (`name_to_handle_at` / `open_by_handle_at`) that survive the kernel
//!   forgetting the inode, a rename of the parent and a remount, and go stale on delete;
//! - a rewound directory lists what is there now;
//! - setuid, setgid and file capabilities dropped on write, truncate and fallocate by
//!   another user, by today's kernel rules (the daemon applies them itself);
//! - the maximum file size answers EFBIG.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use crate::common::fuse::*;

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// A file handle as `struct file_handle`: bytes, then type, then the opaque handle.
struct Handle {
    buf: Vec<u8>,
}

const MAX_HANDLE: usize = 128;

fn name_to_handle(p: &Path) -> Handle {
    let mut buf = vec![0u8; 8 + MAX_HANDLE];
    buf[0..4].copy_from_slice(&(MAX_HANDLE as u32).to_ne_bytes());
    let mut mount_id: libc::c_int = 0;
    let path = cstr(p);
    // SAFETY: name_to_handle_at with a buffer of the size the header says.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            path.as_ptr(),
            buf.as_mut_ptr(),
            &mut mount_id as *mut libc::c_int,
            0,
        )
    };
    assert_eq!(
        rc,
        0,
        "name_to_handle_at {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    Handle { buf }
}

/// Opens a handle under the mount at `mnt`: the path the kernel finds, or the errno.
fn open_by_handle(mnt: &Path, h: &Handle) -> Result<String, i32> {
    let m = std::fs::File::open(mnt).unwrap();
    use std::os::unix::io::AsRawFd;
    let mut buf = h.buf.clone();
    // SAFETY: open_by_handle_at on a handle buffer name_to_handle_at filled in.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            m.as_raw_fd(),
            buf.as_mut_ptr(),
            libc::O_RDONLY,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap());
    }
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    // SAFETY: closing the descriptor just opened.
    unsafe { libc::close(fd as i32) };
    Ok(path.display().to_string())
}

fn drop_caches() -> bool {
    std::fs::write("/proc/sys/vm/drop_caches", b"3").is_ok()
}

/// Handles of a directory, a subdirectory and a file open after the kernel forgot them,
/// after the top directory was renamed, and after a remount; a deleted one is stale.
#[test]
fn file_handles_survive_eviction_rename_and_remount() {
    if !fuse_ready("file_handles_survive_eviction_rename_and_remount") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    std::fs::create_dir_all(rig.path("d1/d2")).unwrap();
    std::fs::write(rig.path("d1/d2/f"), b"hello").unwrap();
    let names = ["d1", "d1/d2", "d1/d2/f"];
    let handles: Vec<Handle> = names.iter().map(|n| name_to_handle(&rig.path(n))).collect();
    let opened = |mnt: &Path| -> Vec<Result<String, i32>> {
        handles.iter().map(|h| open_by_handle(mnt, h)).collect()
    };
    for (n, r) in names.iter().zip(opened(&rig.mnt)) {
        assert!(r.is_ok(), "{n}: {r:?}");
    }
    if unsafe_is_root() {
        assert!(drop_caches());
        for (n, r) in names.iter().zip(opened(&rig.mnt)) {
            assert!(r.is_ok(), "{n} after drop_caches: {r:?}");
        }
    }
    std::fs::rename(rig.path("d1"), rig.path("moved")).unwrap();
    let r = opened(&rig.mnt);
    assert!(r[0].as_ref().unwrap().ends_with("/moved"), "{:?}", r[0]);
    assert!(r[1].as_ref().unwrap().ends_with("/moved/d2"), "{:?}", r[1]);
    assert!(r[2].is_ok(), "{:?}", r[2]);
    m.unmount();
    let m = rig.mount(&[]);
    let r = opened(&rig.mnt);
    assert!(
        r[1].as_ref().unwrap().ends_with("/moved/d2"),
        "after remount: {r:?}"
    );
    assert!(r[2].is_ok(), "after remount: {r:?}");
    std::fs::remove_file(rig.path("moved/d2/f")).unwrap();
    std::fs::remove_dir(rig.path("moved/d2")).unwrap();
    if unsafe_is_root() {
        // A child another test thread forks in the meantime holds copies of this
        // thread's descriptors (those open_by_handle_at gave) until its exec, keeping the
        // kernel's inode alive past one drop_caches: drop again until it is forgotten.
        wait_until(
            "the kernel to forget the deleted inodes",
            std::time::Duration::from_secs(10),
            || {
                assert!(drop_caches());
                let r = opened(&rig.mnt);
                r[1].is_err() && r[2].is_err()
            },
        );
    }
    let r = opened(&rig.mnt);
    assert!(r[0].is_ok(), "{r:?}");
    assert_eq!(r[1], Err(libc::ESTALE), "a deleted directory's handle");
    assert_eq!(r[2], Err(libc::ESTALE), "a deleted file's handle");
    m.unmount();
    rig.fsck_clean();
}

/// Names listed from an open directory stream by readdir(3).
fn list(dir: *mut libc::DIR) -> usize {
    let mut n = 0;
    loop {
        // SAFETY: readdir on a stream opendir returned and not yet closed.
        let e = unsafe { libc::readdir(dir) };
        if e.is_null() {
            return n;
        }
        n += 1;
    }
}

/// After rewinddir a reader sees the directory as it is now: with and without a read
/// before the rewind, 10,000 names created meanwhile all show.
#[test]
fn a_rewound_directory_lists_what_is_there_now() {
    if !fuse_ready("a_rewound_directory_lists_what_is_there_now") {
        return;
    }
    // 20,000 empty files: a header page each.
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "128MiB"]);
    let m = rig.mount(&[]);
    let d = rig.path("d");
    std::fs::create_dir(&d).unwrap();
    let path = cstr(&d);
    for read_first in [false, true] {
        // SAFETY: opendir/rewinddir/closedir on one stream, closed below.
        let dir = unsafe { libc::opendir(path.as_ptr()) };
        assert!(!dir.is_null());
        let before = if read_first { list(dir) } else { 0 };
        let base = if read_first { 10_000 } else { 0 };
        for i in base..base + 10_000 {
            std::fs::File::create(d.join(format!("n{i}"))).unwrap();
        }
        // SAFETY: see above.
        unsafe { libc::rewinddir(dir) };
        let after = list(dir);
        // SAFETY: see above.
        unsafe { libc::closedir(dir) };
        assert_eq!(
            after,
            base + 10_000 + 2,
            "read first: {read_first} (before the rewind: {before})"
        );
    }
    m.unmount();
    rig.fsck_clean();
}

fn as_user(uid: u32, gid: u32, groups: &str, script: &str) -> std::process::Output {
    let mut args = vec![format!("--reuid={uid}"), format!("--regid={gid}")];
    if groups.is_empty() {
        args.push("--clear-groups".into());
    } else {
        args.push(format!("--groups={groups}"));
    }
    Command::new("setpriv")
        .args(&args)
        .args(["sh", "-c", script])
        .current_dir("/")
        .output()
        .unwrap()
}

/// Linux's rules, applied by the daemon: a write, truncate or fallocate by a user without
/// CAP_FSETID clears setuid, and setgid when group-execute is set or the user is not in
/// the file's group; root keeps both; chown clears setuid; every write drops the file
/// capability.
#[test]
fn privileges_drop_on_change_by_another_user() {
    if !fuse_ready("privileges_drop_on_change_by_another_user") {
        return;
    }
    if !unsafe_is_root() || !have("setpriv") || !have("fallocate") {
        assert!(
            std::env::var("CI").ok().as_deref() != Some("true"),
            "needs root, setpriv and fallocate under CI=true"
        );
        eprintln!("SKIPPED privileges_drop_on_change_by_another_user: needs root and setpriv");
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    std::fs::set_permissions(rig.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = rig.mount(&["-o", "allow_other"]);
    std::fs::set_permissions(&rig.mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mode = |n: &str| std::fs::metadata(rig.path(n)).unwrap().mode() & 0o7777;
    // (file, mode, group, writer's groups, command, mode after)
    let cases = [
        ("w-out", 0o6666, 0, "", "echo x >> {f}", 0o0666),
        ("t-out", 0o6666, 0, "", "truncate -s 10 {f}", 0o0666),
        ("f-out", 0o6666, 0, "", "fallocate -l 8192 {f}", 0o0666),
        ("w-in", 0o6666, 2000, "2000", "echo x >> {f}", 0o2666),
        ("t-in", 0o6666, 2000, "2000", "truncate -s 10 {f}", 0o2666),
        (
            "f-in",
            0o6666,
            2000,
            "2000",
            "fallocate -l 8192 {f}",
            0o2666,
        ),
        ("w-gx", 0o6676, 2000, "2000", "echo x >> {f}", 0o0676),
    ];
    for (name, m0, gid, _, _, _) in cases {
        let p = rig.path(name);
        std::fs::write(&p, b"").unwrap();
        std::os::unix::fs::chown(&p, None, Some(gid)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m0)).unwrap();
        assert_eq!(mode(name), m0);
    }
    for (name, m0, _, groups, cmd, want) in cases {
        let f = rig.path(name);
        let o = as_user(1000, 1000, groups, &cmd.replace("{f}", s(&f)));
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        assert_eq!(
            mode(name),
            want,
            "{name}: {m0:o} after `{cmd}`: {:o}",
            mode(name)
        );
    }
    // Root (CAP_FSETID) keeps both.
    let r = rig.path("root");
    std::fs::write(&r, b"").unwrap();
    std::fs::set_permissions(&r, std::fs::Permissions::from_mode(0o6777)).unwrap();
    std::fs::write(&r, b"by root").unwrap();
    assert_eq!(mode("root"), 0o6777);
    // chown clears setuid, and setgid with group-execute.
    std::os::unix::fs::chown(&r, Some(5), Some(5)).unwrap();
    assert_eq!(mode("root"), 0o0777);
    // A write drops the file capability, even root's.
    if have("setfattr") && have("getfattr") {
        let c = rig.path("cap");
        std::fs::write(&c, b"").unwrap();
        let o = Command::new("setfattr")
            .args([
                "-n",
                "security.capability",
                "-v",
                "0sAQAAAgAgAAAAAAAAAAAAAAAAAAA=",
            ])
            .arg(&c)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        std::fs::write(&c, b"changed").unwrap();
        let o = Command::new("getfattr")
            .args(["-n", "security.capability"])
            .arg(&c)
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "the capability stayed: {}",
            text(&o.stdout)
        );
    }
    m.unmount();
    let m = rig.mount(&[]);
    assert_eq!(mode("w-out"), 0o0666, "after remount");
    assert_eq!(mode("w-in"), 0o2666, "after remount");
    m.unmount();
    rig.fsck_clean();
}

/// Past the largest file the format holds: EFBIG from truncate and (without the
/// write-back cache, where the kernel passes writes through) from write.
#[test]
fn the_largest_file_answers_efbig() {
    if !fuse_ready("the_largest_file_answers_efbig") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    // The limit `nandkit info` states.
    let mut args = vec!["info", s(&rig.img), "--json"];
    args.extend(rig.nvram_args());
    let o = crate::common::nandkit(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let max = info["max_file_bytes"].as_u64().unwrap();
    if crate::common::fuse::test_geometry().is_none() {
        assert!(max > 1 << 40 && max <= 8 << 40, "{max}");
    } else {
        // A small-page preset: the small tag layout's 128 MiB.
        assert!(max >= 1 << 26, "{max}");
    }
    let m = rig.mount(&["-o", "nowriteback"]);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(rig.path("big"))
        .unwrap();
    use std::os::unix::fs::FileExt;
    for off in [8 << 40, max] {
        let e = f.write_at(b"x", off).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "write at {off}: {e}");
    }
    for len in [max + 1, 8 << 40, 1 << 62] {
        let e = f.set_len(len).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EFBIG),
            "truncate to {len}: {e}"
        );
    }
    // Up to the limit works.
    f.write_at(b"x", max - 1).unwrap();
    assert_eq!(f.metadata().unwrap().len(), max);
    drop(f);
    m.unmount();
    rig.fsck_clean();
}

/// copy_file_range is served by the daemon: data copied exactly (also with the target's
/// dirty pages still in the kernel's cache), short at the source's end, EINVAL for
/// overlapping ranges of one file, EFBIG past the largest file.
#[test]
fn copy_file_range_copies_inside_the_daemon() {
    if !fuse_ready("copy_file_range_copies_inside_the_daemon") {
        return;
    }
    use std::os::unix::io::AsRawFd;
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    std::fs::write(rig.path("src"), &data).unwrap();
    let src = std::fs::File::open(rig.path("src")).unwrap();
    let dst = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(rig.path("dst"))
        .unwrap();
    // Dirty pages in the target, left of and inside the range copied over.
    use std::os::unix::fs::FileExt;
    dst.write_all_at(&[0xEE; 5000], 0).unwrap();
    let copy = |off_in: i64, off_out: i64, len: usize, to: &std::fs::File| -> Result<usize, i32> {
        let (mut a, mut b) = (off_in, off_out);
        // SAFETY: copy_file_range between two descriptors this test owns.
        let n = unsafe {
            libc::copy_file_range(src.as_raw_fd(), &mut a, to.as_raw_fd(), &mut b, len, 0)
        };
        if n < 0 {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap())
        } else {
            Ok(n as usize)
        }
    };
    let mut done = 0;
    while done < data.len() {
        let n = copy(done as i64, 1000 + done as i64, data.len() - done, &dst).unwrap();
        assert!(n > 0);
        done += n;
    }
    assert_eq!(
        copy(data.len() as i64 - 10, 0, 4096, &dst),
        Ok(10),
        "short at the end"
    );
    let mut want = vec![0xEE; 1000];
    want.extend_from_slice(&data);
    want[..10].copy_from_slice(&data[data.len() - 10..]);
    assert_eq!(std::fs::read(rig.path("dst")).unwrap(), want);
    let same = std::fs::OpenOptions::new()
        .write(true)
        .open(rig.path("src"))
        .unwrap();
    assert_eq!(copy(0, 4096, 100_000, &same), Err(libc::EINVAL), "overlap");
    assert_eq!(
        copy(0, 8 << 40, 100, &dst),
        Err(libc::EFBIG),
        "past the limit"
    );
    drop((src, dst, same));
    m.unmount();
    let m = rig.mount(&[]);
    assert_eq!(
        std::fs::read(rig.path("dst")).unwrap(),
        want,
        "after remount"
    );
    m.unmount();
    rig.fsck_clean();
}
