//! The default write-back cache and its guard against a filling device (see the daemon's
//! `mount::space_guard` and `mount::gate`): the kernel may hold only a bounded amount
//! dirty, a file opened for writing on a nearly full device writes through (ENOSPC at
//! write(2), not at close), a file opened earlier asks at each write(2) near the end, so
//! every byte write(2) accepted is stored, and readers see what is stored throughout.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::common::fuse::*;

const MIB: u64 = 1 << 20;

/// The mount's backing-device settings directory (/sys/class/bdi/MAJOR:MINOR).
fn bdi_dir(mnt: &Path) -> PathBuf {
    let want = mnt.canonicalize().unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dev = info
        .lines()
        .rev()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 4 && Path::new(f[4]) == want).then(|| f[2].to_string())
        })
        .expect("the mount in mountinfo");
    Path::new("/sys/class/bdi").join(dev)
}

fn bdi_value(mnt: &Path, file: &str) -> u64 {
    std::fs::read_to_string(bdi_dir(mnt).join(file))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// (bytes in all, bytes free) as df sees them.
fn space(mnt: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(s(mnt)).unwrap();
    // SAFETY: statvfs into a zeroed struct with a valid path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)
}

/// Within 2% (the kernel keeps the limit as a fraction of its own, so bytes round).
fn near(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= b / 50
}

/// Fills the device through files opened one after another, 1 MiB each written in 64 KiB
/// calls and closed. Returns where the first error came from ("write" or "close"), and
/// how many bytes each file holds by the writer's account.
fn fill(dir: &Path) -> (&'static str, Vec<(PathBuf, u64)>) {
    let chunk = vec![0x5a_u8; 64 << 10];
    let mut files = Vec::new();
    for i in 0.. {
        let p = dir.join(format!("fill-{i}"));
        let mut f = File::create(&p).unwrap();
        let mut written = 0;
        for _ in 0..16 {
            match f.write(&chunk) {
                Ok(n) => written += n as u64,
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "write: {e}");
                    files.push((p, written));
                    return ("write", files);
                }
            }
        }
        // close(2) reports what the write-back of the file's pages met.
        let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
        // SAFETY: closing a descriptor we own.
        if unsafe { libc::close(fd) } != 0 {
            files.push((p, written));
            return ("close", files);
        }
        files.push((p, written));
    }
    unreachable!()
}

/// The guard, step by step, on a 64 MiB device: the kernel's dirty limit is the bound
/// (an eighth of the file system), the device fills through short opens and the error
/// comes from write(2), a file opened early keeps its cache, and what readers see
/// (cached, uncached, after a remount) is what is stored.
#[test]
fn a_filling_device_turns_the_cache_into_write_through() {
    if !fuse_ready("a_filling_device_turns_the_cache_into_write_through") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let m = rig.mount(&[]);
    let capacity = space(&rig.mnt).0;
    let bound = (capacity / 8).clamp(MIB, 256 * MIB);
    let root = unsafe_is_root();
    if root {
        assert_eq!(bdi_value(&rig.mnt, "strict_limit"), 1);
        let limit = bdi_value(&rig.mnt, "max_bytes");
        assert!(near(limit, bound), "dirty limit {limit}, bound {bound}");
    } else {
        note("not root: the kernel's own dirty limit applies, not checked");
    }

    // A file opened while there is room, kept open: it writes to the page cache.
    let mut early = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(rig.path("early"))
        .unwrap();
    early.write_all(b"written early").unwrap();

    let (from, files) = fill(&rig.mnt);
    assert_eq!(
        from, "write",
        "on a nearly full device write(2) itself must say ENOSPC"
    );
    assert!(space(&rig.mnt).1 < bound, "the device filled");
    // The early writer's few bytes fit in the slack kept beyond the bound.
    early.sync_all().unwrap();
    drop(early);

    // What readers see: sizes are what each writer was told, through the cache, after
    // dropping it, and after a remount.
    let check = |when: &str| {
        for (p, written) in &files {
            let data = std::fs::read(p).unwrap();
            assert_eq!(data.len() as u64, *written, "{when}: {}", p.display());
            assert!(data.iter().all(|&b| b == 0x5a), "{when}: {}", p.display());
        }
        assert_eq!(std::fs::read(rig.path("early")).unwrap(), b"written early");
    };
    check("cached");
    if root {
        std::fs::write("/proc/sys/vm/drop_caches", b"3").unwrap();
        check("uncached");
    }

    // Room again after a delete: a new file writes through the cache as before.
    for (p, _) in &files {
        std::fs::remove_file(p).unwrap();
    }
    let mut f = File::create(rig.path("after")).unwrap();
    f.write_all(&vec![1u8; 64 << 10]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(&["-o", "ro"]);
    assert_eq!(std::fs::read(rig.path("early")).unwrap(), b"written early");
    assert_eq!(
        std::fs::read(rig.path("after")).unwrap(),
        vec![1u8; 64 << 10]
    );
    m.unmount();
}

/// `-o dirty_limit=` sets the bound (as root), and a bad value is refused before mounting.
#[test]
fn dirty_limit_is_set_and_checked() {
    if !fuse_ready("dirty_limit_is_set_and_checked") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let o = crate::common::nandkit(&["mount", s(&rig.img), s(&rig.mnt), "-o", "dirty_limit=lots"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("dirty_limit=lots"),
        "{}",
        text(&o.stderr)
    );
    assert!(!is_mounted(&rig.mnt));
    if !unsafe_is_root() {
        note("not root: dirty_limit cannot be set, not checked");
        return;
    }
    let m = rig.mount(&["-o", "dirty_limit=2MiB"]);
    assert!(near(bdi_value(&rig.mnt, "max_bytes"), 2 * MIB));
    // A file written and closed reads back.
    let data = vec![7u8; 3 << 20];
    std::fs::write(rig.path("f"), &data).unwrap();
    assert_eq!(std::fs::read(rig.path("f")).unwrap(), data);
    // One write(2) longer than the device, through an open made with room: the kernel
    // asks the daemon once, before its first byte, and takes the rest into its cache
    // (what `gate` cannot cover), so the device's refusal comes at write-back: fsync
    // reports it, the next write(2) too, and the file holds what was stored and a hole
    // where the refused pages were, through the cache and after.
    let mut big = File::create(rig.path("big")).unwrap();
    big.write_all(&vec![9u8; 100 << 20]).unwrap();
    let e = big.sync_all().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::StorageFull, "{e}");
    assert_eq!(
        big.write(b"more").map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOSPC))
    );
    drop(big);
    let cached = std::fs::read(rig.path("big")).unwrap();
    assert!(cached.contains(&9), "some of it stored");
    assert!(cached.iter().all(|&b| b == 9 || b == 0));
    std::fs::write("/proc/sys/vm/drop_caches", b"3").unwrap();
    assert_eq!(std::fs::read(rig.path("big")).unwrap(), cached, "uncached");
    m.unmount();
    rig.fsck_clean();
}

/// A writer that opened with room to spare and never closes nor syncs: once the device is
/// nearly full write(2) itself says so (ENOSPC), having put nothing beyond what the device
/// holds, and close has nothing left to report. It used to write on forever, every byte
/// accepted, the loss reported only at close (generic/015), and later to stop within
/// the dirty limit beyond the device. The loop is bounded at four times the device, so
/// it cannot hang.
#[test]
fn a_writer_that_never_syncs_hears_enospc_at_write() {
    if !fuse_ready("a_writer_that_never_syncs_hears_enospc_at_write") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "32MiB"]);
    let m = rig.mount(&[]);
    let (total, free) = space(&rig.mnt);
    let bound = bdi_value(&rig.mnt, "max_bytes");
    let mut f = File::create(rig.path("log")).unwrap();
    let chunk = vec![0xa5_u8; 64 << 10];
    let mut accepted = 0u64;
    let err = loop {
        assert!(
            accepted < 4 * total,
            "{accepted} bytes accepted on a {total}-byte device, no error"
        );
        match f.write(&chunk) {
            Ok(n) => accepted += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "write: {err}");
    assert!(
        accepted <= free,
        "{accepted} bytes accepted: {free} free, dirty limit {bound}"
    );
    // Still refused while the device stays full.
    assert_eq!(
        f.write(&chunk).map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOSPC))
    );
    // Nothing write(2) accepted was refused: ENOSPC is told once, at write(2).
    close_ok(f);
    assert_eq!(
        std::fs::metadata(rig.path("log")).unwrap().len(),
        accepted,
        "the size is what write(2) accepted"
    );
    m.unmount();
    rig.fsck_clean();
}

/// close(2), which must succeed.
fn close_ok(f: File) {
    let fd = std::os::fd::IntoRawFd::into_raw_fd(f);
    // SAFETY: closing a descriptor we own.
    let closed = unsafe { libc::close(fd) };
    let why = std::io::Error::last_os_error();
    assert_eq!(closed, 0, "close: {why}");
}

/// The bytes of a file written from offset 0 with its offsets: each 8 bytes at offset
/// `o` hold `o`, so a hole (zeros) or a misplaced piece cannot pass for data.
fn offsets(from: u64, len: usize) -> Vec<u8> {
    (from..from + len as u64)
        .map(|o| (o / 8 * 8).to_le_bytes()[(o % 8) as usize])
        .collect()
}

/// generic/015 on a 32 MiB image, by a writer that opened with room (so it writes through
/// the page cache) and writes 1 MiB at a time, as `dd bs=1M` does, until write(2) says
/// ENOSPC: every byte write(2) accepted is stored. fsync and close then report nothing
/// (ENOSPC is told once, at write(2)); the file's size is the bytes accepted, and they read
/// back as written through the cache, uncached, and after a remount; df shows the device
/// full but for less than one write's margin (the writer was not stopped early); fsck is
/// clean. It used to accept the dirty limit's worth more than the device held, refuse it
/// at write-back, and report ENOSPC at write(2) and again at fsync and close: a 36.7 MB
/// file of which 32.3 MB were stored, the rest a hole.
#[test]
fn every_byte_write_accepted_is_stored_on_a_full_device() {
    if !fuse_ready("every_byte_write_accepted_is_stored_on_a_full_device") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "32MiB"]);
    let m = rig.mount(&[]);
    let total = space(&rig.mnt).0;
    let bound = bdi_value(&rig.mnt, "max_bytes");
    let mut f = File::create(rig.path("fill")).unwrap();
    let mut accepted = 0u64;
    let err = loop {
        assert!(
            accepted < 4 * total,
            "{accepted} bytes accepted on a {total}-byte device, no error"
        );
        match f.write(&offsets(accepted, MIB as usize)) {
            Ok(n) => accepted += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "write: {err}");
    assert_eq!(
        f.write(&offsets(accepted, 4096))
            .map_err(|e| e.raw_os_error()),
        Err(Some(libc::ENOSPC)),
        "still full"
    );
    f.sync_all()
        .expect("fsync after the write(2) that got ENOSPC");
    close_ok(f);
    // One write's margin (see the daemon's `SpaceGuard::margin`): a cached writer is
    // refused only when less than that is left, so df agrees with write(2).
    let margin = (bound / 8).max(MIB) + MIB / 4;
    let free = space(&rig.mnt).1;
    assert!(
        free < margin,
        "{free} bytes free after ENOSPC (margin {margin}): the writer was stopped early"
    );
    let want = offsets(0, accepted as usize);
    let check = |when: &str| {
        let data = std::fs::read(rig.path("fill")).unwrap();
        assert_eq!(data.len() as u64, accepted, "{when}: size");
        if let Some(at) = (0..data.len()).find(|&i| data[i] != want[i]) {
            panic!(
                "{when}: byte {at} of {accepted} is {}, written {}",
                data[at], want[at]
            );
        }
    };
    check("cached");
    if unsafe_is_root() {
        std::fs::write("/proc/sys/vm/drop_caches", b"3").unwrap();
        check("uncached");
    }
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(&["-o", "ro"]);
    check("remounted");
    m.unmount();
}

/// Past the largest file the format holds, under the write-back cache: the kernel takes
/// the first write into its cache (FUSE cannot tell it the largest size: its limit for
/// every FUSE mount is the largest the kernel handles), fsync reports EFBIG, and from
/// then on write(2) through the open is refused with EFBIG too, instead of succeeding
/// with nothing stored.
#[test]
fn a_write_past_the_largest_file_is_refused_once_written_back() {
    if !fuse_ready("a_write_past_the_largest_file_is_refused_once_written_back") {
        return;
    }
    let rig = Rig::new(&["--geometry", "mlc-1g", "--device-size", "64MiB"]);
    let m = rig.mount(&[]);
    let f = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(rig.path("big"))
        .unwrap();
    let far = 1u64 << 60;
    let code = |r: std::io::Result<()>| r.map_err(|e| e.raw_os_error());
    // Cached: nothing to refuse it yet.
    code(std::os::unix::fs::FileExt::write_all_at(&f, b"x", far)).unwrap();
    assert_eq!(code(f.sync_all()), Err(Some(libc::EFBIG)));
    assert_eq!(
        code(std::os::unix::fs::FileExt::write_all_at(&f, b"y", far)),
        Err(Some(libc::EFBIG)),
        "write(2) after the refused write-back"
    );
    drop(f);
    m.unmount();
    rig.fsck_clean();
}
