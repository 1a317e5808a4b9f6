//! What users of a disk file system expect of the mount, through the kernel:
//! - durability when the daemon dies (SIGKILL; the image is memory-mapped, so what reached
//!   the simulated flash survives): a closed file is on flash, an fsync'd one too, and data
//!   still open is written out within the commit interval;
//! - objects bigger than a page: PATH_MAX symlinks, a thousand long-named hard links, 64 KiB
//!   attribute values; times past 2262;
//! - open objects replaced by a rename still answer fstat (with no links);
//! - access times under relatime and noatime;
//! - new files belong to whoever made them (tested as a user other than root);
//! - on a full device under concurrent writers (write and mmap), what readers see through
//!   the kernel's cache is what is stored.
//!
//! Nothing sleeps a fixed time: waits poll for what they wait for (the daemon's log, its
//! exit), with a bound that only stops a hung test.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::fuse::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// 2300-01-01T00:00:00Z, past what signed 64-bit nanoseconds can hold (2262).
const YEAR_2300: i64 = 10_413_792_000;

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// A mount whose daemon writes its messages to `log`; returns the daemon's pid.
fn mount_logged(rig: &Rig, opts: &[&str], log: &Path) -> (Mounted, i32) {
    let mut args = vec!["mount", s(&rig.img), s(&rig.mnt), "--log", s(log)];
    args.extend(rig.nvram_args());
    args.extend_from_slice(opts);
    let o = crate::common::nandkit(&args);
    assert!(o.status.success(), "mount: {}", text(&o.stderr));
    wait_until("the mount in /proc/mounts", Duration::from_secs(20), || {
        is_mounted(&rig.mnt)
    });
    let pid = daemon_pid(&o);
    (
        Mounted {
            mnt: rig.mnt.clone(),
            done: false,
        },
        pid,
    )
}

/// SIGKILL to the daemon: nothing is flushed, no checkpoint written. The dead mount is
/// detached so the image can be mounted again.
fn kill_daemon(m: Mounted, pid: i32) {
    // SAFETY: kill(2) on a pid we started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    wait_until("the killed daemon to exit", Duration::from_secs(20), || {
        gone(pid)
    });
    let o = Command::new("fusermount3")
        .args(["-u", "-z"])
        .arg(&m.mnt)
        .output()
        .unwrap();
    assert!(o.status.success(), "fusermount3 -uz: {}", text(&o.stderr));
    wait_until("the dead mount to go", Duration::from_secs(20), || {
        !is_mounted(&m.mnt)
    });
    let mut m = m;
    m.done = true;
}

/// Lines of the daemon's log that say a commit wrote something out.
fn commits(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("commit: written out"))
        .count()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

/// The issue's repro, as a test: data closed and synced, then the daemon killed, is there
/// after a remount; so is data still open once a commit has passed; and data fsync'd with
/// the file still open, with commits far away. With the default write-back cache and
/// without it.
#[test]
fn a_killed_daemon_loses_nothing_closed_synced_or_committed() {
    if !fuse_ready("a_killed_daemon_loses_nothing_closed_synced_or_committed") {
        return;
    }
    killed_daemon("");
    killed_daemon(",nowriteback");
}

/// One round of the test above; `extra`: more mount options, after a comma.
fn killed_daemon(extra: &str) {
    let with = |o: &str| format!("{o}{extra}");
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let log = rig.dir.path().join("daemon.log");

    // Closed, then sync(2), then SIGKILL.
    let (m, pid) = mount_logged(&rig, &["-o", &with("commit=3600")], &log);
    let closed = pattern(1, 1000);
    std::fs::write(rig.path("closed.txt"), &closed).unwrap();
    // A batch of small files closed while a big write goes on beside them.
    let mut big = File::create(rig.path("big")).unwrap();
    for i in 0..50u64 {
        big.write_all(&pattern(100 + i, 64 * 1024)).unwrap();
        std::fs::write(
            rig.path(&format!("small-{i}")),
            pattern(i, 1 + i as usize * 37),
        )
        .unwrap();
    }
    // SAFETY: sync(2) has no failure mode.
    unsafe { libc::sync() };
    kill_daemon(m, pid);
    drop(big);

    // Still open, written, then a commit passes: it is on flash too.
    let (m, pid) = mount_logged(&rig, &["-o", &with("commit=1")], &log);
    assert_eq!(std::fs::read(rig.path("closed.txt")).unwrap(), closed);
    for i in 0..50u64 {
        let got = std::fs::read(rig.path(&format!("small-{i}"))).unwrap();
        assert_eq!(got, pattern(i, 1 + i as usize * 37), "small-{i}");
    }
    let open_data = pattern(2, 1000);
    let mut f = File::create(rig.path("open.txt")).unwrap();
    f.write_all(&open_data).unwrap();
    // The commit thread logs while it holds the file system's lock, so a line that
    // appears after the write returned comes from a commit that ran after the write.
    let seen = commits(&log);
    wait_until("a commit after the write", Duration::from_secs(30), || {
        commits(&log) > seen
    });
    kill_daemon(m, pid);
    drop(f);

    // fsync with the file open and no commit to help: fsync itself must write.
    let (m, pid) = mount_logged(&rig, &["-o", &with("commit=3600")], &log);
    assert_eq!(std::fs::read(rig.path("open.txt")).unwrap(), open_data);
    let synced = pattern(3, 5000);
    let mut g = File::create(rig.path("fsynced.txt")).unwrap();
    g.write_all(&synced).unwrap();
    g.sync_all().unwrap();
    kill_daemon(m, pid);
    drop(g);

    let m = rig.mount(&[]);
    assert_eq!(
        std::fs::read(rig.path("fsynced.txt")).unwrap(),
        synced,
        "{extra}"
    );
    assert_eq!(std::fs::read(rig.path("open.txt")).unwrap(), open_data);
    assert_eq!(std::fs::read(rig.path("closed.txt")).unwrap(), closed);
    m.unmount();
    rig.fsck_clean();
}

fn set_xattr(p: &Path, name: &str, value: &[u8]) -> std::io::Result<()> {
    let name = CString::new(name).unwrap();
    // SAFETY: valid C strings and a buffer of the length given.
    let r = unsafe {
        libc::setxattr(
            cstr(p).as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn get_xattr(p: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let name = CString::new(name).unwrap();
    let mut buf = vec![0u8; 70_000];
    // SAFETY: valid C strings and a buffer of the length given.
    let n = unsafe {
        libc::getxattr(
            cstr(p).as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// A 4,095-byte symlink target, 1,000 hard links with 255-byte names, 64 KiB attribute
/// values, and a time in 2300, all through a remount.
#[test]
fn big_objects_and_far_times_survive_a_remount() {
    if !fuse_ready("big_objects_and_far_times_survive_a_remount") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let m = rig.mount(&[]);
    let target: String = (0..4095).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    std::os::unix::fs::symlink(&target, rig.path("long")).unwrap();
    let too_long: String = "x".repeat(4096);
    let e = std::os::unix::fs::symlink(&too_long, rig.path("longer")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG), "{e}");

    std::fs::write(rig.path("f"), b"linked").unwrap();
    std::fs::create_dir(rig.path("links")).unwrap();
    let name = |i: u32| {
        let mut n = format!("{i:04}-");
        n.push_str(&"n".repeat(255 - n.len()));
        n
    };
    for i in 0..1000 {
        std::fs::hard_link(rig.path("f"), rig.path("links").join(name(i))).unwrap();
    }
    let value = pattern(7, 65_536);
    set_xattr(&rig.path("f"), "user.big", &value).unwrap();
    for k in 0..10 {
        set_xattr(&rig.path("f"), &format!("user.k{k}"), &[k as u8; 200]).unwrap();
    }
    let e = set_xattr(&rig.path("f"), "user.huge", &pattern(8, 65_537)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::E2BIG), "{e}");

    std::fs::write(rig.path("future"), b"t").unwrap();
    let o = Command::new("touch")
        .args(["-d", "2300-01-01"])
        .arg(rig.path("future"))
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(o.status.success(), "touch: {}", text(&o.stderr));
    assert_eq!(
        std::fs::metadata(rig.path("future")).unwrap().mtime(),
        YEAR_2300
    );
    m.unmount();
    rig.fsck_clean();

    let m = rig.mount(&[]);
    assert_eq!(
        std::fs::read_link(rig.path("long"))
            .unwrap()
            .as_os_str()
            .len(),
        4095
    );
    assert_eq!(
        std::fs::read_link(rig.path("long"))
            .unwrap()
            .to_str()
            .unwrap(),
        target
    );
    let meta = std::fs::metadata(rig.path("f")).unwrap();
    assert_eq!(meta.nlink(), 1001);
    let mut count = 0;
    for e in std::fs::read_dir(rig.path("links")).unwrap() {
        let e = e.unwrap();
        assert_eq!(e.file_name().len(), 255);
        assert_eq!(e.metadata().unwrap().ino(), meta.ino());
        count += 1;
    }
    assert_eq!(count, 1000);
    assert_eq!(
        std::fs::read(rig.path("links").join(name(999))).unwrap(),
        b"linked"
    );
    assert_eq!(get_xattr(&rig.path("f"), "user.big").unwrap(), value);
    assert_eq!(get_xattr(&rig.path("f"), "user.k9").unwrap(), [9u8; 200]);
    let future = std::fs::metadata(rig.path("future")).unwrap();
    assert_eq!((future.mtime(), future.atime()), (YEAR_2300, YEAR_2300));
    // The file outlives its first name through its links.
    std::fs::remove_file(rig.path("f")).unwrap();
    assert_eq!(
        std::fs::metadata(rig.path("links").join(name(0)))
            .unwrap()
            .nlink(),
        1000
    );
    m.unmount();
    rig.fsck_clean();
}

fn fstat_fd(fd: i32) -> libc::stat {
    // SAFETY: fstat into a zeroed struct on a descriptor we opened.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(
            libc::fstat(fd, &mut st),
            0,
            "fstat: {}",
            std::io::Error::last_os_error()
        );
        st
    }
}

fn open_path(p: &Path) -> i32 {
    // SAFETY: open(2) with a C string; the descriptor is closed by the caller.
    let fd = unsafe { libc::open(cstr(p).as_ptr(), libc::O_PATH | libc::O_NOFOLLOW) };
    assert!(fd >= 0, "open {p:?}: {}", std::io::Error::last_os_error());
    fd
}

/// An open directory, file, symlink or FIFO replaced by rename still answers fstat, with a
/// link count of 0, as on a disk file system.
#[test]
fn open_objects_replaced_by_rename_keep_answering_fstat() {
    if !fuse_ready("open_objects_replaced_by_rename_keep_answering_fstat") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let p = |n: &str| rig.path(n);

    std::fs::create_dir(p("dir1")).unwrap();
    std::fs::create_dir(p("dir2")).unwrap();
    let dir2 = File::open(p("dir2")).unwrap();
    let dir2_ino = dir2.metadata().unwrap().ino();
    std::fs::rename(p("dir1"), p("dir2")).unwrap();
    let st = dir2
        .metadata()
        .expect("fstat of a directory replaced by rename");
    assert_eq!((st.ino(), st.nlink()), (dir2_ino, 0));
    assert!(st.is_dir());

    std::fs::write(p("file1"), b"one").unwrap();
    std::fs::write(p("file2"), b"two").unwrap();
    let mut file2 = File::open(p("file2")).unwrap();
    std::fs::rename(p("file1"), p("file2")).unwrap();
    assert_eq!(file2.metadata().unwrap().nlink(), 0);
    let mut old = String::new();
    file2.read_to_string(&mut old).unwrap();
    assert_eq!(old, "two");
    assert_eq!(std::fs::read(p("file2")).unwrap(), b"one");

    std::os::unix::fs::symlink("a", p("sym1")).unwrap();
    std::os::unix::fs::symlink("b", p("sym2")).unwrap();
    let sym2 = open_path(&p("sym2"));
    std::fs::rename(p("sym1"), p("sym2")).unwrap();
    let st = fstat_fd(sym2);
    assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFLNK);
    assert_eq!(st.st_nlink, 0);

    for n in ["fifo1", "fifo2"] {
        // SAFETY: mkfifo(3) with a C string.
        assert_eq!(unsafe { libc::mkfifo(cstr(&p(n)).as_ptr(), 0o644) }, 0);
    }
    let fifo2 = open_path(&p("fifo2"));
    std::fs::rename(p("fifo1"), p("fifo2")).unwrap();
    let st = fstat_fd(fifo2);
    assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFIFO);
    assert_eq!(st.st_nlink, 0);

    // SAFETY: closing descriptors we opened.
    unsafe {
        libc::close(sym2);
        libc::close(fifo2);
    }
    drop(dir2);
    drop(file2);
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(&[]);
    let mut names: Vec<String> = std::fs::read_dir(&rig.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["dir2", "fifo2", "file2", "sym2"]);
    m.unmount();
}

fn set_times(p: &Path, atime: i64, mtime: i64) {
    let ts = [
        libc::timespec {
            tv_sec: atime,
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: mtime,
            tv_nsec: 0,
        },
    ];
    // SAFETY: utimensat with a C string and two timespecs.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, cstr(p).as_ptr(), ts.as_ptr(), 0) };
    assert_eq!(r, 0, "utimensat: {}", std::io::Error::last_os_error());
}

fn read_file(p: &Path) {
    let mut buf = Vec::new();
    File::open(p).unwrap().read_to_end(&mut buf).unwrap();
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// relatime (the default): a read updates atime when it is not newer than mtime or is a
/// day old, and not otherwise; noatime never; strictatime always.
#[test]
fn access_times_follow_relatime_and_noatime() {
    if !fuse_ready("access_times_follow_relatime_and_noatime") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let f = rig.path("r");
    let m = rig.mount(&[]);
    std::fs::write(&f, b"read me").unwrap();
    let atime = |p: &Path| std::fs::metadata(p).unwrap().atime();
    // atime older than mtime: the next read moves it.
    set_times(&f, 1_000_000_000, 1_500_000_000);
    read_file(&f);
    let a1 = atime(&f);
    assert!(
        a1 >= now_secs() - 3600,
        "relatime: read after a change: {a1}"
    );
    // Newer than mtime and ctime (setting times moved ctime to now) and not a day old:
    // unchanged.
    let now = now_secs();
    set_times(&f, now + 600, 1_500_000_000);
    read_file(&f);
    assert_eq!(atime(&f), now + 600, "relatime: fresh atime kept");
    // A day old: moves again.
    set_times(&f, now - 2 * 86_400, now - 3 * 86_400);
    read_file(&f);
    assert!(atime(&f) >= now - 3600, "relatime: day-old atime");
    // Directories: listing one counts as reading it.
    std::fs::create_dir(rig.path("d")).unwrap();
    set_times(&rig.path("d"), 1_000_000_000, 1_500_000_000);
    let _ = std::fs::read_dir(rig.path("d")).unwrap().count();
    assert!(atime(&rig.path("d")) >= now - 3600, "relatime: readdir");
    m.unmount();
    // The updated atime was written with the header.
    let m = rig.mount(&["-o", "noatime"]);
    assert!(atime(&f) >= now - 3600);
    set_times(&f, 1_000_000_000, 1_500_000_000);
    read_file(&f);
    assert_eq!(atime(&f), 1_000_000_000, "noatime");
    m.unmount();
    let m = rig.mount(&["-o", "strictatime"]);
    set_times(&f, 1_600_000_000, 1_500_000_000);
    read_file(&f);
    assert!(atime(&f) >= now - 3600, "strictatime");
    m.unmount();
    rig.fsck_clean();
}

/// A write moves mtime and ctime; a chmod moves ctime only.
#[test]
fn writes_move_mtime_and_ctime() {
    if !fuse_ready("writes_move_mtime_and_ctime") {
        return;
    }
    // With the write-back cache (the default) the kernel keeps a written file's times;
    // without it the daemon sets them: both must.
    for opts in [&[][..], &["-o", "nowriteback"][..]] {
        write_times(opts);
    }
}

fn write_times(opts: &[&str]) {
    let rig = Rig::new(&["--geometry", "tiny"]);
    let f = rig.path("w");
    let m = rig.mount(opts);
    std::fs::write(&f, b"x").unwrap();
    set_times(&f, 1_000_000_000, 1_000_000_000);
    let before = std::fs::metadata(&f).unwrap();
    let mut h = OpenOptions::new().write(true).open(&f).unwrap();
    h.write_all(b"more").unwrap();
    drop(h);
    let after = std::fs::metadata(&f).unwrap();
    assert!(
        after.mtime() > 1_000_000_000,
        "{opts:?}: write left mtime alone"
    );
    assert!(
        (after.ctime(), after.ctime_nsec()) >= (before.ctime(), before.ctime_nsec()),
        "{opts:?}: ctime went back"
    );
    let mtime = (after.mtime(), after.mtime_nsec());
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let chmodded = std::fs::metadata(&f).unwrap();
    assert_eq!((chmodded.mtime(), chmodded.mtime_nsec()), mtime);
    assert!((chmodded.ctime(), chmodded.ctime_nsec()) >= (after.ctime(), after.ctime_nsec()));
    m.unmount();
    let m = rig.mount(&[]);
    let again = std::fs::metadata(&f).unwrap();
    assert_eq!((again.mtime(), again.mtime_nsec()), mtime);
    assert_eq!(again.mode() & 0o7777, 0o600);
    m.unmount();
}

/// Files, directories, symlinks and FIFOs belong to the user and group who made them, as
/// the kernel passes them (a test as root alone would not see a dropped owner).
#[test]
fn new_objects_belong_to_their_maker() {
    if !fuse_ready("new_objects_belong_to_their_maker") {
        return;
    }
    if !unsafe_is_root() || !have("setpriv") {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("new_objects_belong_to_their_maker needs root and setpriv under CI=true");
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED new_objects_belong_to_their_maker: needs root and setpriv"
        );
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    std::fs::set_permissions(rig.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = rig.mount(&["-o", "allow_other"]);
    std::fs::set_permissions(&rig.mnt, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mnt = s(&rig.mnt);
    let o = Command::new("setpriv")
        .args([
            "--reuid=1000",
            "--regid=1001",
            "--clear-groups",
            "sh",
            "-c",
            &format!(
                "set -e; echo hi > {mnt}/file; mkdir {mnt}/dir; ln -s file {mnt}/sym; \
                 mkfifo {mnt}/fifo"
            ),
        ])
        .current_dir("/")
        .output()
        .unwrap();
    assert!(o.status.success(), "as uid 1000: {}", text(&o.stderr));
    std::fs::write(rig.path("rootfile"), b"r").unwrap();
    let owner = |n: &str| {
        let m = std::fs::symlink_metadata(rig.path(n)).unwrap();
        (m.uid(), m.gid())
    };
    for n in ["file", "dir", "sym", "fifo"] {
        assert_eq!(owner(n), (1000, 1001), "{n}");
    }
    assert_eq!(owner("rootfile"), (0, 0));
    m.unmount();
    let m = rig.mount(&[]);
    for n in ["file", "dir", "sym", "fifo"] {
        assert_eq!(owner(n), (1000, 1001), "{n} after a remount");
    }
    m.unmount();
    rig.fsck_clean();
}

/// Every file under `root`, with its contents, read through the mount.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file() {
                let data = std::fs::read(&p).unwrap();
                out.push((p.strip_prefix(root).unwrap().to_path_buf(), data));
            }
        }
    }
    out.sort();
    out
}

/// One writer: files written with write(2) and with shared mmaps, grown and truncated,
/// until the device keeps refusing.
fn writer(root: PathBuf, id: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(id);
    let mut refusals = 0;
    for i in 0..400 {
        if refusals > 20 {
            break;
        }
        let p = root.join(format!("w{id}-{}", i % 40));
        let len = rng.gen_range(1..256 * 1024usize);
        let data = pattern(id * 1000 + i, len);
        let ok = match rng.gen_range(0..4) {
            0 => mmap_write(&p, &data),
            1 => OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&p)
                .and_then(|f| f.set_len(rng.gen_range(0..len as u64)))
                .is_ok(),
            _ => std::fs::write(&p, &data).is_ok(),
        };
        if !ok {
            refusals += 1;
        }
    }
}

/// Writes `data` into `p` through a shared mapping (written back later by the kernel).
fn mmap_write(p: &Path, data: &[u8]) -> bool {
    let Ok(f) = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(p)
    else {
        return false;
    };
    if f.set_len(data.len() as u64).is_err() {
        return false;
    }
    use std::os::unix::io::AsRawFd;
    // SAFETY: a shared mapping of `data.len()` bytes of a file that long, written within
    // bounds and unmapped before return.
    unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            data.len(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        if at == libc::MAP_FAILED {
            return false;
        }
        std::ptr::copy_nonoverlapping(data.as_ptr(), at.cast::<u8>(), data.len());
        libc::munmap(at, data.len());
    }
    true
}

fn drop_caches() -> bool {
    std::fs::write("/proc/sys/vm/drop_caches", b"3").is_ok()
}

/// Four writers fill a small device (write and mmap): the tree read through the kernel's
/// cache, the tree read after dropping the cache, and the tree after a remount are the
/// same. Run with the default mount (the write-back cache) and without the cache.
#[test]
fn a_full_device_shows_readers_only_what_is_stored() {
    if !fuse_ready("a_full_device_shows_readers_only_what_is_stored") {
        return;
    }
    for opts in [&[][..], &["-o", "nowriteback"][..]] {
        let rig = Rig::new(&["--geometry", "tiny"]);
        let m = rig.mount(opts);
        std::fs::create_dir(rig.path("stress")).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|id| {
                let root = rig.path("stress");
                std::thread::spawn(move || writer(root, id))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let free = Command::new("df")
            .arg("--output=avail")
            .arg(&rig.mnt)
            .output()
            .unwrap();
        // SAFETY: sync(2) has no failure mode. Write-backs refused now must not leave
        // refused bytes in the cache.
        unsafe { libc::sync() };
        let cached = snapshot(&rig.path("stress"));
        let dropped = drop_caches();
        let uncached = snapshot(&rig.path("stress"));
        m.unmount();
        rig.fsck_clean();
        let m = rig.mount(&[]);
        let remounted = snapshot(&rig.path("stress"));
        m.unmount();
        let ctx = format!("{opts:?} (df said {})", text(&free.stdout).trim());
        let differing = |a: &[(PathBuf, Vec<u8>)], b: &[(PathBuf, Vec<u8>)]| {
            a.iter()
                .zip(b)
                .filter(|(x, y)| x != y)
                .map(|(x, y)| {
                    let at = x.1.iter().zip(&y.1).position(|(p, q)| p != q);
                    format!(
                        "{} ({} vs {} bytes, first difference at {at:?})",
                        x.0.display(),
                        x.1.len(),
                        y.1.len()
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(cached.len(), remounted.len(), "{ctx}: file counts");
        assert!(
            cached == remounted,
            "{ctx}: the cached tree differs from the stored one in {:?}",
            differing(&cached, &remounted)
        );
        if dropped {
            assert!(
                uncached == remounted,
                "{ctx}: the tree after drop_caches differs in {:?}",
                differing(&uncached, &remounted)
            );
        }
    }
}

/// The idle cleaner: garbage left by deleted files is reclaimed once the mount has been
/// idle a while, and what was kept reads back the same, through the mount, after a
/// remount, with fsck clean.
#[test]
fn an_idle_mount_cleans_in_the_background() {
    if !fuse_ready("an_idle_mount_cleans_in_the_background") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let log = rig.dir.path().join("daemon.log");
    let (m, _pid) = mount_logged(&rig, &["-o", "idle_clean=0.3,nowriteback"], &log);
    // Files interleaved in the same blocks, three of every four deleted: blocks mostly
    // invalid, each still holding a kept file's pages.
    let mut kept = Vec::new();
    for i in 0..200u64 {
        let data = pattern(1000 + i, 20_000 + (i as usize % 7) * 3_000);
        std::fs::write(rig.path(&format!("f{i}")), &data).unwrap();
        if i % 4 == 0 {
            kept.push((i, data));
        }
    }
    for i in (0..200u64).filter(|i| i % 4 != 0) {
        std::fs::remove_file(rig.path(&format!("f{i}"))).unwrap();
    }
    let reclaimed = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains("idle cleaning:") && l.contains("blocks reclaimed"))
    };
    wait_until(
        "the idle cleaner's report",
        Duration::from_secs(60),
        reclaimed,
    );
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let failures: Vec<&str> = log_text
        .lines()
        .filter(|l| l.contains("idle cleaning:") && !l.contains("blocks reclaimed"))
        .collect();
    assert!(failures.is_empty(), "idle cleaning failed: {failures:?}");
    for (i, data) in &kept {
        assert!(
            std::fs::read(rig.path(&format!("f{i}"))).unwrap() == *data,
            "f{i} after idle cleaning"
        );
    }
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(&[]);
    for (i, data) in &kept {
        assert!(
            std::fs::read(rig.path(&format!("f{i}"))).unwrap() == *data,
            "f{i} after a remount"
        );
    }
    m.unmount();
}
