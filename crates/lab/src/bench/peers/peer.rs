//! One file system under test: littlefs, or a nandkit profile, on the same preset.

use anyhow::Context;
use nandkit_flash::{ChipStats, DeviceConfig, Flash, FlashDevice};
use nandkit_littlefs::Littlefs;
use nandkit_workloads::{Target, TargetError};

use crate::bench::{mount_options, Fs, FsArgs};
use crate::compare::design::{format_littlefs, format_nandkit, HeapBase};

pub enum Peer {
    Littlefs(Littlefs<FlashDevice>),
    Nandkit(Box<Fs>),
}

/// Where the device stands: its clock, its energy and its operation counts.
#[derive(Clone, Copy)]
pub struct Counters {
    pub ns: u64,
    pub pj: u64,
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
}

impl Counters {
    fn of(now_ns: u64, pj: u64, t: ChipStats) -> Counters {
        Counters {
            ns: now_ns,
            pj,
            reads: t.page_reads + t.oob_reads,
            programs: t.programs,
            erases: t.erases,
        }
    }
}

impl Peer {
    /// Formats a fresh RAM device of `config` with `fs` ("littlefs" or a profile). Also
    /// returns the heap in use once the devices (flash, and NVRAM for minv) exist and
    /// before the file system does: the file system's heap is what is in use above it.
    /// A profile with metadata in NVRAM gets the NVRAM `nvram` describes.
    pub fn format(
        config: &DeviceConfig,
        fs: &str,
        nvram: &crate::bench::BenchNvramArgs,
    ) -> anyhow::Result<(Peer, HeapBase)> {
        if fs == "littlefs" {
            let (lfs, base) = format_littlefs(config)?;
            return Ok((Peer::Littlefs(lfs), base));
        }
        let args = nvram.apply(&FsArgs {
            profile: fs.into(),
            ..FsArgs::default()
        });
        let (fs, base) = format_nandkit(config, &args)?;
        Ok((Peer::Nandkit(Box::new(fs)), base))
    }

    /// The device's simulated clock.
    pub fn now_ns(&mut self) -> u64 {
        match self {
            Peer::Littlefs(l) => l.device().now_ns(),
            Peer::Nandkit(fs) => fs.device().now_ns(),
        }
    }

    pub fn counters(&mut self) -> Counters {
        match self {
            Peer::Littlefs(l) => {
                let dev = l.device();
                let s = dev.stats();
                Counters::of(dev.now_ns(), s.energy_pj(), s.total())
            }
            Peer::Nandkit(fs) => {
                let nv_pj = fs.nvram().map_or(0, |n| n.stats.energy_pj);
                let mut dev = fs.device();
                let s = dev.stats();
                Counters::of(dev.now_ns(), s.energy_pj() + nv_pj, s.total())
            }
        }
    }

    /// Unmounts cleanly and mounts again.
    pub fn remount(self) -> anyhow::Result<Peer> {
        Ok(match self {
            Peer::Littlefs(l) => {
                let dev = l.unmount().map_err(|(e, _)| e)?;
                Peer::Littlefs(Littlefs::mount(dev).map_err(|(e, _)| e)?)
            }
            Peer::Nandkit(fs) => {
                let parts = fs.unmount_parts().context("unmounting")?;
                let fs = crate::bench::mount_parts(parts, mount_options(false))?;
                Peer::Nandkit(Box::new(fs))
            }
        })
    }

    fn flash(&mut self) -> &mut FlashDevice {
        match self {
            Peer::Littlefs(l) => l.device(),
            Peer::Nandkit(fs) => fs.device_mut().inner_mut(),
        }
    }

    /// Heap the device's stored pages take now.
    pub fn storage_heap_bytes(&mut self) -> usize {
        self.flash().storage_heap_bytes()
    }

    /// Heap the file system holds: what is in use above `base` (taken when the devices
    /// existed and the file system did not, see [`Peer::format`]), less what the RAM
    /// device has allocated for pages since.
    pub fn heap_bytes(&mut self, base: HeapBase) -> u64 {
        base.file_system_bytes(self.storage_heap_bytes())
    }

    /// State-changing flash operations so far (what a power cut counts).
    pub fn state_ops(&mut self) -> u64 {
        self.flash().state_ops()
    }

    /// Cuts power during the `k`-th state-changing operation from now.
    pub fn arm_power_cut(&mut self, k: u64) {
        self.flash().arm_power_cut(nandkit_flash::PowerCut::AtOp(k));
    }

    pub fn power_lost(&mut self) -> bool {
        self.flash().power_lost()
    }

    /// After a power cut: the device powers up again (as the cut left it) and is mounted.
    /// `lfs_uncorrectable`: the code littlefs gets for an uncorrectable read.
    pub fn crash_and_mount(self, lfs_uncorrectable: i32) -> anyhow::Result<Peer> {
        Ok(match self {
            Peer::Littlefs(l) => {
                let mut dev = l.into_device();
                dev.power_cycle().context("power cycle")?;
                Peer::Littlefs(
                    Littlefs::mount_reporting(dev, lfs_uncorrectable).map_err(|(e, _)| e)?,
                )
            }
            Peer::Nandkit(fs) => {
                let (mut dev, nv) = fs.into_parts();
                anyhow::ensure!(
                    nv.is_none(),
                    "the power-cut comparison runs flash-only profiles"
                );
                dev.inner_mut().power_cycle().context("power cycle")?;
                Peer::Nandkit(Box::new(
                    Fs::mount(dev, mount_options(false)).context("mounting")?,
                ))
            }
        })
    }

    /// NAND rules the file system broke (littlefs only: nandkit's break none, or its tests
    /// fail).
    pub fn violations(&self) -> usize {
        match self {
            Peer::Littlefs(l) => l.violations().len(),
            Peer::Nandkit(_) => 0,
        }
    }

    pub fn target(&mut self) -> &mut dyn Target {
        match self {
            Peer::Littlefs(l) => l,
            Peer::Nandkit(fs) => &mut **fs,
        }
    }
}

/// A target that refuses to go on once the run has used its budget of simulated or host
/// time, so every run of the bench ends.
pub struct Budgeted<'a> {
    pub peer: &'a mut Peer,
    pub start_ns: u64,
    pub sim_budget_ns: u64,
    pub host_start: std::time::Instant,
    pub host_budget: std::time::Duration,
    pub over: bool,
    /// Calls made so far (the one that was refused included).
    pub calls: u64,
}

pub const OVER_BUDGET: &str = "over budget";

impl Budgeted<'_> {
    fn check(&mut self) -> Result<(), TargetError> {
        self.calls += 1;
        let sim = self.peer.now_ns() - self.start_ns;
        if sim > self.sim_budget_ns || self.host_start.elapsed() > self.host_budget {
            self.over = true;
            return Err(TargetError::Other(OVER_BUDGET.into()));
        }
        Ok(())
    }
}

impl Target for Budgeted<'_> {
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError> {
        self.check()?;
        self.peer.target().mkdir(path)
    }
    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        self.check()?;
        self.peer.target().create(path)
    }
    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        self.check()?;
        self.peer.target().write(path, offset, data)
    }
    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        self.check()?;
        self.peer.target().read(path, offset, len)
    }
    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        self.calls += 1;
        self.peer.target().size(path)
    }
    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        self.check()?;
        self.peer.target().truncate(path, size)
    }
    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        self.check()?;
        self.peer.target().unlink(path)
    }
    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        self.check()?;
        self.peer.target().fsync(path)
    }
}
