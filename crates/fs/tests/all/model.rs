//! Property test: random operation sequences run against the file system and against a
//! simple in-memory model of a POSIX file system; every result and error must agree, and
//! so must the whole tree (contents, sizes, link counts, listings, attributes) at each
//! remount and at the end, with fsck clean. Mode, owner and group must match exactly, and
//! times must move as POSIX says: a write changes mtime and ctime, a chmod only ctime,
//! utimens sets them, nothing else touches them, and a clean remount keeps them. Runs on both geometries (tags in the OOB and
//! in band), with remounts (clean, and power cuts between operations) and with operations
//! that fill the device so ENOSPC and cleaning happen.
//!
//! Deterministic: proptest draws from a fixed seed. A failure prints the shrunk operation
//! list, which replays exactly. `NANDKIT_LONG=1` runs many more cases; `NANDKIT_SEED=k`
//! draws other sequences.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::common::*;
use nandkit_fs::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const NAMES: [&[u8]; 6] = [b"a", b"b", b"c", b"dd", b"e", b"f"];
const XATTR_KEYS: [&[u8]; 3] = [b"user.a", b"user.bb", b"security.c"];
const ENOSPC: i32 = 28;

const E2BIG: i32 = 7;

/// What the runs exercised, so a test can check that its interesting paths ran.
#[derive(Default)]
struct Coverage {
    enospc: AtomicU64,
    cleaned: AtomicU64,
    crash_remounts: AtomicU64,
    clean_remounts: AtomicU64,
    errors: AtomicU64,
    ops: AtomicU64,
}

impl Coverage {
    const fn new() -> Self {
        Self {
            enospc: AtomicU64::new(0),
            cleaned: AtomicU64::new(0),
            crash_remounts: AtomicU64::new(0),
            clean_remounts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            ops: AtomicU64::new(0),
        }
    }

    fn report(&self, what: &str) -> [u64; 6] {
        let v = [
            self.ops.load(Relaxed),
            self.errors.load(Relaxed),
            self.enospc.load(Relaxed),
            self.cleaned.load(Relaxed),
            self.crash_remounts.load(Relaxed),
            self.clean_remounts.load(Relaxed),
        ];
        println!(
            "{what}: {} ops, {} errors agreed, {} ENOSPC, {} blocks cleaned, {} crash and {} \
             clean remounts",
            v[0], v[1], v[2], v[3], v[4], v[5]
        );
        v
    }
}

/// An offset or length in quarters of a chunk plus a small delta, so chunk boundaries and
/// their neighbours come up often.
#[derive(Clone, Copy, Debug)]
struct Q(u8, i8);

impl Q {
    fn bytes(self, chunk: usize) -> u64 {
        (self.0 as i64 * chunk as i64 / 4 + self.1 as i64).max(0) as u64
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        dir: u8,
        name: u8,
        kind: u8,
    },
    Write {
        obj: u8,
        off: Q,
        len: Q,
        seed: u8,
    },
    Truncate {
        obj: u8,
        size: Q,
    },
    Read {
        obj: u8,
        off: Q,
        len: Q,
    },
    /// fallocate PUNCH_HOLE | KEEP_SIZE.
    PunchHole {
        obj: u8,
        off: Q,
        len: Q,
    },
    /// fallocate ZERO_RANGE, with or without KEEP_SIZE.
    ZeroRange {
        obj: u8,
        off: Q,
        len: Q,
        keep: bool,
    },
    Unlink {
        dir: u8,
        name: u8,
    },
    Rmdir {
        dir: u8,
        name: u8,
    },
    Rename {
        dir: u8,
        name: u8,
        dir2: u8,
        name2: u8,
        mode: u8,
    },
    Link {
        dir: u8,
        name: u8,
        dir2: u8,
        name2: u8,
    },
    Fsync {
        obj: u8,
    },
    Sync,
    SetXattr {
        obj: u8,
        key: u8,
        len: u8,
        mode: u8,
    },
    BigXattr {
        obj: u8,
        key: u8,
        extra: u8,
    },
    RemoveXattr {
        obj: u8,
        key: u8,
    },
    /// chmod (0), chown (1), utimens of both times (2) or of mtime only (3).
    SetAttr {
        obj: u8,
        what: u8,
        val: u8,
    },
    /// Appends `percent` of the device's capacity to a file.
    Fill {
        obj: u8,
        percent: u8,
    },
    Gc,
    Remount {
        crash: bool,
    },
}

fn q(max_quarters: u8) -> impl Strategy<Value = Q> {
    (0..max_quarters, -2i8..=2).prop_map(|(a, b)| Q(a, b))
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let b = any::<u8>;
    prop_oneof![
        8 => (b(), 0..6u8, 0..6u8).prop_map(|(dir, name, kind)| Op::Create { dir, name, kind }),
        12 => (b(), q(48), q(16), b())
            .prop_map(|(obj, off, len, seed)| Op::Write { obj, off, len, seed }),
        4 => (b(), q(48)).prop_map(|(obj, size)| Op::Truncate { obj, size }),
        4 => (b(), q(48), q(16)).prop_map(|(obj, off, len)| Op::Read { obj, off, len }),
        3 => (b(), q(48), q(24)).prop_map(|(obj, off, len)| Op::PunchHole { obj, off, len }),
        2 => (b(), q(48), q(16), any::<bool>())
            .prop_map(|(obj, off, len, keep)| Op::ZeroRange { obj, off, len, keep }),
        4 => (b(), 0..6u8).prop_map(|(dir, name)| Op::Unlink { dir, name }),
        2 => (b(), 0..6u8).prop_map(|(dir, name)| Op::Rmdir { dir, name }),
        6 => (b(), 0..6u8, b(), 0..6u8, 0..3u8).prop_map(|(dir, name, dir2, name2, mode)| {
            Op::Rename { dir, name, dir2, name2, mode }
        }),
        3 => (b(), 0..6u8, b(), 0..6u8)
            .prop_map(|(dir, name, dir2, name2)| Op::Link { dir, name, dir2, name2 }),
        3 => b().prop_map(|obj| Op::Fsync { obj }),
        1 => Just(Op::Sync),
        3 => (b(), 0..3u8, 0..64u8, 0..3u8)
            .prop_map(|(obj, key, len, mode)| Op::SetXattr { obj, key, len, mode }),
        1 => (b(), 0..3u8, b()).prop_map(|(obj, key, extra)| Op::BigXattr { obj, key, extra }),
        2 => (b(), 0..3u8).prop_map(|(obj, key)| Op::RemoveXattr { obj, key }),
        3 => (b(), 0..4u8, b()).prop_map(|(obj, what, val)| Op::SetAttr { obj, what, val }),
        2 => (b(), 5..45u8).prop_map(|(obj, percent)| Op::Fill { obj, percent }),
        1 => Just(Op::Gc),
        2 => any::<bool>().prop_map(|crash| Op::Remount { crash }),
    ]
}

// ---------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Debug)]
struct MObj {
    kind: Kind,
    /// Files: contents, with what has been made durable.
    data: FileHistory,
    target: Vec<u8>,
    rdev: u64,
    /// Names (each extra one is a hard link).
    names: Vec<(Ino, Vec<u8>)>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    perm: u32,
    uid: u32,
    gid: u32,
    times: Times,
}

/// What the model knows of an object's times: the last ones seen, and what the
/// operations since must have done to them.
#[derive(Clone, Debug, Default)]
struct Times {
    /// atime, mtime, ctime as last seen (none yet for a new object).
    seen: Option<[Time; 3]>,
    /// mtime and ctime must have moved forward since.
    mtime_moves: bool,
    ctime_moves: bool,
    /// utimens set these exactly.
    set_atime: Option<Time>,
    set_mtime: Option<Time>,
}

impl MObj {
    fn new(kind: Kind, names: Vec<(Ino, Vec<u8>)>) -> MObj {
        MObj {
            kind,
            data: FileHistory::default(),
            target: Vec::new(),
            rdev: 0,
            names,
            xattrs: Vec::new(),
            perm: 0,
            uid: 0,
            gid: 0,
            times: Times::default(),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Model {
    objs: BTreeMap<Ino, MObj>,
    dirs: BTreeMap<Ino, BTreeMap<Vec<u8>, Ino>>,
}

impl Model {
    fn new() -> Model {
        let mut m = Model::default();
        let mut root = MObj::new(Kind::Dir, Vec::new());
        root.perm = 0o755;
        m.objs.insert(ROOT_INO, root);
        m.dirs.insert(ROOT_INO, BTreeMap::new());
        m
    }

    fn nlink(&self, ino: Ino) -> u32 {
        let o = &self.objs[&ino];
        match o.kind {
            Kind::Dir => {
                2 + self.dirs[&ino]
                    .values()
                    .filter(|c| self.objs[c].kind == Kind::Dir)
                    .count() as u32
            }
            _ => o.names.len() as u32,
        }
    }

    fn size(&self, ino: Ino) -> u64 {
        let o = &self.objs[&ino];
        match o.kind {
            Kind::File => o.data.current.len() as u64,
            Kind::Symlink => o.target.len() as u64,
            _ => 0,
        }
    }

    /// Directory choice: every directory, plus one non-directory (for ENOTDIR).
    fn pick_dir(&self, sel: u8) -> Ino {
        let mut list: Vec<Ino> = self.dirs.keys().copied().collect();
        if let Some((&i, _)) = self.objs.iter().find(|(_, o)| o.kind != Kind::Dir) {
            list.push(i);
        }
        list[sel as usize % list.len()]
    }

    fn pick_obj(&self, sel: u8) -> Ino {
        let list: Vec<Ino> = self.objs.keys().copied().collect();
        list[sel as usize % list.len()]
    }

    /// For data operations: a file most of the time (if there is one), else anything.
    fn pick_file(&self, sel: u8) -> Ino {
        let files: Vec<Ino> = self
            .objs
            .iter()
            .filter(|(_, o)| o.kind == Kind::File)
            .map(|(&i, _)| i)
            .collect();
        if sel < 224 && !files.is_empty() {
            files[sel as usize % files.len()]
        } else {
            self.pick_obj(sel)
        }
    }

    fn is_dir(&self, ino: Ino) -> bool {
        self.objs[&ino].kind == Kind::Dir
    }

    fn lookup(&self, dir: Ino, name: &[u8]) -> std::result::Result<Option<Ino>, i32> {
        if !self.is_dir(dir) {
            return Err(20);
        }
        Ok(self.dirs[&dir].get(name).copied())
    }

    /// Is `anc` the directory `dir` or above it?
    fn is_ancestor(&self, anc: Ino, mut dir: Ino) -> bool {
        loop {
            if dir == anc {
                return true;
            }
            if dir == ROOT_INO {
                return false;
            }
            dir = self.objs[&dir].names[0].0;
        }
    }

    fn add_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        self.dirs
            .get_mut(&parent)
            .unwrap()
            .insert(name.to_vec(), ino);
    }

    /// Removes a name from the directory and the object; an object with no names left
    /// is gone.
    fn remove_name(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        self.dirs.get_mut(&parent).unwrap().remove(name);
        let o = self.objs.get_mut(&ino).unwrap();
        o.names.retain(|(p, n)| !(*p == parent && n == name));
        if o.names.is_empty() {
            self.objs.remove(&ino);
            self.dirs.remove(&ino);
        }
    }

    /// Pages the live data and headers need at least: a header per object, one per hard
    /// link, and an attribute set's header and (when big) its data.
    fn pages(&self, chunk: usize) -> u64 {
        self.objs
            .values()
            .map(|o| {
                let xattr_bytes: usize = o.xattrs.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
                let xattr_pages = match xattr_bytes {
                    0 => 0,
                    n => 1 + (n + 100).div_ceil(chunk) as u64,
                };
                1 + o.names.len().saturating_sub(1) as u64
                    + xattr_pages
                    + o.data.current.len().div_ceil(chunk) as u64
            })
            .sum()
    }

    /// Marks times an operation must have moved.
    fn touch(&mut self, ino: Ino, mtime: bool) {
        if let Some(o) = self.objs.get_mut(&ino) {
            o.times.ctime_moves = true;
            o.times.mtime_moves |= mtime;
        }
    }
}

// ---------------------------------------------------------------------------------------
// The harness.

struct Run {
    dev: Dev,
    /// The mkfs profile under test.
    profile: &'static str,
    fs: Option<Fs>,
    m: Model,
    chunk: usize,
    total_chunks: u64,
    /// Where we are, for failure messages.
    step: usize,
    cov: &'static Coverage,
    /// The operation just checked hit ENOSPC: it may have changed times part way.
    lenient: bool,
    /// The check follows a remount (`Some(crash)`).
    remounted: Option<bool>,
    /// Operations still to run unchecked after a clean remount (see `remount`).
    unchecked: u32,
}

type Res<T> = std::result::Result<T, i32>;

fn en<T>(r: Result<T>) -> Res<T> {
    r.map_err(|e| e.errno())
}

impl Run {
    fn fs(&mut self) -> &mut Fs {
        self.fs.as_mut().unwrap()
    }

    fn ctx(&self, op: &Op) -> String {
        format!(
            "{} {} step {} {op:?}",
            self.profile,
            self.dev.name(),
            self.step
        )
    }

    /// ENOSPC is a right answer only when the device is nearly full.
    fn nearly_full(&self) -> bool {
        self.nearly_full_with(0)
    }

    /// ... counting `extra` more bytes of data.
    fn nearly_full_with(&self, extra: usize) -> bool {
        let pages = self.m.pages(self.chunk) + extra.div_ceil(self.chunk) as u64;
        pages * 100 >= self.total_chunks * 70
    }

    /// Compares a result with the model's expectation; ENOSPC is accepted instead of
    /// success on a nearly full device, and then the model must not apply the operation.
    fn agree<T: std::fmt::Debug>(&mut self, op: &Op, got: Res<T>, want: Res<()>) -> bool {
        match (&got, want) {
            (Ok(_), Ok(())) => true,
            (Err(e), Err(w)) if *e == w => {
                self.cov.errors.fetch_add(1, Relaxed);
                false
            }
            (Err(ENOSPC), Ok(())) if self.nearly_full() => {
                self.cov.enospc.fetch_add(1, Relaxed);
                false
            }
            _ => panic!(
                "{}: file system says {got:?}, model says {want:?}{}",
                self.ctx(op),
                if matches!(got, Err(ENOSPC)) {
                    format!(
                        " (ENOSPC with the model at {} of {} chunks)",
                        self.m.pages(self.chunk),
                        self.total_chunks
                    )
                } else {
                    String::new()
                }
            ),
        }
    }

    fn apply(&mut self, op: &Op) {
        let c = self.chunk;
        let enospc_before = self.cov.enospc.load(Relaxed);
        self.apply_op(op, c);
        self.lenient = self.cov.enospc.load(Relaxed) != enospc_before;
        if self.unchecked > 0 {
            self.unchecked -= 1;
            // Times are checked against the last check: none was made.
            for o in self.m.objs.values_mut() {
                o.times = Times::default();
            }
        } else if !matches!(op, Op::Remount { .. }) {
            self.check_structure(op);
        }
    }

    fn apply_op(&mut self, op: &Op, c: usize) {
        match *op {
            Op::Create { dir, name, kind } => {
                let p = self.m.pick_dir(dir);
                let name = NAMES[name as usize];
                // Some targets too long for a header page: they go to data chunks.
                let mut target = format!("target-{}", self.step).into_bytes();
                if self.step.is_multiple_of(3) {
                    target = pattern(self.step as u64, 1 + (self.step * 37) % SYMLINK_MAX)
                        .into_iter()
                        .map(|b| b'a' + b % 26)
                        .collect();
                }
                let (kind, rdev) = match kind {
                    0 | 1 => (Kind::File, 0),
                    2 => (Kind::Dir, 0),
                    3 => (Kind::Symlink, 0),
                    4 => (Kind::Fifo, 0),
                    _ => (Kind::CharDev, 0x0102),
                };
                let want = match self.m.lookup(p, name) {
                    Err(e) => Err(e),
                    Ok(Some(_)) => Err(17),
                    Ok(None) => Ok(()),
                };
                let new = NewObject {
                    kind,
                    perm: 0o640,
                    uid: 7,
                    gid: 8,
                    rdev,
                    target: &target,
                };
                let got = en(self.fs().create(p, name, new));
                if self.agree(op, got.as_ref().map(|_| ()).map_err(|e| *e), want) {
                    let a = got.unwrap();
                    assert!(
                        !self.m.objs.contains_key(&a.ino),
                        "{}: ino reused",
                        self.ctx(op)
                    );
                    assert_eq!(a.kind, kind);
                    let mut o = MObj::new(kind, vec![(p, name.to_vec())]);
                    if kind == Kind::Symlink {
                        o.target = target;
                    }
                    o.rdev = rdev;
                    (o.perm, o.uid, o.gid) = (0o640, 7, 8);
                    self.m.objs.insert(a.ino, o);
                    self.m.touch(p, true);
                    if kind == Kind::Dir {
                        self.m.dirs.insert(a.ino, BTreeMap::new());
                    }
                    self.m.add_name(a.ino, p, name);
                }
            }
            Op::Write {
                obj,
                off,
                len,
                seed,
            } => {
                let ino = self.m.pick_file(obj);
                let off = off.bytes(c);
                let data = pattern(
                    u64::from(seed) << 32 | self.step as u64,
                    len.bytes(c) as usize,
                );
                self.write(op, ino, off, &data);
            }
            Op::Fill { obj, percent } => {
                let ino = self.m.pick_file(obj);
                let len = self.total_chunks as usize * c * percent as usize / 100;
                let off = self.m.size(ino);
                let data = pattern(self.step as u64, len);
                self.write(op, ino, off, &data);
            }
            Op::Truncate { obj, size } => {
                let ino = self.m.pick_file(obj);
                let size = size.bytes(c);
                let want = match self.m.objs[&ino].kind {
                    Kind::Dir => Err(21),
                    Kind::File => Ok(()),
                    _ => Err(22),
                };
                let set = SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                };
                let got = en(self.fs().setattr(ino, set));
                if self.agree(op, got.as_ref().map(|_| ()).map_err(|e| *e), want) {
                    assert_eq!(got.unwrap().size, size, "{}", self.ctx(op));
                    if size != self.m.size(ino) {
                        self.m.touch(ino, true);
                    }
                    self.m.objs.get_mut(&ino).unwrap().data.truncate(size);
                }
            }
            Op::Read { obj, off, len } => {
                let ino = self.m.pick_file(obj);
                let (off, len) = (off.bytes(c), len.bytes(c) as usize);
                let mut buf = vec![0xEE; len];
                let got = en(self.fs().read(ino, off, &mut buf));
                let o = &self.m.objs[&ino];
                let want: Res<Vec<u8>> = match o.kind {
                    Kind::Dir => Err(21),
                    Kind::File => {
                        let cur = &o.data.current;
                        let s = (off as usize).min(cur.len());
                        let e = (s + len).min(cur.len());
                        Ok(cur[s..e].to_vec())
                    }
                    _ => Err(22),
                };
                match (got, want) {
                    (Ok(n), Ok(w)) => {
                        assert_eq!(n, w.len(), "{}: read length", self.ctx(op));
                        assert_bytes(&buf[..n], &w, &self.ctx(op));
                    }
                    (Err(e), Err(w)) if e == w => {}
                    (g, w) => panic!("{}: read gave {g:?}, model {w:?}", self.ctx(op)),
                }
            }
            Op::PunchHole { obj, off, len } => {
                let ino = self.m.pick_file(obj);
                let (off, len) = (off.bytes(c), len.bytes(c));
                let got = en(self.fs().punch_hole(ino, off, len));
                if self.no_punch(op, &got) {
                    return;
                }
                self.punch_or_zero(op, ino, off, len, None, got);
            }
            Op::ZeroRange {
                obj,
                off,
                len,
                keep,
            } => {
                let ino = self.m.pick_file(obj);
                let (off, len) = (off.bytes(c), len.bytes(c));
                let got = en(self.fs().zero_range(ino, off, len, keep));
                if self.no_punch(op, &got) {
                    return;
                }
                self.punch_or_zero(op, ino, off, len, Some(keep), got);
            }
            Op::Unlink { dir, name } => {
                let p = self.m.pick_dir(dir);
                let name = NAMES[name as usize];
                let (want, target) = match self.m.lookup(p, name) {
                    Err(e) => (Err(e), None),
                    Ok(None) => (Err(2), None),
                    Ok(Some(i)) if self.m.is_dir(i) => (Err(21), None),
                    Ok(Some(i)) => (Ok(()), Some(i)),
                };
                let got = en(self.fs().unlink(p, name));
                self.strict(op, &got, want);
                if got.is_ok() {
                    self.m.remove_name(target.unwrap(), p, name);
                    self.m.touch(target.unwrap(), false);
                    self.m.touch(p, true);
                }
            }
            Op::Rmdir { dir, name } => {
                let p = self.m.pick_dir(dir);
                let name = NAMES[name as usize];
                let (want, target) = match self.m.lookup(p, name) {
                    Err(e) => (Err(e), None),
                    Ok(None) => (Err(2), None),
                    Ok(Some(i)) if !self.m.is_dir(i) => (Err(20), None),
                    Ok(Some(i)) if !self.m.dirs[&i].is_empty() => (Err(39), None),
                    Ok(Some(i)) => (Ok(()), Some(i)),
                };
                let got = en(self.fs().rmdir(p, name));
                self.strict(op, &got, want);
                if got.is_ok() {
                    self.m.remove_name(target.unwrap(), p, name);
                    self.m.touch(p, true);
                }
            }
            Op::Rename {
                dir,
                name,
                dir2,
                name2,
                mode,
            } => self.rename(op, dir, name, dir2, name2, mode),
            Op::Link {
                dir,
                name,
                dir2,
                name2,
            } => {
                let p = self.m.pick_dir(dir);
                let np = self.m.pick_dir(dir2);
                let (name, name2) = (NAMES[name as usize], NAMES[name2 as usize]);
                let src = match self.m.lookup(p, name) {
                    Err(e) => Err(e),
                    Ok(None) => Err(2),
                    Ok(Some(i)) => Ok(i),
                };
                let got = match src {
                    Err(_) => en(self.fs().lookup(p, name)).map(|_| ()),
                    Ok(i) => en(self.fs().link(i, np, name2)).map(|_| ()),
                };
                let want = src.and_then(|i| {
                    if self.m.is_dir(i) {
                        return Err(1);
                    }
                    match self.m.lookup(np, name2)? {
                        Some(_) => Err(17),
                        None => Ok(()),
                    }
                });
                if self.agree(op, got, want) {
                    let i = src.unwrap();
                    self.m
                        .objs
                        .get_mut(&i)
                        .unwrap()
                        .names
                        .push((np, name2.to_vec()));
                    self.m.add_name(i, np, name2);
                    self.m.touch(i, false);
                    self.m.touch(np, true);
                }
            }
            Op::Fsync { obj } => {
                let ino = self.m.pick_file(obj);
                let got = en(self.fs().fsync(ino));
                if self.agree(op, got, Ok(())) {
                    self.m.objs.get_mut(&ino).unwrap().data.synced();
                }
            }
            Op::Sync => {
                let got = en(self.fs().sync());
                if self.agree(op, got, Ok(())) {
                    for o in self.m.objs.values_mut() {
                        o.data.synced();
                    }
                }
            }
            Op::SetXattr {
                obj,
                key,
                len,
                mode,
            } => {
                let value = pattern(u64::from(len) + 1000 * self.step as u64, len as usize);
                self.setxattr(op, obj, key, value, mode);
            }
            Op::BigXattr { obj, key, extra } => {
                // Around the size where the set stops fitting its header page, several
                // pages, the largest value Linux allows, and one byte more.
                let len = match extra % 8 {
                    0..=3 => self.chunk - 150 + extra as usize,
                    4 | 5 => self.chunk * 3 + extra as usize,
                    6 => XATTR_SIZE_MAX,
                    _ => XATTR_SIZE_MAX + 1,
                };
                let value = pattern(self.step as u64, len);
                self.setxattr(op, obj, key, value, 0);
            }
            Op::RemoveXattr { obj, key } => {
                let ino = self.m.pick_obj(obj);
                let key = XATTR_KEYS[key as usize];
                let has = self.m.objs[&ino].xattrs.iter().any(|(k, _)| k == key);
                let got = en(self.fs().removexattr(ino, key));
                let want = if has { Ok(()) } else { Err(61) };
                if self.agree(op, got, want) {
                    self.m
                        .objs
                        .get_mut(&ino)
                        .unwrap()
                        .xattrs
                        .retain(|(k, _)| k != key);
                    self.m.touch(ino, false);
                }
            }
            Op::SetAttr { obj, what, val } => self.setattr(op, obj, what, val),
            Op::Gc => {
                let got = en(self.fs().gc(4));
                self.agree(op, got, Ok(()));
            }
            Op::Remount { crash } => self.remount(op, crash),
        }
    }

    /// Operations that must not fail for lack of space (deletes).
    fn strict(&self, op: &Op, got: &Res<()>, want: Res<()>) {
        assert_eq!(*got, want, "{}", self.ctx(op));
    }

    fn write(&mut self, op: &Op, ino: Ino, off: u64, data: &[u8]) {
        let kind = self.m.objs[&ino].kind;
        let got = en(self.fs().write(ino, off, data));
        let want: Res<usize> = match kind {
            Kind::Dir => Err(21),
            Kind::File => Ok(data.len()),
            _ => Err(22),
        };
        let n = match (got, want) {
            (Ok(n), Ok(w)) if n == w => n,
            (Ok(n), Ok(w)) if n < w && n > 0 && self.nearly_full_with(data.len()) => {
                self.cov.enospc.fetch_add(1, Relaxed);
                n
            }
            (Err(ENOSPC), Ok(_)) if self.nearly_full_with(data.len()) => {
                self.cov.enospc.fetch_add(1, Relaxed);
                0
            }
            (Err(e), Err(w)) if e == w => {
                self.cov.errors.fetch_add(1, Relaxed);
                return;
            }
            (g, w) => panic!(
                "{}: write gave {g:?}, model {w:?} (model at {} of {} chunks)",
                self.ctx(op),
                self.m.pages(self.chunk),
                self.total_chunks
            ),
        };
        if n > 0 {
            self.m
                .objs
                .get_mut(&ino)
                .unwrap()
                .data
                .write(off, &data[..n]);
            self.m.touch(ino, true);
        }
    }

    /// yaffs1 punches no holes (no write order to record one), nor does mnfs (its files own
    /// whole blocks, mapped by block): EOPNOTSUPP, nothing done.
    fn no_punch(&self, op: &Op, got: &Res<()>) -> bool {
        if self.profile != "yaffs1" && self.profile != "mnfs" {
            return false;
        }
        assert_eq!(
            *got,
            Err(95),
            "{}: {} punches no holes",
            self.ctx(op),
            self.profile
        );
        true
    }

    /// A punch (`zero`: None) or a zeroing (Some(keep_size)) gave `got`: the model does
    /// the same. Both are durable when they return (the whole file: its cached chunk and
    /// header are written), except a punch wholly past the end, which does nothing.
    /// Refused for want of room, the range may be part done: each byte of it as before
    /// or zero, the size as before or grown.
    fn punch_or_zero(
        &mut self,
        op: &Op,
        ino: Ino,
        off: u64,
        len: u64,
        zero: Option<bool>,
        got: Res<()>,
    ) {
        let kind = self.m.objs[&ino].kind;
        let want: Res<()> = match kind {
            Kind::Dir => Err(21),
            Kind::File if len == 0 => Err(22),
            Kind::File => Ok(()),
            _ => Err(19),
        };
        let size = self.m.size(ino);
        let new_size = match zero {
            Some(false) => size.max(off + len),
            _ => size,
        };
        let to = (off + len).min(new_size);
        if got == Err(ENOSPC) && want.is_ok() && self.nearly_full() {
            self.cov.enospc.fetch_add(1, Relaxed);
            let ctx = self.ctx(op);
            let actual = read_all(self.fs(), ino).unwrap();
            let h = &mut self.m.objs.get_mut(&ino).unwrap().data;
            let n = actual.len() as u64;
            assert!(
                n == size || n == new_size,
                "{ctx}: size {n} after a refused call"
            );
            for (i, &b) in actual.iter().enumerate() {
                let i = i as u64;
                let was = h.current.get(i as usize).copied().unwrap_or(0);
                let inside = i >= off && i < to;
                assert!(
                    b == was || (inside && b == 0),
                    "{ctx}: byte {i} is {b:#04x}, was {was:#04x}, after a refused call"
                );
            }
            if n != size {
                h.truncate(n);
            }
            if off < to.min(n) {
                h.write(off, &actual[off as usize..to.min(n) as usize]);
            }
            // Times may have moved or not (`lenient`).
            return;
        }
        if !self.agree(op, got, want) {
            return;
        }
        let h = &mut self.m.objs.get_mut(&ino).unwrap().data;
        if new_size > size {
            h.truncate(new_size);
        }
        if off < to {
            h.write(off, &vec![0; (to - off) as usize]);
        }
        if zero.is_some() || off < size {
            h.synced();
            self.m.touch(ino, true);
        }
    }

    fn setxattr(&mut self, op: &Op, obj: u8, key: u8, value: Vec<u8>, mode: u8) {
        let ino = self.m.pick_obj(obj);
        let key = XATTR_KEYS[key as usize];
        let mode = [XattrMode::Set, XattrMode::Create, XattrMode::Replace][mode as usize % 3];
        let o = &self.m.objs[&ino];
        let pos = o.xattrs.iter().position(|(k, _)| k == key);
        let mut after = o.clone();
        match pos {
            Some(i) => after.xattrs[i].1 = value.clone(),
            None => after.xattrs.push((key.to_vec(), value.clone())),
        }
        let want = match (mode, pos) {
            _ if value.len() > XATTR_SIZE_MAX => Err(E2BIG),
            (XattrMode::Create, Some(_)) => Err(17),
            (XattrMode::Replace, None) => Err(61),
            _ => Ok(()),
        };
        let got = en(self.fs().setxattr(ino, key, &value, mode));
        if self.agree(op, got, want) {
            self.m.objs.insert(ino, after);
            self.m.touch(ino, false);
        }
    }

    fn setattr(&mut self, op: &Op, obj: u8, what: u8, val: u8) {
        let ino = self.m.pick_obj(obj);
        let v = u32::from(val);
        let mut set = SetAttr::default();
        match what {
            0 => set.perm = Some(0o600 | (v << 3 & 0o7077)),
            1 => (set.uid, set.gid) = (Some(v), Some(v + 1000)),
            2 => {
                // Before 1970 and after 2262: the whole range Linux allows.
                set.atime = Some(Time::new(i64::from(val) * 1000 - 100_000, v * 3));
                set.mtime = Some(Time::new(10_413_792_000 + i64::from(val), 7));
            }
            _ => set.mtime = Some(Time::new(1_700_000_000 + i64::from(val), v)),
        }
        let got = en(self.fs().setattr(ino, set.clone()));
        if self.agree(op, got, Ok(())) {
            let o = self.m.objs.get_mut(&ino).unwrap();
            o.perm = set.perm.unwrap_or(o.perm);
            o.uid = set.uid.unwrap_or(o.uid);
            o.gid = set.gid.unwrap_or(o.gid);
            o.times.set_atime = set.atime;
            o.times.set_mtime = set.mtime;
            self.m.touch(ino, false);
        }
    }

    fn rename(&mut self, op: &Op, dir: u8, name: u8, dir2: u8, name2: u8, mode: u8) {
        let p = self.m.pick_dir(dir);
        let np = self.m.pick_dir(dir2);
        let (name, name2) = (NAMES[name as usize], NAMES[name2 as usize]);
        let mode = [
            RenameMode::Replace,
            RenameMode::NoReplace,
            RenameMode::Exchange,
        ][mode as usize];
        // What the model expects, and what to do.
        enum Act {
            Nothing,
            Move(Ino, Option<Ino>),
            Swap(Ino, Ino),
        }
        let m = &self.m;
        let plan = (|| -> Res<Act> {
            let src = m.lookup(p, name)?.ok_or(2)?;
            let dst = m.lookup(np, name2)?;
            match (mode, dst) {
                (RenameMode::NoReplace, Some(_)) => return Err(17),
                (RenameMode::Exchange, None) => return Err(2),
                _ => {}
            }
            if dst == Some(src) {
                return Ok(Act::Nothing);
            }
            if m.is_dir(src) && m.is_ancestor(src, np) {
                return Err(22);
            }
            if let (RenameMode::Exchange, Some(d)) = (mode, dst) {
                if m.is_dir(d) && m.is_ancestor(d, p) {
                    return Err(22);
                }
                return Ok(Act::Swap(src, d));
            }
            if let Some(d) = dst {
                match (m.is_dir(src), m.is_dir(d)) {
                    (true, false) => return Err(20),
                    (false, true) => return Err(21),
                    (true, true) if !m.dirs[&d].is_empty() => return Err(39),
                    _ => {}
                }
            }
            Ok(Act::Move(src, dst))
        })();
        let got = en(self.fs().rename(p, name, np, name2, mode));
        let want = plan.as_ref().map(|_| ()).map_err(|e| *e);
        if !self.agree(op, got, want) {
            return;
        }
        let rename_in = |o: &mut MObj, from: (Ino, &[u8]), to: (Ino, &[u8])| {
            if let Some(n) = o
                .names
                .iter_mut()
                .find(|(a, b)| *a == from.0 && b == from.1)
            {
                *n = (to.0, to.1.to_vec());
            }
        };
        match plan.unwrap() {
            Act::Nothing => {}
            Act::Move(src, dst) => {
                self.m.touch(src, false);
                self.m.touch(p, true);
                self.m.touch(np, true);
                if let Some(d) = dst {
                    self.m.remove_name(d, np, name2);
                    self.m.touch(d, false);
                }
                self.m.dirs.get_mut(&p).unwrap().remove(name);
                rename_in(self.m.objs.get_mut(&src).unwrap(), (p, name), (np, name2));
                self.m.add_name(src, np, name2);
            }
            Act::Swap(a, b) => {
                for x in [a, b] {
                    self.m.touch(x, false);
                }
                self.m.touch(p, true);
                self.m.touch(np, true);
                rename_in(self.m.objs.get_mut(&a).unwrap(), (p, name), (np, name2));
                rename_in(self.m.objs.get_mut(&b).unwrap(), (np, name2), (p, name));
                self.m.add_name(a, np, name2);
                self.m.add_name(b, p, name);
            }
        }
    }

    fn remount(&mut self, op: &Op, crash: bool) {
        self.unchecked = 0;
        let fs = self.fs.take().unwrap();
        let ctx = self.ctx(op);
        self.cov
            .cleaned
            .fetch_add(fs.stats().blocks_cleaned, Relaxed);
        let counter = if crash {
            &self.cov.crash_remounts
        } else {
            &self.cov.clean_remounts
        };
        counter.fetch_add(1, Relaxed);
        let mut fs = if crash {
            let (mut flash, nv) = fs.into_parts();
            flash.power_cycle().unwrap();
            // Whatever the NVRAM had not persisted is dropped or torn (seeded by the step).
            let nv = nv.map(|mut n| {
                n.crash(self.step as u64);
                n
            });
            mount_parts(flash, nv).unwrap_or_else(|e| panic!("{ctx}: mount after a crash: {e}"))
        } else {
            let (flash, nv) = fs
                .unmount_parts()
                .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
            for o in self.m.objs.values_mut() {
                o.data.synced();
            }
            mount_parts(flash, nv).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"))
        };
        if !crash && self.step % 2 == 1 {
            // Every other clean remount goes on unchecked (each call's answer is still
            // checked) until the next remount: a MiNV mount leaves objects in the NVRAM
            // until a call reaches them, and fsck or a full listing here would read them
            // all before the operations get to. The next remount or the end checks
            // everything.
            self.fs = Some(fs);
            self.unchecked = u32::MAX;
            return;
        }
        assert_fsck(&mut fs, &ctx);
        // File contents: exact after a clean unmount; after a crash, within what may have
        // survived, and that is the truth from now on.
        let files: Vec<Ino> = self
            .m
            .objs
            .iter()
            .filter(|(_, o)| o.kind == Kind::File)
            .map(|(&i, _)| i)
            .collect();
        for ino in files {
            let got = read_all(&mut fs, ino)
                .unwrap_or_else(|e| panic!("{ctx}: read of {ino} after remount: {e}"));
            let h = &mut self.m.objs.get_mut(&ino).unwrap().data;
            if let Err(why) = h.check(&got) {
                panic!("{ctx}: file {ino} after remount (crash {crash}): {why}");
            }
            h.adopt(got);
        }
        self.fs = Some(fs);
        self.remounted = Some(crash);
        self.check_all(op);
        self.remounted = None;
    }

    /// Names, kinds, sizes and link counts of everything, against the model.
    fn check_structure(&mut self, op: &Op) {
        let ctx = self.ctx(op);
        let fs = self.fs.as_mut().unwrap();
        for (&d, entries) in &self.m.dirs {
            let got: Vec<(Vec<u8>, Ino, Kind)> = fs
                .readdir(d)
                .unwrap_or_else(|e| panic!("{ctx}: readdir {d}: {e}"))
                .into_iter()
                .map(|e| (e.name, e.ino, e.kind))
                .collect();
            let want: Vec<(Vec<u8>, Ino, Kind)> = entries
                .iter()
                .map(|(n, &i)| (n.clone(), i, self.m.objs[&i].kind))
                .collect();
            assert_eq!(got, want, "{ctx}: listing of directory {d}");
        }
        let inos: Vec<Ino> = self.m.objs.keys().copied().collect();
        for ino in inos {
            let a = fs
                .getattr(ino)
                .unwrap_or_else(|e| panic!("{ctx}: getattr {ino}: {e}"));
            let o = &self.m.objs[&ino];
            assert_eq!(
                (a.kind, a.size, a.nlink, a.rdev, a.perm, a.uid, a.gid),
                (
                    o.kind,
                    self.m.size(ino),
                    self.m.nlink(ino),
                    o.rdev,
                    o.perm,
                    o.uid,
                    o.gid
                ),
                "{ctx}: attributes of {ino}"
            );
            let now = [a.atime, a.mtime, a.ctime];
            let is_dir = o.kind == Kind::Dir;
            let t = &mut self.m.objs.get_mut(&ino).unwrap().times;
            if let Some([sa, sm, sc]) = t.seen {
                let why = format!("{ctx}: times of {ino}: {t:?}, now {now:?}");
                match self.remounted {
                    // A crash may lose times changed since the last header write.
                    Some(true) => {}
                    // A clean unmount wrote them all (reads since may move atime).
                    Some(false) => assert!(
                        (a.atime == sa || a.atime > sc) && a.mtime == sm && a.ctime == sc,
                        "{why}"
                    ),
                    None => {
                        // The listing above reads directories: relatime may move their atime.
                        // A read moves atime to the clock, which is past every ctime.
                        match t.set_atime {
                            Some(x) if !is_dir => assert_eq!(a.atime, x, "{why}: atime"),
                            Some(_) => {}
                            None => assert!(
                                a.atime == sa || a.atime > sc,
                                "{why}: atime moved, not to the clock"
                            ),
                        }
                        if let Some(x) = t.set_mtime {
                            assert_eq!(a.mtime, x, "{why}: mtime");
                        } else if t.mtime_moves {
                            assert_eq!(a.mtime, a.ctime, "{why}: mtime did not move with ctime");
                        } else if !self.lenient {
                            assert_eq!(a.mtime, sm, "{why}: mtime changed");
                        }
                        if t.ctime_moves {
                            assert!(a.ctime > sc, "{why}: ctime did not move");
                        } else if self.lenient {
                            assert!(a.ctime >= sc, "{why}: ctime went back");
                        } else {
                            assert_eq!(a.ctime, sc, "{why}: ctime changed");
                        }
                    }
                }
            }
            *t = Times {
                seen: Some(now),
                ..Times::default()
            };
        }
        let objects = fs.statfs().objects;
        assert_eq!(
            objects,
            self.m.objs.len() as u64 - 1,
            "{ctx}: statfs counts objects the model does not have"
        );
    }

    /// Everything, contents included, and fsck.
    fn check_all(&mut self, op: &Op) {
        self.check_structure(op);
        let ctx = self.ctx(op);
        let inos: Vec<Ino> = self.m.objs.keys().copied().collect();
        for ino in inos {
            let o = self.m.objs[&ino].clone();
            let fs = self.fs();
            match o.kind {
                Kind::File => {
                    let got = read_all(fs, ino).unwrap();
                    assert_bytes(&got, &o.data.current, &format!("{ctx}: file {ino}"));
                }
                Kind::Symlink => assert_eq!(fs.readlink(ino).unwrap(), o.target, "{ctx}"),
                _ => {}
            }
            let mut got = fs.listxattr(ino).unwrap();
            got.sort();
            let mut want: Vec<Vec<u8>> = o.xattrs.iter().map(|(k, _)| k.clone()).collect();
            want.sort();
            assert_eq!(got, want, "{ctx}: xattr names of {ino}");
            for (k, v) in &o.xattrs {
                assert_eq!(&fs.getxattr(ino, k).unwrap(), v, "{ctx}: xattr of {ino}");
            }
        }
        assert_fsck(self.fs(), &ctx);
    }
}

fn run_case(dev: Dev, profile: &'static str, ops: &[Op], cov: &'static Coverage) {
    let config = FsConfig::profile(profile, dev.blocks()).expect("a profile");
    let mut fs = format_with(dev, config);
    let total_chunks = fs.statfs().total_chunks;
    let _ = fs.fsync(ROOT_INO);
    let mut run = Run {
        dev,
        profile,
        fs: Some(fs),
        m: Model::new(),
        chunk: dev.chunk(),
        total_chunks,
        step: 0,
        cov,
        lenient: false,
        remounted: None,
        unchecked: 0,
    };
    for (i, op) in ops.iter().enumerate() {
        run.step = i;
        run.apply(op);
        cov.ops.fetch_add(1, Relaxed);
    }
    let end = Op::Sync;
    run.step = ops.len();
    run.check_all(&end);
    // Survives a crash right after sync exactly, and a clean remount.
    if let Err(e) = run.fs().sync() {
        panic!("{} end: sync: {e}", dev.name());
    }
    for o in run.m.objs.values_mut() {
        o.data.synced();
    }
    run.remount(&Op::Remount { crash: true }, true);
    run.remount(&Op::Remount { crash: false }, false);
}

/// `NANDKIT_SEED=k` explores other sequences than the fixed default ones.
fn seed_byte(base: u8) -> u8 {
    let extra: u8 = std::env::var("NANDKIT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    base.wrapping_add(extra.wrapping_mul(16))
}

fn cases() -> u32 {
    if std::env::var_os("NANDKIT_LONG").is_some() {
        2000
    } else {
        48
    }
}

fn check(dev: Dev, seed: u8, len: std::ops::Range<usize>, cov: &'static Coverage) {
    check_profile(dev, "yaffs", cases(), seed, len, cov);
}

fn check_profile(
    dev: Dev,
    profile: &'static str,
    cases: u32,
    seed: u8,
    len: std::ops::Range<usize>,
    cov: &'static Coverage,
) {
    if !runs_on(profile, dev) {
        return;
    }
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4000,
        ..Config::default()
    };
    let seed = seed_byte(seed);
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&proptest::collection::vec(op_strategy(), len), |ops| {
        run_case(dev, profile, &ops, cov);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{profile} {} (proptest seed byte {seed}): {e}", dev.name());
    }
}

/// yaffs1 formats small-page chips only, as YAFFS1 did.
fn runs_on(profile: &str, dev: Dev) -> bool {
    profile != "yaffs1" || dev == Dev::Small
}

#[test]
fn model_tiny() {
    static COV: Coverage = Coverage::new();
    check(Dev::Tiny, 1, 1..120, &COV);
    let [ops, errors, _, _, crashes, cleans] = COV.report("tiny");
    assert!(ops > 1000 && errors > 100 && crashes > 10 && cleans > 10);
}

#[test]
fn model_inband() {
    static COV: Coverage = Coverage::new();
    check(Dev::Small, 2, 1..120, &COV);
    let [ops, errors, _, _, crashes, cleans] = COV.report("in-band");
    assert!(ops > 1000 && errors > 100 && crashes > 10 && cleans > 10);
}

/// Every other profile against the same model: the policies change where data goes and
/// when blocks are erased, never what the file system answers. Fewer cases each than the
/// baseline's (`NANDKIT_LONG=1` runs many more), on both geometries.
#[test]
fn model_every_profile() {
    static COV: Coverage = Coverage::new();
    let profiles = nandkit_fs::PROFILES.iter().filter(|&&p| p != "yaffs");
    for (i, &profile) in profiles.enumerate() {
        let cases = (cases() / 6).max(4);
        let seed = 40 + i as u8;
        check_profile(Dev::Tiny, profile, cases, seed, 1..120, &COV);
        check_profile(Dev::Small, profile, cases, seed + 20, 1..120, &COV);
    }
    let [ops, errors, _, _, crashes, cleans] = COV.report("every profile");
    assert!(ops > 1000 && errors > 100 && crashes > 10 && cleans > 10);
}

/// Every profile on the 4-chip striped array (MA): a write of several chunks programs
/// several chips in one batch, and a crash can cut a batch part-way.
#[test]
fn model_array_every_profile() {
    static COV: Coverage = Coverage::new();
    for (i, &profile) in nandkit_fs::PROFILES.iter().enumerate() {
        let cases = (cases() / 6).max(4);
        check_profile(Dev::Array, profile, cases, 90 + i as u8, 1..120, &COV);
    }
    let [ops, errors, _, _, crashes, cleans] = COV.report("array, every profile");
    assert!(ops > 1000 && errors > 100 && crashes > 10 && cleans > 10);
}

/// Mostly fills: the device is full much of the time, so cleaning and ENOSPC paths run.
#[test]
fn model_full_device() {
    static COV: Coverage = Coverage::new();
    fill_heavy("yaffs", cases() / 2, 3, &COV);
    let [_, _, enospc, cleaned, _, _] = COV.report("full device");
    assert!(enospc > 20, "the device was hardly ever full");
    assert!(cleaned > 50, "cleaning hardly ran");
}

/// The same for every other profile, fewer cases each.
#[test]
fn model_full_device_every_profile() {
    static COV: Coverage = Coverage::new();
    let profiles = nandkit_fs::PROFILES.iter().filter(|&&p| p != "yaffs");
    for (i, &profile) in profiles.enumerate() {
        fill_heavy(profile, (cases() / 8).max(4), 60 + 2 * i as u8, &COV);
    }
    let [_, _, enospc, cleaned, _, _] = COV.report("full device, every profile");
    assert!(enospc > 20, "the device was hardly ever full");
    assert!(cleaned > 50, "cleaning hardly ran");
}

/// Every profile filling the 4-chip striped array: ENOSPC and cleaning where a batch
/// spans chips.
#[test]
fn model_full_array_every_profile() {
    static COV: Coverage = Coverage::new();
    for (i, &profile) in nandkit_fs::PROFILES.iter().enumerate() {
        fill_heavy_on(
            &[Dev::Array],
            profile,
            (cases() / 8).max(4),
            110 + i as u8,
            &COV,
        );
    }
    let [_, _, enospc, cleaned, _, _] = COV.report("full array, every profile");
    assert!(enospc > 20, "the device was hardly ever full");
    assert!(cleaned > 50, "cleaning hardly ran");
}

/// Runs `cases` fill-heavy sequences on each geometry (seed bytes `seed`, `seed + 1`).
fn fill_heavy(profile: &'static str, cases: u32, seed: u8, cov: &'static Coverage) {
    fill_heavy_on(&[Dev::Tiny, Dev::Small], profile, cases, seed, cov);
}

/// Runs `cases` fill-heavy sequences on each of `devs` (seed bytes `seed`, `seed + 1`, ...).
fn fill_heavy_on(
    devs: &[Dev],
    profile: &'static str,
    cases: u32,
    seed: u8,
    cov: &'static Coverage,
) {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4000,
        ..Config::default()
    };
    for (k, &dev) in devs.iter().enumerate() {
        if !runs_on(profile, dev) {
            continue;
        }
        let seed = seed_byte(seed + k as u8);
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
        let mut runner = TestRunner::new_with_rng(config.clone(), rng);
        let ops = prop_oneof![
            3 => (any::<u8>(), 20..60u8).prop_map(|(obj, percent)| Op::Fill { obj, percent }),
            6 => op_strategy(),
        ];
        let result = runner.run(&proptest::collection::vec(ops, 1..80), |ops| {
            run_case(dev, profile, &ops, cov);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{profile} {} (proptest seed byte {seed}): {e}", dev.name());
        }
    }
}

#[test]
fn model_regressions() {
    static COV: Coverage = Coverage::new();
    // A write past the end refused with ENOSPC after extend() had flushed the zeroed
    // tail of the last chunk: the size went back in RAM only, and after sync and a crash
    // the scan grew the file to cover that chunk (NANDKIT_LONG, in-band, seed byte 2).
    let ops = vec![
        Op::Create {
            dir: 0,
            name: 3,
            kind: 0,
        },
        Op::Create {
            dir: 12,
            name: 0,
            kind: 0,
        },
        Op::Fill {
            obj: 12,
            percent: 31,
        },
        Op::Write {
            obj: 151,
            off: Q(0, 0),
            len: Q(13, 0),
            seed: 0,
        },
        Op::Fill {
            obj: 30,
            percent: 27,
        },
        Op::Fill {
            obj: 66,
            percent: 42,
        },
        Op::Truncate {
            obj: 47,
            size: Q(1, 0),
        },
        Op::Write {
            obj: 163,
            off: Q(4, 0),
            len: Q(4, 0),
            seed: 0,
        },
    ];
    run_case(Dev::Small, "yaffs", &ops, &COV);
    // The same, with the zero chunk over a hole failing after the zeroed tail was
    // flushed: the size went back only to the end of that tail chunk.
    let mut ops = ops;
    ops[7] = Op::Write {
        obj: 163,
        off: Q(5, 0),
        len: Q(0, 1),
        seed: 0,
    };
    run_case(Dev::Small, "yaffs", &ops, &COV);
    // RENAME_EXCHANGE of an object whose header is nearly full of xattrs: the page
    // carrying both objects' names does not fit (ENAMETOOLONG), which the model missed.
    let ops = vec![
        Op::Create {
            dir: 0,
            name: 4,
            kind: 3,
        },
        Op::Create {
            dir: 20,
            name: 0,
            kind: 0,
        },
        Op::Create {
            dir: 12,
            name: 5,
            kind: 0,
        },
        Op::BigXattr {
            obj: 233,
            key: 0,
            extra: 52,
        },
        Op::Rename {
            dir: 20,
            name: 4,
            dir2: 30,
            name2: 5,
            mode: 2,
        },
    ];
    run_case(Dev::Small, "yaffs", &ops, &COV);
}
