//! MA's striped view: p chips presented as one device whose erase block is block b of every
//! chip, with virtual page k of a virtual block on chip k mod p at page k / p (the paper's
//! round-robin mapping). Writing p consecutive virtual pages in one batch programs all p
//! chips at once; erasing a virtual block erases p physical blocks in parallel.
//!
//! With a UBI per chip ([`crate::ubi`], the MA paper's design) block b is LEB b of every
//! chip's UBI, wherever each chip keeps it; without, it is physical block b of every chip
//! (one bad block then takes the whole stripe out).
//!
//! With parity ([`parity`]), block b is still LEB b of every chip, but page r of it is row r
//! of every chip's LEB: P-1 data pieces and their XOR, so any one chip can fail. Which
//! chips are trusted to hold their pieces is in every chip's membership record
//! ([`membership`]); a chip that is not a complete member counts as failed.

pub mod membership;
pub mod parity;
pub mod rebuild;

use crate::command::{Command, Completion, Reply};
use crate::device::Flash;
use crate::ecc::EccReport;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, Geometry, PageAddr};
use crate::ubi::{AttachOptions, Ubi, UbiParams, UbiReport};
use membership::Membership;
use parity::{Parity, ParityEvent, ParityReport, Volumes};

pub struct StripedFlash<F: Flash> {
    inner: F,
    chips: u32,
    ubi: Option<Ubi>,
    /// Parity across the chips (over UBI only).
    parity: Option<Parity>,
    /// With parity: which chips are trusted, as their records say.
    members: Option<Membership>,
    /// Attached read-only: membership records are read, never written.
    read_only: bool,
}

/// The chips' UBI volumes, as the parity layer drives them.
struct UbiVolumes<'a, F: Flash> {
    ubi: &'a mut Ubi,
    dev: &'a mut F,
}

impl<F: Flash> Volumes for UbiVolumes<'_, F> {
    fn run(&mut self, batch: Vec<Command>) -> Vec<Completion> {
        self.ubi.submit(self.dev, batch)
    }

    fn is_dead(&self, chip: u32) -> bool {
        self.ubi.is_dead(chip)
    }

    fn now_ns(&self) -> u64 {
        self.dev.now_ns()
    }
}

impl<F: Flash> StripedFlash<F> {
    /// Stripes over every chip of `inner`, block b on block b of every chip (no UBI).
    pub fn new(inner: F) -> Self {
        let chips = inner.geometry().chips;
        Self {
            inner,
            chips,
            ubi: None,
            parity: None,
            members: None,
            read_only: false,
        }
    }

    /// Formats a UBI on every chip (every LEB unmapped) and stripes over their LEBs.
    pub fn format_ubi(mut inner: F, params: UbiParams) -> Result<Self, FlashError> {
        let ubi = Ubi::format(&mut inner, params)?;
        Self::with_ubi(inner, ubi, false, true)
    }

    /// Attaches the UBI of every chip (the scan of their headers) with Linux's default
    /// attach options.
    pub fn attach_ubi(inner: F, read_only: bool) -> Result<Self, FlashError> {
        Self::attach_ubi_with(inner, read_only, AttachOptions::default())
    }

    /// Attaches the UBI of every chip with `options`. The chips must carry the file
    /// system's volume (see [`crate::ubi::FS_VOLUME`]); an image of other volumes only is
    /// refused with the list of what it holds (read it with [`Ubi::attach`]).
    pub fn attach_ubi_with(
        mut inner: F,
        read_only: bool,
        options: AttachOptions,
    ) -> Result<Self, FlashError> {
        let ubi = Ubi::attach(&mut inner, read_only, options)?;
        if ubi.fs_volume().is_none() {
            let list = ubi
                .volumes()
                .iter()
                .map(|v| {
                    format!(
                        "{} {:?} ({}, {} LEBs)",
                        v.id,
                        v.name,
                        v.type_name(),
                        v.reserved_pebs
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            return Err(FlashError::Ubi(format!(
                "no UBI volume named {:?} here to mount (volumes: {list}); `nandkit info` \
                 lists them and `nandkit ubi export` writes the image out",
                crate::ubi::FS_VOLUME
            )));
        }
        Self::with_ubi(inner, ubi, read_only, false)
    }

    /// The array over its chips' UBI. With parity, a new format makes every chip a member;
    /// an attach trusts only the chips their records say are complete members.
    fn with_ubi(inner: F, ubi: Ubi, read_only: bool, fresh: bool) -> Result<Self, FlashError> {
        let parity = ubi
            .parity()
            .then(|| Parity::new(inner.geometry().chips, ubi.geometry()));
        let mut s = Self {
            ubi: Some(ubi),
            parity,
            read_only,
            ..Self::new(inner)
        };
        if s.parity.is_some() {
            let ubi = s.ubi.as_ref().expect("set above");
            if fresh {
                let mut m = Membership::new(ubi.image_seq(), s.chips);
                let all: Vec<u32> = (0..s.chips).collect();
                m.record(&mut s.inner, &all, &[])?;
                s.members = Some(m);
            } else {
                s.assess_members()?;
            }
        }
        Ok(s)
    }

    /// Reads every live chip's membership record and takes the chips that are not complete
    /// members out of service (they count as failed); then, if writable, records the
    /// members as they now are.
    fn assess_members(&mut self) -> Result<(), FlashError> {
        let (Some(ubi), Some(parity)) = (self.ubi.as_mut(), self.parity.as_mut()) else {
            return Ok(());
        };
        let mut labels = Vec::with_capacity(self.chips as usize);
        for chip in 0..self.chips {
            labels.push(if ubi.is_dead(chip) {
                None
            } else {
                match self.inner.chip_label(chip) {
                    Ok(l) => Some(l),
                    Err(FlashError::ChipFailed(_)) => {
                        ubi.set_dead(chip, true);
                        None
                    }
                    Err(e) => return Err(e),
                }
            });
        }
        let m = Membership::assess(ubi.image_seq(), &labels);
        for (&chip, why) in m.excluded() {
            ubi.set_dead(chip, true);
            parity.note_dead(
                chip,
                format!("it is not a complete member of the array: {why}"),
            );
        }
        for chip in ubi.dead_chips() {
            parity.note_dead(chip, "it does not answer");
        }
        self.members = Some(m);
        self.settle_members()
    }

    /// Records the live chips as the members if they are not (a chip left the array, or a
    /// change was cut part way), before any stripe is written without the chip that left.
    /// Nothing on a read-only array.
    fn settle_members(&mut self) -> Result<(), FlashError> {
        let (Some(m), Some(ubi), false) =
            (self.members.as_mut(), self.ubi.as_ref(), self.read_only)
        else {
            return Ok(());
        };
        let live: Vec<u32> = (0..self.chips).filter(|&c| !ubi.is_dead(c)).collect();
        if m.needs_record(&live) {
            m.record(&mut self.inner, &live, &[])?;
        }
        Ok(())
    }

    /// Present chips that the array does not trust (not complete members), and why.
    pub fn excluded_chips(&self) -> Vec<(u32, String)> {
        self.members.as_ref().map_or_else(Vec::new, |m| {
            m.excluded().iter().map(|(c, w)| (*c, w.clone())).collect()
        })
    }

    /// The generation of the membership records (0: the chips carry none).
    pub fn membership_generation(&self) -> Option<u64> {
        self.members.as_ref().map(Membership::generation)
    }

    /// The array keeps parity across its chips.
    pub fn has_parity(&self) -> bool {
        self.parity.is_some()
    }

    /// The parity layer's counters and dead chips, if the array keeps parity.
    pub fn parity_report(&self) -> Option<ParityReport> {
        let dead = self.ubi.as_ref().map(Ubi::dead_chips).unwrap_or_default();
        self.parity.as_ref().map(|p| p.report(dead))
    }

    /// Chip failures not yet taken (each is reported once), for a daemon to log.
    pub fn take_parity_events(&mut self) -> Vec<ParityEvent> {
        self.parity
            .as_mut()
            .map(Parity::take_events)
            .unwrap_or_default()
    }

    /// A batch through the layout above the chips' UBI: parity, or UBI's own striping.
    fn submit_ubi(&mut self, batch: Vec<Command>) -> Option<Vec<Completion>> {
        let ubi = self.ubi.as_mut()?;
        let Some(parity) = self.parity.as_mut() else {
            return Some(ubi.submit(&mut self.inner, batch));
        };
        let mut vols = UbiVolumes {
            ubi,
            dev: &mut self.inner,
        };
        let mut out = parity.submit(batch, &mut vols);
        let mut member_died = false;
        for chip in ubi.dead_chips() {
            parity.note_dead(chip, "its operations fail");
            member_died |= self.members.as_ref().is_some_and(|m| m.is_member(chip));
        }
        // A member failed: the records say so before this batch is answered, so an old copy
        // of the chip is never trusted again. Without them the stripes are not acknowledged.
        if member_died {
            if let Err(FlashError::PowerLost) = self.settle_members() {
                for c in &mut out {
                    c.result = Err(FlashError::PowerLost);
                }
            }
        }
        Some(out)
    }

    /// Attaches UBI if the chips carry it, else stripes physical blocks.
    pub fn open(mut inner: F, read_only: bool) -> Result<Self, FlashError> {
        // A chip's membership record says so without a read: only a parity array over UBI
        // keeps them, and the probe of headers can miss it when chip 0 is gone and the
        // others were rebuilt (a rebuilt chip's first PEBs may be blank).
        if Self::any_membership_record(&mut inner) || crate::ubi::probe(&mut inner)? {
            Self::attach_ubi(inner, read_only)
        } else {
            Ok(Self::new(inner))
        }
    }

    /// Whether any chip carries a membership record (see [`membership`]).
    fn any_membership_record(inner: &mut F) -> bool {
        (0..inner.geometry().chips).any(|chip| {
            inner
                .chip_label(chip)
                .is_ok_and(|l| membership::Record::decode(&l).is_some())
        })
    }

    /// After a power cut or to mount again: an array with UBI attaches its chips afresh
    /// (the map in RAM may be ahead of the flash); one without is returned as it is.
    pub fn reattach(self, read_only: bool) -> Result<Self, FlashError> {
        if let Some(ubi) = &self.ubi {
            let options = ubi.attach_options();
            Self::attach_ubi_with(self.inner, read_only, options)
        } else {
            Ok(self)
        }
    }

    /// Changes the wear-levelling threshold of the chips' UBI, if there is one.
    pub fn set_ubi_wl_threshold(&mut self, threshold: u32) {
        if let Some(ubi) = self.ubi.as_mut() {
            ubi.set_wl_threshold(threshold);
        }
    }

    /// The chips' UBI, if the array has one.
    pub fn ubi(&self) -> Option<&Ubi> {
        self.ubi.as_ref()
    }

    pub fn ubi_report(&self) -> Option<UbiReport> {
        self.ubi.as_ref().map(Ubi::report)
    }

    /// fsck of the UBI layer (nothing to check without one).
    pub fn ubi_check(&mut self) -> Result<Vec<String>, FlashError> {
        match &self.ubi {
            Some(u) => u.check(&mut self.inner),
            None => Ok(Vec::new()),
        }
    }

    /// One command through UBI: its completion.
    fn via_ubi(&mut self, cmd: Command) -> Option<Result<Reply, FlashError>> {
        let c = self.submit_ubi(vec![cmd])?.pop();
        Some(c.map_or_else(
            || Err(FlashError::Ubi("no completion".into())),
            |c| c.result,
        ))
    }

    pub fn inner(&self) -> &F {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut F {
        &mut self.inner
    }

    pub fn into_inner(self) -> F {
        self.inner
    }

    /// The physical page behind a virtual one.
    pub fn physical(&self, addr: PageAddr) -> Result<PageAddr, FlashError> {
        self.geometry().check_page(addr)?;
        Ok(PageAddr {
            chip: addr.page % self.chips,
            block: addr.block,
            page: addr.page / self.chips,
        })
    }

    fn physical_blocks(&self, addr: BlockAddr) -> Result<Vec<BlockAddr>, FlashError> {
        self.geometry().check_block(addr)?;
        Ok((0..self.chips)
            .map(|chip| BlockAddr::new(chip, addr.block))
            .collect())
    }

    /// Erases block b of every chip in one batch; the first error wins.
    fn erase_all_chips(&mut self, addr: BlockAddr) -> Result<(), FlashError> {
        let batch = self
            .physical_blocks(addr)?
            .into_iter()
            .map(|addr| Command::Erase { addr })
            .collect();
        for c in self.inner.submit(batch) {
            c.result?;
        }
        Ok(())
    }
}

/// The array's own controls (power cuts, counters, clock) stay reachable through the view:
/// only the addressing changes.
impl<F: Flash> std::ops::Deref for StripedFlash<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.inner
    }
}

impl<F: Flash> std::ops::DerefMut for StripedFlash<F> {
    fn deref_mut(&mut self) -> &mut F {
        &mut self.inner
    }
}

impl<F: Flash> Flash for StripedFlash<F> {
    fn programs_in_flight(&self) -> u32 {
        self.inner.geometry().chips
    }

    fn geometry(&self) -> Geometry {
        match (&self.parity, &self.ubi) {
            (Some(p), _) => p.geometry(),
            (None, Some(u)) => u.geometry(),
            (None, None) => self.inner.geometry().striped(),
        }
    }

    fn read_page(
        &mut self,
        addr: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccReport, FlashError> {
        if let Some(r) = self.via_ubi(Command::Read { addr }) {
            return match r? {
                Reply::Read {
                    data: d,
                    oob: o,
                    ecc,
                } => {
                    check_len(data, &d)?;
                    check_len(oob, &o)?;
                    data.copy_from_slice(&d);
                    oob.copy_from_slice(&o);
                    Ok(ecc)
                }
                _ => Err(FlashError::Ubi("a read answered without data".into())),
            };
        }
        let p = self.physical(addr)?;
        self.inner.read_page(p, data, oob)
    }

    fn read_oob(&mut self, addr: PageAddr, oob: &mut [u8]) -> Result<EccReport, FlashError> {
        if let Some(r) = self.via_ubi(Command::ReadOob { addr }) {
            return match r? {
                Reply::ReadOob { oob: o, ecc } => {
                    check_len(oob, &o)?;
                    oob.copy_from_slice(&o);
                    Ok(ecc)
                }
                _ => Err(FlashError::Ubi("an OOB read answered without data".into())),
            };
        }
        let p = self.physical(addr)?;
        self.inner.read_oob(p, oob)
    }

    fn program_page(&mut self, addr: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), FlashError> {
        if self.ubi.is_some() {
            let cmd = Command::Program {
                addr,
                data: data.to_vec(),
                oob: oob.to_vec(),
            };
            return self.via_ubi(cmd).expect("UBI present").map(|_| ());
        }
        let p = self.physical(addr)?;
        self.inner.program_page(p, data, oob)
    }

    fn program_spare(&mut self, addr: PageAddr, oob: &[u8]) -> Result<(), FlashError> {
        if self.ubi.is_some() {
            let cmd = Command::ProgramSpare {
                addr,
                oob: oob.to_vec(),
            };
            return self.via_ubi(cmd).expect("UBI present").map(|_| ());
        }
        let p = self.physical(addr)?;
        self.inner.program_spare(p, oob)
    }

    fn change_block(&mut self, addr: BlockAddr, data: &[u8]) -> Result<(), FlashError> {
        let g = self.geometry();
        match (&mut self.ubi, &self.parity) {
            (Some(ubi), None) => {
                g.check_block(addr)?;
                ubi.leb_change(&mut self.inner, addr.block, data)
            }
            _ => crate::device::erase_and_program(self, addr, data),
        }
    }

    fn erase_block(&mut self, addr: BlockAddr) -> Result<(), FlashError> {
        if let Some(r) = self.via_ubi(Command::Erase { addr }) {
            return r.map(|_| ());
        }
        self.erase_all_chips(addr)
    }

    fn is_bad(&mut self, addr: BlockAddr) -> Result<bool, FlashError> {
        if self.ubi.is_some() {
            // A UBI volume has no bad LEBs: bad PEBs are UBI's to replace.
            self.geometry().check_block(addr)?;
            return Ok(false);
        }
        for b in self.physical_blocks(addr)? {
            if self.inner.is_bad(b)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn mark_bad(&mut self, addr: BlockAddr) -> Result<(), FlashError> {
        if self.ubi.is_some() {
            // UBI already retired the PEB whose failure the file system saw (or will at its
            // next failure); a LEB itself is never bad.
            return self.geometry().check_block(addr);
        }
        for b in self.physical_blocks(addr)? {
            if !self.inner.is_bad(b)? {
                self.inner.mark_bad(b)?;
            }
        }
        Ok(())
    }

    fn erase_count(&mut self, addr: BlockAddr) -> Result<u32, FlashError> {
        if let Some(u) = &self.ubi {
            self.geometry().check_block(addr)?;
            return Ok(u.erase_count(addr.block));
        }
        let mut most = 0;
        for b in self.physical_blocks(addr)? {
            most = most.max(self.inner.erase_count(b)?);
        }
        Ok(most)
    }

    fn submit(&mut self, batch: Vec<Command>) -> Vec<Completion> {
        if self.ubi.is_some() {
            return self.submit_ubi(batch).expect("UBI present");
        }
        // Each virtual command becomes one physical command (an erase becomes p); `owner`
        // maps every physical completion back to its virtual slot.
        let mut physical = Vec::with_capacity(batch.len());
        let mut owner = Vec::with_capacity(batch.len());
        let mut early: Vec<Option<FlashError>> = Vec::with_capacity(batch.len());
        for (slot, cmd) in batch.into_iter().enumerate() {
            // Pages map to one physical command each (pushed straight away: a read is the
            // hot path of a mount serving 4 KiB reads); an erase to one per chip.
            let pushed = match cmd {
                Command::Read { addr } => self.physical(addr).map(|addr| {
                    physical.push(Command::Read { addr });
                    owner.push(slot);
                }),
                Command::ReadOob { addr } => self.physical(addr).map(|addr| {
                    physical.push(Command::ReadOob { addr });
                    owner.push(slot);
                }),
                Command::Program { addr, data, oob } => self.physical(addr).map(|addr| {
                    physical.push(Command::Program { addr, data, oob });
                    owner.push(slot);
                }),
                Command::ProgramSpare { addr, oob } => self.physical(addr).map(|addr| {
                    physical.push(Command::ProgramSpare { addr, oob });
                    owner.push(slot);
                }),
                Command::Erase { addr } => self.physical_blocks(addr).map(|blocks| {
                    for addr in blocks {
                        physical.push(Command::Erase { addr });
                        owner.push(slot);
                    }
                }),
            };
            early.push(pushed.err());
        }
        // Every command one physical command, none refused: completions come back in order.
        if physical.len() == early.len() && early.iter().all(Option::is_none) {
            return self.inner.submit(physical);
        }
        let issue_ns = self.inner.now_ns();
        let mut merged: Vec<Option<Completion>> = early
            .into_iter()
            .map(|e| {
                e.map(|err| Completion {
                    result: Err(err),
                    start_ns: issue_ns,
                    end_ns: issue_ns,
                })
            })
            .collect();
        for (c, slot) in self.inner.submit(physical).into_iter().zip(owner) {
            merged[slot] = Some(match merged[slot].take() {
                None => c,
                // A striped erase: done when the slowest chip is done; any failure fails it.
                Some(prev) => Completion {
                    result: match (prev.result, c.result) {
                        (Err(e), _) | (_, Err(e)) => Err(e),
                        (Ok(_), Ok(_)) => Ok(Reply::Done),
                    },
                    start_ns: prev.start_ns.min(c.start_ns),
                    end_ns: prev.end_ns.max(c.end_ns),
                },
            });
        }
        merged
            .into_iter()
            .map(|c| c.expect("every slot answered"))
            .collect()
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn advance_clock_ns(&mut self, ns: u64) {
        self.inner.advance_clock_ns(ns);
    }

    fn set_clock_ns(&mut self, ns: u64) {
        self.inner.set_clock_ns(ns);
    }

    fn sync(&mut self) -> Result<(), FlashError> {
        self.inner.sync()
    }
}

fn check_len(buf: &[u8], got: &[u8]) -> Result<(), FlashError> {
    if buf.len() == got.len() {
        Ok(())
    } else {
        Err(FlashError::BufferSize {
            got: buf.len(),
            want: got.len(),
        })
    }
}
