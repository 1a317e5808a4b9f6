//! Helpers shared by the file system's integration tests (each test file is its own crate
//! and uses a part of this module).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use nandkit_flash::ubi::UbiParams;
use nandkit_flash::{
    preset, BlockAddr, DeviceConfig, Flash, FlashDevice, PageAddr, StripedDevice, StripedFlash,
};
use nandkit_fs::*;

/// Every test device is seen through its striped view (one chip: the chip itself).
pub type Fs = FileSystem<StripedDevice>;

/// The two geometries every file system test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dev {
    /// "tiny": 8 MiB, 2 KiB pages + 64 B OOB, 64 pages/block, 64 blocks: tags in the OOB.
    Tiny,
    /// "smallblock-64m" cut to 2 MiB: 512 B pages + 16 B OOB (8 free bytes after the
    /// bad-block marker and MTD's Hamming ECC), 32 pages/block, 128 blocks: the small tag
    /// layout, 512-byte chunks.
    Small,
    /// "tiny" split over 4 chips and striped (MA): 16 blocks of 4 x 64 pages, so every
    /// write of 4 chunks or more programs several chips in one batch.
    Array,
    /// The same chips with a UBI each (MA as its paper built it): 13 LEBs of 4 x 62 pages,
    /// each LEB wherever every chip's UBI keeps it.
    ArrayUbi,
    /// The same chips with parity (a UBI each): a page is a stripe of 3 data pieces and
    /// their XOR, so the file system's page is 6 KiB.
    ArrayParity,
}

impl Dev {
    pub const ALL: [Dev; 2] = [Dev::Tiny, Dev::Small];

    pub fn config(self) -> DeviceConfig {
        let c = match self {
            Dev::Tiny => preset("tiny").expect("tiny preset"),
            Dev::Small => preset("smallblock-64m")
                .expect("smallblock preset")
                .with_total_bytes(2 << 20)
                .expect("2 MiB smallblock"),
            Dev::Array | Dev::ArrayUbi | Dev::ArrayParity => preset("tiny")
                .expect("tiny preset")
                .with_total_bytes(16 << 20)
                .expect("16 MiB tiny")
                .with_chips(4)
                .expect("tiny over 4 chips"),
        };
        no_bit_errors(c)
    }

    /// Blocks of the device as the file system sees it (striped).
    pub fn blocks(self) -> u32 {
        let pebs = self.config().geometry.blocks_per_chip;
        match self {
            Dev::ArrayUbi | Dev::ArrayParity => {
                UbiParams::default().lebs(pebs).expect("room for LEBs")
            }
            _ => pebs,
        }
    }

    /// A new RAM device of this kind as the file system sees it: striped, over a fresh UBI
    /// per chip for `ArrayUbi`.
    pub fn striped(self) -> StripedDevice {
        let flash = FlashDevice::ram(self.config()).expect("ram device");
        match self {
            // A low wear-levelling threshold, so LEB moves run inside the crash sweeps.
            Dev::ArrayUbi => StripedFlash::format_ubi(
                flash,
                UbiParams {
                    wl_threshold: 1,
                    ..UbiParams::default()
                },
            )
            .expect("UBI format"),
            Dev::ArrayParity => StripedFlash::format_ubi(
                flash,
                UbiParams {
                    parity: true,
                    ..UbiParams::default()
                },
            )
            .expect("UBI format with parity"),
            _ => StripedFlash::new(flash),
        }
    }

    /// Bytes of file data one flash page holds.
    pub fn chunk(self) -> usize {
        match self {
            Dev::Tiny | Dev::Array | Dev::ArrayUbi => 2048,
            Dev::ArrayParity => 3 * 2048,
            Dev::Small => 512,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dev::Tiny => "tiny",
            Dev::Small => "small-2m",
            Dev::Array => "tiny-16m-x4",
            Dev::ArrayUbi => "tiny-16m-x4-ubi",
            Dev::ArrayParity => "tiny-16m-x4-parity",
        }
    }
}

/// The device with random raw bit errors switched off, so every outcome is exact.
pub fn no_bit_errors(mut config: DeviceConfig) -> DeviceConfig {
    config.ecc.rber_fresh = 0.0;
    config.ecc.rber_at_endurance = 0.0;
    config
}

/// A deterministic clock: one per test thread, so it keeps counting across the remounts
/// of a test (times never go back) and every test sees the same values run after run.
pub fn clock() -> Arc<dyn Clock> {
    thread_local! {
        static CLOCK: Arc<CountingClock> = Arc::new(CountingClock::new(1_000_000_000));
    }
    CLOCK.with(|c| Arc::clone(c) as Arc<dyn Clock>)
}

pub fn opts() -> MountOptions {
    MountOptions {
        read_only: false,
        force_scan: false,
        clock: clock(),
        atime: AtimePolicy::Relatime,
    }
}

pub fn scan_opts() -> MountOptions {
    MountOptions {
        force_scan: true,
        ..opts()
    }
}

pub fn yaffs(dev: Dev) -> FsConfig {
    FsConfig::profile("yaffs", dev.blocks()).expect("yaffs profile")
}

/// A freshly formatted file system on a new RAM device.
pub fn format(dev: Dev) -> Fs {
    let flash = FlashDevice::ram(dev.config()).expect("ram device");
    FileSystem::format(StripedFlash::new(flash), yaffs(dev), clock()).expect("format")
}

/// Mounts a device (an array through its striped view).
pub fn mount(flash: impl Into<Array>) -> Result<Fs> {
    mount_parts_with(flash, None, opts())
}

/// A device for `mount`: a bare device is striped on the way (one chip: itself).
pub struct Array(pub StripedDevice);

impl From<FlashDevice> for Array {
    fn from(d: FlashDevice) -> Self {
        // Chips that carry UBI are attached, as `nandkit mount` does; `ArrayUbi` (no
        // parity) runs at the low wear-levelling threshold it was formatted with, which
        // an attach does not read from flash (as Linux's UBI takes it from its build).
        let mut s = StripedFlash::open(d, false).expect("attach");
        if s.ubi().is_some_and(|u| !u.parity()) {
            s.set_ubi_wl_threshold(1);
        }
        Array(s)
    }
}

impl From<StripedDevice> for Array {
    fn from(d: StripedDevice) -> Self {
        Array(d)
    }
}

/// Power fails (nothing is flushed), power returns, and the device is mounted (scan, or
/// from the NVRAM, whose unpersisted words the crash decides).
pub fn crash_remount(fs: Fs) -> Fs {
    let (mut flash, nv) = fs.into_parts();
    flash.power_cycle().expect("power cycle");
    let nv = nv.map(|mut n| {
        n.crash(0x5eed);
        n
    });
    mount_parts(flash, nv).expect("mount after crash")
}

/// Clean unmount and mount again.
pub fn clean_remount(fs: Fs) -> Fs {
    let (flash, nv) = fs.unmount_parts().expect("unmount");
    mount_parts(flash, nv).expect("mount after clean unmount")
}

/// The `minv` profile: metadata in NVRAM.
pub fn minv(dev: Dev) -> FsConfig {
    FsConfig::profile("minv", dev.blocks()).expect("minv profile")
}

/// A RAM NVRAM big enough for every test device (FeRAM timing).
pub fn ram_nvram() -> nandkit_nvram::Nvram {
    let config = nandkit_nvram::preset("feram")
        .expect("feram preset")
        .with_size_bytes(4 << 20)
        .expect("4 MiB");
    nandkit_nvram::Nvram::new_ram(config).expect("ram nvram")
}

/// mkfs with `config` on a new RAM device (and a new RAM NVRAM if the profile keeps its
/// metadata there).
pub fn format_with(dev: Dev, config: FsConfig) -> Fs {
    format_striped(dev.striped(), config)
}

/// mkfs with `config` on `flash` (and a new RAM NVRAM if the profile keeps its metadata
/// there).
pub fn format_device(flash: FlashDevice, config: FsConfig) -> Fs {
    format_striped(StripedFlash::new(flash), config)
}

/// mkfs with `config` on an array as the file system sees it.
pub fn format_striped(flash: StripedDevice, config: FsConfig) -> Fs {
    if config.metadata == nandkit_fs::meta::MetadataKind::Nvram {
        FileSystem::format_with_nvram(flash, ram_nvram(), config, clock()).expect("format")
    } else {
        FileSystem::format(flash, config, clock()).expect("format")
    }
}

/// Mounts a device, from its NVRAM when it has one.
pub fn mount_parts(flash: impl Into<Array>, nv: Option<nandkit_nvram::Nvram>) -> Result<Fs> {
    mount_parts_with(flash, nv, opts())
}

/// `mount_parts` with other mount options.
pub fn mount_parts_with(
    flash: impl Into<Array>,
    nv: Option<nandkit_nvram::Nvram>,
    options: MountOptions,
) -> Result<Fs> {
    // A UBI array attaches its chips again, as a boot does (a cut leaves its RAM map stale).
    let flash = Array(flash.into().0.reattach(options.read_only)?);
    match nv {
        Some(nv) => FileSystem::mount_with_nvram(flash.0, nv, options),
        None => FileSystem::mount(flash.0, options),
    }
}

pub fn assert_fsck(fs: &mut Fs, ctx: &str) {
    let r = fs.fsck();
    assert!(
        r.is_clean(),
        "{ctx}: fsck found problems: {:#?}",
        r.problems
    );
}

pub fn new_obj(kind: Kind) -> NewObject<'static> {
    NewObject {
        kind,
        perm: if kind == Kind::Dir { 0o755 } else { 0o644 },
        uid: 1000,
        gid: 1000,
        rdev: 0,
        target: b"",
    }
}

pub fn file() -> NewObject<'static> {
    new_obj(Kind::File)
}

pub fn dir() -> NewObject<'static> {
    new_obj(Kind::Dir)
}

pub fn symlink(target: &[u8]) -> NewObject<'_> {
    NewObject {
        perm: 0o777,
        target,
        ..new_obj(Kind::Symlink)
    }
}

pub fn special(kind: Kind, rdev: u64) -> NewObject<'static> {
    NewObject {
        rdev,
        ..new_obj(kind)
    }
}

/// A file's whole contents.
pub fn read_all(fs: &mut Fs, ino: Ino) -> Result<Vec<u8>> {
    let size = fs.getattr(ino)?.size as usize;
    let mut buf = vec![0xA5; size + 7];
    let n = fs.read(ino, 0, &mut buf)?;
    assert_eq!(n, size, "read of object {ino} returned {n} of {size} bytes");
    buf.truncate(n);
    Ok(buf)
}

/// Deterministic bytes that depend on `seed` (no long runs of one value).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_add(1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(23)
        | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Every name in the tree reachable from the root: (parent, name) -> object.
pub type Dentries = BTreeMap<(Ino, Vec<u8>), Ino>;

/// Walks the tree from the root with readdir.
pub fn dentries(fs: &mut Fs) -> Result<Dentries> {
    let mut out = Dentries::new();
    let mut stack = vec![ROOT_INO];
    let mut seen = std::collections::HashSet::new();
    while let Some(d) = stack.pop() {
        assert!(seen.insert(d), "directory {d} reached twice (a cycle?)");
        for e in fs.readdir(d)? {
            out.insert((d, e.name.clone()), e.ino);
            if e.kind == Kind::Dir {
                stack.push(e.ino);
            }
        }
    }
    Ok(out)
}

/// A readable rendering of a dentry map for failure messages.
pub fn show_dentries(d: &Dentries) -> String {
    d.iter()
        .map(|((p, n), i)| format!("{p}/{}->{i}", String::from_utf8_lossy(n)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a file may hold after a crash: the content at its last durable point plus every
/// change made since (each of which may or may not have reached flash).
#[derive(Clone, Debug, Default)]
pub struct FileHistory {
    /// Content as of the last fsync (or creation).
    pub durable: Vec<u8>,
    /// Content as the file system should show it now.
    pub current: Vec<u8>,
    /// Changes since `durable`, in order.
    pub pending: Vec<Change>,
}

#[derive(Clone, Debug)]
pub enum Change {
    Write { off: u64, data: Vec<u8> },
    Truncate { size: u64 },
}

impl FileHistory {
    pub fn write(&mut self, off: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let off_us = off as usize;
        let end = off_us + data.len();
        if self.current.len() < end {
            self.current.resize(end, 0);
        }
        self.current[off_us..end].copy_from_slice(data);
        self.pending.push(Change::Write {
            off,
            data: data.to_vec(),
        });
    }

    pub fn truncate(&mut self, size: u64) {
        self.current.resize(size as usize, 0);
        self.pending.push(Change::Truncate { size });
    }

    /// fsync returned: everything is durable.
    pub fn synced(&mut self) {
        self.durable = self.current.clone();
        self.pending.clear();
    }

    /// After a crash the file holds `actual`: from now on that is both durable and current.
    pub fn adopt(&mut self, actual: Vec<u8>) {
        self.durable = actual.clone();
        self.current = actual;
        self.pending.clear();
    }

    /// Checks a post-crash content against what may have survived. Bytes fsync'd and not
    /// changed since must read back exactly; every other byte must be a value some change
    /// since the fsync gave it (or zero, where the file was extended or cut and regrown).
    pub fn check(&self, actual: &[u8]) -> std::result::Result<(), String> {
        let d = self.durable.len() as u64;
        let (mut min, mut max) = (d, d);
        let mut min_cut = u64::MAX;
        for c in &self.pending {
            match c {
                Change::Write { off, data } => max = max.max(off + data.len() as u64),
                Change::Truncate { size } => {
                    min = min.min(*size);
                    max = max.max(*size);
                    min_cut = min_cut.min(*size);
                }
            }
        }
        let len = actual.len() as u64;
        if len < min || len > max {
            return Err(format!(
                "size {len} outside [{min}, {max}] (durable {d}, {} changes since)",
                self.pending.len()
            ));
        }
        for (i, &b) in actual.iter().enumerate() {
            let i64_ = i as u64;
            let cur = self.current.get(i).copied();
            let dur = self.durable.get(i).copied();
            if Some(b) == cur || Some(b) == dur {
                continue;
            }
            if b == 0 && (i64_ >= d || i64_ >= min_cut) {
                continue;
            }
            let written = self.pending.iter().any(|c| match c {
                Change::Write { off, data } => {
                    i64_ >= *off
                        && i64_ < off + data.len() as u64
                        && data[(i64_ - off) as usize] == b
                }
                Change::Truncate { .. } => false,
            });
            if !written {
                return Err(format!(
                    "byte {i} is {b:#04x}; durable {dur:?}, current {cur:?}, not written since \
                     ({} changes since the last fsync)",
                    self.pending.len()
                ));
            }
        }
        Ok(())
    }
}

/// Copies a device page by page onto a fresh RAM device of the same configuration: a
/// snapshot to start many runs from. Only for devices whose pages were all cleanly
/// programmed (a clean unmount leaves that).
pub fn clone_device(src: &mut FlashDevice) -> FlashDevice {
    let config = src.config().clone();
    let g = config.geometry;
    let mut dst = FlashDevice::ram(config).expect("ram device");
    let page = g.page_size_bytes as usize;
    for chip in 0..g.chips {
        for block in 0..g.blocks_per_chip {
            let addr = BlockAddr::new(chip, block);
            if src.is_bad(addr).expect("is_bad") {
                if !dst.is_bad(addr).expect("is_bad") {
                    dst.mark_bad(addr).expect("mark bad");
                }
                continue;
            }
            for p in 0..g.pages_per_block {
                let addr = PageAddr::new(chip, block, p);
                let raw = src.raw_page(addr).expect("raw page");
                if raw.iter().all(|&b| b == 0xFF) {
                    break;
                }
                dst.program_page(addr, &raw[..page], &raw[page..])
                    .expect("program copy");
            }
        }
    }
    dst
}

/// Compares two byte strings and panics with the first difference (not the whole bytes).
#[track_caller]
pub fn assert_bytes(got: &[u8], want: &[u8], ctx: &str) {
    if got == want {
        return;
    }
    let first = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    panic!(
        "{ctx}: contents differ: {} bytes, expected {}; first difference at byte {first} \
         (got {:?}, expected {:?})",
        got.len(),
        want.len(),
        got.get(first),
        want.get(first)
    );
}
