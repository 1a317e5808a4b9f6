//! Page tags: what every programmed page says about itself, in the free OOB bytes (after
//! the bad-block marker, before the ECC bytes). Two layouts, chosen by how many free OOB
//! bytes the geometry leaves:
//!
//! - **Large** (34 bytes; 2 KiB and larger pages): kind, object, chunk (or, for a header,
//!   its parent), byte count (or the file size), a full 64-bit serial, the data's CRC32C,
//!   the start of the run a block's last page ends, and a CRC32C of the tags. One flipped
//!   bit is corrected (as YAFFS2 corrects its packed tags with a Hamming code): the
//!   chip's ECC covers only the data, and a page whose tags fail is a page whose owner
//!   is unknown, so its data would be lost to whichever file held it. CRC32C over 30
//!   bytes has a Hamming distance of at least 6, so one flip maps back to one tag only
//!   (`correct_one_bit` checks that no second candidate matches).
//! - **Small** (8 bytes; 512-byte pages with MTD's 6 bytes of Hamming ECC): 20-bit object,
//!   18-bit chunk, the low 14 bits of the serial, a "partial chunk" bit (the byte count is
//!   then in band, in the chunk's last bytes), and an 11-bit check (the low bits of a
//!   CRC32C). Torn data is caught by the chip's ECC, header
//!   records and special pages carry their own CRC32C in band, and the full serial of
//!   every page of a full block is in its summary (see docs/format.md for the trade).
//!
//! Serials: a data page carries the write serial it was programmed with (a cleaning copy
//! gets a new one); a header page carries its record's version (the serial it was first
//! written with, kept when cleaning copies it).

use super::{crc, FORMAT_VERSION};
use crate::types::{Ino, Kind};

/// Bytes of the large layout.
pub const LARGE_TAG_BYTES: usize = 34;
/// Bytes of the small layout.
pub const SMALL_TAG_BYTES: usize = 8;
/// Serial bits the small layout keeps.
pub const SMALL_SERIAL_BITS: u32 = 14;
/// Largest object number the small layout can hold (all ones means erased).
pub const SMALL_MAX_OBJ: Ino = 0xF_FFFE;
/// Largest chunk index the small layout can hold (the two above mark headers and specials).
pub const SMALL_MAX_CHUNK: u32 = 0x3_FFFD;
const SMALL_CHUNK_HEADER: u64 = 0x3_FFFF;
const SMALL_CHUNK_SPECIAL: u64 = 0x3_FFFE;
/// `run_start` value meaning "no run" in the large layout.
const NO_RUN: u16 = 0xFFFF;

/// Which tag layout a geometry uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagLayout {
    Large,
    Small,
}

impl TagLayout {
    /// The layout that fits `free_oob` bytes, if any.
    pub fn for_free_oob(free_oob: usize) -> Option<TagLayout> {
        if free_oob >= LARGE_TAG_BYTES {
            Some(TagLayout::Large)
        } else if free_oob >= SMALL_TAG_BYTES {
            Some(TagLayout::Small)
        } else {
            None
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            TagLayout::Large => LARGE_TAG_BYTES,
            TagLayout::Small => SMALL_TAG_BYTES,
        }
    }

    /// Largest object number the layout can name.
    pub fn max_obj(self) -> Ino {
        match self {
            TagLayout::Large => u32::MAX - 1,
            TagLayout::Small => SMALL_MAX_OBJ,
        }
    }

    /// Largest chunk index the layout can name.
    pub fn max_chunk(self) -> u32 {
        match self {
            TagLayout::Large => u32::MAX - 3,
            TagLayout::Small => SMALL_MAX_CHUNK,
        }
    }
}

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    Data,
    Header,
    Special(SpecialKind),
}

/// Pages that belong to the file system rather than to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecialKind {
    /// A block summary (the last page of a full block, or where a block was sealed).
    Summary,
    /// A page of a checkpoint stream.
    Checkpoint,
    /// An anchor block page: the file system record (page 0) or a checkpoint pointer.
    Anchor,
}

impl SpecialKind {
    pub fn code(self) -> u8 {
        match self {
            SpecialKind::Summary => 1,
            SpecialKind::Checkpoint => 2,
            SpecialKind::Anchor => 3,
        }
    }

    pub fn from_code(c: u8) -> Option<SpecialKind> {
        Some(match c {
            1 => SpecialKind::Summary,
            2 => SpecialKind::Checkpoint,
            3 => SpecialKind::Anchor,
            _ => return None,
        })
    }
}

/// A serial as the tags hold it: whole (large layout) or only its low bits (small).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serial {
    Full(u64),
    Low(u16),
}

impl Serial {
    pub fn full(self) -> Option<u64> {
        match self {
            Serial::Full(s) => Some(s),
            Serial::Low(_) => None,
        }
    }

    /// The low `SMALL_SERIAL_BITS` bits.
    pub fn low(self) -> u16 {
        match self {
            Serial::Full(s) => (s & ((1 << SMALL_SERIAL_BITS) - 1)) as u16,
            Serial::Low(l) => l,
        }
    }
}

/// The small layout keeps only the low bits of a serial; the full value is the one
/// nearest below `upper` with those bits (`upper` bounds every serial that may be on
/// flash; a block without a summary is never older than the window, see docs/format.md).
pub fn widen_serial(low: u16, upper: u64) -> u64 {
    let m = 1u64 << SMALL_SERIAL_BITS;
    let low = u64::from(low) & (m - 1);
    let base = upper & !(m - 1);
    let s = base | low;
    if s > upper {
        s.saturating_sub(m)
    } else {
        s
    }
}

/// What a header page's tags (large layout) or a summary say about its object, so that a
/// scan need not read the header itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderFacts {
    /// The object's type; `None` when it has no names left (deleted: a tombstone).
    pub kind: Option<Kind>,
    /// The directory of its name (0 when it has none, or several: see `needs_read`).
    pub parent: Ino,
    /// File size as of this header.
    pub size: u64,
    /// The record holds what these facts cannot say (several names, name updates for
    /// other objects, truncation floors): a scan reads it.
    pub needs_read: bool,
}

impl HeaderFacts {
    fn type_code(&self) -> u8 {
        self.kind.map_or(0, Kind::code)
    }
}

/// Tags of a data page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataTags {
    pub obj: Ino,
    pub chunk: u32,
    /// Bytes of the chunk in use; `None` in the small layout when the chunk is partial
    /// (its length is then in band).
    pub n_bytes: Option<u32>,
    pub serial: Serial,
    /// CRC32C of the `n_bytes` data bytes (large layout only).
    pub data_crc: Option<u32>,
    /// On a block's last page (large layout): the block's pages from this one to the last
    /// are one run (the same object, consecutive chunks, consecutive serials, all full but
    /// the last).
    pub run_start: Option<u32>,
}

/// Tags of a header page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderTags {
    pub obj: Ino,
    /// The record's version.
    pub version: Serial,
    /// Large layout only.
    pub facts: Option<HeaderFacts>,
}

/// Tags of a special page (its details are in band).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialTags {
    pub kind: SpecialKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tags {
    Data(DataTags),
    Header(HeaderTags),
    Special(SpecialTags),
}

/// What a tag area decodes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagRead {
    /// All 0xFF: nothing was programmed here (as far as the tags tell).
    Erased,
    /// Tags that fail their check or make no sense: a torn or corrupted page.
    Garbage,
    Valid(Tags),
}

impl Tags {
    pub fn kind(&self) -> PageKind {
        match self {
            Tags::Data(_) => PageKind::Data,
            Tags::Header(_) => PageKind::Header,
            Tags::Special(s) => PageKind::Special(s.kind),
        }
    }

    /// The object a data or header page belongs to.
    pub fn obj(&self) -> Option<Ino> {
        match self {
            Tags::Data(d) => Some(d.obj),
            Tags::Header(h) => Some(h.obj),
            Tags::Special(_) => None,
        }
    }

    /// The tag bytes to place at the OOB's free offset.
    pub fn encode(&self, layout: TagLayout, page_size: u32) -> Vec<u8> {
        match layout {
            TagLayout::Large => self.encode_large().to_vec(),
            TagLayout::Small => self.encode_small(page_size).to_le_bytes().to_vec(),
        }
    }

    pub fn decode(b: &[u8], layout: TagLayout, page_size: u32) -> TagRead {
        let n = layout.bytes();
        let Some(b) = b.get(..n) else {
            return TagRead::Garbage;
        };
        if b.iter().all(|&x| x == 0xFF) {
            return TagRead::Erased;
        }
        let t = match layout {
            TagLayout::Large => Self::decode_large(b),
            TagLayout::Small => Self::decode_small(
                u64::from_le_bytes(b.try_into().expect("8 bytes")),
                page_size,
            ),
        };
        t.map_or(TagRead::Garbage, TagRead::Valid)
    }

    fn encode_large(&self) -> [u8; LARGE_TAG_BYTES] {
        let mut b = [0u8; LARGE_TAG_BYTES];
        let (code, byte1, obj, field2, field3, serial, dcrc, run) = match *self {
            Tags::Data(d) => (
                1,
                0,
                d.obj,
                d.chunk,
                u64::from(d.n_bytes.unwrap_or(0)),
                d.serial.full().unwrap_or(0),
                d.data_crc.unwrap_or(0),
                d.run_start.map_or(NO_RUN, |r| r as u16),
            ),
            Tags::Header(h) => {
                let f = h.facts.unwrap_or(HeaderFacts {
                    kind: None,
                    parent: 0,
                    size: 0,
                    needs_read: true,
                });
                (
                    2,
                    f.type_code() | u8::from(f.needs_read) << 4,
                    h.obj,
                    f.parent,
                    f.size,
                    h.version.full().unwrap_or(0),
                    0,
                    NO_RUN,
                )
            }
            Tags::Special(s) => (3, s.kind.code(), 0, 0, 0, 0, 0, NO_RUN),
        };
        b[0] = FORMAT_VERSION << 4 | code;
        b[1] = byte1;
        b[2..6].copy_from_slice(&obj.to_le_bytes());
        b[6..10].copy_from_slice(&field2.to_le_bytes());
        b[10..16].copy_from_slice(&field3.to_le_bytes()[..6]);
        b[16..24].copy_from_slice(&serial.to_le_bytes());
        b[24..28].copy_from_slice(&dcrc.to_le_bytes());
        b[28..30].copy_from_slice(&run.to_le_bytes());
        let c = crc(&b[..30]);
        b[30..34].copy_from_slice(&c.to_le_bytes());
        b
    }

    fn decode_large(b: &[u8]) -> Option<Tags> {
        Self::decode_large_exact(b).or_else(|| Self::correct_one_bit(b))
    }

    /// The tags `b` held before one bit of them flipped, if exactly one flip explains
    /// them.
    fn correct_one_bit(b: &[u8]) -> Option<Tags> {
        let mut fixed = [0u8; LARGE_TAG_BYTES];
        fixed.copy_from_slice(b.get(..LARGE_TAG_BYTES)?);
        let mut found = None;
        for bit in 0..LARGE_TAG_BYTES * 8 {
            fixed[bit / 8] ^= 1 << (bit % 8);
            if let Some(t) = Self::decode_large_exact(&fixed) {
                if found.is_some() {
                    return None; // two explanations: trust neither
                }
                found = Some(t);
            }
            fixed[bit / 8] ^= 1 << (bit % 8);
        }
        found
    }

    /// Did reading these tags take a correction (the block should be refreshed)?
    pub fn corrected(b: &[u8], layout: TagLayout) -> bool {
        layout == TagLayout::Large
            && b.len() >= LARGE_TAG_BYTES
            && !b[..LARGE_TAG_BYTES].iter().all(|&x| x == 0xFF)
            && Self::decode_large_exact(b).is_none()
            && Self::correct_one_bit(b).is_some()
    }

    fn decode_large_exact(b: &[u8]) -> Option<Tags> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        if crc(&b[..30]) != u32_at(30) || b[0] >> 4 != FORMAT_VERSION {
            return None;
        }
        let obj = u32_at(2);
        let field2 = u32_at(6);
        let mut f3 = [0u8; 8];
        f3[..6].copy_from_slice(&b[10..16]);
        let field3 = u64::from_le_bytes(f3);
        let serial = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let dcrc = u32_at(24);
        let run = u16::from_le_bytes([b[28], b[29]]);
        match b[0] & 0x0F {
            1 => Some(Tags::Data(DataTags {
                obj,
                chunk: field2,
                n_bytes: Some(u32::try_from(field3).ok()?),
                serial: Serial::Full(serial),
                data_crc: Some(dcrc),
                run_start: (run != NO_RUN).then_some(u32::from(run)),
            })),
            2 => {
                let kind = match b[1] & 0x0F {
                    0 => None,
                    c => Some(Kind::from_code(c)?),
                };
                Some(Tags::Header(HeaderTags {
                    obj,
                    version: Serial::Full(serial),
                    facts: Some(HeaderFacts {
                        kind,
                        parent: field2,
                        size: field3,
                        needs_read: b[1] & 0x10 != 0,
                    }),
                }))
            }
            3 => Some(Tags::Special(SpecialTags {
                kind: SpecialKind::from_code(b[1])?,
            })),
            _ => None,
        }
    }

    fn encode_small(&self, page_size: u32) -> u64 {
        let mask = |bits: u32| (1u64 << bits) - 1;
        let (obj, chunk, serial, partial) = match *self {
            Tags::Data(d) => {
                debug_assert!(d.obj <= SMALL_MAX_OBJ && d.chunk <= SMALL_MAX_CHUNK);
                let partial = d.n_bytes.is_none_or(|n| n != page_size);
                (
                    u64::from(d.obj),
                    u64::from(d.chunk),
                    u64::from(d.serial.low()),
                    partial,
                )
            }
            Tags::Header(h) => (
                u64::from(h.obj),
                SMALL_CHUNK_HEADER,
                u64::from(h.version.low()),
                false,
            ),
            Tags::Special(s) => (u64::from(s.kind.code()), SMALL_CHUNK_SPECIAL, 0, false),
        };
        let body = (obj & mask(20))
            | (chunk & mask(18)) << 20
            | (serial & mask(SMALL_SERIAL_BITS)) << 38
            | u64::from(partial) << 52;
        body | u64::from(small_check(body)) << 53
    }

    fn decode_small(v: u64, page_size: u32) -> Option<Tags> {
        let mask = |bits: u32| (1u64 << bits) - 1;
        let body = v & mask(53);
        if u64::from(small_check(body)) != v >> 53 {
            return None;
        }
        let obj = (body & mask(20)) as u32;
        let chunk = (body >> 20) & mask(18);
        let serial = Serial::Low(((body >> 38) & mask(SMALL_SERIAL_BITS)) as u16);
        let partial = body >> 52 & 1 == 1;
        match chunk {
            SMALL_CHUNK_HEADER if obj <= SMALL_MAX_OBJ && !partial => {
                Some(Tags::Header(HeaderTags {
                    obj,
                    version: serial,
                    facts: None,
                }))
            }
            SMALL_CHUNK_SPECIAL if !partial => Some(Tags::Special(SpecialTags {
                kind: SpecialKind::from_code(u8::try_from(obj).ok()?)?,
            })),
            c if c <= u64::from(SMALL_MAX_CHUNK) && obj <= SMALL_MAX_OBJ => {
                Some(Tags::Data(DataTags {
                    obj,
                    chunk: c as u32,
                    n_bytes: if partial { None } else { Some(page_size) },
                    serial,
                    data_crc: None,
                    run_start: None,
                }))
            }
            _ => None,
        }
    }
}

/// The small layout's 11-bit check: the low bits of a CRC32C of the other 53 bits.
fn small_check(body: u64) -> u16 {
    (crc(&body.to_le_bytes()[..7]) & 0x7FF) as u16
}

/// A partial chunk in the small layout stores its byte count in its last bytes: a u16
/// (little-endian) in the last two when the chunk uses at most `page - 2` bytes, or the
/// marker 0xFE in the last byte when it uses `page - 1` (a u16 there would have a high
/// byte of at most 1, so the two cannot be confused).
pub fn put_inband_len(page: &mut [u8], n: u32) {
    let p = page.len();
    debug_assert!((n as usize) < p);
    if n as usize == p - 1 {
        page[p - 1] = 0xFE;
    } else {
        page[p - 2..].copy_from_slice(&(n as u16).to_le_bytes());
    }
}

/// The byte count of a partial chunk (small layout); `None` if the bytes make no sense.
pub fn inband_len(page: &[u8]) -> Option<u32> {
    let p = page.len();
    if p < 2 {
        return None;
    }
    if page[p - 1] == 0xFE {
        return Some(p as u32 - 1);
    }
    let n = u32::from(u16::from_le_bytes([page[p - 2], page[p - 1]]));
    (n as usize <= p - 2).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(serial: Serial, n: Option<u32>) -> Tags {
        Tags::Data(DataTags {
            obj: 7,
            chunk: 3,
            n_bytes: n,
            serial,
            data_crc: None,
            run_start: None,
        })
    }

    #[test]
    fn large_round_trip_and_damage() {
        let all = [
            Tags::Data(DataTags {
                obj: 7,
                chunk: 3,
                n_bytes: Some(2048),
                serial: Serial::Full(1 << 40),
                data_crc: Some(0xdead_beef),
                run_start: Some(5),
            }),
            Tags::Header(HeaderTags {
                obj: 9,
                version: Serial::Full(77),
                facts: Some(HeaderFacts {
                    kind: Some(Kind::File),
                    parent: 1,
                    size: (1 << 47) + 5,
                    needs_read: true,
                }),
            }),
            Tags::Header(HeaderTags {
                obj: 9,
                version: Serial::Full(78),
                facts: Some(HeaderFacts {
                    kind: None,
                    parent: 0,
                    size: 0,
                    needs_read: false,
                }),
            }),
            Tags::Special(SpecialTags {
                kind: SpecialKind::Checkpoint,
            }),
        ];
        for t in all {
            let b = t.encode(TagLayout::Large, 2048);
            assert_eq!(b.len(), LARGE_TAG_BYTES);
            assert_eq!(Tags::decode(&b, TagLayout::Large, 2048), TagRead::Valid(t));
            let decode = |b: &[u8]| Tags::decode(b, TagLayout::Large, 2048);
            for i in 0..b.len() {
                let j = (i + 7) % LARGE_TAG_BYTES;
                // One flipped bit is corrected (and said to be), two are not.
                let mut one = b.clone();
                one[i] ^= 0x10;
                assert_eq!(decode(&one), TagRead::Valid(t), "{t:?} one bit of byte {i}");
                assert!(Tags::corrected(&one, TagLayout::Large));
                let mut two = one.clone();
                two[i] ^= 0x20;
                assert_eq!(decode(&two), TagRead::Garbage, "{t:?} two bits of byte {i}");
                two[i] ^= 0x20;
                two[j] ^= 0x01;
                assert_eq!(decode(&two), TagRead::Garbage, "{t:?} bytes {i} and {j}");
                assert!(!Tags::corrected(&two, TagLayout::Large));
            }
            assert!(!Tags::corrected(&b, TagLayout::Large));
        }
        assert_eq!(
            Tags::decode(&[0xFF; 34], TagLayout::Large, 2048),
            TagRead::Erased
        );
        assert_eq!(
            Tags::decode(&[0; 3], TagLayout::Large, 2048),
            TagRead::Garbage
        );
    }

    #[test]
    fn small_round_trip() {
        let t = data(Serial::Low(0x1234), Some(512));
        let b = t.encode(TagLayout::Small, 512);
        assert_eq!(b.len(), 8);
        assert_eq!(Tags::decode(&b, TagLayout::Small, 512), TagRead::Valid(t));
        let p = data(Serial::Full(0x7_1234), None);
        match Tags::decode(&p.encode(TagLayout::Small, 512), TagLayout::Small, 512) {
            TagRead::Valid(Tags::Data(d)) => {
                assert_eq!(d.n_bytes, None);
                assert_eq!(d.serial, Serial::Low(0x1234));
            }
            other => panic!("{other:?}"),
        }
        let h = Tags::Header(HeaderTags {
            obj: SMALL_MAX_OBJ,
            version: Serial::Low(5),
            facts: None,
        });
        assert_eq!(
            Tags::decode(&h.encode(TagLayout::Small, 512), TagLayout::Small, 512),
            TagRead::Valid(h)
        );
        let s = Tags::Special(SpecialTags {
            kind: SpecialKind::Summary,
        });
        assert_eq!(
            Tags::decode(&s.encode(TagLayout::Small, 512), TagLayout::Small, 512),
            TagRead::Valid(s)
        );
    }

    #[test]
    fn small_check_catches_most_single_bit_flips() {
        let b = data(Serial::Low(77), Some(512)).encode(TagLayout::Small, 512);
        let mut caught = 0;
        for bit in 0..64 {
            let mut x = b.clone();
            x[bit / 8] ^= 1 << (bit % 8);
            if Tags::decode(&x, TagLayout::Small, 512) == TagRead::Garbage {
                caught += 1;
            }
        }
        assert_eq!(caught, 64, "a CRC catches every single-bit error");
    }

    #[test]
    fn serial_widening() {
        let m = 1u64 << SMALL_SERIAL_BITS;
        for s in [0u64, 5, m - 1, m, m + 3, 10 * m + 77, 1 << 40] {
            let low = Serial::Full(s).low();
            for slack in [0u64, 1, 100, m - 1] {
                assert_eq!(widen_serial(low, s + slack), s, "s {s} slack {slack}");
            }
        }
    }

    #[test]
    fn inband_lengths() {
        for n in [0u32, 1, 255, 256, 509, 510, 511] {
            let mut page = vec![0xAB; 512];
            put_inband_len(&mut page, n);
            assert_eq!(inband_len(&page), Some(n), "{n}");
        }
        assert_eq!(inband_len(&[0x00, 0x02]), None);
    }
}
