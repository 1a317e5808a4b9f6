//! Targeted damage, each case on both geometries, each knowing exactly what must survive
//! (corrupt.rs throws random damage at images and only asks for a clean outcome):
//! - a full block's summary torn or damaged: the mount reads the block page by page,
//!   loses nothing fsync'd, and repairs the block;
//! - a data page damaged under a good summary: only that chunk of its file is lost (EIO);
//! - one copy of the file system record lost: the mount uses the other, fsck says so, and
//!   a writable mount writes the copy again; both lost: a clean refusal.
//!
//! Damage is done to image files, page by page (the image holds each page's data and OOB,
//! in order).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;
use nandkit_flash::{DeviceOptions, FlashDevice, Geometry};
use nandkit_fs::format::tags::{PageKind, SpecialKind, TagRead, Tags};
use nandkit_fs::layout::Layout;
use nandkit_fs::*;

fn meta_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

fn copy_image(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
    std::fs::copy(meta_path(from), meta_path(to)).unwrap();
}

fn open(path: &Path) -> FlashDevice {
    FlashDevice::open_image(path, DeviceOptions::default()).unwrap()
}

/// A populated image and what it holds.
struct Base {
    path: PathBuf,
    /// Path -> (object, contents), every one fsync'd.
    files: BTreeMap<String, (Ino, Vec<u8>)>,
    anchors: [u32; 2],
}

/// 30 files of 0 to 20 chunks (and a few bytes), written a chunk at a time round-robin so
/// that full blocks end in summaries (not runs), some fsync'd as they go, all synced.
/// `clean`: cleanly unmounted (a checkpoint); else left as a crash leaves it (a scan).
fn base_image(tmp: &Path, dev: Dev, clean: bool) -> Base {
    base_image_with(tmp, dev, clean, yaffs(dev))
}

fn base_image_with(tmp: &Path, dev: Dev, clean: bool, config: FsConfig) -> Base {
    let path = tmp.join(format!(
        "{}-{clean}-{}.img",
        dev.name(),
        config.tombs_cover_data
    ));
    let flash =
        FlashDevice::create_image(&path, dev.config(), true, DeviceOptions::default()).unwrap();
    let mut fs =
        FileSystem::format(nandkit_flash::StripedFlash::new(flash), config, clock()).unwrap();
    let c = fs.chunk_bytes() as usize;
    let sub = fs.create(ROOT_INO, b"sub", dir()).unwrap().ino;
    let mut files = Vec::new();
    for i in 0..30u64 {
        let (parent, prefix) = if i % 2 == 0 {
            (ROOT_INO, "")
        } else {
            (sub, "sub/")
        };
        let name = format!("f{i}");
        let ino = fs.create(parent, name.as_bytes(), file()).unwrap().ino;
        let len = (i as usize * 7) % 21 * c + (i as usize * 37) % c;
        files.push((format!("{prefix}{name}"), ino, pattern(i, len)));
    }
    for round in 0..=20 {
        for (k, (_, ino, data)) in files.iter().enumerate() {
            let from = round * c;
            if from < data.len() {
                let to = (from + c).min(data.len());
                fs.write(*ino, from as u64, &data[from..to]).unwrap();
                if k % 3 == round % 3 {
                    fs.fsync(*ino).unwrap();
                }
            }
        }
    }
    fs.sync().unwrap();
    let anchors = fs.anchor_blocks();
    if clean {
        drop(fs.unmount().unwrap());
    } else {
        drop(fs.into_device());
    }
    Base {
        path,
        files: files
            .into_iter()
            .map(|(n, ino, data)| (n, (ino, data)))
            .collect(),
        anchors,
    }
}

/// The image's bytes, page by page.
struct Image {
    bytes: Vec<u8>,
    g: Geometry,
    layout: Layout,
}

impl Image {
    fn read(path: &Path, dev: Dev) -> Image {
        let g = dev.config().geometry;
        Image {
            bytes: std::fs::read(path).unwrap(),
            g,
            layout: Layout::new(g).unwrap(),
        }
    }

    /// Writes the pages to `path` (the sidecar with the chip's block states is copied
    /// from the base image separately).
    fn write(&self, path: &Path) {
        std::fs::write(path, &self.bytes).unwrap();
    }

    fn page_mut(&mut self, block: u32, page: u32) -> &mut [u8] {
        let raw = self.g.raw_page_bytes();
        let at = (block * self.g.pages_per_block + page) as usize * raw;
        &mut self.bytes[at..at + raw]
    }

    fn tags(&mut self, block: u32, page: u32) -> TagRead {
        let size = self.g.page_size_bytes as usize;
        let layout = self.layout;
        let p = self.page_mut(block, page);
        layout.decode_tags(&p[size..])
    }

    fn kind(&mut self, block: u32, page: u32) -> Option<PageKind> {
        match self.tags(block, page) {
            TagRead::Valid(t) => Some(t.kind()),
            _ => None,
        }
    }

    /// Blocks holding a header page (any version) of `obj`.
    fn blocks_with_headers_of(&mut self, obj: Ino) -> Vec<u32> {
        let ppb = self.g.pages_per_block;
        (0..self.g.blocks_per_chip)
            .filter(|&b| {
                (0..ppb).any(
                    |p| matches!(self.tags(b, p), TagRead::Valid(Tags::Header(h)) if h.obj == obj),
                )
            })
            .collect()
    }

    /// Blocks whose last page is a block summary.
    fn summarised_blocks(&mut self) -> Vec<u32> {
        let last = self.g.pages_per_block - 1;
        (0..self.g.blocks_per_chip)
            .filter(|&b| self.kind(b, last) == Some(PageKind::Special(SpecialKind::Summary)))
            .collect()
    }
}

/// Every file reads back exactly.
fn check_files(fs: &mut Fs, files: &BTreeMap<String, (Ino, Vec<u8>)>, ctx: &str) {
    for (path, (ino, data)) in files {
        assert_eq!(fs.resolve(path).ok(), Some(*ino), "{ctx}: {path}");
        let got = read_all(fs, *ino).unwrap_or_else(|e| panic!("{ctx}: read of {path}: {e}"));
        assert_bytes(&got, data, &format!("{ctx}: {path}"));
    }
}

fn page_reads(fs: &mut Fs) -> u64 {
    fs.device_mut().stats().total().page_reads
}

#[derive(Clone, Copy, Debug)]
enum Tear {
    /// The summary was never programmed: its page is erased.
    Erased,
    /// Cut short: the first `n` bytes made it, the rest reads erased.
    Prefix(usize),
    /// Bytes of the summary frame flipped: ECC fails.
    Flipped,
}

/// A full block whose summary is torn: the mount reads its pages one by one, repairs it
/// (seals it again or cleans it), and nothing fsync'd is lost; fsck is clean.
#[test]
fn torn_block_summary() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        let base = base_image(tmp.path(), dev, false);
        let mut image = Image::read(&base.path, dev);
        let (size, oob, ppb) = (
            image.g.page_size_bytes as usize,
            image.g.oob_size_bytes as usize,
            image.g.pages_per_block,
        );
        let blocks = image.summarised_blocks();
        assert!(blocks.len() >= 3, "{}: summaries in {blocks:?}", dev.name());
        let work = tmp.path().join("work.img");
        // Reads an undamaged mount needs: about one page per block.
        copy_image(&base.path, &work);
        let mut fs = mount(open(&work)).unwrap();
        assert_eq!(fs.mount_method(), MountMethod::Scan);
        let pristine = page_reads(&mut fs);
        drop(fs);
        let tears = [
            Tear::Erased,
            Tear::Prefix(size / 2),
            Tear::Prefix(size + oob / 2),
            Tear::Flipped,
        ];
        for &b in &blocks {
            for tear in tears {
                let ctx = format!("{}: summary of block {b} {tear:?}", dev.name());
                let mut damaged = Image::read(&base.path, dev);
                let page = damaged.page_mut(b, ppb - 1);
                match tear {
                    Tear::Erased => page.fill(0xFF),
                    Tear::Prefix(n) => page[n..].fill(0xFF),
                    Tear::Flipped => page[30..60].iter_mut().for_each(|x| *x ^= 0x5A),
                }
                damaged.write(&work);
                copy_image_meta(&base.path, &work);
                let mut fs = mount(open(&work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                let reads = page_reads(&mut fs);
                assert!(
                    reads >= pristine + u64::from(ppb) - 1,
                    "{ctx}: the mount read {reads} pages, an undamaged one {pristine}: the \
                     block was not read page by page"
                );
                let st = fs.stats().clone();
                assert!(
                    st.summary_pages_written + st.blocks_cleaned >= 1,
                    "{ctx}: the mount did not repair the block: {st:?}"
                );
                assert_fsck(&mut fs, &ctx);
                check_files(&mut fs, &base.files, &ctx);
                let mut fs = clean_remount(fs);
                assert_fsck(&mut fs, &format!("{ctx}, remounted"));
                check_files(&mut fs, &base.files, &format!("{ctx}, remounted"));
                let mut fs = crash_remount(fs);
                assert_fsck(&mut fs, &format!("{ctx}, crash-remounted"));
                check_files(&mut fs, &base.files, &format!("{ctx}, crash-remounted"));
            }
        }
        image.bytes.clear();
    }
}

/// A data page damaged after its block got a good summary (ECC fails on it): the mount
/// (scan or checkpoint) succeeds, reads of that one chunk fail with EIO, every other chunk
/// of that file and every other file read back exactly, and fsck reports that page only,
/// also after cleaning and a remount.
#[test]
fn damaged_page_under_good_summary() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        for clean in [false, true] {
            let base = base_image(tmp.path(), dev, clean);
            let mut image = Image::read(&base.path, dev);
            let ppb = image.g.pages_per_block;
            let c = image.g.page_size_bytes as u64;
            // Data pages of summarised blocks, a few spread over them.
            let mut targets = Vec::new();
            for b in image.summarised_blocks() {
                for p in 0..ppb - 1 {
                    if let TagRead::Valid(Tags::Data(d)) = image.tags(b, p) {
                        targets.push((b, p, d.obj, d.chunk));
                    }
                }
            }
            let step = (targets.len() / 6).max(1);
            let targets: Vec<_> = targets.into_iter().step_by(step).collect();
            assert!(targets.len() >= 4, "{}: targets {targets:?}", dev.name());
            let work = tmp.path().join("work.img");
            for &(b, p, obj, chunk) in &targets {
                let pno = b * ppb + p;
                let ctx = format!(
                    "{} ({}): page {pno} (chunk {chunk} of object {obj}) damaged",
                    dev.name(),
                    if clean { "checkpoint" } else { "scan" }
                );
                let mut damaged = Image::read(&base.path, dev);
                damaged.page_mut(b, p)[40..72]
                    .iter_mut()
                    .for_each(|x| *x ^= 0xA5);
                damaged.write(&work);
                copy_image_meta(&base.path, &work);
                let mut fs = mount(open(&work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                let check = |fs: &mut Fs, ctx: &str| {
                    let problems = fs.fsck().problems;
                    assert!(
                        problems.iter().all(|p| p.contains(&format!("page {pno} "))),
                        "{ctx}: fsck found more than the damaged page: {problems:#?}"
                    );
                    let mut victim = false;
                    for (path, (ino, data)) in &base.files {
                        // Names and sizes come from headers, which the damage left alone:
                        // every file keeps both, the damaged one too.
                        assert_eq!(fs.resolve(path).ok(), Some(*ino), "{ctx}: {path}");
                        assert_eq!(
                            fs.getattr(*ino).map(|a| a.size).ok(),
                            Some(data.len() as u64),
                            "{ctx}: size of {path}"
                        );
                        if *ino != obj {
                            let got = read_all(fs, *ino)
                                .unwrap_or_else(|e| panic!("{ctx}: read of {path}: {e}"));
                            assert_bytes(&got, data, &format!("{ctx}: {path}"));
                            continue;
                        }
                        victim = true;
                        for (i, want) in data.chunks(c as usize).enumerate() {
                            let mut buf = vec![0u8; want.len()];
                            let r = fs.read(*ino, i as u64 * c, &mut buf);
                            if i as u32 == chunk {
                                match r {
                                    Err(e) => assert_eq!(e.errno(), 5, "{ctx}: {e}"),
                                    Ok(_) => panic!("{ctx}: the damaged chunk read back"),
                                }
                            } else {
                                r.unwrap_or_else(|e| panic!("{ctx}: {path} chunk {i}: {e}"));
                                assert_bytes(&buf, want, &format!("{ctx}: {path} chunk {i}"));
                            }
                        }
                    }
                    assert!(victim, "{ctx}: no file owns object {obj}");
                };
                check(&mut fs, &ctx);
                assert!(
                    !fs.fsck().problems.is_empty(),
                    "{ctx}: fsck did not notice the damage"
                );
                // Cleaning, new writes, a remount: the damage stays where it was.
                let f = fs.create(ROOT_INO, b"later", file()).unwrap().ino;
                fs.write(f, 0, &pattern(3, 3 * c as usize)).unwrap();
                fs.fsync(f).unwrap();
                fs.gc(8).unwrap();
                check(&mut fs, &format!("{ctx}, after cleaning"));
                let mut fs = clean_remount(fs);
                check(&mut fs, &format!("{ctx}, remounted"));
                assert_bytes(
                    &read_all(&mut fs, f).unwrap(),
                    &pattern(3, 3 * c as usize),
                    &format!("{ctx}, remounted: the new file"),
                );
            }
        }
    }
}

fn copy_image_meta(from: &Path, to: &Path) {
    std::fs::copy(meta_path(from), meta_path(to)).unwrap();
}

#[derive(Clone, Copy, Debug)]
enum Loss {
    Zeroed,
    Erased,
    Flipped,
}

fn ro_opts() -> MountOptions {
    MountOptions {
        read_only: true,
        ..opts()
    }
}

/// Page 0 of an anchor block (a copy of the file system record) damaged: the mount uses
/// the other copy; fsck reports the missing one; a writable mount writes it again, and
/// later mounts find both. Both copies damaged: the mount refuses with NotFormatted.
#[test]
fn file_system_record_copy_lost() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        for clean in [true, false] {
            let base = base_image(tmp.path(), dev, clean);
            let work = tmp.path().join("work.img");
            let size = dev.config().geometry.page_size_bytes as usize;
            // What fsck says of the undamaged image, mounted read-only.
            copy_image(&base.path, &work);
            let mut fs =
                FileSystem::mount(nandkit_flash::StripedFlash::new(open(&work)), ro_opts())
                    .unwrap();
            let pristine = fs.fsck().problems;
            drop(fs);
            let damage = |which: &[usize], loss: Loss| {
                let mut image = Image::read(&base.path, dev);
                for &i in which {
                    let page = image.page_mut(base.anchors[i], 0);
                    match loss {
                        Loss::Zeroed => page.fill(0),
                        Loss::Erased => page.fill(0xFF),
                        Loss::Flipped => page[size / 3..size / 3 + 16]
                            .iter_mut()
                            .for_each(|x| *x ^= 0x3C),
                    }
                }
                image.write(&work);
                copy_image_meta(&base.path, &work);
            };
            for loss in [Loss::Zeroed, Loss::Erased, Loss::Flipped] {
                for which in 0..2 {
                    let block = base.anchors[which];
                    let ctx = format!(
                        "{} ({}): record copy {} (block {block}) {loss:?}",
                        dev.name(),
                        if clean { "clean" } else { "crashed" },
                        which + 1
                    );
                    damage(&[which], loss);
                    // Read-only: the loss is seen and left alone.
                    let mut fs =
                        FileSystem::mount(nandkit_flash::StripedFlash::new(open(&work)), ro_opts())
                            .unwrap_or_else(|e| panic!("{ctx}: read-only mount: {e}"));
                    check_files(&mut fs, &base.files, &ctx);
                    let mut want = pristine.clone();
                    want.push(format!(
                        "file system record copy {} (block {block}) is missing or unreadable",
                        which + 1
                    ));
                    assert_eq!(fs.fsck().problems, want, "{ctx}: fsck, read-only");
                    drop(fs);
                    // Writable: the copy is written again.
                    let mut fs = mount(open(&work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                    assert_fsck(&mut fs, &format!("{ctx}, repaired"));
                    check_files(&mut fs, &base.files, &format!("{ctx}, repaired"));
                    drop(fs.unmount().unwrap());
                    let mut image = Image::read(&work, dev);
                    for b in base.anchors {
                        assert_eq!(
                            image.kind(b, 0),
                            Some(PageKind::Special(SpecialKind::Anchor)),
                            "{ctx}: page 0 of anchor block {b} after the repair"
                        );
                    }
                    let mut fs =
                        FileSystem::mount(nandkit_flash::StripedFlash::new(open(&work)), ro_opts())
                            .unwrap();
                    assert_fsck(&mut fs, &format!("{ctx}, remounted read-only"));
                    check_files(&mut fs, &base.files, &format!("{ctx}, remounted"));
                    drop(fs);
                    let mut fs = FileSystem::mount(
                        nandkit_flash::StripedFlash::new(open(&work)),
                        scan_opts(),
                    )
                    .unwrap();
                    assert_fsck(&mut fs, &format!("{ctx}, scanned"));
                    check_files(&mut fs, &base.files, &format!("{ctx}, scanned"));
                }
                let ctx = format!(
                    "{} ({}): both record copies {loss:?}",
                    dev.name(),
                    if clean { "clean" } else { "crashed" }
                );
                damage(&[0, 1], loss);
                for options in [ro_opts(), opts()] {
                    match FileSystem::mount(nandkit_flash::StripedFlash::new(open(&work)), options)
                    {
                        Ok(_) => panic!("{ctx}: mounted without a file system record"),
                        Err(e) => assert!(
                            matches!(e, FsError::NotFormatted(_)) && e.errno() == 22,
                            "{ctx}: refused with {e:?}"
                        ),
                    }
                }
            }
        }
    }
}

/// One bit of a data page's tags flipped in the block that was open when power failed
/// (the scan reads that block page by page) or under a checkpoint. Large tags correct it:
/// every file reads back exactly and fsck is clean. Small tags (an 11-bit check) cannot;
/// the page's chunk is lost, and fsck notes the page, since good pages were written after
/// it (a power cut tears only the last).
#[test]
fn one_flipped_tag_bit() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        for clean in [false, true] {
            let base = base_image(tmp.path(), dev, clean);
            let mut image = Image::read(&base.path, dev);
            let (size, ppb) = (image.g.page_size_bytes as usize, image.g.pages_per_block);
            // Data pages of blocks left open (their last page erased), each followed by a
            // programmed page.
            let mut targets = Vec::new();
            for b in 0..image.g.blocks_per_chip {
                if image.tags(b, ppb - 1) != TagRead::Erased {
                    continue;
                }
                for p in 0..ppb - 1 {
                    let next_written = image.tags(b, p + 1) != TagRead::Erased;
                    if let (TagRead::Valid(Tags::Data(_)), true) = (image.tags(b, p), next_written)
                    {
                        targets.push((b, p));
                    }
                }
            }
            assert!(
                !targets.is_empty(),
                "{}: no open block with data",
                dev.name()
            );
            let work = tmp.path().join("work.img");
            for &(b, p) in targets.iter().step_by((targets.len() / 3).max(1)) {
                let pno = b * ppb + p;
                let ctx = format!(
                    "{} ({}): one tag bit of page {pno} flipped",
                    dev.name(),
                    if clean { "checkpoint" } else { "scan" }
                );
                let mut damaged = Image::read(&base.path, dev);
                let layout = damaged.layout;
                let page = damaged.page_mut(b, p);
                let tag_at = size
                    + (layout.geometry.oob_size_bytes as usize
                        - layout.tag_bytes(&page[size..]).len());
                page[tag_at + 3] ^= 0x04;
                assert!(
                    !matches!(damaged.tags(b, p), TagRead::Valid(_)) || dev == Dev::Tiny,
                    "{ctx}: the small tags' check missed the flip"
                );
                damaged.write(&work);
                copy_image_meta(&base.path, &work);
                let mut fs = mount(open(&work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
                let r = fs.fsck();
                if dev == Dev::Tiny {
                    assert!(r.is_clean(), "{ctx}: {:#?}", r.problems);
                    check_files(&mut fs, &base.files, &ctx);
                } else if !clean {
                    // Damage, not a tear (pages written after it pass): a problem (issue 59).
                    assert!(
                        r.problems
                            .iter()
                            .any(|n| n.contains(&format!("page {pno} "))),
                        "{ctx}: fsck did not report the page: {:#?}",
                        r.problems
                    );
                }
            }
        }
    }
}

/// Every block holding a header of the directory `sub` erased after a crash (as damage
/// does): its files that still have a header are not deleted with it but moved to
/// /lost+found as `#<number>`, with every chunk that survived. A
/// read-only mount's fsck reports what a writable mount will move; after it, fsck is
/// clean and a remount keeps them there.
#[test]
fn files_of_a_lost_directory_go_to_lost_found() {
    let tmp = tempfile::tempdir().unwrap();
    for dev in Dev::ALL {
        let base = base_image(tmp.path(), dev, false);
        let sub = {
            let mut fs = mount(open(&base.path)).unwrap();
            fs.resolve("sub").unwrap()
        };
        let mut image = Image::read(&base.path, dev);
        let ppb = image.g.pages_per_block;
        let hit = image.blocks_with_headers_of(sub);
        assert!(!hit.is_empty(), "{}: no header of sub found", dev.name());
        // Objects with a page in an erased block (their data or header may be lost).
        let mut touched = std::collections::BTreeSet::new();
        for &b in &hit {
            for p in 0..ppb {
                if let TagRead::Valid(t) = image.tags(b, p) {
                    touched.extend(t.obj());
                }
                image.page_mut(b, p).fill(0xFF);
            }
        }
        let work = tmp.path().join("work.img");
        image.write(&work);
        copy_image_meta(&base.path, &work);
        let ctx = format!("{}: blocks {hit:?} erased", dev.name());
        let mut ro =
            nandkit_fs::FileSystem::mount(nandkit_flash::StripedFlash::new(open(&work)), ro_opts())
                .unwrap();
        let problems = ro.fsck().problems;
        assert!(
            problems.iter().any(|p| p.contains("lost+found")),
            "{ctx}: fsck of the read-only mount: {problems:#?}"
        );
        drop(ro);
        let mut fs = mount(open(&work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        assert_fsck(&mut fs, &ctx);
        let (mut found, mut moved) = (0, 0);
        for (path, (ino, data)) in &base.files {
            if !path.starts_with("sub/") {
                continue;
            }
            let lf_path = format!("lost+found/#{ino}");
            match fs.resolve(&lf_path) {
                Ok(i) => {
                    moved += 1;
                    assert_eq!(i, *ino, "{ctx}: {lf_path}");
                    let got = read_all(&mut fs, *ino).unwrap();
                    if !touched.contains(ino) {
                        assert_bytes(&got, data, &format!("{ctx}: {path} as {lf_path}"));
                    }
                    // Chunks in the erased blocks read as holes; an older header may
                    // give an older size. Every other chunk is what was written.
                    let c = fs.chunk_bytes() as usize;
                    for (k, part) in got.chunks(c).enumerate() {
                        let want = data.get(k * c..(k * c + part.len()).min(data.len()));
                        assert!(
                            part.iter().all(|&x| x == 0) || want == Some(part),
                            "{ctx}: {lf_path} chunk {k} holds bytes never written there"
                        );
                        found += usize::from(want == Some(part));
                    }
                }
                Err(_) => assert!(
                    touched.contains(ino),
                    "{ctx}: {path} (object {ino}, untouched by the damage) is not in lost+found"
                ),
            }
        }
        assert!(
            moved > 0 && found > 0,
            "{ctx}: {moved} files of sub in lost+found, {found} chunks of theirs intact"
        );
        let mut fs = crash_remount(clean_remount(fs));
        assert_fsck(&mut fs, &format!("{ctx}, remounted"));
        assert!(
            fs.resolve("lost+found").is_ok(),
            "{ctx}: lost+found after remount"
        );
    }
}

/// Every block holding a header of one file erased after a crash (damage): the file's data
/// pages outside those blocks come back as /lost+found/#<number>, byte for byte. A
/// read-only mount's fsck reports what a writable mount restores; after it, fsck is clean
/// and a remount keeps the file there. Where tombstones do not cover data (the papers'
/// designs), the pages are only noted.
#[test]
fn a_file_whose_headers_are_lost_comes_back_from_its_data() {
    let tmp = tempfile::tempdir().unwrap();
    for (dev, covered) in [(Dev::Tiny, true), (Dev::Small, true), (Dev::Tiny, false)] {
        let config = yaffs(dev).with_tombs_cover_data(covered);
        let base = base_image_with(tmp.path(), dev, false, config);
        let (victim, (ino, data)) = base
            .files
            .iter()
            .filter(|(p, (_, d))| !p.starts_with("sub/") && d.len() > 4 * dev.chunk())
            .max_by_key(|(_, (_, d))| d.len())
            .map(|(p, v)| (p.clone(), v.clone()))
            .unwrap();
        let mut image = Image::read(&base.path, dev);
        let ppb = image.g.pages_per_block;
        let hit = image.blocks_with_headers_of(ino);
        assert!(!hit.is_empty(), "{}: no header of {victim}", dev.name());
        // The chunks of the victim that survive the damage.
        let mut kept = std::collections::BTreeSet::new();
        for b in 0..image.g.blocks_per_chip {
            for p in 0..ppb {
                if let TagRead::Valid(Tags::Data(d)) = image.tags(b, p) {
                    if d.obj == ino && !hit.contains(&b) {
                        kept.insert(d.chunk);
                    }
                }
            }
        }
        for &b in &hit {
            for p in 0..ppb {
                image.page_mut(b, p).fill(0xFF);
            }
        }
        let work = tmp.path().join("work.img");
        image.write(&work);
        copy_image_meta(&base.path, &work);
        let ctx = format!(
            "{}, tombstones cover data: {covered}: {victim} (object {ino}), blocks {hit:?} erased",
            dev.name()
        );
        assert!(kept.len() > 2, "{ctx}: too few chunks outside: {kept:?}");
        let mut ro =
            nandkit_fs::FileSystem::mount(nandkit_flash::StripedFlash::new(open(&work)), ro_opts())
                .unwrap();
        let report = ro.fsck();
        if !covered {
            assert!(
                report.notes.iter().any(|n| n.contains("not restored")),
                "{ctx}: {:#?}",
                report.notes
            );
            drop(ro);
            let mut fs = mount(open(&work)).unwrap();
            assert_fsck(&mut fs, &ctx);
            assert!(fs.resolve(&format!("lost+found/#{ino}")).is_err(), "{ctx}");
            continue;
        }
        let problems = report.problems;
        let said = format!("header is lost: a writable mount restores them as /lost+found/#{ino}");
        assert!(
            problems.iter().any(|p| p.contains(&said)),
            "{ctx}: fsck of the read-only mount: {problems:#?}"
        );
        drop(ro);
        let mut fs = mount(open(&work)).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
        assert_fsck(&mut fs, &ctx);
        let lf_path = format!("lost+found/#{ino}");
        let got = fs
            .resolve(&lf_path)
            .unwrap_or_else(|e| panic!("{ctx}: {lf_path}: {e}"));
        assert_eq!(got, ino, "{ctx}: {lf_path}");
        let bytes = read_all(&mut fs, ino).unwrap();
        let c = dev.chunk();
        for &k in &kept {
            let k = k as usize;
            let want = &data[k * c..((k + 1) * c).min(data.len())];
            assert_bytes(
                bytes.get(k * c..k * c + want.len()).unwrap_or(&[]),
                want,
                &format!("{ctx}: chunk {k} of {lf_path}"),
            );
        }
        let attr = fs.getattr(ino).unwrap();
        assert_eq!(attr.perm & 0o7777, 0o600, "{ctx}: mode");
        assert_eq!((attr.uid, attr.gid), (0, 0), "{ctx}: owner");
        let mut fs = crash_remount(clean_remount(fs));
        assert_fsck(&mut fs, &format!("{ctx}, remounted"));
        assert_eq!(fs.resolve(&lf_path).ok(), Some(ino), "{ctx}: after remount");
    }
}

/// The other side of bringing header-less data back: a deleted file's pages never come
/// back. Files are written, overwritten, truncated and deleted on a small device until
/// cleaning has moved and dropped tombstones many times; after power cuts (scan mounts)
/// and clean remounts (checkpoint mounts) in turn, no lost+found appears and fsck has
/// nothing to say about header-less pages.
#[test]
fn deleted_files_never_come_back_in_lost_found() {
    for dev in Dev::ALL {
        let mut fs = format(dev);
        let c = dev.chunk();
        let mut live: Vec<(Ino, String)> = Vec::new();
        let mut cleaned = 0;
        for round in 0..24u64 {
            for i in 0..12u64 {
                let name = format!("r{round}-{i}");
                let ino = fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino;
                // Up to 3 blocks: a header's block and its data's come apart.
                let len = ((round * 7 + i * 5) % 9 + 1) as usize * 16 * c + (i as usize * 31) % c;
                fs.write(ino, 0, &pattern(round * 100 + i, len)).unwrap();
                if i % 3 == 0 {
                    fs.write(ino, 0, &pattern(round * 100 + i + 50, len / 2))
                        .unwrap();
                }
                if i % 4 == 1 {
                    let size = Some((len / 3) as u64);
                    fs.setattr(
                        ino,
                        SetAttr {
                            size,
                            ..SetAttr::default()
                        },
                    )
                    .unwrap();
                }
                fs.fsync(ino).unwrap();
                live.push((ino, name));
            }
            // Keep the device about 60% full.
            while live.len() > 30 {
                let (_, name) = live.remove((round as usize * 5) % live.len());
                fs.unlink(ROOT_INO, name.as_bytes()).unwrap();
            }
            fs.sync().unwrap();
            cleaned += fs.stats().blocks_cleaned;
            let ctx = format!("{}: round {round}", dev.name());
            fs = if round % 3 == 2 {
                clean_remount(fs)
            } else {
                crash_remount(fs)
            };
            let r = fs.fsck();
            assert!(r.problems.is_empty(), "{ctx}: {:#?}", r.problems);
            assert!(
                !r.notes.iter().any(|n| n.contains("no header")),
                "{ctx}: {:#?}",
                r.notes
            );
            assert!(
                fs.resolve("lost+found").is_err(),
                "{ctx}: a lost+found appeared"
            );
        }
        assert!(cleaned > 20, "{}: {cleaned} blocks cleaned", dev.name());
    }
}
