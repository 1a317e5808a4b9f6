//! Block summaries (YAFFS2 has them): the tags of every page of a block in one page, so
//! that a mount reads one page per full block instead of one per page. A summary is the
//! payload of a special page written as the block's last page when the block fills, or at
//! the first free page when the file system seals a block early (see docs/format.md).
//!
//! A summary at page q with n entries describes pages q - n .. q. When n < q the block's
//! tags did not fit one page (large blocks: a striped array's block is p chips' blocks):
//! page q - n - 1 holds the summary of the pages before it, and so on back to page 0. The
//! write path starts a new segment, writing the summary so far, whenever the next entry
//! would not fit.
//!
//! Payload: varint entry count, then per page before the summary one entry:
//!
//! | tag | entry |
//! |---|---|
//! | 0 | nothing usable (torn, spoiled or garbage) |
//! | 1 | data, full chunk: varint obj, varint chunk, zigzag varint (serial - base) |
//! | 2 | data, partial chunk: as 1, then varint byte count |
//! | 3 | header with facts: varint obj, zigzag varint (version - base), u8 type and flags, varint parent, varint size |
//! | 4 | header without facts (the page must be read): varint obj, zigzag varint (version - base) |
//!
//! `base` is the frame's id: the write serial of the block's first page.

use super::tags::{HeaderFacts, SpecialKind};
use super::{special::Special, unzigzag, zigzag, Put, Reader};
use crate::types::{Ino, Kind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryEntry {
    Garbage,
    Data {
        obj: Ino,
        chunk: u32,
        n_bytes: u32,
        serial: u64,
    },
    Header {
        obj: Ino,
        version: u64,
        /// `None`: the summary did not record them (no room); the page must be read.
        facts: Option<HeaderFacts>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Write serial of the block's first page.
    pub base_serial: u64,
    /// One per page before the summary, in page order.
    pub entries: Vec<SummaryEntry>,
}

impl Summary {
    /// The summary as a special page's frame, fitted to `page_size`: if all facts do not
    /// fit, header entries drop theirs (biggest first) until it does. `None` if even that
    /// is too big (cannot happen for the geometries the tag layouts allow).
    pub fn to_special(&self, page_size: usize) -> Option<Special> {
        let cap = Special::capacity(page_size);
        let mut s = self.clone();
        loop {
            let payload = s.payload(page_size as u32);
            if payload.len() <= cap {
                return Some(Special {
                    kind: SpecialKind::Summary,
                    id: s.base_serial,
                    index: s.entries.len() as u32,
                    payload,
                });
            }
            // Drop the facts of the header entry that costs most.
            let worst = s
                .entries
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match e {
                    SummaryEntry::Header { facts: Some(f), .. } => Some((
                        super::varint_len(f.size) + super::varint_len(u64::from(f.parent)),
                        i,
                    )),
                    _ => None,
                })
                .max()?
                .1;
            if let SummaryEntry::Header { facts, .. } = &mut s.entries[worst] {
                *facts = None;
            }
        }
    }

    /// Bytes `payload` gives an entry (with its facts; they may be dropped to fit).
    pub fn entry_len(e: &SummaryEntry, base_serial: u64, page_size: u32) -> usize {
        let mut b = Vec::with_capacity(32);
        put_entry(&mut b, e, base_serial, page_size);
        b.len()
    }

    /// Whether a summary of `entries` more entries, `bytes` of them, fits one page.
    pub fn fits(entries: usize, bytes: usize, page_size: u32) -> bool {
        super::varint_len(entries as u64) + bytes <= Special::capacity(page_size as usize)
    }

    /// Joins the summary of an earlier segment of a block (ending just before the summary
    /// page at which this one starts) with this one: one summary of both, the earlier
    /// summary's own page counted as garbage.
    pub fn after(mut earlier: Summary, later: Summary) -> Option<Summary> {
        if earlier.base_serial != later.base_serial {
            return None;
        }
        earlier.entries.push(SummaryEntry::Garbage);
        earlier.entries.extend(later.entries);
        Some(earlier)
    }

    pub(crate) fn payload(&self, page_size: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_varint(self.entries.len() as u64);
        for e in &self.entries {
            put_entry(&mut b, e, self.base_serial, page_size);
        }
        b
    }

    /// Decodes a summary page's frame. `max_entries`: the pages a summary may describe.
    pub fn from_special(s: &Special, page_size: u32, max_entries: usize) -> Option<Summary> {
        if s.kind != SpecialKind::Summary {
            return None;
        }
        let base = s.id as i64;
        let mut r = Reader::new(&s.payload);
        let n = r.count(1)?;
        if n > max_entries || n != s.index as usize {
            return None;
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let tag = r.u8()?;
            let e = match tag {
                0 => SummaryEntry::Garbage,
                1 | 2 => {
                    let obj = r.varint32()?;
                    let chunk = r.varint32()?;
                    let serial = base.wrapping_add(unzigzag(r.varint()?)) as u64;
                    let n_bytes = if tag == 1 {
                        page_size
                    } else {
                        let n = r.varint32()?;
                        if n > page_size {
                            return None;
                        }
                        n
                    };
                    SummaryEntry::Data {
                        obj,
                        chunk,
                        n_bytes,
                        serial,
                    }
                }
                3 | 4 => {
                    let obj = r.varint32()?;
                    let version = base.wrapping_add(unzigzag(r.varint()?)) as u64;
                    let facts = if tag == 3 {
                        let tf = r.u8()?;
                        let kind = match tf & 0x0F {
                            0 => None,
                            c => Some(Kind::from_code(c)?),
                        };
                        Some(HeaderFacts {
                            kind,
                            needs_read: tf & 0x10 != 0,
                            parent: r.varint32()?,
                            size: r.varint()?,
                        })
                    } else {
                        None
                    };
                    SummaryEntry::Header {
                        obj,
                        version,
                        facts,
                    }
                }
                _ => return None,
            };
            entries.push(e);
        }
        if r.left() != 0 {
            return None;
        }
        Some(Summary {
            base_serial: s.id,
            entries,
        })
    }
}

/// Appends one entry as `payload` lays it out.
fn put_entry(b: &mut Vec<u8>, e: &SummaryEntry, base_serial: u64, page_size: u32) {
    let delta = |s: u64| zigzag((s as i64).wrapping_sub(base_serial as i64));
    match *e {
        SummaryEntry::Garbage => b.put_u8(0),
        SummaryEntry::Data {
            obj,
            chunk,
            n_bytes,
            serial,
        } => {
            let full = n_bytes == page_size;
            b.put_u8(if full { 1 } else { 2 });
            b.put_varint(u64::from(obj));
            b.put_varint(u64::from(chunk));
            b.put_varint(delta(serial));
            if !full {
                b.put_varint(u64::from(n_bytes));
            }
        }
        SummaryEntry::Header {
            obj,
            version,
            facts,
        } => {
            b.put_u8(if facts.is_some() { 3 } else { 4 });
            b.put_varint(u64::from(obj));
            b.put_varint(delta(version));
            if let Some(f) = facts {
                b.put_u8(f.kind.map_or(0, Kind::code) | u8::from(f.needs_read) << 4);
                b.put_varint(u64::from(f.parent));
                b.put_varint(f.size);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big_header(obj: Ino) -> SummaryEntry {
        SummaryEntry::Header {
            obj,
            version: 3,
            facts: Some(HeaderFacts {
                kind: Some(Kind::File),
                parent: u32::MAX,
                size: u64::MAX,
                needs_read: false,
            }),
        }
    }

    #[test]
    fn round_trip() {
        let s = Summary {
            base_serial: 1000,
            entries: vec![
                SummaryEntry::Data {
                    obj: 5,
                    chunk: 0,
                    n_bytes: 512,
                    serial: 1000,
                },
                SummaryEntry::Garbage,
                SummaryEntry::Data {
                    obj: 5,
                    chunk: 1,
                    n_bytes: 17,
                    serial: 1002,
                },
                SummaryEntry::Header {
                    obj: 5,
                    version: 10, // a copied header: older than the block
                    facts: Some(HeaderFacts {
                        kind: Some(Kind::File),
                        parent: 1,
                        size: 529,
                        needs_read: false,
                    }),
                },
                SummaryEntry::Header {
                    obj: 6,
                    version: 1003,
                    facts: None,
                },
            ],
        };
        let sp = s.to_special(512).unwrap();
        let mut page = sp.encode();
        page.resize(512, 0xFF);
        let back = Special::decode(&page).unwrap();
        assert_eq!(Summary::from_special(&back, 512, 31), Some(s.clone()));
        assert_eq!(
            Summary::from_special(&back, 512, 4),
            None,
            "too many entries"
        );
    }

    #[test]
    fn headers_drop_facts_until_it_fits() {
        let s = Summary {
            base_serial: 1 << 50,
            entries: (0..31).map(big_header).collect(),
        };
        let sp = s.to_special(512).expect("fits once facts are dropped");
        assert!(sp.encode().len() <= 512);
        let back = Summary::from_special(&sp, 512, 31).unwrap();
        let with = back
            .entries
            .iter()
            .filter(|e| matches!(e, SummaryEntry::Header { facts: Some(_), .. }))
            .count();
        assert!(with > 0 && with < 31, "{with} kept their facts");
    }
}
