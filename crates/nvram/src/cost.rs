//! What an access costs: simulated nanoseconds and energy.
//!
//! The model is the one an uncached, memory-mapped NVRAM board presents to a CPU (the MiNV
//! board sat on PCI and was accessed by plain loads and stores):
//! - the memory moves aligned 8-byte words, so an access costs one word time for every word
//!   it touches, even partly (a 1-byte write pays a whole word, 8 bytes spanning two words
//!   pay two);
//! - a persist (flush + fence) costs a fixed `persist_ns`: the stores were already paid for
//!   when issued, what remains is draining the posted writes, one round trip;
//! - energy is per byte moved, separately for reads and writes.

use serde::{Deserialize, Serialize};

/// Aligned word size: the unit of access cost, of crash tearing and of failure atomicity.
pub const WORD_BYTES: u64 = 8;

/// Latencies of the NVRAM, per aligned 8-byte word touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvramTiming {
    /// Nanoseconds to read one aligned 8-byte word.
    pub read_ns_per_word: u64,
    /// Nanoseconds to write one aligned 8-byte word.
    pub write_ns_per_word: u64,
    /// Nanoseconds for one persist (flush + fence), whatever its length.
    pub persist_ns: u64,
}

/// Energy of the NVRAM, per byte moved. Picojoules, so sums are exact integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvramEnergy {
    /// Picojoules per byte read.
    pub read_pj_per_byte: u64,
    /// Picojoules per byte written.
    pub write_pj_per_byte: u64,
}

/// Aligned words that the byte range `offset..offset + len` touches.
pub fn words_touched(offset: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (offset + len - 1) / WORD_BYTES - offset / WORD_BYTES + 1
}

impl NvramTiming {
    /// Nanoseconds to read `len` bytes at `offset`.
    pub fn read_cost_ns(&self, offset: u64, len: u64) -> u64 {
        words_touched(offset, len) * self.read_ns_per_word
    }

    /// Nanoseconds to write `len` bytes at `offset`.
    pub fn write_cost_ns(&self, offset: u64, len: u64) -> u64 {
        words_touched(offset, len) * self.write_ns_per_word
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_words_cost_whole_words() {
        assert_eq!(words_touched(0, 0), 0);
        assert_eq!(words_touched(0, 1), 1);
        assert_eq!(words_touched(0, 8), 1);
        assert_eq!(words_touched(7, 2), 2);
        assert_eq!(words_touched(4, 16), 3);
        let t = NvramTiming {
            read_ns_per_word: 10,
            write_ns_per_word: 100,
            persist_ns: 1,
        };
        assert_eq!(t.read_cost_ns(7, 2), 20);
        assert_eq!(t.write_cost_ns(8, 8), 100);
    }
}
