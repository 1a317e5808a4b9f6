//! Power cuts. Each workload runs once uncut to count its state-changing flash operations
//! (programs, erases, bad-block marks); then, for every operation index n, it runs again on
//! a fresh device with the power cut armed at n. After the cut the device is power-cycled
//! and mounted (a scan), and:
//! - mount succeeds and fsck is clean;
//! - the tree is exactly the one the last completed namespace operation left, or the one
//!   the operation in flight would have made: a rename (or any namespace change) is all
//!   or nothing;
//! - every byte fsync'd before the cut reads back exactly; bytes changed since may hold
//!   any value a change since gave them (`FileHistory::check`);
//! - the recovered file system keeps working: more writes, a clean remount and a crash
//!   remount later, everything still reads back.
//!
//! A failure names the workload, the geometry, the seed and the op number: rerunning that
//! one cut replays it exactly. `NANDKIT_LONG=1` cuts at every op of the cleaning workload
//! too (by default every few ops) and runs more random seeds.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::*;
use nandkit_flash::PowerCut;
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn long() -> bool {
    std::env::var_os("NANDKIT_LONG").is_some()
}

/// The namespace change of the operation that was in flight when power failed.
#[derive(Clone, Debug)]
enum InFlight {
    /// Exactly this tree.
    Tree(Dentries),
    /// The durable tree plus a new object under this name (its number is not known).
    Create(Ino, Vec<u8>, Kind),
}

/// What must have survived a power cut.
#[derive(Clone, Debug)]
struct Durable {
    /// The tree as of the last namespace operation that returned.
    names: Dentries,
    in_flight: Option<InFlight>,
    files: HashMap<Ino, FileHistory>,
    kinds: HashMap<Ino, Kind>,
}

/// Runs workload operations on a file system and remembers what must have survived.
struct Driver {
    fs: Fs,
    m: Durable,
}

impl std::ops::Deref for Driver {
    type Target = Durable;
    fn deref(&self) -> &Durable {
        &self.m
    }
}

impl std::ops::DerefMut for Driver {
    fn deref_mut(&mut self) -> &mut Durable {
        &mut self.m
    }
}

impl Driver {
    fn new(fs: Fs) -> Driver {
        Driver {
            fs,
            m: Durable {
                names: Dentries::new(),
                in_flight: None,
                files: HashMap::new(),
                kinds: HashMap::from([(ROOT_INO, Kind::Dir)]),
            },
        }
    }

    fn namespace_op<T>(&mut self, r: Result<T>, after: InFlight) -> Result<T> {
        match (&r, &after) {
            (Ok(_), InFlight::Tree(t)) => self.names = t.clone(),
            (Ok(_), InFlight::Create(..)) => {} // the caller records it
            // Refused operations change nothing; one cut short by the power may have.
            (Err(_), _) if self.fs.device().power_lost() => self.in_flight = Some(after),
            (Err(_), _) => {}
        }
        r
    }

    fn create(&mut self, parent: Ino, name: &[u8], new: NewObject) -> Result<Ino> {
        let kind = new.kind;
        let r = self.fs.create(parent, name, new);
        let r = self.namespace_op(r, InFlight::Create(parent, name.to_vec(), kind))?;
        self.names.insert((parent, name.to_vec()), r.ino);
        self.kinds.insert(r.ino, kind);
        if kind == Kind::File {
            self.files.insert(r.ino, FileHistory::default());
        }
        Ok(r.ino)
    }

    fn mkdir(&mut self, parent: Ino, name: &[u8]) -> Result<Ino> {
        self.create(parent, name, dir())
    }

    fn file(&mut self, parent: Ino, name: &[u8]) -> Result<Ino> {
        self.create(parent, name, file())
    }

    fn write(&mut self, ino: Ino, off: u64, data: &[u8]) -> Result<()> {
        let r = self.fs.write(ino, off, data);
        // Whatever happened, part of it may be on flash.
        let n = match &r {
            Ok(n) => *n,
            Err(_) => data.len(),
        };
        self.files.get_mut(&ino).unwrap().write(off, &data[..n]);
        let n = r?;
        assert_eq!(n, data.len(), "short write without a power cut");
        Ok(())
    }

    fn truncate(&mut self, ino: Ino, size: u64) -> Result<()> {
        self.files.get_mut(&ino).unwrap().truncate(size);
        self.fs
            .setattr(
                ino,
                SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                },
            )
            .map(|_| ())
    }

    fn fsync(&mut self, ino: Ino) -> Result<()> {
        self.fs.fsync(ino)?;
        if let Some(f) = self.files.get_mut(&ino) {
            f.synced();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.fs.sync()?;
        for f in self.files.values_mut() {
            f.synced();
        }
        Ok(())
    }

    fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.names.clone();
        after
            .remove(&(parent, name.to_vec()))
            .expect("unlink of a known name");
        let r = self.fs.unlink(parent, name);
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.names.clone();
        after
            .remove(&(parent, name.to_vec()))
            .expect("rmdir of a known name");
        let r = self.fs.rmdir(parent, name);
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn link(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.names.clone();
        after.insert((parent, name.to_vec()), ino);
        let r = self.fs.link(ino, parent, name).map(|_| ());
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn rename(&mut self, p: Ino, n: &[u8], np: Ino, nn: &[u8], mode: RenameMode) -> Result<()> {
        let mut after = self.names.clone();
        let src = after[&(p, n.to_vec())];
        match mode {
            // Two names of one object: POSIX says rename does nothing.
            _ if after.get(&(np, nn.to_vec())) == Some(&src) => {}
            RenameMode::Exchange => {
                let dst = after[&(np, nn.to_vec())];
                after.insert((p, n.to_vec()), dst);
                after.insert((np, nn.to_vec()), src);
            }
            _ => {
                after.remove(&(p, n.to_vec()));
                after.insert((np, nn.to_vec()), src);
            }
        }
        let r = self.fs.rename(p, n, np, nn, mode);
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn open(&mut self, ino: Ino) -> Result<()> {
        self.fs.open(ino)
    }

    /// Closing flushes a named file, like fsync.
    fn release(&mut self, ino: Ino) -> Result<()> {
        let named = self.names.values().any(|&i| i == ino);
        self.fs.release(ino)?;
        if named {
            if let Some(f) = self.files.get_mut(&ino) {
                f.synced();
            }
        }
        Ok(())
    }
}

/// Checks a recovered file system against what the driver knew was durable.
fn verify(fs: &mut Fs, d: &Durable, ctx: &str) -> Result<Dentries> {
    assert_fsck(fs, ctx);
    let got = dentries(fs)?;
    let mut new_object = None;
    if got != d.names {
        let ok = match &d.in_flight {
            Some(InFlight::Tree(t)) => got == *t,
            Some(InFlight::Create(p, n, kind)) => {
                let mut extra: Vec<_> = got
                    .iter()
                    .filter(|(k, _)| !d.names.contains_key(*k))
                    .collect();
                let fits = extra.len() == 1 && got.len() == d.names.len() + 1 && {
                    let ((ep, en), &ino) = extra.pop().unwrap();
                    new_object = Some(ino);
                    *ep == *p
                        && en == n
                        && !d.kinds.contains_key(&ino)
                        && fs.getattr(ino)?.kind == *kind
                };
                fits && d.names.iter().all(|(k, v)| got.get(k) == Some(v))
            }
            None => false,
        };
        assert!(
            ok,
            "{ctx}: the tree after recovery is neither the durable one nor the one the \
             operation in flight would make\n got:     {}\n durable: {}\n in flight: {:?}",
            show_dentries(&got),
            show_dentries(&d.names),
            d.in_flight
        );
    }
    // Link counts and contents.
    let mut links: BTreeMap<Ino, u32> = BTreeMap::new();
    for &ino in got.values() {
        *links.entry(ino).or_default() += 1;
    }
    for (&ino, &n) in &links {
        let a = fs.getattr(ino)?;
        match a.kind {
            Kind::Dir => {
                let subdirs = got
                    .iter()
                    .filter(|((p, _), &c)| *p == ino && fs.getattr(c).unwrap().kind == Kind::Dir)
                    .count() as u32;
                assert_eq!(n, 1, "{ctx}: directory {ino} has {n} names");
                assert_eq!(a.nlink, 2 + subdirs, "{ctx}: nlink of directory {ino}");
            }
            Kind::File => {
                assert_eq!(a.nlink, n, "{ctx}: nlink of file {ino}");
                let content = read_all(fs, ino)?;
                if Some(ino) == new_object {
                    assert!(
                        content.is_empty(),
                        "{ctx}: a file created in flight has data"
                    );
                } else {
                    let h = d.files.get(&ino).unwrap_or_else(|| {
                        panic!("{ctx}: file {ino} in the tree is unknown to the workload")
                    });
                    if let Err(why) = h.check(&content) {
                        panic!("{ctx}: file {ino}: {why}");
                    }
                }
            }
            _ => assert_eq!(a.nlink, n, "{ctx}: nlink of {ino}"),
        }
    }
    Ok(got)
}

/// After recovery: more writes, a remount and a crash remount; everything must stay.
fn keep_working(mut fs: Fs, mut tree: Dentries, ctx: &str) -> Fs {
    let mut contents: BTreeMap<Ino, Vec<u8>> = BTreeMap::new();
    for &ino in tree.values() {
        if fs.getattr(ino).unwrap().kind == Kind::File {
            contents.insert(ino, read_all(&mut fs, ino).unwrap());
        }
    }
    let c = fs.chunk_bytes() as usize;
    let d = fs.create(ROOT_INO, b"post-dir", dir()).unwrap().ino;
    let f = fs.create(ROOT_INO, b"post-file", file()).unwrap().ino;
    let data = pattern(99, 3 * c + 17);
    fs.write(f, 0, &data).unwrap();
    fs.fsync(f).unwrap();
    fs.rename(ROOT_INO, b"post-file", d, b"moved", RenameMode::NoReplace)
        .unwrap();
    tree.insert((ROOT_INO, b"post-dir".to_vec()), d);
    tree.insert((d, b"moved".to_vec()), f);
    contents.insert(f, data);
    // Append to a couple of recovered files.
    let old: Vec<Ino> = contents
        .keys()
        .copied()
        .filter(|&i| i != f)
        .take(2)
        .collect();
    for ino in old {
        let tail = pattern(u64::from(ino), c / 2 + 3);
        let v = contents.get_mut(&ino).unwrap();
        fs.write(ino, v.len() as u64, &tail).unwrap();
        v.extend_from_slice(&tail);
        fs.fsync(ino).unwrap();
    }
    fs.gc(2).unwrap();
    let check = |fs: &mut Fs, when: &str| {
        assert_fsck(fs, &format!("{ctx}, {when}"));
        assert_eq!(dentries(fs).unwrap(), tree, "{ctx}, {when}: tree");
        for (&ino, v) in &contents {
            assert_bytes(
                &read_all(fs, ino).unwrap(),
                v,
                &format!("{ctx}, {when}: file {ino}"),
            );
        }
    };
    check(&mut fs, "after more writes");
    let flash = fs
        .unmount()
        .unwrap_or_else(|e| panic!("{ctx}: unmount after recovery: {e}"));
    let mut fs = mount(flash).unwrap_or_else(|e| panic!("{ctx}: remount after recovery: {e}"));
    check(&mut fs, "remounted after recovery");
    let mut fs = crash_remount(fs);
    check(&mut fs, "crash-remounted after recovery");
    fs
}

type Workload = fn(&mut Driver, u64) -> Result<()>;

/// Runs `w` with a power cut at op `n` (None: no cut) on `flash`; returns the driver.
fn run_cut(mut fs: Fs, w: Workload, seed: u64, cut: Option<PowerCut>) -> (Driver, Result<()>) {
    if let Some(cut) = cut {
        fs.device_mut().arm_power_cut(cut);
    }
    let mut d = Driver::new(fs);
    let r = w(&mut d, seed);
    (d, r)
}

/// Recovers after a cut and checks everything.
fn recover_and_check(d: Driver, r: Result<()>, ctx: &str) {
    assert!(
        r.is_err(),
        "{ctx}: the workload finished although power was cut"
    );
    let Driver { fs, m } = d;
    let mut flash = fs.into_device();
    assert!(
        flash.power_lost(),
        "{ctx}: failed without a power cut: {:?}",
        r
    );
    flash.power_cycle().unwrap();
    let mut fs = mount(flash).unwrap_or_else(|e| panic!("{ctx}: mount after the cut: {e}"));
    let tree = verify(&mut fs, &m, ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    keep_working(fs, tree, ctx);
}

/// Counts the workload's state-changing operations (and checks it runs clean uncut).
fn count_ops(dev: Dev, w: Workload, seed: u64, name: &str) -> u64 {
    let fs = format(dev);
    let base = fs.device().state_ops();
    let (mut d, r) = run_cut(fs, w, seed, None);
    r.unwrap_or_else(|e| panic!("{name} on {}: uncut run failed: {e}", dev.name()));
    let ops = d.fs.device().state_ops() - base;
    let tree = verify(&mut d.fs, &d.m, name).unwrap();
    assert_eq!(tree, d.names);
    ops
}

/// Cuts power at every `stride`-th state-changing op of the workload.
fn sweep(dev: Dev, name: &str, w: Workload, seed: u64, stride: u64) -> u64 {
    let total = count_ops(dev, w, seed, name);
    println!("{name} on {}: {total} state-changing ops", dev.name());
    for n in (0..total).step_by(stride as usize) {
        let ctx = format!(
            "workload {name} on {} seed {seed}: power cut at op {n} of {total}",
            dev.name()
        );
        let (d, r) = run_cut(format(dev), w, seed, Some(PowerCut::AtOp(n)));
        recover_and_check(d, r, &ctx);
    }
    total
}

// ---------------------------------------------------------------------------------------
// Workloads.

/// (a) Many small files, each written and fsync'd; some overwritten, some deleted.
fn small_files(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let dirs = [
        ROOT_INO,
        d.mkdir(ROOT_INO, b"d0")?,
        d.mkdir(ROOT_INO, b"d1")?,
    ];
    let mut made: Vec<(Ino, Vec<u8>, Ino)> = Vec::new();
    for i in 0..40u64 {
        let p = dirs[i as usize % 3];
        let name = format!("f{i}").into_bytes();
        let f = d.file(p, &name)?;
        let len = 50 + (i * 397 + seed) % (2 * c + 100);
        d.write(f, 0, &pattern(seed + i, len as usize))?;
        d.fsync(f)?;
        if i % 5 == 4 {
            // overwrite a middle part of an earlier file
            let (g, _, _) = made[i as usize / 2];
            d.write(g, 10, &pattern(i * 7, 200))?;
            d.fsync(g)?;
        }
        if i % 6 == 5 {
            let (_, n, gp) = made.remove(0);
            d.unlink(gp, &n)?;
        }
        made.push((f, name, p));
    }
    d.sync()
}

/// (b) One large file appended and overwritten, with fsyncs between, a shrink and a grow.
fn big_file(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let f = d.file(ROOT_INO, b"big")?;
    let mut size = 0u64;
    for step in 0..70u64 {
        let n = rng.gen_range(1..6 * c) as usize;
        d.write(f, size, &pattern(seed * 1000 + step, n))?;
        size += n as u64;
        if step % 3 == 1 {
            let off = rng.gen_range(0..size);
            let n = rng.gen_range(1..2 * c) as usize;
            d.write(f, off, &pattern(seed * 1000 + step + 500, n))?;
            size = size.max(off + n as u64);
        }
        if step == 23 || step == 51 {
            size /= 3;
            d.truncate(f, size)?;
        }
        if step == 30 {
            size += 3 * c + 5;
            d.truncate(f, size)?;
        }
        if step % 2 == 0 {
            d.fsync(f)?;
        }
    }
    d.fsync(f)
}

/// (c) A namespace mix: mkdir, create, rename (all three modes, files and directories),
/// link, unlink, rmdir, a symlink, unlink-while-open, with fsyncs between.
fn namespace_round(d: &mut Driver, seed: u64, top: Ino) -> Result<()> {
    let data = |k: u64| pattern(seed * 100 + k, 300 + (k as usize * 211) % 3000);
    let a = d.mkdir(top, b"a")?;
    let b = d.mkdir(top, b"b")?;
    let sub = d.mkdir(a, b"sub")?;
    let f1 = d.file(a, b"f1")?;
    d.write(f1, 0, &data(1))?;
    d.fsync(f1)?;
    let f2 = d.file(b, b"f2")?;
    d.write(f2, 0, &data(2))?;
    d.fsync(f2)?;
    // rename over an existing file
    d.rename(a, b"f1", b, b"f2", RenameMode::Replace)?;
    // link, then move one name
    d.link(f1, sub, b"hard")?;
    d.rename(sub, b"hard", top, b"top", RenameMode::NoReplace)?;
    let f3 = d.file(top, b"f3")?;
    d.write(f3, 0, &data(3))?;
    d.fsync(f3)?;
    // exchange two files, then a file and a directory
    d.rename(top, b"top", top, b"f3", RenameMode::Exchange)?;
    d.rename(top, b"f3", a, b"sub", RenameMode::Exchange)?;
    // move a directory with content under another
    let e = d.mkdir(b, b"e")?;
    let f4 = d.file(e, b"f4")?;
    d.write(f4, 0, &data(4))?;
    d.fsync(f4)?;
    d.rename(b, b"e", a, b"e2", RenameMode::Replace)?;
    let _ = d.create(a, b"link", symlink(b"../b/f2"))?;
    // unlink while open, writing after the unlink
    let o = d.file(top, b"open")?;
    d.write(o, 0, &data(5))?;
    d.fsync(o)?;
    d.open(o)?;
    d.unlink(top, b"open")?;
    d.write(o, 100, &data(6))?;
    d.fsync(o)?;
    d.release(o)?;
    // a directory over an empty one, rmdir, unlink one of two names
    d.mkdir(top, b"empty")?;
    d.mkdir(top, b"empty2")?;
    d.rename(top, b"empty", top, b"empty2", RenameMode::Replace)?;
    d.rmdir(top, b"empty2")?;
    d.rmdir(top, b"f3")?; // the directory "sub", exchanged there above
    d.write(f1, 50, &data(7))?;
    d.fsync(f1)?;
    d.rename(b, b"f2", top, b"final", RenameMode::Replace)?;
    d.unlink(a, b"sub")?;
    d.fsync(top)
}

/// Three rounds of the mix, each in its own directory.
fn namespace_mix(d: &mut Driver, seed: u64) -> Result<()> {
    for round in 0..3 {
        let top = d.mkdir(ROOT_INO, format!("round{round}").as_bytes())?;
        namespace_round(d, seed * 10 + round, top)?;
    }
    d.sync()
}

#[test]
fn crash_small_files() {
    for dev in Dev::ALL {
        let ops = sweep(dev, "small-files", small_files, 1, 1);
        assert!(ops > 50, "{ops}");
    }
}

#[test]
fn crash_big_file() {
    for dev in Dev::ALL {
        let ops = sweep(dev, "big-file", big_file, 2, 1);
        assert!(ops > 80, "{ops}");
    }
}

#[test]
fn crash_namespace_mix() {
    for dev in Dev::ALL {
        let ops = sweep(dev, "namespace-mix", namespace_mix, 3, 1);
        assert!(ops > 40, "{ops}");
    }
}

/// The checker itself: a wrong durable model or a half-done namespace change must fail.
#[test]
fn verify_rejects_wrong_recoveries() {
    let fs = format(Dev::Tiny);
    let (mut d, r) = run_cut(fs, namespace_mix, 3, None);
    r.unwrap();
    verify(&mut d.fs, &d.m, "uncut").unwrap();
    let rejects = |fs: &mut Fs, m: &Durable| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = verify(fs, m, "self-test");
        }));
        r.is_err()
    };
    // A byte that was fsync'd differs.
    let mut m = d.m.clone();
    let (&ino, h) = m
        .files
        .iter_mut()
        .find(|(i, h)| !h.durable.is_empty() && d.m.names.values().any(|x| x == *i))
        .unwrap();
    h.durable[0] ^= 1;
    h.current = h.durable.clone();
    assert!(
        rejects(&mut d.fs, &m),
        "a changed durable byte of {ino} passed"
    );
    // A name is missing, or half of an exchange happened.
    let mut m = d.m.clone();
    let key = m.names.keys().next().unwrap().clone();
    m.names.remove(&key);
    assert!(rejects(&mut d.fs, &m), "an extra name passed");
    let mut m = d.m.clone();
    let mut half = m.names.clone();
    let (k1, k2): (Vec<_>, Vec<_>) = half.keys().cloned().partition(|(p, _)| *p == ROOT_INO);
    let (a, b) = (k1[0].clone(), k2[0].clone());
    let (ia, ib) = (half[&a], half[&b]);
    half.insert(a.clone(), ib);
    m.names.insert(a, ib);
    m.names.insert(b, ia);
    m.in_flight = Some(InFlight::Tree(half));
    assert!(
        rejects(&mut d.fs, &m),
        "a tree that matches neither side passed"
    );
    // A shorter file than the durable size.
    let mut m = d.m.clone();
    let h = m.files.get_mut(&ino).unwrap();
    h.durable.push(7);
    h.current.push(7);
    assert!(rejects(&mut d.fs, &m), "a lost durable byte passed");
}

/// A random mix of every operation, valid by construction, from a seed.
fn random_workload(d: &mut Driver, seed: u64) -> Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = d.fs.chunk_bytes() as u64;
    let mut counter = 0u32;
    let mut fresh = |rng: &mut Xoshiro256PlusPlus| {
        counter += 1;
        format!("n{counter}-{}", rng.gen_range(0..100)).into_bytes()
    };
    let dirs = |d: &Driver| -> Vec<Ino> {
        let mut v: Vec<Ino> = d
            .names
            .values()
            .copied()
            .filter(|i| d.kinds[i] == Kind::Dir)
            .collect();
        v.push(ROOT_INO);
        v.sort_unstable();
        v.dedup();
        v
    };
    let file_names = |d: &Driver| -> Vec<((Ino, Vec<u8>), Ino)> {
        d.names
            .iter()
            .filter(|(_, i)| d.kinds[*i] == Kind::File)
            .map(|(k, &i)| (k.clone(), i))
            .collect()
    };
    for _ in 0..120 {
        let ds = dirs(d);
        let fs_ = file_names(d);
        let pick_dir = |rng: &mut Xoshiro256PlusPlus| ds[rng.gen_range(0..ds.len())];
        match rng.gen_range(0..100) {
            0..=14 => {
                let p = pick_dir(&mut rng);
                let n = fresh(&mut rng);
                d.file(p, &n)?;
            }
            15..=19 => {
                let p = pick_dir(&mut rng);
                let n = fresh(&mut rng);
                d.mkdir(p, &n)?;
            }
            20..=44 if !fs_.is_empty() => {
                let (_, ino) = &fs_[rng.gen_range(0..fs_.len())];
                let size = d.files[ino].current.len() as u64;
                let off = rng.gen_range(0..size + 2 * c);
                let len = rng.gen_range(1..3 * c) as usize;
                d.write(*ino, off, &pattern(rng.gen(), len))?;
            }
            45..=54 if !fs_.is_empty() => {
                let (_, ino) = &fs_[rng.gen_range(0..fs_.len())];
                d.fsync(*ino)?;
            }
            55..=58 if !fs_.is_empty() => {
                let (_, ino) = &fs_[rng.gen_range(0..fs_.len())];
                let size = d.files[ino].current.len() as u64;
                d.truncate(*ino, rng.gen_range(0..size + c + 1))?;
            }
            59..=66 if !fs_.is_empty() => {
                let ((p, n), _) = &fs_[rng.gen_range(0..fs_.len())];
                d.unlink(*p, n)?;
            }
            67..=76 if !fs_.is_empty() => {
                let ((p, n), _) = fs_[rng.gen_range(0..fs_.len())].clone();
                // Over another file name, or to a fresh name.
                if rng.gen_bool(0.4) {
                    let ((q, m), _) = fs_[rng.gen_range(0..fs_.len())].clone();
                    if (q, &m) != (p, &n) {
                        d.rename(p, &n, q, &m, RenameMode::Replace)?;
                    }
                } else {
                    let q = pick_dir(&mut rng);
                    let m = fresh(&mut rng);
                    d.rename(p, &n, q, &m, RenameMode::NoReplace)?;
                }
            }
            77..=81 if fs_.len() >= 2 => {
                let ((p, n), i) = fs_[rng.gen_range(0..fs_.len())].clone();
                let ((q, m), j) = fs_[rng.gen_range(0..fs_.len())].clone();
                if i != j {
                    d.rename(p, &n, q, &m, RenameMode::Exchange)?;
                }
            }
            82..=86 if !fs_.is_empty() => {
                let (_, i) = fs_[rng.gen_range(0..fs_.len())].clone();
                let q = pick_dir(&mut rng);
                let m = fresh(&mut rng);
                d.link(i, q, &m)?;
            }
            87..=89 => {
                // rmdir an empty directory, or move a directory somewhere not below itself
                let p = pick_dir(&mut rng);
                if p != ROOT_INO {
                    let key = d.names.iter().find(|(_, &i)| i == p).unwrap().0.clone();
                    if d.names.keys().all(|(pp, _)| *pp != p) && rng.gen_bool(0.5) {
                        d.rmdir(key.0, &key.1)?;
                    } else {
                        let q = pick_dir(&mut rng);
                        let mut up = q;
                        let mut below = false;
                        while up != ROOT_INO {
                            if up == p {
                                below = true;
                                break;
                            }
                            up = d.names.iter().find(|(_, &i)| i == up).unwrap().0 .0;
                        }
                        if !below {
                            let m = fresh(&mut rng);
                            d.rename(key.0, &key.1, q, &m, RenameMode::NoReplace)?;
                        }
                    }
                }
            }
            90..=92 if !fs_.is_empty() => {
                // unlink while open, write, close
                let ((p, n), i) = fs_[rng.gen_range(0..fs_.len())].clone();
                d.open(i)?;
                d.unlink(p, &n)?;
                d.write(i, 0, &pattern(rng.gen(), 100))?;
                d.release(i)?;
            }
            93..=95 => d.sync()?,
            _ => {
                let p = pick_dir(&mut rng);
                let n = fresh(&mut rng);
                let t = fresh(&mut rng);
                d.create(p, &n, symlink(&t))?;
            }
        }
    }
    d.sync()
}

#[test]
fn crash_random_workloads_random_cuts() {
    let seeds = if long() { 0..400 } else { 0..40 };
    let mut cuts = 0;
    for dev in Dev::ALL {
        for seed in seeds.clone() {
            let total = count_ops(dev, random_workload, seed, "random");
            let cut = PowerCut::Random {
                seed: seed ^ 0xC0FFEE,
                within: total,
            };
            let ctx = format!(
                "workload random on {} seed {seed}: {cut:?} of {total} ops",
                dev.name()
            );
            let (d, r) = run_cut(format(dev), random_workload, seed, Some(cut));
            recover_and_check(d, r, &ctx);
            cuts += 1;
        }
    }
    assert!(cuts >= 80);
}

/// Every op of one random workload, for a few seeds.
#[test]
fn crash_random_workload_every_op() {
    let seeds: &[u64] = if long() {
        &[100, 101, 102, 103]
    } else {
        &[100]
    };
    for &seed in seeds {
        for dev in Dev::ALL {
            sweep(dev, "random", random_workload, seed, 1);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Cuts during cleaning: a tiny device kept nearly full, so overwrites make the cleaner copy
// pages and erase blocks all the time.

/// A tiny device, nearly full of a cold file and a hot one, cleanly unmounted.
fn gc_snapshot() -> nandkit_flash::FlashDevice {
    let mut fs = format(Dev::Tiny);
    let c = fs.chunk_bytes() as usize;
    let cold = fs.create(ROOT_INO, b"cold", file()).unwrap().ino;
    fs.write(cold, 0, &pattern(1, 2900 * c)).unwrap();
    let hot = fs.create(ROOT_INO, b"hot", file()).unwrap().ino;
    fs.write(hot, 0, &pattern(2, 600 * c)).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for i in 0..400u64 {
        let off = rng.gen_range(0..600) * c as u64;
        fs.write(hot, off, &pattern(100 + i, c)).unwrap();
    }
    fs.sync().unwrap();
    assert!(fs.stats().blocks_cleaned > 0, "setup did not clean");
    fs.unmount().unwrap()
}

/// Overwrites on the nearly full device, with fsyncs, a few small files made and deleted.
fn gc_workload(d: &mut Driver, seed: u64) -> Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = d.fs.chunk_bytes() as u64;
    let hot = d.names[&(ROOT_INO, b"hot".to_vec())];
    for i in 0..90u64 {
        let off = rng.gen_range(0..600 * c - 3 * c);
        let len = rng.gen_range(c / 2..3 * c) as usize;
        d.write(hot, off, &pattern(seed * 1000 + i, len))?;
        if i % 3 == 2 {
            d.fsync(hot)?;
        }
        if i % 15 == 7 {
            let n = format!("tmp{i}").into_bytes();
            let f = d.file(ROOT_INO, &n)?;
            d.write(f, 0, &pattern(i, 3 * c as usize))?;
            d.fsync(f)?;
        }
        if i % 15 == 14 {
            let n = format!("tmp{}", i - 7).into_bytes();
            d.unlink(ROOT_INO, &n)?;
        }
    }
    d.fsync(hot)
}

/// A driver over an existing file system: everything on it is durable.
fn adopt(mut fs: Fs) -> Driver {
    let names = dentries(&mut fs).unwrap();
    let mut d = Driver::new(fs_placeholder());
    for (_, &ino) in names.iter() {
        let kind = fs.getattr(ino).unwrap().kind;
        d.kinds.insert(ino, kind);
        if kind == Kind::File {
            let mut h = FileHistory::default();
            h.adopt(read_all(&mut fs, ino).unwrap());
            d.files.insert(ino, h);
        }
    }
    d.m.names = names;
    d.fs = fs;
    d
}

fn fs_placeholder() -> Fs {
    format(Dev::Small)
}

#[test]
fn crash_during_cleaning() {
    let mut snap = gc_snapshot();
    let stride = if long() { 1 } else { 5 };
    // Uncut, to count and to check the workload really makes the cleaner work.
    let fs = mount(clone_device(&mut snap)).unwrap();
    let base = fs.device().state_ops();
    let mut d = adopt(fs);
    gc_workload(&mut d, 9).unwrap();
    let total = d.fs.device().state_ops() - base;
    let st = d.fs.stats().clone();
    assert!(
        st.blocks_cleaned >= 5 && st.pages_copied > 100,
        "the workload hardly cleaned: {st:?}"
    );
    println!("gc workload: {total} state-changing ops, {st:?}");
    for n in (0..total).step_by(stride) {
        let ctx = format!("workload gc on tiny seed 9: power cut at op {n} of {total}");
        let mut fs = mount(clone_device(&mut snap)).unwrap();
        fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        let mut d = adopt(fs);
        let r = gc_workload(&mut d, 9);
        recover_and_check(d, r, &ctx);
    }
}

// ---------------------------------------------------------------------------------------
// Cuts during mount-time repair. Mount consumes the device and a failed mount drops it, so
// this runs on file images: reopening an image is the power cycle.

fn open_image(path: &std::path::Path) -> nandkit_flash::FlashDevice {
    nandkit_flash::FlashDevice::open_image(path, nandkit_flash::DeviceOptions::default())
        .expect("open image")
}

fn copy_image(from: &std::path::Path, to: &std::path::Path) {
    std::fs::copy(from, to).unwrap();
    let meta = |p: &std::path::Path| {
        let mut s = p.as_os_str().to_owned();
        s.push(".meta");
        std::path::PathBuf::from(s)
    };
    std::fs::copy(meta(from), meta(to)).unwrap();
}

#[test]
fn crash_during_mount_repair() {
    let dev = Dev::Small;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.img");
    let work = tmp.path().join("work.img");
    let workloads: [(&str, Workload, u64); 2] = [
        ("namespace-mix", namespace_mix, 3),
        ("random", random_workload, 5),
    ];
    let mut mount_cuts = 0;
    for (name, w, seed) in workloads {
        let total = count_ops(dev, w, seed, name);
        let stride = if long() { 1 } else { 2 };
        for n in (0..total).step_by(stride) {
            let ctx = format!(
                "workload {name} on {} (image) seed {seed}: power cut at op {n} of {total}",
                dev.name()
            );
            let flash = nandkit_flash::FlashDevice::create_image(
                &base,
                dev.config(),
                true,
                nandkit_flash::DeviceOptions::default(),
            )
            .unwrap();
            let fs = FileSystem::format(flash, yaffs(dev), clock()).unwrap();
            let (d, r) = run_cut(fs, w, seed, Some(PowerCut::AtOp(n)));
            assert!(r.is_err(), "{ctx}: finished uncut");
            let Driver { fs, m } = d;
            drop(fs.into_device()); // the image keeps what the cut left
                                    // Cut the mount at each of its writes in turn, each time from the same image.
            for k in 0.. {
                assert!(k < 200, "{ctx}: mount keeps writing");
                copy_image(&base, &work);
                let mut flash = open_image(&work);
                flash.arm_power_cut(PowerCut::AtOp(k));
                match mount(flash) {
                    Ok(mut fs) => {
                        // The mount did fewer than k + 1 writes: nothing was cut.
                        fs.device_mut().disarm_power_cut();
                        let tree = verify(&mut fs, &m, &ctx).unwrap();
                        keep_working(fs, tree, &ctx);
                        break;
                    }
                    Err(e) => {
                        let ctx = format!("{ctx}, then again at mount write {k} ({e})");
                        mount_cuts += 1;
                        let mut fs = mount(open_image(&work))
                            .unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                        let tree = verify(&mut fs, &m, &ctx).unwrap();
                        keep_working(fs, tree, &ctx);
                    }
                }
            }
        }
    }
    println!("{mount_cuts} cuts during mount-time writes");
    assert!(mount_cuts >= 5, "mount hardly ever wrote: {mount_cuts}");
}
