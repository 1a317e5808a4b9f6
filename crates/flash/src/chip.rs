//! One NAND chip: the rules a real chip enforces, its wear, bit errors, torn operations and
//! its simulated clock. Storage of the bytes is delegated to a [`Storage`] backend.
//!
//! ECC, as a controller's ECC engine does it (details in [`crate::ecc`]): a program stores
//! check bytes for every data codeword at the end of the OOB, overwriting what the caller
//! passed there; a full page read verifies them. Random bit errors are still modelled
//! statistically (corrected up to t per codeword, uncorrectable above, nothing stored),
//! while damage that is stored in the cells (a torn program, a half-erased page, bytes
//! changed in an image file) fails the stored check and is reported as uncorrectable, as
//! real ECC reports an interrupted program. An OOB-only read cannot check the data and
//! does not.

use std::collections::HashMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::backend::{BlockMeta, Storage, FLAG_ERASE_TORN, FLAG_FACTORY_BAD, FLAG_GROWN_BAD};
use crate::command::{Command, Completion, Reply};
use crate::config::DeviceConfig;
use crate::ecc::{EccReport, Poisson};
use crate::error::FlashError;
use crate::geometry::{BlockAddr, Geometry, PageAddr};
use crate::power::Verdict;
use crate::stats::ChipStats;
use crate::verified::VerifiedPages;

/// The result of one operation on a chip and the simulated interval it occupied.
#[derive(Debug)]
pub struct Timed<T> {
    pub result: Result<T, FlashError>,
    pub start_ns: u64,
    pub end_ns: u64,
}

pub struct Chip {
    index: u32,
    config: DeviceConfig,
    storage: Box<dyn Storage>,
    /// Draws raw bit errors on reads. Per chip, so the order of reads on other chips (and so
    /// the executor) cannot change what this chip returns.
    rng: Xoshiro256PlusPlus,
    /// Erase count at which each block fails, drawn once from the seed.
    block_limits: Vec<u32>,
    /// Raw bit errors injected by tests, per page and codeword; they last until an erase.
    stuck_errors: HashMap<(u32, u32), Vec<u32>>,
    busy_until_ns: u64,
    stats: ChipStats,
    /// Sleep for each operation's simulated latency, so a person can feel the device speed.
    realtime: bool,
    /// The OOB a program stores (the caller's, with the ECC bytes), kept to avoid allocating.
    program_oob: Vec<u8>,
    /// Pages whose stored ECC bytes a read found matching, not written since (see
    /// `verified`): their next read skips the check.
    verified: VerifiedPages,
    /// Partial programs of each page's spare area since its block's erase (the page's own
    /// program not counted). Kept in RAM: an image reopened forgets them, which can only
    /// allow a marker the chip would have refused, never refuse a legal one.
    spare_programs: HashMap<(u32, u32), u32>,
}

fn mix(seed: u64, a: u64, b: u64) -> u64 {
    // SplitMix64 finaliser over the inputs: independent streams from one device seed.
    let mut z =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Chip {
    /// Wraps a chip's storage. `fresh` storage gets its factory bad blocks drawn from the seed.
    pub fn new(index: u32, config: &DeviceConfig, storage: Box<dyn Storage>, fresh: bool) -> Self {
        let mut limits_rng =
            Xoshiro256PlusPlus::seed_from_u64(mix(config.seed, u64::from(index), 1));
        let block_limits = (0..config.geometry.blocks_per_chip)
            .map(|_| config.wear.block_limit(limits_rng.gen()))
            .collect();
        let mut chip = Self {
            index,
            config: config.clone(),
            storage,
            rng: Xoshiro256PlusPlus::seed_from_u64(mix(config.seed, u64::from(index), 2)),
            block_limits,
            stuck_errors: HashMap::new(),
            busy_until_ns: 0,
            stats: ChipStats::default(),
            realtime: false,
            program_oob: Vec::new(),
            verified: VerifiedPages::new(
                config.geometry.blocks_per_chip,
                config.geometry.pages_per_block,
            ),
            spare_programs: HashMap::new(),
        };
        if fresh {
            chip.mark_factory_bad_blocks();
        } else {
            chip.trust_bad_block_markers();
        }
        chip
    }

    /// A block the stored records call bad but whose chip shows no bad-block marker is
    /// good: the record is a cache of the markers (as Linux's bad block table is), and every
    /// way a block becomes bad here writes the marker with the record. Trusting a stray
    /// record would hide whatever the block holds, silently; the marker is what the chip
    /// itself says. Geometries without an OOB carry no marker and keep their records.
    fn trust_bad_block_markers(&mut self) {
        let page_size = self.geometry().page_size_bytes as usize;
        if self.geometry().oob_size_bytes == 0 || self.storage.gone() {
            return;
        }
        for block in 0..self.geometry().blocks_per_chip {
            let mut meta = self.storage.meta(block);
            if meta.is_bad() && self.storage.page(block, 0)[page_size] == 0xFF {
                meta.flags &= !(FLAG_FACTORY_BAD | FLAG_GROWN_BAD);
                self.storage.set_meta(block, meta);
            }
        }
    }

    fn mark_factory_bad_blocks(&mut self) {
        let mut rng =
            Xoshiro256PlusPlus::seed_from_u64(mix(self.config.seed, u64::from(self.index), 3));
        let fraction = self.config.wear.factory_bad_fraction;
        // Block 0 is guaranteed good, as NAND datasheets promise.
        for block in 1..self.geometry().blocks_per_chip {
            if rng.gen::<f64>() < fraction {
                let mut meta = self.storage.meta(block);
                meta.flags |= FLAG_FACTORY_BAD;
                self.storage.set_meta(block, meta);
                self.write_bad_marker(block);
            }
        }
    }

    /// A non-0xFF first OOB byte of page 0, where vendors and Linux put the bad block marker.
    fn write_bad_marker(&mut self, block: u32) {
        let page_size = self.geometry().page_size_bytes as usize;
        if self.geometry().oob_size_bytes > 0 {
            self.verified.forget(block, 0);
            self.storage.page_mut(block, 0)[page_size] = 0x00;
        }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.config.geometry
    }

    pub fn set_realtime(&mut self, on: bool) {
        self.realtime = on;
    }

    pub fn realtime(&self) -> bool {
        self.realtime
    }

    pub fn stats(&self) -> ChipStats {
        self.stats
    }

    pub fn busy_until_ns(&self) -> u64 {
        self.busy_until_ns
    }

    pub fn block_meta(&self, block: u32) -> BlockMeta {
        self.storage.meta(block)
    }

    /// Heap the chip's stored pages take (see `Storage::heap_bytes`).
    /// True when the chip's storage vanished under it (its image file was removed).
    pub fn storage_gone(&self) -> bool {
        self.storage.gone()
    }

    /// The label kept beside the chip's pages (see `Storage::label`).
    pub fn label(&self) -> Vec<u8> {
        self.storage.label()
    }

    pub fn set_label(&mut self, bytes: &[u8]) -> Result<(), FlashError> {
        self.storage.set_label(bytes)
    }

    pub fn storage_heap_bytes(&self) -> usize {
        self.storage.heap_bytes()
    }

    /// Erase count at which this block fails.
    pub fn block_limit(&self, block: u32) -> u32 {
        self.block_limits[block as usize]
    }

    /// The bytes the cells hold, without ECC or timing.
    pub fn raw_page(&self, block: u32, page: u32) -> Vec<u8> {
        self.storage.page(block, page).to_vec()
    }

    pub fn flush(&mut self) -> Result<(), FlashError> {
        self.storage.flush()
    }

    /// Adds `bits` raw bit errors to one codeword of a page until its block is next erased.
    /// Codewords `0..page_size/codeword_bytes` cover the data; the last one covers the OOB.
    pub fn inject_bit_errors(&mut self, block: u32, page: u32, codeword: u32, bits: u32) {
        let n = self.config.codewords_per_page() as usize;
        let per = self
            .stuck_errors
            .entry((block, page))
            .or_insert_with(|| vec![0; n]);
        let slot = (codeword as usize).min(n - 1);
        per[slot] += bits;
    }

    /// Moves the chip's clock: the operation starts when both the caller and the chip are
    /// ready, and the chip stays busy for `cost_ns`. It also spends `cost_pj`: time and
    /// energy are charged together, so every operation that takes time (torn ones too)
    /// costs energy, whichever executor or striped view issued it.
    fn occupy(&mut self, issue_ns: u64, cost_ns: u64, cost_pj: u64) -> (u64, u64) {
        let start = issue_ns.max(self.busy_until_ns);
        let end = start + cost_ns;
        self.busy_until_ns = end;
        self.stats.busy_ns += cost_ns;
        self.stats.energy_pj += cost_pj;
        if self.realtime && cost_ns > 0 {
            std::thread::sleep(Duration::from_nanos(cost_ns));
        }
        (start, end)
    }

    fn refused<T>(&self, issue_ns: u64, err: FlashError) -> Timed<T> {
        Timed {
            result: Err(err),
            start_ns: issue_ns,
            end_ns: issue_ns,
        }
    }

    fn check_usable_block(&self, addr: BlockAddr) -> Result<BlockMeta, FlashError> {
        self.geometry().check_block(addr)?;
        let meta = self.storage.meta(addr.block);
        if meta.is_bad() {
            return Err(FlashError::BadBlock(addr));
        }
        Ok(meta)
    }

    /// Runs one batched command. Both executors call this, in per-chip order.
    pub fn execute(&mut self, cmd: Command, issue_ns: u64, verdict: Verdict) -> Completion {
        if verdict == Verdict::Refuse {
            return Completion {
                result: Err(FlashError::PowerLost),
                start_ns: issue_ns,
                end_ns: issue_ns,
            };
        }
        let g = *self.geometry();
        let (result, start_ns, end_ns) = match cmd {
            Command::Read { addr } => {
                // The buffers are made from the stored bytes (not zeroed, then filled).
                if let Err(e) = self.check_readable(addr) {
                    let t = self.refused::<()>(issue_ns, e);
                    return Completion {
                        result: t.result.map(|()| Reply::Done),
                        start_ns: t.start_ns,
                        end_ns: t.end_ns,
                    };
                }
                let raw = self.storage.page(addr.block, addr.page);
                let (d, o) = raw.split_at(g.page_size_bytes as usize);
                let (mut data, mut oob) = (d.to_vec(), o.to_vec());
                let t = self.finish_read(addr, &mut data, &mut oob, issue_ns);
                (
                    t.result.map(|ecc| Reply::Read { data, oob, ecc }),
                    t.start_ns,
                    t.end_ns,
                )
            }
            Command::ReadOob { addr } => {
                let mut oob = vec![0; g.oob_size_bytes as usize];
                let t = self.read_oob(addr, &mut oob, issue_ns);
                (
                    t.result.map(|ecc| Reply::ReadOob { oob, ecc }),
                    t.start_ns,
                    t.end_ns,
                )
            }
            Command::Program { addr, data, oob } => {
                let t = self.program_page(addr, &data, &oob, issue_ns, verdict);
                (t.result.map(|()| Reply::Done), t.start_ns, t.end_ns)
            }
            Command::ProgramSpare { addr, oob } => {
                let t = self.program_spare(addr, &oob, issue_ns, verdict);
                (t.result.map(|()| Reply::Done), t.start_ns, t.end_ns)
            }
            Command::Erase { addr } => {
                let t = self.erase_block(addr, issue_ns, verdict);
                (t.result.map(|()| Reply::Done), t.start_ns, t.end_ns)
            }
        };
        Completion {
            result,
            start_ns,
            end_ns,
        }
    }

    /// Reads a page's data and OOB. On an uncorrectable error the buffers still receive the
    /// damaged bytes, as MTD returns them with -EBADMSG.
    pub fn read_page(
        &mut self,
        addr: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
        issue_ns: u64,
    ) -> Timed<EccReport> {
        let g = *self.geometry();
        if let Err(e) = self
            .check_buffers(data.len(), oob.len(), true)
            .and_then(|()| self.check_readable(addr))
        {
            return self.refused(issue_ns, e);
        }
        let raw = self.storage.page(addr.block, addr.page);
        let (d, o) = raw.split_at(g.page_size_bytes as usize);
        data.copy_from_slice(d);
        oob.copy_from_slice(o);
        self.finish_read(addr, data, oob, issue_ns)
    }

    /// A full read's address is on the chip, in a usable block.
    fn check_readable(&self, addr: PageAddr) -> Result<(), FlashError> {
        self.check_usable_page(addr).map(|_| ())
    }

    /// The page is on the chip and its block is good: the block's record.
    fn check_usable_page(&self, addr: PageAddr) -> Result<BlockMeta, FlashError> {
        self.geometry()
            .check_page(addr)
            .and_then(|()| self.check_usable_block(addr.block_addr()))
    }

    /// The rest of a full read, its stored bytes in the buffers: time, counters, ECC.
    fn finish_read(
        &mut self,
        addr: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
        issue_ns: u64,
    ) -> Timed<EccReport> {
        let g = *self.geometry();
        let bytes = g.raw_page_bytes();
        let (start_ns, end_ns) = self.occupy(
            issue_ns,
            self.config.timing.read_cost_ns(bytes),
            self.config.energy.read_cost_pj(bytes),
        );
        self.stats.page_reads += 1;
        self.stats.bytes_read += bytes as u64;
        let result = self.check_ecc(addr, Some(data), oob);
        Timed {
            result,
            start_ns,
            end_ns,
        }
    }

    /// Reads only a page's OOB (YAFFS scans tags this way).
    pub fn read_oob(&mut self, addr: PageAddr, oob: &mut [u8], issue_ns: u64) -> Timed<EccReport> {
        let g = *self.geometry();
        if let Err(e) = self.check_buffers(0, oob.len(), false) {
            return self.refused(issue_ns, e);
        }
        if let Err(e) = self.check_usable_page(addr) {
            return self.refused(issue_ns, e);
        }
        let raw = self.storage.page(addr.block, addr.page);
        oob.copy_from_slice(&raw[g.page_size_bytes as usize..]);
        let bytes = g.oob_size_bytes as usize;
        let (start_ns, end_ns) = self.occupy(
            issue_ns,
            self.config.timing.read_cost_ns(bytes),
            self.config.energy.read_cost_pj(bytes),
        );
        self.stats.oob_reads += 1;
        self.stats.bytes_read += bytes as u64;
        let result = self.check_ecc(addr, None, oob);
        Timed {
            result,
            start_ns,
            end_ns,
        }
    }

    fn check_buffers(
        &self,
        data_len: usize,
        oob_len: usize,
        with_data: bool,
    ) -> Result<(), FlashError> {
        let g = self.geometry();
        if with_data && data_len != g.page_size_bytes as usize {
            return Err(FlashError::BufferSize {
                got: data_len,
                want: g.page_size_bytes as usize,
            });
        }
        if oob_len != g.oob_size_bytes as usize {
            return Err(FlashError::BufferSize {
                got: oob_len,
                want: g.oob_size_bytes as usize,
            });
        }
        Ok(())
    }

    /// ECC on a read, given the stored bytes in the buffers: checks each data codeword
    /// against its stored check bytes (full reads only), draws raw bit errors for each
    /// codeword read, corrects what ECC can and damages the returned bytes of codewords it
    /// cannot. A codeword that fails its stored check is returned as stored.
    fn check_ecc(
        &mut self,
        addr: PageAddr,
        data: Option<&mut [u8]>,
        oob: &mut [u8],
    ) -> Result<EccReport, FlashError> {
        let meta = self.storage.meta(addr.block);
        // Controllers recognise a cleanly erased page and skip ECC on it.
        if addr.page >= meta.write_ptr && meta.flags & FLAG_ERASE_TORN == 0 {
            return Ok(EccReport::default());
        }
        let ecc = self.config.ecc;
        // Damage stored in the cells, found before the read adds its own random errors.
        let failed = match &data {
            Some(_) if self.verified.contains(addr.block, addr.page) => Vec::new(),
            Some(d) => {
                let failed = ecc.failed_codewords(self.geometry(), d, oob);
                if failed.is_empty() {
                    self.verified.insert(addr.block, addr.page);
                }
                failed
            }
            None => Vec::new(),
        };
        let rber = ecc.rber(meta.erase_count, self.config.wear.endurance_cycles);
        let stuck = self.stuck_errors.get(&(addr.block, addr.page)).cloned();
        let n_data = self.config.codewords_per_page() as usize - 1;
        let mut max_corrected = 0;
        let mut uncorrectable = 0;
        // Data codewords share one size, so one distribution (its exp computed once).
        let mut dist: Option<(usize, Poisson)> = None;
        let mut visit = |rng: &mut Xoshiro256PlusPlus, index: usize, bytes: &mut [u8]| {
            let extra = stuck.as_ref().map_or(0, |s| s[index]);
            let d = match dist {
                Some((len, d)) if len == bytes.len() => d,
                _ => {
                    let d = ecc.errors_per_codeword(rber, bytes.len() as u32 * 8);
                    dist = Some((bytes.len(), d));
                    d
                }
            };
            let errors = d.sample(rng) + extra;
            if failed.contains(&index) {
                // Already beyond correction; the draw above keeps the random stream the
                // same whatever is stored.
                uncorrectable += 1;
            } else if errors > ecc.correctable_bits {
                uncorrectable += 1;
                for _ in 0..errors {
                    let bit = rng.gen_range(0..bytes.len() * 8);
                    bytes[bit / 8] ^= 1 << (bit % 8);
                }
            } else {
                max_corrected = max_corrected.max(errors);
            }
        };
        if let Some(data) = data {
            for (i, cw) in data.chunks_mut(ecc.codeword_bytes as usize).enumerate() {
                visit(&mut self.rng, i, cw);
            }
        }
        if !oob.is_empty() {
            visit(&mut self.rng, n_data, oob);
        }
        if uncorrectable > 0 {
            self.stats.uncorrectable_reads += 1;
            return Err(FlashError::Uncorrectable {
                addr,
                codewords: uncorrectable,
            });
        }
        if max_corrected > 0 {
            self.stats.corrected_reads += 1;
        }
        Ok(EccReport {
            max_corrected_bits: max_corrected,
            scrub: max_corrected >= ecc.scrub_threshold_bits,
        })
    }

    /// Programs one page. NAND rules: the block is good, fully erased up to here, and pages
    /// go in order; each page is programmed once per erase.
    pub fn program_page(
        &mut self,
        addr: PageAddr,
        data: &[u8],
        oob: &[u8],
        issue_ns: u64,
        verdict: Verdict,
    ) -> Timed<()> {
        if verdict == Verdict::Refuse {
            return self.refused(issue_ns, FlashError::PowerLost);
        }
        let g = *self.geometry();
        if let Err(e) = self.check_buffers(data.len(), oob.len(), true) {
            return self.refused(issue_ns, e);
        }
        let mut meta = match self.check_usable_page(addr) {
            Ok(m) => m,
            Err(e) => return self.refused(issue_ns, e),
        };
        if meta.flags & FLAG_ERASE_TORN != 0 || addr.page < meta.write_ptr {
            return self.refused(issue_ns, FlashError::NotErased(addr));
        }
        if addr.page > meta.write_ptr {
            return self.refused(
                issue_ns,
                FlashError::OutOfOrder {
                    addr,
                    next: meta.write_ptr,
                },
            );
        }
        let bytes = g.raw_page_bytes();
        let (start_ns, end_ns) = self.occupy(
            issue_ns,
            self.config.timing.program_cost_ns(bytes),
            self.config.energy.program_cost_pj(bytes),
        );
        self.stats.programs += 1;
        self.stats.bytes_written += bytes as u64;
        meta.write_ptr = addr.page + 1;
        self.storage.set_meta(addr.block, meta);
        // The ECC engine fills the OOB's ECC area; a torn program was writing these bytes.
        let mut stored = std::mem::take(&mut self.program_oob);
        stored.clear();
        stored.extend_from_slice(oob);
        self.config.ecc.store_check_bytes(&g, data, &mut stored);
        let oob = stored.as_slice();
        self.verified.forget(addr.block, addr.page);
        let result = if let Verdict::Tear { seed } = verdict {
            let raw = self.storage.page_mut(addr.block, addr.page);
            tear_program(raw, data, oob, seed);
            Err(FlashError::PowerLost)
        } else if meta.erase_count >= self.block_limits[addr.block as usize] {
            self.stats.program_failures += 1;
            let seed = mix(
                self.config.seed,
                u64::from(addr.block),
                u64::from(addr.page),
            );
            let raw = self.storage.page_mut(addr.block, addr.page);
            tear_program(raw, data, oob, seed);
            Err(FlashError::ProgramFailed(addr))
        } else {
            self.storage.write_page(addr.block, addr.page, data, oob);
            // The check bytes were just computed from these data: the page is clean by its
            // stored check until the chip next writes to it, so its first read skips it.
            self.verified.insert(addr.block, addr.page);
            Ok(())
        };
        self.program_oob = stored;
        Timed {
            result,
            start_ns,
            end_ns,
        }
    }

    /// Programs more bits of a programmed page's spare area: each 0 bit of `oob` is
    /// programmed, each 1 bit left as it is (a program only moves bits from 1 to 0), as a
    /// partial page program does. The ECC engine is not involved (it covers the data
    /// area), so the page's data and check bytes stay as they were. A chip allows
    /// [`DeviceConfig::spare_programs`] programs of a spare area per erase.
    pub fn program_spare(
        &mut self,
        addr: PageAddr,
        oob: &[u8],
        issue_ns: u64,
        verdict: Verdict,
    ) -> Timed<()> {
        if verdict == Verdict::Refuse {
            return self.refused(issue_ns, FlashError::PowerLost);
        }
        let g = *self.geometry();
        if let Err(e) = self.check_buffers(0, oob.len(), false) {
            return self.refused(issue_ns, e);
        }
        let meta = match self.check_usable_page(addr) {
            Ok(m) => m,
            Err(e) => return self.refused(issue_ns, e),
        };
        if meta.flags & FLAG_ERASE_TORN != 0 || addr.page >= meta.write_ptr {
            return self.refused(issue_ns, FlashError::SpareOfErasedPage(addr));
        }
        let done = self
            .spare_programs
            .get(&(addr.block, addr.page))
            .copied()
            .unwrap_or(0);
        let limit = self.config.spare_programs();
        if 1 + done >= limit {
            return self.refused(
                issue_ns,
                FlashError::PartialProgramLimit {
                    addr,
                    times: 1 + done,
                },
            );
        }
        let bytes = oob.len();
        let (start_ns, end_ns) = self.occupy(
            issue_ns,
            self.config.timing.program_cost_ns(bytes),
            self.config.energy.program_cost_pj(bytes),
        );
        self.stats.spare_programs += 1;
        self.stats.bytes_written += bytes as u64;
        self.spare_programs
            .insert((addr.block, addr.page), done + 1);
        let raw = self.storage.page_mut(addr.block, addr.page);
        let spare = &mut raw[g.page_size_bytes as usize..];
        let result = if let Verdict::Tear { seed } = verdict {
            // Cut part way: some of the bits to program made it.
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            for (stored, &want) in spare.iter_mut().zip(oob) {
                let cleared = rng.gen::<u8>();
                *stored &= want | cleared;
            }
            Err(FlashError::PowerLost)
        } else {
            for (stored, &want) in spare.iter_mut().zip(oob) {
                *stored &= want;
            }
            Ok(())
        };
        Timed {
            result,
            start_ns,
            end_ns,
        }
    }

    /// Erases a block: every page back to 0xFF, erase count up by one.
    pub fn erase_block(&mut self, addr: BlockAddr, issue_ns: u64, verdict: Verdict) -> Timed<()> {
        if verdict == Verdict::Refuse {
            return self.refused(issue_ns, FlashError::PowerLost);
        }
        let mut meta = match self.check_usable_block(addr) {
            Ok(m) => m,
            Err(e) => return self.refused(issue_ns, e),
        };
        let (start_ns, end_ns) = self.occupy(
            issue_ns,
            self.config.timing.erase_cost_ns(),
            self.config.energy.erase_cost_pj(),
        );
        self.stats.erases += 1;
        self.stuck_errors.retain(|&(b, _), _| b != addr.block);
        self.spare_programs.retain(|&(b, _), _| b != addr.block);
        let worn_out = meta.erase_count >= self.block_limits[addr.block as usize];
        meta.erase_count = meta.erase_count.saturating_add(1);
        let torn_seed = match verdict {
            Verdict::Tear { seed } => Some(seed),
            _ if worn_out => Some(mix(
                self.config.seed,
                u64::from(addr.block),
                u64::from(meta.erase_count),
            )),
            _ => None,
        };
        self.verified.forget_block(addr.block);
        let result = match torn_seed {
            Some(seed) => {
                self.tear_erase(addr.block, seed);
                meta.flags |= FLAG_ERASE_TORN;
                meta.write_ptr = self.geometry().pages_per_block;
                if worn_out && verdict == Verdict::Run {
                    self.stats.erase_failures += 1;
                    Err(FlashError::EraseFailed(addr))
                } else {
                    Err(FlashError::PowerLost)
                }
            }
            None => {
                self.storage.erase(addr.block);
                meta.flags &= !FLAG_ERASE_TORN;
                meta.write_ptr = 0;
                Ok(())
            }
        };
        self.storage.set_meta(addr.block, meta);
        Timed {
            result,
            start_ns,
            end_ns,
        }
    }

    /// Half-erased cells: each bit has moved part of the way toward 1. A page that was
    /// erased stays erased; a programmed page becomes a mix of its old bits and ones.
    fn tear_erase(&mut self, block: u32, seed: u64) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let progress: f64 = rng.gen_range(0.05..0.95);
        for page in 0..self.geometry().pages_per_block {
            let raw = self.storage.page_mut(block, page);
            for byte in raw.iter_mut() {
                if *byte != 0xFF {
                    *byte = if rng.gen::<f64>() < progress {
                        0xFF
                    } else {
                        *byte | rng.gen::<u8>()
                    };
                }
            }
        }
    }

    pub fn is_bad(&self, addr: BlockAddr) -> Result<bool, FlashError> {
        self.geometry().check_block(addr)?;
        Ok(self.storage.meta(addr.block).is_bad())
    }

    /// Retires a block: it is bad from now on, and the marker is written to its OOB.
    pub fn mark_bad(&mut self, addr: BlockAddr, verdict: Verdict) -> Result<(), FlashError> {
        self.geometry().check_block(addr)?;
        match verdict {
            Verdict::Refuse => Err(FlashError::PowerLost),
            // The marker never reached the chip.
            Verdict::Tear { .. } => Err(FlashError::PowerLost),
            Verdict::Run => {
                let mut meta = self.storage.meta(addr.block);
                meta.flags |= FLAG_GROWN_BAD;
                self.storage.set_meta(addr.block, meta);
                self.write_bad_marker(addr.block);
                Ok(())
            }
        }
    }
}

/// What an interrupted program leaves: some of the bytes, or all of them with some bits
/// still unprogrammed (reading as 1), or the data with only part of the OOB. Never the
/// complete page.
fn tear_program(raw: &mut [u8], data: &[u8], oob: &[u8], seed: u64) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let page_size = data.len();
    let len = raw.len();
    let intended = |i: usize| {
        if i < page_size {
            data[i]
        } else {
            oob[i - page_size]
        }
    };
    let modes = if oob.is_empty() { 2 } else { 3 };
    match rng.gen_range(0..modes) {
        0 => {
            // Cut part way through: a prefix made it.
            let k = rng.gen_range(0..len);
            for (i, byte) in raw.iter_mut().enumerate().take(k) {
                *byte = intended(i);
            }
        }
        1 => {
            // Every byte started, some bits did not finish.
            for (i, byte) in raw.iter_mut().enumerate() {
                *byte = intended(i);
            }
            for _ in 0..(len / 64).max(1) {
                let i = rng.gen_range(0..len);
                raw[i] |= rng.gen::<u8>() | 1;
            }
            // Make sure at least one programmed (0) bit stayed 1, so the page is torn.
            let i = rng.gen_range(0..len);
            raw[i] = 0xFF;
        }
        _ => {
            // Data done, OOB cut short.
            raw[..page_size].copy_from_slice(data);
            let k = rng.gen_range(0..oob.len());
            raw[page_size..page_size + k].copy_from_slice(&oob[..k]);
        }
    }
}
