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
//!   remount later, everything still reads back (after every third cut of a sweep, every
//!   cut with `NANDKIT_LONG=1`: it costs more than the recovery and its checks).
//!
//! Besides workloads, the cuts hit mkfs, unmount (its sync, the checkpoint and the anchor
//! pointer), the first writes after a checkpoint mount, the first uses of files a MiNV
//! mount left unread (at every flash op and NVRAM persist), cleaning on a nearly full device,
//! truncation and regrowth, and the writes a mount makes to repair what it found.
//!
//! A failure names the workload, the geometry, the seed and the op number: rerunning that
//! one cut replays it exactly. Every sweep cuts at every op by default; `NANDKIT_LONG=1`
//! runs more seeds (random cuts, every-op sweeps, unmount, after a checkpoint mount, lazy
//! names).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::common::*;
use nandkit_flash::{
    BlockAddr, Command, Completion, DeviceOptions, EccReport, Flash, FlashDevice, FlashError,
    Geometry, PageAddr, PowerCut,
};
use nandkit_fs::blocks::RecordsKind;
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
    /// Names that existed once and are gone as of the last namespace operation.
    gone: BTreeSet<(Ino, Vec<u8>)>,
    /// Mode, owner and mtime of every object the workload made (the root excepted).
    metas: HashMap<Ino, MetaHistory>,
    /// Extended attributes: each set is written whole before setxattr and removexattr
    /// return (xattr.rs), so these are exact; an owner missing here has none.
    xattrs: HashMap<Ino, Xattrs>,
    /// The set of the attribute change cut short by the power, if one was.
    xattr_in_flight: Option<(Ino, Xattrs)>,
    /// Symlink targets (fixed at creation) and special files' device numbers.
    targets: HashMap<Ino, Vec<u8>>,
    rdevs: HashMap<Ino, u64>,
    /// What the object the create in flight would have been made with.
    create_in_flight: Option<Made>,
}

/// An object's attributes (name -> value).
type Xattrs = BTreeMap<Vec<u8>, Vec<u8>>;

/// How an object was created: what it must show if a create cut short made it.
#[derive(Clone, Debug)]
struct Made {
    perm: u32,
    uid: u32,
    gid: u32,
    rdev: u64,
    target: Vec<u8>,
}

/// The attributes of an object the crash checks compare. `mtime: None` is any time at all
/// (an operation cut short may have stamped one the test never saw).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Meta {
    perm: u32,
    uid: u32,
    gid: u32,
    mtime: Option<Time>,
}

impl Meta {
    fn of(a: &Attr) -> Meta {
        Meta {
            perm: a.perm,
            uid: a.uid,
            gid: a.gid,
            mtime: Some(a.mtime),
        }
    }
}

/// Like `FileHistory`, for attributes: the values of the object's last header known to be
/// on flash, and every value RAM held since (any of which a later header may have carried).
/// chmod, chown and utimes write the header before setattr returns (fs.rs); other changes
/// (a write's or a directory's mtime) are written with the object's next header, durable
/// after its fsync or a sync.
#[derive(Clone, Debug)]
struct MetaHistory {
    durable: Meta,
    pending: Vec<Meta>,
}

impl MetaHistory {
    fn new(m: Meta) -> MetaHistory {
        MetaHistory {
            durable: m,
            pending: Vec::new(),
        }
    }

    fn last(&self) -> Meta {
        *self.pending.last().unwrap_or(&self.durable)
    }

    fn saw(&mut self, m: Meta) {
        if m != self.last() {
            self.pending.push(m);
        }
    }

    /// Everything up to `m` is on flash.
    fn synced_at(&mut self, m: Meta) {
        self.durable = m;
        self.pending.clear();
    }

    fn check(&self, a: &Attr) -> std::result::Result<(), String> {
        let all: Vec<&Meta> = std::iter::once(&self.durable)
            .chain(&self.pending)
            .collect();
        let got = Meta::of(a);
        let bad = |what: &str| {
            Err(format!(
                "{what}: got {got:?}, durable {:?}, changed since {:?}",
                self.durable, self.pending
            ))
        };
        if !all.iter().any(|m| m.perm == got.perm) {
            return bad("mode");
        }
        if !all.iter().any(|m| m.uid == got.uid) {
            return bad("uid");
        }
        if !all.iter().any(|m| m.gid == got.gid) {
            return bad("gid");
        }
        if !all
            .iter()
            .any(|m| m.mtime.is_none() || m.mtime == got.mtime)
        {
            return bad("mtime");
        }
        Ok(())
    }
}

impl Durable {
    /// A clean unmount (or a sync) wrote everything: the current state is durable.
    fn all_synced(&mut self) {
        for h in self.files.values_mut() {
            h.synced();
        }
        for h in self.metas.values_mut() {
            let last = h.last();
            if last.mtime.is_some() {
                h.synced_at(last);
            }
        }
    }
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
                gone: BTreeSet::new(),
                metas: HashMap::new(),
                xattrs: HashMap::new(),
                xattr_in_flight: None,
                targets: HashMap::new(),
                rdevs: HashMap::new(),
                create_in_flight: None,
            },
        }
    }

    /// Records what RAM holds now for these objects (values a later header may carry).
    fn observe(&mut self, inos: &[Ino]) {
        for &ino in inos {
            if let Some(h) = self.m.metas.get_mut(&ino) {
                if let Ok(a) = self.fs.getattr(ino) {
                    h.saw(Meta::of(&a));
                }
            }
        }
    }

    /// These objects' headers were written with what RAM holds now.
    fn meta_synced(&mut self, inos: &[Ino]) {
        for &ino in inos {
            if let Some(h) = self.m.metas.get_mut(&ino) {
                if let Ok(a) = self.fs.getattr(ino) {
                    h.synced_at(Meta::of(&a));
                }
            }
        }
    }

    /// An operation on these objects failed with the power cut: it may have stamped them
    /// with a time never seen.
    fn loose(&mut self, inos: &[Ino]) {
        for &ino in inos {
            if let Some(h) = self.m.metas.get_mut(&ino) {
                let m = Meta {
                    mtime: None,
                    ..h.last()
                };
                h.pending.push(m);
            }
        }
    }

    /// Has power failed, on the flash or on the NVRAM (if the profile has one)?
    fn power_lost(&self) -> bool {
        self.fs.device().power_lost() || self.fs.nvram().is_some_and(|n| n.power_lost)
    }

    /// After an operation on `inos`: what it changed, or, cut short, what it may have.
    fn after<T>(&mut self, r: &Result<T>, inos: &[Ino]) {
        if r.is_ok() {
            self.observe(inos);
        } else if self.power_lost() {
            self.loose(inos);
        }
    }

    fn namespace_op<T>(&mut self, r: Result<T>, after: InFlight) -> Result<T> {
        match (&r, &after) {
            (Ok(_), InFlight::Tree(t)) => {
                let m = &mut self.m;
                m.gone
                    .extend(m.names.keys().filter(|k| !t.contains_key(*k)).cloned());
                m.gone.retain(|k| !t.contains_key(k));
                m.names = t.clone();
            }
            (Ok(_), InFlight::Create(..)) => {} // the caller records it
            // Refused operations change nothing; one cut short by the power may have.
            (Err(_), _) if self.power_lost() => self.in_flight = Some(after),
            (Err(_), _) => {}
        }
        r
    }

    fn create(&mut self, parent: Ino, name: &[u8], new: NewObject) -> Result<Ino> {
        let kind = new.kind;
        let made = Made {
            perm: new.perm,
            uid: new.uid,
            gid: new.gid,
            rdev: new.rdev,
            target: new.target.to_vec(),
        };
        let r = self.fs.create(parent, name, new);
        self.after(&r, &[parent]);
        if r.is_err() && self.power_lost() {
            self.create_in_flight = Some(made.clone());
        }
        let r = self.namespace_op(r, InFlight::Create(parent, name.to_vec(), kind))?;
        self.names.insert((parent, name.to_vec()), r.ino);
        self.gone.remove(&(parent, name.to_vec()));
        self.kinds.insert(r.ino, kind);
        if kind == Kind::File {
            self.files.insert(r.ino, FileHistory::default());
        }
        // The create wrote the new object's header.
        self.metas.insert(r.ino, MetaHistory::new(Meta::of(&r)));
        if kind == Kind::Symlink {
            self.targets.insert(r.ino, made.target);
        }
        if matches!(kind, Kind::CharDev | Kind::BlockDev) {
            self.rdevs.insert(r.ino, made.rdev);
        }
        Ok(r.ino)
    }

    fn mknod(&mut self, parent: Ino, name: &[u8], kind: Kind, rdev: u64) -> Result<Ino> {
        self.create(parent, name, special(kind, rdev))
    }

    fn symlink(&mut self, parent: Ino, name: &[u8], target: &[u8]) -> Result<Ino> {
        self.create(parent, name, symlink(target))
    }

    /// chmod, chown, utimes: the header is written before setattr returns.
    fn setattr(&mut self, ino: Ino, set: SetAttr) -> Result<()> {
        assert!(set.size.is_none(), "truncate goes through `truncate`");
        let before = self.metas[&ino].last();
        let intended = Meta {
            perm: set.perm.map_or(before.perm, |p| p & 0o7777),
            uid: set.uid.unwrap_or(before.uid),
            gid: set.gid.unwrap_or(before.gid),
            mtime: set.mtime.or(before.mtime),
        };
        let r = self.fs.setattr(ino, set).map(|_| ());
        match &r {
            Ok(()) => self.meta_synced(&[ino]),
            Err(_) if self.power_lost() => self.metas.get_mut(&ino).unwrap().pending.push(intended),
            Err(_) => {}
        }
        r
    }

    fn xattr_change(&mut self, ino: Ino, r: Result<()>, after: Xattrs) -> Result<()> {
        match &r {
            Ok(()) => {
                self.xattrs.insert(ino, after);
            }
            Err(_) if self.power_lost() => self.xattr_in_flight = Some((ino, after)),
            Err(_) => {}
        }
        self.after(&r, &[ino]);
        r
    }

    fn setxattr(&mut self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()> {
        let mut after = self.xattrs.get(&ino).cloned().unwrap_or_default();
        after.insert(name.to_vec(), value.to_vec());
        let r = self.fs.setxattr(ino, name, value, XattrMode::Set);
        self.xattr_change(ino, r, after)
    }

    fn removexattr(&mut self, ino: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.xattrs.get(&ino).cloned().unwrap_or_default();
        after
            .remove(name)
            .expect("removexattr of a known attribute");
        let r = self.fs.removexattr(ino, name);
        self.xattr_change(ino, r, after)
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
        self.after(&r, &[ino]);
        if r? < data.len() {
            // Short for want of room (a worn-out device): the rest is refused.
            return Err(FsError::NoSpace);
        }
        Ok(())
    }

    fn truncate(&mut self, ino: Ino, size: u64) -> Result<()> {
        self.files.get_mut(&ino).unwrap().truncate(size);
        let r = self
            .fs
            .setattr(
                ino,
                SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                },
            )
            .map(|_| ());
        self.after(&r, &[ino]);
        r
    }

    fn fsync(&mut self, ino: Ino) -> Result<()> {
        self.fs.fsync(ino)?;
        if let Some(f) = self.files.get_mut(&ino) {
            f.synced();
        }
        self.meta_synced(&[ino]);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.fs.sync()?;
        for f in self.files.values_mut() {
            f.synced();
        }
        let all: Vec<Ino> = self.metas.keys().copied().collect();
        self.meta_synced(&all);
        Ok(())
    }

    fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.names.clone();
        after
            .remove(&(parent, name.to_vec()))
            .expect("unlink of a known name");
        let ino = self.names[&(parent, name.to_vec())];
        let r = self.fs.unlink(parent, name);
        self.after(&r, &[parent, ino]);
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.names.clone();
        after
            .remove(&(parent, name.to_vec()))
            .expect("rmdir of a known name");
        let r = self.fs.rmdir(parent, name);
        self.after(&r, &[parent]);
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn link(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        let mut after = self.names.clone();
        after.insert((parent, name.to_vec()), ino);
        let r = self.fs.link(ino, parent, name).map(|_| ());
        self.after(&r, &[ino, parent]);
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
        let dst = self.names.get(&(np, nn.to_vec())).copied();
        let r = self.fs.rename(p, n, np, nn, mode);
        let touched: Vec<Ino> = [p, np, src].into_iter().chain(dst).collect();
        self.after(&r, &touched);
        self.namespace_op(r, InFlight::Tree(after))
    }

    fn open(&mut self, ino: Ino) -> Result<()> {
        self.fs.open(ino)
    }

    /// Closing flushes a named file, like fsync.
    fn release(&mut self, ino: Ino) -> Result<()> {
        let named = self.names.values().any(|&i| i == ino);
        let r = self.fs.release(ino);
        self.after(&r, &[ino]);
        r?;
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
    verify_full(fs, d, ctx).map(|(tree, _)| tree)
}

/// Every reachable file's contents, as a recovery check read them.
type Contents = BTreeMap<Ino, Vec<u8>>;

/// `verify`, also handing back the contents it read (for `keep_working_from`).
fn verify_full(fs: &mut Fs, d: &Durable, ctx: &str) -> Result<(Dentries, Contents)> {
    assert_fsck(fs, ctx);
    let mut contents = Contents::new();
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
                contents.insert(ino, content);
            }
            _ => assert_eq!(a.nlink, n, "{ctx}: nlink of {ino}"),
        }
        check_attrs(fs, d, ino, &a, Some(ino) == new_object, ctx)?;
    }
    Ok((got, contents))
}

/// Mode, owner, mtime, extended attributes, symlink target and device number of one
/// object in the recovered tree (`fresh`: the object the create in flight made).
fn check_attrs(fs: &mut Fs, d: &Durable, ino: Ino, a: &Attr, fresh: bool, ctx: &str) -> Result<()> {
    let mut xattrs = Xattrs::new();
    for name in fs.listxattr(ino)? {
        let v = fs.getxattr(ino, &name)?;
        assert!(
            xattrs.insert(name.clone(), v).is_none(),
            "{ctx}: object {ino} lists attribute {} twice",
            String::from_utf8_lossy(&name)
        );
    }
    let show = |x: &Xattrs| {
        x.iter()
            .map(|(k, v)| format!("{}={} bytes", String::from_utf8_lossy(k), v.len()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if fresh {
        let made = d
            .create_in_flight
            .as_ref()
            .expect("a create in flight made it");
        assert_eq!(
            (a.perm, a.uid, a.gid),
            (made.perm & 0o7777, made.uid, made.gid),
            "{ctx}: the object made in flight: mode and owner"
        );
        if a.kind == Kind::Symlink {
            assert_bytes(
                &fs.readlink(ino)?,
                &made.target,
                &format!("{ctx}: target of the symlink made in flight"),
            );
        }
        if matches!(a.kind, Kind::CharDev | Kind::BlockDev) {
            assert_eq!(a.rdev, made.rdev, "{ctx}: rdev of the node made in flight");
        }
        assert!(
            xattrs.is_empty(),
            "{ctx}: the object made in flight has attributes"
        );
        return Ok(());
    }
    if let Some(h) = d.metas.get(&ino) {
        if let Err(why) = h.check(a) {
            panic!("{ctx}: object {ino} ({:?}): {why}", a.kind);
        }
    }
    let empty = Xattrs::new();
    let want = d.xattrs.get(&ino).unwrap_or(&empty);
    let in_flight = d
        .xattr_in_flight
        .as_ref()
        .filter(|(i, _)| *i == ino)
        .map(|(_, x)| x);
    assert!(
        xattrs == *want || Some(&xattrs) == in_flight,
        "{ctx}: attributes of object {ino}: got [{}], durable [{}], in flight {:?}",
        show(&xattrs),
        show(want),
        in_flight.map(show)
    );
    if let Some(t) = d.targets.get(&ino) {
        assert_eq!(a.size, t.len() as u64, "{ctx}: size of symlink {ino}");
        assert_bytes(
            &fs.readlink(ino)?,
            t,
            &format!("{ctx}: target of symlink {ino}"),
        );
    }
    if let Some(&rdev) = d.rdevs.get(&ino) {
        assert_eq!(a.rdev, rdev, "{ctx}: rdev of {ino}");
    }
    Ok(())
}

/// After recovery: more writes, a remount and a crash remount; everything must stay.
fn keep_working(mut fs: Fs, tree: Dentries, ctx: &str) -> Fs {
    let mut contents = Contents::new();
    for &ino in tree.values() {
        if fs.getattr(ino).unwrap().kind == Kind::File {
            contents.insert(ino, read_all(&mut fs, ino).unwrap());
        }
    }
    keep_working_from(fs, tree, contents, ctx)
}

/// `keep_working` from the contents a check just read (every file of `tree`).
fn keep_working_from(mut fs: Fs, mut tree: Dentries, mut contents: Contents, ctx: &str) -> Fs {
    if !keep_working_turn() {
        return fs;
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
            let got =
                read_all(fs, ino).unwrap_or_else(|e| panic!("{ctx}, {when}: file {ino}: {e}"));
            assert_bytes(&got, v, &format!("{ctx}, {when}: file {ino}"));
        }
    };
    check(&mut fs, "after more writes");
    let (flash, nv) = fs
        .unmount_parts()
        .unwrap_or_else(|e| panic!("{ctx}: unmount after recovery: {e}"));
    let mut fs =
        mount_parts(flash, nv).unwrap_or_else(|e| panic!("{ctx}: remount after recovery: {e}"));
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
    recover_and_check_method(d, r, ctx, None);
}

/// `recover_and_check`, also requiring the mount after the cut to be made `method`'s way.
fn recover_and_check_method(d: Driver, r: Result<()>, ctx: &str, method: Option<MountMethod>) {
    let (fs, tree, contents) = recover_and_verify(d, r, ctx, method);
    keep_working_from(fs, tree, contents, ctx);
}

/// Power back after a cut: mounts (from the NVRAM too, whose unpersisted words the seed
/// keeps, drops or tears) and checks everything the durable model says.
fn recover_and_verify(
    d: Driver,
    r: Result<()>,
    ctx: &str,
    method: Option<MountMethod>,
) -> (Fs, Dentries, Contents) {
    let (flash, nv, m) = power_back(d, r, ctx);
    let (flash, nv) = if read_only_turn() {
        read_only_first(flash, nv, &m, ctx)
    } else {
        (flash, nv)
    };
    let mut fs =
        mount_parts(flash, nv).unwrap_or_else(|e| panic!("{ctx}: mount after the cut: {e}"));
    if let Some(method) = method {
        assert_eq!(
            fs.mount_method(),
            method,
            "{ctx}: how the mount found its state"
        );
    }
    let (tree, contents) = verify_full(&mut fs, &m, ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    (fs, tree, contents)
}

thread_local! {
    /// Recoveries made by this test (each test runs on a thread of its own).
    static RECOVERIES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// Recovered file systems this test has been asked to keep working with.
    static KEEP_WORKING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Whether this recovered file system is put back to work: every third one (every one
/// with `NANDKIT_LONG`), so a sweep still works on after cuts in every phase of its
/// workload; the work costs about as much again as the recovery.
fn keep_working_turn() -> bool {
    let n = KEEP_WORKING.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    long() || n % 3 == 1
}

/// Whether this recovery looks read-only first: every third (every one with
/// `NANDKIT_LONG`), as the look costs as much as the recovery itself.
fn read_only_turn() -> bool {
    let n = RECOVERIES.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    std::env::var_os("NANDKIT_LONG").is_some() || n % 3 == 1
}

/// Someone who finds a device after a crash may look before letting anything repair it:
/// a read-only mount of what the cut left must already show everything durable, and
/// change nothing (the writable mount that follows sees the device as the cut left it).
fn read_only_first(
    flash: nandkit_flash::StripedDevice,
    nv: Option<nandkit_nvram::Nvram>,
    m: &Durable,
    ctx: &str,
) -> (nandkit_flash::StripedDevice, Option<nandkit_nvram::Nvram>) {
    let ro = MountOptions {
        read_only: true,
        ..opts()
    };
    let changes = flash.state_ops();
    let nv_written = nv.as_ref().map(|n| n.stats().bytes_written);
    let mut fs = mount_parts_with(flash, nv, ro)
        .unwrap_or_else(|e| panic!("{ctx}: read-only mount after the cut: {e}"));
    verify_full(&mut fs, m, ctx).unwrap_or_else(|e| panic!("{ctx}: read-only: {e}"));
    let (flash, nv) = fs.into_parts();
    assert_eq!(
        flash.state_ops(),
        changes,
        "{ctx}: the read-only mount programmed or erased flash"
    );
    assert_eq!(
        nv.as_ref().map(|n| n.stats().bytes_written),
        nv_written,
        "{ctx}: the read-only mount wrote to the NVRAM"
    );
    (flash, nv)
}

/// After a workload stopped by a cut: checks that it was the cut that stopped it, and
/// brings power back (the NVRAM keeps, drops or tears what it had not persisted, as the
/// seed says). Returns the devices and what must have survived.
fn power_back(
    d: Driver,
    r: Result<()>,
    ctx: &str,
) -> (
    nandkit_flash::StripedDevice,
    Option<nandkit_nvram::Nvram>,
    Durable,
) {
    assert!(
        r.is_err(),
        "{ctx}: the workload finished although power was cut"
    );
    let Driver { fs, m } = d;
    let (mut flash, nv) = fs.into_parts();
    let nv_lost = nv.as_ref().is_some_and(|n| n.power_lost());
    assert!(
        flash.power_lost() || nv_lost,
        "{ctx}: failed without a power cut: {:?}",
        r
    );
    flash.power_cycle().unwrap();
    let nv = nv.map(|mut n| {
        n.crash(ctx.len() as u64);
        n
    });
    (flash, nv, m)
}

/// Counts the workload's state-changing operations (and checks it runs clean uncut).
fn count_ops(dev: Dev, w: Workload, seed: u64, name: &str) -> u64 {
    count_ops_as(dev, yaffs, w, seed, name)
}

/// The configuration a sweep formats with: `yaffs` (the baseline) unless a test names
/// another.
type Profile = fn(Dev) -> FsConfig;

fn format_as(dev: Dev, profile: Profile) -> Fs {
    format_with(dev, profile(dev))
}

fn count_ops_as(dev: Dev, profile: Profile, w: Workload, seed: u64, name: &str) -> u64 {
    let fs = format_as(dev, profile);
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
    sweep_as(dev, yaffs, name, w, seed, stride)
}

fn sweep_as(dev: Dev, profile: Profile, name: &str, w: Workload, seed: u64, stride: u64) -> u64 {
    let total = count_ops_as(dev, profile, w, seed, name);
    let label = profile(dev).profile;
    println!(
        "{name} on {} ({label}): {total} state-changing ops",
        dev.name()
    );
    for n in (0..total).step_by(stride as usize) {
        let ctx = format!(
            "workload {name} on {} ({label}) seed {seed}: power cut at op {n} of {total}",
            dev.name()
        );
        let (d, r) = run_cut(format_as(dev, profile), w, seed, Some(PowerCut::AtOp(n)));
        recover_and_check(d, r, &ctx);
    }
    total
}

/// Persist points the workload reaches in the NVRAM (a profile that keeps metadata there).
fn count_persists(dev: Dev, profile: Profile, w: Workload, seed: u64, name: &str) -> u64 {
    let fs = format_as(dev, profile);
    let base = fs.nvram().expect("an NVRAM profile").stats.persists;
    let (d, r) = run_cut(fs, w, seed, None);
    r.unwrap_or_else(|e| panic!("{name} on {}: uncut run failed: {e}", dev.name()));
    d.fs.nvram().expect("an NVRAM profile").stats.persists - base
}

/// Cuts power at every `stride`-th NVRAM persist point of the workload.
fn nvram_sweep_as(
    dev: Dev,
    profile: Profile,
    name: &str,
    w: Workload,
    seed: u64,
    stride: u64,
) -> u64 {
    let total = count_persists(dev, profile, w, seed, name);
    let label = profile(dev).profile;
    println!(
        "{name} on {} ({label}): {total} NVRAM persist points",
        dev.name()
    );
    for k in (0..total).step_by(stride as usize) {
        let ctx = format!(
            "workload {name} on {} ({label}) seed {seed}: power cut at NVRAM persist {k} of \
             {total}",
            dev.name()
        );
        nvram_cut(dev, profile, w, seed, k, &ctx);
    }
    total
}

/// Runs the workload with power cut at NVRAM persist point `k`, then recovers and checks.
fn nvram_cut(dev: Dev, profile: Profile, w: Workload, seed: u64, k: u64, ctx: &str) {
    let mut fs = format_as(dev, profile);
    fs.nvram_mut()
        .expect("an NVRAM profile")
        .arm_power_cut(nandkit_nvram::PowerCut::AtPersist(k));
    let (d, r) = run_cut(fs, w, seed, None);
    recover_and_check(d, r, ctx);
}

/// The minv profile (metadata in NVRAM): a cut at every flash op and at every NVRAM persist
/// point of three workloads.
#[test]
fn crash_minv_every_flash_op() {
    for dev in Dev::ALL {
        for (name, w, seed) in [
            ("small-files", small_files as Workload, 1),
            ("big-file", big_file, 2),
            ("namespace-mix", namespace_mix, 3),
        ] {
            let ops = sweep_as(dev, minv, name, w, seed, 1);
            assert!(ops > 20, "{name}: {ops}");
        }
    }
}

#[test]
fn crash_minv_every_nvram_persist() {
    for dev in Dev::ALL {
        for (name, w, seed) in [
            ("small-files", small_files as Workload, 1),
            ("big-file", big_file, 2),
            ("namespace-mix", namespace_mix, 3),
        ] {
            let points = nvram_sweep_as(dev, minv, name, w, seed, 1);
            assert!(points > 40, "{name}: {points}");
        }
    }
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

/// The same sweeps on an array of 4 chips seen striped (MA): multi-chunk writes and
/// cleaning go to flash in batches over the chips, and a cut can land on any op of a batch.
#[test]
fn crash_array_small_files_and_big_file() {
    let ops = sweep(Dev::Array, "small-files", small_files, 1, 1);
    assert!(ops > 50, "{ops}");
    let ops = sweep(Dev::Array, "big-file", big_file, 2, 1);
    assert!(ops > 80, "{ops}");
}

#[test]
fn crash_array_namespace_mix_and_random() {
    let ops = sweep(Dev::Array, "namespace-mix", namespace_mix, 3, 1);
    assert!(ops > 40, "{ops}");
    sweep(Dev::Array, "random", random_workload, 100, 1);
}

#[test]
fn crash_array_during_cleaning() {
    cleaning_sweep(Dev::Array, 0, 3);
}

/// The array as MA built it, a UBI per chip: a cut can also land on a UBI header (the EC
/// header after a background erase, the VID header of a new mapping) or a wear-levelling
/// copy, on any chip of a batch.
#[test]
fn crash_array_ubi_every_op() {
    let ops = sweep(Dev::ArrayUbi, "small-files", small_files, 1, 1);
    assert!(ops > 50, "{ops}");
    let ops = sweep(Dev::ArrayUbi, "big-file", big_file, 2, 1);
    assert!(ops > 80, "{ops}");
    sweep(Dev::ArrayUbi, "random", random_workload, 100, 1);
}

#[test]
fn crash_array_ubi_during_cleaning() {
    // One cut in 10: with wear levelling at every erase-count step each cut costs more.
    cleaning_sweep(Dev::ArrayUbi, 0, 10);
}

/// Parity across the chips: power cuts at every op, a cut inside a stripe (some pieces
/// programmed, the rest not) included.
#[test]
fn crash_array_parity_every_op() {
    // Every op with NANDKIT_LONG; by default a share of them, as `chip_dies_at_every_op`
    // runs the same workloads once per chip and op.
    let k = if long() { 1 } else { 5 };
    let ops = sweep(Dev::ArrayParity, "small-files", small_files, 1, 1);
    assert!(ops > 50, "{ops}");
    let ops = sweep(Dev::ArrayParity, "big-file", big_file, 2, 2);
    assert!(ops > 80, "{ops}");
    sweep(Dev::ArrayParity, "random", random_workload, 100, k);
}

/// A whole chip dies at op `n` of the workload, for every `stride`-th op: the chips take
/// turns (chip n mod P dies at op n), and with NANDKIT_LONG every chip dies at every op.
/// The workload runs on to its end degraded, everything it made durable reads back, fsck
/// is clean, and so again after a mount that attaches the array without the chip.
fn chip_kill_sweep(name: &str, w: Workload, seed: u64, stride: u64) -> u64 {
    let dev = Dev::ArrayParity;
    let total = count_ops(dev, w, seed, name);
    let chips = dev.config().geometry.chips;
    println!("{name} on {}: {total} state-changing ops", dev.name());
    for n in (0..total).step_by(stride as usize) {
        let all = 0..chips;
        let turn = (n % u64::from(chips)) as u32;
        let which = if long() { all } else { turn..turn + 1 };
        for chip in which {
            let ctx = format!("workload {name} seed {seed}: chip {chip} dies at op {n} of {total}");
            let mut fs = format_as(dev, yaffs);
            fs.device_mut().arm_chip_failure(chip, n);
            let mut d = Driver::new(fs);
            w(&mut d, seed).unwrap_or_else(|e| panic!("{ctx}: the workload failed: {e}"));
            // Noticed at the first operation on it after it died, if there was one.
            let dead = d.fs.device().parity_report().expect("parity").dead_chips;
            assert!(
                dead.is_empty() || dead == vec![chip],
                "{ctx}: dead chips {dead:?}"
            );
            let Driver { mut fs, m } = d;
            verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let (flash, nv) = fs.into_parts();
            let mut fs = mount_parts(flash, nv)
                .unwrap_or_else(|e| panic!("{ctx}: mount without the chip: {e}"));
            let dead = fs.device().parity_report().expect("parity").dead_chips;
            assert_eq!(dead, vec![chip], "{ctx}: attach found the chip dead");
            verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}, remounted: {e}"));
        }
    }
    total
}

#[test]
fn chip_dies_at_every_op() {
    let ops = chip_kill_sweep("small-files", small_files, 1, 1);
    assert!(ops > 50, "{ops}");
    chip_kill_sweep("big-file", big_file, 2, if long() { 1 } else { 5 });
}

/// A chip dies, a new one takes its place, and the rebuild is cut by a power loss at every
/// `stride`-th op: run again, it finishes; then another chip dies, and everything durable
/// still reads back with fsck clean (the rebuild restored redundancy). And the new chip
/// dying at each of those ops instead leaves the array degraded with nothing lost.
#[test]
fn rebuild_cut_at_every_op_resumes() {
    let dev = Dev::ArrayParity;
    // The workload, then chip 1 dies and is replaced (a fresh chip).
    let degraded = || {
        let mut d = Driver::new(format_as(dev, yaffs));
        small_files(&mut d, 4).expect("workload");
        let Driver { fs, m } = d;
        let (mut flash, _) = fs.into_parts();
        flash.fail_chip(1, "test");
        let mut inner = flash.into_inner();
        inner.replace_chip(1).expect("new chip");
        (inner, m)
    };
    let total = {
        let (inner, _) = degraded();
        let mut a = nandkit_flash::StripedFlash::open(inner, false).unwrap();
        let before = a.state_ops();
        a.rebuild_chip(1, &mut |_, _| {}).expect("rebuild");
        a.state_ops() - before
    };
    assert!(total > 50, "{total}");
    for n in (0..total).step_by(if long() { 1 } else { 5 }) {
        let ctx = format!("rebuild of chip 1 cut at op {n} of {total}");
        let (inner, m) = degraded();
        let mut a = nandkit_flash::StripedFlash::open(inner, false).unwrap();
        a.arm_power_cut(PowerCut::AtOp(n));
        assert!(a.rebuild_chip(1, &mut |_, _| {}).is_err(), "{ctx}");
        a.power_cycle().unwrap();
        let mut a = a.reattach(false).unwrap();
        let r = a
            .rebuild_chip(1, &mut |_, _| {})
            .unwrap_or_else(|e| panic!("{ctx}: resumed: {e}"));
        assert!(r.lebs_written + r.lebs_kept > 0, "{ctx}");
        a.fail_chip(3, "test");
        let mut fs = mount_parts(a, None).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));

        // The new chip dies at the same op instead: the rebuild stops, the array stays
        // degraded, and everything still reads back.
        let ctx = format!("rebuild of chip 1: the new chip dies at op {n} of {total}");
        let (inner, m) = degraded();
        let mut a = nandkit_flash::StripedFlash::open(inner, false).unwrap();
        a.arm_chip_failure(1, n);
        assert!(a.rebuild_chip(1, &mut |_, _| {}).is_err(), "{ctx}");
        let mut fs = mount_parts(a, None).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    }
}

/// Every page of one chip beyond ECC: reads rebuild them from parity, the file reads back
/// whole, and cleaning rewrites (scrubs) the blocks they were in, where the pages are
/// whole again.
#[test]
fn pages_beyond_ecc_are_rebuilt_from_parity_and_scrubbed() {
    let mut fs = format_as(Dev::ArrayParity, yaffs);
    let ino = fs.create(ROOT_INO, b"f", new_obj(Kind::File)).unwrap().ino;
    let data: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    fs.write(ino, 0, &data).unwrap();
    fs.fsync(ino).unwrap();
    let (mut flash, _) = fs.unmount_parts().unwrap();
    let g = flash.inner().geometry();
    let t = flash.inner().config().ecc.correctable_bits;
    let mut ruined = 0;
    for block in 0..g.blocks_per_chip {
        for page in 2..g.pages_per_block {
            let addr = PageAddr::new(1, block, page);
            if flash.raw_page(addr).unwrap().iter().any(|&b| b != 0xFF) {
                flash.inject_bit_errors(addr, 0, t + 1).unwrap();
                ruined += 1;
            }
        }
    }
    assert!(ruined > 10, "{ruined}");
    let mut fs = mount_parts(flash, None).unwrap();
    let mut got = vec![0; data.len()];
    assert_eq!(fs.read(ino, 0, &mut got).unwrap(), data.len());
    assert_eq!(got, data, "rebuilt from parity");
    let rebuilt = fs.device().parity_report().unwrap().pieces_rebuilt;
    assert!(rebuilt > 0);
    // The reads flagged their blocks; cleaning moves the data and erases them.
    while fs.gc(u32::MAX).unwrap() > 0 {}
    assert!(fs.stats().scrubs > 0, "scrubbed");
    assert_fsck(&mut fs, "after the scrub");
    let before = fs.device().parity_report().unwrap().pieces_rebuilt;
    let mut again = vec![0; data.len()];
    fs.read(ino, 0, &mut again).unwrap();
    assert_eq!(again, data);
    assert_eq!(
        fs.device().parity_report().unwrap().pieces_rebuilt,
        before,
        "the rewritten pages need no parity"
    );
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

    // Attributes, extended attributes, symlink targets and device numbers.
    let fs = format(Dev::Tiny);
    let (mut d, r) = run_cut(fs, multi_record, 7, None);
    r.unwrap();
    verify(&mut d.fs, &d.m, "uncut multi-record").unwrap();
    let named = |m: &Durable, k: Kind| {
        *m.names
            .values()
            .find(|i| m.kinds[*i] == k && m.metas.contains_key(*i))
            .unwrap()
    };
    for k in [Kind::File, Kind::Dir, Kind::BlockDev] {
        let ino = named(&d.m, k);
        let bad: [fn(&mut Meta); 4] = [
            |m| m.perm ^= 0o010,
            |m| m.uid += 1,
            |m| m.gid += 1,
            |m| m.mtime = m.mtime.map(|t| Time::new(t.sec, t.nsec ^ 1)),
        ];
        for (i, f) in bad.iter().enumerate() {
            let mut m = d.m.clone();
            f(&mut m.metas.get_mut(&ino).unwrap().durable);
            assert!(
                rejects(&mut d.fs, &m),
                "{k:?} {ino}: wrong field {i} passed"
            );
        }
    }
    let (&owner, x) = d.m.xattrs.iter().find(|(_, x)| x.len() > 1).unwrap();
    let mut m = d.m.clone();
    let mut changed = x.clone();
    changed.values_mut().next().unwrap()[0] ^= 1;
    m.xattrs.insert(owner, changed);
    assert!(rejects(&mut d.fs, &m), "a changed attribute value passed");
    let mut m = d.m.clone();
    m.xattrs.get_mut(&owner).unwrap().pop_last();
    assert!(rejects(&mut d.fs, &m), "an extra attribute passed");
    let mut m = d.m.clone();
    let (_, t) = m.targets.iter_mut().find(|(_, t)| t.len() > 3000).unwrap();
    t[3000] ^= 1;
    assert!(rejects(&mut d.fs, &m), "a wrong symlink target passed");
    let mut m = d.m.clone();
    *m.rdevs.values_mut().next().unwrap() += 1;
    assert!(rejects(&mut d.fs, &m), "a wrong device number passed");
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
        let others: Vec<Ino> = d
            .names
            .values()
            .copied()
            .filter(|i| matches!(d.kinds[i], Kind::File | Kind::Dir))
            .collect();
        match rng.gen_range(0..112) {
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
            100..=102 if !others.is_empty() => {
                // chmod, chown or utimes (setattr writes the header), sometimes fsync'd
                let i = others[rng.gen_range(0..others.len())];
                let t = |rng: &mut Xoshiro256PlusPlus| {
                    Time::new(
                        rng.gen_range(0..2_000_000_000),
                        rng.gen_range(0..1_000_000_000),
                    )
                };
                let set = match rng.gen_range(0..4) {
                    0 => SetAttr {
                        perm: Some(rng.gen_range(0..0o10000)),
                        ..SetAttr::default()
                    },
                    1 => SetAttr {
                        uid: Some(rng.gen_range(0..5000)),
                        gid: Some(rng.gen_range(0..5000)),
                        ..SetAttr::default()
                    },
                    2 => SetAttr {
                        atime: Some(t(&mut rng)),
                        mtime: Some(t(&mut rng)),
                        ..SetAttr::default()
                    },
                    _ => SetAttr {
                        perm: Some(rng.gen_range(0..0o10000)),
                        gid: Some(rng.gen_range(0..5000)),
                        mtime: Some(t(&mut rng)),
                        ..SetAttr::default()
                    },
                };
                d.setattr(i, set)?;
                if rng.gen_bool(0.5) {
                    d.fsync(i)?;
                }
            }
            103..=106 if !others.is_empty() => {
                // set (create, replace, grow, shrink) or remove an extended attribute
                let i = others[rng.gen_range(0..others.len())];
                let have: Vec<Vec<u8>> = d
                    .xattrs
                    .get(&i)
                    .map(|x| x.keys().cloned().collect())
                    .unwrap_or_default();
                if !have.is_empty() && rng.gen_bool(0.3) {
                    let n = have[rng.gen_range(0..have.len())].clone();
                    d.removexattr(i, &n)?;
                } else {
                    let n = format!("user.k{}", rng.gen_range(0..5)).into_bytes();
                    let len = if rng.gen_bool(0.15) {
                        rng.gen_range(2 * c..XATTR_SIZE_MAX as u64 / 4)
                    } else {
                        rng.gen_range(0..600)
                    };
                    d.setxattr(i, &n, &pattern(rng.gen(), len as usize))?;
                }
            }
            107..=108 => {
                let p = pick_dir(&mut rng);
                let n = fresh(&mut rng);
                let (kind, rdev) = match rng.gen_range(0..3) {
                    0 => (Kind::Fifo, 0),
                    1 => (Kind::CharDev, rng.gen_range(1..1 << 20)),
                    _ => (Kind::BlockDev, rng.gen_range(1..1 << 20)),
                };
                d.mknod(p, &n, kind, rdev)?;
            }
            109..=111 => {
                // a target too long for the header: it goes to data chunks
                let p = pick_dir(&mut rng);
                let n = fresh(&mut rng);
                let len = rng.gen_range(3000..=SYMLINK_MAX);
                d.symlink(p, &n, &target(rng.gen(), len))?;
            }
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

/// A symlink target of `len` bytes: path components of letters.
fn target(seed: u64, len: usize) -> Vec<u8> {
    pattern(seed, len)
        .into_iter()
        .enumerate()
        .map(|(i, b)| if i % 40 == 39 { b'/' } else { b'a' + b % 26 })
        .collect()
}

/// A 255-byte name (the longest allowed), distinct for each `i`.
fn long_name(i: u32) -> Vec<u8> {
    let mut n = format!("{i:04}-").into_bytes();
    n.resize(NAME_MAX, b'L');
    n
}

/// (d) Operations that each write several records: symlinks whose targets fill data chunks,
/// an attribute set grown past one page (to a 64 KiB value) and shrunk back, a file with 55
/// hard links of 255-byte names of which some go again, renames over files that have hard
/// links, device nodes, chmod, chown and utimes.
fn multi_record(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as usize;
    let top = d.mkdir(ROOT_INO, b"multi")?;
    let sub = d.mkdir(top, b"links")?;
    d.symlink(top, b"long-4095", &target(seed, SYMLINK_MAX))?;
    d.symlink(sub, b"long-3000", &target(seed + 1, 3000))?;
    // An attribute set: inline, then spread over chunks, then back.
    let f = d.file(top, b"attrs")?;
    d.write(f, 0, &pattern(seed + 2, c + 10))?;
    d.fsync(f)?;
    d.setxattr(f, b"user.small", &pattern(seed + 3, 40))?;
    d.setxattr(f, b"user.mid", &pattern(seed + 4, 1500))?;
    d.setxattr(f, b"trusted.t", &pattern(seed + 5, 200))?;
    d.setxattr(f, b"user.big", &pattern(seed + 6, XATTR_SIZE_MAX))?;
    d.removexattr(f, b"user.big")?;
    d.setxattr(f, b"user.small", &pattern(seed + 7, 3000))?;
    d.removexattr(f, b"user.mid")?;
    // Many names of one file, the longest names there are.
    let h = d.file(top, b"linked")?;
    d.write(h, 0, &pattern(seed + 8, 2 * c + 5))?;
    d.fsync(h)?;
    for i in 0..55 {
        d.link(h, if i % 2 == 0 { sub } else { top }, &long_name(i))?;
    }
    for i in (0..55).step_by(3) {
        d.unlink(if i % 2 == 0 { sub } else { top }, &long_name(i))?;
    }
    d.unlink(top, b"linked")?;
    // Renames over a file that has hard links: one of its names, then another.
    let v = d.file(top, b"victim")?;
    d.write(v, 0, &pattern(seed + 9, 700))?;
    d.fsync(v)?;
    d.link(v, sub, b"victim-2")?;
    d.link(v, top, b"victim-3")?;
    let s = d.file(top, b"src")?;
    d.write(s, 0, &pattern(seed + 10, 300))?;
    d.fsync(s)?;
    d.rename(top, b"src", top, b"victim", RenameMode::Replace)?;
    d.rename(top, &long_name(1), sub, b"victim-2", RenameMode::Replace)?;
    // Device nodes, and attributes the header carries.
    d.mknod(top, b"fifo", Kind::Fifo, 0)?;
    d.mknod(sub, b"chr", Kind::CharDev, (5 << 8) | 1)?;
    let blk = d.mknod(top, b"blk", Kind::BlockDev, (8 << 8) | 3)?;
    let set = |perm, uid, gid, mtime| SetAttr {
        perm,
        uid,
        gid,
        mtime,
        ..SetAttr::default()
    };
    d.setattr(f, set(Some(0o4750), Some(0), Some(42), None))?;
    d.setattr(
        h,
        set(
            None,
            None,
            None,
            Some(Time::new(1_600_000_000, 123_456_789)),
        ),
    )?;
    d.setattr(blk, set(Some(0o600), Some(7), Some(8), None))?;
    d.setattr(top, set(Some(0o700), None, Some(9), None))?;
    d.write(v, 10, &pattern(seed + 11, 50))?;
    d.setattr(v, set(None, Some(3), None, Some(Time::new(-5, 7))))?;
    d.setxattr(top, b"user.dir", &pattern(seed + 12, 5000))?;
    d.setxattr(top, b"user.dir", &pattern(seed + 13, 30))?;
    d.setattr(
        s,
        set(Some(0o640), None, None, Some(Time::new(4_000_000_000, 1))),
    )?;
    d.write(h, 1, &pattern(seed + 14, 20))?;
    d.fsync(h)?;
    d.sync()
}

#[test]
fn crash_multi_record_ops() {
    for dev in Dev::ALL {
        let ops = sweep(dev, "multi-record", multi_record, 7, 1);
        assert!(ops > 150, "{ops}");
    }
}

#[test]
fn crash_random_workloads_random_cuts() {
    let seeds = if long() { 0..2000 } else { 0..400 };
    let mut cuts = 0;
    for dev in Dev::ALL {
        for seed in seeds.clone() {
            random_cut(dev, yaffs, seed);
            cuts += 1;
        }
    }
    assert!(cuts >= 800);
}

/// The random workload of `seed` with power cut at an op the seed picks, then recovery
/// and checks.
fn random_cut(dev: Dev, profile: Profile, seed: u64) {
    let total = count_ops_as(dev, profile, random_workload, seed, "random");
    let cut = PowerCut::Random {
        seed: seed ^ 0xC0FFEE,
        within: total,
    };
    let ctx = format!(
        "workload random on {} ({}) seed {seed}: {cut:?} of {total} ops",
        dev.name(),
        profile(dev).profile
    );
    let (d, r) = run_cut(format_as(dev, profile), random_workload, seed, Some(cut));
    recover_and_check(d, r, &ctx);
}

/// The random workload cut at a random op, on every profile but the baseline (which has
/// its own, longer, run above): flash cuts, and for minv NVRAM cuts at a random persist
/// point too.
#[test]
fn crash_random_workloads_random_cuts_every_profile() {
    let seeds = if long() { 0..400 } else { 0..12 };
    let mut cuts = 0;
    for (label, profile) in OTHER_PROFILES {
        for dev in Dev::ALL {
            for seed in seeds.clone() {
                let seed = seed + 5000;
                random_cut(dev, profile, seed);
                cuts += 1;
                if label == "minv" {
                    let points = count_persists(dev, profile, random_workload, seed, "random");
                    let k = seed.wrapping_mul(0x9E37_79B9) % points.max(1);
                    let ctx = format!(
                        "workload random on {} (minv) seed {seed}: NVRAM cut at persist \
                         {k} of {points}",
                        dev.name()
                    );
                    nvram_cut(dev, profile, random_workload, seed, k, &ctx);
                    cuts += 1;
                }
            }
        }
    }
    assert!(cuts >= 12 * 2 * 7);
}

/// Every op of the random workload on every profile but the baseline, for a few seeds.
#[test]
fn crash_random_workload_every_op_every_profile() {
    let seeds: &[u64] = if long() {
        &[200, 201, 202, 203, 204, 205]
    } else {
        &[200]
    };
    for (_, profile) in OTHER_PROFILES {
        for &seed in seeds {
            for dev in Dev::ALL {
                sweep_as(dev, profile, "random", random_workload, seed, 1);
            }
        }
    }
    // And every NVRAM persist point of it for minv.
    for &seed in seeds {
        for dev in Dev::ALL {
            nvram_sweep_as(dev, minv, "random", random_workload, seed, 1);
        }
    }
}

/// Every op of one random workload, for a few seeds.
#[test]
fn crash_random_workload_every_op() {
    let seeds: &[u64] = if long() {
        &[100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111]
    } else {
        &[100, 101, 102, 103]
    };
    for &seed in seeds {
        for dev in Dev::ALL {
            sweep(dev, "random", random_workload, seed, 1);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Cuts during cleaning: a device kept nearly full, so overwrites make the cleaner copy pages
// and erase blocks all the time.

/// A device nearly full of a cold file and a hot one, cleanly unmounted. Both geometries
/// have 4096 pages: 3500 of them live.
fn gc_snapshot_as(dev: Dev, profile: Profile) -> nandkit_flash::FlashDevice {
    let mut fs = format_as(dev, profile);
    let c = fs.chunk_bytes() as usize;
    // The array has as many pages in fewer, larger blocks: fill the same share of it. So
    // do the allocation policies, whose streams each keep a block open (and so a larger
    // cleaning reserve): as full as the baseline's, they would be at ENOSPC.
    let (cold_n, hot_n) = match dev {
        Dev::Small | Dev::Tiny if fs.config().allocator == AllocatorKind::Sequential => (2900, 600),
        _ => {
            let free = fs.statfs().free_chunks as usize;
            (free * 72 / 100, free * 15 / 100)
        }
    };
    let hot = cold_and_hot(&mut fs, cold_n * c, hot_n * c);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    // Until the cleaner has been at work (at once on the small devices).
    let mut i = 0u64;
    // MNFS never cleans a data block: an overwrite copies it (`moved` counts either).
    let moved = |st: &FsStats| st.blocks_cleaned + st.blocks_copied;
    while i < 400 || (moved(fs.stats()) == 0 && i < 20_000) {
        i += 1;
        let off = rng.gen_range(0..hot_n as u64) * c as u64;
        fs.write(hot, off, &pattern(100 + i, c)).unwrap();
    }
    fs.sync().unwrap();
    assert!(moved(fs.stats()) > 0, "setup did not clean");
    fs.unmount().unwrap().into_inner()
}

/// A cold file of `cold` bytes and a hot one of `hot` bytes; returns the hot one.
fn cold_and_hot(fs: &mut Fs, cold: usize, hot: usize) -> Ino {
    let c = fs.create(ROOT_INO, b"cold", file()).unwrap().ino;
    fs.write(c, 0, &pattern(1, cold)).unwrap();
    let h = fs.create(ROOT_INO, b"hot", file()).unwrap().ino;
    fs.write(h, 0, &pattern(2, hot)).unwrap();
    h
}

/// Overwrites on the nearly full device, with fsyncs, a few small files made and deleted.
fn gc_workload(d: &mut Driver, seed: u64) -> Result<()> {
    // Twice the rounds on an array, whose blocks are 4 times larger: a few of them fill.
    let rounds = if d.fs.device().geometry().pages_per_block > 64 {
        180
    } else {
        90
    };
    overwrite_rounds(d, seed, rounds)
}

/// `gc_workload` made long enough to erase each block of the tiny device's hot part a few
/// times over (so blocks near their limit wear out during it), ending where worn-out
/// blocks leave no room (ENOSPC: the write that got it may or may not have landed).
fn wear_workload(d: &mut Driver, seed: u64) -> Result<()> {
    match overwrite_rounds(d, seed, 300) {
        Err(FsError::NoSpace) => Ok(()),
        r => r,
    }
}

fn overwrite_rounds(d: &mut Driver, seed: u64, rounds: u64) -> Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = d.fs.chunk_bytes() as u64;
    let hot = d.names[&(ROOT_INO, b"hot".to_vec())];
    let hot_size = d.fs.getattr(hot)?.size;
    for i in 0..rounds {
        let off = rng.gen_range(0..hot_size - 3 * c);
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
        let a = fs.getattr(ino).unwrap();
        let kind = a.kind;
        d.kinds.insert(ino, kind);
        d.m.metas.insert(ino, MetaHistory::new(Meta::of(&a)));
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

/// Cuts at every op of the cleaning workload, from the nearly full snapshot (a checkpoint
/// mount: the first write also erases the checkpoint). Shard `k` of `shards` takes the ops
/// `n` with `n % shards == k`: each cut costs about 0.2 s on the tiny geometry (every file
/// is read back five times, the nearly full device's 7 MB), so the sweep is split for the
/// test threads to share.
fn cleaning_sweep(dev: Dev, shard: u64, shards: u64) {
    cleaning_sweep_as(dev, yaffs, gc_workload, shard, shards)
}

fn cleaning_sweep_as(dev: Dev, profile: Profile, w: Workload, shard: u64, shards: u64) {
    let label = profile(dev).profile;
    let mut snap = gc_snapshot_as(dev, profile);
    // What the snapshot holds: read once; each run starts from a cold checkpoint mount.
    let model = adopt(mount(clone_device(&mut snap)).unwrap()).m;
    let start = |snap: &mut FlashDevice| {
        let fs = mount(clone_device(snap)).unwrap();
        let want = if fs.config().checkpoint {
            MountMethod::Checkpoint
        } else {
            MountMethod::Scan
        };
        assert_eq!(fs.mount_method(), want);
        Driver {
            fs,
            m: model.clone(),
        }
    };
    // Uncut, to count and to check the workload really makes the cleaner work.
    let mut d = start(&mut snap);
    let base = d.fs.device().state_ops();
    w(&mut d, 9).unwrap();
    let total = d.fs.device().state_ops() - base;
    let st = d.fs.stats().clone();
    let (blocks, pages) = (
        st.blocks_cleaned + st.blocks_copied,
        st.pages_copied + st.block_copy_pages,
    );
    assert!(
        blocks
            >= if matches!(dev, Dev::Array | Dev::ArrayUbi) {
                2
            } else {
                5
            }
            && pages > 100,
        "the workload hardly cleaned (or, MNFS, copied blocks) on {}: {st:?}",
        dev.name()
    );
    verify(&mut d.fs, &d.m, "gc uncut").unwrap();
    if let Some(ubi) = d.fs.device().ubi_report() {
        assert!(
            ubi.wl_moves > 0,
            "no wear-levelling move to cut inside: {ubi:?}"
        );
    }
    println!(
        "gc workload on {}: {total} state-changing ops, {st:?}",
        dev.name()
    );
    for n in (0..total).filter(|n| n % shards == shard) {
        let ctx = format!(
            "workload gc on {} ({label}) seed 9: power cut at op {n} of {total}",
            dev.name()
        );
        let mut d = start(&mut snap);
        d.fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        let r = w(&mut d, 9);
        recover_and_check(d, r, &ctx);
    }
}

/// A device whose blocks are close to wearing out (a rated endurance of 6 cycles, every
/// block failing between 6 and 9 erases), with a cold and a hot file, aged by overwrites
/// until an eighth of the blocks (one on an array) have been retired, cleanly unmounted. An image file, so
/// that a copy keeps every block's erase count.
fn worn_snapshot_as(dev: Dev, profile: Profile, path: &Path) {
    let mut config = dev.config();
    config.wear.endurance_cycles = 6;
    config.wear.endurance_spread = 0.5;
    let flash =
        FlashDevice::create_image(path, config, true, nandkit_flash::DeviceOptions::default())
            .expect("image");
    // Under UBI, spares for 5 bad PEBs a chip (160 per 1024): blocks this worn fail
    // together, and the default 20 per 1024 leaves one.
    let flash = if dev == Dev::ArrayUbi {
        let params = nandkit_flash::ubi::UbiParams {
            bad_per_1024: 160,
            ..Default::default()
        };
        nandkit_flash::StripedFlash::format_ubi(flash, params).expect("UBI")
    } else {
        nandkit_flash::StripedFlash::new(flash)
    };
    let fs_config = profile(dev);
    let mut fs = if fs_config.metadata == nandkit_fs::meta::MetadataKind::Nvram {
        let nv = nandkit_nvram::Nvram::create_file(
            &nvram_path(path),
            ram_nvram().config().clone(),
            true,
        )
        .expect("nvram image");
        FileSystem::format_with_nvram(flash, nv, fs_config, clock())
    } else {
        FileSystem::format(flash, fs_config, clock())
    }
    .expect("format");
    let c = fs.chunk_bytes() as usize;
    let free = fs.statfs().free_chunks as usize;
    let (cold_n, hot_n) = (free * 40 / 100, free * 15 / 100);
    let hot = cold_and_hot(&mut fs, cold_n * c, hot_n * c);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut i = 0u64;
    // An array's virtual block fails with any of its chips' blocks: one is enough there.
    let retire = if dev == Dev::Array {
        1
    } else {
        u64::from(dev.blocks() / 8)
    };
    // MNFS copies a whole block for every overwrite and takes erased blocks in turn, so
    // every block wears at the same pace and they fail together: its snapshot stops with
    // each block erased about twice (endurance 3 to 9), and the sweep's workload meets the
    // failures.
    let ibat = fs.config().records == RecordsKind::Ibat;
    // Under UBI a PEB that fails is UBI's to retire (the file system sees a failure only
    // when a page program fails inside a LEB).
    let worn = |fs: &Fs| {
        if let Some(ubi) = fs.device().ubi_report() {
            ubi.grown_bad >= 1 || fs.stats().blocks_retired >= 1
        } else if ibat {
            fs.stats().blocks_copied >= 2 * u64::from(dev.blocks())
        } else {
            fs.stats().blocks_retired >= retire
        }
    };
    while !worn(&fs) {
        i += 1;
        assert!(i < 200_000, "nothing wore out");
        let off = rng.gen_range(0..hot_n as u64) * c as u64;
        // Worn out sooner than that (an array loses a whole virtual block at a time).
        if let Err(FsError::NoSpace) = fs.write(hot, off, &pattern(100 + i, c)) {
            break;
        }
        if i.is_multiple_of(8) {
            fs.fsync(hot).unwrap();
        }
    }
    fs.sync().unwrap();
    drop(fs.unmount_parts().unwrap());
}

/// The NVRAM image beside a flash image (minv).
fn nvram_path(image: &Path) -> PathBuf {
    image.with_extension("nvram")
}

/// Mounts a flash image, with the NVRAM image beside it when there is one.
fn mount_image(path: &Path, options: MountOptions) -> Result<Fs> {
    let flash = nandkit_flash::StripedFlash::open(open_image(path), options.read_only)?;
    let nv = nvram_path(path);
    if nv.exists() {
        let nv = nandkit_nvram::Nvram::open_file(&nv).expect("nvram image");
        FileSystem::mount_with_nvram(flash, nv, options)
    } else {
        FileSystem::mount(flash, options)
    }
}

/// Cuts at every `stride`-th op of an overwrite workload on a device wearing out: cuts
/// land in programs and erases that fail for wear, in the moves of a retiring block's
/// pages and in the retirement itself.
fn worn_sweep_as(dev: Dev, profile: Profile, stride: u64) {
    let label = profile(dev).profile;
    let tmp = tempfile::tempdir().unwrap();
    let snap = tmp.path().join("worn.img");
    let work = tmp.path().join("work.img");
    worn_snapshot_as(dev, profile, &snap);
    let start = || {
        copy_image(&snap, &work);
        if nvram_path(&snap).exists() {
            std::fs::copy(nvram_path(&snap), nvram_path(&work)).unwrap();
        }
        mount_image(&work, opts()).unwrap()
    };
    let model = adopt(start()).m;
    let mut d = Driver {
        fs: start(),
        m: model.clone(),
    };
    let base = d.fs.device().state_ops();
    wear_workload(&mut d, 9).unwrap();
    let total = d.fs.device().state_ops() - base;
    let st = d.fs.stats().clone();
    let ubi_bad = d.fs.device().ubi_report().map_or(0, |u| u.grown_bad);
    assert!(
        st.blocks_retired + ubi_bad > 0,
        "{label}: nothing wore out: {st:?}"
    );
    verify(&mut d.fs, &d.m, "worn uncut").unwrap();
    println!(
        "wear workload on a worn {} ({label}): {total} state-changing ops, {} blocks retired \
         ({ubi_bad} PEBs by UBI)",
        dev.name(),
        st.blocks_retired
    );
    drop(d);
    for n in (0..total).step_by(stride as usize) {
        let ctx = format!(
            "workload wear on a worn {} ({label}) seed 9: power cut at op {n} of {total}",
            dev.name()
        );
        let mut d = Driver {
            fs: start(),
            m: model.clone(),
        };
        d.fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        let r = wear_workload(&mut d, 9);
        // The images hold what the cut left; each mount below opens them afresh.
        let (flash, nv, m) = power_back(d, r, &ctx);
        drop((flash, nv));
        // A writable mount may find no good block left for its repairs: then it says so
        // (ENOSPC), and a read-only mount must show everything.
        let mut fs = match mount_image(&work, opts()) {
            Ok(fs) => fs,
            Err(e) => {
                assert_eq!(e.errno(), 28, "{ctx}: mount after the cut: {e}");
                let ro = MountOptions {
                    read_only: true,
                    ..opts()
                };
                let mut fs = mount_image(&work, ro)
                    .unwrap_or_else(|e| panic!("{ctx}: read-only mount after the cut: {e}"));
                verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: read-only: {e}"));
                continue;
            }
        };
        let (tree, contents) =
            verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        // No `keep_working`: the device may have no good block left to work in. A clean
        // unmount must keep everything, or fail for want of room only.
        match fs.unmount_parts() {
            Ok((flash, nv)) => {
                let mut fs = mount_parts(flash, nv)
                    .unwrap_or_else(|e| panic!("{ctx}: remount after recovery: {e}"));
                assert_fsck(&mut fs, &ctx);
                assert_eq!(dentries(&mut fs).unwrap(), tree, "{ctx}: tree");
                for (&ino, v) in &contents {
                    let got = read_all(&mut fs, ino).unwrap();
                    assert_bytes(&got, v, &format!("{ctx}: file {ino}"));
                }
            }
            Err(e) => assert_eq!(e.errno(), 28, "{ctx}: unmount after recovery: {e}"),
        }
    }
}

#[test]
fn crash_on_worn_blocks() {
    let stride = if long() { 1 } else { 5 };
    worn_sweep_as(Dev::Tiny, yaffs, stride);
    for (_, profile) in OTHER_PROFILES {
        worn_sweep_as(Dev::Tiny, profile, stride * 5);
    }
}

/// `crash_on_worn_blocks` on the striped array and the small-page device (a test of its
/// own, so the two halves run in parallel).
#[test]
fn crash_on_worn_blocks_array_and_small() {
    let stride = if long() { 1 } else { 5 };
    // Batches over 4 chips: a failed page in the middle of a batch, the rest programmed.
    worn_sweep_as(Dev::Array, yaffs, stride + 2);
    // The same chips under a UBI each: PEBs that fail are retired by UBI from its reserve.
    worn_sweep_as(Dev::ArrayUbi, yaffs, 2 * stride + 3);
    // Tags in band (512-byte pages), more sparsely.
    worn_sweep_as(Dev::Small, yaffs, stride * 6);
    for (_, profile) in OTHER_PROFILES {
        worn_sweep_as(Dev::Small, profile, stride * 6);
    }
    // yaffs1 (small pages only): deletion markers owed on blocks that are retired.
    worn_sweep_as(Dev::Small, yaffs1, stride * 6);
}

#[test]
fn crash_during_cleaning_tiny_0() {
    cleaning_sweep(Dev::Tiny, 0, 4);
}

#[test]
fn crash_during_cleaning_tiny_1() {
    cleaning_sweep(Dev::Tiny, 1, 4);
}

#[test]
fn crash_during_cleaning_tiny_2() {
    cleaning_sweep(Dev::Tiny, 2, 4);
}

#[test]
fn crash_during_cleaning_tiny_3() {
    cleaning_sweep(Dev::Tiny, 3, 4);
}

#[test]
fn crash_during_cleaning_small_0() {
    cleaning_sweep(Dev::Small, 0, 2);
}

#[test]
fn crash_during_cleaning_small_1() {
    cleaning_sweep(Dev::Small, 1, 2);
}

// ---------------------------------------------------------------------------------------
// The MODA paper's allocation policies (several write streams, each with its own open
// block; cleaning copies spread over them) on the baseline's sweeps. A lifetime of 4 ticks
// instead of 100, so that these small workloads classify files and pages hot and cold and
// every stream is written.

fn with_short_lifetime(name: &str, dev: Dev) -> FsConfig {
    let params = AllocParams {
        lifetime: 4,
        ..AllocParams::default()
    };
    FsConfig::profile(name, dev.blocks())
        .and_then(|c| c.with_alloc_params(params, dev.blocks()))
        .expect("allocation profile")
}

fn moda(dev: Dev) -> FsConfig {
    with_short_lifetime("moda", dev)
}

fn dac(dev: Dev) -> FsConfig {
    with_short_lifetime("dac", dev)
}

fn page_hotcold(dev: Dev) -> FsConfig {
    with_short_lifetime("page-hotcold", dev)
}

const ALLOC_PROFILES: [Profile; 3] = [moda, dac, page_hotcold];

#[test]
fn crash_alloc_policies_small_files_and_namespace_mix() {
    for profile in ALLOC_PROFILES {
        for dev in Dev::ALL {
            sweep_as(dev, profile, "small-files", small_files, 1, 1);
            sweep_as(dev, profile, "namespace-mix", namespace_mix, 3, 1);
        }
    }
}

#[test]
fn crash_during_cleaning_moda() {
    cleaning_sweep_as(Dev::Small, moda, gc_workload, 0, 1);
}

/// MODA's first level alone (the ablation's middle step): every third cut of cleaning,
/// whose copies keep the stream their block was filled by.
#[test]
fn crash_during_cleaning_moda_split() {
    let split =
        |dev: Dev| yaffs(dev).with_allocator(nandkit_fs::AllocatorKind::ModaSplit, dev.blocks());
    cleaning_sweep_as(Dev::Small, split, gc_workload, 0, 3);
}

#[test]
fn crash_during_cleaning_dac() {
    cleaning_sweep_as(Dev::Small, dac, gc_workload, 0, 1);
}

#[test]
fn crash_during_cleaning_page_hotcold() {
    cleaning_sweep_as(Dev::Small, page_hotcold, gc_workload, 0, 1);
}

fn mnfs(dev: Dev) -> FsConfig {
    FsConfig::profile("mnfs", dev.blocks()).expect("mnfs profile")
}

/// Tiny files of the hybrid profile stay in the log; a block's worth of chunks in,
/// a file gets blocks of its own (the workloads' files cross that on `tiny` and `small`).
fn hybrid(dev: Dev) -> FsConfig {
    FsConfig::profile("hybrid", dev.blocks()).expect("hybrid profile")
}

/// The mnfs and hybrid profiles (file data in blocks of its own, erased on delete): a cut
/// at every flash op of a create / write / delete workload and two more, erases on delete
/// included.
#[test]
fn crash_mnfs_and_hybrid_every_flash_op() {
    // Each profile is cut at every op on one geometry and at every third op on the other
    // (every op with NANDKIT_LONG): mnfs at every op on the small-page device is
    // `crash_mnfs_every_flash_op`, the same workloads and more.
    let sparse = if long() { 1 } else { 3 };
    for (profile, runs) in [
        (mnfs as Profile, [(Dev::Tiny, sparse)]),
        (hybrid, [(Dev::Tiny, 1)]),
        (hybrid, [(Dev::Small, sparse)]),
    ] {
        for (dev, stride) in runs {
            for (name, w, seed) in [
                ("small-files", small_files as Workload, 1),
                ("big-file", big_file, 2),
                ("namespace-mix", namespace_mix, 3),
            ] {
                let ops = sweep_as(dev, profile, name, w, seed, stride);
                assert!(ops > 20, "{name}: {ops}");
            }
        }
    }
}

fn yaffs1(dev: Dev) -> FsConfig {
    FsConfig::profile("yaffs1", dev.blocks()).expect("yaffs1 profile")
}

/// yaffs1 (no summaries, deletion markers in the spare, every page read at mount), on the
/// small-page device it is made for: a cut at every flash op of each workload, markers
/// included, and during cleaning.
/// The workloads a profile's every-op sweep runs (with their seeds).
const EVERY_OP_WORKLOADS: [(&str, Workload, u64); 5] = [
    ("small-files", small_files as Workload, 1),
    ("big-file", big_file, 2),
    ("namespace-mix", namespace_mix, 3),
    ("multi-record", multi_record, 7),
    ("random", random_workload, 200),
];

#[test]
fn crash_yaffs1_every_flash_op() {
    for (name, w, seed) in EVERY_OP_WORKLOADS {
        let ops = sweep_as(Dev::Small, yaffs1, name, w, seed, 1);
        assert!(ops > 20, "{name}: {ops}");
    }
    cleaning_sweep_as(Dev::Small, yaffs1, gc_workload, 0, 1);
}

/// MNFS as its paper built it (data placed by block, the iBAT rebuilt from one spare area
/// per block, no checkpoint), on the small-page device of the paper: a cut at every flash
/// op of each workload (every second by default; creates, appends, overwrites that copy a
/// block, truncates, deletes that erase), and at each write of the mount that follows (erasing the blocks a
/// cut left without a live page: a copy's old block, a deleted file's).
#[test]
fn crash_mnfs_every_flash_op() {
    // Every op with NANDKIT_LONG; every second by default.
    let stride = if long() { 1 } else { 2 };
    for (name, w, seed) in EVERY_OP_WORKLOADS {
        let ops = sweep_as(Dev::Small, mnfs, name, w, seed, stride);
        assert!(ops > 20, "{name}: {ops}");
    }
    mount_repair_sweep_as(Dev::Small, mnfs, 5);
}

/// MODA's allocation on the yaffs1 log (the combination `bench moda-table --profile
/// yaffs1` measures: several write streams, no write order): a cut at every flash op of
/// small files and during cleaning, at every third of a random mix.
#[test]
fn crash_yaffs1_with_moda_every_flash_op() {
    fn yaffs1_moda(dev: Dev) -> FsConfig {
        yaffs1(dev).with_allocator(nandkit_fs::AllocatorKind::Moda, dev.blocks())
    }
    sweep_as(Dev::Small, yaffs1_moda, "small-files", small_files, 1, 1);
    sweep_as(Dev::Small, yaffs1_moda, "random", random_workload, 201, 3);
    cleaning_sweep_as(Dev::Small, yaffs1_moda, gc_workload, 0, 1);
}

/// yaffs1: the random workload cut at a random op, many seeds.
#[test]
fn crash_yaffs1_random_cuts() {
    let seeds = if long() { 0..400 } else { 0..12 };
    for seed in seeds {
        random_cut(Dev::Small, yaffs1, seed + 7000);
    }
}

/// Cuts at every op of overwrites: hybrid's cleaning, and MNFS's block copies (the new
/// block written, the old one erased) with the mounts that find both.
#[test]
fn crash_during_cleaning_mnfs_and_hybrid() {
    // Every 7th op for MNFS (every one with NANDKIT_LONG): a copy is 32 programs and an
    // erase, and 7 is prime to 32, so the cuts still fall at every page of a copy.
    let shards = if long() { 1 } else { 7 };
    cleaning_sweep_as(Dev::Small, mnfs, gc_workload, 0, shards);
}

/// Hybrid's half of `crash_during_cleaning_mnfs_and_hybrid` (its own test: they run in
/// parallel).
#[test]
fn crash_during_cleaning_hybrid() {
    cleaning_sweep_as(Dev::Small, hybrid, gc_workload, 0, 1);
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
fn crash_during_mount_repair_tiny() {
    mount_repair_sweep(Dev::Tiny);
}

#[test]
fn crash_during_mount_repair_small() {
    mount_repair_sweep(Dev::Small);
}

/// Cuts a workload at every op, then cuts the next mount at each of its repair writes.
fn mount_repair_sweep(dev: Dev) {
    mount_repair_sweep_as(dev, yaffs, 5);
}

/// `mount_repair_sweep` of a profile; at least `min_cuts` cuts must land in mount writes.
fn mount_repair_sweep_as(dev: Dev, profile: Profile, min_cuts: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.img");
    let work = tmp.path().join("work.img");
    let workloads: [(&str, Workload, u64); 2] = [
        ("namespace-mix", namespace_mix, 3),
        ("random", random_workload, 5),
    ];
    let mut mount_cuts = 0;
    for (name, w, seed) in workloads {
        let total = count_ops_as(dev, profile, w, seed, name);
        for n in 0..total {
            let ctx = format!(
                "workload {name} on {} (image, {}) seed {seed}: power cut at op {n} of {total}",
                dev.name(),
                profile(dev).profile
            );
            let flash = nandkit_flash::FlashDevice::create_image(
                &base,
                dev.config(),
                true,
                nandkit_flash::DeviceOptions::default(),
            )
            .unwrap();
            let fs = FileSystem::format(
                nandkit_flash::StripedFlash::new(flash),
                profile(dev),
                clock(),
            )
            .unwrap();
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
    println!("{}: {mount_cuts} cuts during mount-time writes", dev.name());
    assert!(
        mount_cuts >= min_cuts,
        "mount hardly ever wrote on {}: {mount_cuts}",
        dev.name()
    );
}

// ---------------------------------------------------------------------------------------
// mkfs. `FileSystem::format` and `FileSystem::mount` consume their device and drop it when
// they fail (a power cut makes them fail), so the device goes in behind a handle the test
// keeps.

/// A device a file system uses while the test keeps hold of it.
#[derive(Clone)]
struct Shared(Arc<Mutex<FlashDevice>>);

impl Shared {
    fn new(flash: FlashDevice) -> Shared {
        Shared(Arc::new(Mutex::new(flash)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FlashDevice> {
        self.0.lock().unwrap()
    }

    /// The device back, once the file system that used it is gone.
    fn into_inner(self) -> FlashDevice {
        Arc::try_unwrap(self.0)
            .ok()
            .expect("the file system still holds the device")
            .into_inner()
            .unwrap()
    }
}

type FlashResult<T> = std::result::Result<T, FlashError>;

impl Flash for Shared {
    fn geometry(&self) -> Geometry {
        self.lock().geometry()
    }
    fn read_page(
        &mut self,
        a: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> FlashResult<EccReport> {
        self.lock().read_page(a, data, oob)
    }
    fn read_oob(&mut self, a: PageAddr, oob: &mut [u8]) -> FlashResult<EccReport> {
        self.lock().read_oob(a, oob)
    }
    fn program_page(&mut self, a: PageAddr, data: &[u8], oob: &[u8]) -> FlashResult<()> {
        self.lock().program_page(a, data, oob)
    }
    fn program_spare(&mut self, a: PageAddr, oob: &[u8]) -> FlashResult<()> {
        self.lock().program_spare(a, oob)
    }
    fn erase_block(&mut self, a: BlockAddr) -> FlashResult<()> {
        self.lock().erase_block(a)
    }
    fn is_bad(&mut self, a: BlockAddr) -> FlashResult<bool> {
        self.lock().is_bad(a)
    }
    fn mark_bad(&mut self, a: BlockAddr) -> FlashResult<()> {
        self.lock().mark_bad(a)
    }
    fn erase_count(&mut self, a: BlockAddr) -> FlashResult<u32> {
        self.lock().erase_count(a)
    }
    fn submit(&mut self, batch: Vec<Command>) -> Vec<Completion> {
        self.lock().submit(batch)
    }
    fn now_ns(&self) -> u64 {
        self.lock().now_ns()
    }
    fn advance_clock_ns(&mut self, ns: u64) {
        self.lock().advance_clock_ns(ns);
    }
    fn set_clock_ns(&mut self, ns: u64) {
        self.lock().set_clock_ns(ns);
    }
    fn sync(&mut self) -> FlashResult<()> {
        self.lock().sync()
    }
}

/// An empty file system: the root and nothing else, consistent.
fn check_empty(fs: &mut Fs, ctx: &str) {
    assert_fsck(fs, ctx);
    let tree = dentries(fs).unwrap_or_else(|e| panic!("{ctx}: readdir: {e}"));
    assert_eq!(tree, Dentries::new(), "{ctx}: the tree");
    let root = fs
        .getattr(ROOT_INO)
        .unwrap_or_else(|e| panic!("{ctx}: the root directory: {e}"));
    assert_eq!(
        (root.kind, root.nlink),
        (Kind::Dir, 2),
        "{ctx}: the root directory"
    );
    assert_eq!(fs.statfs().objects, 0, "{ctx}: objects besides the root");
}

/// mkfs cut at each of its ops (every good block erased, the two copies of the file
/// system record, the root's header), on a fresh device: the next mount refuses cleanly
/// (no record: EINVAL, and mkfs works again) or finds an empty file system that works.
#[test]
fn crash_during_format() {
    for dev in Dev::ALL {
        let g = dev.config().geometry;
        assert_eq!(g.chips, 1, "page addresses below assume one chip");
        // Uncut: the ops, and the first record copy's page as it should be.
        let fs = FileSystem::format(FlashDevice::ram(dev.config()).unwrap(), yaffs(dev), clock())
            .unwrap();
        let total = fs.device().state_ops();
        let anchors = fs.anchor_blocks();
        let mut reference = fs.into_device();
        let good = (0..g.blocks_per_chip)
            .filter(|&b| !reference.is_bad(BlockAddr::new(0, b)).unwrap())
            .count() as u64;
        assert_eq!(total, good + 3, "mkfs on {}: ops", dev.name());
        let record_page = PageAddr::new(0, anchors[0], 0);
        let record = reference.raw_page(record_page).unwrap();
        let (mut refused, mut empty) = (0, 0);
        for n in 0..total {
            let ctx = format!("mkfs on {}: power cut at op {n} of {total}", dev.name());
            let shared = Shared::new(FlashDevice::ram(dev.config()).unwrap());
            shared.lock().arm_power_cut(PowerCut::AtOp(n));
            match FileSystem::format(shared.clone(), yaffs(dev), clock()) {
                Ok(_) => panic!("{ctx}: mkfs finished although power was cut"),
                Err(e) => assert!(shared.lock().power_lost(), "{ctx}: mkfs failed: {e}"),
            }
            let mut flash = shared.into_inner();
            flash.power_cycle().unwrap();
            // The first record copy is the first program after the erases; torn, it only
            // counts if every byte made it.
            let recorded =
                n > good || (n == good && flash.raw_page(record_page).unwrap() == record);
            if recorded {
                empty += 1;
                let mut fs = mount(flash).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                assert_eq!(fs.mount_method(), MountMethod::Scan, "{ctx}");
                check_empty(&mut fs, &ctx);
                keep_working(fs, Dentries::new(), &ctx);
            } else {
                refused += 1;
                let shared = Shared::new(flash);
                match FileSystem::mount(shared.clone(), opts()) {
                    Ok(_) => panic!("{ctx}: mounted although no file system record was written"),
                    Err(e) => assert!(
                        matches!(e, FsError::NotFormatted(_)) && e.errno() == 22,
                        "{ctx}: mount refused with {e:?}, not a clean NotFormatted"
                    ),
                }
                // mkfs again, uncut, over whatever the cut left.
                let mut fs = FileSystem::format(
                    nandkit_flash::StripedFlash::new(shared.into_inner()),
                    yaffs(dev),
                    clock(),
                )
                .unwrap_or_else(|e| panic!("{ctx}: mkfs again: {e}"));
                check_empty(&mut fs, &ctx);
                keep_working(fs, Dentries::new(), &ctx);
            }
        }
        println!(
            "mkfs on {}: {total} ops; after the cut {refused} mounts refused, {empty} found an \
             empty file system",
            dev.name()
        );
        assert!(
            refused > 0 && empty >= 2,
            "{refused} refused, {empty} empty"
        );
    }
}

/// mkfs over a file system that was there (cleanly unmounted), cut at each of its ops: the
/// next mount finds the old file system exactly as it was (the cut came before the erases
/// reached its record copies), refuses cleanly, or finds an empty one.
#[test]
fn crash_during_reformat() {
    for dev in Dev::ALL {
        let (mut old, m) = unmounted_snapshot(dev, small_files, 8);
        let total = {
            let flash = clone_device(&mut old);
            let before = flash.state_ops();
            let fs =
                FileSystem::format(nandkit_flash::StripedFlash::new(flash), yaffs(dev), clock())
                    .unwrap();
            let after = fs.device().state_ops();
            after - before
        };
        let (mut kept, mut refused, mut empty) = (0, 0, 0);
        for n in 0..total {
            let ctx = format!(
                "mkfs over small-files on {}: power cut at op {n} of {total}",
                dev.name()
            );
            let shared = Shared::new(clone_device(&mut old));
            shared.lock().arm_power_cut(PowerCut::AtOp(n));
            if FileSystem::format(shared.clone(), yaffs(dev), clock()).is_ok() {
                panic!("{ctx}: mkfs finished although power was cut");
            }
            let mut flash = shared.into_inner();
            flash.power_cycle().unwrap();
            let shared = Shared::new(flash);
            let mounted = FileSystem::mount(shared.clone(), opts()).map(drop);
            let mut flash = shared.into_inner();
            match mounted {
                Err(e) => {
                    assert!(
                        matches!(e, FsError::NotFormatted(_)) && e.errno() == 22,
                        "{ctx}: mount refused with {e:?}, not a clean NotFormatted"
                    );
                    refused += 1;
                    let fs = FileSystem::format(
                        nandkit_flash::StripedFlash::new(flash),
                        yaffs(dev),
                        clock(),
                    )
                    .unwrap_or_else(|e| panic!("{ctx}: mkfs again: {e}"));
                    keep_working(fs, Dentries::new(), &ctx);
                }
                Ok(()) => {
                    // The mount's repairs are on flash; this mount sees what it left.
                    flash.power_cycle().unwrap();
                    let mut fs = mount(flash).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                    if fs.statfs().objects == 0 {
                        empty += 1;
                        check_empty(&mut fs, &ctx);
                        keep_working(fs, Dentries::new(), &ctx);
                    } else {
                        kept += 1;
                        let (tree, contents) = verify_full(&mut fs, &m, &ctx).unwrap();
                        keep_working_from(fs, tree, contents, &ctx);
                    }
                }
            }
        }
        println!(
            "mkfs over a file system on {}: {total} ops; after the cut the old one was found \
             {kept} times, none {refused} times, an empty one {empty} times",
            dev.name()
        );
        assert!(
            refused > 0 && empty >= 2,
            "{kept} kept, {refused} refused, {empty} empty"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Unmount: its sync, the checkpoint and the anchor pointer. `unmount` consumes the file
// system, and a failed one drops the device: these run on file images, and reopening the
// image is the power cycle.

/// Where a run on an image starts.
#[derive(Clone)]
enum Start {
    /// mkfs on a blank image.
    Format,
    /// A cleanly unmounted image (mounted from its checkpoint), and what it holds.
    Image(PathBuf, Box<Durable>),
}

/// A blank image to start from and the image runs work on.
struct Images {
    dev: Dev,
    dir: tempfile::TempDir,
    blank: PathBuf,
    work: PathBuf,
}

impl Images {
    fn new(dev: Dev) -> Images {
        let dir = tempfile::tempdir().unwrap();
        let blank = dir.path().join("blank.img");
        let flash = FlashDevice::create_image(&blank, dev.config(), true, DeviceOptions::default())
            .unwrap();
        drop(flash);
        let work = dir.path().join("work.img");
        Images {
            dev,
            dir,
            blank,
            work,
        }
    }

    /// A file system on a fresh copy of the starting image.
    fn start(&self, start: &Start) -> Driver {
        match start {
            Start::Format => {
                copy_image(&self.blank, &self.work);
                let flash = open_image(&self.work);
                Driver::new(
                    FileSystem::format(
                        nandkit_flash::StripedFlash::new(flash),
                        yaffs(self.dev),
                        clock(),
                    )
                    .unwrap(),
                )
            }
            Start::Image(base, m) => {
                copy_image(base, &self.work);
                let fs = mount(open_image(&self.work)).unwrap();
                assert_eq!(fs.mount_method(), MountMethod::Checkpoint);
                Driver {
                    fs,
                    m: (**m).clone(),
                }
            }
        }
    }
}

/// Which pages of a block an image holds programmed (not all 0xFF).
fn programmed_pages(image: &Path, dev: Dev, block: u32) -> Vec<u32> {
    let g = dev.config().geometry;
    let raw = g.raw_page_bytes();
    let bytes = std::fs::read(image).unwrap();
    (0..g.pages_per_block)
        .filter(|&p| {
            let at = (block * g.pages_per_block + p) as usize * raw;
            bytes[at..at + raw].iter().any(|&b| b != 0xFF)
        })
        .collect()
}

/// Changes left unsynced on purpose, for the unmount's own sync to write: overwrites and
/// appends in the write cache, a file grown by truncate, a new file's first bytes.
fn unsynced_tail(d: &mut Driver, seed: u64) -> Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7A11);
    let c = d.fs.chunk_bytes() as u64;
    let mut files: Vec<Ino> = d
        .names
        .values()
        .copied()
        .filter(|i| d.kinds[i] == Kind::File)
        .collect();
    files.sort_unstable();
    files.dedup();
    for (k, &f) in files.iter().take(6).enumerate() {
        let size = d.files[&f].current.len() as u64;
        let k = k as u64;
        match k % 3 {
            0 => {
                let off = rng.gen_range(0..size + 1);
                let len = rng.gen_range(1..2 * c) as usize;
                d.write(f, off, &pattern(seed * 100 + k, len))?;
            }
            1 => d.truncate(f, size + c + 3)?,
            _ => d.write(f, size, &pattern(seed * 100 + k, 100))?,
        }
    }
    let g = d.file(ROOT_INO, b"unsynced-new")?;
    d.write(g, 0, &pattern(seed, 3 * c as usize + 5))
}

fn random_unsynced(d: &mut Driver, seed: u64) -> Result<()> {
    random_workload(d, seed)?;
    unsynced_tail(d, seed)
}

fn namespace_unsynced(d: &mut Driver, seed: u64) -> Result<()> {
    namespace_mix(d, seed)?;
    unsynced_tail(d, seed)
}

/// Runs `w` from `start`, then cuts the unmount at each of its ops (and once after its
/// last). The next mount shows what was durable before the unmount plus whatever its sync
/// wrote, fsck clean; it uses the checkpoint exactly when the unmount finished (a torn
/// pointer may or may not count). Returns the unmount's op count.
fn unmount_sweep(images: &Images, label: &str, start: &Start, w: Workload, seed: u64) -> u64 {
    let dev = images.dev;
    let mut d = images.start(start);
    w(&mut d, seed).unwrap_or_else(|e| panic!("{label} on {}: uncut run: {e}", dev.name()));
    let before = d.fs.device().state_ops();
    let (flash, written) = d.fs.unmount_reporting().unwrap();
    assert!(written, "{label} on {}: no checkpoint written", dev.name());
    let total = flash.state_ops() - before;
    drop(flash);
    println!("unmount after {label} on {}: {total} ops", dev.name());
    for n in 0..=total {
        let ctx = format!(
            "unmount after {label} on {} seed {seed}: power cut at op {n} of {total}",
            dev.name()
        );
        let mut d = images.start(start);
        w(&mut d, seed).unwrap_or_else(|e| panic!("{ctx}: workload: {e}"));
        let Driver { mut fs, mut m } = d;
        fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        match fs.unmount() {
            Ok(flash) => {
                assert_eq!(n, total, "{ctx}: unmount finished although power was cut");
                drop(flash);
                m.all_synced();
            }
            Err(e) => assert!(n < total, "{ctx}: unmount failed uncut: {e}"),
        }
        let mut fs =
            mount(open_image(&images.work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        let method = fs.mount_method();
        if n == total {
            assert_eq!(
                method,
                MountMethod::Checkpoint,
                "{ctx}: a complete checkpoint"
            );
        } else if n + 1 < total {
            assert_eq!(
                method,
                MountMethod::Scan,
                "{ctx}: no pointer to a checkpoint"
            );
        }
        let (tree, contents) =
            verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        keep_working_from(fs, tree, contents, &ctx);
    }
    total
}

#[test]
fn crash_during_unmount() {
    for dev in Dev::ALL {
        let images = Images::new(dev);
        let workloads: [(&str, Workload, u64); 2] = [
            ("random + unsynced", random_unsynced, 21),
            ("namespace-mix + unsynced", namespace_unsynced, 4),
        ];
        let extra = if long() { 20 } else { 1 };
        for (label, w, seed) in workloads {
            for seed in seed..seed + extra {
                let ops = unmount_sweep(&images, label, &Start::Format, w, seed);
                assert!(ops > 5, "{label} on {}: {ops} ops", dev.name());
            }
        }
    }
}

/// minv: runs `w` on a fresh file system (flash and NVRAM images), then cuts its unmount
/// (its sync, and the state it saves for the next mount) at each NVRAM persist point and
/// at each flash op, and once after the last. The next mount shows what was durable before
/// the unmount plus whatever its sync wrote, fsck clean, and keeps working. Returns the
/// unmount's persist points and ops.
fn minv_unmount_sweep(images: &Images, label: &str, w: Workload, seed: u64) -> (u64, u64) {
    let dev = images.dev;
    let nv_path = nvram_path(&images.work);
    let start = || {
        copy_image(&images.blank, &images.work);
        let nv = nandkit_nvram::Nvram::create_file(&nv_path, ram_nvram().config().clone(), true)
            .unwrap();
        let flash = nandkit_flash::StripedFlash::new(open_image(&images.work));
        let fs = FileSystem::format_with_nvram(flash, nv, minv(dev), clock()).unwrap();
        let mut d = Driver::new(fs);
        w(&mut d, seed).unwrap_or_else(|e| panic!("{label} on {}: workload: {e}", dev.name()));
        d
    };
    let d = start();
    let persist_base = d.fs.nvram().unwrap().stats.persists;
    let ops_base = d.fs.device().state_ops();
    let (flash, nv) = d.fs.unmount_parts().unwrap();
    let persists = nv.unwrap().stats().persists - persist_base;
    let ops = flash.state_ops() - ops_base;
    drop(flash);
    println!(
        "minv unmount after {label} on {}: {persists} NVRAM persists, {ops} flash ops",
        dev.name()
    );
    let cut = |nvram: bool, n: u64, total: u64| {
        let what = if nvram { "NVRAM persist" } else { "flash op" };
        let ctx = format!(
            "minv unmount after {label} on {} seed {seed}: power cut at {what} {n} of {total}",
            dev.name()
        );
        let Driver { mut fs, mut m } = start();
        if nvram {
            fs.nvram_mut().unwrap().cut_at_persist(n);
        } else {
            fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        }
        match fs.unmount_parts() {
            Ok(parts) => {
                assert_eq!(n, total, "{ctx}: unmount finished although power was cut");
                drop(parts);
                m.all_synced();
            }
            Err(e) => assert!(n < total, "{ctx}: unmount failed uncut: {e}"),
        }
        // The images hold what the cut left (the NVRAM image keeps every store made).
        let mut fs =
            mount_image(&images.work, opts()).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        let (tree, contents) =
            verify_full(&mut fs, &m, &ctx).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        keep_working_from(fs, tree, contents, &ctx);
    };
    for k in 0..=persists {
        cut(true, k, persists);
    }
    for n in 0..=ops {
        cut(false, n, ops);
    }
    (persists, ops)
}

#[test]
fn crash_during_minv_unmount() {
    for dev in Dev::ALL {
        let images = Images::new(dev);
        let (persists, _) = minv_unmount_sweep(&images, "random + unsynced", random_unsynced, 21);
        assert!(persists > 5, "{persists}");
    }
}

/// An image cleanly unmounted after `w` (on a fresh file system), and what it holds.
fn unmounted_image(images: &Images, name: &str, w: Workload, seed: u64) -> (PathBuf, Durable) {
    let path = images.dir.path().join(name);
    copy_image(&images.blank, &path);
    let flash = open_image(&path);
    let mut d = Driver::new(
        FileSystem::format(
            nandkit_flash::StripedFlash::new(flash),
            yaffs(images.dev),
            clock(),
        )
        .unwrap(),
    );
    w(&mut d, seed).unwrap();
    let Driver { fs, mut m } = d;
    m.all_synced();
    drop(fs.unmount().unwrap());
    (path, m)
}

fn nothing(_: &mut Driver, _: u64) -> Result<()> {
    Ok(())
}

/// Unmount right after a checkpoint mount (its first ops erase the old checkpoint), with
/// nothing changed or with unsynced changes only.
#[test]
fn crash_during_unmount_after_checkpoint_mount() {
    for dev in Dev::ALL {
        let images = Images::new(dev);
        let (base, m) = unmounted_image(&images, "mix.img", namespace_mix, 3);
        let start = Start::Image(base, Box::new(m));
        let workloads: [(&str, Workload); 2] = [
            ("a checkpoint mount, nothing changed", nothing),
            ("a checkpoint mount, unsynced changes", unsynced_tail),
        ];
        for (label, w) in workloads {
            let ops = unmount_sweep(&images, label, &start, w, 5);
            assert!(ops > 2, "{label} on {}: {ops} ops", dev.name());
        }
    }
}

/// An image whose current anchor block is full of checkpoint pointers, so that its next
/// clean unmount erases the other anchor block and starts it over (record, then pointer).
fn anchor_full_image(images: &Images) -> (PathBuf, Durable) {
    let dev = images.dev;
    let ppb = dev.config().geometry.pages_per_block;
    let path = images.dir.path().join("anchor-full.img");
    copy_image(&images.blank, &path);
    let mut d = Driver::new(
        FileSystem::format(
            nandkit_flash::StripedFlash::new(open_image(&path)),
            yaffs(dev),
            clock(),
        )
        .unwrap(),
    );
    let f = d.file(ROOT_INO, b"cycle").unwrap();
    let anchors = d.fs.anchor_blocks();
    // Page 0 holds the record; each clean unmount appends a pointer after it: ppb - 1 of
    // them fill the block (the last one below).
    for k in 0..ppb - 2 {
        d.write(f, 0, &pattern(u64::from(k), 300 + k as usize))
            .unwrap();
        d.fsync(f).unwrap();
        let Driver { fs, m } = d;
        let flash = fs.unmount().unwrap();
        drop(flash);
        d = Driver {
            fs: mount(open_image(&path)).unwrap(),
            m,
        };
    }
    let m = d.m.clone();
    drop(d.fs.unmount().unwrap()); // a clean unmount with nothing to write: one more pointer
    let full = anchors.map(|b| programmed_pages(&path, dev, b).len() as u32);
    assert!(
        full.contains(&ppb) && full.contains(&1),
        "{}: anchor blocks {anchors:?} hold {full:?} programmed pages",
        dev.name()
    );
    (path, m)
}

/// The unmount that starts the other anchor block over, cut at each op: an erase, the
/// record, the pointer.
#[test]
fn crash_during_unmount_anchor_renewal() {
    for dev in Dev::ALL {
        let images = Images::new(dev);
        let (base, m) = anchor_full_image(&images);
        let start = Start::Image(base.clone(), Box::new(m));
        let label = "random + unsynced, anchor block full";
        // Uncut: the other anchor block ends up with its record and the new pointer.
        let mut d = images.start(&start);
        random_unsynced(&mut d, 22).unwrap();
        let anchors = d.fs.anchor_blocks();
        let before = anchors.map(|b| programmed_pages(&images.work, dev, b).len());
        drop(d.fs.unmount().unwrap());
        let after = anchors.map(|b| programmed_pages(&images.work, dev, b));
        let other = before.iter().position(|&n| n == 1).unwrap();
        assert_eq!(
            after[other],
            vec![0, 1],
            "{}: the renewed anchor block",
            dev.name()
        );
        let ops = unmount_sweep(&images, label, &start, random_unsynced, 22);
        assert!(ops > 5, "{label} on {}: {ops} ops", dev.name());
    }
}

// ---------------------------------------------------------------------------------------
// After a checkpoint mount: the first write erases the checkpoint, so a cut anywhere after
// it must leave a mount that scans, never one that trusts the stale checkpoint.

/// A cleanly unmounted device after `w`, and what it holds (all of it durable now).
fn unmounted_snapshot(dev: Dev, w: Workload, seed: u64) -> (FlashDevice, Durable) {
    unmounted_snapshot_of(format(dev), w, seed)
}

fn unmounted_snapshot_of(fs: Fs, w: Workload, seed: u64) -> (FlashDevice, Durable) {
    let (d, r) = run_cut(fs, w, seed, None);
    r.unwrap_or_else(|e| panic!("setup: {e}"));
    let Driver { fs, mut m } = d;
    m.all_synced();
    (fs.unmount().unwrap().into_inner(), m)
}

/// Mounts the snapshot from its checkpoint, runs `w` cut at each of its ops, and checks the
/// recovery: a scan, exactly the durable state. Returns the op count and what the uncut run
/// did.
fn after_checkpoint_sweep(
    dev: Dev,
    label: &str,
    snap: &mut FlashDevice,
    model: &Durable,
    w: Workload,
    seed: u64,
) -> (u64, FsStats) {
    let start = |snap: &mut FlashDevice| {
        let fs = mount(clone_device(snap)).unwrap();
        assert_eq!(fs.mount_method(), MountMethod::Checkpoint, "{label}");
        Driver {
            fs,
            m: model.clone(),
        }
    };
    let mut d = start(snap);
    let base = d.fs.device().state_ops();
    w(&mut d, seed).unwrap_or_else(|e| panic!("{label} on {}: uncut run: {e}", dev.name()));
    let total = d.fs.device().state_ops() - base;
    let stats = d.fs.stats().clone();
    // Uncut, everything was fsync'd at the end: exact contents (holes read as zeros).
    let ctx = format!("{label} on {} uncut", dev.name());
    let (_, contents) = verify_full(&mut d.fs, &d.m, &ctx).unwrap();
    for (ino, got) in &contents {
        assert_bytes(got, &d.m.files[ino].current, &format!("{ctx}: file {ino}"));
    }
    println!("{label} on {}: {total} ops", dev.name());
    for n in 0..total {
        let ctx = format!(
            "{label} on {} seed {seed}: power cut at op {n} of {total}",
            dev.name()
        );
        let mut d = start(snap);
        d.fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        let r = w(&mut d, seed);
        recover_and_check_method(d, r, &ctx, Some(MountMethod::Scan));
    }
    (total, stats)
}

/// After namespace-mix and a checkpoint mount: first writes to files that were there
/// (nothing created: the first page written is a data chunk), then the random mix.
fn rewrite_then_random(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let mut files: Vec<Ino> = d
        .names
        .values()
        .copied()
        .filter(|i| d.kinds[i] == Kind::File)
        .collect();
    files.sort_unstable();
    files.dedup();
    let (f, g) = (files[0], files[files.len() - 1]);
    d.write(f, 5, &pattern(seed, 2 * c as usize))?;
    d.fsync(f)?;
    let size = d.files[&g].current.len() as u64;
    d.truncate(g, size / 2)?;
    d.write(g, size, &pattern(seed + 1, 100))?;
    d.fsync(g)?;
    random_workload(d, seed)
}

#[test]
fn crash_after_checkpoint_mount() {
    for dev in Dev::ALL {
        let (mut snap, m) = unmounted_snapshot(dev, namespace_mix, 3);
        let seeds = if long() { 31..41 } else { 31..32 };
        for seed in seeds {
            let (ops, _) = after_checkpoint_sweep(
                dev,
                "rewrites, then random, after a checkpoint mount",
                &mut snap,
                &m,
                rewrite_then_random,
                seed,
            );
            assert!(ops > 40, "{ops}");
        }
    }
}

/// Before the checkpoint: a 40-chunk file cut to a chunk and a half, another cut too.
fn shrink_before_unmount(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as usize;
    let f = d.file(ROOT_INO, b"shrunk")?;
    d.write(f, 0, &pattern(seed, 40 * c))?;
    d.fsync(f)?;
    let g = d.file(ROOT_INO, b"other")?;
    d.write(g, 0, &pattern(seed + 1, 6 * c + 9))?;
    d.fsync(g)?;
    d.truncate(f, (c + c / 2) as u64)?;
    d.truncate(g, 2 * c as u64)?;
    d.sync()
}

/// After the checkpoint mount: both files grow over their cut without writing it (holes),
/// with writes past and into the holes, fsync'd; then one is cut and grown again.
fn regrow(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let f = d.names[&(ROOT_INO, b"shrunk".to_vec())];
    let g = d.names[&(ROOT_INO, b"other".to_vec())];
    d.truncate(f, 30 * c + 100)?;
    d.write(f, 35 * c + 11, &pattern(seed, 2 * c as usize))?;
    d.write(f, 10 * c + 7, &pattern(seed + 1, 100))?;
    d.fsync(f)?;
    d.truncate(g, 6 * c)?;
    d.write(g, 5 * c + 3, &pattern(seed + 2, 50))?;
    d.fsync(g)?;
    d.truncate(f, 5 * c + 1)?;
    d.truncate(f, 45 * c)?;
    d.write(f, 44 * c, &pattern(seed + 3, c as usize))?;
    d.fsync(f)
}

#[test]
fn crash_regrow_after_checkpoint_mount() {
    for dev in Dev::ALL {
        let (mut snap, m) = unmounted_snapshot(dev, shrink_before_unmount, 5);
        let (ops, _) = after_checkpoint_sweep(dev, "regrow", &mut snap, &m, regrow, 6);
        assert!(ops > 5, "{ops}");
    }
}

// ---------------------------------------------------------------------------------------
// MiNV after a clean unmount: the mount reads no file's offsets (what the unmount saved
// stands in for them) and reads each file's the first time the file is used. Cuts at every
// flash op and every NVRAM persist point of work on such a mount.

/// A RAM NVRAM holding what `nv` holds, all of it persisted.
fn clone_nvram(nv: &mut nandkit_nvram::Nvram) -> nandkit_nvram::Nvram {
    let mut bytes = vec![0u8; nv.size_bytes() as usize];
    nv.read(0, &mut bytes).unwrap();
    let mut copy = nandkit_nvram::Nvram::new_ram(nv.config().clone()).unwrap();
    copy.write(0, &bytes).unwrap();
    copy.persist_all().unwrap();
    copy
}

/// A minv file system after `w`, cleanly unmounted: its flash, its NVRAM, what it holds.
fn minv_unmounted_snapshot(
    dev: Dev,
    w: Workload,
    seed: u64,
) -> (FlashDevice, nandkit_nvram::Nvram, Durable) {
    let (d, r) = run_cut(format_as(dev, minv), w, seed, None);
    r.unwrap_or_else(|e| panic!("setup: {e}"));
    let Driver { fs, mut m } = d;
    m.all_synced();
    let (flash, nv) = fs.unmount_parts().unwrap();
    (flash.into_inner(), nv.expect("minv keeps an NVRAM"), m)
}

/// Mounts the snapshot (its files' offsets left unread), runs `w` cut at each of its flash
/// ops and at each of its NVRAM persist points, and checks the recovery (a mount that
/// walks everything). Returns how many cuts it made.
fn after_clean_minv_sweep(
    dev: Dev,
    label: &str,
    snap: &mut (FlashDevice, nandkit_nvram::Nvram),
    model: &Durable,
    w: Workload,
    seed: u64,
) -> u64 {
    let start = |snap: &mut (FlashDevice, nandkit_nvram::Nvram)| {
        let fs = mount_parts(clone_device(&mut snap.0), Some(clone_nvram(&mut snap.1))).unwrap();
        let unread = model.files.keys().filter(|&&i| !fs.map_loaded(i)).count();
        assert!(unread > 0, "{label}: the mount read every file's offsets");
        Driver {
            fs,
            m: model.clone(),
        }
    };
    let mut d = start(snap);
    let ops_base = d.fs.device().state_ops();
    let persist_base = d.fs.nvram().unwrap().stats.persists;
    w(&mut d, seed).unwrap_or_else(|e| panic!("{label} on {}: uncut run: {e}", dev.name()));
    let ops = d.fs.device().state_ops() - ops_base;
    let persists = d.fs.nvram().unwrap().stats.persists - persist_base;
    verify_full(&mut d.fs, &d.m, label).unwrap();
    println!(
        "{label} on {}: {ops} flash ops, {persists} NVRAM persists",
        dev.name()
    );
    // Every third cut (every one with NANDKIT_LONG); the other minv sweeps cut at every
    // op.
    let stride = if long() { 1 } else { 3 };
    for n in (0..ops).step_by(stride) {
        let ctx = format!(
            "{label} on {} seed {seed}: power cut at flash op {n} of {ops}",
            dev.name()
        );
        let mut d = start(snap);
        d.fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
        let r = w(&mut d, seed);
        recover_and_check(d, r, &ctx);
    }
    for k in (0..persists).step_by(stride) {
        let ctx = format!(
            "{label} on {} seed {seed}: power cut at NVRAM persist {k} of {persists}",
            dev.name()
        );
        let mut d = start(snap);
        d.fs.nvram_mut().unwrap().cut_at_persist(k);
        let r = w(&mut d, seed);
        recover_and_check(d, r, &ctx);
    }
    ops + persists
}

/// Namespace changes on a MiNV mount that left every object in the NVRAM (after
/// `namespace_mix`): a directory never looked into moved, a hard link made from a file
/// never looked up into a directory never looked into, an attribute set and data written
/// on files reached by number only, a name removed, a directory moved under a new one.
fn reshape_unread(d: &mut Driver, seed: u64) -> Result<()> {
    let at = |d: &Driver, p: Ino, n: &str| d.names[&(p, n.as_bytes().to_vec())];
    let (r0, r1, r2) = (
        at(d, ROOT_INO, "round0"),
        at(d, ROOT_INO, "round1"),
        at(d, ROOT_INO, "round2"),
    );
    let (a0, a1, a2) = (at(d, r0, "a"), at(d, r1, "a"), at(d, r2, "a"));
    let (e2_1, e2_2) = (at(d, a1, "e2"), at(d, a2, "e2"));
    let f4_1 = at(d, e2_1, "f4");
    let f4_2 = at(d, e2_2, "f4");
    let final2 = at(d, r2, "final");
    d.rename(
        ROOT_INO,
        b"round0",
        ROOT_INO,
        b"moved",
        RenameMode::NoReplace,
    )?;
    d.link(final2, e2_1, b"linked")?;
    d.setxattr(f4_2, b"user.lazy", &pattern(seed, 40))?;
    d.unlink(r1, b"final")?;
    d.write(f4_1, 7, &pattern(seed + 1, 900))?;
    d.fsync(f4_1)?;
    let new = d.mkdir(a0, b"new")?;
    d.rename(a2, b"e2", new, b"e3", RenameMode::NoReplace)?;
    d.sync()
}

fn minv_after_a_clean_mount(dev: Dev) {
    // Rewrites and truncates of files the mount left unread, then the random mix.
    let (flash, nv, m) = minv_unmounted_snapshot(dev, namespace_mix, 3);
    let mut snap = (flash, nv);
    let cuts = after_clean_minv_sweep(
        dev,
        "minv: rewrites, then random, after a clean mount",
        &mut snap,
        &m,
        rewrite_then_random,
        31,
    );
    assert!(cuts > 40, "{cuts}");
    // Namespace changes on objects the mount left in the NVRAM.
    let cuts = after_clean_minv_sweep(
        dev,
        "minv: namespace changes on objects never read, after a clean mount",
        &mut snap,
        &m,
        reshape_unread,
        8,
    );
    assert!(cuts > 15, "{cuts}");
    // A truncate before the unmount (its slots past the end cleared by the unmount), a
    // file grown back over the hole after it.
    let (flash, nv, m) = minv_unmounted_snapshot(dev, shrink_before_unmount, 5);
    let mut snap = (flash, nv);
    let cuts = after_clean_minv_sweep(dev, "minv: regrow", &mut snap, &m, regrow, 6);
    assert!(cuts > 5, "{cuts}");
}

#[test]
fn crash_minv_after_a_clean_mount_tiny() {
    minv_after_a_clean_mount(Dev::Tiny);
}

#[test]
fn crash_minv_after_a_clean_mount_small() {
    minv_after_a_clean_mount(Dev::Small);
}

// ---------------------------------------------------------------------------------------
// A big file truncated to almost nothing and grown back over a hole, partly rewritten, on
// a nearly full device whose cleaner works meanwhile.

/// `dev`'s geometry on a device of a few blocks, so that "nearly full" is little data.
fn small_device(dev: Dev) -> Fs {
    let bytes = match dev {
        Dev::Tiny => 2 << 20,    // 16 blocks of 64 pages
        Dev::Small => 512 << 10, // 32 blocks of 32 pages
        Dev::Array | Dev::ArrayUbi | Dev::ArrayParity => 8 << 20, // 16 blocks of 4 x 64 pages
    };
    let config = dev.config().with_total_bytes(bytes).unwrap();
    let blocks = config.geometry.blocks_per_chip;
    let fs_config = FsConfig::profile("yaffs", blocks).unwrap();
    FileSystem::format(
        nandkit_flash::StripedFlash::new(FlashDevice::ram(config).unwrap()),
        fs_config,
        clock(),
    )
    .unwrap()
}

/// Chunks of the 200-chunk file.
const BIG_CHUNKS: u64 = 200;

/// Fills the device so that the big file will leave a tenth of it free: a cold file and a
/// hot one, overwritten a little (stale pages for the cleaner).
fn fill_for_big(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let total = d.fs.statfs().total_chunks;
    let hot_chunks = total / 8;
    let cold_chunks = total - BIG_CHUNKS - hot_chunks - total / 10;
    let cold = d.file(ROOT_INO, b"cold")?;
    d.write(cold, 0, &pattern(seed, (cold_chunks * c) as usize))?;
    let hot = d.file(ROOT_INO, b"hot")?;
    d.write(hot, 0, &pattern(seed + 1, (hot_chunks * c) as usize))?;
    churn(d, seed + 2, 60)?;
    d.sync()
}

/// `n` one-chunk overwrites of the hot file at random places, then its fsync.
fn churn(d: &mut Driver, seed: u64, n: u64) -> Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = d.fs.chunk_bytes() as u64;
    let hot = d.names[&(ROOT_INO, b"hot".to_vec())];
    let chunks = d.files[&hot].current.len() as u64 / c;
    for i in 0..n {
        let off = rng.gen_range(0..chunks) * c;
        d.write(hot, off, &pattern(seed * 1000 + i, c as usize))?;
    }
    d.fsync(hot)
}

/// 200 chunks written and fsync'd; cut to a third of a chunk; grown back to 200 chunks by
/// truncate and partly rewritten (the rest a hole), fsync'd; cut to nothing and grown to
/// 120 chunks with a write in the middle, fsync'd. Hot overwrites in between keep the
/// cleaner busy.
fn big_truncate_regrow(d: &mut Driver, seed: u64) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let big = d.file(ROOT_INO, b"big")?;
    for i in 0..BIG_CHUNKS / 8 {
        d.write(big, i * 8 * c, &pattern(seed * 100 + i, 8 * c as usize))?;
    }
    d.fsync(big)?;
    churn(d, seed + 1, 30)?;
    d.truncate(big, c / 3)?;
    churn(d, seed + 2, 30)?;
    d.truncate(big, BIG_CHUNKS * c)?;
    d.write(big, 40 * c + 5, &pattern(seed + 3, 8 * c as usize))?;
    d.write(big, 150 * c, &pattern(seed + 4, c as usize))?;
    d.write(big, 199 * c + 100, &pattern(seed + 5, c as usize - 100))?;
    churn(d, seed + 6, 20)?;
    d.fsync(big)?;
    d.truncate(big, 0)?;
    d.truncate(big, 120 * c + 5)?;
    d.write(big, 100 * c, &pattern(seed + 7, 2 * c as usize))?;
    d.fsync(big)?;
    churn(d, seed + 8, 30)
}

#[test]
fn crash_truncate_regrow_nearly_full() {
    for dev in Dev::ALL {
        let (mut snap, m) = unmounted_snapshot_of(small_device(dev), fill_for_big, 40);
        let (ops, st) = after_checkpoint_sweep(
            dev,
            "big file truncated and regrown, nearly full (a device of a few blocks)",
            &mut snap,
            &m,
            big_truncate_regrow,
            41,
        );
        println!("  the uncut run: {st:?}");
        assert!(ops > BIG_CHUNKS, "{ops}");
        assert!(
            st.blocks_cleaned >= 3 && st.pages_copied > 0,
            "{}: the cleaner hardly worked: {st:?}",
            dev.name()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Names are loaded lazily: after a crash and a scan, a directory's names come from its
// children's headers the first time it is looked into.

/// Many files in a few directories; renames between them (over names too, and exchanges),
/// links, unlinks, fsyncs and syncs.
fn many_names(d: &mut Driver, seed: u64) -> Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = d.fs.chunk_bytes() as u64;
    let alpha = d.mkdir(ROOT_INO, b"alpha")?;
    let beta = d.mkdir(ROOT_INO, b"beta")?;
    let gamma = d.mkdir(alpha, b"gamma")?;
    let dirs = [alpha, beta, gamma, ROOT_INO];
    for i in 0..150u64 {
        let p = dirs[rng.gen_range(0..3)];
        let name = format!("file-{i:03}-{}", "n".repeat(rng.gen_range(0..60)));
        let f = d.file(p, name.as_bytes())?;
        if i % 3 != 0 {
            let len = rng.gen_range(1..3 * c) as usize;
            d.write(f, 0, &pattern(seed * 1000 + i, len))?;
        }
        if i % 4 == 0 {
            d.fsync(f)?;
        }
        let files: Vec<((Ino, Vec<u8>), Ino)> = d
            .names
            .iter()
            .filter(|(_, i)| d.kinds[*i] == Kind::File)
            .map(|(k, &i)| (k.clone(), i))
            .collect();
        let ((p, n), ino) = files[rng.gen_range(0..files.len())].clone();
        let q = dirs[rng.gen_range(0..4)];
        match i % 10 {
            3 => d.rename(
                p,
                &n,
                q,
                format!("moved-{i}").as_bytes(),
                RenameMode::NoReplace,
            )?,
            6 => {
                let ((q, m), _) = files[rng.gen_range(0..files.len())].clone();
                if (q, &m) != (p, &n) {
                    d.rename(p, &n, q, &m, RenameMode::Replace)?;
                }
            }
            5 => {
                let ((q, m), other) = files[rng.gen_range(0..files.len())].clone();
                if other != ino {
                    d.rename(p, &n, q, &m, RenameMode::Exchange)?;
                }
            }
            8 => d.unlink(p, &n)?,
            9 => d.link(ino, q, format!("link-{i}").as_bytes())?,
            _ => {}
        }
        if i % 37 == 36 {
            d.sync()?;
        }
    }
    d.sync()
}

/// Names whose entry the operation in flight may or may not have changed.
fn uncertain_names(m: &Durable) -> BTreeSet<(Ino, Vec<u8>)> {
    match &m.in_flight {
        Some(InFlight::Tree(t)) => m
            .names
            .iter()
            .filter(|(k, v)| t.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(t.keys().filter(|k| !m.names.contains_key(*k)).cloned())
            .collect(),
        Some(InFlight::Create(p, n, _)) => BTreeSet::from([(*p, n.clone())]),
        None => BTreeSet::new(),
    }
}

/// Right after a mount: one directory listed, then every durable name looked up (each
/// finds its object and contents) and every name gone looked up (not found), in
/// directories nothing has looked into before. Returns how many headers were read for it
/// (none when every header was read by the scan already: a cut early enough leaves every
/// block open, and open blocks are read in full).
fn check_names_cold(fs: &mut Fs, m: &Durable, ctx: &str) -> u64 {
    let uncertain = uncertain_names(m);
    let loaded = fs.stats().details_loaded;
    let show = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    // "beta" (the root if the cut came before it was made).
    let beta = m
        .names
        .get(&(ROOT_INO, b"beta".to_vec()))
        .copied()
        .unwrap_or(ROOT_INO);
    let mut listed: Vec<(Vec<u8>, Ino)> = fs
        .readdir(beta)
        .unwrap_or_else(|e| panic!("{ctx}: readdir: {e}"))
        .into_iter()
        .map(|e| (e.name, e.ino))
        .filter(|(n, _)| !uncertain.contains(&(beta, n.clone())))
        .collect();
    listed.sort();
    let want: Vec<(Vec<u8>, Ino)> = m
        .names
        .iter()
        .filter(|((p, n), _)| *p == beta && !uncertain.contains(&(beta, n.clone())))
        .map(|((_, n), &i)| (n.clone(), i))
        .collect();
    assert_eq!(listed, want, "{ctx}: the names of directory {beta}");
    for ((p, n), &ino) in m.names.iter().rev() {
        if uncertain.contains(&(*p, n.clone())) {
            continue;
        }
        let a = fs
            .lookup(*p, n)
            .unwrap_or_else(|e| panic!("{ctx}: lookup of {p}/{}: {e}", show(n)));
        assert_eq!(a.ino, ino, "{ctx}: lookup of {p}/{}", show(n));
        if a.kind == Kind::File {
            let content = read_all(fs, ino).unwrap();
            if let Err(why) = m.files[&ino].check(&content) {
                panic!("{ctx}: {p}/{} (object {ino}): {why}", show(n));
            }
        }
    }
    for (p, n) in &m.gone {
        if uncertain.contains(&(*p, n.clone())) {
            continue;
        }
        match fs.lookup(*p, n) {
            Err(FsError::NotFound) => {}
            other => panic!(
                "{ctx}: {p}/{} is gone, but its lookup gives {:?}",
                show(n),
                other.map(|a| a.ino)
            ),
        }
    }
    fs.stats().details_loaded - loaded
}

#[test]
fn crash_lazy_names() {
    let seeds = if long() { 200 } else { 15 };
    for dev in Dev::ALL {
        let mut lazy = 0;
        for seed in 0..seeds {
            let total = count_ops(dev, many_names, seed, "many-names");
            let cut = PowerCut::Random {
                seed: seed ^ 0xBADD,
                within: total,
            };
            let ctx = format!(
                "workload many-names on {} seed {seed}: {cut:?} of {total} ops",
                dev.name()
            );
            let (d, r) = run_cut(format(dev), many_names, seed, Some(cut));
            assert!(r.is_err(), "{ctx}: finished uncut");
            let Driver { fs, m } = d;
            let mut flash = fs.into_device();
            assert!(flash.power_lost(), "{ctx}: failed without a cut: {r:?}");
            flash.power_cycle().unwrap();
            let mut fs = mount(flash).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
            assert_eq!(fs.mount_method(), MountMethod::Scan, "{ctx}");
            if check_names_cold(&mut fs, &m, &ctx) > 0 {
                lazy += 1;
            }
            let (tree, contents) = verify_full(&mut fs, &m, &ctx).unwrap();
            keep_working_from(fs, tree, contents, &ctx);
        }
        assert!(
            lazy >= seeds * 2 / 3,
            "{}: names were loaded lazily after only {lazy} of {seeds} cuts",
            dev.name()
        );
    }
}

/// Every profile but the baseline, by name (the baseline's sweeps are the ones above).
const OTHER_PROFILES: [(&str, Profile); 6] = [
    ("moda", moda),
    ("dac", dac),
    ("page-hotcold", page_hotcold),
    ("minv", minv),
    ("mnfs", mnfs),
    ("hybrid", hybrid),
];

/// The multi-record operations (rename over a file, unlink of an open file, truncate of a
/// file with holes, ...) cut at every op, on every profile.
#[test]
fn crash_multi_record_ops_every_profile() {
    for (label, profile) in OTHER_PROFILES {
        for dev in Dev::ALL {
            // minv writes only file data to flash: far fewer flash ops.
            let ops = sweep_as(dev, profile, "multi-record", multi_record, 7, 1);
            assert!(ops > 40, "{label} on {}: {ops}", dev.name());
        }
    }
    for dev in Dev::ALL {
        let points = nvram_sweep_as(dev, minv, "multi-record", multi_record, 7, 1);
        assert!(
            points > 100,
            "minv NVRAM persists on {}: {points}",
            dev.name()
        );
    }
}

/// The array sweeps (4 chips striped: batches over the chips) on every profile.
#[test]
fn crash_array_every_profile() {
    for (label, profile) in OTHER_PROFILES {
        // MNFS gives every file erase blocks of its own, and this array has 16 (of 512
        // KiB): more small files than that cannot fit.
        // Every third op by default (every one with NANDKIT_LONG): each profile's sweeps
        // on one chip cut at every op, and a stride prime to the 4 chips still cuts a batch
        // at each of its positions over the sweep.
        let every = if long() { 1 } else { 3 };
        if label != "mnfs" {
            let ops = sweep_as(Dev::Array, profile, "small-files", small_files, 1, every);
            assert!(ops > 50, "{label}: {ops}");
        }
        // An MNFS overwrite copies a whole virtual block (256 pages over the 4 chips): a
        // cut at every 11th op still lands at every page of a copy (11 is prime to 256).
        let stride = if label == "mnfs" && !long() {
            11
        } else {
            every
        };
        let ops = sweep_as(Dev::Array, profile, "big-file", big_file, 2, stride);
        assert!(ops > 50, "{label}: {ops}");
        sweep_as(Dev::Array, profile, "random", random_workload, 100, stride);
    }
}
