//! Phone: a cellular phone keeping its call lists, messages, calendar and contacts.
//!
//! The MODA paper (sec. 6.2) takes it from Gal and Toledo's TFFS paper (USENIX 2005, its
//! ref. [13]); sec. 6.3.3 says it manipulates six files and "update[s] them intensively".
//! The MiNV paper (`minvfs-nvram-metadata.txt`, sec. 4.2.4) describes the same benchmark as
//! devices that "manage small files", frequently updated. Table 1 leaves u = 0.05 and
//! i = 0.32 on the 64 MB device. TFFS's own text was not at hand, so the files and
//! records below are ours, built on those facts.
//!
//! Model: six record logs. Each event appends one record to one log and syncs it, as a
//! phone must not lose a call record or a message. On a page-mapped log file system each
//! sync rewrites the log's last, partial page and its header, and both older copies turn
//! invalid; a page stays valid once full. So a workload of small synced appends leaves
//! about 2 × 512 / r - 1 invalid pages per valid one, for records of r bytes on average:
//! Table 1's i / u = 6.4 means records of about 140 bytes, which is what an SMS holds.
//!
//! Parameters:
//! - files and records: `calls-out` and `calls-in` (32-byte call records: number, time,
//!   duration), `sms-out` and `sms-in` (140 bytes: an SMS's user data, 3GPP TS 23.040),
//!   `calendar` and `contacts` (uniform 64-448 bytes). Absolute: they describe the data.
//! - event mix: an SMS sent or received twice as often as each of the others (weights
//!   1, 1, 2, 2, 1, 1), which puts the mean record at about 142 bytes (fitted to i / u).
//! - after half the events, chosen at random, the user looks at a record: one read of
//!   a random record's bytes from a random non-empty log.
//! - the phone is idle 60 s between events (nominal).
//! - length: events go on until the logs hold 5% of the capacity (Table 1's u; scales).
//!   None of the logs wraps within a run.

use rand::distributions::{Distribution, WeightedIndex};
use rand::Rng as _;

use crate::common::{bytes, bytes_of_fraction, rng, secs, Counted, Rng, Stepper};
use crate::{Target, TargetError};

/// Fraction of the capacity the logs hold at the end (Table 1's u).
const KEPT_FRACTION: f64 = 0.05;

/// One log: its name, how often an event goes to it, and its record sizes (inclusive).
struct Log {
    name: &'static str,
    weight: u32,
    record_min: usize,
    record_max: usize,
}

const LOGS: [Log; 6] = [
    Log {
        name: "calls-out",
        weight: 1,
        record_min: 32,
        record_max: 32,
    },
    Log {
        name: "calls-in",
        weight: 1,
        record_min: 32,
        record_max: 32,
    },
    Log {
        name: "sms-out",
        weight: 2,
        record_min: 140,
        record_max: 140,
    },
    Log {
        name: "sms-in",
        weight: 2,
        record_min: 140,
        record_max: 140,
    },
    Log {
        name: "calendar",
        weight: 1,
        record_min: 64,
        record_max: 448,
    },
    Log {
        name: "contacts",
        weight: 1,
        record_min: 64,
        record_max: 448,
    },
];

pub struct Phone {
    rng: Rng,
    /// Draws a log by the weights of `LOGS`.
    pick: WeightedIndex<u32>,
    dir: String,
    kept_target: u64,
    /// Bytes in each log.
    sizes: [u64; LOGS.len()],
    events: u64,
    started: bool,
}

impl Phone {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        Self::filling(seed, device_bytes, KEPT_FRACTION, dir)
    }

    /// Run until its data fill `fraction` of the capacity, not Table 1's u.
    pub fn filling(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Self {
        Self {
            rng: rng(seed),
            pick: WeightedIndex::new(LOGS.iter().map(|l| l.weight)).expect("positive weights"),
            dir: dir.to_string(),
            kept_target: bytes_of_fraction(device_bytes, fraction),
            sizes: [0; LOGS.len()],
            events: 0,
            started: false,
        }
    }

    fn path(&self, log: usize) -> String {
        format!("{}/{}", self.dir, LOGS[log].name)
    }

    fn kept(&self) -> u64 {
        self.sizes.iter().sum()
    }

    fn start(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        t.mkdir(&self.dir)?;
        for log in 0..LOGS.len() {
            let path = self.path(log);
            t.create(&path)?;
            t.fsync(&path)?;
        }
        Ok(())
    }

    fn look(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        let filled: Vec<usize> = (0..LOGS.len()).filter(|&l| self.sizes[l] > 0).collect();
        let log = filled[self.rng.gen_range(0..filled.len())];
        let len = LOGS[log].record_max as u64;
        let offset = self.rng.gen_range(0..self.sizes[log]);
        t.read(
            &self.path(log),
            offset,
            len.min(self.sizes[log] - offset) as usize,
        )?;
        Ok(())
    }
}

impl Stepper for Phone {
    fn name(&self) -> &'static str {
        "phone"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2/6.3.3 (TFFS's phone, six files, update intensive) and Table 1 \
         (u = 0.05, i = 0.32); MiNV sec. 4.2.4; SMS size 3GPP TS 23.040; logs, mix and sizes our \
         choice"
    }

    /// One event.
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        if !self.started {
            self.started = true;
            self.start(t)?;
        }
        if self.kept() >= self.kept_target {
            return Ok(false);
        }
        let log = self.pick.sample(&mut self.rng);
        let len = self
            .rng
            .gen_range(LOGS[log].record_min..=LOGS[log].record_max);
        let path = self.path(log);
        t.append(&path, bytes(self.events, len))?;
        t.fsync(&path)?;
        self.sizes[log] += len as u64;
        self.events += 1;
        if self.rng.gen_bool(0.5) {
            self.look(t)?;
        }
        t.idle(secs(60))?;
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        // 142 bytes per event on average.
        self.kept_target.saturating_sub(self.kept()).div_ceil(142)
    }
}
