//! Which chips of an array with parity hold what the array says they hold.
//!
//! Parity rebuilds one missing piece of a stripe, but only if it knows which piece is
//! missing: a chip that answers with the wrong bytes (a new chip whose rebuild was cut, a
//! blank chip put in, an old copy of a chip that the array went on without) must never be
//! read as data. So every chip carries a membership record in its label (the few bytes kept
//! beside its pages, see [`crate::backend::Storage::label`]), and the array trusts a chip
//! only when the record says it is a complete member:
//!
//! - the array's id (UBI's image sequence number, the same on every chip of one format),
//!   the chip's own slot, the number of chips;
//! - a generation, raised each time the set of members changes, and that set.
//!
//! At assembly the newest record (highest generation) names the members. A chip is trusted
//! when it is one of them and its own record is at most one generation older (a change is
//! written chip after chip, so a cut can leave the others one behind; none of them missed
//! data, as no stripe is written until every record of the change is). Any other chip is
//! treated as failed: the array runs degraded without it and `rebuild` brings it back.
//!
//! When the members change the records are written again, before any stripe is written
//! without the chip that left: at assembly (a chip missing, or not trusted), when a chip
//! fails under a running array, and by a rebuild, which takes its chip out first (a cut
//! rebuild leaves a chip that is no member) and puts it back in when every piece is written
//! (its own record first). An old copy of a chip then carries an older generation, or is
//! not in the newest set: it is never trusted again.
//!
//! An array whose chips carry no record at all (made before records) is trusted as it is,
//! and gets records at its first change of members.

use std::collections::BTreeMap;

use crate::backend::LABEL_BYTES;
use crate::device::Flash;
use crate::error::FlashError;

const MAGIC: &[u8; 8] = b"NKMEMBR1";
/// Bytes of a record before its CRC.
const BODY: usize = 8 + 4 * 4 + 8 + 8;

/// One chip's membership record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// The array's id: UBI's image sequence number.
    pub array: u32,
    /// The chip's slot in the array.
    pub chip: u32,
    pub chips: u32,
    pub generation: u64,
    /// The members at this generation, one bit per chip.
    pub members: u64,
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(LABEL_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.array.to_le_bytes());
        out.extend_from_slice(&self.chip.to_le_bytes());
        out.extend_from_slice(&self.chips.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.members.to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(LABEL_BYTES, 0xFF);
        out
    }

    /// The record in a label, if it holds a whole one (a blank or torn label holds none).
    pub fn decode(label: &[u8]) -> Option<Record> {
        let body = label.get(..BODY)?;
        let crc = label.get(BODY..BODY + 4)?;
        if &body[..8] != MAGIC || crc32c::crc32c(body).to_le_bytes() != crc {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(body[i..i + 4].try_into().expect("4"));
        let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8"));
        Some(Record {
            array: u32_at(8),
            chip: u32_at(12),
            chips: u32_at(16),
            generation: u64_at(24),
            members: u64_at(32),
        })
    }
}

/// The array's membership as assembled, and kept up to date while it runs.
#[derive(Clone, Debug)]
pub struct Membership {
    array: u32,
    chips: u32,
    /// No chip carries a record (an array made before records): every chip is trusted.
    unrecorded: bool,
    generation: u64,
    /// The members the records say (every chip when unrecorded).
    members: u64,
    /// A trusted chip's record is behind `generation` (a change cut part way).
    behind: bool,
    /// Chips that answer but are not trusted, and why.
    excluded: BTreeMap<u32, String>,
}

/// Arrays of more chips than a record's set can name keep no records.
const MAX_CHIPS: u32 = 64;

fn bit(chip: u32) -> u64 {
    1u64 << chip
}

fn all(chips: u32) -> u64 {
    if chips >= 64 {
        u64::MAX
    } else {
        bit(chips) - 1
    }
}

impl Membership {
    /// A new array: every chip a member, nothing written yet.
    pub fn new(array: u32, chips: u32) -> Self {
        Membership {
            array,
            chips,
            unrecorded: chips > MAX_CHIPS,
            generation: 0,
            members: all(chips),
            behind: false,
            excluded: BTreeMap::new(),
        }
    }

    /// What the chips' labels say. `labels[c]` is chip c's label, or `None` for a chip that
    /// failed whole (it is no member, whatever its label).
    pub fn assess(array: u32, labels: &[Option<Vec<u8>>]) -> Self {
        let chips = labels.len() as u32;
        let mut m = Membership::new(array, chips);
        if m.unrecorded {
            return m;
        }
        let records: Vec<Option<Record>> = labels
            .iter()
            .map(|l| l.as_deref().and_then(Record::decode))
            .collect();
        let ours =
            |c: usize, r: &Record| r.array == array && r.chip == c as u32 && r.chips == chips;
        let newest = records
            .iter()
            .enumerate()
            .filter_map(|(c, r)| r.filter(|r| ours(c, r)))
            .max_by_key(|r| (r.generation, std::cmp::Reverse(r.chip)));
        let Some(newest) = newest else {
            // No record of this array anywhere: made before records.
            m.unrecorded = records.iter().all(Option::is_none);
            if !m.unrecorded {
                // Every label is another array's: nothing here can be trusted.
                for (c, l) in labels.iter().enumerate() {
                    if l.is_some() {
                        m.excluded
                            .insert(c as u32, "it carries another array's record".into());
                    }
                }
            }
            return m;
        };
        m.generation = newest.generation;
        m.members = newest.members & all(chips);
        for (c, label) in labels.iter().enumerate() {
            let chip = c as u32;
            if label.is_none() {
                continue;
            }
            let why = match records[c] {
                None => Some(
                    "it carries no membership record (a new or blank chip whose rebuild has \
                     not completed)"
                        .to_string(),
                ),
                Some(r) if !ours(c, &r) => Some(format!(
                    "its membership record is not this array's chip {chip} (it says chip {} \
                     of {}, array {:#x})",
                    r.chip, r.chips, r.array
                )),
                Some(_) if m.members & bit(chip) == 0 => Some(format!(
                    "the array went on without it (generation {}): its pages are out of date \
                     or its rebuild has not completed",
                    m.generation
                )),
                Some(r) if r.generation + 1 < m.generation => Some(format!(
                    "its membership record is older than the array's (generation {} of {}): \
                     its pages are out of date",
                    r.generation, m.generation
                )),
                Some(r) => {
                    m.behind |= r.generation != m.generation;
                    None
                }
            };
            if let Some(why) = why {
                m.excluded.insert(chip, why);
            }
        }
        m
    }

    /// Present chips that are not trusted, and why.
    pub fn excluded(&self) -> &BTreeMap<u32, String> {
        &self.excluded
    }

    /// The chip answers and may be read again (a rebuild has taken it in hand).
    pub fn readmit(&mut self, chip: u32) {
        self.excluded.remove(&chip);
    }

    /// The chip answers but is not to be trusted.
    pub fn exclude(&mut self, chip: u32, why: impl Into<String>) {
        self.excluded.insert(chip, why.into());
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_member(&self, chip: u32) -> bool {
        chip < self.chips && (self.unrecorded || self.members & bit(chip) != 0)
    }

    /// Whether the records must be written for the chips `live` (not dead) to be the
    /// members: the set changed, or a change was cut part way.
    pub fn needs_record(&self, live: &[u32]) -> bool {
        if self.chips > MAX_CHIPS {
            return false;
        }
        let want = live.iter().fold(0, |m, &c| m | bit(c));
        if self.unrecorded {
            return want != all(self.chips);
        }
        want != self.members || self.behind
    }

    /// Makes `members` the members: a new generation, recorded on each of them in `order`
    /// (the first ones first). A chip that fails on the way is left out (it will be noted
    /// dead by its next operation); any other error is returned.
    pub fn record<F: Flash>(
        &mut self,
        dev: &mut F,
        members: &[u32],
        order: &[u32],
    ) -> Result<(), FlashError> {
        if self.chips > MAX_CHIPS {
            return Ok(());
        }
        self.generation += 1;
        self.members = members.iter().fold(0, |m, &c| m | bit(c));
        self.unrecorded = false;
        self.behind = false;
        let rest = members.iter().filter(|c| !order.contains(c));
        let order: Vec<u32> = order.iter().chain(rest).copied().collect();
        for chip in order {
            let r = Record {
                array: self.array,
                chip,
                chips: self.chips,
                generation: self.generation,
                members: self.members,
            };
            match dev.set_chip_label(chip, &r.encode()) {
                Ok(()) | Err(FlashError::ChipFailed(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(array: u32, chip: u32, generation: u64, members: u64) -> Option<Vec<u8>> {
        Some(
            Record {
                array,
                chip,
                chips: 4,
                generation,
                members,
            }
            .encode(),
        )
    }

    #[test]
    fn records_round_trip_and_blank_or_torn_ones_are_none() {
        let r = Record {
            array: 7,
            chip: 2,
            chips: 4,
            generation: 9,
            members: 0b1011,
        };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        assert_eq!(Record::decode(&[0xFF; LABEL_BYTES]), None);
        let mut torn = r.encode();
        torn[30] ^= 1;
        assert_eq!(Record::decode(&torn), None);
        assert_eq!(Record::decode(&[]), None);
    }

    #[test]
    fn only_complete_current_members_are_trusted() {
        let blank = Some(vec![0xFF; LABEL_BYTES]);
        // Chip 2 blank (a replacement not rebuilt), chip 3 an old copy, chip 1 one behind.
        let m = Membership::assess(
            5,
            &[
                label(5, 0, 4, 0b1111),
                label(5, 1, 3, 0b1111),
                blank,
                label(5, 3, 2, 0b1111),
            ],
        );
        assert_eq!(m.excluded().keys().copied().collect::<Vec<_>>(), vec![2, 3]);
        assert!(m.needs_record(&[0, 1]));
        // Left out by the newest record; another array's chip; a dead chip is not judged.
        let m = Membership::assess(
            5,
            &[
                label(5, 0, 4, 0b1011),
                label(6, 1, 9, 0b1111),
                label(5, 2, 3, 0b1111),
                None,
            ],
        );
        assert_eq!(m.excluded().keys().copied().collect::<Vec<_>>(), vec![1, 2]);
        // No record anywhere: an array made before records, trusted as it is.
        let m = Membership::assess(5, &[Some(vec![0xFF; 8]), Some(Vec::new()), None, None]);
        assert!(m.excluded().is_empty() && m.is_member(3));
        assert!(m.needs_record(&[0, 1]) && !m.needs_record(&[0, 1, 2, 3]));
    }
}
