//! Named NVRAM parts, selectable by name like the flash presets.
//!
//! The MiNV paper (`minvfs-nvram-metadata.txt`) gives only two figures for NVRAM itself:
//! writes "in the hundred nanosecond range" (sec. 1, citing FeRAM and MRAM datasheets) and
//! its board's 12 MB of FeRAM, memory-mapped over PCI (sec. 4.1). Every other number below
//! is a typical datasheet-class value, not from the paper, and says so.
//!
//! Energy is derived the same way for both parts: supply voltage x active current x cycle
//! time, divided by the bytes one cycle moves (x16 parts, 2 bytes). An 8-byte word is four
//! such parts side by side, so the per-byte figure does not depend on the bus width.

use crate::config::NvramConfig;
use crate::cost::{NvramEnergy, NvramTiming};
use crate::error::NvramError;

/// A named part and where its numbers come from.
#[derive(Clone, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    /// The paper (file in shared/papers) or datasheet class each number comes from.
    pub source: &'static str,
    pub config: NvramConfig,
}

/// The preset used when none is named: the MiNV board's FeRAM.
pub const DEFAULT_PRESET: &str = "feram";

const MIB: u64 = 1 << 20;

fn make(name: &str, size_bytes: u64, timing: NvramTiming, energy: NvramEnergy) -> NvramConfig {
    NvramConfig {
        name: name.to_string(),
        size_bytes,
        timing,
        energy,
    }
}

/// All presets, in the order they are listed.
pub fn presets() -> Vec<Preset> {
    vec![
        // FeRAM: parallel parts of the paper's era (Ramtron FM22L16 class) have ~55 ns
        // access and ~110 ns cycle; 50-150 ns access is the usual range. A FeRAM read is
        // destructive and restores the cell, so reads cost the same cycle as writes.
        // Energy: 3.3 V x ~15 mA x 110 ns / 2 bytes = ~2.7 nJ per byte, read or write.
        Preset {
            name: "feram",
            summary: "12 MiB FeRAM: 110 ns per 8-byte word read or write, 110 ns persist, 2.7 nJ/byte",
            source: "MiNV paper (minvfs-nvram-metadata.txt): 12 MB FeRAM board (sec. 4.1), writes \
                     'in the hundred nanosecond range' (sec. 1); cycle time and energy are typical \
                     parallel-FeRAM datasheet values, not from the paper",
            config: make(
                "feram",
                12 * MIB,
                NvramTiming {
                    read_ns_per_word: 110,
                    write_ns_per_word: 110,
                    persist_ns: 110,
                },
                NvramEnergy {
                    read_pj_per_byte: 2_700,
                    write_pj_per_byte: 2_700,
                },
            ),
        },
        // PRAM (phase-change): reads ~50-100 ns; a write lasts as long as its slowest cell,
        // ~150 ns to RESET (melt) and up to ~1 us to SET (crystallise), and a word almost
        // always has a bit to SET, so the slow end is taken. Energy: reads 1.8 V x ~15 mA x
        // 100 ns / 2 bytes = ~1.35 nJ per byte; writes 1.8 V x ~25 mA x 1 us / 2 bytes =
        // ~22.5 nJ per byte (programming heats the cell).
        Preset {
            name: "pram",
            summary: "64 MiB PRAM: 100 ns read / 1 us write per 8-byte word, 100 ns persist, \
                      1.35 / 22.5 nJ/byte",
            source: "capacity: Samsung's 512 Mbit PRAM cited by the MiNV paper (sec. 1, ref. 21); \
                     latencies and energy are typical PCM datasheet-class values, not from the paper",
            config: make(
                "pram",
                64 * MIB,
                NvramTiming {
                    read_ns_per_word: 100,
                    write_ns_per_word: 1_000,
                    persist_ns: 100,
                },
                NvramEnergy {
                    read_pj_per_byte: 1_350,
                    write_pj_per_byte: 22_500,
                },
            ),
        },
    ]
}

/// The configuration of a preset, by name.
pub fn preset(name: &str) -> Result<NvramConfig, NvramError> {
    presets()
        .into_iter()
        .find(|p| p.name == name)
        .map(|p| p.config)
        .ok_or_else(|| NvramError::UnknownPreset {
            name: name.to_string(),
            known: presets()
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_named_as_listed() {
        for p in presets() {
            p.config.validate().unwrap();
            assert_eq!(p.config.name, p.name);
        }
        assert_eq!(preset(DEFAULT_PRESET).unwrap().size_bytes, 12 * MIB);
        assert_eq!(preset("pram").unwrap().timing.write_ns_per_word, 1_000);
    }

    #[test]
    fn unknown_preset_lists_known_ones() {
        let err = preset("mram").unwrap_err().to_string();
        assert!(err.contains("feram") && err.contains("pram"), "{err}");
    }
}
