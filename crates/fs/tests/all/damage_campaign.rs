//! Damage campaign: the rule "damage is never read as data". Every profile, on images left
//! by a clean unmount and by a power cut, gets one damage at a time: bits flipped in a
//! page's data, tags or ECC bytes; a page garbled, zeroed or erased; one codeword and its
//! ECC bytes erased; a whole block garbled or erased; a block marked bad in the sidecar;
//! bytes of the NVRAM flipped (minv). Then the image is mounted and every file read.
//!
//! Each case ends in one of these:
//! - **refused**: the mount failed with an error (the damage was seen);
//! - **harmless**: every file reads back exactly as before the damage, no file came back;
//! - **reported**: a read or lookup failed with an error, or fsck lists a problem;
//! - **silent**: a file read wrong bytes, vanished or came back from the dead, with no
//!   error on any read and fsck clean. This must never happen, except in the classes named
//!   in [`UNDETECTABLE`], whose share is measured and printed.
//!
//! A panic anywhere fails the case. Deterministic: seeds; `NANDKIT_LONG=1` runs many more.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::common::*;
use nandkit_flash::{DeviceOptions, FlashDevice, StripedFlash};
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Damage {
    FlipData,
    FlipTags,
    FlipEcc,
    GarblePage,
    ZeroPage,
    ErasePage,
    EraseCodeword,
    GarbleBlock,
    EraseBlock,
    SidecarBad,
    FlipNvram,
}

const FLASH_DAMAGES: [Damage; 10] = [
    Damage::FlipData,
    Damage::FlipTags,
    Damage::FlipEcc,
    Damage::GarblePage,
    Damage::ZeroPage,
    Damage::ErasePage,
    Damage::EraseCodeword,
    Damage::GarbleBlock,
    Damage::EraseBlock,
    Damage::SidecarBad,
];

/// Damage the file system cannot see, by design: (profiles, images, damage, why). `"*"`
/// is every profile; images are "clean", "crashed" or "*". Each class's silent cases are
/// counted and printed with their share; anything silent outside this list fails.
const UNDETECTABLE: &[(&str, &str, Damage, &str)] = &[
    (
        "*",
        "crashed",
        Damage::EraseBlock,
        "after a power cut a block erased whole looks like one cleaning erased: with no \
         checkpoint, nothing on flash says it held pages",
    ),
    (
        "yaffs1 mnfs",
        "*",
        Damage::EraseBlock,
        "these profiles keep no checkpoint: every mount is the scan above",
    ),
    (
        "*",
        "crashed",
        Damage::GarbleBlock,
        "a block whose every page fails is what an erase cut by power leaves; a mount must \
         accept it, and with no checkpoint nothing says it held pages",
    ),
    (
        "yaffs1 mnfs",
        "*",
        Damage::GarbleBlock,
        "no checkpoint: every mount is the scan above",
    ),
    (
        "yaffs1 mnfs",
        "*",
        Damage::ErasePage,
        "a page that reads erased reads as never written: the tag walk of these logs skips it \
         as it skips the pages a torn erase leaves, and their small tags hold no count of \
         pages written",
    ),
    (
        "yaffs1",
        "*",
        Damage::ZeroPage,
        "zeroed tags are YAFFS1's deletion marker (its 8 tag bytes hold no check); the mount \
         reads tags only, as YAFFS1 does, so a zeroed live page reads as a stale one",
    ),
    (
        "yaffs1",
        "*",
        Damage::FlipTags,
        "tags that fail their check over data that pass ECC are what a deletion marker cut \
         by power leaves (a second program of the spare): the page reads as stale",
    ),
    (
        "*",
        "crashed",
        Damage::ErasePage,
        "a page that reads erased ends the walk of a block left open, as YAFFS2's scan does: \
         pages are programmed in order, and a cut program can leave one that reads erased",
    ),
];

/// Why damage among the last written pages of a block left open can pass unseen.
const TEAR_ZONE_WHY: &str = "among the last pages written to a block left open, a page \
     that fails reads as the program a power cut tore (a scan cannot tell them apart), \
     where a scan decides: after a power cut, and always for yaffs1 and mnfs, which keep no \
     checkpoint";

fn tear_zone_undetectable(label: &str) -> bool {
    label.ends_with("/crashed") || label.starts_with("yaffs1/") || label.starts_with("mnfs/")
}

fn undetectable(label: &str, d: Damage) -> Option<&'static str> {
    let mut parts = label.split('/');
    let (profile, state) = (parts.next().unwrap_or(""), parts.nth(1).unwrap_or(""));
    UNDETECTABLE
        .iter()
        .find(|(profiles, images, k, _)| {
            *k == d
                && (*profiles == "*" || profiles.split(' ').any(|p| p == profile))
                && (*images == "*" || *images == state)
        })
        .map(|x| x.3)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Refused,
    Harmless,
    Reported,
    Silent,
    /// Silent, with the damaged page among the last written pages of a block left open,
    /// which a scan takes for a power cut's torn program: undetectable where a scan
    /// decides (after a crash; always for yaffs1 and mnfs, which keep no checkpoint).
    SilentInTearZone,
}

/// What a path holds, as a reader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Content {
    File(Vec<u8>),
    Symlink(Vec<u8>),
    Dir,
    Other,
}

/// Every path and what it holds; a path whose read fails is reported in `errors`.
fn snapshot(fs: &mut Fs) -> (BTreeMap<String, Content>, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut errors = Vec::new();
    let mut stack: Vec<(String, Ino)> = vec![(String::new(), ROOT_INO)];
    let mut visited = std::collections::BTreeSet::new();
    while let Some((path, ino)) = stack.pop() {
        if !visited.insert((path.clone(), ino)) || path.len() > 400 {
            continue;
        }
        let a = match fs.getattr(ino) {
            Ok(a) => a,
            Err(e) => {
                errors.push(format!("stat {path}: {e}"));
                continue;
            }
        };
        let content = match a.kind {
            Kind::Dir => {
                match fs.readdir(ino) {
                    Ok(entries) => {
                        for e in entries {
                            let name = String::from_utf8_lossy(&e.name).into_owned();
                            stack.push((format!("{path}/{name}"), e.ino));
                        }
                    }
                    Err(e) => errors.push(format!("readdir {path}: {e}")),
                }
                Content::Dir
            }
            Kind::File => {
                let mut buf = vec![0; a.size as usize];
                match fs.read(ino, 0, &mut buf) {
                    Ok(n) if n == buf.len() => Content::File(buf),
                    Ok(n) => {
                        errors.push(format!("short read of {path}: {n} of {}", buf.len()));
                        continue;
                    }
                    Err(e) => {
                        errors.push(format!("read {path}: {e}"));
                        continue;
                    }
                }
            }
            Kind::Symlink => match fs.readlink(ino) {
                Ok(t) => Content::Symlink(t),
                Err(e) => {
                    errors.push(format!("readlink {path}: {e}"));
                    continue;
                }
            },
            _ => Content::Other,
        };
        out.insert(if path.is_empty() { "/".into() } else { path }, content);
    }
    (out, errors)
}

/// A tree with history: files of many sizes in three directories, some rewritten in
/// place, some truncated, some deleted (so a deleted file that comes back is seen), a
/// symlink, hard links. Everything is synced.
fn populate(fs: &mut Fs, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = fs.chunk_bytes() as usize;
    let d1 = fs.create(ROOT_INO, b"d1", dir()).unwrap().ino;
    let d2 = fs.create(d1, b"d2", dir()).unwrap().ino;
    let dirs = [ROOT_INO, d1, d2];
    let mut files = Vec::new();
    for i in 0..24u32 {
        let p = dirs[i as usize % 3];
        let name = format!("f{i}");
        let f = fs.create(p, name.as_bytes(), file()).unwrap().ino;
        let len = rng.gen_range(1..10 * c);
        fs.write(f, 0, &pattern(u64::from(i) * 7 + seed, len))
            .unwrap();
        if i % 3 == 0 {
            let at = rng.gen_range(0..len as u64);
            fs.write(f, at, &pattern(1000 + u64::from(i), c / 2 + 7))
                .unwrap();
        }
        if i % 5 == 1 {
            let half = SetAttr {
                size: Some(len as u64 / 2),
                ..SetAttr::default()
            };
            fs.setattr(f, half).unwrap();
        }
        fs.fsync(f).unwrap();
        files.push((p, name, f));
    }
    for (k, (p, n, f)) in files.iter().enumerate() {
        match k % 6 {
            0 => fs.unlink(*p, n.as_bytes()).unwrap(),
            1 => {
                fs.link(*f, d2, format!("h{k}").as_bytes()).unwrap();
            }
            _ => {}
        }
    }
    fs.create(d1, b"sym", symlink(b"../f2")).unwrap();
    fs.sync().unwrap();
}

#[derive(Clone, Copy)]
struct Profile {
    name: &'static str,
    dev: Dev,
}

const PROFILES: [Profile; 9] = [
    Profile {
        name: "yaffs",
        dev: Dev::Tiny,
    },
    Profile {
        name: "yaffs",
        dev: Dev::Small,
    },
    Profile {
        name: "yaffs1",
        dev: Dev::Small,
    },
    Profile {
        name: "moda",
        dev: Dev::Tiny,
    },
    Profile {
        name: "dac",
        dev: Dev::Tiny,
    },
    Profile {
        name: "page-hotcold",
        dev: Dev::Tiny,
    },
    Profile {
        name: "mnfs",
        dev: Dev::Tiny,
    },
    Profile {
        name: "hybrid",
        dev: Dev::Tiny,
    },
    Profile {
        name: "minv",
        dev: Dev::Tiny,
    },
];

fn sidecar(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

/// A populated image of `profile` (and its NVRAM file for minv), left clean or crashed.
struct Base {
    image: PathBuf,
    nvram: Option<PathBuf>,
    dev: Dev,
    profile: &'static str,
    clean: bool,
    want: BTreeMap<String, Content>,
}

impl Base {
    fn new(dir: &Path, p: Profile, clean: bool) -> Base {
        let tag = format!("{}-{}-{}", p.name, p.dev.name(), clean);
        let image = dir.join(format!("{tag}.img"));
        let flash =
            FlashDevice::create_image(&image, p.dev.config(), true, DeviceOptions::default())
                .unwrap();
        let config = FsConfig::profile(p.name, p.dev.blocks()).unwrap();
        let nvram = (config.metadata == meta::MetadataKind::Nvram)
            .then(|| dir.join(format!("{tag}.nvram")));
        let mut fs = match &nvram {
            Some(path) => {
                let nv =
                    nandkit_nvram::Nvram::create_file(path, ram_nvram().config().clone(), true)
                        .unwrap();
                FileSystem::format_with_nvram(StripedFlash::new(flash), nv, config, clock())
                    .unwrap()
            }
            None => FileSystem::format(StripedFlash::new(flash), config, clock()).unwrap(),
        };
        populate(&mut fs, 1);
        if clean {
            drop(fs.unmount_parts().unwrap());
        } else {
            // Power fails after the sync: nothing more is written.
            drop(fs.into_parts());
        }
        let mut base = Base {
            image,
            nvram,
            dev: p.dev,
            profile: p.name,
            clean,
            want: BTreeMap::new(),
        };
        let work = dir.join("expect.img");
        let (mut fs, _) = base.mount_copy(&work).expect("the undamaged image mounts");
        let (want, errors) = snapshot(&mut fs);
        assert!(errors.is_empty(), "{tag}: undamaged image: {errors:?}");
        assert_fsck(&mut fs, &format!("{tag}: undamaged image"));
        base.want = want;
        base
    }

    /// Copies the image (and NVRAM) to `work`, so a case damages its own copy.
    fn copy_to(&self, work: &Path) -> Option<PathBuf> {
        std::fs::copy(&self.image, work).unwrap();
        std::fs::copy(sidecar(&self.image), sidecar(work)).unwrap();
        self.nvram.as_ref().map(|n| {
            let w = work.with_extension("nvram");
            std::fs::copy(n, &w).unwrap();
            w
        })
    }

    fn mount_copy(&self, work: &Path) -> Result<(Fs, ())> {
        let nv = self.copy_to(work);
        mount_work(work, nv.as_deref()).map(|fs| (fs, ()))
    }
}

fn mount_work(work: &Path, nvram: Option<&Path>) -> Result<Fs> {
    let flash = FlashDevice::open_image(work, DeviceOptions::default())
        .map_err(|e| FsError::Io(e.to_string()))?;
    match nvram {
        Some(n) => {
            let nv = nandkit_nvram::Nvram::open_file(n).map_err(|e| FsError::Io(e.to_string()))?;
            mount_parts(flash, Some(nv))
        }
        None => mount(flash),
    }
}

/// Applies one damage to the image at `work` (or its NVRAM); says where.
fn damage(
    work: &Path,
    nvram: Option<&Path>,
    dev: Dev,
    d: Damage,
    rng: &mut Xoshiro256PlusPlus,
) -> String {
    let g = dev.config().geometry;
    let raw = g.raw_page_bytes();
    let page = g.page_size_bytes as usize;
    let ppb = g.pages_per_block as usize;
    let ecc_at = page + g.oob_ecc_offset();
    if d == Damage::FlipNvram {
        let path = nvram.expect("an NVRAM");
        let mut bytes = std::fs::read(path).unwrap();
        let used: Vec<usize> = (4096..bytes.len()).filter(|&i| bytes[i] != 0).collect();
        let mut at = Vec::new();
        for _ in 0..rng.gen_range(1..4) {
            let i = used[rng.gen_range(0..used.len())];
            bytes[i] ^= 1 << rng.gen_range(0..8);
            at.push(i - 4096);
        }
        std::fs::write(path, bytes).unwrap();
        return format!("NVRAM bytes {at:?}");
    }
    let mut bytes = std::fs::read(work).unwrap();
    let before = bytes.clone();
    let pages = bytes.len() / raw;
    let programmed: Vec<usize> = (0..pages)
        .filter(|&p| bytes[p * raw..(p + 1) * raw].iter().any(|&b| b != 0xFF))
        .collect();
    let p = programmed[rng.gen_range(0..programmed.len())];
    let block = p / ppb;
    let flip = |buf: &mut [u8], range: std::ops::Range<usize>, rng: &mut Xoshiro256PlusPlus| {
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(range.clone());
            buf[i] ^= 1 << rng.gen_range(0..8);
        }
    };
    // Tags: in the OOB's free bytes (after the bad-block marker), or at the end of the
    // data for in-band tags.
    let tags = if ecc_at - page >= 16 {
        page + 2..ecc_at
    } else {
        page - 40..page
    };
    let pg = p * raw..(p + 1) * raw;
    match d {
        Damage::FlipData => flip(&mut bytes[pg.clone()], 0..page, rng),
        Damage::FlipTags => flip(&mut bytes[pg.clone()], tags.clone(), rng),
        Damage::FlipEcc => {
            if ecc_at < raw {
                flip(&mut bytes[pg.clone()], ecc_at..raw, rng)
            } else {
                flip(&mut bytes[pg.clone()], tags.clone(), rng)
            }
        }
        Damage::GarblePage => rng.fill(&mut bytes[pg.clone()]),
        Damage::ZeroPage => bytes[pg.clone()].fill(0),
        Damage::ErasePage => bytes[pg.clone()].fill(0xFF),
        Damage::EraseCodeword => {
            let cw = dev.config().ecc.codeword_bytes as usize;
            let per = dev.config().ecc.check_bytes as usize;
            let k = rng.gen_range(0..(page / cw).max(1));
            bytes[pg.start + k * cw..pg.start + (k + 1) * cw].fill(0xFF);
            if per > 0 {
                let at = pg.start + ecc_at + k * per;
                bytes[at..at + per].fill(0xFF);
            }
        }
        Damage::GarbleBlock => {
            for q in block * ppb..(block + 1) * ppb {
                if bytes[q * raw..(q + 1) * raw].iter().any(|&b| b != 0xFF) {
                    rng.fill(&mut bytes[q * raw..(q + 1) * raw]);
                }
            }
        }
        Damage::EraseBlock => {
            bytes[block * ppb * raw..(block + 1) * ppb * raw].fill(0xFF);
            // As an erase leaves it: no page programmed (the erase count stays).
            let meta = sidecar(work);
            let mut m = std::fs::read(&meta).unwrap();
            let at = 4096 + 16 * block + 4;
            m[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            std::fs::write(&meta, m).unwrap();
        }
        Damage::SidecarBad => {
            let meta = sidecar(work);
            let mut m = std::fs::read(&meta).unwrap();
            let at = 4096 + 16 * block + 8;
            let flags = u32::from_le_bytes(m[at..at + 4].try_into().unwrap()) | 2;
            m[at..at + 4].copy_from_slice(&flags.to_le_bytes());
            std::fs::write(&meta, m).unwrap();
        }
        Damage::FlipNvram => unreachable!(),
    }
    // The tear zone: the last pages programmed in a block left open (its last page
    // erased), where a power cut's torn program lies.
    let programmed_in_block = (block * ppb..(block + 1) * ppb)
        .filter(|&q| before[q * raw..(q + 1) * raw].iter().any(|&b| b != 0xFF))
        .max()
        .map_or(0, |q| q - block * ppb + 1);
    let open = programmed_in_block < ppb;
    let tail = open && p % ppb + TEAR_ZONE >= programmed_in_block;
    std::fs::write(work, bytes).unwrap();
    format!(
        "page {p} (block {block}, page {} of it{})",
        p % ppb,
        if tail { ", in the tear zone" } else { "" }
    )
}

/// Pages at the end of an open block a scan takes for a power cut's tear (see
/// `scan_damage::TORN_PAGES_MAX`).
const TEAR_ZONE: usize = 16;

/// One case: damage a copy, mount it, read everything, fsck.
fn case(base: &Base, work: &Path, d: Damage, seed: u64) -> (Outcome, String) {
    let nv = base.copy_to(work);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let at = damage(work, nv.as_deref(), base.dev, d, &mut rng);
    let mut fs = match mount_work(work, nv.as_deref()) {
        Ok(fs) => fs,
        Err(e) => return (Outcome::Refused, format!("{at}: mount refused: {e}")),
    };
    let (got, errors) = snapshot(&mut fs);
    let mut wrong = Vec::new();
    for (path, w) in &base.want {
        match got.get(path) {
            Some(g) if g == w => {}
            Some(g) => wrong.push(match (g, w) {
                (Content::File(g), Content::File(w)) => {
                    let at = g
                        .iter()
                        .zip(w)
                        .position(|(a, b)| a != b)
                        .unwrap_or(g.len().min(w.len()));
                    format!(
                        "{path} reads other bytes (from byte {at} of {}, {} expected)",
                        g.len(),
                        w.len()
                    )
                }
                _ => format!("{path} reads other bytes"),
            }),
            None if errors.iter().any(|e| e.contains(path.as_str())) => {}
            None => wrong.push(format!("{path} is gone")),
        }
    }
    for path in got.keys().filter(|p| !base.want.contains_key(*p)) {
        wrong.push(format!("{path} appeared"));
    }
    let report = fs.fsck();
    let detail = format!(
        "{at}: {wrong:?}; errors {errors:?}; fsck {:?}",
        report.problems
    );
    let outcome = if !errors.is_empty() || !report.is_clean() {
        Outcome::Reported
    } else if wrong.is_empty() {
        Outcome::Harmless
    } else if at.contains("tear zone") {
        Outcome::SilentInTearZone
    } else {
        Outcome::Silent
    };
    (outcome, detail)
}

fn campaign(cases_per_kind: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work.img");
    // (profile, damage) -> outcome counts
    let mut table: BTreeMap<(String, Damage), BTreeMap<Outcome, u32>> = BTreeMap::new();
    let mut silent = Vec::new();
    let mut total = 0u32;
    let only = std::env::var("NANDKIT_CAMPAIGN_ONLY").ok();
    for p in PROFILES {
        if only.as_deref().is_some_and(|o| o != p.name) {
            continue;
        }
        for clean in [true, false] {
            let base = Base::new(tmp.path(), p, clean);
            let label = format!(
                "{}/{}/{}",
                p.name,
                p.dev.name(),
                if clean { "clean" } else { "crashed" }
            );
            let mut kinds = FLASH_DAMAGES.to_vec();
            if base.nvram.is_some() {
                kinds.push(Damage::FlipNvram);
            }
            for d in kinds {
                for k in 0..cases_per_kind {
                    let seed = k * 1000 + d as u64;
                    let r = catch_unwind(AssertUnwindSafe(|| case(&base, &work, d, seed)));
                    let (outcome, detail) = r.unwrap_or_else(|e| {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        panic!("{label} {d:?} seed {seed}: panicked: {msg}")
                    });
                    total += 1;
                    *table
                        .entry((label.clone(), d))
                        .or_default()
                        .entry(outcome)
                        .or_default() += 1;
                    if matches!(outcome, Outcome::Silent | Outcome::SilentInTearZone) {
                        silent.push((label.clone(), d, seed, detail));
                    }
                }
            }
            let _ = (base.profile, base.clean);
        }
    }
    println!("{total} damaged images:");
    println!(
        "{:34} {:14} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "image", "damage", "refused", "harmless", "reported", "silent", "at tear"
    );
    for ((label, d), o) in &table {
        let n = |x| o.get(&x).copied().unwrap_or(0);
        println!(
            "{label:34} {:14} {:8} {:8} {:8} {:8} {:8}",
            format!("{d:?}"),
            n(Outcome::Refused),
            n(Outcome::Harmless),
            n(Outcome::Reported),
            n(Outcome::Silent),
            n(Outcome::SilentInTearZone)
        );
    }
    let mut named: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for ((label, d), o) in &table {
        let all: u32 = o.values().sum();
        let silent_of = |x| o.get(&x).copied().unwrap_or(0);
        if let Some(why) = undetectable(label, *d) {
            let e = named.entry(format!("{d:?}: {why}")).or_default();
            e.0 += silent_of(Outcome::Silent) + silent_of(Outcome::SilentInTearZone);
            e.1 += all;
        } else if tear_zone_undetectable(label) {
            let e = named
                .entry(format!("any damage: {TEAR_ZONE_WHY}"))
                .or_default();
            e.0 += silent_of(Outcome::SilentInTearZone);
            e.1 += all;
        }
    }
    for (class, (silent, all)) in &named {
        println!("undetectable by design, {silent} silent of {all} cases: {class}");
    }
    let silent_named: u32 = named.values().map(|v| v.0).sum();
    println!(
        "silent: {} of {total} damaged images, all in the classes above ({:.1}%)",
        silent_named,
        100.0 * f64::from(silent_named) / f64::from(total.max(1))
    );
    let bad: Vec<_> = silent
        .iter()
        .filter(|(l, d, _, detail)| {
            undetectable(l, *d).is_none()
                && !(detail.contains("tear zone") && tear_zone_undetectable(l))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {total} damaged images read wrong without an error and fsck clean:\n{}",
        bad.len(),
        bad.iter()
            .take(30)
            .map(|(l, d, s, detail)| format!("  {l} {d:?} seed {s}: {detail}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn damage_is_never_read_as_data() {
    let n = if std::env::var_os("NANDKIT_LONG").is_some() {
        12
    } else {
        2
    };
    campaign(n);
}
