//! The designs `compare` puts side by side, and what it does to each beyond the replay:
//! format, count, remount, cut power, check. A design is littlefs or a nandkit profile
//! (with a UBI per chip for MA's arrays, and parity across them).

use anyhow::Context;
use nandkit_flash::{DeviceConfig, Flash, FlashDevice};
use nandkit_fs::meta::MetadataKind;
use nandkit_littlefs::Littlefs;

use crate::bench::trace::target::Replayable;
use crate::bench::{bench_clock, bench_nvram, mount_options, timed_mount_chips, Fs, FsArgs};

/// One design of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Design {
    pub name: &'static str,
    /// What it is, in a line.
    pub what: &'static str,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Littlefs,
    Profile {
        profile: &'static str,
        ubi: bool,
        parity: bool,
    },
}

const fn profile(name: &'static str, what: &'static str) -> Design {
    Design {
        name,
        what,
        kind: Kind::Profile {
            profile: name,
            ubi: false,
            parity: false,
        },
    }
}

/// Every design, in the report's order: the modern baseline, the papers' baseline, the
/// papers' designs, then littlefs.
pub const DESIGNS: &[Design] = &[
    profile(
        "yaffs",
        "modern YAFFS2: page-mapped log, checkpoint at unmount",
    ),
    profile(
        "yaffs1",
        "YAFFS as the 2006-07 papers measured it (small-page chips)",
    ),
    profile(
        "moda",
        "MODA: hot/cold page allocation, cost-model cleaning",
    ),
    profile("dac", "DAC: regions by update frequency"),
    profile("page-hotcold", "MODA's classes at page granularity"),
    profile("mnfs", "MNFS: block-mapped files, erase on delete"),
    profile("hybrid", "MNFS for large files, the log for small ones"),
    profile("minv", "MiNV: all metadata in NVRAM (FeRAM)"),
    Design {
        name: "ma",
        what: "MA: a UBI per chip, striped over the chips",
        kind: Kind::Profile {
            profile: "yaffs",
            ubi: true,
            parity: false,
        },
    },
    Design {
        name: "ma-parity",
        what: "MA with parity across the chips (3 or more)",
        kind: Kind::Profile {
            profile: "yaffs",
            ubi: true,
            parity: true,
        },
    },
    Design {
        name: "littlefs",
        what: "littlefs (the C library), on the same chip",
        kind: Kind::Littlefs,
    },
];

/// The design named `name`.
pub fn by_name(name: &str) -> anyhow::Result<Design> {
    DESIGNS
        .iter()
        .find(|d| d.name == name)
        .copied()
        .with_context(|| {
            let names: Vec<&str> = DESIGNS.iter().map(|d| d.name).collect();
            format!("unknown design '{name}' (known: {})", names.join(", "))
        })
}

impl Design {
    pub fn is_littlefs(&self) -> bool {
        self.kind == Kind::Littlefs
    }

    /// Why this design does not run on `config`, if it does not: YAFFS1 was made for
    /// small pages; parity needs three chips.
    pub fn unfit(&self, config: &DeviceConfig) -> Option<String> {
        let g = &config.geometry;
        match self.kind {
            Kind::Profile {
                profile: "yaffs1", ..
            } if g.page_size_bytes > 512 => Some(format!(
                "YAFFS1 ran on small-page chips (512 B); this chip's page is {} B",
                g.page_size_bytes
            )),
            Kind::Profile { parity: true, .. } if g.chips < 3 => Some(format!(
                "parity needs 3 chips or more (--chips {})",
                g.chips
            )),
            _ => None,
        }
    }

    /// The nandkit options of a profile design (`nvram`: the NVRAM minv gets).
    pub fn fs_args(&self, nvram: &crate::bench::BenchNvramArgs) -> Option<FsArgs> {
        match self.kind {
            Kind::Littlefs => None,
            Kind::Profile {
                profile,
                ubi,
                parity,
            } => Some(nvram.apply(&FsArgs {
                profile: profile.into(),
                ubi: Some(ubi),
                parity,
                ..FsArgs::default()
            })),
        }
    }
}

/// Heap in use once the devices (flash, NVRAM) exist and before the file system does,
/// and the heap the RAM device's page store took then: the file system's heap is what
/// is live above the first, less what the store has grown by since.
#[derive(Clone, Copy, Debug)]
pub struct HeapBase {
    pub live: usize,
    pub pages: usize,
}

impl HeapBase {
    /// Heap the file system holds, the chips' page store being `pages_now` bytes now.
    pub fn file_system_bytes(self, pages_now: usize) -> u64 {
        crate::heap::live_bytes()
            .saturating_sub(self.live)
            .saturating_sub(pages_now.saturating_sub(self.pages)) as u64
    }
}

/// mkfs of nandkit as `args` say on a fresh RAM device of `config`, and the heap base
/// taken once the devices (flash, NVRAM) exist.
pub fn format_nandkit(config: &DeviceConfig, args: &FsArgs) -> anyhow::Result<(Fs, HeapBase)> {
    let ram = FlashDevice::ram(config.clone()).context("creating the RAM device")?;
    let mut dev = args.stripe(ram)?;
    let fs_config = args.config(&dev)?;
    let nv = if fs_config.metadata == MetadataKind::Nvram {
        Some(bench_nvram(args.nvram_size, args.nvram_preset.as_deref())?)
    } else {
        None
    };
    let base = HeapBase {
        live: crate::heap::live_bytes(),
        pages: dev.inner_mut().storage_heap_bytes(),
    };
    let fs = match nv {
        Some(nv) => Fs::format_with_nvram(dev, nv, fs_config, bench_clock()),
        None => Fs::format(dev, fs_config, bench_clock()),
    }
    .context("formatting")?;
    Ok((fs, base))
}

/// littlefs formatted on a fresh RAM device of `config` (without factory bad blocks:
/// littlefs has no bad-block handling), and the heap base.
pub fn format_littlefs(config: &DeviceConfig) -> anyhow::Result<(Littlefs<FlashDevice>, HeapBase)> {
    let mut dev = FlashDevice::ram(nandkit_littlefs::without_bad_blocks(config.clone()))
        .context("creating the RAM device")?;
    let base = HeapBase {
        live: crate::heap::live_bytes(),
        pages: dev.storage_heap_bytes(),
    };
    let lfs = Littlefs::format(dev).map_err(|(e, _)| e)?;
    Ok((lfs, base))
}

/// What `compare` needs of a file system beyond the replay.
pub trait Subject: Replayable + Sized {
    /// Formats a fresh RAM device of `config`.
    fn format(
        design: &Design,
        config: &DeviceConfig,
        nvram: &crate::bench::BenchNvramArgs,
    ) -> anyhow::Result<(Self, HeapBase)>;
    /// The physical chips.
    fn chips(&mut self) -> &mut FlashDevice;
    /// Unmounts cleanly and mounts again; returns the mount's simulated ms (UBI's attach
    /// included, as a boot does it).
    fn remount(self) -> anyhow::Result<(Self, f64)>;
    /// Power fails now (an armed cut already failed it) and comes back; mounts what is
    /// left and returns the mount's simulated ms.
    fn crash_and_mount(self, seed: u64) -> anyhow::Result<(Self, f64)>;
    /// What the file system's own checker finds wrong (None: it has none).
    fn fsck(&mut self) -> Option<Vec<String>>;
    /// Heap the file system holds now.
    fn heap_bytes(&mut self, base: HeapBase) -> u64 {
        base.file_system_bytes(self.chips().storage_heap_bytes())
    }
    /// Each physical block's erase count, every chip's.
    fn erase_counts(&mut self) -> Vec<u64> {
        let dev = self.chips();
        let g = Flash::geometry(dev);
        crate::bench::block_addrs(g)
            .map(|a| dev.block_info(a).map_or(0, |b| u64::from(b.erase_count)))
            .collect()
    }
    /// Each physical block's erases since `before` (an `erase_counts`).
    fn erases_since(&mut self, before: &[u64]) -> Vec<u64> {
        self.erase_counts()
            .iter()
            .zip(before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect()
    }
}

impl Subject for Fs {
    fn format(
        design: &Design,
        config: &DeviceConfig,
        nvram: &crate::bench::BenchNvramArgs,
    ) -> anyhow::Result<(Self, HeapBase)> {
        let args = design
            .fs_args(nvram)
            .context("littlefs is not a nandkit profile")?;
        format_nandkit(config, &args)
    }

    fn chips(&mut self) -> &mut FlashDevice {
        self.device_mut().inner_mut()
    }

    fn remount(self) -> anyhow::Result<(Self, f64)> {
        let (dev, nv) = self.unmount_parts().context("unmounting")?;
        mount_again(dev, nv)
    }

    fn crash_and_mount(self, seed: u64) -> anyhow::Result<(Self, f64)> {
        let (mut dev, nv) = self.into_parts();
        let nv = nv.map(|mut nv| {
            nv.crash(seed);
            nv
        });
        dev.inner_mut().power_cycle().context("power cycle")?;
        mount_again(dev, nv)
    }

    fn fsck(&mut self) -> Option<Vec<String>> {
        Some(nandkit_fs::FileSystem::fsck(self).problems)
    }
}

/// Mounts the parts as a boot would (UBI attached again from the chips) and times it.
fn mount_again(
    dev: nandkit_flash::StripedDevice,
    nv: Option<nandkit_nvram::Nvram>,
) -> anyhow::Result<(Fs, f64)> {
    match nv {
        Some(nv) => {
            let dev = dev;
            let t0 = dev.now_ns();
            let fs = Fs::mount_with_nvram(dev, nv, mount_options(false))
                .context("mounting from NVRAM")?;
            let ms = (fs.device().now_ns() - t0) as f64 / 1e6;
            Ok((fs, ms))
        }
        None => {
            let ubi = dev.ubi().map(|u| u.attach_options());
            let (fs, t) = timed_mount_chips(dev.into_inner(), ubi, false)?;
            Ok((fs, t.attach_sim_ms + t.sim_ms))
        }
    }
}

impl Subject for Littlefs<FlashDevice> {
    fn format(
        _design: &Design,
        config: &DeviceConfig,
        _nvram: &crate::bench::BenchNvramArgs,
    ) -> anyhow::Result<(Self, HeapBase)> {
        format_littlefs(config)
    }

    fn chips(&mut self) -> &mut FlashDevice {
        self.device()
    }

    fn remount(self) -> anyhow::Result<(Self, f64)> {
        let dev = self.unmount().map_err(|(e, _)| e)?;
        let t0 = dev.now_ns();
        let mut lfs = Littlefs::mount(dev).map_err(|(e, _)| e)?;
        let ms = (lfs.device().now_ns() - t0) as f64 / 1e6;
        Ok((lfs, ms))
    }

    fn crash_and_mount(self, _seed: u64) -> anyhow::Result<(Self, f64)> {
        let mut dev = self.into_device();
        dev.power_cycle().context("power cycle")?;
        let t0 = dev.now_ns();
        let mut lfs = Littlefs::mount(dev).map_err(|(e, _)| e)?;
        let ms = (lfs.device().now_ns() - t0) as f64 / 1e6;
        Ok((lfs, ms))
    }

    /// littlefs has no checker; what it broke of NAND's rules is the nearest thing.
    fn fsck(&mut self) -> Option<Vec<String>> {
        let v = self.violations();
        (!v.is_empty()).then(|| v.to_vec())
    }
}
