//! Hole punching, zeroing and SEEK_DATA / SEEK_HOLE through the kernel:
//! - `fallocate -p` (PUNCH_HOLE | KEEP_SIZE) reads back zeros at once, through the kernel's
//!   page cache too (the file was read before, so the cache held the old bytes), keeps the
//!   size, and `df` shows the space free at once; PUNCH_HOLE without KEEP_SIZE and other
//!   modes are refused with EOPNOTSUPP;
//! - `fallocate -z` (ZERO_RANGE) zeroes, with and without KEEP_SIZE;
//! - lseek SEEK_DATA / SEEK_HOLE find the punched holes exactly, and ENXIO at the end;
//! - a remount keeps it all, and fsck is clean.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::process::Command;

use crate::common::fuse::*;

/// Chunk bytes of the `tiny` geometry (2 KiB pages).
const C: u64 = 2048;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

fn read_all(path: &std::path::Path) -> Vec<u8> {
    let mut v = Vec::new();
    File::open(path).unwrap().read_to_end(&mut v).unwrap();
    v
}

fn fallocate(f: &File, mode: i32, off: u64, len: u64) -> Result<(), i32> {
    // SAFETY: fallocate(2) on an open descriptor.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, len as i64) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    }
}

/// Free bytes as `statvfs` (what df shows) gives them.
fn free_bytes(path: &std::path::Path) -> u64 {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: statvfs(3) with a valid path and an out struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    st.f_bavail * st.f_frsize
}

fn check_holes(f: &File, size: u64) {
    // Data [0, 2C), hole [2C, 5C) (punched), data [5C, 7C), a zeroed hole [7C, 9C),
    // data [9C, 12C), a zeroed hole to the end of file.
    assert_eq!(seek(f, 0, libc::SEEK_DATA), Ok(0));
    assert_eq!(seek(f, 0, libc::SEEK_HOLE), Ok(2 * C));
    assert_eq!(seek(f, 2 * C + 1, libc::SEEK_HOLE), Ok(2 * C + 1));
    assert_eq!(seek(f, 2 * C, libc::SEEK_DATA), Ok(5 * C));
    assert_eq!(seek(f, 5 * C, libc::SEEK_HOLE), Ok(7 * C));
    assert_eq!(seek(f, 7 * C, libc::SEEK_DATA), Ok(9 * C));
    assert_eq!(seek(f, 9 * C, libc::SEEK_HOLE), Ok(12 * C));
    assert_eq!(seek(f, 12 * C, libc::SEEK_DATA), Err(libc::ENXIO));
    assert_eq!(seek(f, 12 * C + 5, libc::SEEK_HOLE), Ok(12 * C + 5));
    assert_eq!(seek(f, size, libc::SEEK_DATA), Err(libc::ENXIO));
    assert_eq!(seek(f, size, libc::SEEK_HOLE), Err(libc::ENXIO));
}

/// With the default options, the kernel's write-back cache: it writes the range back
/// before the call.
#[test]
fn punch_zero_and_seek_through_the_kernel() {
    if !fuse_ready("punch_zero_and_seek_through_the_kernel") {
        return;
    }
    run(&[]);
}

/// The same with every write reaching the daemon at once.
#[test]
fn punch_zero_and_seek_without_writeback() {
    if !fuse_ready("punch_zero_and_seek_without_writeback") {
        return;
    }
    run(&["-o", "nowriteback"]);
}

fn run(opts: &[&str]) {
    let write_through = opts.contains(&"nowriteback");
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(opts);
    let path = rig.path("f");
    let size = 12 * C + 100;
    let mut want = pattern(size as usize, 3);
    {
        let mut f = File::create(&path).unwrap();
        f.write_all(&want).unwrap();
        f.sync_all().unwrap();
    }
    // Read it once, so the kernel's page cache holds the old bytes (files are opened with
    // FOPEN_KEEP_CACHE: the cache outlives the open).
    assert_eq!(read_all(&path), want);
    let free = free_bytes(&rig.mnt);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut buf = vec![0; size as usize];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, want);
    if test_profile().as_deref() == Some("yaffs1") {
        // YAFFS1's log keeps no write order to record a punch: refused, nothing changed.
        for mode in [
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            libc::FALLOC_FL_ZERO_RANGE,
        ] {
            assert_eq!(fallocate(&f, mode, 2 * C, 3 * C), Err(libc::EOPNOTSUPP));
        }
        drop(f);
        assert_eq!(read_all(&path), want);
        m.unmount();
        rig.fsck_clean();
        return;
    }
    // Punch three whole chunks with libc, then a partial range with util-linux.
    fallocate(
        &f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        2 * C,
        3 * C,
    )
    .unwrap();
    want[(2 * C) as usize..(5 * C) as usize].fill(0);
    let after = free_bytes(&rig.mnt);
    assert!(
        after >= free + 3 * C,
        "df: {free} free before the punch, {after} after"
    );
    if have("fallocate") {
        let o = Command::new("fallocate")
            .args(["-p", "-o", &(C / 2).to_string(), "-l", "100"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(o.status.success(), "fallocate -p: {}", text(&o.stderr));
    } else {
        note("util-linux fallocate missing: libc::fallocate instead");
        fallocate(
            &f,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            C / 2,
            100,
        )
        .unwrap();
    }
    want[(C / 2) as usize..(C / 2 + 100) as usize].fill(0);
    // Zero two chunks and a bit, keeping the size; then past the end, growing the file.
    fallocate(
        &f,
        libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
        7 * C,
        2 * C,
    )
    .unwrap();
    want[(7 * C) as usize..(9 * C) as usize].fill(0);
    let grown = 14 * C;
    if have("fallocate") {
        let o = Command::new("fallocate")
            .args([
                "-z",
                "-o",
                &(12 * C).to_string(),
                "-l",
                &(2 * C).to_string(),
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert!(o.status.success(), "fallocate -z: {}", text(&o.stderr));
    } else {
        fallocate(&f, libc::FALLOC_FL_ZERO_RANGE, 12 * C, 2 * C).unwrap();
    }
    want[(12 * C) as usize..].fill(0);
    want.resize(grown as usize, 0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), grown);
    // Refused modes.
    assert_eq!(
        fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE, 0, C),
        Err(libc::EOPNOTSUPP)
    );
    assert_eq!(
        fallocate(&f, libc::FALLOC_FL_COLLAPSE_RANGE, 0, C),
        Err(libc::EOPNOTSUPP)
    );
    // What reads see: the page cache was dropped for the ranges.
    assert_eq!(read_all(&path), want, "read after punch and zero");
    let mut buf = vec![0; want.len()];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(
        buf, want,
        "read through the descriptor open across the calls"
    );
    // The zeroed range at the end is a hole too: data ends at 12C.
    assert_eq!(seek(&f, 9 * C, libc::SEEK_HOLE), Ok(12 * C));
    assert_eq!(seek(&f, 12 * C, libc::SEEK_DATA), Err(libc::ENXIO));
    // Trim the file back to 12C + 100 for the seek checks.
    f.set_len(size).unwrap();
    want.truncate(size as usize);
    check_holes(&f, size);
    // A write into a punched range.
    let mut g = OpenOptions::new().write(true).open(&path).unwrap();
    g.seek(SeekFrom::Start(3 * C + 10)).unwrap();
    g.write_all(b"back").unwrap();
    g.sync_all().unwrap();
    want[(3 * C + 10) as usize..(3 * C + 14) as usize].copy_from_slice(b"back");
    // With the writeback cache the kernel writes whole pages: the zeros before the write
    // in its page may be written too.
    let page = 4096u64;
    let back = if write_through {
        3 * C
    } else {
        (3 * C + 10) / page * page
    };
    assert_eq!(seek(&f, 2 * C, libc::SEEK_DATA), Ok(back));
    drop((f, g));
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(opts);
    assert_eq!(read_all(&path), want, "after remount");
    let f = File::open(&path).unwrap();
    // (The whole page of the write, chunks 2 and 3, with the writeback cache.)
    let hole = if write_through { 2 * C } else { 4 * C };
    assert_eq!(seek(&f, 0, libc::SEEK_HOLE), Ok(hole));
    assert_eq!(seek(&f, 2 * C, libc::SEEK_DATA), Ok(back));
    assert_eq!(seek(&f, 4 * C, libc::SEEK_DATA), Ok(5 * C));
    assert_eq!(seek(&f, 7 * C, libc::SEEK_DATA), Ok(9 * C));
    assert_eq!(seek(&f, size, libc::SEEK_DATA), Err(libc::ENXIO));
    drop(f);
    m.unmount();
    rig.fsck_clean();
}

/// st_blocks of the file, in bytes.
fn allocated(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// fallocate through the kernel, default options: only the ranges asked are reserved (a
/// second range far past the first does not take the gap, generic/213), `du` counts what
/// is reserved and a write inside it does not grow it (generic/568), a punch gives its
/// part back, and a remount keeps it all.
#[test]
fn fallocate_reserves_what_is_asked_and_du_counts_it() {
    if !fuse_ready("fallocate_reserves_what_is_asked_and_du_counts_it") {
        return;
    }
    if matches!(test_profile().as_deref(), Some("yaffs1" | "mnfs")) {
        note("yaffs1 and mnfs cannot punch: the fallocate reservation test is for the others");
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let path = rig.path("f");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let free0 = free_bytes(&rig.mnt);
    let mib = 1u64 << 20;
    fallocate(&f, 0, 0, mib).unwrap();
    assert_eq!(allocated(&path), mib, "st_blocks after fallocate");
    // Far past the end, with KEEP_SIZE: 64 KiB more, not the 3 MiB between.
    fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 4 * mib, 64 << 10).unwrap();
    assert_eq!(allocated(&path), mib + (64 << 10));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), mib);
    let taken = free0 - free_bytes(&rig.mnt);
    assert!(
        taken < mib + (128 << 10),
        "two ranges of 1 MiB + 64 KiB took {taken} bytes"
    );
    // Writing inside the reservation does not grow what the file holds.
    f.write_all_at(&pattern(8192, 7), 8192).unwrap();
    f.sync_all().unwrap();
    assert_eq!(allocated(&path), mib + (64 << 10), "after a write inside");
    // A punch gives its whole chunks back.
    fallocate(
        &f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        256 << 10,
        256 << 10,
    )
    .unwrap();
    assert_eq!(
        allocated(&path),
        mib - (256 << 10) + (64 << 10),
        "after punch"
    );
    drop(f);
    m.unmount();
    rig.fsck_clean();
    let m = rig.mount(&[]);
    assert_eq!(
        allocated(&path),
        mib - (256 << 10) + (64 << 10),
        "after remount"
    );
    std::fs::remove_file(&path).unwrap();
    m.unmount();
    rig.fsck_clean();
}
