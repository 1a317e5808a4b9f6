//! [`Nvram`]: a fixed-size persistent byte region with explicit persists, crash injection,
//! simulated time and energy.

use std::path::Path;

use crate::backend::{file, ram::RamStorage, Storage};
use crate::config::NvramConfig;
use crate::cost::WORD_BYTES;
use crate::error::NvramError;
use crate::power::{PowerControl, PowerCut, Verdict};
use crate::stats::NvramStats;
use crate::volatile::{CrashReport, VolatileWords};

/// A simulated byte-addressable NVRAM.
///
/// Stores are visible to reads at once and durable only once a [`persist`](Self::persist)
/// covers them; [`crash`](Self::crash) shows what a power failure leaves (see
/// [`crate::volatile`]). 8-byte values are little-endian. Every access adds its simulated
/// cost to a clock the owner drains with [`take_elapsed_ns`](Self::take_elapsed_ns).
///
/// Reads take `&mut self` because they cost time and energy.
pub struct Nvram {
    config: NvramConfig,
    storage: Box<dyn Storage>,
    volatile: VolatileWords,
    power: PowerControl,
    stats: NvramStats,
    /// Simulated nanoseconds not yet taken by the owner.
    elapsed_ns: u64,
}

impl Nvram {
    /// A zero-filled NVRAM in memory.
    pub fn new_ram(config: NvramConfig) -> Result<Self, NvramError> {
        config.validate()?;
        let storage = RamStorage::new(config.size_bytes as usize);
        Ok(Self::with_storage(config, Box::new(storage)))
    }

    /// A new zero-filled NVRAM image file (format in [`crate::backend::file`]). Refuses to
    /// replace an existing file unless `overwrite` is set.
    pub fn create_file(
        path: &Path,
        config: NvramConfig,
        overwrite: bool,
    ) -> Result<Self, NvramError> {
        let storage = file::create(path, &config, overwrite)?;
        Ok(Self::with_storage(config, Box::new(storage)))
    }

    /// Opens an image file as the device that wrote it. Every byte in it counts as persisted.
    pub fn open_file(path: &Path) -> Result<Self, NvramError> {
        let (config, storage) = file::open(path)?;
        Ok(Self::with_storage(config, Box::new(storage)))
    }

    fn with_storage(config: NvramConfig, storage: Box<dyn Storage>) -> Self {
        Self {
            config,
            storage,
            volatile: VolatileWords::default(),
            power: PowerControl::default(),
            stats: NvramStats::default(),
            elapsed_ns: 0,
        }
    }

    pub fn config(&self) -> &NvramConfig {
        &self.config
    }

    pub fn size_bytes(&self) -> u64 {
        self.config.size_bytes
    }

    /// Refuses when power is lost or `offset..offset + len` is not inside the NVRAM.
    fn check(&self, offset: u64, len: u64) -> Result<std::ops::Range<usize>, NvramError> {
        if self.power.is_lost() {
            return Err(NvramError::PowerLost);
        }
        match offset.checked_add(len) {
            Some(end) if end <= self.config.size_bytes => Ok(offset as usize..end as usize),
            _ => Err(NvramError::OutOfRange {
                offset,
                len,
                size: self.config.size_bytes,
            }),
        }
    }

    fn check_aligned(offset: u64) -> Result<(), NvramError> {
        if offset % WORD_BYTES != 0 {
            return Err(NvramError::Misaligned { offset });
        }
        Ok(())
    }

    fn charge(&mut self, ns: u64, pj: u64) {
        self.elapsed_ns += ns;
        self.stats.sim_time_ns += ns;
        self.stats.energy_pj += pj;
    }

    /// Fills `buf` with the current contents at `offset`, persisted or not.
    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), NvramError> {
        let len = buf.len() as u64;
        let range = self.check(offset, len)?;
        buf.copy_from_slice(&self.storage.bytes()[range]);
        self.stats.bytes_read += len;
        let ns = self.config.timing.read_cost_ns(offset, len);
        self.charge(ns, len * self.config.energy.read_pj_per_byte);
        Ok(())
    }

    /// `read` that neither takes time nor counts: for a program's checks of its own
    /// bookkeeping, which must not change what they check (debug assertions).
    pub fn peek(&self, offset: u64, buf: &mut [u8]) -> Result<(), NvramError> {
        let range = self.check(offset, buf.len() as u64)?;
        buf.copy_from_slice(&self.storage.bytes()[range]);
        Ok(())
    }

    /// Stores `data` at `offset`. Volatile until persisted; a crash may tear it at any byte.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), NvramError> {
        self.store(offset, data, false)
    }

    /// Reads the aligned little-endian 8-byte word at `offset`.
    pub fn read_u64(&mut self, offset: u64) -> Result<u64, NvramError> {
        Self::check_aligned(offset)?;
        let mut word = [0u8; WORD_BYTES as usize];
        self.read(offset, &mut word)?;
        Ok(u64::from_le_bytes(word))
    }

    /// Stores an aligned little-endian 8-byte word: failure-atomic, so a crash before it is
    /// persisted leaves the word all old or all new, never torn.
    pub fn write_u64(&mut self, offset: u64, value: u64) -> Result<(), NvramError> {
        Self::check_aligned(offset)?;
        self.store(offset, &value.to_le_bytes(), true)
    }

    fn store(&mut self, offset: u64, data: &[u8], atomic: bool) -> Result<(), NvramError> {
        let len = data.len() as u64;
        let range = self.check(offset, len)?;
        self.volatile
            .before_store(self.storage.bytes(), offset, len, atomic);
        self.storage.bytes_mut()[range].copy_from_slice(data);
        self.stats.bytes_written += len;
        let ns = self.config.timing.write_cost_ns(offset, len);
        self.charge(ns, len * self.config.energy.write_pj_per_byte);
        Ok(())
    }

    /// Flush + fence of `offset..offset + len`, rounded out to whole 8-byte words: when it
    /// returns, those words are durable. A persist point: an armed power cut fires here,
    /// before the persist takes effect, and the call returns [`NvramError::PowerLost`].
    /// `len` 0 is a bare fence: a persist point that makes nothing durable.
    pub fn persist(&mut self, offset: u64, len: u64) -> Result<(), NvramError> {
        self.check(offset, len)?;
        self.persist_point()?;
        let words = self.volatile.persist(offset, len);
        self.persisted(words);
        Ok(())
    }

    /// Flushes each 8-byte word at `offsets` and fences once (one persist point, one
    /// `persist_ns`): stores scattered over the NVRAM made durable together, as a CPU's
    /// cache-line writebacks followed by a single fence do.
    pub fn persist_words(&mut self, offsets: &[u64]) -> Result<(), NvramError> {
        for &o in offsets {
            self.check(o, WORD_BYTES)?;
        }
        self.persist_point()?;
        let words = offsets
            .iter()
            .map(|&o| self.volatile.persist(o, WORD_BYTES))
            .sum();
        self.persisted(words);
        Ok(())
    }

    /// Persists every byte, then msyncs a file image so it survives a host crash as well.
    /// One persist point, like [`persist`](Self::persist).
    pub fn persist_all(&mut self) -> Result<(), NvramError> {
        self.persist_point()?;
        let words = self.volatile.persist_all();
        self.persisted(words);
        self.storage.flush()
    }

    fn persist_point(&mut self) -> Result<(), NvramError> {
        match self.power.next_persist() {
            Verdict::Run => Ok(()),
            Verdict::Cut | Verdict::Refuse => Err(NvramError::PowerLost),
        }
    }

    fn persisted(&mut self, words: u64) {
        self.stats.persists += 1;
        self.stats.persisted_bytes += words * WORD_BYTES;
        self.charge(self.config.timing.persist_ns, 0);
    }

    /// Persist points reached since the device was opened (a cut one included): run a
    /// workload once, then cut at each of them in turn.
    pub fn persist_count(&self) -> u64 {
        self.power.persists_done()
    }

    /// Arms a power cut; see [`PowerCut`].
    pub fn arm_power_cut(&mut self, cut: PowerCut) {
        self.power.arm(cut);
    }

    /// Power fails at the `k`-th persist from now (0 = the next one).
    pub fn cut_at_persist(&mut self, k: u64) {
        self.arm_power_cut(PowerCut::AtPersist(k));
    }

    pub fn disarm_power_cut(&mut self) {
        self.power.disarm();
    }

    pub fn power_lost(&self) -> bool {
        self.power.is_lost()
    }

    /// Words stored to since they were last persisted: what a crash now would decide on.
    pub fn unpersisted_words(&self) -> usize {
        self.volatile.len()
    }

    /// Power fails now (if an armed cut has not already failed it) and comes back: every
    /// unpersisted word is kept, dropped or torn as `seed` decides (see
    /// [`crate::volatile`]), and the device works again with what survived, as if reopened.
    /// Any armed cut is disarmed; counters and the clock carry on.
    pub fn crash(&mut self, seed: u64) -> CrashReport {
        let report = self.volatile.crash(self.storage.bytes_mut(), seed);
        self.power.restore();
        report
    }

    /// Simulated nanoseconds spent since the last call, for the owner to add to its clock.
    pub fn take_elapsed_ns(&mut self) -> u64 {
        std::mem::take(&mut self.elapsed_ns)
    }

    pub fn stats(&self) -> NvramStats {
        self.stats
    }
}
