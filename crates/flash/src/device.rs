//! A flash device: p chips behind one interface, a caller clock, and the power rail.
//!
//! Every flash operation anything in nandkit performs goes through the [`Flash`] trait.

use std::path::{Path, PathBuf};

use crate::backend::{file, ram::RamStorage, BlockMeta, Storage};
use crate::chip::{Chip, Timed};
use crate::command::{Command, Completion};
use crate::config::DeviceConfig;
use crate::ecc::EccReport;
use crate::error::FlashError;
use crate::executor::{Executor, ExecutorKind, Job};
use crate::geometry::{BlockAddr, Geometry, PageAddr};
use crate::host_cost::HostCost;
use crate::power::{PowerControl, PowerCut, Verdict};
use crate::stats::DeviceStats;

/// The interface every flash user (file system, tools, benchmarks) talks to.
///
/// Single operations are synchronous: the caller's clock moves to the operation's end.
/// [`Flash::submit`] issues a batch at once; operations on different chips overlap, those on
/// one chip queue, and the caller's clock moves to the end of the last one.
/// A block erased, then `data` programmed into it from page 0 in one batch (what
/// [`Flash::change_block`] does where nothing makes it atomic).
pub fn erase_and_program<F: Flash + ?Sized>(
    dev: &mut F,
    addr: BlockAddr,
    data: &[u8],
) -> Result<(), FlashError> {
    dev.erase_block(addr)?;
    let g = dev.geometry();
    let oob = vec![0xFF; g.oob_size_bytes as usize];
    let batch = data
        .chunks(g.page_size_bytes as usize)
        .enumerate()
        .map(|(i, d)| Command::Program {
            addr: PageAddr {
                chip: addr.chip,
                block: addr.block,
                page: i as u32,
            },
            data: d.to_vec(),
            oob: oob.clone(),
        })
        .collect();
    dev.submit(batch)
        .into_iter()
        .try_for_each(|c| c.result.map(|_| ()))
}

pub trait Flash: Send {
    fn geometry(&self) -> Geometry;
    /// Reads a page's data and OOB (buffers of exactly the page and OOB sizes).
    fn read_page(
        &mut self,
        addr: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccReport, FlashError>;
    /// Reads only a page's OOB.
    fn read_oob(&mut self, addr: PageAddr, oob: &mut [u8]) -> Result<EccReport, FlashError>;
    /// Programs an erased page; pages of a block must go in order.
    fn program_page(&mut self, addr: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), FlashError>;
    /// Programs the 0 bits of `oob` into a programmed page's spare area (a partial program,
    /// within the chip's NOP: [`crate::DeviceConfig::spare_programs`]).
    fn program_spare(&mut self, addr: PageAddr, oob: &[u8]) -> Result<(), FlashError>;
    fn erase_block(&mut self, addr: BlockAddr) -> Result<(), FlashError>;
    /// Replaces a block's contents with `data` (whole pages from page 0). Over UBI this is
    /// Linux's atomic LEB change: after a power cut the block holds either its old or its
    /// new contents. On a bare chip it is an erase and programs, which a cut can leave half
    /// done.
    fn change_block(&mut self, addr: BlockAddr, data: &[u8]) -> Result<(), FlashError> {
        erase_and_program(self, addr, data)
    }
    fn is_bad(&mut self, addr: BlockAddr) -> Result<bool, FlashError>;
    fn mark_bad(&mut self, addr: BlockAddr) -> Result<(), FlashError>;
    /// Erases done on this block since manufacture.
    fn erase_count(&mut self, addr: BlockAddr) -> Result<u32, FlashError>;
    /// Runs a batch; completions come back in batch order.
    fn submit(&mut self, batch: Vec<Command>) -> Vec<Completion>;
    /// The caller's simulated clock, nanoseconds since the device was opened.
    fn now_ns(&self) -> u64;
    /// Lets simulated time pass with nothing issued (think time, idle periods).
    fn advance_clock_ns(&mut self, ns: u64);
    /// Puts the caller's clock at `ns`, earlier or later than it is: a dispatcher issuing a
    /// request at its arrival while earlier requests still occupy chips (requests in
    /// flight). Every chip keeps its own timeline (`busy_until`), so an operation never
    /// starts on a chip before what was queued there ends; only chips left idle serve the
    /// new request at once.
    fn set_clock_ns(&mut self, ns: u64);
    /// Makes everything done so far durable in the backend (a file image: msync).
    fn sync(&mut self) -> Result<(), FlashError>;
    /// Most programs of one block a power cut can find in flight at once: one per chip a
    /// block is striped over (a row of the block), so a torn page may have its row's other
    /// pages complete after it. A file system's scan tells a tear from damage by it.
    fn programs_in_flight(&self) -> u32 {
        1
    }
    /// The label kept beside chip `chip`'s pages (see [`crate::backend::Storage::label`]);
    /// empty where the device keeps none. A chip that failed whole answers
    /// [`FlashError::ChipFailed`].
    fn chip_label(&mut self, chip: u32) -> Result<Vec<u8>, FlashError> {
        let _ = chip;
        Ok(Vec::new())
    }
    /// Replaces chip `chip`'s label, durably, after everything programmed before it.
    fn set_chip_label(&mut self, chip: u32, label: &[u8]) -> Result<(), FlashError> {
        let _ = (chip, label);
        Ok(())
    }
}

/// How a device runs, chosen when it is opened (not stored in the image).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceOptions {
    pub executor: ExecutorKind,
    /// Sleep for each operation's simulated latency.
    pub realtime: bool,
    /// The host software's own cost, charged in simulated time (0 by default).
    pub host: HostCost,
}

/// Per-block facts, for tools (`nandkit dump`, `info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub erase_count: u32,
    /// Next page that can be programmed; `pages_per_block` when full or half-erased.
    pub write_ptr: u32,
    pub factory_bad: bool,
    pub grown_bad: bool,
    /// An erase of this block was interrupted; it must be erased before reuse.
    pub erase_torn: bool,
}

impl From<BlockMeta> for BlockInfo {
    fn from(m: BlockMeta) -> Self {
        use crate::backend::{FLAG_ERASE_TORN, FLAG_FACTORY_BAD, FLAG_GROWN_BAD};
        Self {
            erase_count: m.erase_count,
            write_ptr: m.write_ptr,
            factory_bad: m.flags & FLAG_FACTORY_BAD != 0,
            grown_bad: m.flags & FLAG_GROWN_BAD != 0,
            erase_torn: m.flags & FLAG_ERASE_TORN != 0,
        }
    }
}

/// p physical chips, each addressed by its own `chip` number.
pub struct FlashDevice {
    config: DeviceConfig,
    exec: Executor,
    power: PowerControl,
    now_ns: u64,
    image: Option<PathBuf>,
    host: HostCost,
    /// Host nanoseconds charged so far (all kinds).
    host_charged_ns: u64,
    /// Per chip, why it has failed whole (every operation on it then errors at once).
    failed: Vec<Option<String>>,
    /// A whole-chip failure armed at a state-changing operation: (chip, operation index).
    chip_fault: Option<(u32, u64)>,
}

impl FlashDevice {
    /// A fresh device in RAM: erased, with factory bad blocks drawn from the seed.
    pub fn ram(config: DeviceConfig) -> Result<Self, FlashError> {
        Self::ram_with(config, DeviceOptions::default())
    }

    pub fn ram_with(config: DeviceConfig, options: DeviceOptions) -> Result<Self, FlashError> {
        config.validate()?;
        let storages = (0..config.geometry.chips)
            .map(|_| Box::new(RamStorage::new(&config.geometry)) as Box<dyn Storage>)
            .collect();
        Ok(Self::assemble(config, storages, true, options, None))
    }

    /// Creates a new erased file image (and sidecar) and opens it.
    pub fn create_image(
        path: &Path,
        config: DeviceConfig,
        overwrite: bool,
        options: DeviceOptions,
    ) -> Result<Self, FlashError> {
        let storages = file::create(path, &config, overwrite)?
            .into_iter()
            .map(|s| Box::new(s) as Box<dyn Storage>)
            .collect();
        let mut dev = Self::assemble(config, storages, true, options, Some(path.to_path_buf()));
        dev.sync()?;
        Ok(dev)
    }

    /// Opens an existing file image exactly as it was left, torn pages and all.
    pub fn open_image(path: &Path, options: DeviceOptions) -> Result<Self, FlashError> {
        let (config, storages, failed) = file::open(path)?;
        let storages = storages
            .into_iter()
            .map(|s| Box::new(s) as Box<dyn Storage>)
            .collect();
        let mut dev = Self::assemble(config, storages, false, options, Some(path.to_path_buf()));
        for (chip, why) in failed {
            dev.failed[chip as usize] = Some(why);
        }
        Ok(dev)
    }

    fn assemble(
        config: DeviceConfig,
        storages: Vec<Box<dyn Storage>>,
        fresh: bool,
        options: DeviceOptions,
        image: Option<PathBuf>,
    ) -> Self {
        let chips = storages
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let mut chip = Chip::new(i as u32, &config, s, fresh);
                chip.set_realtime(options.realtime);
                chip
            })
            .collect();
        Self {
            power: PowerControl::new(config.seed ^ 0x0050_4f57_4552),
            failed: vec![None; config.geometry.chips as usize],
            chip_fault: None,
            exec: Executor::new(options.executor, chips),
            config,
            now_ns: 0,
            image,
            host: options.host,
            host_charged_ns: 0,
        }
    }

    /// Who runs the batches from now on: a mount that starts a worker thread per chip
    /// (MA) switches a device to the threaded executor. Nothing about the chips changes.
    pub fn set_executor(&mut self, kind: ExecutorKind) {
        if self.exec.kind() == kind {
            return;
        }
        let placeholder = Executor::new(ExecutorKind::Simulated, Vec::new());
        let chips = std::mem::replace(&mut self.exec, placeholder).into_chips();
        self.exec = Executor::new(kind, chips);
    }

    /// Fails chip `chip` whole from now on: every operation on it errors with
    /// [`FlashError::ChipFailed`] (fault injection).
    pub fn fail_chip(&mut self, chip: u32, why: &str) {
        if let Some(slot) = self.failed.get_mut(chip as usize) {
            slot.get_or_insert_with(|| why.to_string());
        }
    }

    /// Arms a whole-chip failure: chip `chip` fails at the `ops`-th state-changing operation
    /// from now (counted as power cuts count them), which errors, as does everything after.
    pub fn arm_chip_failure(&mut self, chip: u32, ops: u64) {
        self.chip_fault = Some((chip, self.power.ops_done() + ops));
    }

    /// The chips that have failed whole, and why.
    pub fn failed_chips(&mut self) -> Vec<(u32, String)> {
        self.notice_gone_files();
        self.failed
            .iter()
            .enumerate()
            .filter_map(|(i, w)| w.clone().map(|w| (i as u32, w)))
            .collect()
    }

    /// Puts a new, erased chip in place of chip `chip` (its own image file recreated, for a
    /// file image with chip files): a replacement for a failed chip, for a rebuild.
    pub fn replace_chip(&mut self, chip: u32) -> Result<(), FlashError> {
        self.config.geometry.check_block(BlockAddr::new(chip, 0))?;
        let storage: Box<dyn Storage> = match &self.image {
            Some(path) => Box::new(file::fresh_chip(path, chip)?),
            None => Box::new(RamStorage::new(&self.config.geometry)),
        };
        let mut fresh = Chip::new(chip, &self.config, storage, true);
        let kind = self.exec.kind();
        let placeholder = Executor::new(ExecutorKind::Simulated, Vec::new());
        let mut chips = std::mem::replace(&mut self.exec, placeholder).into_chips();
        fresh.set_realtime(chips[chip as usize].realtime());
        chips[chip as usize] = fresh;
        self.exec = Executor::new(kind, chips);
        self.failed[chip as usize] = None;
        if self.chip_fault.is_some_and(|(c, _)| c == chip) {
            self.chip_fault = None;
        }
        Ok(())
    }

    /// A chip whose own image file was removed under the device has failed.
    fn notice_gone_files(&mut self) {
        if !self.config.chip_files {
            return;
        }
        for chip in 0..self.exec.chip_count() {
            if self.failed[chip].is_none() && self.exec.with_chip(chip, |c| c.storage_gone()) {
                let path = self.image.as_deref().map_or_else(
                    || format!("chip {chip}"),
                    |p| file::chip_path(p, chip as u32).display().to_string(),
                );
                self.failed[chip] = Some(format!("its image file {path} was removed"));
            }
        }
    }

    /// Whether an operation on `chip` must fail at once (the chip has failed whole). For a
    /// state-changing operation this also fires an armed chip failure that is due.
    fn chip_refuses(&mut self, chip: u32, changes_state: bool) -> bool {
        if changes_state {
            if let Some((c, at)) = self.chip_fault {
                if self.power.ops_done() >= at && !self.power.is_lost() {
                    self.fail_chip(c, "failed by fault injection");
                    self.chip_fault = None;
                }
            }
        }
        self.failed.get(chip as usize).is_some_and(|w| w.is_some())
    }

    /// Host nanoseconds charged in simulated time since the device was opened.
    pub fn host_charged_ns(&self) -> u64 {
        self.host_charged_ns
    }

    fn charge(&mut self, ns: u64) {
        self.now_ns += ns;
        self.host_charged_ns += ns;
    }

    /// One application request begins: its host cost moves the caller's clock.
    pub fn charge_request(&mut self) {
        self.charge(self.host.request_ns);
    }

    /// A mount starts a worker thread per chip (an array only): its host cost.
    pub fn charge_mount(&mut self) {
        let chips = u64::from(self.config.geometry.chips);
        if chips > 1 {
            self.charge(self.host.device_ns * chips);
        }
    }

    /// The cost of handing one operation to a chip's worker: only an array has a
    /// dispatcher.
    fn handoff_ns(&self) -> u64 {
        if self.config.geometry.chips > 1 {
            self.host.handoff_ns
        } else {
            0
        }
    }

    /// The host's cost of one page operation outside a batch: its page of work and its
    /// hand-off.
    fn charge_single(&mut self, pages: u64) {
        self.charge(self.host.page_ns * pages + self.handoff_ns());
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// The image file behind this device, if it has one.
    pub fn image_path(&self) -> Option<&Path> {
        self.image.as_deref()
    }

    /// Arms a power cut; see [`PowerCut`].
    pub fn arm_power_cut(&mut self, cut: PowerCut) {
        self.power.arm(cut);
    }

    pub fn disarm_power_cut(&mut self) {
        self.power.disarm();
    }

    pub fn power_lost(&self) -> bool {
        self.power.is_lost()
    }

    /// Programs, erases and bad-block marks issued since the device was opened: the numbers
    /// a power cut can be armed at.
    pub fn state_ops(&self) -> u64 {
        self.power.ops_done()
    }

    /// Power comes back, as after reopening: the device accepts operations again, with every
    /// torn page and half-erased block exactly as the cut left it.
    pub fn power_cycle(&mut self) -> Result<(), FlashError> {
        self.power.restore();
        if self.image.is_some() {
            self.sync()?;
        }
        Ok(())
    }

    pub fn stats(&mut self) -> DeviceStats {
        let n = self.exec.chip_count();
        DeviceStats {
            chips: (0..n)
                .map(|i| self.exec.with_chip(i, |c| c.stats()))
                .collect(),
        }
    }

    /// Heap the device's stored pages take: a RAM device allocates a block's buffer on its
    /// first program, so a bench measuring a file system's heap subtracts this.
    pub fn storage_heap_bytes(&mut self) -> usize {
        let n = self.exec.chip_count();
        (0..n)
            .map(|i| self.exec.with_chip(i, |c| c.storage_heap_bytes()))
            .sum()
    }

    pub fn block_info(&mut self, addr: BlockAddr) -> Result<BlockInfo, FlashError> {
        self.config.geometry.check_block(addr)?;
        Ok(self
            .exec
            .with_chip(addr.chip as usize, |c| c.block_meta(addr.block))
            .into())
    }

    /// Erase count at which a block will fail (drawn from the seed).
    pub fn block_endurance(&mut self, addr: BlockAddr) -> Result<u32, FlashError> {
        self.config.geometry.check_block(addr)?;
        Ok(self
            .exec
            .with_chip(addr.chip as usize, |c| c.block_limit(addr.block)))
    }

    /// Raw bytes (data then OOB) of a page as the cells hold them: no ECC, no time, no
    /// power check. For dumps and tests.
    pub fn raw_page(&mut self, addr: PageAddr) -> Result<Vec<u8>, FlashError> {
        self.config.geometry.check_page(addr)?;
        Ok(self
            .exec
            .with_chip(addr.chip as usize, |c| c.raw_page(addr.block, addr.page)))
    }

    /// Adds persistent raw bit errors to one ECC codeword of a page (until its block is
    /// erased). Codeword `page_size / codeword_bytes` is the OOB's.
    pub fn inject_bit_errors(
        &mut self,
        addr: PageAddr,
        codeword: u32,
        bits: u32,
    ) -> Result<(), FlashError> {
        self.config.geometry.check_page(addr)?;
        self.exec.with_chip(addr.chip as usize, |c| {
            c.inject_bit_errors(addr.block, addr.page, codeword, bits)
        });
        Ok(())
    }

    /// Simulated time at which a chip finishes what it was given.
    pub fn chip_busy_until_ns(&mut self, chip: u32) -> u64 {
        self.exec.with_chip(chip as usize, |c| c.busy_until_ns())
    }

    /// Runs one operation, in the caller's thread, and moves the caller's clock to its end.
    fn single<T>(
        &mut self,
        chip: u32,
        op: impl FnOnce(&mut Chip, u64) -> Timed<T>,
    ) -> Result<T, FlashError> {
        if chip >= self.config.geometry.chips {
            return Err(FlashError::OutOfRange {
                what: format!("chip {chip}"),
            });
        }
        let now = self.now_ns;
        let t = self.exec.with_chip(chip as usize, |c| op(c, now));
        self.now_ns = self.now_ns.max(t.end_ns);
        t.result
    }

    /// [`FlashError::ChipFailed`] for an operation on a failed chip (none once power is
    /// gone: the power loss is what the caller hears of).
    fn refuse_failed(&mut self, chip: u32, changes_state: bool) -> Result<(), FlashError> {
        self.notice_gone_files();
        if !self.power.is_lost() && self.chip_refuses(chip, changes_state) {
            return Err(FlashError::ChipFailed(chip));
        }
        Ok(())
    }

    fn read_verdict(&self) -> Result<(), FlashError> {
        match self.power.check_read() {
            Verdict::Refuse => Err(FlashError::PowerLost),
            _ => Ok(()),
        }
    }
}

impl Flash for FlashDevice {
    fn geometry(&self) -> Geometry {
        self.config.geometry
    }

    fn read_page(
        &mut self,
        addr: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccReport, FlashError> {
        self.read_verdict()?;
        self.refuse_failed(addr.chip, false)?;
        self.charge_single(1);
        self.single(addr.chip, |c, now| c.read_page(addr, data, oob, now))
    }

    fn read_oob(&mut self, addr: PageAddr, oob: &mut [u8]) -> Result<EccReport, FlashError> {
        self.read_verdict()?;
        self.refuse_failed(addr.chip, false)?;
        self.charge_single(0);
        self.single(addr.chip, |c, now| c.read_oob(addr, oob, now))
    }

    fn program_page(&mut self, addr: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), FlashError> {
        self.refuse_failed(addr.chip, true)?;
        let verdict = self.power.next_op();
        self.charge_single(1);
        self.single(addr.chip, |c, now| {
            c.program_page(addr, data, oob, now, verdict)
        })
    }

    fn program_spare(&mut self, addr: PageAddr, oob: &[u8]) -> Result<(), FlashError> {
        self.refuse_failed(addr.chip, true)?;
        let verdict = self.power.next_op();
        self.charge_single(0);
        self.single(addr.chip, |c, now| c.program_spare(addr, oob, now, verdict))
    }

    fn erase_block(&mut self, addr: BlockAddr) -> Result<(), FlashError> {
        self.refuse_failed(addr.chip, true)?;
        let verdict = self.power.next_op();
        self.charge_single(0);
        self.single(addr.chip, |c, now| c.erase_block(addr, now, verdict))
    }

    fn is_bad(&mut self, addr: BlockAddr) -> Result<bool, FlashError> {
        self.read_verdict()?;
        self.config.geometry.check_block(addr)?;
        self.refuse_failed(addr.chip, false)?;
        self.exec.with_chip(addr.chip as usize, |c| c.is_bad(addr))
    }

    fn mark_bad(&mut self, addr: BlockAddr) -> Result<(), FlashError> {
        self.config.geometry.check_block(addr)?;
        self.refuse_failed(addr.chip, true)?;
        let verdict = self.power.next_op();
        self.exec
            .with_chip(addr.chip as usize, |c| c.mark_bad(addr, verdict))
    }

    fn erase_count(&mut self, addr: BlockAddr) -> Result<u32, FlashError> {
        Ok(self.block_info(addr)?.erase_count)
    }

    fn submit(&mut self, batch: Vec<Command>) -> Vec<Completion> {
        let chips = self.config.geometry.chips;
        // The host prepares the batch's pages first (serial), then the dispatcher hands the
        // operations to the chips' workers one after another (an array only).
        let pages = batch
            .iter()
            .filter(|c| matches!(c, Command::Read { .. } | Command::Program { .. }))
            .count() as u64;
        self.charge(self.host.page_ns * pages);
        let handoff = self.handoff_ns();
        let issue_ns = self.now_ns;
        self.notice_gone_files();
        let mut refused = Vec::new();
        let mut jobs = Vec::with_capacity(batch.len());
        for (index, cmd) in batch.into_iter().enumerate() {
            // An operation on a chip that does not exist, or has failed whole, never
            // reaches a worker.
            if cmd.chip() >= chips {
                refused.push((
                    index,
                    FlashError::OutOfRange {
                        what: "chip number".into(),
                    },
                ));
                continue;
            }
            if !self.power.is_lost() && self.chip_refuses(cmd.chip(), cmd.changes_state()) {
                refused.push((index, FlashError::ChipFailed(cmd.chip())));
                continue;
            }
            let verdict = if cmd.changes_state() {
                self.power.next_op()
            } else {
                self.power.check_read()
            };
            jobs.push(Job {
                index,
                cmd,
                verdict,
                issue_ns: issue_ns + handoff * (jobs.len() as u64 + 1),
            });
        }
        self.charge(handoff * jobs.len() as u64);
        if refused.is_empty() {
            // The jobs are numbered densely already: completions come back in batch order.
            let done = self.exec.run(jobs);
            for c in &done {
                self.now_ns = self.now_ns.max(c.end_ns);
            }
            return done;
        }
        // Re-number the jobs densely for the executor, then put refused slots back.
        let slots: Vec<usize> = jobs.iter().map(|j| j.index).collect();
        for (dense, job) in jobs.iter_mut().enumerate() {
            job.index = dense;
        }
        let done = self.exec.run(jobs);
        let mut out: Vec<Option<Completion>> =
            (0..slots.len() + refused.len()).map(|_| None).collect();
        for (completion, slot) in done.into_iter().zip(slots) {
            self.now_ns = self.now_ns.max(completion.end_ns);
            out[slot] = Some(completion);
        }
        for (slot, err) in refused {
            out[slot] = Some(Completion {
                result: Err(err),
                start_ns: issue_ns,
                end_ns: issue_ns,
            });
        }
        out.into_iter().map(|c| c.expect("slot filled")).collect()
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn advance_clock_ns(&mut self, ns: u64) {
        self.now_ns += ns;
    }

    fn set_clock_ns(&mut self, ns: u64) {
        self.now_ns = ns;
    }

    fn sync(&mut self) -> Result<(), FlashError> {
        let path = self.image.clone();
        for i in 0..self.exec.chip_count() {
            self.exec
                .with_chip(i, |c| c.flush())
                .map_err(|e| match (e, &path) {
                    (FlashError::Io { source, .. }, Some(p)) => FlashError::Io {
                        path: p.display().to_string(),
                        source,
                    },
                    (e, _) => e,
                })?;
        }
        Ok(())
    }

    fn chip_label(&mut self, chip: u32) -> Result<Vec<u8>, FlashError> {
        self.label_access(chip)?;
        Ok(self.exec.with_chip(chip as usize, |c| c.label()))
    }

    fn set_chip_label(&mut self, chip: u32, label: &[u8]) -> Result<(), FlashError> {
        self.label_access(chip)?;
        self.exec
            .with_chip(chip as usize, |c| c.set_label(label))
            .map_err(|e| match (e, &self.image) {
                (FlashError::Io { source, .. }, Some(p)) => FlashError::Io {
                    path: file::chip_path(p, chip).display().to_string(),
                    source,
                },
                (e, _) => e,
            })
    }
}

impl FlashDevice {
    /// Whether chip `chip`'s label can be reached: not after a power loss (as no operation
    /// can), nor on a chip that failed whole.
    fn label_access(&mut self, chip: u32) -> Result<(), FlashError> {
        self.config.geometry.check_block(BlockAddr::new(chip, 0))?;
        if self.power.is_lost() {
            return Err(FlashError::PowerLost);
        }
        self.notice_gone_files();
        if self.chip_refuses(chip, false) {
            return Err(FlashError::ChipFailed(chip));
        }
        Ok(())
    }
}

impl Drop for FlashDevice {
    fn drop(&mut self) {
        // Best effort: the maps are in the page cache anyway; this only pushes them to disk.
        let _ = self.sync();
    }
}
