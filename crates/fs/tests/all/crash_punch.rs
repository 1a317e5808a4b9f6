//! Power cuts during hole punching and zeroing. Like `crash.rs`: each workload runs once
//! uncut to count its state-changing flash operations, then once per operation index with
//! the power cut armed there. After the cut the device is power-cycled and mounted (a
//! scan), and:
//! - mount succeeds and fsck is clean;
//! - every byte fsync'd (or punched or zeroed by a call that returned: both are durable
//!   when they return) reads back exactly; bytes changed since may hold any value a change
//!   since gave them (`FileHistory::check`; a punch or zeroing in flight counts as a write
//!   of zeros);
//! - a punch in flight when the power went is all-or-nothing per chunk: each whole chunk
//!   of its range holds its old bytes or zeros, never a mix;
//! - the recovered file system keeps working: another punch, a write into it, a crash
//!   remount, and everything reads back exactly.
//!
//! Three workloads: two on a fresh device (punches in the middle, at the edges, of whole
//! and partial chunks, past the end; zeroing with and without KEEP_SIZE; writes into
//! punched ranges; truncation and regrowth over punched ranges; more punches than a header
//! keeps floors for, so floors merge), and one on a nearly full device, where punches and
//! writes set off cleaning.
//! A failure names the workload, the geometry and the op number: rerunning that cut
//! replays it exactly.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::common::*;
use nandkit_flash::{FlashDevice, PowerCut};
use nandkit_fs::*;

/// A punch in flight, for the per-chunk check: the content before it, when that content
/// was all durable (so each chunk must read as before or as zeros).
#[derive(Clone, Debug)]
struct InFlight {
    ino: Ino,
    from: u64,
    to: u64,
    before: Vec<u8>,
}

struct Driver {
    fs: Fs,
    files: BTreeMap<Ino, FileHistory>,
    in_flight: Option<InFlight>,
}

impl Driver {
    fn new(fs: Fs, files: BTreeMap<Ino, FileHistory>) -> Driver {
        Driver {
            fs,
            files,
            in_flight: None,
        }
    }

    fn create(&mut self, name: &[u8]) -> Result<Ino> {
        let ino = self.fs.create(ROOT_INO, name, file())?.ino;
        // Durable once it returns (a header write).
        self.files.insert(ino, FileHistory::default());
        Ok(ino)
    }

    fn write(&mut self, ino: Ino, off: u64, data: &[u8]) -> Result<()> {
        self.files.get_mut(&ino).unwrap().write(off, data);
        let n = self.fs.write(ino, off, data)?;
        assert_eq!(n, data.len(), "short write without a power cut");
        Ok(())
    }

    fn fsync(&mut self, ino: Ino) -> Result<()> {
        self.fs.fsync(ino)?;
        self.files.get_mut(&ino).unwrap().synced();
        Ok(())
    }

    fn truncate(&mut self, ino: Ino, size: u64) -> Result<()> {
        self.files.get_mut(&ino).unwrap().truncate(size);
        let set = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        self.fs.setattr(ino, set).map(|_| ())
    }

    fn punch(&mut self, ino: Ino, off: u64, len: u64) -> Result<()> {
        let h = self.files.get_mut(&ino).unwrap();
        let size = h.current.len() as u64;
        let to = (off + len).min(size);
        if h.pending.is_empty() {
            self.in_flight = Some(InFlight {
                ino,
                from: off,
                to,
                before: h.current.clone(),
            });
        }
        if off < to {
            h.write(off, &vec![0; (to - off) as usize]);
        }
        self.fs.punch_hole(ino, off, len)?;
        self.files.get_mut(&ino).unwrap().synced();
        self.in_flight = None;
        Ok(())
    }

    fn zero(&mut self, ino: Ino, off: u64, len: u64, keep_size: bool) -> Result<()> {
        let h = self.files.get_mut(&ino).unwrap();
        let size = h.current.len() as u64;
        let new_size = if keep_size { size } else { size.max(off + len) };
        if new_size > size {
            h.truncate(new_size);
        }
        let to = (off + len).min(new_size);
        if off < to {
            h.write(off, &vec![0; (to - off) as usize]);
        }
        self.fs.zero_range(ino, off, len, keep_size)?;
        self.files.get_mut(&ino).unwrap().synced();
        Ok(())
    }
}

type Workload = fn(&mut Driver) -> Result<()>;

/// Punches, zeroing, writes into punched ranges, truncation and regrowth, on two files.
fn punch_workload(d: &mut Driver) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let a = d.create(b"a")?;
    let b = d.create(b"b")?;
    d.write(a, 0, &pattern(1, (12 * c + c / 3) as usize))?;
    d.write(b, 0, &pattern(2, (5 * c) as usize))?;
    d.fsync(a)?;
    d.fsync(b)?;
    // Whole chunks in the middle.
    d.punch(a, 3 * c, 3 * c)?;
    // Partial chunks at both edges, no whole chunk.
    d.punch(a, c / 2, c / 2 + c / 4)?;
    // A write into the punched range, not synced; then a punch flushes it.
    d.write(a, 4 * c + 10, &pattern(3, (c + 90) as usize))?;
    d.punch(a, 7 * c + 5, 3 * c - 12)?;
    // Zeroing, in place and growing the file.
    d.zero(a, 2 * c, 2 * c + 200, true)?;
    d.zero(a, 11 * c, 4 * c, false)?;
    d.write(b, 2 * c + 7, &pattern(4, 100))?;
    d.write(a, 12 * c, &pattern(5, (c + 5) as usize))?;
    d.fsync(a)?;
    // Shrink over punched ranges, regrow, punch the regrown gap and what is left.
    d.truncate(a, 8 * c + 3)?;
    d.write(a, 8 * c + 3, &pattern(6, 50))?;
    d.truncate(a, 14 * c)?;
    d.fsync(a)?;
    d.punch(a, 0, 2 * c)?;
    d.punch(a, 13 * c, 7 * c)?;
    d.punch(b, c - 1, 2)?;
    d.zero(b, 0, 9 * c, false)?;
    d.write(b, 3 * c, &pattern(7, (2 * c) as usize))?;
    d.fsync(b)?;
    d.write(a, c + 1, &pattern(8, (3 * c) as usize))?;
    d.punch(a, 2 * c, c)?;
    Ok(())
}

/// More punches than a header keeps floors for (so floors merge, rewriting live chunks
/// first), between a shrink and regrowth and writes into some of the holes.
fn many_punches_workload(d: &mut Driver) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let a = d.create(b"a")?;
    d.write(a, 0, &pattern(30, (30 * c) as usize))?;
    d.fsync(a)?;
    d.truncate(a, 24 * c + 9)?;
    d.truncate(a, 30 * c)?;
    for i in 0..12u64 {
        d.punch(a, (i * 2 + i % 2) * c + 3, 2 * c + 5)?;
        if i % 4 == 3 {
            d.write(a, (i * 2 - 3) * c + 1, &pattern(40 + i, 20))?;
        }
    }
    d.fsync(a)
}

/// On a nearly full device: overwrites that make the cleaner work, with punches and
/// zeroing of the hot file between them.
fn full_workload(d: &mut Driver) -> Result<()> {
    let c = d.fs.chunk_bytes() as u64;
    let hot = *d.files.keys().last().unwrap();
    for i in 0..24u64 {
        let off = (i * 37 % 290) * c + i * 11;
        d.write(hot, off, &pattern(50 + i, (2 * c + c / 3) as usize))?;
        match i % 4 {
            0 => d.punch(hot, off + c / 2, 3 * c)?,
            1 => d.fsync(hot)?,
            2 => d.zero(hot, off + c, c + c / 2, true)?,
            _ => d.punch(hot, (i * 53 % 280) * c, 6 * c)?,
        }
    }
    d.fsync(hot)
}

/// Checks the recovered file system against what must have survived; returns the
/// contents read.
fn check(
    fs: &mut Fs,
    files: &BTreeMap<Ino, FileHistory>,
    in_flight: Option<&InFlight>,
    ctx: &str,
) -> BTreeMap<Ino, Vec<u8>> {
    assert_fsck(fs, ctx);
    let c = fs.chunk_bytes() as u64;
    let mut out = BTreeMap::new();
    for (&ino, h) in files {
        let got = read_all(fs, ino).unwrap_or_else(|e| panic!("{ctx}: read of {ino}: {e}"));
        if let Err(why) = h.check(&got) {
            panic!("{ctx}: file {ino}: {why}");
        }
        if let Some(p) = in_flight.filter(|p| p.ino == ino) {
            // Each whole chunk of the range: as before, or zeros.
            let mut k = p.from.div_ceil(c);
            while k * c < p.to {
                let (s, e) = (k * c, ((k + 1) * c).min(p.to));
                let full = (k + 1) * c <= p.to || e == p.before.len() as u64;
                if full && e <= got.len() as u64 {
                    let part = &got[s as usize..e as usize];
                    let old = &p.before[s as usize..e as usize];
                    assert!(
                        part == old || part.iter().all(|&x| x == 0),
                        "{ctx}: chunk {k} of {ino} is a mix of old bytes and zeros"
                    );
                }
                k += 1;
            }
        }
        out.insert(ino, got);
    }
    out
}

/// After recovery: another punch and a write into it, a crash remount, all exact.
fn keep_working(mut fs: Fs, mut contents: BTreeMap<Ino, Vec<u8>>, ctx: &str) {
    let c = fs.chunk_bytes() as u64;
    for (&ino, v) in contents.iter_mut() {
        let len = v.len() as u64;
        if len < 3 * c {
            continue;
        }
        fs.punch_hole(ino, c / 3, 2 * c)
            .unwrap_or_else(|e| panic!("{ctx}: punch after recovery: {e}"));
        v[(c / 3) as usize..(c / 3 + 2 * c) as usize].fill(0);
        let w = pattern(u64::from(ino), 100);
        fs.write(ino, c + 3, &w).unwrap();
        v[(c + 3) as usize..(c + 103) as usize].copy_from_slice(&w);
        fs.fsync(ino).unwrap();
    }
    let mut fs = crash_remount(fs);
    assert_fsck(&mut fs, ctx);
    for (&ino, v) in &contents {
        assert_bytes(
            &read_all(&mut fs, ino).unwrap(),
            v,
            &format!("{ctx}: crash-remounted after recovery"),
        );
    }
}

fn run(
    fs: Fs,
    files: &BTreeMap<Ino, FileHistory>,
    w: Workload,
    cut: Option<u64>,
) -> (Driver, Result<()>) {
    let mut fs = fs;
    if let Some(n) = cut {
        fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
    }
    let mut d = Driver::new(fs, files.clone());
    let r = w(&mut d);
    (d, r)
}

/// Cuts power at every op of `w`, each run on a fresh `start()`.
fn sweep(
    name: &str,
    dev: Dev,
    start: &mut dyn FnMut() -> (Fs, BTreeMap<Ino, FileHistory>),
    w: Workload,
) {
    let t = Instant::now();
    let (fs, files) = start();
    let base = fs.device().state_ops();
    let (mut d, r) = run(fs, &files, w, None);
    r.unwrap_or_else(|e| panic!("{name} on {}: uncut run failed: {e}", dev.name()));
    let total = d.fs.device().state_ops() - base;
    let cleaned = d.fs.stats().blocks_cleaned;
    let ctx = format!("{name} on {} uncut", dev.name());
    check(&mut d.fs, &d.files, None, &ctx);
    for n in 0..total {
        let ctx = format!("{name} on {}: power cut at op {n} of {total}", dev.name());
        let (fs, files) = start();
        let (d, r) = run(fs, &files, w, Some(n));
        assert!(
            r.is_err(),
            "{ctx}: the workload finished although power was cut"
        );
        let Driver { fs, .. } = &d;
        assert!(
            fs.device().power_lost(),
            "{ctx}: failed without a power cut: {r:?}"
        );
        let Driver {
            fs,
            files,
            in_flight,
        } = d;
        let mut flash = fs.into_device();
        flash.power_cycle().unwrap();
        let mut fs = mount(flash).unwrap_or_else(|e| panic!("{ctx}: mount after the cut: {e}"));
        let contents = check(&mut fs, &files, in_flight.as_ref(), &ctx);
        keep_working(fs, contents, &ctx);
    }
    println!(
        "{name} on {}: {total} state-changing ops ({cleaned} blocks cleaned uncut), swept in {:.1?}",
        dev.name(),
        t.elapsed()
    );
}

#[test]
fn crash_punch_sweep() {
    for dev in Dev::ALL {
        let mut start = || (format(dev), BTreeMap::new());
        sweep("punch", dev, &mut start, punch_workload);
        sweep("many punches", dev, &mut start, many_punches_workload);
    }
}

/// A nearly full device with a cold file and a hot one, cleanly unmounted.
fn full_snapshot(dev: Dev) -> (FlashDevice, BTreeMap<Ino, FileHistory>) {
    let mut fs = format(dev);
    let c = fs.chunk_bytes() as usize;
    let cold = fs.create(ROOT_INO, b"cold", file()).unwrap().ino;
    fs.write(cold, 0, &pattern(1, 2900 * c)).unwrap();
    let hot = fs.create(ROOT_INO, b"hot", file()).unwrap().ino;
    fs.write(hot, 0, &pattern(2, 300 * c)).unwrap();
    for i in 0..300u64 {
        let off = (i * 7919 % 300) as usize * c;
        fs.write(hot, off as u64, &pattern(100 + i, c)).unwrap();
    }
    fs.sync().unwrap();
    let mut files = BTreeMap::new();
    for ino in [cold, hot] {
        let mut h = FileHistory::default();
        h.adopt(read_all(&mut fs, ino).unwrap());
        files.insert(ino, h);
    }
    (fs.unmount().unwrap().into_inner(), files)
}

#[test]
fn crash_punch_full_device_sweep() {
    for dev in Dev::ALL {
        let (mut snap, files) = full_snapshot(dev);
        let mut start = || (mount(clone_device(&mut snap)).unwrap(), files.clone());
        sweep("punch on a full device", dev, &mut start, full_workload);
    }
}
