//! How long a chip lasts under a workload: the erases a run made, block by block, carried
//! forward at the run's rate until a block reaches the chip's rated endurance (no paper's
//! equation; what an engineer choosing a design asks first).
//!
//! - [`project`]: from measured erase counts. The chip's life ends when its most-erased
//!   block reaches the rating (its spare blocks are ignored: a pessimistic end), and would
//!   end when the average block does if wear were spread perfectly; the ratio of the two is
//!   the wear spread.
//! - [`overwrite_years`]: the closed form for a workload that rewrites data at a known rate
//!   with wear spread evenly: `endurance x blocks x block bytes / (bytes a day x write
//!   amplification)`, in years.

use crate::ModelError;

/// Seconds in a day, and days in a year (365.25).
const DAY_S: f64 = 86_400.0;
const YEAR_DAYS: f64 = 365.25;

/// A projected lifetime.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Lifetime {
    /// Erases a day, all blocks together, at the run's rate.
    pub erases_per_day: f64,
    /// Years until the most-erased block reaches the rating (infinite: no erase).
    pub years_first_block: f64,
    /// Years until the average block would, wear spread perfectly.
    pub years_levelled: f64,
    /// The most-erased block's erases over the mean's (1: even wear).
    pub wear_spread: f64,
}

/// Projects `erases` (each block's erases during a run of `span_s` seconds) forward to
/// the rated `endurance` (erases a block survives).
pub fn project(erases: &[u64], span_s: f64, endurance: u64) -> Result<Lifetime, ModelError> {
    if erases.is_empty() {
        return Err(ModelError::Zero { name: "blocks" });
    }
    if endurance == 0 {
        return Err(ModelError::Zero { name: "endurance" });
    }
    if !(span_s.is_finite() && span_s > 0.0) {
        return Err(ModelError::BadTime {
            name: "span",
            value: span_s,
        });
    }
    let total: u64 = erases.iter().sum();
    let most = erases.iter().copied().max().unwrap_or(0);
    let mean = total as f64 / erases.len() as f64;
    let days = span_s / DAY_S;
    let years = |per_run: f64| match per_run {
        0.0 => f64::INFINITY,
        n => endurance as f64 / (n / days) / YEAR_DAYS,
    };
    Ok(Lifetime {
        erases_per_day: total as f64 / days,
        years_first_block: years(most as f64),
        years_levelled: years(mean),
        wear_spread: if total == 0 { 1.0 } else { most as f64 / mean },
    })
}

/// Years a chip of `blocks` blocks of `block_bytes` rated for `endurance` erases lasts
/// when `bytes_per_day` are written to it and each becomes `write_amplification` bytes
/// programmed, wear spread evenly.
pub fn overwrite_years(
    endurance: u64,
    blocks: u64,
    block_bytes: u64,
    bytes_per_day: f64,
    write_amplification: f64,
) -> Result<f64, ModelError> {
    for (name, v) in [
        ("blocks", blocks),
        ("block bytes", block_bytes),
        ("endurance", endurance),
    ] {
        if v == 0 {
            return Err(ModelError::Zero { name });
        }
    }
    for (name, v) in [
        ("bytes a day", bytes_per_day),
        ("write amplification", write_amplification),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(ModelError::OutOfRange {
                name,
                value: v,
                min: f64::MIN_POSITIVE,
                max: f64::MAX,
            });
        }
    }
    let erases_per_day = bytes_per_day * write_amplification / block_bytes as f64;
    Ok(endurance as f64 * blocks as f64 / erases_per_day / YEAR_DAYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_wear_gives_the_closed_form() {
        // 1,000 blocks of 128 KiB, each erased 10 times in a day: 1.31 GB a day at WA 1.
        let erases = vec![10u64; 1000];
        let l = project(&erases, DAY_S, 3000).unwrap();
        assert_eq!(l.erases_per_day, 10_000.0);
        assert_eq!(l.wear_spread, 1.0);
        assert_eq!(l.years_first_block, l.years_levelled);
        let closed = overwrite_years(3000, 1000, 128 << 10, 10_000.0 * 131_072.0, 1.0).unwrap();
        assert!((l.years_levelled - closed).abs() < 1e-9, "{l:?} {closed}");
        assert!((closed - 300.0 / YEAR_DAYS).abs() < 1e-9);
    }

    #[test]
    fn the_most_worn_block_ends_the_chip_first() {
        let l = project(&[0, 2, 2, 4], 2.0 * DAY_S, 100).unwrap();
        // The most-erased block: 2 a day, 50 days; the mean: 1 a day, 100 days.
        assert!((l.years_first_block - 50.0 / YEAR_DAYS).abs() < 1e-12);
        assert!((l.years_levelled - 100.0 / YEAR_DAYS).abs() < 1e-12);
        assert_eq!(l.wear_spread, 2.0);
        assert_eq!(
            project(&[0, 0], 10.0, 100).unwrap().years_first_block,
            f64::INFINITY
        );
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert!(project(&[], 1.0, 10).is_err());
        assert!(project(&[1], 0.0, 10).is_err());
        assert!(project(&[1], f64::NAN, 10).is_err());
        assert!(project(&[1], 1.0, 0).is_err());
        assert!(overwrite_years(10, 0, 1, 1.0, 1.0).is_err());
        assert!(overwrite_years(10, 1, 1, 1.0, 0.0).is_err());
        assert!(overwrite_years(10, 1, 1, f64::INFINITY, 1.0).is_err());
    }
}
