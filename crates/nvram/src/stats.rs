//! What the NVRAM has done since it was opened.

use serde::Serialize;

/// Counters of one NVRAM. Failed and refused operations count nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NvramStats {
    /// Bytes returned by reads.
    pub bytes_read: u64,
    /// Bytes stored by writes.
    pub bytes_written: u64,
    /// Persists that took effect (flush + fence), `persist_all` included.
    pub persists: u64,
    /// Bytes those persists made durable: 8 per volatile word they covered. A persist of a
    /// range with nothing volatile in it costs its fence but adds nothing here.
    pub persisted_bytes: u64,
    /// Simulated nanoseconds spent in all accesses and persists.
    pub sim_time_ns: u64,
    /// Energy of all reads and writes, picojoules.
    pub energy_pj: u64,
}

impl NvramStats {
    /// Energy of all reads and writes, joules.
    pub fn energy_j(&self) -> f64 {
        self.energy_pj as f64 * 1e-12
    }
}
