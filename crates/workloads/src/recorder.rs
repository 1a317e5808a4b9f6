//! Recorder: an event recorder, such as a car's black box or a remote sensor.
//!
//! The MODA paper (sec. 6.2) takes it from Gal and Toledo's TFFS paper (USENIX 2005, its
//! ref. [13]); sec. 6.3.3 says it manipulates two files, updated intensively. The MiNV
//! paper (`minvfs-nvram-metadata.txt`, sec. 4.2.4) describes it as devices "that create
//! record files and update logs in the record files". Table 1 leaves u = 0.005 and
//! i = 0.16 on the 64 MB device. TFFS's own text was not at hand, so the two files and
//! their records are ours, built on those facts.
//!
//! Model: two logs of fixed-size records, each record appended and synced at once (a
//! black box must not lose the last events before a crash). As in `phone.rs`, synced
//! appends of r-byte records leave about 2 × 512 / r - 1 invalid pages per valid one;
//! Table 1's i / u = 32 means records of about 32 bytes.
//!
//! Parameters:
//! - `samples`: a 32-byte record (time stamp, sensor values) at every event.
//! - `index`: a 32-byte record (time stamp, offset into `samples`) at every 16th event,
//!   one per 512 bytes of samples, so that a reader can seek by time.
//!   Both absolute; the 32 bytes fitted to i / u as above.
//! - events come 0.5-1.5 s apart (uniform; nominal), the recorder idle in between.
//! - length: events go on until the logs hold 0.5% of the capacity (Table 1's u;
//!   scales). Neither log wraps within a run.

use rand::Rng as _;

use crate::common::{bytes, bytes_of_fraction, rng, Counted, Rng, Stepper};
use crate::{Target, TargetError};

/// Fraction of the capacity the logs hold at the end (Table 1's u).
const KEPT_FRACTION: f64 = 0.005;
const RECORD: u64 = 32;
/// Events per index record.
const INDEX_EVERY: u64 = 16;

pub struct Recorder {
    rng: Rng,
    dir: String,
    kept_target: u64,
    events: u64,
    kept: u64,
    started: bool,
}

impl Recorder {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        Self::filling(seed, device_bytes, KEPT_FRACTION, dir)
    }

    /// Run until its data fill `fraction` of the capacity, not Table 1's u.
    pub fn filling(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Self {
        Self {
            rng: rng(seed),
            dir: dir.to_string(),
            kept_target: bytes_of_fraction(device_bytes, fraction),
            events: 0,
            kept: 0,
            started: false,
        }
    }

    fn record(&mut self, t: &mut dyn Target, log: &str) -> Result<(), TargetError> {
        let path = format!("{}/{log}", self.dir);
        t.append(&path, bytes(self.kept, RECORD as usize))?;
        t.fsync(&path)?;
        self.kept += RECORD;
        Ok(())
    }
}

impl Stepper for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2/6.3.3 (TFFS's event recorder, two files) and Table 1 \
         (u = 0.005, i = 0.16); MiNV sec. 4.2.4; logs and record size our choice"
    }

    /// One event.
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        if !self.started {
            self.started = true;
            t.mkdir(&self.dir)?;
            for log in ["samples", "index"] {
                let path = format!("{}/{log}", self.dir);
                t.create(&path)?;
                t.fsync(&path)?;
            }
        }
        if self.kept >= self.kept_target {
            return Ok(false);
        }
        self.record(t, "samples")?;
        self.events += 1;
        if self.events % INDEX_EVERY == 0 {
            self.record(t, "index")?;
        }
        t.idle(self.rng.gen_range(500_000_000..=1_500_000_000))?;
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        let per_event = RECORD + RECORD / INDEX_EVERY;
        self.kept_target
            .saturating_sub(self.kept)
            .div_ceil(per_event)
    }
}
