//! Rebuild: a replacement chip gets back every piece the failed one held, so the array is
//! redundant again.
//!
//! LEB by LEB, the other chips' pieces of every row are read and the missing piece is
//! computed: the XOR of the data pieces where the chip held the parity, else of the parity
//! and the other data pieces. The chip's LEB is then written whole, row after row, through
//! its UBI (which maps it onto a fresh PEB). Rows that need no piece end the LEB early;
//! a row whose piece cannot be computed (a stripe a power cut tore before its parity, or a
//! survivor's piece unreadable) gets a filler page when later rows follow it, so the
//! chip's pages stay in order.
//!
//! Resumable. Nothing records progress: a LEB the chip already holds exactly as computed
//! is kept, any other copy of it is unmapped and written again. So a rebuild cut by a power
//! loss at any operation is run again and finishes the job; the cost of resuming is one
//! read of what was already written. Until it is done, reads rebuild every piece the chip
//! lacks from parity, so the file system can be mounted in between.
//!
//! Trusted only when complete. The chip is taken out of the array's members before its
//! first LEB is written and put back in only after its last ([`super::membership`]): a
//! rebuild cut anywhere leaves a chip the array treats as failed (never one whose unwritten
//! rows would be read as data), and running the rebuild again finishes it.

use serde::Serialize;

use super::parity::{classify, xor_into, Piece};
use super::StripedFlash;
use crate::command::{Command, Completion, Reply};
use crate::device::Flash;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, PageAddr};

/// What a rebuild did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RebuildReport {
    pub chip: u32,
    pub lebs: u32,
    /// LEBs written on the chip.
    pub lebs_written: u32,
    /// LEBs the chip already held as computed (a resumed rebuild).
    pub lebs_kept: u32,
    /// LEBs unmapped on the chip: no other chip holds them.
    pub lebs_unmapped: u32,
    /// Pieces programmed, filler pages among them.
    pub pages_written: u64,
    pub fillers: u64,
    /// Rows whose piece could not be computed: stripes a power cut tore (never
    /// acknowledged), or a survivor's piece unreadable.
    pub rows_unrecoverable: u64,
    /// Simulated time the rebuild took.
    pub sim_ns: u64,
}

/// What the chip should hold at one row.
#[derive(Debug)]
enum Target {
    /// Nothing: the row is erased on every other chip.
    Empty,
    /// A piece that cannot be computed; a filler if later rows follow.
    Gap,
    Piece {
        data: Vec<u8>,
        oob: Vec<u8>,
    },
}

impl<F: Flash> StripedFlash<F> {
    /// Writes every piece chip `chip` should hold (see the module comment). `progress` is
    /// called after each LEB with (LEBs done, LEBs in all).
    pub fn rebuild_chip(
        &mut self,
        chip: u32,
        progress: &mut dyn FnMut(u32, u32),
    ) -> Result<RebuildReport, FlashError> {
        let (Some(parity), Some(ubi)) = (self.parity.as_ref(), self.ubi.as_ref()) else {
            return Err(FlashError::Ubi(
                "rebuild needs an array with parity (mkfs --parity)".into(),
            ));
        };
        let chips = parity.chips();
        if chip >= chips {
            return Err(FlashError::OutOfRange {
                what: format!("chip {chip} of an array of {chips}"),
            });
        }
        let excluded = self
            .members
            .as_ref()
            .is_some_and(|m| m.excluded().contains_key(&chip));
        if ubi.is_dead(chip) && !excluded {
            return Err(FlashError::ChipFailed(chip));
        }
        if let Some(&other) = ubi.dead_chips().iter().find(|&&c| c != chip) {
            return Err(FlashError::Ubi(format!(
                "chip {other} has failed as well: a rebuild of chip {chip} needs every other \
                 chip"
            )));
        }
        let vol = parity.volume();
        let lebs = vol.blocks_per_chip;
        if self.read_only {
            return Err(FlashError::Ubi(
                "a rebuild needs the array attached for writing".into(),
            ));
        }
        // The chip answers: it is read (what it already holds is kept) and written, but no
        // one trusts it until the rebuild has written its last LEB.
        let others: Vec<u32> = (0..chips).filter(|&c| c != chip).collect();
        if let (Some(m), Some(ubi), Some(parity)) = (
            self.members.as_mut(),
            self.ubi.as_mut(),
            self.parity.as_mut(),
        ) {
            if m.is_member(chip) {
                m.record(&mut self.inner, &others, &[])?;
            }
            m.readmit(chip);
            ubi.set_dead(chip, false);
            parity.forget_dead(chip);
            // A new chip gets its volume table before its data, so a tool reading it alone
            // sees what it is (the table names the volume, not the chip's part in it).
            ubi.repair_layout(&mut self.inner, chip)?;
        }
        let start = self.inner.now_ns();
        let mut report = RebuildReport {
            chip,
            lebs,
            ..RebuildReport::default()
        };
        for leb in 0..lebs {
            if let Err(e) = self.rebuild_leb(chip, leb, &mut report) {
                self.rebuild_cut(chip);
                return Err(e);
            }
            progress(leb + 1, lebs);
        }
        report.sim_ns = self.inner.now_ns().saturating_sub(start);
        // Every piece written: the chip is a member again, its own record first (the others'
        // records following it make no difference to what is trusted, see membership).
        if let (Some(m), Some(ubi)) = (self.members.as_mut(), self.ubi.as_ref()) {
            let live: Vec<u32> = (0..chips).filter(|&c| !ubi.is_dead(c)).collect();
            if let Err(e) = m.record(&mut self.inner, &live, &[chip]) {
                self.rebuild_cut(chip);
                return Err(e);
            }
        }
        Ok(report)
    }

    /// A rebuild that stopped part way: its chip is out of service again, as it would be
    /// at the next attach.
    fn rebuild_cut(&mut self, chip: u32) {
        if let Some(ubi) = self.ubi.as_mut() {
            ubi.set_dead(chip, true);
        }
        if let Some(m) = self.members.as_mut() {
            m.exclude(chip, "its rebuild did not complete");
        }
    }

    fn rebuild_leb(
        &mut self,
        chip: u32,
        leb: u32,
        report: &mut RebuildReport,
    ) -> Result<(), FlashError> {
        let parity = self.parity.as_ref().expect("checked");
        let ubi = self.ubi.as_ref().expect("checked");
        let chips = parity.chips();
        let rows = parity.volume().pages_per_block;
        let others: Vec<u32> = (0..chips).filter(|&c| c != chip).collect();
        let mine = ubi.is_mapped(chip, leb);
        if !others.iter().any(|&c| ubi.is_mapped(c, leb)) {
            if mine {
                self.run_checked(vec![Command::Erase {
                    addr: BlockAddr::new(chip, leb),
                }])?;
                report.lebs_unmapped += 1;
            }
            return Ok(());
        }
        // Every row of every chip's piece of this LEB (the chip's own only if mapped).
        let readers: Vec<u32> = if mine { (0..chips).collect() } else { others };
        let mut reads = Vec::with_capacity(readers.len() * rows as usize);
        for &c in &readers {
            for row in 0..rows {
                reads.push(Command::Read {
                    addr: PageAddr {
                        chip: c,
                        block: leb,
                        page: row,
                    },
                });
            }
        }
        let done = self.run(reads);
        let mut pieces: Vec<Vec<Piece>> = vec![Vec::new(); chips as usize];
        for (i, c) in done.into_iter().enumerate() {
            let reader = readers[i / rows as usize];
            let p = match c.result {
                Ok(Reply::Read { data, oob, ecc }) => classify(data, oob, ecc),
                Err(FlashError::PowerLost) => return Err(FlashError::PowerLost),
                Err(FlashError::ChipFailed(c)) => return Err(FlashError::ChipFailed(c)),
                _ => Piece::Lost,
            };
            pieces[reader as usize].push(p);
        }
        let targets: Vec<Target> = (0..rows)
            .map(|row| self.target(chip, leb, row, &pieces, report))
            .collect();
        let used = targets
            .iter()
            .rposition(|t| !matches!(t, Target::Empty | Target::Gap))
            .map_or(0, |i| i + 1);
        if mine
            && holds(
                &pieces[chip as usize],
                &targets,
                used,
                self.parity_oob_range(),
            )
        {
            report.lebs_kept += 1;
            return Ok(());
        }
        let mut cmds = Vec::with_capacity(used + 1);
        if mine {
            cmds.push(Command::Erase {
                addr: BlockAddr::new(chip, leb),
            });
        }
        let parity = self.parity.as_ref().expect("checked");
        for (row, t) in targets.into_iter().take(used).enumerate() {
            let row = row as u32;
            cmds.push(match t {
                Target::Piece { data, oob } => Command::Program {
                    addr: PageAddr {
                        chip,
                        block: leb,
                        page: row,
                    },
                    data,
                    oob,
                },
                Target::Empty | Target::Gap => {
                    report.fillers += 1;
                    parity.filler(chip, leb, row)
                }
            });
            report.pages_written += 1;
        }
        self.run_checked(cmds)?;
        report.lebs_written += 1;
        Ok(())
    }

    /// The piece chip `chip` should hold at `row` of `leb`, from the other chips' pieces.
    fn target(
        &self,
        chip: u32,
        leb: u32,
        row: u32,
        pieces: &[Vec<Piece>],
        report: &mut RebuildReport,
    ) -> Target {
        let parity = self.parity.as_ref().expect("checked");
        let chips = parity.chips();
        let at = |c: u32| &pieces[c as usize][row as usize];
        let others = (0..chips).filter(|&c| c != chip);
        if others.clone().all(|c| matches!(at(c), Piece::Erased)) {
            return Target::Empty;
        }
        let q = parity.parity_chip(leb, row);
        // The pieces whose XOR is the missing one: every data piece when the chip held the
        // parity; else the parity and the other data pieces.
        let needed: Vec<u32> = others.collect();
        if chip != q && !at(q).is_good() || needed.iter().any(|&c| !at(c).is_good()) {
            report.rows_unrecoverable += 1;
            return Target::Gap;
        }
        let mut data = vec![0u8; parity.volume().page_size_bytes as usize];
        let mut oob = None;
        for &c in &needed {
            if let Piece::Good {
                data: d, oob: o, ..
            } = at(c)
            {
                xor_into(&mut data, d);
                oob.get_or_insert_with(|| o.clone());
            }
        }
        Target::Piece {
            data,
            oob: oob.unwrap_or_default(),
        }
    }

    fn parity_oob_range(&self) -> std::ops::Range<usize> {
        self.parity
            .as_ref()
            .map_or(0..0, |p| p.volume().oob_free_range())
    }

    /// Per-chip commands through UBI.
    fn run(&mut self, batch: Vec<Command>) -> Vec<Completion> {
        let ubi = self.ubi.as_mut().expect("checked");
        ubi.submit(&mut self.inner, batch)
    }

    /// Per-chip commands through UBI; the first failure is the answer.
    fn run_checked(&mut self, batch: Vec<Command>) -> Result<(), FlashError> {
        for c in self.run(batch) {
            c.result?;
        }
        Ok(())
    }
}

/// Whether the chip's pieces already match the targets: every piece equal (data and the
/// free OOB bytes), every row past the used ones erased; a gap may hold anything.
fn holds(current: &[Piece], targets: &[Target], used: usize, free: std::ops::Range<usize>) -> bool {
    current
        .iter()
        .zip(targets)
        .enumerate()
        .all(|(row, (cur, t))| {
            if row >= used {
                return matches!(cur, Piece::Erased);
            }
            match (t, cur) {
                (Target::Gap | Target::Empty, Piece::Erased) => false,
                (Target::Gap | Target::Empty, _) => true,
                (
                    Target::Piece { data, oob },
                    Piece::Good {
                        data: d, oob: o, ..
                    },
                ) => d == data && o.get(free.clone()) == oob.get(free.clone()),
                (Target::Piece { .. }, _) => false,
            }
        })
}
