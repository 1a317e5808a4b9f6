use std::sync::Arc;

use nandkit_flash::{preset, FlashDevice};
use nandkit_fs::*;

fn opts() -> MountOptions {
    MountOptions {
        clock: Arc::new(CountingClock::new(1_000_000_000)),
        ..MountOptions::default()
    }
}

fn file(uid: u32) -> NewObject<'static> {
    NewObject {
        kind: Kind::File,
        perm: 0o644,
        uid,
        gid: 0,
        rdev: 0,
        target: b"",
    }
}

#[test]
fn write_remount_read() {
    let dev = FlashDevice::ram(preset("tiny").unwrap()).unwrap();
    let cfg = FsConfig::profile("yaffs", 64).unwrap();
    let mut fs = FileSystem::format(dev, cfg, opts().clock).unwrap();
    let a = fs.create(ROOT_INO, b"a", file(1)).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31) as u8).collect();
    assert_eq!(fs.write(a.ino, 0, &data).unwrap(), data.len());
    let d = fs
        .create(
            ROOT_INO,
            b"d",
            NewObject {
                kind: Kind::Dir,
                perm: 0o755,
                ..file(0)
            },
        )
        .unwrap();
    let b = fs.create(d.ino, b"b", file(2)).unwrap();
    fs.write(b.ino, 5000, b"hello").unwrap();
    fs.sync().unwrap();
    let report = fs.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
    let dev = fs.into_device();
    let mut fs = FileSystem::mount(dev, opts()).unwrap();
    let report = fs.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
    let a2 = fs.resolve("/a").unwrap();
    let mut buf = vec![0; data.len() + 10];
    let n = fs.read(a2, 0, &mut buf).unwrap();
    assert_eq!(n, data.len());
    assert_eq!(&buf[..n], &data[..]);
    let b2 = fs.resolve("/d/b").unwrap();
    assert_eq!(fs.getattr(b2).unwrap().size, 5005);
    let mut buf = vec![9; 5005];
    fs.read(b2, 0, &mut buf).unwrap();
    assert!(buf[..5000].iter().all(|&x| x == 0));
    assert_eq!(&buf[5000..], b"hello");
    // overwrite many times to force cleaning
    for round in 0..40u32 {
        let chunk: Vec<u8> = vec![round as u8; 200_000];
        fs.write(a2, 0, &chunk).unwrap();
    }
    fs.sync().unwrap();
    assert!(fs.stats().blocks_cleaned > 0);
    let report = fs.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
    let dev = fs.into_device();
    let mut fs = FileSystem::mount(dev, opts()).unwrap();
    let report = fs.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
    let a3 = fs.resolve("/a").unwrap();
    let mut buf = vec![0; 200_000];
    fs.read(a3, 0, &mut buf).unwrap();
    assert!(buf.iter().all(|&x| x == 39));
}

#[test]
fn checkpoint_mount_matches_scan_mount() {
    let dev = FlashDevice::ram(preset("tiny").unwrap()).unwrap();
    let cfg = FsConfig::profile("yaffs", 64).unwrap();
    let mut fs = FileSystem::format(dev, cfg, opts().clock).unwrap();
    let d = fs
        .create(
            ROOT_INO,
            b"dir",
            NewObject {
                kind: Kind::Dir,
                perm: 0o755,
                ..file(0)
            },
        )
        .unwrap();
    for i in 0..50u32 {
        let f = fs
            .create(d.ino, format!("f{i}").as_bytes(), file(i))
            .unwrap();
        fs.write(f.ino, 0, &vec![i as u8; (i as usize) * 300])
            .unwrap();
    }
    fs.unlink(d.ino, b"f7").unwrap();
    let listing = fs.readdir(d.ino).unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = FileSystem::mount(dev, opts()).unwrap();
    assert_eq!(fs.mount_method(), MountMethod::Checkpoint);
    assert!(fs.fsck().is_clean(), "{:?}", fs.fsck().problems);
    assert_eq!(fs.readdir(d.ino).unwrap(), listing);
    let f9 = fs.resolve("/dir/f9").unwrap();
    let mut buf = vec![0; 2700];
    assert_eq!(fs.read(f9, 0, &mut buf).unwrap(), 2700);
    assert!(buf.iter().all(|&b| b == 9));
    // A write erases the checkpoint first; a crash then must scan and agree.
    fs.write(f9, 0, b"new").unwrap();
    fs.fsync(f9).unwrap();
    let dev = fs.into_device();
    let mut fs = FileSystem::mount(dev, opts()).unwrap();
    assert_eq!(fs.mount_method(), MountMethod::Scan);
    assert!(fs.fsck().is_clean(), "{:?}", fs.fsck().problems);
    assert_eq!(fs.readdir(d.ino).unwrap(), listing);
    let mut buf = vec![0; 3];
    fs.read(f9, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"new");
    // Forced scan with a valid checkpoint present, then a crash: the stale checkpoint
    // must not come back.
    let dev = fs.unmount().unwrap();
    let mut fs = FileSystem::mount(
        dev,
        MountOptions {
            force_scan: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(fs.mount_method(), MountMethod::Scan);
    fs.write(f9, 0, b"NEW").unwrap();
    fs.fsync(f9).unwrap();
    let dev = fs.into_device();
    let mut fs = FileSystem::mount(dev, opts()).unwrap();
    assert_eq!(fs.mount_method(), MountMethod::Scan);
    fs.read(f9, 0, &mut buf).unwrap();
    assert_eq!(&buf, b"NEW");
    assert!(fs.fsck().is_clean(), "{:?}", fs.fsck().problems);
}
