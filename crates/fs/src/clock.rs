//! Where timestamps come from. Tests use a counter so runs are reproducible.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::types::TimeNs;

pub trait Clock: Send + Sync {
    fn now_ns(&self) -> TimeNs;
}

/// The host's real time.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> TimeNs {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0)
    }
}

/// A deterministic clock: each reading is one microsecond after the last.
pub struct CountingClock(AtomicI64);

impl CountingClock {
    pub fn new(start_ns: TimeNs) -> Self {
        Self(AtomicI64::new(start_ns))
    }
}

impl Clock for CountingClock {
    fn now_ns(&self) -> TimeNs {
        self.0.fetch_add(1_000, Ordering::Relaxed)
    }
}
