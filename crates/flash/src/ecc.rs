//! Raw bit errors and the ECC that hides them.
//!
//! Every read draws a number of raw bit errors for each ECC codeword from a Poisson
//! distribution whose rate grows with the block's wear. A codeword with at most `t` errors
//! is corrected (the caller gets clean data and the count, so it can scrub a block before it
//! degrades further, like MTD's -EUCLEAN); more than `t` is uncorrectable (-EBADMSG) and the
//! caller gets the damaged bytes.

use rand::Rng;
use serde::{Deserialize, Serialize};

/// ECC strength and the raw bit error rate (RBER) curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EccModel {
    /// Data bytes per codeword (the OOB area is its own, separate codeword).
    pub codeword_bytes: u32,
    /// Bits the code corrects per codeword (t). The MA board's BCH: 4 bits per 512 bytes.
    pub correctable_bits: u32,
    /// Corrected bit count at or above which a read asks for a scrub. MTD's default is
    /// three quarters of the strength, rounded up.
    pub scrub_threshold_bits: u32,
    /// Raw bit error rate of a fresh block (errors per bit per read).
    pub rber_fresh: f64,
    /// Raw bit error rate added at the rated endurance; it grows as (cycles / rated)^3.
    /// The default makes one read in ~6,000 of a worn-out 512-byte codeword uncorrectable.
    pub rber_at_endurance: f64,
}

impl EccModel {
    /// BCH-like code correcting `t` bits per `codeword_bytes`, with the default RBER curve.
    pub fn bch(codeword_bytes: u32, t: u32) -> Self {
        Self {
            codeword_bytes,
            correctable_bits: t,
            scrub_threshold_bits: (t * 3).div_ceil(4).max(1),
            rber_fresh: 1e-9,
            rber_at_endurance: 1.2e-4,
        }
    }

    /// Raw bit error rate of a block that has been erased `cycles` times.
    pub fn rber(&self, cycles: u32, endurance: u32) -> f64 {
        let x = f64::from(cycles) / f64::from(endurance.max(1));
        self.rber_fresh + self.rber_at_endurance * x * x * x
    }

    /// Draws the raw bit error count of one codeword of `bits` bits.
    pub(crate) fn sample_errors<R: Rng>(&self, rng: &mut R, rber: f64, bits: u32) -> u32 {
        sample_poisson(rng, rber * f64::from(bits))
    }
}

/// Poisson draw by inversion. Rates here are far below 10, where inversion is exact and
/// cheap; the common case (a fresh block) costs one uniform draw.
fn sample_poisson<R: Rng>(rng: &mut R, lambda: f64) -> u32 {
    if lambda <= 0.0 {
        return 0;
    }
    let u: f64 = rng.gen();
    let mut p = (-lambda).exp();
    let mut cdf = p;
    let mut k = 0u32;
    while u > cdf && k < 10_000 {
        k += 1;
        p *= lambda / f64::from(k);
        cdf += p;
        if p < 1e-300 {
            break;
        }
    }
    k
}

/// What ECC made of a successful read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EccReport {
    /// Most bits corrected in any one codeword of the read (0 = clean).
    pub max_corrected_bits: u32,
    /// True when `max_corrected_bits` reached the scrub threshold: the data is fine but the
    /// block should be copied elsewhere and erased before it decays further.
    pub scrub: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn poisson_mean_is_lambda() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 200_000;
        let sum: u64 = (0..n)
            .map(|_| u64::from(sample_poisson(&mut rng, 2.0)))
            .sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 2.0).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn rber_grows_with_wear() {
        let ecc = EccModel::bch(512, 4);
        assert!(ecc.rber(0, 10_000) < ecc.rber(5_000, 10_000));
        assert!(ecc.rber(5_000, 10_000) < ecc.rber(10_000, 10_000));
        assert_eq!(ecc.scrub_threshold_bits, 3);
    }
}
