//! The on-flash format (version 3): the only code that turns file system state into flash
//! bytes and back. Every decoder checks lengths and CRCs and returns `None` on anything
//! malformed: bytes read from flash are never trusted. Documented in docs/format.md.
//!
//! - [`tags`]: the per-page tags in the OOB, in two layouts (large: 34 bytes with a full
//!   64-bit serial; small: 8 packed bytes for 512-byte pages);
//! - [`record`]: an object header record (in band, in a header page);
//! - [`reserved`]: the ranges of a file that fallocate reserved (in records and the
//!   checkpoint);
//! - [`special`]: the frame of file system pages that are not objects (block summaries,
//!   checkpoint pages, the file system record and anchor entries);
//! - [`summary`]: a block summary, the tags of a whole block in one page;
//! - [`anchor`]: the file system record and the checkpoint pointers kept in the two anchor
//!   blocks;
//! - [`checkpoint`]: the checkpoint stream a clean unmount writes;
//! - [`legacy`]: recognising images of the previous format, to refuse them clearly.

pub mod anchor;
pub mod checkpoint;
pub mod legacy;
pub mod record;
pub mod reserved;
pub mod special;
pub mod summary;
pub mod tags;

pub use record::{Name, Record, Time};
pub use summary::{Summary, SummaryEntry};
pub use tags::{HeaderFacts, PageKind, TagRead, Tags};

/// The on-flash format version this code reads and writes.
pub const FORMAT_VERSION: u8 = 3;

pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// A bounds-checked little-endian reader over untrusted bytes.
pub(crate) struct Reader<'a> {
    pub b: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Self { b, at: 0 }
    }
    pub fn left(&self) -> usize {
        self.b.len() - self.at
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn i64(&mut self) -> Option<i64> {
        Some(self.u64()? as i64)
    }
    /// LEB128, at most 10 bytes, no overflow.
    pub fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            let part = u64::from(b & 0x7F);
            if i == 9 && part > 1 {
                return None;
            }
            v |= part << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    /// A varint that must fit a u32.
    pub fn varint32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }
    /// A count of items each taking at least `unit` bytes: refused if the rest of the
    /// input could not hold them (so a corrupt count never allocates much).
    pub fn count(&mut self, unit: usize) -> Option<usize> {
        let n = self.varint()? as usize;
        (n.checked_mul(unit.max(1))? <= self.left()).then_some(n)
    }
}

/// Little-endian writer helpers.
pub(crate) trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_varint(&mut self, v: u64);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7F) as u8;
            v >>= 7;
            if v == 0 {
                self.push(b);
                return;
            }
            self.push(b | 0x80);
        }
    }
}

/// Bytes a varint of `v` takes.
pub(crate) fn varint_len(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).div_ceil(7).max(1)
}

/// Signed to unsigned, small magnitudes small (protobuf's zigzag).
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            b.put_varint(v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            assert_eq!(Reader::new(&b).varint(), Some(v));
        }
        assert_eq!(Reader::new(&[0x80; 11]).varint(), None);
        assert_eq!(Reader::new(&[0xFF; 9]).varint(), None);
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
