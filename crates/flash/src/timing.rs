//! How long each flash operation takes, in simulated nanoseconds.

use serde::{Deserialize, Serialize};

/// Latencies of one chip and the speed of its bus.
///
/// A read costs `read_ns` (array to page register) and then the transfer of the bytes out;
/// a program costs the transfer in and then `program_ns`; an erase costs `erase_ns` and moves
/// no data. Each chip has its own bus (as on the MA board, one channel per chip), so chips
/// never wait for each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// Page read latency (tR), nanoseconds.
    pub read_ns: u64,
    /// Page program latency (tPROG), nanoseconds.
    pub program_ns: u64,
    /// Block erase latency (tBERS), nanoseconds.
    pub erase_ns: u64,
    /// Bus transfer rate between controller and chip, megabytes (10^6 bytes) per second.
    /// Zero means transfers are free (only the array latencies count).
    pub bus_mb_per_s: u64,
}

impl Timing {
    /// Nanoseconds to move `bytes` over the bus.
    pub fn transfer_ns(&self, bytes: usize) -> u64 {
        if self.bus_mb_per_s == 0 {
            return 0;
        }
        // 1 MB/s moves one byte per microsecond, so ns = bytes * 1000 / (MB/s).
        (bytes as u64 * 1000).div_ceil(self.bus_mb_per_s)
    }

    /// Nanoseconds for a page read that returns `bytes` (data + OOB, or OOB only).
    pub fn read_cost_ns(&self, bytes: usize) -> u64 {
        self.read_ns + self.transfer_ns(bytes)
    }

    /// Nanoseconds for a page program of `bytes` (data + OOB).
    pub fn program_cost_ns(&self, bytes: usize) -> u64 {
        self.transfer_ns(bytes) + self.program_ns
    }

    /// Nanoseconds for a block erase.
    pub fn erase_cost_ns(&self) -> u64 {
        self.erase_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_rounds_up() {
        let t = Timing {
            read_ns: 25_000,
            program_ns: 600_000,
            erase_ns: 2_000_000,
            bus_mb_per_s: 40,
        };
        // 2112 bytes at 40 MB/s = 52.8 us.
        assert_eq!(t.transfer_ns(2112), 52_800);
        assert_eq!(t.program_cost_ns(2112), 652_800);
        assert_eq!(t.read_cost_ns(64), 25_000 + 1_600);
        let free_bus = Timing {
            bus_mb_per_s: 0,
            ..t
        };
        assert_eq!(free_bus.transfer_ns(4096), 0);
    }
}
