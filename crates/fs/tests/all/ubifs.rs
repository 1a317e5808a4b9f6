//! The `ubifs` file system (Linux's UBIFS format, nandkit's writer): against a model of a
//! file system through random operations with remounts and power cuts after a sync, with
//! fsck (`ubifs::check`: index, names, data, links, LPT against the main area) after each
//! mount; and a power cut at every flash operation of a workload: the mount succeeds, fsck
//! is clean, and everything synced before the cut reads back.

use std::collections::{BTreeMap, BTreeSet};

#[allow(unused_imports)]
use nandkit_flash::Flash as _;
use nandkit_flash::{preset, FlashDevice, PowerCut};
use nandkit_fs::ubifs::fs::{UbifsFs, UbifsOptions};
use nandkit_fs::ubifs::io::LebIo;
use nandkit_fs::ubifs::media::{Time, ROOT_INO};
use nandkit_fs::ubifs::ops::NewInode;
use nandkit_fs::ubifs::{check, UbifsImage};
use nandkit_fs::FsError;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

type Fs = UbifsFs<FlashDevice>;

/// Per name in the root: the file's bytes and its xattr names.
type Snapshot = BTreeMap<Vec<u8>, (Vec<u8>, Vec<Vec<u8>>)>;

/// A tiny chip (64 LEBs of 128 KiB) with no bit errors and no bad blocks.
fn chip(blocks: u32) -> FlashDevice {
    let mut c = preset("tiny").unwrap();
    c.ecc.rber_fresh = 0.0;
    c.ecc.rber_at_endurance = 0.0;
    c.wear.factory_bad_fraction = 0.0;
    c.geometry.blocks_per_chip = blocks;
    FlashDevice::ram(c).unwrap()
}

fn t(s: u64) -> Time {
    Time { sec: s, nsec: 0 }
}

fn opts() -> UbifsOptions {
    UbifsOptions {
        fanout: 4,
        tnc_max_znodes: 16,
        seed: 7,
    }
}

/// fsck of what is on the device (read as `nandkit ubifs check` reads it).
fn fsck(dev: FlashDevice) -> FlashDevice {
    let io = LebIo::new(dev).unwrap();
    let mut img = UbifsImage::open(io).unwrap_or_else(|e| panic!("open for fsck: {e}"));
    let r = check::check(&mut img).unwrap_or_else(|e| panic!("fsck: {e}"));
    assert!(r.problems.is_empty(), "fsck: {:?}", r.problems);
    img.into_source().dev
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct File {
    data: Vec<u8>,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The model: directories, names (path to file id), files.
#[derive(Clone, Debug, Default)]
struct Model {
    dirs: BTreeSet<String>,
    names: BTreeMap<String, u32>,
    files: BTreeMap<u32, File>,
    next: u32,
}

const DIRS: [&str; 3] = ["", "d0", "d1"];
const NAMES: [&str; 6] = ["a", "b", "c", "long-name-0123456789", "é", "z"];

fn path(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create(usize, usize),
    Mkdir(usize),
    Write(usize, u32, u16, u8),
    Truncate(usize, u32),
    Unlink(usize),
    Rename(usize, usize, usize),
    Link(usize, usize, usize),
    SetXattr(usize, u8, u8),
    RemoveXattr(usize, u8),
    Sync,
    Commit,
    Remount,
    CutAfterSync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..6usize).prop_map(|(d, n)| Op::Create(d, n)),
        1 => (1..3usize).prop_map(Op::Mkdir),
        6 => (0..8usize, 0..40_000u32, 0..9000u16, any::<u8>()).prop_map(|(f, o, l, s)| Op::Write(f, o, l, s)),
        2 => (0..8usize, 0..30_000u32).prop_map(|(f, s)| Op::Truncate(f, s)),
        2 => (0..8usize).prop_map(Op::Unlink),
        2 => (0..8usize, 0..3usize, 0..6usize).prop_map(|(f, d, n)| Op::Rename(f, d, n)),
        1 => (0..8usize, 0..3usize, 0..6usize).prop_map(|(f, d, n)| Op::Link(f, d, n)),
        1 => (0..8usize, 0..3u8, any::<u8>()).prop_map(|(f, k, v)| Op::SetXattr(f, k, v)),
        1 => (0..8usize, 0..3u8).prop_map(|(f, k)| Op::RemoveXattr(f, k)),
        1 => Just(Op::Sync),
        1 => Just(Op::Commit),
        1 => Just(Op::Remount),
        1 => Just(Op::CutAfterSync),
    ]
}

/// The inode a path leads to.
fn resolve(fs: &mut Fs, p: &str) -> Option<u32> {
    let mut at = ROOT_INO;
    for part in p.split('/').filter(|s| !s.is_empty()) {
        at = fs.lookup(at, part.as_bytes()).unwrap()?;
    }
    Some(at)
}

fn dir_inum(fs: &mut Fs, d: &str) -> u32 {
    resolve(fs, d).expect("directory exists")
}

/// Everything the model holds reads back, and nothing else is there.
fn compare(fs: &mut Fs, m: &Model, when: &str) {
    for d in &m.dirs {
        let inum = dir_inum(fs, d);
        let mut got: Vec<String> = fs
            .readdir(inum)
            .unwrap()
            .into_iter()
            .map(|e| String::from_utf8(e.name).unwrap())
            .collect();
        got.sort();
        let mut want: Vec<String> = m
            .names
            .keys()
            .filter(|p| p.rsplit_once('/').map_or("", |(d, _)| d) == d.as_str())
            .map(|p| p.rsplit('/').next().unwrap().to_string())
            .chain(
                m.dirs
                    .iter()
                    .filter(|x| {
                        !x.is_empty() && x.rsplit_once('/').map_or("", |(d, _)| d) == d.as_str()
                    })
                    .cloned(),
            )
            .collect();
        want.sort();
        assert_eq!(got, want, "{when}: directory {d:?}");
    }
    for (p, id) in &m.names {
        let inum = resolve(fs, p).unwrap_or_else(|| panic!("{when}: {p} missing"));
        let f = &m.files[id];
        let st = fs.stat(inum).unwrap();
        assert_eq!(st.size, f.data.len() as u64, "{when}: size of {p}");
        let links = m.names.values().filter(|&&x| x == *id).count() as u32;
        assert_eq!(st.nlink, links, "{when}: links of {p}");
        let got = fs.read(inum, 0, f.data.len() + 10).unwrap();
        assert!(got == f.data, "{when}: bytes of {p}");
        let mut names = fs.list_xattrs(inum).unwrap();
        names.sort();
        assert_eq!(
            names,
            f.xattrs.keys().cloned().collect::<Vec<_>>(),
            "{when}: xattrs of {p}"
        );
        for (k, v) in &f.xattrs {
            assert_eq!(&fs.get_xattr(inum, k).unwrap(), v, "{when}: xattr of {p}");
        }
    }
}

fn remount(fs: Fs, clean: bool) -> Fs {
    let dev = if clean {
        fs.unmount().unwrap()
    } else {
        fs.into_device()
    };
    let dev = fsck(dev);
    UbifsFs::mount(dev, opts(), false).unwrap_or_else(|e| panic!("mount: {e}"))
}

/// The file (by id) the selector picks among the names, with its path.
fn pick(m: &Model, sel: usize) -> Option<(String, u32)> {
    let n = m.names.len();
    (n > 0).then(|| {
        let (p, id) = m.names.iter().nth(sel % n).unwrap();
        (p.clone(), *id)
    })
}

fn run(ops: &[Op]) {
    let mut fs = UbifsFs::format(chip(64), opts(), t(1)).unwrap();
    let mut m = Model::default();
    m.dirs.insert(String::new());
    for (step, o) in ops.iter().enumerate() {
        let now = t(10 + step as u64);
        match o {
            Op::Create(d, n) => {
                let d = DIRS[*d];
                if !m.dirs.contains(d) {
                    continue;
                }
                let p = path(d, NAMES[*n]);
                let di = dir_inum(&mut fs, d);
                let r = fs.mknod(di, NAMES[*n].as_bytes(), NewInode::new(0o100644), now);
                if m.names.contains_key(&p) || m.dirs.contains(&p) {
                    assert!(matches!(r, Err(FsError::Exists)), "{r:?}");
                } else {
                    r.unwrap();
                    m.next += 1;
                    m.names.insert(p, m.next);
                    m.files.insert(m.next, File::default());
                }
            }
            Op::Mkdir(d) => {
                let p = DIRS[*d].to_string();
                let r = fs.mknod(ROOT_INO, p.as_bytes(), NewInode::new(0o040755), now);
                if m.dirs.contains(&p) || m.names.contains_key(&p) {
                    assert!(r.is_err());
                } else {
                    r.unwrap();
                    m.dirs.insert(p);
                }
            }
            Op::Write(f, off, len, seed) => {
                let Some((p, id)) = pick(&m, *f) else {
                    continue;
                };
                let inum = resolve(&mut fs, &p).unwrap();
                let bytes: Vec<u8> = (0..*len as usize)
                    .map(|i| seed.wrapping_add((i as u8).wrapping_mul(7)))
                    .collect();
                fs.write(inum, u64::from(*off), &bytes, now).unwrap();
                let data = &mut m.files.get_mut(&id).unwrap().data;
                let end = *off as usize + bytes.len();
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[*off as usize..end].copy_from_slice(&bytes);
            }
            Op::Truncate(f, size) => {
                let Some((p, id)) = pick(&m, *f) else {
                    continue;
                };
                let inum = resolve(&mut fs, &p).unwrap();
                fs.truncate(inum, u64::from(*size), now).unwrap();
                m.files.get_mut(&id).unwrap().data.resize(*size as usize, 0);
            }
            Op::Unlink(f) => {
                let Some((p, id)) = pick(&m, *f) else {
                    continue;
                };
                let (d, n) = p.rsplit_once('/').unwrap_or(("", &p));
                let di = dir_inum(&mut fs, d);
                fs.remove(di, n.as_bytes(), false, now).unwrap();
                m.names.remove(&p);
                if !m.names.values().any(|&x| x == id) {
                    m.files.remove(&id);
                }
            }
            Op::Rename(f, d, n) | Op::Link(f, d, n) => {
                let Some((p, id)) = pick(&m, *f) else {
                    continue;
                };
                let nd = DIRS[*d];
                if !m.dirs.contains(nd) {
                    continue;
                }
                let np = path(nd, NAMES[*n]);
                let (od, on) = p.rsplit_once('/').unwrap_or(("", &p));
                let odi = dir_inum(&mut fs, od);
                let ndi = dir_inum(&mut fs, nd);
                if m.dirs.contains(&np) {
                    continue;
                }
                if let Op::Link(..) = o {
                    let inum = resolve(&mut fs, &p).unwrap();
                    let r = fs.link(inum, ndi, NAMES[*n].as_bytes(), now);
                    match m.names.entry(np) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            assert!(matches!(r, Err(FsError::Exists)), "{r:?}")
                        }
                        std::collections::btree_map::Entry::Vacant(v) => {
                            r.unwrap();
                            v.insert(id);
                        }
                    }
                } else {
                    fs.rename(odi, on.as_bytes(), ndi, NAMES[*n].as_bytes(), now)
                        .unwrap();
                    // Two names of one file: rename does nothing (POSIX).
                    if np != p && m.names.get(&np) != Some(&id) {
                        if let Some(old) = m.names.insert(np.clone(), id) {
                            if old != id && !m.names.values().any(|&x| x == old) {
                                m.files.remove(&old);
                            }
                        }
                        if m.names.get(&np) == Some(&id) && np != p {
                            m.names.remove(&p);
                        }
                    }
                }
            }
            Op::SetXattr(f, k, v) => {
                let Some((p, id)) = pick(&m, *f) else {
                    continue;
                };
                let inum = resolve(&mut fs, &p).unwrap();
                let name = format!("user.k{k}").into_bytes();
                let value = vec![*v; *v as usize % 50];
                fs.set_xattr(inum, &name, &value, now).unwrap();
                m.files.get_mut(&id).unwrap().xattrs.insert(name, value);
            }
            Op::RemoveXattr(f, k) => {
                let Some((p, id)) = pick(&m, *f) else {
                    continue;
                };
                let inum = resolve(&mut fs, &p).unwrap();
                let name = format!("user.k{k}").into_bytes();
                let r = fs.remove_xattr(inum, &name, now);
                if m.files[&id].xattrs.contains_key(&name) {
                    r.unwrap();
                    m.files.get_mut(&id).unwrap().xattrs.remove(&name);
                } else {
                    assert!(matches!(r, Err(FsError::NoData)), "{r:?}");
                }
            }
            Op::Sync => fs.sync().unwrap(),
            Op::Commit => fs.commit().unwrap(),
            Op::Remount => fs = remount(fs, true),
            Op::CutAfterSync => {
                fs.sync().unwrap();
                fs = remount(fs, false);
            }
        }
        compare(&mut fs, &m, &format!("after step {step} {o:?}"));
    }
    let dev = fsck(fs.unmount().unwrap());
    let mut fs = UbifsFs::mount(dev, opts(), true).unwrap();
    compare(&mut fs, &m, "at the end, mounted read-only");
}

/// Random operations against the model, with remounts and cuts after a sync; fsck after
/// each mount.
#[test]
fn ubifs_against_a_model() {
    let config = Config {
        cases: if std::env::var_os("NANDKIT_LONG").is_some() {
            256
        } else {
            64
        },
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[61; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&proptest::collection::vec(op(), 1..120), |ops| {
        run(&ops);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Enough data to fill the volume several times over, overwritten and deleted: garbage
/// collection and commits keep it going; a full volume answers ENOSPC at the write, and
/// every byte written before reads back after a remount.
#[test]
fn ubifs_garbage_collects_and_fills() {
    let mut fs = UbifsFs::format(chip(32), opts(), t(1)).unwrap();
    let block = vec![0x5A; 64 * 1024];
    let mut kept = BTreeMap::new();
    for round in 0..300u32 {
        let name = format!("f{}", round % 6);
        if let Some(inum) = fs.lookup(ROOT_INO, name.as_bytes()).unwrap() {
            fs.truncate(inum, 0, t(2)).unwrap();
            fs.write(
                inum,
                0,
                &block[..(round as usize * 997) % block.len()],
                t(2),
            )
            .unwrap();
            kept.insert(name, (round as usize * 997) % block.len());
        } else {
            let inum = fs
                .mknod(ROOT_INO, name.as_bytes(), NewInode::new(0o100644), t(2))
                .unwrap();
            fs.write(inum, 0, &block, t(2)).unwrap();
            kept.insert(name, block.len());
        }
    }
    assert!(
        fs.stats.gc_runs > 0 && fs.stats.commits > 3,
        "{:?}",
        fs.stats
    );
    // Fill it up: ENOSPC at a write, never at sync or commit.
    let big = fs
        .mknod(ROOT_INO, b"big", NewInode::new(0o100644), t(3))
        .unwrap();
    let mut written = 0u64;
    loop {
        match fs.write(big, written, &block, t(3)) {
            Ok(()) => written += block.len() as u64,
            Err(FsError::NoSpace) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(written < 64 << 20, "never full");
    }
    fs.sync().unwrap();
    fs.commit().unwrap();
    let dev = fsck(fs.unmount().unwrap());
    let mut fs = UbifsFs::mount(dev, opts(), false).unwrap();
    for (name, len) in &kept {
        let inum = fs.lookup(ROOT_INO, name.as_bytes()).unwrap().unwrap();
        assert_eq!(
            fs.read(inum, 0, 1 << 20).unwrap(),
            block[..*len].to_vec(),
            "{name}"
        );
    }
    let st = fs.stat(big).unwrap();
    assert!(st.size >= written, "{} < {written}", st.size);
    assert_eq!(
        fs.read(big, 0, written as usize).unwrap(),
        vec![0x5A; written as usize][..]
    );
}

/// A workload with syncs, cut at every flash operation (every second one by default, every
/// one with NANDKIT_LONG): the mount succeeds, fsck is clean, everything synced reads back.
#[test]
fn ubifs_power_cut_at_every_operation() {
    // The workload, as steps; each ends with a sync.
    fn workload(fs: &mut Fs, step: usize) -> Result<(), FsError> {
        let now = t(100 + step as u64);
        let name = format!("f{}", step % 5);
        let body: Vec<u8> = (0..(step * 1500) % 20_000)
            .map(|i| (i + step) as u8)
            .collect();
        match step % 7 {
            0 | 3 => {
                let inum = match fs.lookup(ROOT_INO, name.as_bytes())? {
                    Some(i) => i,
                    None => fs.mknod(ROOT_INO, name.as_bytes(), NewInode::new(0o100644), now)?,
                };
                fs.truncate(inum, 0, now)?;
                fs.write(inum, 0, &body, now)?;
                Ok(())
            }
            1 => {
                if let Some(i) = fs.lookup(ROOT_INO, name.as_bytes())? {
                    fs.write(i, 5000, &body, now)?;
                }
                Ok(())
            }
            2 => {
                let to = format!("g{}", step % 3);
                if fs.lookup(ROOT_INO, name.as_bytes())?.is_some() {
                    fs.rename(ROOT_INO, name.as_bytes(), ROOT_INO, to.as_bytes(), now)?;
                }
                Ok(())
            }
            4 => {
                if fs.lookup(ROOT_INO, name.as_bytes())?.is_some() {
                    fs.remove(ROOT_INO, name.as_bytes(), false, now)?;
                }
                Ok(())
            }
            5 => {
                fs.commit()?;
                Ok(())
            }
            _ => {
                if let Some(i) = fs.lookup(ROOT_INO, name.as_bytes())? {
                    // A value of 3,000 bytes: the group (entry, xattr inode, host inode)
                    // spans two pages, so a cut can fall inside it.
                    fs.set_xattr(i, b"user.step", &vec![step as u8; 3000], now)?;
                }
                Ok(())
            }
        }
    }
    const STEPS: usize = 60;
    /// What every name holds, as read.
    fn snapshot(fs: &mut Fs) -> Snapshot {
        let mut out = BTreeMap::new();
        for e in fs.readdir(ROOT_INO).unwrap() {
            let st = fs.stat(e.inum).unwrap();
            let data = fs.read(e.inum, 0, st.size as usize).unwrap();
            out.insert(e.name, (data, fs.list_xattrs(e.inum).unwrap()));
        }
        out
    }
    // A run without a cut: how many flash operations, and the state after each step (each
    // step ends with a sync).
    let count_ops = |dev: &mut FlashDevice| dev.state_ops();
    let mut fs = UbifsFs::format(chip(24), opts(), t(1)).unwrap();
    let base = count_ops(fs.device_mut());
    let mut states = vec![snapshot(&mut fs)];
    for s in 0..STEPS {
        workload(&mut fs, s).unwrap();
        fs.sync().unwrap();
        states.push(snapshot(&mut fs));
    }
    let total = count_ops(fs.device_mut()) - base;
    assert!(total > 50, "{total} operations");
    let every = if std::env::var_os("NANDKIT_LONG").is_some() {
        1
    } else {
        2
    };
    let mut cuts = 0;
    for n in (0..total).step_by(every) {
        let mut fs = UbifsFs::format(chip(24), opts(), t(1)).unwrap();
        fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        let mut done = 0;
        for s in 0..STEPS {
            if workload(&mut fs, s).and_then(|_| Ok(fs.sync()?)).is_err() {
                break;
            }
            done += 1;
        }
        let mut dev = fs.into_device();
        if !dev.power_lost() {
            continue;
        }
        cuts += 1;
        dev.power_cycle().unwrap();
        let dev = fsck(dev);
        let mut fs = UbifsFs::mount(dev, opts(), false)
            .unwrap_or_else(|e| panic!("cut at op {n}: mount: {e}"));
        let got = snapshot(&mut fs);
        // Steps before the cut were synced: every name the step in flight did not touch
        // reads back as it was; a touched one is as before or after that step, or between.
        let (was, next) = (&states[done], &states[(done + 1).min(STEPS)]);
        let names: BTreeSet<&Vec<u8>> = was.keys().chain(next.keys()).chain(got.keys()).collect();
        for name in names {
            let touched = was.get(name) != next.get(name);
            if !touched {
                assert_eq!(
                    got.get(name),
                    was.get(name),
                    "cut at op {n} in step {done}: {:?}",
                    String::from_utf8_lossy(name)
                );
            } else {
                assert!(
                    was.contains_key(name) || next.contains_key(name),
                    "cut at op {n}: {:?} from nowhere",
                    String::from_utf8_lossy(name)
                );
            }
        }
        // Written again after the recovery, and clean.
        let inum = fs
            .mknod(ROOT_INO, b"after", NewInode::new(0o100644), t(999))
            .unwrap();
        fs.write(inum, 0, b"after the cut", t(999)).unwrap();
        fsck(fs.unmount().unwrap());
    }
    assert!(cuts > 20, "{cuts} cuts");
}

/// Damage anywhere in an image nandkit's UBIFS wrote (a byte changed in every LEB at
/// several places, a LEB erased whole): mounting answers an error or mounts, reading every
/// file answers data or an error, fsck reports or passes, and nothing panics.
#[test]
fn damaged_ubifs_images_mount_or_err_never_panic() {
    use nandkit_flash::{Flash, PageAddr};
    let mut fs = UbifsFs::format(chip(24), opts(), t(1)).unwrap();
    for i in 0..12u32 {
        let name = format!("f{i}");
        let inum = fs
            .mknod(ROOT_INO, name.as_bytes(), NewInode::new(0o100644), t(2))
            .unwrap();
        fs.write(inum, 0, &vec![i as u8; 3000 * i as usize], t(2))
            .unwrap();
        fs.set_xattr(inum, b"user.x", b"v", t(2)).unwrap();
    }
    fs.sync().unwrap();
    // Leave a journal to replay as well as a committed index.
    let d = fs
        .mknod(ROOT_INO, b"dir", NewInode::new(0o040755), t(3))
        .unwrap();
    fs.mknod(d, b"inner", NewInode::new(0o100600), t(3))
        .unwrap();
    fs.sync().unwrap();
    let mut dev = fs.into_device();
    let g = dev.geometry();
    let page = g.page_size_bytes as usize;
    let read_page = |dev: &mut FlashDevice, block: u32, p: u32| {
        let mut data = vec![0u8; page];
        let mut oob = vec![0u8; g.oob_size_bytes as usize];
        let addr = PageAddr {
            chip: 0,
            block,
            page: p,
        };
        dev.read_page(addr, &mut data, &mut oob).ok().map(|_| data)
    };
    // The written pages, as they are.
    let mut image: Vec<Vec<Option<Vec<u8>>>> = Vec::new();
    for b in 0..g.blocks_per_chip {
        image.push(
            (0..g.pages_per_block)
                .map(|p| read_page(&mut dev, b, p))
                .collect(),
        );
    }
    let (mut cases, mut mounted) = (0, 0);
    for b in 0..g.blocks_per_chip {
        let written: Vec<u32> = (0..g.pages_per_block)
            .filter(|&p| {
                image[b as usize][p as usize]
                    .as_ref()
                    .is_some_and(|d| d.iter().any(|&x| x != 0xFF))
            })
            .collect();
        if written.is_empty() {
            continue;
        }
        for (k, damage) in [(0usize, 0x01u8), (24, 0x80), (100, 0xFF), (page - 1, 0x10)]
            .into_iter()
            .enumerate()
        {
            // A fresh copy of the image with one byte of one written page changed (the
            // block rewritten: the chip has no in-place edit), or the block erased.
            let make_copy = || {
                let mut copy = chip(24);
                for (bb, pages) in image.iter().enumerate() {
                    for (pp, data) in pages.iter().enumerate() {
                        let Some(data) = data else { continue };
                        if data.iter().all(|&x| x == 0xFF) {
                            continue;
                        }
                        // The last case erases the block instead.
                        if bb as u32 == b && k == 3 && written.len() > 1 {
                            continue;
                        }
                        let mut data = data.clone();
                        if bb as u32 == b && pp as u32 == written[k % written.len()] {
                            data[damage.0.min(page - 1)] ^= damage.1;
                        }
                        let oob = vec![0xFF; g.oob_size_bytes as usize];
                        let addr = PageAddr {
                            chip: 0,
                            block: bb as u32,
                            page: pp as u32,
                        };
                        copy.program_page(addr, &data, &oob).unwrap();
                    }
                }
                copy
            };
            cases += 1;
            let what = format!("block {b} case {k}");
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // The reader and its fsck.
                if let Ok(mut img) = UbifsImage::open(LebIo::new(make_copy()).unwrap()) {
                    let _ = check::check(&mut img);
                }
                // The writer's mount (recovery, a write, an unmount), then a read-back.
                if let Ok(mut fs) = UbifsFs::mount(make_copy(), opts(), false) {
                    mounted += 1;
                    if let Ok(entries) = fs.readdir(ROOT_INO) {
                        for e in entries {
                            if let Ok(st) = fs.stat(e.inum) {
                                let _ = fs.read(e.inum, 0, st.size as usize);
                                let _ = fs.list_xattrs(e.inum);
                            }
                        }
                    }
                    let _ = fs.mknod(ROOT_INO, b"new", NewInode::new(0o100644), t(9));
                    let _ = fs.unmount();
                }
            }));
            assert!(r.is_ok(), "{what}: a panic");
        }
    }
    assert!(cases > 20, "{cases} cases");
    // Damage in the main area's dead or unread parts leaves the mount standing.
    assert!(
        mounted > 0 && mounted < cases,
        "{mounted} of {cases} mounted"
    );
}
