//! Named devices from the papers, selectable everywhere as `--geometry NAME`.
//!
//! Energy: none of the papers gives energy figures, so every preset's are typical values,
//! derived one way (the `energy_source` of each preset says so): E = V x I x t over each
//! phase of the preset's own timing, at 3.3 V and 25 mA (82.5 mW). A part with slower
//! programs (MLC, TLC) therefore spends more per program in the same proportion, and a
//! byte on the bus costs 82.5 mW x its transfer time.

use crate::config::DeviceConfig;
use crate::ecc::EccModel;
use crate::energy::Energy;
use crate::error::FlashError;
use crate::geometry::Geometry;
use crate::timing::Timing;
use crate::wear::{CellType, WearModel};

/// A named device and where its numbers come from.
#[derive(Clone, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    /// The paper (file in shared/papers) or datasheet each number comes from.
    pub source: &'static str,
    /// Where the energy figures (`config.energy`) come from.
    pub energy_source: &'static str,
    pub config: DeviceConfig,
}

/// The basis of every preset's energy, as a literal so the sources below can extend it.
/// The datasheet figures are real; the choice of 25 mA for every phase is ours.
macro_rules! typical_energy {
    () => {
        "typical values, not from the papers: 3.3 V x 25 mA x each latency (and x bus time \
         per byte). 3.3 V is the nominal VCC of 3 V NAND (Micron MT29FxG08xAA datasheet: \
         2.7/3.3/3.6 V min/typ/max); 25 mA is our pick in the typical-to-maximum active \
         current range that 3 V datasheets give for read (ICC1, while data streams out), \
         program (ICC2) and erase (ICC3), e.g. Numonyx NAND01G-B2B 10 mA typ / 20 mA max, \
         Samsung K9F5608U0C 25 mA max for program and erase"
    };
}

/// Energy source of a preset whose latencies are the chip's own.
const TYPICAL_ENERGY: &str = typical_energy!();

/// The preset a command uses when none is named.
pub const DEFAULT_PRESET: &str = "mlc-1g";

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn make(
    name: &str,
    page: u32,
    oob: u32,
    pages_per_block: u32,
    total_bytes: u64,
    timing: Timing,
    cell: CellType,
) -> DeviceConfig {
    // Small-page parts (512 B pages, 16 B OOB) use MTD's software Hamming code: 2 x 3 ECC
    // bytes, 8 free. Large-page parts use BCH 4 bits per 512 B (the MA board's): 7 bytes each.
    let ecc = if page <= 512 {
        EccModel::hamming(256)
    } else {
        EccModel::bch(512, 4)
    };
    let block_bytes = u64::from(page) * u64::from(pages_per_block);
    DeviceConfig {
        name: name.to_string(),
        geometry: Geometry {
            page_size_bytes: page,
            oob_size_bytes: oob,
            pages_per_block,
            blocks_per_chip: (total_bytes / block_bytes) as u32,
            chips: 1,
            oob_ecc_bytes: ecc.oob_ecc_bytes(page),
        },
        timing,
        energy: Energy::typical(&timing),
        cell,
        wear: WearModel::for_cell(cell),
        ecc,
        seed: 0x006e_616e_646b_6974,
        chip_files: false,
    }
}

fn timing(read_ns: u64, program_ns: u64, erase_ns: u64, bus_mb_per_s: u64) -> Timing {
    Timing {
        read_ns,
        program_ns,
        erase_ns,
        bus_mb_per_s,
    }
}

/// All presets, in the order `nandkit presets` lists them.
pub fn presets() -> Vec<Preset> {
    // Bus rates are not given by the papers; 40 MB/s is classic asynchronous NAND (25 ns
    // cycles), 20 MB/s the 50 ns cycle of 2000s small-block parts, 133 MB/s ONFI 2.0.
    let mut tiny = make(
        "tiny",
        2048,
        64,
        64,
        8 * MIB,
        timing(25 * US, 200 * US, 1_500 * US, 40),
        CellType::Slc,
    );
    tiny.wear.factory_bad_fraction = 0.0;
    vec![
        Preset {
            name: "slc-1g",
            summary: "1 GiB SLC, 2 KiB pages, 64 pages/block, 25 us / 200 us / 1.5 ms",
            source: "MA paper (ma-ubifs-mtd-array.txt) Table 1; pages/block and OOB typical, not in the paper",
            energy_source: TYPICAL_ENERGY,
            config: make("slc-1g", 2048, 64, 64, GIB, timing(25 * US, 200 * US, 1_500 * US, 40), CellType::Slc),
        },
        Preset {
            name: "mlc-1g",
            summary: "1 GiB MLC, 2 KiB pages, 64 pages/block, 25 us / 600 us / 2 ms",
            source: "MA paper Table 1; pages/block and OOB typical, not in the paper",
            energy_source: TYPICAL_ENERGY,
            config: make("mlc-1g", 2048, 64, 64, GIB, timing(25 * US, 600 * US, 2 * MS, 40), CellType::Mlc),
        },
        Preset {
            name: "tlc-1g",
            summary: "1 GiB TLC, 4 KiB pages, 64 pages/block, 75 us / 1.3 ms / 4 ms",
            source: "MA paper Table 1; pages/block and OOB typical, not in the paper",
            energy_source: TYPICAL_ENERGY,
            config: make("tlc-1g", 4096, 128, 64, GIB, timing(75 * US, 1_300 * US, 4 * MS, 40), CellType::Tlc),
        },
        Preset {
            name: "smallblock-64m",
            summary: "64 MiB SLC small-block, 512 B pages + 16 B OOB, 32 pages/block, 15 us / 200 us / 2 ms",
            source: "MODA paper (moda-uniformity-allocation.txt) sec. 3 datasheet figures; MiNV's 64 MB chip",
            energy_source: TYPICAL_ENERGY,
            config: make("smallblock-64m", 512, 16, 32, 64 * MIB, timing(15 * US, 200 * US, 2 * MS, 20), CellType::Slc),
        },
        Preset {
            name: "smallblock-64m-mtd",
            summary: "smallblock-64m with latencies seen above MTD: 0.2 ms / 1.03 ms / 1.74 ms",
            source: "MODA paper Figure 6 (times measured above the MTD layer, transfers included)",
            energy_source: concat!(
                typical_energy!(),
                "; the latencies were measured above MTD and include the transfers, so the bus \
                 costs nothing extra"
            ),
            config: make("smallblock-64m-mtd", 512, 16, 32, 64 * MIB, timing(200 * US, 1_030 * US, 1_740 * US, 0), CellType::Slc),
        },
        Preset {
            name: "mnfs-128m",
            summary: "128 MiB SLC small-block, 512 B pages + 16 B OOB, 32 pages/block, 15 us / 200 us / 2 ms",
            source: "MNFS paper (mnfs-multimedia-fs.txt) 128 MB volume; timings of the same small-block part",
            energy_source: TYPICAL_ENERGY,
            config: make("mnfs-128m", 512, 16, 32, 128 * MIB, timing(15 * US, 200 * US, 2 * MS, 20), CellType::Slc),
        },
        Preset {
            name: "mlc-8k",
            summary: "1 GiB MLC, 8 KiB pages + 448 B OOB, 256 pages/block, 75 us / 1.3 ms / 3.8 ms",
            source: "MA paper sec. 6.1 (hardware board's Micron MLC, BCH 4 bits/512 B); capacity and OOB typical",
            energy_source: TYPICAL_ENERGY,
            config: make("mlc-8k", 8192, 448, 256, GIB, timing(75 * US, 1_300 * US, 3_800 * US, 133), CellType::Mlc),
        },
        Preset {
            name: "tiny",
            summary: "8 MiB SLC, 2 KiB pages, 64 pages/block, 64 blocks, no factory bad blocks: for tests",
            source: "nandkit test device",
            energy_source: TYPICAL_ENERGY,
            config: tiny,
        },
    ]
}

/// The device configuration of a preset, by name.
pub fn preset(name: &str) -> Result<DeviceConfig, FlashError> {
    presets()
        .into_iter()
        .find(|p| p.name == name)
        .map(|p| p.config)
        .ok_or_else(|| FlashError::UnknownPreset {
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
    fn every_preset_is_valid_and_sized_as_named() {
        for p in presets() {
            p.config.validate().unwrap();
            let expect = match p.name {
                "slc-1g" | "mlc-1g" | "tlc-1g" | "mlc-8k" => GIB,
                "smallblock-64m" | "smallblock-64m-mtd" => 64 * MIB,
                "mnfs-128m" => 128 * MIB,
                "tiny" => 8 * MIB,
                other => panic!("preset {other} has no expected size"),
            };
            assert_eq!(p.config.geometry.total_bytes(), expect, "{}", p.name);
            assert_eq!(p.config.name, p.name);
        }
    }

    #[test]
    fn table_one_latencies() {
        let mlc = preset("mlc-1g").unwrap();
        assert_eq!(mlc.timing.program_ns, 600_000);
        assert_eq!(mlc.wear.endurance_cycles, 10_000);
        let tlc = preset("tlc-1g").unwrap();
        assert_eq!(tlc.geometry.page_size_bytes, 4096);
        assert_eq!(tlc.timing.erase_ns, 4_000_000);
        let four = mlc.with_chips(4).unwrap();
        assert_eq!(four.geometry.chips, 4);
        assert_eq!(four.geometry.total_bytes(), GIB);
    }

    #[test]
    fn oob_layout_per_preset() {
        // (name, ECC bytes, free bytes): BCH-4 7 bytes per 512 B; small pages MTD Hamming.
        let want = [
            ("slc-1g", 28, 34),
            ("mlc-1g", 28, 34),
            ("tlc-1g", 56, 70),
            ("smallblock-64m", 6, 8),
            ("smallblock-64m-mtd", 6, 8),
            ("mnfs-128m", 6, 8),
            ("mlc-8k", 112, 334),
            ("tiny", 28, 34),
        ];
        assert_eq!(presets().len(), want.len());
        for (name, ecc, free) in want {
            let c = preset(name).unwrap();
            let g = c.geometry;
            assert_eq!(g.oob_ecc_bytes, ecc, "{name}");
            assert_eq!(g.oob_free_bytes(), free, "{name}");
            assert_eq!(g.oob_free_offset(), 2, "{name}");
            assert_eq!(g.oob_ecc_offset() + ecc as usize, g.oob_size_bytes as usize);
            for chips in [2, 4] {
                let split = c.clone().with_chips(chips).unwrap();
                assert_eq!(split.geometry.oob_ecc_bytes, ecc, "{name} x{chips}");
                split.validate().unwrap();
            }
            let smaller = c.clone().with_total_bytes(g.block_bytes() * 4).unwrap();
            assert_eq!(smaller.geometry.oob_ecc_bytes, ecc, "{name} resized");
        }
        let small = preset("smallblock-64m").unwrap().ecc;
        assert_eq!(small, EccModel::hamming(256));
        assert_eq!((small.codeword_bytes, small.check_bytes), (256, 3));
        assert_eq!((small.correctable_bits, small.scrub_threshold_bits), (1, 1));
    }

    #[test]
    fn energy_per_preset_is_82_5_milliwatts_times_its_latencies() {
        // (name, read, program, erase in pJ, bus pJ per byte): 3.3 V x 25 mA x each phase.
        let want = [
            ("slc-1g", 2_062_500, 16_500_000, 123_750_000, 2_063),
            ("mlc-1g", 2_062_500, 49_500_000, 165_000_000, 2_063),
            ("tlc-1g", 6_187_500, 107_250_000, 330_000_000, 2_063),
            ("smallblock-64m", 1_237_500, 16_500_000, 165_000_000, 4_125),
            ("smallblock-64m-mtd", 16_500_000, 84_975_000, 143_550_000, 0),
            ("mnfs-128m", 1_237_500, 16_500_000, 165_000_000, 4_125),
            ("mlc-8k", 6_187_500, 107_250_000, 313_500_000, 620),
            ("tiny", 2_062_500, 16_500_000, 123_750_000, 2_063),
        ];
        assert_eq!(presets().len(), want.len());
        for (name, read, program, erase, per_byte) in want {
            let e = preset(name).unwrap().energy;
            let got = (e.read_pj, e.program_pj, e.erase_pj, e.transfer_pj_per_byte);
            assert_eq!(got, (read, program, erase, per_byte), "{name}");
            // Splitting over chips or resizing changes no chip's energy per operation.
            let split = preset(name).unwrap().with_chips(4).unwrap();
            assert_eq!(split.energy, e, "{name} x4");
        }
        for p in presets() {
            assert!(p.energy_source.contains("typical values"), "{}", p.name);
        }
    }

    #[test]
    fn unknown_preset_lists_known_ones() {
        let err = preset("nope").unwrap_err().to_string();
        assert!(err.contains("mlc-1g"), "{err}");
    }
}
