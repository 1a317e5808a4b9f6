//! POSIX behaviour of the file system API, case by case, on both geometries (tags in the
//! OOB and in band). Every case also survives a remount (clean, and crash where it says).

use crate::common::*;
use nandkit_fs::*;

fn errno<T: std::fmt::Debug>(r: Result<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.errno(),
    }
}

const ENOENT: i32 = 2;
const EPERM: i32 = 1;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const EINVAL: i32 = 22;
const ENOSPC: i32 = 28;
const E2BIG: i32 = 7;
const EMLINK: i32 = 31;
const ENAMETOOLONG: i32 = 36;
const ENOTEMPTY: i32 = 39;
const ENODATA: i32 = 61;
const EOPNOTSUPP: i32 = 95;

fn for_each_dev(mut f: impl FnMut(Dev)) {
    for dev in Dev::ALL {
        f(dev);
    }
}

#[test]
fn holes_read_as_zero() {
    for_each_dev(|dev| {
        let c = dev.chunk() as u64;
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"sparse", file()).unwrap().ino;
        // A hole inside the first chunk, whole chunks of hole, and a hole at the end.
        fs.write(f, 10, b"abc").unwrap();
        fs.write(f, 5 * c + 7, b"xyz").unwrap();
        let mut expect = vec![0u8; (5 * c + 10) as usize];
        expect[10..13].copy_from_slice(b"abc");
        expect[(5 * c + 7) as usize..].copy_from_slice(b"xyz");
        assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{dev:?}");
        fs.setattr(
            f,
            SetAttr {
                size: Some(9 * c + 1),
                ..SetAttr::default()
            },
        )
        .unwrap();
        expect.resize((9 * c + 1) as usize, 0);
        assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{dev:?}");
        // Reads inside the hole, straddling its end, and past the end of the file.
        let mut buf = vec![7u8; 100];
        assert_eq!(fs.read(f, 2 * c, &mut buf).unwrap(), 100);
        assert!(buf.iter().all(|&b| b == 0));
        assert_eq!(fs.read(f, 9 * c + 1, &mut buf).unwrap(), 0);
        assert_eq!(fs.read(f, 100 * c, &mut buf).unwrap(), 0);
        assert_fsck(&mut fs, "holes");
        fs.fsync(f).unwrap();
        let mut fs = clean_remount(fs);
        assert_eq!(
            read_all(&mut fs, f).unwrap(),
            expect,
            "{dev:?} after remount"
        );
        let mut fs = crash_remount(fs);
        assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{dev:?} after crash");
        assert_fsck(&mut fs, "holes after remount");
    });
}

#[test]
fn truncate_shrink_then_grow_reads_zeros() {
    for_each_dev(|dev| {
        let c = dev.chunk();
        for (len, cut) in [
            (3 * c + 100, c + 17),
            (3 * c, 3 * c - 1),
            (c / 2, 5),
            (4 * c, 0),
            (2 * c + 1, 2 * c),
        ] {
            let ctx = format!("{dev:?} len {len} cut {cut}");
            let mut fs = format(dev);
            let f = fs.create(ROOT_INO, b"t", file()).unwrap().ino;
            let data = pattern(len as u64, len);
            fs.write(f, 0, &data).unwrap();
            fs.fsync(f).unwrap();
            let set = |size: usize| SetAttr {
                size: Some(size as u64),
                ..SetAttr::default()
            };
            assert_eq!(fs.setattr(f, set(cut)).unwrap().size, cut as u64);
            assert_eq!(fs.setattr(f, set(len + c)).unwrap().size, (len + c) as u64);
            let mut expect = data[..cut].to_vec();
            expect.resize(len + c, 0);
            assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{ctx}");
            // Grow by a write past the end as well.
            fs.setattr(f, set(cut)).unwrap();
            fs.write(f, (len + 2 * c) as u64, b"end").unwrap();
            expect.truncate(cut);
            expect.resize(len + 2 * c, 0);
            expect.extend_from_slice(b"end");
            assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{ctx}");
            fs.fsync(f).unwrap();
            assert_fsck(&mut fs, &ctx);
            let mut fs = crash_remount(fs);
            assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{ctx} after crash");
            assert_fsck(&mut fs, &ctx);
            let mut fs = clean_remount(fs);
            assert_eq!(read_all(&mut fs, f).unwrap(), expect, "{ctx} after remount");
            // Shrink again, then remount before growing: old bytes must not come back.
            fs.setattr(f, set(1)).unwrap();
            let mut fs = crash_remount(fs);
            fs.setattr(f, set(len + 2 * c + 3)).unwrap();
            let mut e2 = expect[..1].to_vec();
            e2.resize(len + 2 * c + 3, 0);
            assert_eq!(
                read_all(&mut fs, f).unwrap(),
                e2,
                "{ctx} regrow after remount"
            );
            fs.fsync(f).unwrap();
            let mut fs = crash_remount(fs);
            assert_eq!(read_all(&mut fs, f).unwrap(), e2, "{ctx} regrow, crash");
            assert_fsck(&mut fs, &ctx);
        }
    });
}

#[test]
fn truncate_errors() {
    let mut fs = format(Dev::Tiny);
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    let l = fs.create(ROOT_INO, b"l", symlink(b"x")).unwrap().ino;
    let p = fs
        .create(ROOT_INO, b"p", special(Kind::Fifo, 0))
        .unwrap()
        .ino;
    let set = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(errno(fs.setattr(d, set.clone())), EISDIR);
    assert_eq!(errno(fs.setattr(l, set.clone())), EINVAL);
    assert_eq!(errno(fs.setattr(p, set)), EINVAL);
    let mut buf = [0u8; 4];
    assert_eq!(errno(fs.read(d, 0, &mut buf)), EISDIR);
    assert_eq!(errno(fs.write(d, 0, b"x")), EISDIR);
    assert_eq!(errno(fs.write(l, 0, b"x")), EINVAL);
    assert_eq!(errno(fs.write(p, 0, b"x")), EINVAL);
    assert_eq!(errno(fs.getattr(9999)), ENOENT);
    assert_eq!(errno(fs.write(9999, 0, b"x")), ENOENT);
    assert_fsck(&mut fs, "truncate errors");
}

#[test]
fn rename_replace_rules() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let f1 = fs.create(ROOT_INO, b"f1", file()).unwrap().ino;
        let f2 = fs.create(ROOT_INO, b"f2", file()).unwrap().ino;
        let d1 = fs.create(ROOT_INO, b"d1", dir()).unwrap().ino;
        let d2 = fs.create(ROOT_INO, b"d2", dir()).unwrap().ino;
        let d3 = fs.create(ROOT_INO, b"d3", dir()).unwrap().ino;
        let inner = fs.create(d3, b"inner", file()).unwrap().ino;
        fs.write(f1, 0, b"one").unwrap();
        fs.write(f2, 0, b"two").unwrap();
        let r = |fs: &mut Fs, a: &[u8], b: &[u8], m| fs.rename(ROOT_INO, a, ROOT_INO, b, m);
        // file over dir, dir over file, dir over a non-empty dir
        assert_eq!(errno(r(&mut fs, b"f1", b"d1", RenameMode::Replace)), EISDIR);
        assert_eq!(
            errno(r(&mut fs, b"d1", b"f1", RenameMode::Replace)),
            ENOTDIR
        );
        assert_eq!(
            errno(r(&mut fs, b"d1", b"d3", RenameMode::Replace)),
            ENOTEMPTY
        );
        // NoReplace over anything existing; Exchange with a missing destination
        assert_eq!(
            errno(r(&mut fs, b"f1", b"f2", RenameMode::NoReplace)),
            EEXIST
        );
        assert_eq!(
            errno(r(&mut fs, b"f1", b"d1", RenameMode::NoReplace)),
            EEXIST
        );
        assert_eq!(
            errno(r(&mut fs, b"f1", b"nope", RenameMode::Exchange)),
            ENOENT
        );
        assert_eq!(
            errno(r(&mut fs, b"nope", b"f1", RenameMode::Replace)),
            ENOENT
        );
        assert_eq!(
            errno(r(&mut fs, b"nope", b"f1", RenameMode::Exchange)),
            ENOENT
        );
        // a missing parent; a file as parent
        assert_eq!(
            errno(fs.rename(ROOT_INO, b"f1", 9999, b"x", RenameMode::Replace)),
            ENOENT
        );
        assert_eq!(
            errno(fs.rename(ROOT_INO, b"f1", f2, b"x", RenameMode::Replace)),
            ENOTDIR
        );
        // moving a directory into itself or its own subtree
        assert_eq!(
            errno(fs.rename(ROOT_INO, b"d3", d3, b"x", RenameMode::Replace)),
            EINVAL
        );
        let deep = fs.create(d3, b"deep", dir()).unwrap().ino;
        assert_eq!(
            errno(fs.rename(ROOT_INO, b"d3", deep, b"x", RenameMode::NoReplace)),
            EINVAL
        );
        assert_eq!(
            errno(fs.rename(d3, b"deep", ROOT_INO, b"d3", RenameMode::Exchange)),
            EINVAL,
            "exchange would put d3 under its own child"
        );
        fs.rmdir(d3, b"deep").unwrap();
        // Nothing changed so far.
        assert_eq!(fs.lookup(ROOT_INO, b"f1").unwrap().ino, f1);
        assert_eq!(fs.lookup(ROOT_INO, b"d3").unwrap().ino, d3);
        assert_fsck(&mut fs, "after refused renames");

        // file over file: the old target is gone
        r(&mut fs, b"f1", b"f2", RenameMode::Replace).unwrap();
        assert_eq!(errno(fs.lookup(ROOT_INO, b"f1")), ENOENT);
        assert_eq!(fs.lookup(ROOT_INO, b"f2").unwrap().ino, f1);
        assert_eq!(errno(fs.getattr(f2)), ENOENT);
        assert_eq!(read_all(&mut fs, f1).unwrap(), b"one");
        // dir over an empty dir
        r(&mut fs, b"d1", b"d2", RenameMode::Replace).unwrap();
        assert_eq!(fs.lookup(ROOT_INO, b"d2").unwrap().ino, d1);
        assert_eq!(errno(fs.getattr(d2)), ENOENT);
        // rename onto itself is a no-op
        r(&mut fs, b"d2", b"d2", RenameMode::Replace).unwrap();
        r(&mut fs, b"d2", b"d2", RenameMode::Exchange).unwrap();
        // move a file into a directory and a directory under another
        fs.rename(ROOT_INO, b"f2", d1, b"moved", RenameMode::NoReplace)
            .unwrap();
        fs.rename(ROOT_INO, b"d3", d1, b"sub", RenameMode::Replace)
            .unwrap();
        assert_eq!(fs.resolve("/d2/moved").unwrap(), f1);
        assert_eq!(fs.resolve("/d2/sub/inner").unwrap(), inner);
        assert_eq!(fs.getattr(d1).unwrap().nlink, 3);
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
        // exchange a file and a directory
        let g = fs.create(ROOT_INO, b"g", file()).unwrap().ino;
        fs.rename(ROOT_INO, b"g", ROOT_INO, b"d2", RenameMode::Exchange)
            .unwrap();
        assert_eq!(fs.lookup(ROOT_INO, b"g").unwrap().ino, d1);
        assert_eq!(fs.lookup(ROOT_INO, b"d2").unwrap().ino, g);
        // exchange across directories
        fs.rename(d1, b"moved", d3, b"inner", RenameMode::Exchange)
            .unwrap();
        assert_eq!(fs.resolve("/g/moved").unwrap(), inner);
        assert_eq!(fs.resolve("/g/sub/inner").unwrap(), f1);
        assert_fsck(&mut fs, "after renames");
        let expect = dentries(&mut fs).unwrap();
        let mut fs = crash_remount(fs);
        assert_eq!(dentries(&mut fs).unwrap(), expect, "{dev:?} after crash");
        assert_fsck(&mut fs, "after renames, crash");
        let mut fs = clean_remount(fs);
        assert_eq!(dentries(&mut fs).unwrap(), expect, "{dev:?} after remount");
        assert_eq!(read_all(&mut fs, f1).unwrap(), b"one");
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
        assert_fsck(&mut fs, "after renames, remount");
    });
}

#[test]
fn unlink_and_rmdir_rules() {
    let mut fs = format(Dev::Tiny);
    let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
    let f = fs.create(d, b"f", file()).unwrap().ino;
    assert_eq!(errno(fs.unlink(ROOT_INO, b"d")), EISDIR);
    assert_eq!(errno(fs.rmdir(d, b"f")), ENOTDIR);
    assert_eq!(errno(fs.rmdir(ROOT_INO, b"d")), ENOTEMPTY);
    assert_eq!(errno(fs.unlink(ROOT_INO, b"nope")), ENOENT);
    assert_eq!(errno(fs.rmdir(ROOT_INO, b"nope")), ENOENT);
    assert_eq!(errno(fs.unlink(f, b"x")), ENOTDIR);
    assert_eq!(errno(fs.create(f, b"x", file())), ENOTDIR);
    assert_eq!(errno(fs.lookup(f, b"x")), ENOTDIR);
    assert_eq!(errno(fs.readdir(f)), ENOTDIR);
    assert_eq!(errno(fs.create(d, b"f", dir())), EEXIST);
    assert_eq!(errno(fs.create(ROOT_INO, b"", file())), EINVAL);
    assert_eq!(errno(fs.create(ROOT_INO, b".", file())), EINVAL);
    assert_eq!(errno(fs.create(ROOT_INO, b"..", dir())), EINVAL);
    assert_eq!(errno(fs.create(ROOT_INO, b"a/b", file())), EINVAL);
    assert_eq!(errno(fs.create(ROOT_INO, b"a\0b", file())), EINVAL);
    // symlink(2) says ENOENT for an empty target.
    assert_eq!(errno(fs.create(ROOT_INO, b"l", symlink(b""))), ENOENT);
    fs.unlink(d, b"f").unwrap();
    assert_eq!(errno(fs.getattr(f)), ENOENT);
    fs.rmdir(ROOT_INO, b"d").unwrap();
    assert!(fs.readdir(ROOT_INO).unwrap().is_empty());
    assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 2);
    assert_fsck(&mut fs, "unlink rules");
    let mut fs = crash_remount(fs);
    assert!(fs.readdir(ROOT_INO).unwrap().is_empty());
    assert_fsck(&mut fs, "unlink rules after crash");
}

#[test]
fn hard_links_count_and_survive() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        fs.write(f, 0, b"shared").unwrap();
        assert_eq!(fs.link(f, d, b"l1").unwrap().nlink, 2);
        assert_eq!(fs.link(f, ROOT_INO, b"l2").unwrap().nlink, 3);
        assert_eq!(errno(fs.link(f, ROOT_INO, b"l2")), EEXIST);
        assert_eq!(errno(fs.link(d, ROOT_INO, b"dl")), EPERM);
        assert_eq!(errno(fs.link(f, f, b"x")), ENOTDIR);
        assert_eq!(errno(fs.link(9999, ROOT_INO, b"x")), ENOENT);
        // A rename between two names of one object changes nothing.
        fs.rename(ROOT_INO, b"f", d, b"l1", RenameMode::Replace)
            .unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 3);
        assert_eq!(fs.lookup(ROOT_INO, b"f").unwrap().ino, f);
        fs.unlink(ROOT_INO, b"f").unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        assert_eq!(read_all(&mut fs, f).unwrap(), b"shared");
        let mut fs = crash_remount(fs);
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        assert_eq!(fs.resolve("/d/l1").unwrap(), f);
        assert_eq!(fs.resolve("/l2").unwrap(), f);
        fs.write(f, 6, b"!").unwrap();
        fs.unlink(d, b"l1").unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 1);
        fs.fsync(f).unwrap();
        let mut fs = clean_remount(fs);
        assert_eq!(read_all(&mut fs, f).unwrap(), b"shared!");
        assert_eq!(fs.getattr(f).unwrap().nlink, 1);
        fs.unlink(ROOT_INO, b"l2").unwrap();
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert_fsck(&mut fs, "links");
        let mut fs = crash_remount(fs);
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert_eq!(dentries(&mut fs).unwrap().len(), 1);
        assert_fsck(&mut fs, "links after crash");
    });
}

#[test]
fn directory_nlink() {
    let mut fs = format(Dev::Tiny);
    let a = fs.create(ROOT_INO, b"a", dir()).unwrap().ino;
    let b = fs.create(a, b"b", dir()).unwrap().ino;
    fs.create(a, b"c", dir()).unwrap();
    fs.create(a, b"f", file()).unwrap();
    assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
    assert_eq!(fs.getattr(a).unwrap().nlink, 4);
    assert_eq!(fs.getattr(b).unwrap().nlink, 2);
    fs.rename(a, b"b", ROOT_INO, b"b", RenameMode::Replace)
        .unwrap();
    assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 4);
    assert_eq!(fs.getattr(a).unwrap().nlink, 3);
    let mut fs = crash_remount(fs);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 4);
    assert_eq!(fs.getattr(a).unwrap().nlink, 3);
    assert_eq!(fs.parent_of(b).unwrap(), ROOT_INO);
    assert_eq!(fs.resolve("/a/c/../../b").unwrap(), b);
    assert_fsck(&mut fs, "nlink");
}

#[test]
fn symlinks_read_back() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let long = vec![b'x'; 300];
        let targets: [&[u8]; 4] = [b"/etc/passwd", b"../relative/path", b"a", &long];
        let mut inos = Vec::new();
        for (i, t) in targets.iter().enumerate() {
            let a = fs
                .create(ROOT_INO, format!("l{i}").as_bytes(), symlink(t))
                .unwrap();
            assert_eq!(a.kind, Kind::Symlink);
            assert_eq!(a.size, t.len() as u64);
            inos.push(a.ino);
        }
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        assert_eq!(errno(fs.readlink(f)), EINVAL);
        let mut fs = crash_remount(fs);
        for (ino, t) in inos.iter().zip(targets) {
            assert_eq!(fs.readlink(*ino).unwrap(), t);
            assert_eq!(fs.getattr(*ino).unwrap().size, t.len() as u64);
        }
        // A target too long for one header page is refused cleanly.
        let huge = vec![b'y'; 4096];
        assert_eq!(
            errno(fs.create(ROOT_INO, b"huge", symlink(&huge))),
            ENAMETOOLONG
        );
        assert_fsck(&mut fs, "symlinks");
    });
}

#[test]
fn special_files_keep_kind_and_rdev() {
    let mut fs = format(Dev::Small);
    let cases = [
        (Kind::CharDev, 0x0501u64),
        (Kind::BlockDev, (8 << 8) | 1),
        (Kind::Fifo, 0),
        (Kind::Socket, 0),
    ];
    for (i, (kind, rdev)) in cases.iter().enumerate() {
        let a = fs
            .create(ROOT_INO, format!("s{i}").as_bytes(), special(*kind, *rdev))
            .unwrap();
        assert_eq!((a.kind, a.rdev, a.size, a.nlink), (*kind, *rdev, 0, 1));
    }
    let d = fs.create(ROOT_INO, b"dir", dir()).unwrap().ino;
    fs.rename(ROOT_INO, b"s0", d, b"tty", RenameMode::Replace)
        .unwrap();
    let fs = crash_remount(fs);
    let mut fs = clean_remount(fs);
    for (i, (kind, rdev)) in cases.iter().enumerate() {
        let path = if i == 0 {
            "/dir/tty".to_string()
        } else {
            format!("/s{i}")
        };
        let ino = fs.resolve(&path).unwrap();
        let a = fs.getattr(ino).unwrap();
        assert_eq!((a.kind, a.rdev, a.perm), (*kind, *rdev, 0o644), "{path}");
    }
    let kinds: Vec<Kind> = fs
        .readdir(ROOT_INO)
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [Kind::Dir, Kind::BlockDev, Kind::Fifo, Kind::Socket],
        "readdir kinds, sorted by name"
    );
    assert_fsck(&mut fs, "specials");
}

#[test]
fn attributes_persist() {
    let mut fs = format(Dev::Tiny);
    let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    let a = fs
        .setattr(
            f,
            SetAttr {
                perm: Some(0o4751),
                uid: Some(42),
                gid: Some(43),
                // Before 1970, and after 2262 (past what i64 nanoseconds hold).
                atime: Some(Time::from_ns(-5)),
                mtime: Some(Time::new(10_413_792_000, 123_456_789)),
                ..SetAttr::default()
            },
        )
        .unwrap();
    let want = (
        0o4751,
        42,
        43,
        Time::new(-1, 999_999_995),
        Time::new(10_413_792_000, 123_456_789),
    );
    assert_eq!((a.perm, a.uid, a.gid, a.atime, a.mtime), want);
    let mut fs = crash_remount(fs);
    let b = fs.getattr(f).unwrap();
    assert_eq!((b.perm, b.uid, b.gid, b.atime, b.mtime), want);
    assert_eq!(b.ctime, a.ctime);
    assert_fsck(&mut fs, "attrs");
}

#[test]
fn xattr_semantics() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
        assert_eq!(errno(fs.getxattr(f, b"user.a")), ENODATA);
        assert_eq!(errno(fs.removexattr(f, b"user.a")), ENODATA);
        assert_eq!(
            errno(fs.setxattr(f, b"user.a", b"1", XattrMode::Replace)),
            ENODATA
        );
        fs.setxattr(f, b"user.a", b"1", XattrMode::Create).unwrap();
        assert_eq!(
            errno(fs.setxattr(f, b"user.a", b"2", XattrMode::Create)),
            EEXIST
        );
        assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"1");
        fs.setxattr(f, b"user.a", b"22", XattrMode::Replace)
            .unwrap();
        fs.setxattr(f, b"security.selinux", b"ctx", XattrMode::Set)
            .unwrap();
        fs.setxattr(f, b"user.empty", b"", XattrMode::Set).unwrap();
        fs.setxattr(d, b"user.dir", b"yes", XattrMode::Set).unwrap();
        fs.setxattr(ROOT_INO, b"user.root", b"r", XattrMode::Set)
            .unwrap();
        // Of `system.` only the POSIX ACLs are kept (their bytes; the mount reads them).
        assert_eq!(
            errno(fs.setxattr(f, b"system.other", b"x", XattrMode::Set)),
            EOPNOTSUPP
        );
        assert_eq!(
            errno(fs.setxattr(f, b"system.posix_acl_accessx", b"x", XattrMode::Set)),
            EOPNOTSUPP
        );
        fs.setxattr(d, b"system.posix_acl_default", b"acl", XattrMode::Set)
            .unwrap();
        assert_eq!(fs.getxattr(d, b"system.posix_acl_default").unwrap(), b"acl");
        fs.removexattr(d, b"system.posix_acl_default").unwrap();
        assert_eq!(
            errno(fs.setxattr(f, b"user.", b"x", XattrMode::Set)),
            EOPNOTSUPP
        );
        assert_eq!(errno(fs.setxattr(f, b"", b"x", XattrMode::Set)), EINVAL);
        // Past Linux's limit for one value (XATTR_SIZE_MAX): E2BIG.
        let big = vec![1u8; XATTR_SIZE_MAX + 1];
        assert_eq!(
            errno(fs.setxattr(f, b"user.big", &big, XattrMode::Set)),
            E2BIG
        );
        assert_eq!(errno(fs.getxattr(f, b"user.big")), ENODATA);
        let mut fs = crash_remount(fs);
        let mut names = fs.listxattr(f).unwrap();
        names.sort();
        assert_eq!(names, [&b"security.selinux"[..], b"user.a", b"user.empty"]);
        assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"22");
        assert_eq!(fs.getxattr(f, b"user.empty").unwrap(), b"");
        assert_eq!(fs.getxattr(d, b"user.dir").unwrap(), b"yes");
        assert_eq!(fs.getxattr(ROOT_INO, b"user.root").unwrap(), b"r");
        fs.removexattr(f, b"user.a").unwrap();
        assert_eq!(errno(fs.getxattr(f, b"user.a")), ENODATA);
        let mut fs = clean_remount(fs);
        assert_eq!(errno(fs.getxattr(f, b"user.a")), ENODATA);
        assert_eq!(fs.listxattr(f).unwrap().len(), 2);
        assert_fsck(&mut fs, "xattrs");
    });
}

#[test]
fn name_length_limits() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let n255 = vec![b'n'; 255];
        let n256 = vec![b'n'; 256];
        let f = fs.create(ROOT_INO, &n255, file()).unwrap().ino;
        assert_eq!(errno(fs.create(ROOT_INO, &n256, file())), ENAMETOOLONG);
        assert_eq!(errno(fs.create(ROOT_INO, &n256, dir())), ENAMETOOLONG);
        assert_eq!(errno(fs.lookup(ROOT_INO, &n256)), ENAMETOOLONG);
        assert_eq!(errno(fs.link(f, ROOT_INO, &n256)), ENAMETOOLONG);
        assert_eq!(
            errno(fs.rename(ROOT_INO, &n255, ROOT_INO, &n256, RenameMode::Replace)),
            ENAMETOOLONG
        );
        let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
        let mut m255 = vec![b'm'; 255];
        m255[0] = b'M';
        fs.rename(ROOT_INO, &n255, d, &m255, RenameMode::Replace)
            .unwrap();
        // A hard link is an object of its own: a 255-byte name fits even on 512-byte pages.
        let second: &[u8] = &n255;
        fs.link(f, ROOT_INO, second).unwrap();
        let mut fs = crash_remount(fs);
        assert_eq!(fs.lookup(d, &m255).unwrap().ino, f);
        assert_eq!(fs.lookup(ROOT_INO, second).unwrap().ino, f);
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        assert_eq!(fs.statfs().name_max, 255);
        assert_fsck(&mut fs, "names");
    });
}

#[test]
fn unlink_while_open_keeps_data_until_release() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let data = pattern(7, 3 * dev.chunk() + 11);
        fs.write(f, 0, &data).unwrap();
        fs.open(f).unwrap();
        fs.open(f).unwrap();
        fs.unlink(ROOT_INO, b"f").unwrap();
        assert_eq!(errno(fs.lookup(ROOT_INO, b"f")), ENOENT);
        assert_eq!(fs.getattr(f).unwrap().nlink, 0);
        assert_eq!(read_all(&mut fs, f).unwrap(), data);
        // Still writable through the handle; cannot be linked back.
        fs.write(f, 0, b"XY").unwrap();
        assert_eq!(errno(fs.link(f, ROOT_INO, b"back")), ENOENT);
        // The name can be reused meanwhile.
        let g = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        assert_ne!(g, f);
        assert_fsck(&mut fs, "orphan open");
        fs.release(f).unwrap();
        assert_eq!(&read_all(&mut fs, f).unwrap()[..2], b"XY");
        fs.release(f).unwrap();
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert_fsck(&mut fs, "orphan released");
        let mut fs = crash_remount(fs);
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert_eq!(fs.lookup(ROOT_INO, b"f").unwrap().ino, g);
        assert_fsck(&mut fs, "orphan released, crash");
    });
}

#[test]
fn unlink_while_open_then_crash_reclaims() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let data = pattern(9, 20 * dev.chunk());
        fs.write(f, 0, &data).unwrap();
        fs.fsync(f).unwrap();
        let used_with = fs.statfs().used_chunks;
        fs.open(f).unwrap();
        fs.unlink(ROOT_INO, b"f").unwrap();
        assert_eq!(read_all(&mut fs, f).unwrap(), data);
        // Power fails while the orphan is still open.
        let mut fs = crash_remount(fs);
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert!(fs.readdir(ROOT_INO).unwrap().is_empty());
        assert!(
            fs.statfs().used_chunks + 20 <= used_with,
            "the orphan's chunks were not reclaimed: {} used, {} with the file",
            fs.statfs().used_chunks,
            used_with
        );
        assert_fsck(&mut fs, "orphan reclaimed at mount");
        let mut fs = crash_remount(fs);
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert_fsck(&mut fs, "orphan reclaimed, second mount");
        // A clean unmount with an open orphan: same result.
        let g = fs.create(ROOT_INO, b"g", file()).unwrap().ino;
        fs.write(g, 0, b"gone soon").unwrap();
        fs.open(g).unwrap();
        fs.unlink(ROOT_INO, b"g").unwrap();
        let mut fs = clean_remount(fs);
        assert_eq!(errno(fs.getattr(g)), ENOENT);
        assert_fsck(&mut fs, "orphan at clean unmount");
    });
}

#[test]
fn read_only_mount_refuses_writes() {
    let mut fs = format(Dev::Tiny);
    let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    fs.write(f, 0, b"data").unwrap();
    let flash = fs.unmount().unwrap();
    let mut fs = FileSystem::mount(
        flash,
        MountOptions {
            read_only: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(read_all(&mut fs, f).unwrap(), b"data");
    assert_eq!(errno(fs.write(f, 0, b"x")), 30);
    assert_eq!(errno(fs.create(ROOT_INO, b"g", file())), 30);
    assert_eq!(errno(fs.unlink(ROOT_INO, b"f")), 30);
    let mut fs = mount(fs.unmount().unwrap()).unwrap();
    assert_eq!(read_all(&mut fs, f).unwrap(), b"data");
    assert_fsck(&mut fs, "ro");
}

#[test]
fn statfs_tracks_usage() {
    let mut fs = format(Dev::Tiny);
    let s0 = fs.statfs();
    assert_eq!(s0.chunk_bytes, 2048);
    assert!(s0.total_chunks > 0 && s0.free_chunks <= s0.total_chunks);
    let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    fs.write(f, 0, &vec![1u8; 100 * 2048]).unwrap();
    fs.fsync(f).unwrap();
    let s1 = fs.statfs();
    assert!(s1.used_chunks >= s0.used_chunks + 100);
    assert_eq!(s1.objects, s0.objects + 1);
    fs.unlink(ROOT_INO, b"f").unwrap();
    let s2 = fs.statfs();
    assert!(s2.used_chunks < s0.used_chunks + 5, "{s2:?}");
}

/// Objects bigger than a header page: a symlink target of PATH_MAX - 1 bytes, a thousand
/// hard links with 255-byte names, 64 KiB attribute values (and many of them), read back
/// after a crash remount and a clean one.
#[test]
fn objects_bigger_than_a_page() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let target: Vec<u8> = (0..SYMLINK_MAX).map(|i| b'a' + (i % 26) as u8).collect();
        let l = fs.create(ROOT_INO, b"long", symlink(&target)).unwrap();
        assert_eq!(l.size, SYMLINK_MAX as u64);
        let too_long = vec![b'x'; SYMLINK_MAX + 1];
        assert_eq!(
            errno(fs.create(ROOT_INO, b"longer", symlink(&too_long))),
            ENAMETOOLONG
        );
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let d = fs.create(ROOT_INO, b"links", dir()).unwrap().ino;
        let name = |i: u32| {
            let mut n = format!("{i:04}-").into_bytes();
            n.resize(255, b'n');
            n
        };
        let links = 1000;
        for i in 0..links {
            fs.link(f, d, &name(i)).unwrap();
        }
        let value = pattern(9, XATTR_SIZE_MAX);
        fs.setxattr(f, b"user.big", &value, XattrMode::Set).unwrap();
        for k in 0..12u8 {
            let key = format!("user.k{k}").into_bytes();
            fs.setxattr(f, &key, &[k; 200], XattrMode::Create).unwrap();
        }
        fs.setxattr(d, b"trusted.t", &pattern(3, 3000), XattrMode::Set)
            .unwrap();
        let check = |fs: &mut Fs, ctx: &str| {
            assert_eq!(fs.readlink(l.ino).unwrap(), target, "{ctx}");
            let a = fs.getattr(f).unwrap();
            assert_eq!(a.nlink, links + 1, "{ctx}");
            assert_eq!(fs.readdir(d).unwrap().len(), links as usize, "{ctx}");
            for i in (0..links).step_by(97) {
                assert_eq!(fs.lookup(d, &name(i)).unwrap().ino, f, "{ctx}");
            }
            assert_eq!(fs.getxattr(f, b"user.big").unwrap(), value, "{ctx}");
            assert_eq!(fs.listxattr(f).unwrap().len(), 13, "{ctx}");
            assert_eq!(fs.getxattr(f, b"user.k7").unwrap(), [7; 200], "{ctx}");
            assert_eq!(fs.getxattr(d, b"trusted.t").unwrap(), pattern(3, 3000));
            assert_fsck(fs, ctx);
        };
        check(&mut fs, "before remount");
        let mut fs = crash_remount(fs);
        check(&mut fs, "after a crash");
        let mut fs = clean_remount(fs);
        check(&mut fs, "after a clean remount");
        // Replacing the big value and removing the rest, then all of it.
        fs.setxattr(f, b"user.big", b"small", XattrMode::Replace)
            .unwrap();
        for k in 0..12u8 {
            fs.removexattr(f, format!("user.k{k}").as_bytes()).unwrap();
        }
        let mut fs = crash_remount(fs);
        assert_eq!(fs.listxattr(f).unwrap(), [b"user.big".to_vec()]);
        assert_eq!(fs.getxattr(f, b"user.big").unwrap(), b"small");
        fs.removexattr(f, b"user.big").unwrap();
        let mut fs = crash_remount(fs);
        assert!(fs.listxattr(f).unwrap().is_empty());
        assert_fsck(&mut fs, "attributes gone");
    });
}

/// A file whose own name is removed lives on through its hard links, with no write when
/// the last one goes; a link cannot be made past LINK_MAX (checked by count, not made).
#[test]
fn a_file_lives_on_through_its_links() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let data = pattern(4, 3 * dev.chunk() + 5);
        fs.write(f, 0, &data).unwrap();
        fs.setxattr(f, b"user.x", b"1", XattrMode::Set).unwrap();
        fs.link(f, ROOT_INO, b"g").unwrap();
        fs.link(f, ROOT_INO, b"h").unwrap();
        fs.unlink(ROOT_INO, b"f").unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        assert_eq!(fs.lookup(ROOT_INO, b"g").unwrap().ino, f);
        let mut fs = crash_remount(fs);
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        assert_eq!(read_all(&mut fs, f).unwrap(), data);
        assert_eq!(fs.getxattr(f, b"user.x").unwrap(), b"1");
        // Renaming a link over another of the same file does nothing (POSIX).
        fs.rename(ROOT_INO, b"g", ROOT_INO, b"h", RenameMode::Replace)
            .unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 2);
        fs.unlink(ROOT_INO, b"g").unwrap();
        assert_eq!(fs.getattr(f).unwrap().nlink, 1);
        let mut fs = clean_remount(fs);
        assert_eq!(fs.getattr(f).unwrap().nlink, 1);
        assert_fsck(&mut fs, "one link left");
        fs.unlink(ROOT_INO, b"h").unwrap();
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        let mut fs = crash_remount(fs);
        assert_eq!(errno(fs.getattr(f)), ENOENT);
        assert!(fs.readdir(ROOT_INO).unwrap().is_empty());
        assert_eq!(
            fs.statfs().objects,
            0,
            "the file and its attributes are gone"
        );
        assert_fsck(&mut fs, "all links gone");
        // Directories cannot be linked.
        let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
        assert_eq!(errno(fs.link(d, ROOT_INO, b"d2")), EPERM);
        let _ = EMLINK;
    });
}

/// An object whose last name goes while the kernel still knows it (a lookup not yet
/// forgotten, an open descriptor) still answers getattr, with no links; a removed
/// directory takes no new names. Forgetting it deletes it; a crash meanwhile too.
#[test]
fn removed_objects_stay_until_forgotten() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let d = fs.create(ROOT_INO, b"d", dir()).unwrap().ino;
        let e = fs.create(ROOT_INO, b"e", dir()).unwrap().ino;
        let s = fs.create(ROOT_INO, b"s", symlink(b"t")).unwrap().ino;
        let p = fs
            .create(ROOT_INO, b"p", special(Kind::Fifo, 0))
            .unwrap()
            .ino;
        for ino in [d, e, s, p] {
            fs.remember(ino).unwrap();
        }
        // e replaced by d, as rename(d, e) does while e is open.
        fs.rename(ROOT_INO, b"d", ROOT_INO, b"e", RenameMode::Replace)
            .unwrap();
        fs.unlink(ROOT_INO, b"s").unwrap();
        fs.unlink(ROOT_INO, b"p").unwrap();
        for ino in [e, s, p] {
            let a = fs.getattr(ino).unwrap();
            assert_eq!(a.nlink, 0, "object {ino}");
        }
        assert_eq!(fs.readlink(s).unwrap(), b"t");
        assert_eq!(errno(fs.create(e, b"x", file())), ENOENT);
        assert!(fs.readdir(e).unwrap().is_empty());
        assert_fsck(&mut fs, "held");
        fs.forget(e, 1).unwrap();
        fs.forget(s, 1).unwrap();
        assert_eq!(errno(fs.getattr(e)), ENOENT);
        assert_eq!(errno(fs.getattr(s)), ENOENT);
        let mut fs = crash_remount(fs);
        assert_eq!(
            errno(fs.getattr(p)),
            ENOENT,
            "a crash deletes what was held"
        );
        assert_eq!(fs.readdir(ROOT_INO).unwrap().len(), 1);
        assert_fsck(&mut fs, "after held");
    });
}

/// fallocate reserves: statfs counts the room as used, writes into the range succeed on a
/// device that is otherwise full, and the reservation survives a remount.
#[test]
fn fallocate_reserves_room() {
    for_each_dev(|dev| {
        let mut fs = format(dev);
        let c = dev.chunk() as u64;
        let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
        let free = fs.statfs().free_chunks;
        // More than the device holds is refused, also as the first reservation of all.
        assert_eq!(errno(fs.fallocate(f, 0, (free + 1) * c, false)), ENOSPC);
        assert_eq!(errno(fs.fallocate(f, 0, (free + 1) * c, true)), ENOSPC);
        assert_eq!(fs.getattr(f).unwrap().size, 0);
        assert_eq!(fs.statfs().free_chunks, free);
        let want = free / 3;
        fs.fallocate(f, 0, want * c, false).unwrap();
        assert_eq!(fs.getattr(f).unwrap().size, want * c);
        assert!(fs.statfs().free_chunks <= free - want);
        // Writing a reserved hole uses the room set aside for it: the free count stays.
        let before = fs.statfs().free_chunks;
        fs.write(f, 0, &pattern(3, c as usize)).unwrap();
        fs.fsync(f).unwrap();
        assert_eq!(fs.statfs().free_chunks, before);
        let kept = fs.create(ROOT_INO, b"k", file()).unwrap().ino;
        fs.fallocate(kept, 0, c, true).unwrap();
        assert_eq!(fs.getattr(kept).unwrap().size, 0, "KEEP_SIZE");
        // Fill the rest with another file.
        let g = fs.create(ROOT_INO, b"g", file()).unwrap().ino;
        let mut off = 0;
        loop {
            match fs.write(g, off, &pattern(off, 16 * c as usize)) {
                Ok(n) => off += n as u64,
                Err(e) => {
                    assert_eq!(e.errno(), ENOSPC);
                    break;
                }
            }
        }
        assert_eq!(
            errno(fs.fallocate(g, off, 4 * c, false)),
            ENOSPC,
            "no room left to reserve"
        );
        let mut fs = clean_remount(fs);
        // Every reserved chunk can be written, after a remount too.
        let data = pattern(5, (want * c) as usize);
        for (i, piece) in data.chunks(4096).enumerate() {
            fs.write(f, i as u64 * 4096, piece).unwrap();
        }
        fs.write(kept, 0, &pattern(6, c as usize)).unwrap();
        fs.fsync(f).unwrap();
        let mut fs = crash_remount(fs);
        assert_eq!(read_all(&mut fs, f).unwrap(), data);
        assert_eq!(errno(fs.fallocate(ROOT_INO, 0, 1, false)), EISDIR);
        assert_eq!(errno(fs.fallocate(f, u64::MAX - 1, 2, false)), 27);
        assert_fsck(&mut fs, "fallocate");
    });
}
