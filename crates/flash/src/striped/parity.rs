//! Parity across the chips of an array: lose any one chip, lose no data.
//!
//! Layout. Over a UBI per chip (each chip's LEBs addressed on their own), virtual block b is
//! LEB b of every chip, and virtual page r of it is row r: page r of LEB b on each of the
//! P chips. A row is a stripe: P-1 data pieces and one parity piece, the XOR of the data
//! pieces. The parity piece is on chip (b + r) mod P, so it rotates from stripe to stripe
//! (RAID-5's left-symmetric rotation) and no chip takes every parity program; data piece i
//! is on the i-th chip after it. The file system sees pages of P-1 chip pages.
//!
//! Whole stripes only. Because the file system's page *is* the stripe, a stripe is always
//! written whole, in one batch, and a flush of a short tail (an fsync of 4 KiB) pads: the
//! file system's page is partly empty, as on any flash with pages larger than the write.
//! There is no read-modify-write of parity and no write hole for acknowledged data. The
//! cost, measured by `nandkit bench parity`, is one program in P, plus the padding of
//! small synchronous writes (P programs for the smallest one).
//!
//! Every piece's OOB carries the file system's OOB (its tags) unchanged, so any surviving
//! piece names the page; the parity covers the data only.
//!
//! Order and power cuts. A stripe's pieces are programmed data first, parity last, in
//! batch order, so a cut leaves a prefix programmed: a stripe whose parity piece reads
//! back is complete, one whose parity piece is missing or torn was cut (never
//! acknowledged) or was written while its parity chip was dead. Reads use that:
//! - a read of a page reads its P-1 data pieces; when one is unreadable (ECC, a dead
//!   chip: a chip not yet rebuilt counts as dead, see [`super::membership`]) or erased
//!   while the others are not (a piece a cut never wrote), the parity piece is read and the missing piece rebuilt from it; the read then asks the
//!   file system to scrub the block (rewrite it with fresh parity) unless the chip is dead;
//! - a read of the OOB reads the parity piece's, falling back to the first and last data
//!   pieces when it is missing: both erased is an erased page, first written and last not
//!   is a torn one (uncorrectable).
//!
//! A cut can leave chips at different write positions inside a LEB (a torn stripe's later
//! pieces never written). The next stripe there would be an out-of-order program on those
//! chips; it is preceded by filler pages (zeros, tags that parse as nothing) that close the
//! gap, as a file system closes a torn page.
//!
//! Degraded mode. A chip that fails whole (every operation errors, or its image file is
//! gone) is noted once (an event the caller logs) and left alone: its pieces are rebuilt
//! from the others on every read, and stripes go on being written on the other P-1
//! chips (a stripe whose parity chip is dead has no parity until rebuilt). A second dead
//! chip is the end: its pieces cannot be rebuilt, and writes fail.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::command::{Command, Completion, Reply};
use crate::ecc::EccReport;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, Geometry, PageAddr};

/// What happened to the array that its user should hear of once (a daemon logs these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParityEvent {
    /// A chip failed whole; the array runs degraded from now on.
    ChipFailed { chip: u32, why: String },
}

/// Counters and state, for `info`, fsck and benches.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ParityReport {
    pub chips: u32,
    /// Chips that failed whole: their pieces are rebuilt from parity on every read.
    pub dead_chips: Vec<u32>,
    /// Stripes programmed, and parity pages among their programs.
    pub stripes_written: u64,
    pub parity_pages: u64,
    /// Stripes written without one of their pieces (its chip dead).
    pub degraded_stripes: u64,
    /// Pieces rebuilt from parity on reads.
    pub pieces_rebuilt: u64,
    /// Filler pages programmed to close a gap a power cut left.
    pub fillers: u64,
}

/// A piece as read.
#[derive(Clone, Debug)]
pub(crate) enum Piece {
    Good {
        data: Vec<u8>,
        oob: Vec<u8>,
        ecc: EccReport,
    },
    /// Never programmed since its erase (or its LEB unmapped).
    Erased,
    /// Unreadable: beyond ECC, or its chip failed.
    Lost,
}

impl Piece {
    fn from_read(result: Result<Reply, FlashError>) -> Result<Piece, FlashError> {
        match result {
            Ok(Reply::Read { data, oob, ecc }) => Ok(classify(data, oob, ecc)),
            Ok(Reply::ReadOob { oob, ecc }) => Ok(classify(Vec::new(), oob, ecc)),
            Ok(Reply::Done) => Ok(Piece::Lost),
            Err(FlashError::PowerLost) => Err(FlashError::PowerLost),
            Err(_) => Ok(Piece::Lost),
        }
    }

    pub(crate) fn is_good(&self) -> bool {
        matches!(self, Piece::Good { .. })
    }
}

pub(crate) fn classify(data: Vec<u8>, oob: Vec<u8>, ecc: EccReport) -> Piece {
    if data.iter().all(|&b| b == 0xFF) && oob.iter().all(|&b| b == 0xFF) {
        Piece::Erased
    } else {
        Piece::Good { data, oob, ecc }
    }
}

/// XORs `src` into `acc`.
pub(crate) fn xor_into(acc: &mut [u8], src: &[u8]) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a ^= s;
    }
}

/// The parity layout of an array of `chips` chips whose volumes have geometry `vol`.
pub struct Parity {
    chips: u32,
    /// One chip's volume: LEBs as blocks, LEB pages as pages.
    vol: Geometry,
    events: Vec<ParityEvent>,
    /// Chips already reported failed (each is reported once).
    reported: BTreeSet<u32>,
    report: ParityReport,
}

/// What one virtual command became in the first batch.
enum Plan {
    /// Answered without flash (a bad address).
    Done(Result<Reply, FlashError>),
    /// A page read: the slots of its data pieces (`None` where the chip is dead) and of its
    /// parity piece (read at once when a data chip is known dead).
    Read {
        addr: PageAddr,
        data: Vec<Option<usize>>,
        parity: Option<usize>,
    },
    /// An OOB read: the parity piece's slot, or (parity chip dead) the first and last live
    /// data pieces' slots.
    ReadOob {
        addr: PageAddr,
        parity: Option<usize>,
        ends: Vec<(u32, usize)>,
    },
    /// A stripe's programs: each piece's chip and slot, and the page (kept to program a
    /// piece again after fillers).
    Program {
        addr: PageAddr,
        pieces: Vec<(u32, usize)>,
        skipped: u32,
        data: Vec<u8>,
        oob: Vec<u8>,
    },
    /// Spare programs or erases, one per live chip.
    Each {
        pieces: Vec<(u32, usize)>,
        skipped: u32,
    },
}

/// Time span and result of a virtual command built from several physical ones.
struct Span {
    start_ns: u64,
    end_ns: u64,
}

impl Span {
    fn new(now: u64) -> Self {
        Span {
            start_ns: u64::MAX,
            end_ns: now,
        }
    }

    fn add(&mut self, c: &Completion) {
        self.start_ns = self.start_ns.min(c.start_ns);
        self.end_ns = self.end_ns.max(c.end_ns);
    }

    fn finish(self, result: Result<Reply, FlashError>) -> Completion {
        Completion {
            result,
            start_ns: self.start_ns.min(self.end_ns),
            end_ns: self.end_ns,
        }
    }
}

/// The chips' volumes as the parity layer drives them.
pub(crate) trait Volumes {
    /// Runs a batch of per-chip commands (chip, LEB, LEB page).
    fn run(&mut self, batch: Vec<Command>) -> Vec<Completion>;
    fn is_dead(&self, chip: u32) -> bool;
    fn now_ns(&self) -> u64;
}

impl Parity {
    pub fn new(chips: u32, vol: Geometry) -> Self {
        Self {
            chips,
            vol,
            events: Vec::new(),
            reported: BTreeSet::new(),
            report: ParityReport {
                chips,
                ..ParityReport::default()
            },
        }
    }

    /// The device the file system sees: a page is a stripe's P-1 data pieces.
    pub fn geometry(&self) -> Geometry {
        Geometry {
            page_size_bytes: self.vol.page_size_bytes * (self.chips - 1),
            pages_per_block: self.vol.pages_per_block,
            blocks_per_chip: self.vol.blocks_per_chip,
            chips: 1,
            ..self.vol
        }
    }

    /// One chip's volume.
    pub fn volume(&self) -> Geometry {
        self.vol
    }

    pub fn chips(&self) -> u32 {
        self.chips
    }

    /// The chip holding the parity piece of stripe (block, row).
    pub fn parity_chip(&self, block: u32, row: u32) -> u32 {
        ((u64::from(block) + u64::from(row)) % u64::from(self.chips)) as u32
    }

    /// The chip holding data piece `i` of stripe (block, row).
    pub fn data_chip(&self, block: u32, row: u32, i: u32) -> u32 {
        (self.parity_chip(block, row) + 1 + i) % self.chips
    }

    /// Data pieces per stripe.
    pub fn data_pieces(&self) -> u32 {
        self.chips - 1
    }

    /// Takes the events not yet taken.
    pub fn take_events(&mut self) -> Vec<ParityEvent> {
        std::mem::take(&mut self.events)
    }

    pub fn report(&self, dead: Vec<u32>) -> ParityReport {
        ParityReport {
            dead_chips: dead,
            ..self.report.clone()
        }
    }

    /// Notes a chip found dead (at attach, or by an operation); each is reported once.
    pub fn note_dead(&mut self, chip: u32, why: impl Into<String>) {
        if self.reported.insert(chip) {
            self.events.push(ParityEvent::ChipFailed {
                chip,
                why: why.into(),
            });
        }
    }

    /// A chip rebuilt: a later failure of it is reported again.
    pub fn forget_dead(&mut self, chip: u32) {
        self.reported.remove(&chip);
    }

    /// Runs a batch of virtual commands: every piece of every command in one batch (so the
    /// chips overlap), then, per command and only where needed, the parity piece of a read
    /// that lost a piece, the data pieces' OOB of a stripe without parity, or fillers.
    pub(crate) fn submit(
        &mut self,
        batch: Vec<Command>,
        vols: &mut dyn Volumes,
    ) -> Vec<Completion> {
        let mut physical = Vec::new();
        let plans: Vec<Plan> = batch
            .into_iter()
            .map(|cmd| self.plan(cmd, &*vols, &mut physical))
            .collect();
        let now = vols.now_ns();
        let mut done: Vec<Option<Completion>> = if physical.is_empty() {
            Vec::new()
        } else {
            vols.run(physical).into_iter().map(Some).collect()
        };
        for c in done.iter().flatten() {
            if let Err(FlashError::ChipFailed(chip)) = c.result {
                self.note_dead(chip, "its operations fail");
            }
        }
        plans
            .into_iter()
            .map(|plan| self.answer(plan, &mut done, vols, now))
            .collect()
    }

    fn plan(&mut self, cmd: Command, vols: &dyn Volumes, phys: &mut Vec<Command>) -> Plan {
        let g = self.geometry();
        let mut push = |c: Command| {
            phys.push(c);
            phys.len() - 1
        };
        let check = match &cmd {
            Command::Erase { addr } => g.check_block(*addr),
            Command::Read { addr }
            | Command::ReadOob { addr }
            | Command::Program { addr, .. }
            | Command::ProgramSpare { addr, .. } => g.check_page(*addr),
        };
        if let Err(e) = check {
            return Plan::Done(Err(e));
        }
        match cmd {
            Command::Read { addr } => {
                let data: Vec<Option<usize>> = self
                    .data_chips(addr)
                    .map(|c| {
                        (!vols.is_dead(c)).then(|| {
                            push(Command::Read {
                                addr: piece(c, addr),
                            })
                        })
                    })
                    .collect();
                let q = self.parity_chip(addr.block, addr.page);
                let parity = (data.iter().any(Option::is_none) && !vols.is_dead(q)).then(|| {
                    push(Command::Read {
                        addr: piece(q, addr),
                    })
                });
                Plan::Read { addr, data, parity }
            }
            Command::ReadOob { addr } => {
                let q = self.parity_chip(addr.block, addr.page);
                if !vols.is_dead(q) {
                    let slot = push(Command::ReadOob {
                        addr: piece(q, addr),
                    });
                    return Plan::ReadOob {
                        addr,
                        parity: Some(slot),
                        ends: Vec::new(),
                    };
                }
                let ends = self
                    .live_ends(addr, vols)
                    .into_iter()
                    .map(|c| {
                        (
                            c,
                            push(Command::ReadOob {
                                addr: piece(c, addr),
                            }),
                        )
                    })
                    .collect();
                Plan::ReadOob {
                    addr,
                    parity: None,
                    ends,
                }
            }
            Command::Program { addr, data, oob } => {
                if data.len() != g.page_size_bytes as usize
                    || oob.len() != g.oob_size_bytes as usize
                {
                    let (got, want) = if data.len() != g.page_size_bytes as usize {
                        (data.len(), g.page_size_bytes as usize)
                    } else {
                        (oob.len(), g.oob_size_bytes as usize)
                    };
                    return Plan::Done(Err(FlashError::BufferSize { got, want }));
                }
                let mut pieces = Vec::with_capacity(self.chips as usize);
                let mut skipped = 0;
                for (chip, bytes) in self.stripe_pieces(addr, &data) {
                    if vols.is_dead(chip) {
                        skipped += 1;
                        continue;
                    }
                    let slot = push(Command::Program {
                        addr: piece(chip, addr),
                        data: bytes,
                        oob: oob.clone(),
                    });
                    pieces.push((chip, slot));
                }
                self.report.stripes_written += 1;
                if !vols.is_dead(self.parity_chip(addr.block, addr.page)) {
                    self.report.parity_pages += 1;
                }
                if skipped > 0 {
                    self.report.degraded_stripes += 1;
                }
                Plan::Program {
                    addr,
                    pieces,
                    skipped,
                    data,
                    oob,
                }
            }
            Command::ProgramSpare { addr, oob } => {
                let mut pieces = Vec::new();
                let mut skipped = 0;
                // Data pieces first, parity last: the order reads rely on.
                let q = self.parity_chip(addr.block, addr.page);
                let order: Vec<u32> = self.data_chips(addr).chain(std::iter::once(q)).collect();
                for chip in order {
                    if vols.is_dead(chip) {
                        skipped += 1;
                        continue;
                    }
                    let slot = push(Command::ProgramSpare {
                        addr: piece(chip, addr),
                        oob: oob.clone(),
                    });
                    pieces.push((chip, slot));
                }
                Plan::Each { pieces, skipped }
            }
            Command::Erase { addr } => {
                let mut pieces = Vec::new();
                let mut skipped = 0;
                for chip in 0..self.chips {
                    if vols.is_dead(chip) {
                        skipped += 1;
                        continue;
                    }
                    let slot = push(Command::Erase {
                        addr: BlockAddr::new(chip, addr.block),
                    });
                    pieces.push((chip, slot));
                }
                Plan::Each { pieces, skipped }
            }
        }
    }

    /// The chips of a stripe's data pieces, in order.
    fn data_chips(&self, addr: PageAddr) -> impl Iterator<Item = u32> + '_ {
        (0..self.data_pieces()).map(move |i| self.data_chip(addr.block, addr.page, i))
    }

    /// The first and last data pieces' chips among live ones (one chip if they coincide).
    fn live_ends(&self, addr: PageAddr, vols: &dyn Volumes) -> Vec<u32> {
        let alive: Vec<u32> = self
            .data_chips(addr)
            .filter(|&c| !vols.is_dead(c))
            .collect();
        let mut ends: Vec<u32> = [alive.first(), alive.last()]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        ends.dedup();
        ends
    }

    /// A stripe's pieces for a page's data: (chip, bytes), data pieces then parity.
    pub(crate) fn stripe_pieces(&self, addr: PageAddr, data: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let ps = self.vol.page_size_bytes as usize;
        let mut parity = vec![0u8; ps];
        let mut out = Vec::with_capacity(self.chips as usize);
        for (i, bytes) in data.chunks(ps).enumerate() {
            xor_into(&mut parity, bytes);
            out.push((
                self.data_chip(addr.block, addr.page, i as u32),
                bytes.to_vec(),
            ));
        }
        out.push((self.parity_chip(addr.block, addr.page), parity));
        out
    }

    fn answer(
        &mut self,
        plan: Plan,
        done: &mut [Option<Completion>],
        vols: &mut dyn Volumes,
        now: u64,
    ) -> Completion {
        let mut span = Span::new(now);
        let mut take = |slot: usize, span: &mut Span| -> Result<Reply, FlashError> {
            match done.get_mut(slot).and_then(Option::take) {
                Some(c) => {
                    span.add(&c);
                    c.result
                }
                None => Err(FlashError::Ubi("a piece was not answered".into())),
            }
        };
        let result = match plan {
            Plan::Done(r) => r,
            Plan::Read { addr, data, parity } => {
                let mut pieces = Vec::with_capacity(data.len());
                for slot in data {
                    pieces.push(match slot {
                        Some(s) => Piece::from_read(take(s, &mut span)),
                        None => Ok(Piece::Lost),
                    });
                }
                let parity = parity.map(|s| Piece::from_read(take(s, &mut span)));
                self.finish_read(addr, pieces, parity, vols, &mut span)
            }
            Plan::ReadOob { addr, parity, ends } => {
                let parity = parity.map(|s| Piece::from_read(take(s, &mut span)));
                let ends: Vec<_> = ends
                    .into_iter()
                    .map(|(_, s)| Piece::from_read(take(s, &mut span)))
                    .collect();
                self.finish_read_oob(addr, parity, ends, vols, &mut span)
            }
            Plan::Program {
                addr,
                pieces,
                skipped,
                data,
                oob,
            } => {
                let results: Vec<(u32, Result<Reply, FlashError>)> = pieces
                    .into_iter()
                    .map(|(chip, s)| (chip, take(s, &mut span)))
                    .collect();
                self.finish_program(addr, results, skipped, &data, &oob, vols, &mut span)
            }
            Plan::Each { pieces, skipped } => {
                let results: Vec<(u32, Result<Reply, FlashError>)> = pieces
                    .into_iter()
                    .map(|(chip, s)| (chip, take(s, &mut span)))
                    .collect();
                tolerate_one(results, skipped)
            }
        };
        span.finish(result)
    }

    /// Runs follow-up commands for one virtual command, adding their time to its span.
    fn follow(vols: &mut dyn Volumes, span: &mut Span, cmds: Vec<Command>) -> Vec<Completion> {
        let out = vols.run(cmds);
        for c in &out {
            span.add(c);
        }
        out
    }

    fn finish_read(
        &mut self,
        addr: PageAddr,
        pieces: Vec<Result<Piece, FlashError>>,
        parity: Option<Result<Piece, FlashError>>,
        vols: &mut dyn Volumes,
        span: &mut Span,
    ) -> Result<Reply, FlashError> {
        let mut pieces = pieces.into_iter().collect::<Result<Vec<Piece>, _>>()?;
        let parity = parity.transpose()?;
        let g = self.geometry();
        // Erased: every live data piece erased, and the parity piece too if it was read.
        let live_erased = pieces
            .iter()
            .enumerate()
            .filter(|(i, _)| !vols.is_dead(self.data_chip(addr.block, addr.page, *i as u32)))
            .all(|(_, p)| matches!(p, Piece::Erased));
        if live_erased && !matches!(parity, Some(Piece::Good { .. } | Piece::Lost)) {
            return Ok(erased_read(&g));
        }
        let missing: Vec<usize> = (0..pieces.len())
            .filter(|&i| !pieces[i].is_good())
            .collect();
        let mut scrub = false;
        if let [i] = missing[..] {
            let q = self.parity_chip(addr.block, addr.page);
            let parity = match parity {
                Some(p) => p,
                None if vols.is_dead(q) => Piece::Lost,
                None => {
                    let c = Self::follow(
                        vols,
                        span,
                        vec![Command::Read {
                            addr: piece(q, addr),
                        }],
                    );
                    Piece::from_read(c.into_iter().next().map_or(Ok(Reply::Done), |c| c.result))?
                }
            };
            let Piece::Good {
                data: mut rebuilt, ..
            } = parity
            else {
                return Err(uncorrectable(addr));
            };
            for p in &pieces {
                if let Piece::Good { data, .. } = p {
                    xor_into(&mut rebuilt, data);
                }
            }
            let oob = pieces
                .iter()
                .find_map(|p| match p {
                    Piece::Good { oob, .. } => Some(oob.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| vec![0xFF; g.oob_size_bytes as usize]);
            let chip = self.data_chip(addr.block, addr.page, i as u32);
            // A live chip's piece that had to be rebuilt: the block should be rewritten.
            scrub = !vols.is_dead(chip);
            self.report.pieces_rebuilt += 1;
            pieces[i] = Piece::Good {
                data: rebuilt,
                oob,
                ecc: EccReport::default(),
            };
        } else if !missing.is_empty() {
            return Err(uncorrectable(addr));
        }
        let mut data = Vec::with_capacity(g.page_size_bytes as usize);
        let mut first_oob = None;
        let mut ecc = EccReport::default();
        for p in pieces {
            let Piece::Good {
                data: d,
                oob,
                ecc: e,
            } = p
            else {
                return Err(uncorrectable(addr));
            };
            data.extend_from_slice(&d);
            first_oob.get_or_insert(oob);
            ecc.max_corrected_bits = ecc.max_corrected_bits.max(e.max_corrected_bits);
            ecc.scrub |= e.scrub;
        }
        ecc.scrub |= scrub;
        Ok(Reply::Read {
            data,
            oob: first_oob.unwrap_or_default(),
            ecc,
        })
    }

    fn finish_read_oob(
        &mut self,
        addr: PageAddr,
        parity: Option<Result<Piece, FlashError>>,
        ends: Vec<Result<Piece, FlashError>>,
        vols: &mut dyn Volumes,
        span: &mut Span,
    ) -> Result<Reply, FlashError> {
        let parity = parity.transpose()?;
        if let Some(Piece::Good { oob, ecc, .. }) = parity {
            return Ok(Reply::ReadOob { oob, ecc });
        }
        // No parity piece: the stripe is erased, was cut before its parity, or was
        // written while the parity chip was dead. Its first and last data pieces tell.
        let ends = if parity.is_some() {
            let chips = self.live_ends(addr, vols);
            let cmds = chips
                .iter()
                .map(|&c| Command::ReadOob {
                    addr: piece(c, addr),
                })
                .collect();
            Self::follow(vols, span, cmds)
                .into_iter()
                .map(|c| Piece::from_read(c.result))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            ends.into_iter().collect::<Result<Vec<_>, _>>()?
        };
        let parity_torn = matches!(parity, Some(Piece::Lost));
        let q_alive = !vols.is_dead(self.parity_chip(addr.block, addr.page));
        match (ends.first(), ends.last()) {
            (Some(Piece::Erased), Some(Piece::Erased)) if !parity_torn => Ok(Reply::ReadOob {
                oob: vec![0xFF; self.vol.oob_size_bytes as usize],
                ecc: EccReport::default(),
            }),
            (Some(Piece::Good { oob, ecc, .. }), Some(Piece::Good { .. })) => {
                Ok(Reply::ReadOob {
                    oob: oob.clone(),
                    ecc: EccReport {
                        // Whole data without parity: rewrite it where parity can be had.
                        scrub: ecc.scrub || q_alive,
                        ..*ecc
                    },
                })
            }
            _ => Err(uncorrectable(addr)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_program(
        &mut self,
        addr: PageAddr,
        mut results: Vec<(u32, Result<Reply, FlashError>)>,
        skipped: u32,
        data: &[u8],
        oob: &[u8],
        vols: &mut dyn Volumes,
        span: &mut Span,
    ) -> Result<Reply, FlashError> {
        // Pieces refused as out of order (a cut left this chip behind in the LEB): fillers
        // up to the row, then the piece again, per chip in one batch.
        let mut again = Vec::new();
        let mut redo_chips = Vec::new();
        // The pieces again only when one must be programmed again (rare: after a cut).
        let refused = results
            .iter()
            .any(|(_, r)| matches!(r, Err(FlashError::OutOfOrder { .. })));
        let stripe = if refused {
            self.stripe_pieces(addr, data)
        } else {
            Vec::new()
        };
        for (chip, r) in &results {
            if let Err(FlashError::OutOfOrder { addr: phys, next }) = r {
                let behind = phys.page.saturating_sub(*next);
                for row in addr.page.saturating_sub(behind)..addr.page {
                    again.push(self.filler(*chip, addr.block, row));
                    self.report.fillers += 1;
                }
                let bytes = stripe
                    .iter()
                    .find(|(c, _)| c == chip)
                    .map(|(_, b)| b.clone())
                    .unwrap_or_default();
                again.push(Command::Program {
                    addr: piece(*chip, addr),
                    data: bytes,
                    oob: oob.to_vec(),
                });
                redo_chips.push((*chip, again.len() - 1));
            }
        }
        if !again.is_empty() {
            let out = Self::follow(vols, span, again);
            let mut out: Vec<Option<Completion>> = out.into_iter().map(Some).collect();
            for (chip, slot) in redo_chips {
                let r = out[slot]
                    .take()
                    .map_or(Err(FlashError::Ubi("no completion".into())), |c| c.result);
                if let Some(entry) = results.iter_mut().find(|(c, _)| *c == chip) {
                    entry.1 = r;
                }
            }
            for c in out.into_iter().flatten() {
                c.result?;
            }
        }
        tolerate_one(results, skipped)
    }

    /// A page that closes a gap: zeros, with tags no file system parses as its own.
    pub(crate) fn filler(&self, chip: u32, block: u32, row: u32) -> Command {
        let mut oob = vec![0xFF; self.vol.oob_size_bytes as usize];
        oob[self.vol.oob_free_range()].fill(0);
        Command::Program {
            addr: PageAddr {
                chip,
                block,
                page: row,
            },
            data: vec![0; self.vol.page_size_bytes as usize],
            oob,
        }
    }
}

/// A piece of stripe `addr` on `chip`: the same row of the same LEB.
pub(crate) fn piece(chip: u32, addr: PageAddr) -> PageAddr {
    PageAddr {
        chip,
        block: addr.block,
        page: addr.page,
    }
}

fn uncorrectable(addr: PageAddr) -> FlashError {
    FlashError::Uncorrectable { addr, codewords: 1 }
}

fn erased_read(g: &Geometry) -> Reply {
    Reply::Read {
        data: vec![0xFF; g.page_size_bytes as usize],
        oob: vec![0xFF; g.oob_size_bytes as usize],
        ecc: EccReport::default(),
    }
}

/// The answer of a command sent to every live chip: done if at most one chip in all is
/// missing (dead before, or failing now); else the first error that is not a dead chip's.
fn tolerate_one(
    results: Vec<(u32, Result<Reply, FlashError>)>,
    skipped: u32,
) -> Result<Reply, FlashError> {
    let mut lost = skipped;
    let mut first_dead = None;
    for (chip, r) in results {
        match r {
            Ok(_) => {}
            Err(FlashError::ChipFailed(_)) => {
                lost += 1;
                first_dead.get_or_insert(chip);
            }
            Err(e) => return Err(e),
        }
    }
    match (lost, first_dead) {
        (0 | 1, _) => Ok(Reply::Done),
        (_, Some(chip)) => Err(FlashError::ChipFailed(chip)),
        (_, None) => Err(FlashError::Ubi(
            "more than one chip of the array has failed: parity cannot cover them".into(),
        )),
    }
}
