//! Raw bit errors and the ECC that hides them.
//!
//! Two kinds of damage, modelled two ways:
//!
//! - **Random bit errors** (charge leaking, read disturb) are modelled statistically, not
//!   stored: every read draws a number of raw bit errors for each ECC codeword from a Poisson
//!   distribution whose rate grows with the block's wear. A codeword with at most `t` errors
//!   is corrected (the caller gets clean data and the count, so it can scrub a block before
//!   it degrades further, like MTD's -EUCLEAN); more than `t` is uncorrectable (-EBADMSG)
//!   and the caller gets the damaged bytes.
//! - **Damage stored in the cells** (a program torn by a power cut, a half-erased page, bytes
//!   changed in an image file) is caught the way a real controller catches it: at program
//!   time the chip writes `check_bytes` of ECC per data codeword into the end of the OOB
//!   (overwriting whatever the caller put there, as a hardware ECC engine does), and a full
//!   page read recomputes them. A mismatch is reported as uncorrectable, as real ECC reports
//!   an interrupted program. A codeword whose data and check bytes are all 0xFF reads as
//!   clean only in a page that is erased as a whole (data and OOB): controllers recognise an
//!   erased page, but a programmed page always has the check bytes its program computed
//!   (never all 0xFF), so an erased codeword inside a page with tags or other data is
//!   damage, not emptiness.
//!
//! The stored check is a detection code, not a real BCH or Hamming code: the first
//! `check_bytes` bytes of crc32c(codeword) (little-endian), then of crc32c(codeword ++ 1),
//! crc32c(codeword ++ 2), ... It never corrects; correction stays in the statistical model.
//! It covers the data codewords only; like Linux MTD's software ECC, it does not cover the
//! free OOB bytes, so a file system must check its own tags. A device whose geometry has
//! `oob_ecc_bytes == 0` (older images) stores and checks nothing.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::geometry::Geometry;

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
    /// OOB bytes of ECC stored per data codeword. 0 (the default of older sidecars) means
    /// the device stores no ECC bytes.
    #[serde(default)]
    pub check_bytes: u32,
}

impl EccModel {
    /// BCH-like code correcting `t` bits per `codeword_bytes`, with the default RBER curve.
    /// A binary BCH code over GF(2^m) needs m bits of check per corrected bit, with m the
    /// bits needed to index the codeword's bits: t = 4 over 512 bytes is 13 * 4 = 52 bits,
    /// 7 OOB bytes.
    pub fn bch(codeword_bytes: u32, t: u32) -> Self {
        let bits = u64::from(codeword_bytes) * 8;
        let m = u64::from(u64::BITS - bits.leading_zeros());
        Self {
            codeword_bytes,
            correctable_bits: t,
            scrub_threshold_bits: (t * 3).div_ceil(4).max(1),
            rber_fresh: 1e-9,
            rber_at_endurance: 1.2e-4,
            check_bytes: u32::try_from((m * u64::from(t)).div_ceil(8)).unwrap_or(u32::MAX),
        }
    }

    /// Linux MTD's software Hamming code: 1 bit corrected per `codeword_bytes` (256 in MTD)
    /// with 3 check bytes, a scrub after any corrected bit. Two codewords fill 6 of a
    /// small-page part's 16 OOB bytes.
    pub fn hamming(codeword_bytes: u32) -> Self {
        Self {
            correctable_bits: 1,
            scrub_threshold_bits: 1,
            check_bytes: 3,
            ..Self::bch(codeword_bytes, 1)
        }
    }

    /// OOB bytes the stored ECC of one page of `page_size_bytes` takes: one set of
    /// `check_bytes` per whole data codeword.
    pub fn oob_ecc_bytes(&self, page_size_bytes: u32) -> u32 {
        let codewords = page_size_bytes / self.codeword_bytes.max(1);
        codewords.saturating_mul(self.check_bytes)
    }

    /// Word `j` of a codeword's check stream, given the codeword's crc32c: the crc itself,
    /// then crc32c(codeword ++ j) for j >= 1 (see the module comment).
    fn check_word(crc: u32, j: usize) -> [u8; 4] {
        match j {
            0 => crc,
            j => crc32c::crc32c_append(crc, &(j as u32).to_le_bytes()),
        }
        .to_le_bytes()
    }

    /// Writes the check bytes of one data codeword into `out` (its length, at most
    /// `check_bytes`, is how many are written).
    pub fn check_value(&self, codeword: &[u8], out: &mut [u8]) {
        let crc = crc32c::crc32c(codeword);
        for (j, part) in out.chunks_mut(4).enumerate() {
            part.copy_from_slice(&Self::check_word(crc, j)[..part.len()]);
        }
    }

    /// True when a data codeword agrees with its stored check bytes, or when both are all
    /// 0xFF (an erased codeword, which controllers read as clean; [`Self::failed_codewords`]
    /// accepts that only in a page erased as a whole). Runs at every page read: one crc of
    /// the codeword and one short append per further word, nothing allocated.
    pub fn codeword_ok(&self, codeword: &[u8], check: &[u8]) -> bool {
        let matches = check.len() == self.check_bytes as usize && {
            let crc = crc32c::crc32c(codeword);
            check
                .chunks(4)
                .enumerate()
                .all(|(j, part)| part == &Self::check_word(crc, j)[..part.len()])
        };
        matches || (check.iter().all(|&b| b == 0xFF) && codeword.iter().all(|&b| b == 0xFF))
    }

    /// True when a device of this geometry stores ECC bytes (see [`crate::DeviceConfig::validate`]).
    fn stores(&self, geometry: &Geometry) -> bool {
        geometry.oob_ecc_bytes != 0 && self.check_bytes != 0 && self.codeword_bytes != 0
    }

    /// What the chip's ECC engine does when it programs `data`: writes the check bytes of
    /// every data codeword into the ECC area at the end of `oob` (codeword i's at
    /// `geometry.oob_ecc_offset() + i * check_bytes`). Does nothing when the geometry
    /// stores no ECC (`oob_ecc_bytes == 0`).
    pub fn store_check_bytes(&self, geometry: &Geometry, data: &[u8], oob: &mut [u8]) {
        if !self.stores(geometry) {
            return;
        }
        let per = self.check_bytes as usize;
        let area = &mut oob[geometry.oob_ecc_offset()..];
        for (cw, check) in data
            .chunks_exact(self.codeword_bytes as usize)
            .zip(area.chunks_exact_mut(per))
        {
            self.check_value(cw, check);
        }
    }

    /// Data codewords of a page (as stored: `data` and `oob`) whose stored check bytes do
    /// not match, by index. Empty when the geometry stores no ECC. An erased codeword (data
    /// and check bytes all 0xFF) passes only when the whole page is erased: a program
    /// always stores the check bytes it computed, so in a page that holds anything else
    /// (tags in the OOB, another codeword's data) it is damage, not an unwritten part.
    pub fn failed_codewords(&self, geometry: &Geometry, data: &[u8], oob: &[u8]) -> Vec<usize> {
        if !self.stores(geometry) {
            return Vec::new();
        }
        let per = self.check_bytes as usize;
        let area = &oob[geometry.oob_ecc_offset()..];
        let erased = |b: &[u8]| b.iter().all(|&x| x == 0xFF);
        let mut page_erased = None;
        let mut failed = Vec::new();
        for (i, (cw, check)) in data
            .chunks_exact(self.codeword_bytes as usize)
            .zip(area.chunks_exact(per))
            .enumerate()
        {
            let ok = if erased(check) && erased(cw) {
                *page_erased.get_or_insert_with(|| erased(data) && erased(oob))
            } else {
                self.codeword_ok(cw, check)
            };
            if !ok {
                failed.push(i);
            }
        }
        failed
    }

    /// Raw bit error rate of a block that has been erased `cycles` times.
    pub fn rber(&self, cycles: u32, endurance: u32) -> f64 {
        let x = f64::from(cycles) / f64::from(endurance.max(1));
        self.rber_fresh + self.rber_at_endurance * x * x * x
    }

    /// The error distribution of one codeword of `bits` bits in a block of this `rber`;
    /// made once per read and drawn from for each codeword of that size.
    pub(crate) fn errors_per_codeword(&self, rber: f64, bits: u32) -> Poisson {
        Poisson::new(rber * f64::from(bits))
    }
}

/// A Poisson distribution with its `exp(-lambda)` computed once (a page read draws from
/// the same one for every data codeword).
#[derive(Clone, Copy)]
pub(crate) struct Poisson {
    lambda: f64,
    p0: f64,
}

impl Poisson {
    pub(crate) fn new(lambda: f64) -> Self {
        Self {
            lambda,
            p0: (-lambda).exp(),
        }
    }

    /// One draw by inversion. Rates here are far below 10, where inversion is exact and
    /// cheap; the common case (a fresh block) costs one uniform draw.
    pub(crate) fn sample<R: Rng>(&self, rng: &mut R) -> u32 {
        let lambda = self.lambda;
        if lambda <= 0.0 {
            return 0;
        }
        let u: f64 = rng.gen();
        let mut p = self.p0;
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
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn poisson_mean_is_lambda() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 200_000;
        let sum: u64 = (0..n)
            .map(|_| u64::from(Poisson::new(2.0).sample(&mut rng)))
            .sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 2.0).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn check_bytes_follow_the_documented_stream() {
        // BCH t = 4 over 512 bytes stores 7 check bytes: crc32c, then 3 bytes of the
        // crc with word index 1 appended (images depend on this exact layout).
        let ecc = EccModel::bch(512, 4);
        assert_eq!(ecc.check_bytes, 7);
        let cw: Vec<u8> = (0..512u32).map(|i| (i * 7 + 3) as u8).collect();
        let crc = crc32c::crc32c(&cw);
        let mut want = crc.to_le_bytes().to_vec();
        want.extend_from_slice(&crc32c::crc32c_append(crc, &1u32.to_le_bytes()).to_le_bytes()[..3]);
        let mut got = [0u8; 7];
        ecc.check_value(&cw, &mut got);
        assert_eq!(got.as_slice(), want.as_slice());
        assert!(ecc.codeword_ok(&cw, &got));
        got[6] ^= 1;
        assert!(!ecc.codeword_ok(&cw, &got));
        assert!(
            ecc.codeword_ok(&[0xFF; 512], &[0xFF; 7]),
            "erased reads clean"
        );
    }

    /// The chip marks a page verified when its program completes, skipping the stored
    /// check at the next read: sound only if check bytes always pass their own check.
    #[test]
    fn stored_check_bytes_pass_their_own_check_on_every_preset() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for p in crate::preset::presets() {
            let (g, ecc) = (p.config.geometry, p.config.ecc);
            for _ in 0..4 {
                let data: Vec<u8> = (0..g.page_size_bytes).map(|_| rng.gen()).collect();
                let mut oob: Vec<u8> = (0..g.oob_size_bytes).map(|_| rng.gen()).collect();
                ecc.store_check_bytes(&g, &data, &mut oob);
                assert!(
                    ecc.failed_codewords(&g, &data, &oob).is_empty(),
                    "{}",
                    p.name
                );
            }
        }
    }

    /// An erased codeword reads clean in an erased page, and as damage in a programmed one
    /// (tags in the OOB, or another codeword's data): an all-0xFF codeword with all-0xFF
    /// check bytes is never what a program leaves.
    #[test]
    fn an_erased_codeword_in_a_programmed_page_is_damage() {
        let p = crate::preset::presets()
            .into_iter()
            .find(|p| p.name == "smallblock-64m")
            .expect("the small-page preset");
        let (g, ecc) = (p.config.geometry, p.config.ecc);
        let data = vec![0xFF; g.page_size_bytes as usize];
        let mut oob = vec![0xFF; g.oob_size_bytes as usize];
        assert!(ecc.failed_codewords(&g, &data, &oob).is_empty());
        // Tags in the free OOB bytes, data and ECC erased: every codeword is damage.
        oob[3] = 0x12;
        let all: Vec<usize> = (0..(g.page_size_bytes / ecc.codeword_bytes) as usize).collect();
        assert_eq!(ecc.failed_codewords(&g, &data, &oob), all);
        // A program of all-0xFF data stores its own (non-0xFF) check bytes: clean.
        ecc.store_check_bytes(&g, &data, &mut oob);
        assert!(ecc.failed_codewords(&g, &data, &oob).is_empty());
    }

    #[test]
    fn rber_grows_with_wear() {
        let ecc = EccModel::bch(512, 4);
        assert!(ecc.rber(0, 10_000) < ecc.rber(5_000, 10_000));
        assert!(ecc.rber(5_000, 10_000) < ecc.rber(10_000, 10_000));
        assert_eq!(ecc.scrub_threshold_bits, 3);
    }
}
