//! Corrupt images: a populated device gets bit flips, garbage tags, torn and zeroed pages,
//! duplicated pages and half-erased blocks, through the raw image file or through injected
//! ECC errors. Mount must then either fail with a clean error or succeed; it must never
//! panic. After a successful mount fsck runs and may report damaged data (what the
//! corruption did) but never a broken structure, and the file system keeps working: every
//! call answers (errors allowed), it writes, unmounts and mounts again.
//!
//! Each case is one seed; a failure names it. `NANDKIT_LONG=1` runs many more seeds;
//! `NANDKIT_SHOW_REFUSALS=1` prints why each refused mount refused.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::common::*;
use nandkit_flash::{DeviceOptions, FlashDevice, PageAddr};
use nandkit_fs::format::tags::{PageKind, SpecialKind, TagRead, Tags};
use nandkit_fs::format::Record;
use nandkit_fs::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn seeds(default: u64, long: u64) -> std::ops::Range<u64> {
    if std::env::var_os("NANDKIT_LONG").is_some() {
        0..long
    } else {
        0..default
    }
}

/// Fills a file system with a tree that has history: several versions of headers, data
/// overwritten, deletes (tombstones), links, a symlink, xattrs, special files.
fn populate(fs: &mut Fs, seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let c = fs.chunk_bytes() as usize;
    let d1 = fs.create(ROOT_INO, b"d1", dir()).unwrap().ino;
    let d2 = fs.create(d1, b"d2", dir()).unwrap().ino;
    let mut files = Vec::new();
    for i in 0..30u32 {
        let p = [ROOT_INO, d1, d2][i as usize % 3];
        let f = fs
            .create(p, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        let len = rng.gen_range(0..12 * c);
        fs.write(f, 0, &pattern(u64::from(i), len)).unwrap();
        if i % 4 == 0 {
            fs.write(f, rng.gen_range(0..len as u64 + 1), &pattern(99, c))
                .unwrap();
        }
        if i % 3 == 0 {
            fs.fsync(f).unwrap();
        }
        files.push((p, format!("f{i}"), f));
    }
    for (k, (p, n, f)) in files.iter().enumerate() {
        match k % 7 {
            0 => fs.unlink(*p, n.as_bytes()).unwrap(),
            1 => {
                fs.link(*f, ROOT_INO, format!("l{k}").as_bytes()).unwrap();
            }
            2 => fs
                .rename(
                    *p,
                    n.as_bytes(),
                    d2,
                    format!("r{k}").as_bytes(),
                    RenameMode::Replace,
                )
                .unwrap(),
            3 => fs
                .setxattr(*f, b"user.k", &pattern(k as u64, 40), XattrMode::Set)
                .unwrap(),
            4 => {
                fs.setattr(
                    *f,
                    SetAttr {
                        size: Some(c as u64 + 3),
                        ..SetAttr::default()
                    },
                )
                .unwrap();
            }
            _ => {}
        }
    }
    fs.create(d1, b"sym", symlink(b"../f1")).unwrap();
    fs.create(ROOT_INO, b"fifo", special(Kind::Fifo, 0))
        .unwrap();
    fs.create(ROOT_INO, b"chr", special(Kind::CharDev, 0x0501))
        .unwrap();
    fs.sync().unwrap();
    // Unsynced tail changes too.
    fs.write(files[5].2, 0, b"unsynced").unwrap();
}

/// Calls everything on every object; any error is fine, a panic is not.
fn exercise(fs: &mut Fs) {
    let mut stack = vec![ROOT_INO];
    let mut seen = std::collections::HashSet::new();
    let mut files = Vec::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        let Ok(entries) = fs.readdir(d) else { continue };
        for e in entries {
            let _ = fs.lookup(d, &e.name);
            let _ = fs.getattr(e.ino);
            let _ = fs.listxattr(e.ino);
            let _ = fs.getxattr(e.ino, b"user.k");
            match e.kind {
                Kind::Dir => stack.push(e.ino),
                Kind::Symlink => {
                    let _ = fs.readlink(e.ino);
                }
                Kind::File => files.push((d, e.name, e.ino)),
                _ => {}
            }
        }
    }
    for (_, _, ino) in &files {
        let _ = read_all_tolerant(fs, *ino);
    }
    let _ = fs.statfs();
    // Writes: a new file, an overwrite, a delete, cleaning.
    if let Ok(a) = fs.create(ROOT_INO, b"after-corruption", file()) {
        let _ = fs.write(a.ino, 0, &pattern(5, 5000));
        let _ = fs.fsync(a.ino);
    }
    if let Some((_, _, ino)) = files.first() {
        let _ = fs.write(*ino, 3, b"overwrite");
        let _ = fs.fsync(*ino);
    }
    if let Some((p, n, _)) = files.last() {
        let _ = fs.unlink(*p, n);
    }
    let _ = fs.gc(4);
    let _ = fs.sync();
}

fn read_all_tolerant(fs: &mut Fs, ino: Ino) -> Result<Vec<u8>> {
    let size = fs.getattr(ino)?.size as usize;
    let mut buf = vec![0; size];
    let n = fs.read(ino, 0, &mut buf)?;
    assert_eq!(n, size, "short read of {ino}");
    Ok(buf)
}

/// fsck may find what the corruption damaged, not a broken structure. A mount trusts the
/// block summaries (and a checkpoint) for what pages hold, as YAFFS2 does, and reads
/// headers only when a call needs them: damage to a page's tags or contents, or to a
/// header, shows up later, as pages or objects that cannot be read (reads of them fail
/// cleanly). What must never show is a broken structure: a page owned twice or by
/// nobody, block counts that disagree, a summary that contradicts the owners, a tree
/// that is not a tree.
///
/// `summaries_unused`: the state came from a checkpoint, which a mount trusts over the
/// summaries: a damaged summary page (another valid summary copied over it) then
/// contradicts the owners without anything in RAM being wrong.
fn fsck_only_damage(fs: &mut Fs, ctx: &str, summaries_unused: bool) {
    let r = fs.fsck();
    let structural: Vec<&String> = r
        .problems
        .iter()
        .filter(|p| !(summaries_unused && p.contains("the summary says")))
        .filter(|p| {
            let damage = [
                "fails its checks",
                "cannot be read",
                "has unreadable tags",
                "do not match its owner",
                "header record does not decode",
                "header kind differs from RAM",
                "details cannot be loaded",
                "whose names cannot be read",
                "is missing or unreadable",
                "summary (page",
                "is programmed but fails its checks",
            ];
            !damage.iter().any(|d| p.contains(d))
        })
        .collect();
    assert!(
        structural.is_empty(),
        "{ctx}: fsck found structural problems after mounting a corrupt image: {structural:#?}"
    );
}

/// Mount, check, exercise, unmount, mount again, check. Never panics on its own account.
/// With `expect`, the files the damage left alone must read back exactly, and the others
/// exactly or not at all (see `check_files`).
fn survive(flash: FlashDevice, ctx: &str, expect: Option<&Expect>) -> bool {
    let mut fs = match mount(flash) {
        Ok(fs) => fs,
        Err(e) => {
            if std::env::var_os("NANDKIT_SHOW_REFUSALS").is_some() {
                println!("{ctx}: mount refused: {e}");
            }
            // A clean refusal: not a file system (the record is gone) or an I/O error.
            assert!(
                matches!(e.errno(), 5 | 22),
                "{ctx}: mount refused with an unexpected error: {e}"
            );
            return false;
        }
    };
    let from_checkpoint = fs.mount_method() == MountMethod::Checkpoint;
    fsck_only_damage(&mut fs, ctx, from_checkpoint);
    if let Some(e) = expect {
        check_files(&mut fs, e, ctx);
    }
    exercise(&mut fs);
    fsck_only_damage(&mut fs, &format!("{ctx}, after use"), from_checkpoint);
    match fs.unmount() {
        Ok(flash) => {
            if let Ok(mut fs) = mount(flash) {
                fsck_only_damage(&mut fs, &format!("{ctx}, remounted"), from_checkpoint);
                exercise(&mut fs);
            }
        }
        Err(e) => {
            let _ = e.errno();
        }
    }
    true
}

/// What one page of the undamaged device is, for the files on it.
#[derive(Clone, Debug)]
enum Owner {
    /// Nothing (erased, or garbage the file system ignores).
    Nothing,
    /// A data or header page: its object, the file a hard link names, objects whose names
    /// the header also carries (rename over a name, exchange).
    Objects(BTreeSet<Ino>),
    /// A block summary, checkpoint or anchor page.
    Special,
}

fn owner(layout: &nandkit_fs::layout::Layout, raw: &[u8]) -> Owner {
    let page = layout.geometry.page_size_bytes as usize;
    let (data, oob) = raw.split_at(page);
    match layout.decode_tags(oob) {
        TagRead::Erased | TagRead::Garbage => Owner::Nothing,
        TagRead::Valid(Tags::Data(d)) => Owner::Objects(BTreeSet::from([d.obj])),
        TagRead::Valid(Tags::Header(h)) => {
            let mut objs = BTreeSet::from([h.obj]);
            if let Some(r) = Record::decode(data) {
                if r.kind == Kind::HardLink {
                    objs.insert(r.size as Ino);
                }
                objs.extend(r.name_updates.iter().map(|(i, _)| *i));
            }
            Owner::Objects(objs)
        }
        TagRead::Valid(Tags::Special(_)) => Owner::Special,
    }
}

/// Every file of an undamaged file system (by object: its paths and contents), what each
/// page of its device was, and the directories on each file's paths.
struct Expect {
    files: BTreeMap<Ino, (BTreeSet<Vec<u8>>, Vec<u8>)>,
    /// Every version of every data chunk on the device, stale copies too (by object and
    /// chunk index).
    versions: BTreeMap<(Ino, u32), Vec<Vec<u8>>>,
    dirs_of: BTreeMap<Ino, BTreeSet<Ino>>,
    pages: Vec<Owner>,
    pages_per_block: usize,
    /// Files none of whose pages the damage touched (set by `damaged`).
    untouched: BTreeSet<Ino>,
}

impl Expect {
    /// `fs` mounted from (a copy of) the undamaged device, whose raw pages are `raw(p)`.
    fn new(fs: &mut Fs, dev: Dev, mut raw: impl FnMut(usize) -> Vec<u8>) -> Expect {
        let g = dev.config().geometry;
        let layout = nandkit_fs::layout::Layout::new(g).unwrap();
        let mut versions: BTreeMap<(Ino, u32), Vec<Vec<u8>>> = BTreeMap::new();
        let pages = (0..(g.total_blocks() * u64::from(g.pages_per_block)) as usize)
            .map(|p| {
                let raw = raw(p);
                let (data, oob) = raw.split_at(g.page_size_bytes as usize);
                let v = nandkit_fs::inspect::page_view(&layout, data, oob);
                if let (Some(obj), Some(chunk), Some(n), "data") =
                    (v.obj, v.chunk, v.n_bytes, v.kind.as_str())
                {
                    if let Some(bytes) = data.get(..n as usize) {
                        versions
                            .entry((obj, chunk))
                            .or_default()
                            .push(bytes.to_vec());
                    }
                }
                owner(&layout, &raw)
            })
            .collect();
        let mut files: BTreeMap<Ino, (BTreeSet<Vec<u8>>, Vec<u8>)> = BTreeMap::new();
        let mut dirs_of: BTreeMap<Ino, BTreeSet<Ino>> = BTreeMap::new();
        let mut stack = vec![(ROOT_INO, Vec::new(), vec![ROOT_INO])];
        while let Some((d, path, above)) = stack.pop() {
            for e in fs.readdir(d).unwrap() {
                let mut p = path.clone();
                p.push(b'/');
                p.extend_from_slice(&e.name);
                match e.kind {
                    Kind::Dir => {
                        let mut a = above.clone();
                        a.push(e.ino);
                        stack.push((e.ino, p, a));
                    }
                    Kind::File => {
                        let content = read_all(fs, e.ino).unwrap();
                        let f = files.entry(e.ino).or_default();
                        f.0.insert(p);
                        f.1 = content;
                        dirs_of.entry(e.ino).or_default().extend(&above);
                    }
                    _ => {}
                }
            }
        }
        Expect {
            files,
            versions,
            dirs_of,
            pages,
            pages_per_block: g.pages_per_block as usize,
            untouched: BTreeSet::new(),
        }
    }

    /// The damage changed these pages (each: the page, the page a duplicate came from,
    /// whether the whole block was hit): every object with a page in them is touched; a
    /// damaged special page (a summary, which a mount trusts for what its block holds), or
    /// special content copied over a page, touches every object of that block.
    fn damaged(&self, pages: &[(usize, Option<usize>, bool)]) -> Expect {
        let ppb = self.pages_per_block;
        let mut hit = BTreeSet::new();
        for &(p, source, whole_block) in pages {
            let special = |q: usize| matches!(self.pages[q], Owner::Special);
            let (first, end) = (p / ppb * ppb, (p / ppb + 1) * ppb);
            let range = if whole_block || special(p) || source.is_some_and(special) {
                first..end
            } else if !special(end - 1) {
                // The block being written when the image was left has no summary yet: a
                // scan takes a page there that fails its checks for the one a power cut
                // tore, the last one written, and trusts nothing after it.
                p..end
            } else {
                p..p + 1
            };
            for q in range.chain(source) {
                if let Owner::Objects(o) = &self.pages[q] {
                    hit.extend(o);
                }
            }
        }
        let untouched = self
            .files
            .keys()
            .copied()
            .filter(|f| !hit.contains(f) && self.dirs_of[f].is_disjoint(&hit))
            .collect();
        Expect {
            files: self.files.clone(),
            versions: self.versions.clone(),
            dirs_of: self.dirs_of.clone(),
            pages: self.pages.clone(),
            pages_per_block: ppb,
            untouched,
        }
    }
}

/// After a damaged device mounted: every file no damaged page belonged to (nor any of its
/// names, nor a directory on its paths) is where it was, with exactly its contents.
///
/// A file the damage touched may fail to read, or read back exactly, or read back
/// otherwise, but only in the ways a log-structured file system without redundancy must
/// allow: a data page lost to the damage reads as a hole (zeros: nothing records that the
/// chunk existed), an older copy of a chunk or an older header (with its size) takes the
/// place of a newest one that was damaged. So every chunk it reads is some version of that
/// chunk once written to the device, or zeros; never bytes nobody wrote.
fn check_files(fs: &mut Fs, e: &Expect, ctx: &str) {
    let mut paths: BTreeMap<Ino, BTreeSet<Vec<u8>>> = BTreeMap::new();
    let mut stack = vec![(ROOT_INO, Vec::new())];
    let mut seen = BTreeSet::new();
    while let Some((d, path)) = stack.pop() {
        if !seen.insert(d) {
            continue;
        }
        let Ok(entries) = fs.readdir(d) else { continue };
        for en in entries {
            let mut p = path.clone();
            p.push(b'/');
            p.extend_from_slice(&en.name);
            match en.kind {
                Kind::Dir => stack.push((en.ino, p)),
                Kind::File => {
                    paths.entry(en.ino).or_default().insert(p);
                }
                _ => {}
            }
        }
    }
    let show = |s: Option<&BTreeSet<Vec<u8>>>| {
        s.map(|s| {
            s.iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
        })
    };
    for (ino, (want_paths, want)) in &e.files {
        let untouched = e.untouched.contains(ino);
        if untouched {
            assert_eq!(
                paths.get(ino),
                Some(want_paths),
                "{ctx}: the names of file {ino}, which the damage did not touch: got {:?}, \
                 expected {:?}",
                show(paths.get(ino)),
                show(Some(want_paths))
            );
        } else if !paths.contains_key(ino) {
            continue;
        }
        match read_all_tolerant(fs, *ino) {
            Ok(got) if untouched => assert_bytes(
                &got,
                want,
                &format!(
                    "{ctx}: file {ino} {:?}, untouched by the damage",
                    show(Some(want_paths)),
                ),
            ),
            Ok(got) => {
                let c = fs.chunk_bytes() as usize;
                for (k, part) in got.chunks(c).enumerate() {
                    let known = part.iter().all(|&b| b == 0)
                        || e.versions.get(&(*ino, k as u32)).is_some_and(|vs| {
                            vs.iter().any(|v| {
                                part.iter()
                                    .enumerate()
                                    .all(|(i, &b)| b == v.get(i).copied().unwrap_or(0))
                            })
                        });
                    assert!(
                        known,
                        "{ctx}: file {ino} {:?}, damaged, reads chunk {k} as bytes never \
                         written there",
                        show(Some(want_paths))
                    );
                }
            }
            Err(err) => assert!(
                !untouched,
                "{ctx}: file {ino} {:?}, which the damage did not touch: {err}",
                show(Some(want_paths))
            ),
        }
    }
}

fn run_seed(ctx: &str, f: impl FnOnce() -> bool) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(mounted) => mounted,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{ctx}: panicked: {msg}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Corruption through the image file.

fn meta_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

/// Builds a populated image: cleanly unmounted (a checkpoint) or left as a crash leaves it.
fn base_image(dir: &Path, dev: Dev, clean: bool) -> PathBuf {
    base_image_as(dir, dev, "yaffs", clean)
}

/// `base_image` of another profile that keeps its metadata on flash.
fn base_image_as(dir: &Path, dev: Dev, profile: &str, clean: bool) -> PathBuf {
    let path = dir.join(format!("{}-{profile}-{clean}.img", dev.name()));
    let flash =
        FlashDevice::create_image(&path, dev.config(), true, DeviceOptions::default()).unwrap();
    let config = FsConfig::profile(profile, dev.blocks()).unwrap();
    let mut fs =
        FileSystem::format(nandkit_flash::StripedFlash::new(flash), config, clock()).unwrap();
    populate(&mut fs, 1);
    let flash = if clean {
        fs.unmount().unwrap()
    } else {
        fs.into_device()
    };
    drop(flash);
    path
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Random bits anywhere in a page (data or OOB).
    FlipBits,
    /// Random bytes over the tag area (OOB, or the end of the page for in-band tags).
    GarbageTags,
    /// A page cut short: its end reads erased.
    Tear,
    /// A page of zeros.
    Zero,
    /// A valid page copied over another one.
    Duplicate,
    /// A whole block as a cut erase leaves it: some bytes erased, some not.
    HalfErase,
}

const DAMAGES: [Damage; 6] = [
    Damage::FlipBits,
    Damage::GarbageTags,
    Damage::Tear,
    Damage::Zero,
    Damage::Duplicate,
    Damage::HalfErase,
];

/// The pages of an image file, raw (data and OOB).
fn image_pages(path: &Path, dev: Dev) -> impl FnMut(usize) -> Vec<u8> {
    let raw = dev.config().geometry.raw_page_bytes();
    let bytes = std::fs::read(path).unwrap();
    move |p| bytes[p * raw..(p + 1) * raw].to_vec()
}

/// What an image holds, read from a mount of a copy of it (the image stays as it is).
fn expect_image(path: &Path, dev: Dev, tmp: &tempfile::TempDir) -> Expect {
    let mut fs = mount(open_image(path, tmp)).unwrap();
    Expect::new(&mut fs, dev, image_pages(path, dev))
}

/// Damages `count` random programmed pages of the image at `path`: each damage, its page,
/// and the page a duplicate came from.
fn damage_image(
    path: &Path,
    dev: Dev,
    seed: u64,
    count: usize,
) -> Vec<(Damage, usize, Option<usize>)> {
    let g = dev.config().geometry;
    let raw = g.raw_page_bytes();
    let ppb = g.pages_per_block as usize;
    let mut bytes = std::fs::read(path).unwrap();
    let pages = bytes.len() / raw;
    let programmed: Vec<usize> = (0..pages)
        .filter(|&p| bytes[p * raw..(p + 1) * raw].iter().any(|&b| b != 0xFF))
        .collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut done = Vec::new();
    for _ in 0..count {
        let p = programmed[rng.gen_range(0..programmed.len())];
        let page = &mut bytes[p * raw..(p + 1) * raw];
        let damage = DAMAGES[rng.gen_range(0..DAMAGES.len())];
        let mut source = None;
        match damage {
            Damage::FlipBits => {
                for _ in 0..rng.gen_range(1..8) {
                    let bit = rng.gen_range(0..raw * 8);
                    page[bit / 8] ^= 1 << (bit % 8);
                }
            }
            Damage::GarbageTags => {
                let tags = if g.oob_size_bytes >= 42 {
                    g.page_size_bytes as usize + 2..raw
                } else {
                    g.page_size_bytes as usize - 40..g.page_size_bytes as usize
                };
                for b in &mut page[tags] {
                    *b = rng.gen();
                }
            }
            Damage::Tear => {
                let from = rng.gen_range(0..raw);
                page[from..].fill(0xFF);
            }
            Damage::Zero => page.fill(0),
            Damage::Duplicate => {
                let q = programmed[rng.gen_range(0..programmed.len())];
                let copy = bytes[q * raw..(q + 1) * raw].to_vec();
                source = Some(q);
                bytes[p * raw..(p + 1) * raw].copy_from_slice(&copy);
            }
            Damage::HalfErase => {
                let first = p / ppb * ppb;
                for b in &mut bytes[first * raw..(first + ppb) * raw] {
                    if *b != 0xFF && rng.gen_bool(0.5) {
                        *b = if rng.gen_bool(0.5) {
                            0xFF
                        } else {
                            *b | rng.gen::<u8>()
                        };
                    }
                }
            }
        }
        done.push((damage, p, source));
    }
    std::fs::write(path, bytes).unwrap();
    done
}

fn image_cases(dev: Dev, seeds: impl Iterator<Item = u64>) {
    image_cases_as(dev, "yaffs", seeds)
}

fn image_cases_as(dev: Dev, profile: &str, seeds: impl Iterator<Item = u64>) {
    let tmp = tempfile::tempdir().unwrap();
    let bases = [
        base_image_as(tmp.path(), dev, profile, true),
        base_image_as(tmp.path(), dev, profile, false),
    ];
    let expects = bases.clone().map(|b| expect_image(&b, dev, &tmp));
    let mut untouched = 0;
    let work = tmp.path().join("work.img");
    let (mut mounted, mut refused) = (0, 0);
    for seed in seeds {
        let base = &bases[seed as usize % 2];
        std::fs::copy(base, &work).unwrap();
        std::fs::copy(meta_path(base), meta_path(&work)).unwrap();
        let count = [1, 2, 5, 20, 100][seed as usize % 5];
        let what = damage_image(&work, dev, seed, count);
        let ctx = format!(
            "{} {profile} image ({}) seed {seed}: {count} damaged pages, first {:?}",
            dev.name(),
            if seed % 2 == 0 {
                "checkpoint"
            } else {
                "crashed"
            },
            &what[..what.len().min(3)]
        );
        let pages: Vec<_> = what
            .iter()
            .map(|&(d, p, q)| (p, q, matches!(d, Damage::HalfErase)))
            .collect();
        let expect = expects[seed as usize % 2].damaged(&pages);
        untouched += expect.untouched.len();
        let flash = FlashDevice::open_image(&work, DeviceOptions::default()).unwrap();
        if run_seed(&ctx, || survive(flash, &ctx, Some(&expect))) {
            mounted += 1;
        } else {
            refused += 1;
        }
    }
    println!(
        "{} ({profile}): {mounted} corrupt images mounted, {refused} refused; {untouched} \
         files untouched by the damage in all",
        dev.name()
    );
    assert!(untouched > 0, "the damage touched every file every time");
    assert!(mounted > 0, "no corrupt image mounted at all");
}

#[test]
fn corrupt_images_inband() {
    // Seed 508 once found a checkpoint page copied into a data block.
    image_cases(Dev::Small, seeds(120, 2000).chain([508]));
}

#[test]
fn corrupt_images_tiny() {
    image_cases(Dev::Tiny, seeds(40, 400));
}

/// The other profiles that keep their metadata on flash (their allocators and cleaners
/// restore their own state at mount), fewer seeds each.
#[test]
fn corrupt_images_every_flash_profile() {
    for profile in ["moda", "dac", "page-hotcold", "mnfs", "hybrid"] {
        for dev in Dev::ALL {
            image_cases_as(dev, profile, seeds(12, 400));
        }
    }
}

/// Damage confined to the file system record or the root: the mount must refuse cleanly
/// or rebuild.
#[test]
fn corrupt_first_pages() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        for clean in [true, false] {
            let base = base_image(tmp.path(), dev, clean);
            let expect = expect_image(&base, dev, &tmp);
            let g = dev.config().geometry;
            let raw = g.raw_page_bytes();
            for page in 0..4 {
                for how in 0..3 {
                    let ctx = format!("{} clean {clean}: page {page} damage {how}", dev.name());
                    let work = tmp.path().join("first.img");
                    std::fs::copy(&base, &work).unwrap();
                    std::fs::copy(meta_path(&base), meta_path(&work)).unwrap();
                    let mut bytes = std::fs::read(&work).unwrap();
                    let p = &mut bytes[page * raw..(page + 1) * raw];
                    match how {
                        0 => p.fill(0),
                        1 => p.fill(0xFF),
                        _ => p[7] ^= 0x10,
                    }
                    std::fs::write(&work, bytes).unwrap();
                    let flash = FlashDevice::open_image(&work, DeviceOptions::default()).unwrap();
                    let expect = expect.damaged(&[(page, None, false)]);
                    run_seed(&ctx, || survive(flash, &ctx, Some(&expect)));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Corruption through ECC: injected raw bit errors, correctable or not, on RAM devices.

fn ecc_cases(dev: Dev, seeds: std::ops::Range<u64>) {
    ecc_cases_as(dev, "yaffs", seeds)
}

fn ecc_cases_as(dev: Dev, profile: &str, seeds: std::ops::Range<u64>) {
    let mut base = {
        let mut fs = format_with(dev, FsConfig::profile(profile, dev.blocks()).unwrap());
        populate(&mut fs, 2);
        fs.unmount().unwrap()
    };
    let g = dev.config().geometry;
    let pristine = {
        let mut fs = mount(clone_device(&mut base)).unwrap();
        Expect::new(&mut fs, dev, |p| {
            let ppb = g.pages_per_block as usize;
            base.raw_page(PageAddr::new(0, (p / ppb) as u32, (p % ppb) as u32))
                .unwrap()
        })
    };
    let codewords = g.page_size_bytes.div_ceil(512) + 1;
    let (mut mounted, mut refused) = (0, 0);
    for seed in seeds {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut flash = clone_device(&mut base);
        let count = [1, 3, 10, 50][seed as usize % 4];
        let mut what = Vec::new();
        let mut pages = Vec::new();
        for _ in 0..count {
            let block = rng.gen_range(0..g.blocks_per_chip);
            let page = rng.gen_range(0..g.pages_per_block);
            let cw = rng.gen_range(0..codewords);
            let bits = rng.gen_range(1..12);
            flash
                .inject_bit_errors(PageAddr::new(0, block, page), cw, bits)
                .unwrap();
            what.push((block, page, cw, bits));
            pages.push(((block * g.pages_per_block + page) as usize, None, false));
        }
        let ctx = format!(
            "{} {profile} ECC seed {seed}: {count} injections, first {:?}",
            dev.name(),
            &what[..what.len().min(3)]
        );
        let expect = pristine.damaged(&pages);
        if run_seed(&ctx, || survive(flash, &ctx, Some(&expect))) {
            mounted += 1;
        } else {
            refused += 1;
        }
    }
    println!(
        "{} ({profile}): ECC damage: {mounted} mounted, {refused} refused",
        dev.name()
    );
    assert!(mounted > 0);
}

#[test]
fn ecc_errors_tiny() {
    ecc_cases(Dev::Tiny, seeds(60, 1000));
}

#[test]
fn ecc_errors_inband() {
    ecc_cases(Dev::Small, seeds(60, 1000));
}

/// The other profiles that keep their metadata on flash, fewer seeds each.
#[test]
fn ecc_errors_every_flash_profile() {
    for profile in ["moda", "dac", "page-hotcold", "mnfs", "hybrid"] {
        for dev in Dev::ALL {
            ecc_cases_as(dev, profile, seeds(12, 300));
        }
    }
}

/// Every file's content by path (`None`: unreadable).
fn contents(fs: &mut Fs) -> std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![(ROOT_INO, Vec::new())];
    while let Some((d, path)) = stack.pop() {
        for e in fs.readdir(d).unwrap() {
            let mut p = path.clone();
            p.push(b'/');
            p.extend_from_slice(&e.name);
            match e.kind {
                Kind::Dir => stack.push((e.ino, p)),
                Kind::File => {
                    out.insert(p, read_all_tolerant(fs, e.ino).ok());
                }
                _ => {}
            }
        }
    }
    out
}

/// A copy of a checkpoint page inside a block of live data (found by the random image
/// cases, in-band seed 508): the scan took the whole block for a stale checkpoint and the
/// first write erased it, live pages and all.
#[test]
fn checkpoint_page_copied_into_a_data_block() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        let base = base_image(tmp.path(), dev, true);
        let g = dev.config().geometry;
        let (raw, ppb, page) = (
            g.raw_page_bytes(),
            g.pages_per_block as usize,
            g.page_size_bytes as usize,
        );
        let layout = nandkit_fs::layout::Layout::new(g).unwrap();
        let mut bytes = std::fs::read(&base).unwrap();
        let pristine = contents(&mut mount(open_image(&base, &tmp)).unwrap());
        // The checkpoint's first page, and a data page to overwrite: in the first block
        // after it that holds live data pages.
        let pages = bytes.len() / raw;
        let is = |bytes: &[u8], p: usize, kind: PageKind| {
            matches!(
                layout.decode_tags(&bytes[p * raw + page..(p + 1) * raw]),
                TagRead::Valid(t) if t.kind() == kind
            )
        };
        let checkpoint = PageKind::Special(SpecialKind::Checkpoint);
        let ckpt = (0..pages)
            .step_by(ppb)
            .find(|&p| is(&bytes, p, checkpoint))
            .expect("a checkpoint on a cleanly unmounted image");
        let target = (0..pages)
            .filter(|&p| {
                p % ppb > 0 && is(&bytes, p, PageKind::Data) && is(&bytes, p - 1, PageKind::Data)
            })
            .nth(3)
            .expect("a data page");
        let copy = bytes[ckpt * raw..(ckpt + 1) * raw].to_vec();
        bytes[target * raw..(target + 1) * raw].copy_from_slice(&copy);
        let work = tmp.path().join("mixed.img");
        std::fs::write(&work, bytes).unwrap();
        std::fs::copy(meta_path(&base), meta_path(&work)).unwrap();
        let ctx = format!(
            "{}: checkpoint page {ckpt} copied over page {target}",
            dev.name()
        );
        // A scan (the checkpoint would still load: the copy is not at a block's start).
        let flash = FlashDevice::open_image(&work, DeviceOptions::default()).unwrap();
        let mut fs = FileSystem::mount(nandkit_flash::StripedFlash::new(flash), scan_opts())
            .unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        assert_eq!(fs.mount_method(), MountMethod::Scan);
        let f = fs.create(ROOT_INO, b"new", file()).unwrap().ino;
        fs.write(f, 0, &pattern(1, 5000)).unwrap();
        fs.fsync(f).unwrap();
        fs.gc(8).unwrap();
        fsck_only_damage(&mut fs, &ctx, false);
        let after = contents(&mut fs);
        let lost: Vec<_> = pristine
            .iter()
            .filter(|(p, c)| after.get(*p) != Some(*c))
            .map(|(p, _)| String::from_utf8_lossy(p).into_owned())
            .collect();
        assert!(
            lost.len() <= 1,
            "{ctx}: files lost beyond the overwritten page: {lost:?}"
        );
        let mut fs = clean_remount(fs);
        fsck_only_damage(&mut fs, &format!("{ctx}, remounted"), false);
    }
}

/// Opens a copy of an image (the original stays as it is).
fn open_image(path: &Path, tmp: &tempfile::TempDir) -> FlashDevice {
    let copy = tmp.path().join("copy.img");
    std::fs::copy(path, &copy).unwrap();
    std::fs::copy(meta_path(path), meta_path(&copy)).unwrap();
    FlashDevice::open_image(&copy, DeviceOptions::default()).unwrap()
}
