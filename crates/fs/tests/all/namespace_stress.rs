//! Namespace stress, the way fsstress drives a mount: several callers, each in a subtree of
//! its own, interleave creates, symlinks (short targets and targets too long for a
//! header), hard links (of files and of symlinks), renames in all three modes across
//! directories, unlinks and rmdirs, with open handles and the kernel's lookup references
//! (`remember` / `forget`) held across other callers' calls, as FUSE holds them. The file
//! system is one lock, so "concurrent" callers are interleaved calls; what concurrency
//! changes is the order, and the seeds give many orders.
//!
//! Checked as it runs: a call that succeeds leaves its names where POSIX says (a rename
//! exchange leaves both names, each naming the other's object); an exchange of two names
//! that both resolve never fails with ENOENT; the tree in RAM passes fsck. At each
//! checkpoint: a clean unmount, then the tree mounted from the checkpoint, the tree from a
//! full scan and the tree in RAM before the unmount must agree path by path, and fsck of
//! each mount is clean. This is the check that the fsstress run of issue 59 failed
//! ("checkpoint lacks ...").
//!
//! Deterministic: each case is a seed. `NANDKIT_LONG=1` runs more seeds and longer runs.

use std::collections::BTreeMap;

use crate::common::*;
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// What a path is, as `ls -l` and `readlink` would show it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    kind: Kind,
    nlink: u32,
    size: u64,
    target: Vec<u8>,
}

/// Every path of the tree (root first), with what it is.
fn tree(fs: &mut Fs) -> BTreeMap<String, Seen> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(String, Ino)> = vec![(String::new(), ROOT_INO)];
    while let Some((path, ino)) = stack.pop() {
        let a = fs
            .getattr(ino)
            .unwrap_or_else(|e| panic!("stat {path}/: {e}"));
        let target = if a.kind == Kind::Symlink {
            fs.readlink(ino)
                .unwrap_or_else(|e| panic!("readlink {path}: {e}"))
        } else {
            Vec::new()
        };
        if a.kind == Kind::Dir {
            for e in fs
                .readdir(ino)
                .unwrap_or_else(|e| panic!("readdir {path}/: {e}"))
            {
                let name = String::from_utf8_lossy(&e.name).into_owned();
                stack.push((format!("{path}/{name}"), e.ino));
            }
        }
        let seen = Seen {
            kind: a.kind,
            nlink: a.nlink,
            size: if a.kind == Kind::Dir { 0 } else { a.size },
            target,
        };
        out.insert(if path.is_empty() { "/".into() } else { path }, seen);
    }
    out
}

/// The first few differences between two trees.
fn differences(want: &BTreeMap<String, Seen>, got: &BTreeMap<String, Seen>) -> Vec<String> {
    let mut d = Vec::new();
    for (path, w) in want {
        match got.get(path) {
            None => d.push(format!("lacks {path}")),
            Some(g) if g != w => d.push(format!("differs at {path}: {w:?} vs {g:?}")),
            _ => {}
        }
    }
    for path in got.keys().filter(|p| !want.contains_key(*p)) {
        d.push(format!("has {path}, which it should not"));
    }
    d.truncate(12);
    d
}

/// One caller: the directories and names it made (which other calls may since have
/// moved or removed, as fsstress's lists go stale), and what it holds.
struct Caller {
    dirs: Vec<Ino>,
    names: Vec<(Ino, Vec<u8>)>,
    /// Lookup references not yet forgotten (FUSE's nlookup).
    refs: Vec<Ino>,
    /// Open handles.
    open: Vec<Ino>,
    next: u32,
}

struct Run {
    fs: Option<Fs>,
    rng: Xoshiro256PlusPlus,
    callers: Vec<Caller>,
    seed: u64,
    step: usize,
    log: Vec<String>,
    /// Calls that succeeded and failed, by what they were: the run checks its
    /// interesting paths ran.
    tally: BTreeMap<String, (u32, u32)>,
}

fn err_name(e: &FsError) -> String {
    format!("{e:?}").chars().take(40).collect()
}

impl Run {
    fn count(&mut self, what: &str, ok: bool) {
        let e = self.tally.entry(what.to_string()).or_default();
        if ok {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }

    fn fs(&mut self) -> &mut Fs {
        self.fs.as_mut().expect("mounted")
    }

    fn ctx(&self) -> String {
        let tail: Vec<&String> = self.log.iter().rev().take(16).collect();
        format!(
            "seed {} step {}; last calls (newest first):\n  {}",
            self.seed,
            self.step,
            tail.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n  ")
        )
    }

    fn new_name(&mut self, c: usize, prefix: char) -> Vec<u8> {
        let n = self.callers[c].next;
        self.callers[c].next += 1;
        // Names of many lengths up to NAME_MAX, as fsstress pads them with X: a long name
        // beside a long symlink target fills a header page.
        let pad = if self.rng.gen_bool(0.3) {
            self.rng.gen_range(150..245)
        } else {
            self.rng.gen_range(0..40)
        };
        let mut s = format!("{prefix}{n:x}");
        s.extend(std::iter::repeat_n('X', pad));
        s.into_bytes()
    }

    fn pick_dir(&mut self, c: usize) -> Ino {
        let d = &self.callers[c].dirs;
        d[self.rng.gen_range(0..d.len())]
    }

    fn pick_name(&mut self, c: usize) -> Option<(Ino, Vec<u8>)> {
        let n = &self.callers[c].names;
        if n.is_empty() {
            return None;
        }
        Some(n[self.rng.gen_range(0..n.len())].clone())
    }

    fn resolve(&mut self, dir: Ino, name: &[u8]) -> Option<Ino> {
        self.fs().lookup(dir, name).ok().map(|a| a.ino)
    }

    /// A lookup the kernel would now hold.
    fn hold(&mut self, c: usize, ino: Ino) {
        if self.fs().remember(ino).is_ok() {
            self.callers[c].refs.push(ino);
        }
    }

    fn target(&mut self) -> Vec<u8> {
        // Short targets fit the header; long ones (up to 4,000 bytes) go to data chunks.
        let len = if self.rng.gen_bool(0.4) {
            self.rng.gen_range(1000..4000)
        } else {
            self.rng.gen_range(1..60)
        };
        vec![b'x'; len]
    }

    fn step(&mut self, c: usize) {
        let op = self.rng.gen_range(0..100);
        match op {
            0..=9 => {
                let d = self.pick_dir(c);
                let name = self.new_name(c, 'f');
                let r = self.fs().create(d, &name, file());
                self.log.push(format!(
                    "{c}: creat {d}/{} -> {:?}",
                    show(&name),
                    r.as_ref().map(|a| a.ino).map_err(err_name)
                ));
                if let Ok(a) = r {
                    self.hold(c, a.ino);
                    self.callers[c].names.push((d, name));
                }
            }
            10..=16 => {
                let d = self.pick_dir(c);
                let name = self.new_name(c, 'd');
                let r = self.fs().create(d, &name, dir());
                self.log.push(format!(
                    "{c}: mkdir {d}/{} -> {:?}",
                    show(&name),
                    r.as_ref().map(|a| a.ino).map_err(err_name)
                ));
                if let Ok(a) = r {
                    self.hold(c, a.ino);
                    self.callers[c].dirs.push(a.ino);
                    self.callers[c].names.push((d, name));
                }
            }
            17..=26 => {
                let d = self.pick_dir(c);
                let name = self.new_name(c, 'l');
                let t = self.target();
                let r = self.fs().create(d, &name, symlink(&t));
                self.log.push(format!(
                    "{c}: symlink {d}/{} ({} B) -> {:?}",
                    show(&name),
                    t.len(),
                    r.as_ref().map(|a| a.ino).map_err(err_name)
                ));
                if let Ok(a) = r {
                    self.hold(c, a.ino);
                    self.callers[c].names.push((d, name));
                }
            }
            27..=36 => {
                // A hard link of whatever a name holds (a file, a symlink, a device).
                let Some((sd, sn)) = self.pick_name(c) else {
                    return;
                };
                let Some(ino) = self.resolve(sd, &sn) else {
                    return;
                };
                let d = self.pick_dir(c);
                let prefix = if self
                    .fs()
                    .getattr(ino)
                    .is_ok_and(|a| a.kind == Kind::Symlink)
                {
                    'l'
                } else {
                    'f'
                };
                let name = self.new_name(c, prefix);
                let r = self.fs().link(ino, d, &name);
                self.count(&format!("link {}", prefix), r.is_ok());
                self.log.push(format!(
                    "{c}: link {ino} as {d}/{} -> {:?}",
                    show(&name),
                    r.as_ref().map(|a| a.nlink).map_err(err_name)
                ));
                if r.is_ok() {
                    self.hold(c, ino);
                    assert_eq!(
                        self.resolve(d, &name),
                        Some(ino),
                        "link's new name: {}",
                        self.ctx()
                    );
                    self.callers[c].names.push((d, name));
                }
            }
            37..=66 => self.rename(c),
            67..=76 => {
                let Some((d, n)) = self.pick_name(c) else {
                    return;
                };
                let r = self.fs().unlink(d, &n);
                self.log.push(format!(
                    "{c}: unlink {d}/{} -> {:?}",
                    show(&n),
                    r.as_ref().map_err(err_name)
                ));
                if r.is_ok() {
                    assert_eq!(self.resolve(d, &n), None, "unlinked name: {}", self.ctx());
                }
            }
            77..=80 => {
                let Some((d, n)) = self.pick_name(c) else {
                    return;
                };
                let r = self.fs().rmdir(d, &n);
                self.log.push(format!(
                    "{c}: rmdir {d}/{} -> {:?}",
                    show(&n),
                    r.as_ref().map_err(err_name)
                ));
            }
            81..=86 => {
                // Open a file and write to it; the handle stays open across other calls.
                let Some((d, n)) = self.pick_name(c) else {
                    return;
                };
                let Some(ino) = self.resolve(d, &n) else {
                    return;
                };
                if !self.fs().getattr(ino).is_ok_and(|a| a.kind == Kind::File) {
                    return;
                }
                if self.fs().open(ino).is_ok() {
                    self.callers[c].open.push(ino);
                    let len = self.rng.gen_range(1..6000);
                    let r = self.fs().write(ino, 0, &vec![b'w'; len]);
                    self.log.push(format!(
                        "{c}: open+write {ino} {len} B -> {:?}",
                        r.map_err(|e| err_name(&e))
                    ));
                }
            }
            87..=91 => {
                let open = &mut self.callers[c].open;
                if !open.is_empty() {
                    let i = self.rng.gen_range(0..open.len());
                    let ino = self.callers[c].open.swap_remove(i);
                    let r = self.fs().release(ino);
                    self.log.push(format!(
                        "{c}: release {ino} -> {:?}",
                        r.map_err(|e| err_name(&e))
                    ));
                }
            }
            92..=97 => {
                // The kernel forgets a few lookups, at a moment of its choosing.
                let k = self.rng.gen_range(1..4);
                for _ in 0..k {
                    let refs = &self.callers[c].refs;
                    if refs.is_empty() {
                        break;
                    }
                    let i = self.rng.gen_range(0..refs.len());
                    let ino = self.callers[c].refs.swap_remove(i);
                    let r = self.fs().forget(ino, 1);
                    self.count("forget", r.is_ok());
                    self.log.push(format!(
                        "{c}: forget {ino} -> {:?}",
                        r.map_err(|e| err_name(&e))
                    ));
                }
            }
            _ => {
                let Some((d, n)) = self.pick_name(c) else {
                    return;
                };
                if let Some(ino) = self.resolve(d, &n) {
                    let r = self.fs().fsync(ino);
                    self.log.push(format!(
                        "{c}: fsync {ino} -> {:?}",
                        r.map_err(|e| err_name(&e))
                    ));
                }
            }
        }
    }

    fn rename(&mut self, c: usize) {
        let Some((sd, sn)) = self.pick_name(c) else {
            return;
        };
        // Onto another of the caller's names half of the time (a replace or an exchange),
        // a new name otherwise.
        let (dd, dn) = if self.rng.gen_bool(0.5) {
            match self.pick_name(c) {
                Some(x) => x,
                None => return,
            }
        } else {
            let d = self.pick_dir(c);
            (d, self.new_name(c, sn[0] as char))
        };
        let mode = match self.rng.gen_range(0..3) {
            0 => RenameMode::Replace,
            1 => RenameMode::NoReplace,
            _ => RenameMode::Exchange,
        };
        let src = self.resolve(sd, &sn);
        let dst = self.resolve(dd, &dn);
        let r = self.fs().rename(sd, &sn, dd, &dn, mode);
        let kinds = [src, dst].map(|i| {
            i.and_then(|i| self.fs().getattr(i).ok())
                .map_or("none".to_string(), |a| format!("{:?}", a.kind))
        });
        self.count(
            &format!("rename {mode:?} {} onto {}", kinds[0], kinds[1]),
            r.is_ok(),
        );
        self.log.push(format!(
            "{c}: rename({mode:?}) {sd}/{} [{src:?}] to {dd}/{} [{dst:?}] -> {:?}",
            show(&sn),
            show(&dn),
            r.as_ref().map_err(err_name)
        ));
        if mode == RenameMode::Exchange && src.is_some() && dst.is_some() {
            assert!(
                !matches!(r, Err(FsError::NotFound)),
                "an exchange of two names that exist failed with ENOENT: {}",
                self.ctx()
            );
        }
        if r.is_ok() && src.is_some() && src != dst {
            assert_eq!(
                self.resolve(dd, &dn),
                src,
                "rename's new name: {}",
                self.ctx()
            );
            if mode == RenameMode::Exchange {
                assert_eq!(
                    self.resolve(sd, &sn),
                    dst,
                    "exchange's other name: {}",
                    self.ctx()
                );
            } else if (sd, &sn) != (dd, &dn) {
                assert_eq!(
                    self.resolve(sd, &sn),
                    None,
                    "rename's old name: {}",
                    self.ctx()
                );
            }
            self.callers[c].names.push((dd, dn));
        }
    }

    fn fsck_live(&mut self, what: &str) {
        let ctx = format!("{what}: {}", self.ctx());
        assert_fsck(self.fs(), &ctx);
    }

    /// Unmounts cleanly, then compares the tree in RAM before with the tree a full scan
    /// mounts, then with the tree the scan mount's own checkpoint mounts.
    fn checkpoint_round(&mut self) {
        self.remount_and_compare(true);
    }

    /// Unmounts cleanly and compares the tree in RAM before with the tree the running
    /// mount's checkpoint mounts.
    fn checkpoint_against_scan(&mut self) {
        self.remount_and_compare(false);
    }

    /// Handles and lookups are dropped, as an unmount drops them.
    fn remount_and_compare(&mut self, scan_first: bool) {
        self.fsck_live("before unmount");
        let before = tree(self.fs());
        for c in &mut self.callers {
            c.open.clear();
            c.refs.clear();
        }
        let fs = self.fs.take().expect("mounted");
        let (mut flash, mut nv) = fs.unmount_parts().expect("unmount");
        if scan_first {
            let mut scanned = mount_parts_with(flash, nv, scan_opts()).expect("scan mount");
            self.compare(&mut scanned, &before, "scan");
            // Its unmount writes a checkpoint of what it scanned: that is mounted next.
            (flash, nv) = scanned.unmount_parts().expect("unmount");
        }
        let mut cp = mount_parts(flash, nv).expect("checkpoint mount");
        self.compare(&mut cp, &before, "checkpoint");
        self.fs = Some(cp);
    }

    fn compare(&self, fs: &mut Fs, before: &BTreeMap<String, Seen>, how: &str) {
        assert_fsck(fs, &format!("{how} mount: {}", self.ctx()));
        let d = differences(before, &tree(fs));
        assert!(
            d.is_empty(),
            "the {how}'s tree is not the tree before unmount: {d:#?}\n{}",
            self.ctx()
        );
    }
}

fn show(name: &[u8]) -> String {
    let s = String::from_utf8_lossy(name);
    let t = s.trim_end_matches('X');
    if t.len() < s.len() {
        format!("{t}X*{}", s.len() - t.len())
    } else {
        t.to_string()
    }
}

fn run(seed: u64, callers: usize, steps: usize) -> BTreeMap<String, (u32, u32)> {
    let mut fs = format(Dev::Tiny);
    let mut cs = Vec::new();
    for p in 0..callers {
        let name = format!("p{p:x}");
        let a = fs
            .create(ROOT_INO, name.as_bytes(), dir())
            .expect("caller's dir");
        cs.push(Caller {
            dirs: vec![a.ino],
            names: Vec::new(),
            refs: Vec::new(),
            open: Vec::new(),
            next: 0,
        });
    }
    let mut run = Run {
        fs: Some(fs),
        rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        callers: cs,
        seed,
        step: 0,
        log: Vec::new(),
        tally: BTreeMap::new(),
    };
    // `NANDKIT_STRESS_EVERY=n` compares checkpoint and tree every n calls (1 finds the
    // call that made a difference).
    let check_every: usize = std::env::var("NANDKIT_STRESS_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let at: Option<usize> = std::env::var("NANDKIT_STRESS_AT")
        .ok()
        .and_then(|v| v.parse().ok());
    for step in 0..steps {
        run.step = step;
        let c = run.rng.gen_range(0..callers);
        run.step(c);
        if step % 97 == 96 {
            run.fsck_live("live");
        }
        if at == Some(step) {
            // One extra comparison, to bisect a failure to the call that made it.
            run.checkpoint_against_scan();
        }
        if step % check_every == check_every - 1 {
            if run.rng.gen_bool(0.5) {
                run.checkpoint_round();
            } else {
                run.checkpoint_against_scan();
            }
        }
    }
    run.checkpoint_round();
    run.tally
}

fn seeds() -> std::ops::Range<u64> {
    if std::env::var_os("NANDKIT_LONG").is_some() {
        0..64
    } else {
        0..6
    }
}

#[test]
fn namespace_stress_checkpoint_agrees_with_scan() {
    let mut tally: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let only: Option<u64> = std::env::var("NANDKIT_STRESS_SEED")
        .ok()
        .and_then(|v| v.parse().ok());
    for seed in seeds().filter(|s| only.is_none_or(|o| o == *s)) {
        for (k, (ok, err)) in run(seed, 8, 1200) {
            let e = tally.entry(k).or_default();
            e.0 += ok;
            e.1 += err;
        }
    }
    for (k, (ok, err)) in &tally {
        println!("{k:40} {ok:6} ok {err:6} failed");
    }
    // The paths the fsstress failure took must have run, many times.
    let ok = |k: &str| tally.get(k).map_or(0, |t| t.0);
    assert!(
        ok("rename Exchange Symlink onto Symlink") >= 20,
        "{tally:?}"
    );
    assert!(ok("rename Exchange Dir onto Dir") >= 5, "{tally:?}");
    assert!(ok("rename Replace Symlink onto Symlink") >= 5, "{tally:?}");
    assert!(ok("link l") >= 20, "{tally:?}");
    assert!(ok("forget") >= 100, "{tally:?}");
}

/// The call fsstress found (issue 59): an exchange whose second header cannot hold its new
/// name (a symlink with a long target takes the other object's long name) fails before it
/// writes anything, and the checkpoint then agrees with the tree and the scan.
#[test]
fn an_exchange_whose_second_header_cannot_hold_its_name_changes_nothing() {
    let mut fs = format(Dev::Tiny);
    let d1 = fs.create(ROOT_INO, b"d1", dir()).unwrap().ino;
    let d2 = fs.create(d1, b"d2", dir()).unwrap().ino;
    let long = vec![b'd'; 240];
    let target = vec![b'x'; fs.chunk_bytes() as usize - 200];
    let a = fs.create(d1, &long, dir()).unwrap().ino;
    let b = fs.create(d2, b"l", symlink(&target)).unwrap().ino;
    let r = fs.rename(d1, &long, d2, b"l", RenameMode::Exchange);
    assert!(matches!(r, Err(FsError::NameTooLong)), "{r:?}");
    assert_eq!(fs.lookup(d1, &long).unwrap().ino, a);
    assert_eq!(fs.lookup(d2, b"l").unwrap().ino, b);
    let mut run = Run {
        fs: Some(fs),
        rng: Xoshiro256PlusPlus::seed_from_u64(0),
        callers: Vec::new(),
        seed: 0,
        step: 0,
        log: vec!["exchange of a long-named directory and a symlink with a long target".into()],
        tally: BTreeMap::new(),
    };
    run.checkpoint_round();
    run.checkpoint_against_scan();
}
