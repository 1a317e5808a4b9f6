//! What the fuzz targets share: the base images they damage, made once per process.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use nandkit_flash::{preset, DeviceOptions, FlashDevice, StripedFlash};
use nandkit_fs::clock::CountingClock;
use nandkit_fs::{FileSystem, FsConfig, Ino, Kind, MountOptions, NewObject, ROOT_INO};
use nandkit_nvram::Nvram;

pub struct Bases {
    pub dir: PathBuf,
    /// (image bytes, its sidecar's bytes) per flash base.
    pub flash: Vec<(Vec<u8>, Vec<u8>)>,
    /// The minv base: its flash image and NVRAM bytes.
    pub minv: (Vec<u8>, Vec<u8>, Vec<u8>),
    pub nvram_config: nandkit_nvram::NvramConfig,
}

pub fn config() -> nandkit_flash::DeviceConfig {
    preset("tiny").unwrap().with_total_bytes(2 << 20).unwrap()
}

pub fn options() -> MountOptions {
    MountOptions {
        clock: Arc::new(CountingClock::new(1_000_000_000)),
        ..MountOptions::default()
    }
}

pub fn populate<F: nandkit_flash::Flash>(fs: &mut FileSystem<F>) {
    let dir = NewObject {
        kind: Kind::Dir,
        perm: 0o755,
        ..NewObject::regular_file()
    };
    let d = fs.create(ROOT_INO, b"d", dir).unwrap().ino;
    for i in 0..12u32 {
        let parent = if i % 2 == 0 { ROOT_INO } else { d };
        let f = fs
            .create(
                parent,
                format!("f{i}").as_bytes(),
                NewObject::regular_file(),
            )
            .unwrap()
            .ino;
        fs.write(f, 0, &contents(i)).unwrap();
        if i % 3 == 0 {
            fs.fsync(f).unwrap();
        }
    }
    fs.rename(ROOT_INO, b"f0", d, b"g0", Default::default())
        .unwrap();
    fs.sync().unwrap();
}

pub fn bases() -> &'static Bases {
    static B: OnceLock<Bases> = OnceLock::new();
    B.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("nandkit-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut flash = Vec::new();
        for clean in [false, true] {
            let path = dir.join(format!("base-{clean}.img"));
            let dev =
                FlashDevice::create_image(&path, config(), true, DeviceOptions::default()).unwrap();
            let fsc = FsConfig::profile("yaffs", 16).unwrap();
            let mut fs = FileSystem::format(
                StripedFlash::new(dev),
                fsc,
                Arc::new(CountingClock::new(1_000_000_000)),
            )
            .unwrap();
            populate(&mut fs);
            if clean {
                drop(fs.unmount().unwrap());
            } else {
                drop(fs.into_device());
            }
            flash.push((
                std::fs::read(&path).unwrap(),
                std::fs::read(meta(&path)).unwrap(),
            ));
        }
        let path = dir.join("minv.img");
        let dev =
            FlashDevice::create_image(&path, config(), true, DeviceOptions::default()).unwrap();
        let nvram_config = nandkit_nvram::preset("feram")
            .unwrap()
            .with_size_bytes(1 << 20)
            .unwrap();
        let nv = Nvram::new_ram(nvram_config.clone()).unwrap();
        let mut fs = FileSystem::format_with_nvram(
            StripedFlash::new(dev),
            nv,
            FsConfig::profile("minv", 16).unwrap(),
            Arc::new(CountingClock::new(1_000_000_000)),
        )
        .unwrap();
        populate(&mut fs);
        let (_, nv) = fs.unmount_parts().unwrap();
        let mut nv = nv.unwrap();
        let mut bytes = vec![0u8; nv.size_bytes() as usize];
        nv.read(0, &mut bytes).unwrap();
        let minv = (
            std::fs::read(&path).unwrap(),
            std::fs::read(meta(&path)).unwrap(),
            bytes,
        );
        Bases {
            dir,
            flash,
            minv,
            nvram_config,
        }
    })
}

pub fn meta(p: &std::path::Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".meta");
    PathBuf::from(s)
}

/// XORs the input's patches into `target`.
pub fn patch(target: &mut [u8], mut input: &[u8]) {
    while input.len() >= 6 && !target.is_empty() {
        let at = u32::from_le_bytes(input[..4].try_into().unwrap()) as usize % target.len();
        let len = (usize::from(input[4]) % 32 + 1).min(input.len() - 5);
        for (i, &x) in input[5..5 + len].iter().enumerate() {
            if let Some(b) = target.get_mut(at + i) {
                *b ^= x;
            }
        }
        input = &input[5 + len..];
    }
}

/// Reads everything reachable, a bounded walk (a damaged tree may have cycles).
pub fn walk<F: nandkit_flash::Flash>(fs: &mut FileSystem<F>) {
    let mut stack = vec![ROOT_INO];
    let mut seen = std::collections::HashSet::<Ino>::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) || seen.len() > 200 {
            continue;
        }
        let Ok(entries) = fs.readdir(d) else { continue };
        for e in entries {
            match e.kind {
                Kind::Dir => stack.push(e.ino),
                _ => {
                    let mut buf = vec![0u8; 4096];
                    let mut off = 0;
                    while let Ok(n) = fs.read(e.ino, off, &mut buf) {
                        if n == 0 || off > 1 << 20 {
                            break;
                        }
                        off += n as u64;
                    }
                }
            }
        }
    }
}

/// What `populate` writes to its file number `i`.
fn contents(i: u32) -> Vec<u8> {
    (0..(i as usize * 1500))
        .map(|k| (k as u8) ^ (i as u8))
        .collect()
}

/// Where `populate` leaves its file number `i`: f0 was renamed into d as g0, the odd ones
/// are in d, the even ones in the root.
fn place(i: u32) -> (bool, String) {
    match i {
        0 => (true, "g0".into()),
        _ => (i % 2 == 1, format!("f{i}")),
    }
}

/// The oracle, on a read-only mount of a damaged base: if fsck finds nothing (no problem
/// and no note), every file `populate` wrote is where it left it and reads back exactly,
/// or its read fails with an error. Wrong bytes, or a file gone, behind a clean fsck is a
/// bug: damage let through as data.
pub fn check_reads<F: nandkit_flash::Flash>(fs: &mut FileSystem<F>) {
    let report = fs.fsck();
    if !report.problems.is_empty() || !report.notes.is_empty() {
        return;
    }
    let d = match fs.lookup(ROOT_INO, b"d") {
        Ok(a) => a.ino,
        Err(e) => panic!("fsck found nothing, but /d: {e}"),
    };
    for i in 0..12 {
        let (in_d, name) = place(i);
        let parent = if in_d { d } else { ROOT_INO };
        let ino = match fs.lookup(parent, name.as_bytes()) {
            Ok(a) => a.ino,
            Err(e) => panic!("fsck found nothing, but {name}: {e}"),
        };
        let want = contents(i);
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        loop {
            match fs.read(ino, got.len() as u64, &mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                // An error is an answer: the damage was not let through.
                Err(_) => return,
            }
            if got.len() > want.len() {
                break;
            }
        }
        assert!(
            got == want,
            "fsck found nothing, but {name} reads wrong bytes"
        );
    }
}

pub fn exercise<F: nandkit_flash::Flash>(mut fs: FileSystem<F>) {
    let _ = fs.fsck();
    walk(&mut fs);
    if let Ok(f) = fs.create(ROOT_INO, b"new", NewObject::regular_file()) {
        let _ = fs.write(f.ino, 0, &[7u8; 5000]);
        let _ = fs.fsync(f.ino);
    }
    let _ = fs.fsck();
    let _ = fs.unmount_parts();
}

/// Seeds the corpora from real images under `out` (scripts/fuzz.sh asks for it, through
/// the `image` target, when a corpus is empty): `decoders` gets every distinct page of the
/// base images (its data, and its tag bytes alone); `image` gets patches that flip one bit
/// of a page's tags, tear a page and garble its tags, at pages of the crashed base, and
/// flip bits of the minv base's NVRAM.
pub fn seed(out: &Path) {
    let b = bases();
    let g = config().geometry;
    let raw = g.raw_page_bytes();
    let page = g.page_size_bytes as usize;
    let dec = out.join("decoders");
    let img = out.join("image");
    std::fs::create_dir_all(&dec).unwrap();
    std::fs::create_dir_all(&img).unwrap();
    let mut seen = HashSet::new();
    let mut n = 0;
    let images = b.flash.iter().map(|(i, _)| i).chain([&b.minv.0]);
    for image in images {
        for p in image.chunks(raw) {
            if p.iter().all(|&x| x == 0xFF) {
                continue;
            }
            // The tag bytes sit after the bad-block marker; the decoders also get the
            // whole data part (records, summaries, checkpoint pages, anchor entries).
            for part in [&p[page + 2..], &p[..page]] {
                if seen.insert(part.to_vec()) {
                    std::fs::write(dec.join(format!("page-{n}")), part).unwrap();
                    n += 1;
                }
            }
        }
    }
    // Patches: [pick] then (offset u32, len-1 u8, bytes).
    let crashed = &b.flash[0].0;
    let mut k = 0;
    for (i, p) in crashed.chunks(raw).enumerate().step_by(7) {
        if p.iter().all(|&x| x == 0xFF) {
            continue;
        }
        let at = (i * raw) as u32;
        let patches: [(u32, Vec<u8>); 3] = [
            (at + page as u32 + 5, vec![0x04]),
            (at + 100, vec![0xFF; 32]),
            (at + page as u32 + 2, vec![0x5A; 8]),
        ];
        for (off, bytes) in patches {
            let mut seed = vec![(k % 2) as u8];
            seed.extend_from_slice(&off.to_le_bytes());
            seed.push((bytes.len() - 1) as u8);
            seed.extend_from_slice(&bytes);
            std::fs::write(img.join(format!("patch-{k}")), seed).unwrap();
            k += 1;
        }
    }
    // The minv base, NVRAM bytes flipped at a few places.
    for (j, off) in [0u32, 64, 4096, 65536].into_iter().enumerate() {
        let mut seed = vec![2u8];
        seed.extend_from_slice(&off.to_le_bytes());
        seed.push(0);
        seed.push(0x01);
        std::fs::write(img.join(format!("nvram-{j}")), seed).unwrap();
    }
    println!(
        "seeded {n} decoder inputs and {} image patches into {}",
        k + 4,
        out.display()
    );
    let _ = std::fs::remove_dir_all(&b.dir);
}
