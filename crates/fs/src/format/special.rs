//! The frame of a special page (a page that belongs to the file system, not to an object):
//! block summaries, checkpoint pages, the file system record and anchor entries. The frame
//! is in band, so it reads the same whichever tag layout the geometry uses:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic "NKSP" |
//! | 4 | 1 | format version |
//! | 5 | 1 | kind (1 summary, 2 checkpoint, 3 anchor) |
//! | 6 | 2 | payload length |
//! | 8 | 8 | id (checkpoint: its id; anchor: epoch; summary: block's first serial) |
//! | 16 | 4 | index (checkpoint: page number in the stream; anchor: entry number) |
//! | 20 | 4 | CRC32C of bytes 0..20 and the payload |
//! | 24 | .. | payload |

use super::tags::SpecialKind;
use super::{crc, Put, Reader, FORMAT_VERSION};

const MAGIC: u32 = 0x5053_4b4e; // "NKSP"
/// Bytes of the frame before the payload.
pub const FRAME_BYTES: usize = 24;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Special {
    pub kind: SpecialKind,
    pub id: u64,
    pub index: u32,
    pub payload: Vec<u8>,
}

impl Special {
    /// Payload bytes a page of `page_size` can hold.
    pub fn capacity(page_size: usize) -> usize {
        page_size.saturating_sub(FRAME_BYTES).min(u16::MAX as usize)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(FRAME_BYTES + self.payload.len());
        b.put_u32(MAGIC);
        b.put_u8(FORMAT_VERSION);
        b.put_u8(self.kind.code());
        b.put_u16(u16::try_from(self.payload.len()).expect("payload fits a page"));
        b.put_u64(self.id);
        b.put_u32(self.index);
        let mut c = crc32c::crc32c(&b[..20]);
        c = crc32c::crc32c_append(c, &self.payload);
        b.put_u32(c);
        b.extend_from_slice(&self.payload);
        b
    }

    pub fn decode(page: &[u8]) -> Option<Special> {
        let mut r = Reader::new(page);
        if r.u32()? != MAGIC || r.u8()? != FORMAT_VERSION {
            return None;
        }
        let kind = SpecialKind::from_code(r.u8()?)?;
        let len = r.u16()? as usize;
        let id = r.u64()?;
        let index = r.u32()?;
        let stored = r.u32()?;
        let payload = r.take(len)?;
        let c = crc32c::crc32c_append(crc(&page[..20]), payload);
        (c == stored).then(|| Special {
            kind,
            id,
            index,
            payload: payload.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let s = Special {
            kind: SpecialKind::Checkpoint,
            id: 42,
            index: 7,
            payload: (0..100u8).collect(),
        };
        let mut b = s.encode();
        b.resize(512, 0xFF);
        assert_eq!(Special::decode(&b), Some(s.clone()));
        for i in 0..FRAME_BYTES + 100 {
            let mut x = b.clone();
            x[i] ^= 1;
            assert_eq!(Special::decode(&x), None, "flip at {i}");
        }
        assert_eq!(Special::decode(&b[..50]), None);
        assert_eq!(Special::capacity(512), 488);
    }
}
