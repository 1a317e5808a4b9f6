//! Idle-time cleaning in simulated time: the MODA paper's second item of future work
//! ("defining and finding idle time to initiate block cleaning and deciding which blocks
//! and how many of these blocks should be reclaimed", sec. 7), as a [`Target`] wrapped
//! around the nandkit file system.
//!
//! The rule, the same as the mount daemon's (`nandkit mount -o idle_clean=S`):
//! - **when**: once no request has arrived for `after_ns`, the device counts as idle;
//! - **how much at a time**: one block per step ([`FileSystem::clean_idle_step`]: its
//!   valid pages copied, then the erase), so a request that arrives during a step waits
//!   for at most one block's worth of copies and an erase;
//! - **which and how many**: the file system's idle rule (`nandkit_fs::clean::idle`): the
//!   block with the fewest valid pages, while one is at least half invalid or erased
//!   blocks are short; steps go on while the idle period lasts and such a block remains.
//!   Unlike the paper's cleaning between runs, which takes every reclaimable block
//!   however long it takes, this is done in time nobody waits for, and leaves alone
//!   blocks not yet worth their copies.
//!
//! Arrivals are where the workload's calls put them: an idle period of `ns` ends when the
//! next call arrives, `ns` after the idle began. A step still running then delays that
//! call; the delay is counted as [`IdleStats::overrun_ns`], the only part of idle cleaning
//! a user would see.

use nandkit_flash::Flash;
use nandkit_fs::FileSystem;
use serde::Serialize;

use crate::{Target, TargetError};

/// What idle-time cleaning did, in simulated time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IdleStats {
    /// Idle periods the workload (or driver) asked for.
    pub periods: u64,
    /// Periods long enough to count as idle (at least `after_ns`).
    pub idle_periods: u64,
    /// Blocks reclaimed while idle.
    pub blocks: u64,
    /// Simulated time spent cleaning while idle.
    pub clean_ns: u64,
    /// How long requests that arrived while a cleaning step was still running waited for
    /// it (summed).
    pub overrun_ns: u64,
}

/// The nandkit file system as a [`Target`] whose `idle` cleans in the background.
pub struct IdleCleaning<'a, F: Flash> {
    fs: &'a mut FileSystem<F>,
    after_ns: u64,
    stats: IdleStats,
}

impl<'a, F: Flash> IdleCleaning<'a, F> {
    /// Cleans once the device has been idle for `after_ns` nanoseconds.
    pub fn new(fs: &'a mut FileSystem<F>, after_ns: u64) -> Self {
        Self {
            fs,
            after_ns,
            stats: IdleStats::default(),
        }
    }

    pub fn stats(&self) -> &IdleStats {
        &self.stats
    }

    pub fn fs(&mut self) -> &mut FileSystem<F> {
        self.fs
    }
}

impl<F: Flash> Target for IdleCleaning<'_, F> {
    fn mkdir(&mut self, path: &str) -> Result<(), TargetError> {
        Target::mkdir(self.fs, path)
    }

    fn create(&mut self, path: &str) -> Result<(), TargetError> {
        Target::create(self.fs, path)
    }

    fn write(&mut self, path: &str, offset: u64, data: &[u8]) -> Result<(), TargetError> {
        Target::write(self.fs, path, offset, data)
    }

    fn read(&mut self, path: &str, offset: u64, len: usize) -> Result<usize, TargetError> {
        Target::read(self.fs, path, offset, len)
    }

    fn size(&mut self, path: &str) -> Result<u64, TargetError> {
        Target::size(self.fs, path)
    }

    fn truncate(&mut self, path: &str, size: u64) -> Result<(), TargetError> {
        Target::truncate(self.fs, path, size)
    }

    fn unlink(&mut self, path: &str) -> Result<(), TargetError> {
        Target::unlink(self.fs, path)
    }

    fn fsync(&mut self, path: &str) -> Result<(), TargetError> {
        Target::fsync(self.fs, path)
    }

    fn idle(&mut self, ns: u64) -> Result<(), TargetError> {
        self.stats.periods += 1;
        let start = self.fs.device().now_ns();
        let arrival = start + ns;
        if ns >= self.after_ns {
            self.stats.idle_periods += 1;
            self.fs.device_mut().advance_clock_ns(self.after_ns);
            let cleaning = self.fs.device().now_ns();
            while self.fs.device().now_ns() < arrival {
                if !self.fs.clean_idle_step()? {
                    break;
                }
                self.stats.blocks += 1;
            }
            self.stats.clean_ns += self.fs.device().now_ns() - cleaning;
        }
        let now = self.fs.device().now_ns();
        if now < arrival {
            self.fs.device_mut().advance_clock_ns(arrival - now);
        } else {
            self.stats.overrun_ns += now - arrival;
        }
        Ok(())
    }
}
