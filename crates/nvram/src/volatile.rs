//! Which stored words are not yet durable, and what a power failure makes of them.
//!
//! The NVRAM's bytes always hold the *current* contents (what a read returns, as a CPU reads
//! its own stores back from its cache). Beside them this module keeps, for every aligned
//! 8-byte word stored to since it was last persisted, the word's *persisted* contents. That
//! is the whole durable state: persisted = current, except for the words listed here. Memory
//! is proportional to the unpersisted words, not to the NVRAM.
//!
//! A crash resolves each listed word, in address order, from one seeded generator:
//! - *kept*: the word keeps its current contents;
//! - *dropped*: it reverts to its persisted contents;
//! - *torn*: each of its 8 bytes independently takes the current or the persisted value.
//!
//! A word that took an aligned 8-byte store ([`crate::Nvram::write_u64`]) since its last
//! persist is failure-atomic: it is kept or dropped, never torn. Byte stores to such a word
//! fold into its current value, so the crash gives all-persisted or all-current: outcomes
//! hardware can give too (it persists one cache line's stores in order).
//!
//! Tearing other words byte by byte is harsher than x86 hardware, which persists stores to
//! one cache line in order; code that survives this model survives that. A byte stored twice
//! comes back as its persisted or its last value, never the intermediate one.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::cost::WORD_BYTES;

const W: usize = WORD_BYTES as usize;

/// What a crash did to the words that were not persisted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CrashReport {
    /// Words that kept their current contents.
    pub kept: u64,
    /// Words that reverted to their persisted contents.
    pub dropped: u64,
    /// Words whose bytes were each chosen from the current or the persisted contents.
    pub torn: u64,
}

/// A word stored to since its last persist.
#[derive(Clone, Copy, Debug)]
struct VolatileWord {
    /// Contents as of the last persist (what a crash may revert to).
    persisted: [u8; W],
    /// Took an aligned 8-byte store since that persist: never torn.
    atomic: bool,
}

/// The unpersisted words of one NVRAM, by word index.
#[derive(Clone, Debug, Default)]
pub struct VolatileWords {
    words: BTreeMap<u64, VolatileWord>,
}

/// Word indexes that the byte range `offset..offset + len` touches (`len` > 0).
fn word_range(offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    offset / WORD_BYTES..=(offset + len - 1) / WORD_BYTES
}

impl VolatileWords {
    /// Notes a store of `len` bytes at `offset`, before the store changes `bytes` (the whole
    /// NVRAM as it is now): words not yet volatile remember their persisted contents here.
    /// `atomic` is true for an aligned 8-byte store.
    pub fn before_store(&mut self, bytes: &[u8], offset: u64, len: u64, atomic: bool) {
        if len == 0 {
            return;
        }
        debug_assert!(!atomic || (offset % WORD_BYTES == 0 && len == WORD_BYTES));
        for word in word_range(offset, len) {
            let start = (word * WORD_BYTES) as usize;
            let entry = self.words.entry(word).or_insert_with(|| VolatileWord {
                persisted: bytes[start..start + W].try_into().expect("8 bytes"),
                atomic: false,
            });
            entry.atomic |= atomic;
        }
    }

    /// Makes the words touching `offset..offset + len` durable. Returns how many of them
    /// were volatile.
    pub fn persist(&mut self, offset: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let words: Vec<u64> = self
            .words
            .range(word_range(offset, len))
            .map(|(&w, _)| w)
            .collect();
        for w in &words {
            self.words.remove(w);
        }
        words.len() as u64
    }

    /// Makes every word durable. Returns how many were volatile.
    pub fn persist_all(&mut self) -> u64 {
        let n = self.words.len() as u64;
        self.words.clear();
        n
    }

    /// Words stored to since their last persist.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Power fails: rewrites `bytes` (the whole NVRAM) to what survives, chosen from `seed`,
    /// and leaves every word durable.
    pub fn crash(&mut self, bytes: &mut [u8], seed: u64) -> CrashReport {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut report = CrashReport::default();
        for (word, v) in std::mem::take(&mut self.words) {
            let start = (word * WORD_BYTES) as usize;
            let current = &mut bytes[start..start + W];
            let fates = if v.atomic { 2 } else { 3 };
            match rng.gen_range(0..fates) {
                0 => report.kept += 1,
                1 => {
                    current.copy_from_slice(&v.persisted);
                    report.dropped += 1;
                }
                _ => {
                    for (byte, old) in current.iter_mut().zip(v.persisted) {
                        if rng.gen::<bool>() {
                            *byte = old;
                        }
                    }
                    report.torn += 1;
                }
            }
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_first_persisted_contents_until_persist() {
        let mut bytes = vec![1u8; 32];
        let mut v = VolatileWords::default();
        v.before_store(&bytes, 6, 4, false); // words 0 and 1
        bytes[6..10].fill(2);
        v.before_store(&bytes, 6, 1, false); // word 0 again: keeps the 1s
        bytes[6] = 3;
        assert_eq!(v.len(), 2);
        assert_eq!(v.persist(8, 1), 1);
        assert_eq!(v.persist(8, 1), 0);
        let report = v.crash(&mut bytes, 0);
        assert_eq!(report.kept + report.dropped + report.torn, 1);
        assert!(v.is_empty());
        assert_eq!(
            &bytes[8..10],
            &[2, 2],
            "the persisted word survives as written"
        );
    }
}
