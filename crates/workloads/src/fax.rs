//! Fax machine: received faxes stored as files, with a history of receptions.
//!
//! The MODA paper (sec. 6.2), after Gal and Toledo's TFFS paper (USENIX 2005, its ref.
//! [13]): "initially creates two files. Then, it creates four new files and updates a
//! history file (200 bytes) when it receives a fax", behaviour also seen in "answering
//! machines, and music players". The MiNV paper (`minvfs-nvram-metadata.txt`, sec.
//! 4.2.4) adds that it stands for devices managing relatively large files. Table 1 leaves
//! u = 0.86 and i = 0.0087 on the 64 MB device.
//!
//! Model and parameters:
//! - the two initial files: `settings` (512 bytes, written once; size our choice) and
//!   `history` (empty).
//! - a fax: four new files (we take them to be its pages), each written in 4 KiB requests
//!   as the data comes in over the line and closed; then a 200-byte record appended to
//!   `history` and synced (the paper's 200 bytes). Faxes are kept, none erased.
//! - fax file size: uniform 50-100 KB (our choice; absolute). A fine-resolution A4 page
//!   is 1728 × 2287 pels, 494 KB uncompressed (ITU-T T.4), which MH/MR coding cuts
//!   several-fold. The size sets i / u: each fax leaves about six superseded pages (the
//!   first header of each new file, the history's previous last page and header) per
//!   4 × 146 valid ones, i / u ≈ 0.010, as Table 1's 0.0087 / 0.86.
//! - the machine is idle 60 s between faxes (nominal).
//! - length: faxes arrive until they fill 86% of the capacity (Table 1's u; scales), to
//!   the nearest whole fax.
//!
//! A step is one fax file, so that in a combination faxes interleave with other parts.

use rand::Rng as _;

use crate::common::Stepper;
use crate::common::{bytes, bytes_of_fraction, rng, secs, write_sequential, Counted, Rng};
use crate::{Target, TargetError};

/// Fraction of the capacity the faxes fill at the end (Table 1's u).
const KEPT_FRACTION: f64 = 0.86;
const FILES_PER_FAX: u32 = 4;
const FILE_MIN: u64 = 50_000;
const FILE_MAX: u64 = 100_000;
const HISTORY_RECORD: usize = 200;
const SETTINGS_BYTES: u64 = 512;
const REQUEST: usize = 4 << 10;

pub struct Fax {
    rng: Rng,
    dir: String,
    kept_target: u64,
    kept: u64,
    faxes: u32,
    /// Sizes of the files of the fax being received (drawn when it arrives).
    incoming: Vec<u64>,
    started: bool,
    done: bool,
}

impl Fax {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        Self::filling(seed, device_bytes, KEPT_FRACTION, dir)
    }

    /// Run until its data fill `fraction` of the capacity, not Table 1's u.
    pub fn filling(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Self {
        Self {
            rng: rng(seed),
            dir: dir.to_string(),
            kept_target: bytes_of_fraction(device_bytes, fraction),
            kept: 0,
            faxes: 0,
            incoming: Vec::new(),
            started: false,
            done: false,
        }
    }

    fn start(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        t.mkdir(&self.dir)?;
        let settings = format!("{}/settings", self.dir);
        t.create(&settings)?;
        write_sequential(t, &settings, SETTINGS_BYTES, REQUEST)?;
        t.fsync(&settings)?;
        let history = format!("{}/history", self.dir);
        t.create(&history)?;
        t.fsync(&history)
    }

    /// Draws the next fax's file sizes, or ends the run if it would overshoot the target
    /// by more than half of it.
    fn arrive(&mut self) {
        let sizes: Vec<u64> = (0..FILES_PER_FAX)
            .map(|_| self.rng.gen_range(FILE_MIN..=FILE_MAX))
            .collect();
        let total: u64 = sizes.iter().sum();
        if self.kept + total / 2 > self.kept_target {
            self.done = true;
        } else {
            self.faxes += 1;
            // Received in order: the last file written is popped last.
            self.incoming = sizes.into_iter().rev().collect();
        }
    }
}

impl Stepper for Fax {
    fn name(&self) -> &'static str {
        "fax"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2 (two files, then four files and a 200-byte history update per \
         fax) and Table 1 (u = 0.86, i = 0.0087); MiNV sec. 4.2.4; ITU-T T.4 page size; \
         file sizes our choice"
    }

    /// One fax file (and, after a fax's last, its history record).
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        if !self.started {
            self.started = true;
            self.start(t)?;
        }
        if self.incoming.is_empty() && !self.done {
            self.arrive();
        }
        let Some(size) = self.incoming.pop() else {
            return Ok(false);
        };
        let page = FILES_PER_FAX - self.incoming.len() as u32;
        let path = format!("{}/fax{:05}-{page}.tif", self.dir, self.faxes);
        t.create(&path)?;
        write_sequential(t, &path, size, REQUEST)?;
        t.fsync(&path)?;
        self.kept += size;
        if self.incoming.is_empty() {
            let history = format!("{}/history", self.dir);
            t.append(&history, bytes(u64::from(self.faxes), HISTORY_RECORD))?;
            t.fsync(&history)?;
            t.idle(secs(60))?;
        }
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        if self.done && self.incoming.is_empty() {
            return 0;
        }
        let mean_file = (FILE_MIN + FILE_MAX) / 2;
        self.kept_target.saturating_sub(self.kept) / mean_file + self.incoming.len() as u64
    }
}
