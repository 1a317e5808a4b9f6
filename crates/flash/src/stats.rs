//! Operation counters, per chip and for the whole device.

use serde::Serialize;

/// What one chip has done since the device was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChipStats {
    /// Full page reads (data + OOB).
    pub page_reads: u64,
    /// OOB-only reads.
    pub oob_reads: u64,
    /// Page programs, including failed and torn ones.
    pub programs: u64,
    /// Block erases, including failed and torn ones.
    pub erases: u64,
    /// Partial programs of a programmed page's spare area (YAFFS1's deletion marker).
    pub spare_programs: u64,
    /// Bytes moved from the chip to the caller.
    pub bytes_read: u64,
    /// Bytes moved from the caller to the chip.
    pub bytes_written: u64,
    /// Simulated nanoseconds this chip spent busy.
    pub busy_ns: u64,
    /// Picojoules this chip spent on its operations (see [`crate::energy`]).
    pub energy_pj: u64,
    /// Reads where ECC corrected at least one bit.
    pub corrected_reads: u64,
    /// Reads with a codeword beyond correction.
    pub uncorrectable_reads: u64,
    /// Programs that failed because the block is worn out.
    pub program_failures: u64,
    /// Erases that failed because the block is worn out.
    pub erase_failures: u64,
}

impl ChipStats {
    pub(crate) fn add(&mut self, o: &ChipStats) {
        self.page_reads += o.page_reads;
        self.oob_reads += o.oob_reads;
        self.programs += o.programs;
        self.erases += o.erases;
        self.spare_programs += o.spare_programs;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.busy_ns += o.busy_ns;
        self.energy_pj += o.energy_pj;
        self.corrected_reads += o.corrected_reads;
        self.uncorrectable_reads += o.uncorrectable_reads;
        self.program_failures += o.program_failures;
        self.erase_failures += o.erase_failures;
    }
}

/// Counters of every chip of a device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceStats {
    pub chips: Vec<ChipStats>,
}

impl DeviceStats {
    /// All chips added together.
    pub fn total(&self) -> ChipStats {
        let mut t = ChipStats::default();
        for c in &self.chips {
            t.add(c);
        }
        t
    }

    /// Picojoules all chips spent. Chips working in parallel save time, not energy, so
    /// this is a sum, unlike the simulated clock.
    pub fn energy_pj(&self) -> u64 {
        self.chips.iter().map(|c| c.energy_pj).sum()
    }

    /// [`Self::energy_pj`] in joules.
    pub fn energy_j(&self) -> f64 {
        self.energy_pj() as f64 * 1e-12
    }
}
