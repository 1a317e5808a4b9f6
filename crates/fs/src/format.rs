//! The on-flash format: the only code that turns file system state into flash bytes and
//! back. Every decoder checks lengths and CRCs and returns `None` on anything malformed:
//! bytes read from flash are never trusted. Documented in docs/format.md.

use crate::types::{Ino, Kind};

/// Bytes of one page's tags.
pub const TAG_BYTES: usize = 40;
const FORMAT_VERSION: u8 = 1;

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// A chunk of file data.
    Data,
    /// An object header record.
    Header,
    /// Part of a checkpoint (clean-unmount snapshot).
    Checkpoint,
}

impl PageKind {
    fn code(self) -> u8 {
        match self {
            PageKind::Data => 1,
            PageKind::Header => 2,
            PageKind::Checkpoint => 3,
        }
    }

    fn from_code(c: u8) -> Option<PageKind> {
        match c {
            1 => Some(PageKind::Data),
            2 => Some(PageKind::Header),
            3 => Some(PageKind::Checkpoint),
            _ => None,
        }
    }
}

/// The self-description every programmed page carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tags {
    pub kind: PageKind,
    pub obj: Ino,
    /// Data: chunk index in the file. Header: 0. Checkpoint: page index in the checkpoint.
    pub chunk: u32,
    /// Bytes of the data area in use.
    pub n_bytes: u32,
    /// Sequence number of the block, given when the block was opened for writing.
    pub block_seq: u32,
    /// Write serial: unique per page written, preserved when cleaning copies a page, so the
    /// newest version of anything is the one with the highest serial.
    pub serial: u64,
    /// CRC32C of the `n_bytes` data bytes.
    pub data_crc: u32,
}

/// What a tag area decodes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagRead {
    /// All 0xFF: nothing was programmed here (as far as the tags tell).
    Erased,
    /// Tags that fail their CRC or make no sense: a torn or corrupted page.
    Garbage,
    Valid(Tags),
}

pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

impl Tags {
    pub fn encode(&self) -> [u8; TAG_BYTES] {
        let mut b = [0u8; TAG_BYTES];
        b[0] = self.kind.code();
        b[1] = FORMAT_VERSION;
        b[4..8].copy_from_slice(&self.obj.to_le_bytes());
        b[8..12].copy_from_slice(&self.chunk.to_le_bytes());
        b[12..16].copy_from_slice(&self.n_bytes.to_le_bytes());
        b[16..20].copy_from_slice(&self.block_seq.to_le_bytes());
        b[20..28].copy_from_slice(&self.serial.to_le_bytes());
        b[28..32].copy_from_slice(&self.data_crc.to_le_bytes());
        let c = crc(&b[..36]);
        b[36..40].copy_from_slice(&c.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> TagRead {
        if b.len() < TAG_BYTES {
            return TagRead::Garbage;
        }
        let b = &b[..TAG_BYTES];
        if b.iter().all(|&x| x == 0xFF) {
            return TagRead::Erased;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        if crc(&b[..36]) != u32_at(36) || b[1] != FORMAT_VERSION {
            return TagRead::Garbage;
        }
        let Some(kind) = PageKind::from_code(b[0]) else {
            return TagRead::Garbage;
        };
        TagRead::Valid(Tags {
            kind,
            obj: u32_at(4),
            chunk: u32_at(8),
            n_bytes: u32_at(12),
            block_seq: u32_at(16),
            serial: u64::from_le_bytes(b[20..28].try_into().expect("8 bytes")),
            data_crc: u32_at(28),
        })
    }
}

/// One name of an object: which directory it is in and what it is called there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub parent: Ino,
    pub name: Box<[u8]>,
}

/// What a header record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Object(Kind),
    /// The file system record: configuration chosen at mkfs.
    Super,
}

const SUPER_CODE: u8 = 15;

/// An object header: everything about an object except its data. Directories are upward:
/// an object lists its own names (parent directory + name); a directory lists nothing.
/// An object with no names (other than the root) is deleted; its header is the tombstone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub names: Vec<Name>,
    /// Symlink target; for the super record, the configuration as JSON.
    pub target: Vec<u8>,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Names this record also gives to other objects, as of this record's serial. A
    /// RENAME_EXCHANGE writes both objects' new names in one page, so it is atomic.
    pub name_updates: Vec<(Ino, Vec<Name>)>,
}

impl Record {
    /// A record with no names, no payload, owned by root, all times `now_ns`.
    pub fn bare(kind: RecordKind, perm: u32, now_ns: i64) -> Record {
        Record {
            kind,
            perm,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            atime_ns: now_ns,
            mtime_ns: now_ns,
            ctime_ns: now_ns,
            names: Vec::new(),
            target: Vec::new(),
            xattrs: Vec::new(),
            name_updates: Vec::new(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(128);
        b.push(match self.kind {
            RecordKind::Object(k) => k.code(),
            RecordKind::Super => SUPER_CODE,
        });
        b.extend_from_slice(&[FORMAT_VERSION, 0, 0]);
        for v in [self.perm, self.uid, self.gid] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.rdev, self.size] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.atime_ns, self.mtime_ns, self.ctime_ns] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        put_names(&mut b, &self.names);
        b.extend_from_slice(&(self.target.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.target);
        b.extend_from_slice(&(self.xattrs.len() as u16).to_le_bytes());
        for (k, v) in &self.xattrs {
            b.push(k.len() as u8);
            b.extend_from_slice(&(v.len() as u16).to_le_bytes());
            b.extend_from_slice(k);
            b.extend_from_slice(v);
        }
        b.extend_from_slice(&(self.name_updates.len() as u16).to_le_bytes());
        for (ino, names) in &self.name_updates {
            b.extend_from_slice(&ino.to_le_bytes());
            put_names(&mut b, names);
        }
        b
    }

    pub fn decode(bytes: &[u8]) -> Option<Record> {
        let mut r = Reader { b: bytes, at: 0 };
        let code = r.u8()?;
        let kind = if code == SUPER_CODE {
            RecordKind::Super
        } else {
            RecordKind::Object(Kind::from_code(code)?)
        };
        if r.u8()? != FORMAT_VERSION {
            return None;
        }
        r.take(2)?;
        let (perm, uid, gid) = (r.u32()?, r.u32()?, r.u32()?);
        let (rdev, size) = (r.u64()?, r.u64()?);
        let (atime_ns, mtime_ns, ctime_ns) = (r.u64()? as i64, r.u64()? as i64, r.u64()? as i64);
        let names = r.names()?;
        let n = r.u16()? as usize;
        let target = r.take(n)?.to_vec();
        let mut xattrs = Vec::new();
        for _ in 0..r.u16()? {
            let klen = r.u8()? as usize;
            let vlen = r.u16()? as usize;
            let k = r.take(klen)?.to_vec();
            let v = r.take(vlen)?.to_vec();
            xattrs.push((k, v));
        }
        let mut name_updates = Vec::new();
        for _ in 0..r.u16()? {
            let ino = r.u32()?;
            name_updates.push((ino, r.names()?));
        }
        if r.at != bytes.len() {
            return None;
        }
        Some(Record {
            kind,
            perm,
            uid,
            gid,
            rdev,
            size,
            atime_ns,
            mtime_ns,
            ctime_ns,
            names,
            target,
            xattrs,
            name_updates,
        })
    }
}

fn put_names(b: &mut Vec<u8>, names: &[Name]) {
    b.extend_from_slice(&(names.len() as u16).to_le_bytes());
    for n in names {
        b.extend_from_slice(&n.parent.to_le_bytes());
        b.push(n.name.len() as u8);
        b.extend_from_slice(&n.name);
    }
}

/// A bounds-checked little-endian reader over untrusted bytes.
pub(crate) struct Reader<'a> {
    pub b: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
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
    fn names(&mut self) -> Option<Vec<Name>> {
        let n = self.u16()? as usize;
        let mut names = Vec::with_capacity(n.min(64));
        for _ in 0..n {
            let parent = self.u32()?;
            let len = self.u8()? as usize;
            let name = self.take(len)?;
            if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
                return None;
            }
            names.push(Name {
                parent,
                name: name.into(),
            });
        }
        Some(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_reject_damage() {
        let t = Tags {
            kind: PageKind::Data,
            obj: 7,
            chunk: 3,
            n_bytes: 2048,
            block_seq: 9,
            serial: 1 << 40,
            data_crc: 0xdead_beef,
        };
        let mut b = t.encode();
        assert_eq!(Tags::decode(&b), TagRead::Valid(t));
        b[5] ^= 1;
        assert_eq!(Tags::decode(&b), TagRead::Garbage);
        assert_eq!(Tags::decode(&[0xFF; TAG_BYTES]), TagRead::Erased);
        assert_eq!(Tags::decode(&[0x00; 8]), TagRead::Garbage);
    }

    #[test]
    fn record_round_trip_and_truncation() {
        let r = Record {
            kind: RecordKind::Object(Kind::Symlink),
            perm: 0o777,
            uid: 1000,
            gid: 100,
            rdev: 0,
            size: 5,
            atime_ns: 1,
            mtime_ns: -2,
            ctime_ns: 3,
            names: vec![Name {
                parent: 1,
                name: (*b"link").into(),
            }],
            target: b"/a/b".to_vec(),
            xattrs: vec![(b"user.k".to_vec(), b"v".to_vec())],
            name_updates: vec![(9, vec![])],
        };
        let bytes = r.encode();
        assert_eq!(Record::decode(&bytes), Some(r));
        for cut in 0..bytes.len() {
            assert_eq!(Record::decode(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}

/// Marks "none" in checkpoint page and block fields.
pub const CKPT_NONE: u32 = u32::MAX;
const CKPT_MAGIC: u32 = 0x504b_434e; // "NCKP"

/// One block's line in a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CkptBlock {
    /// 0 empty, 1 active, 2 full, 3 bad.
    pub state: u8,
    pub retire: bool,
    pub scrub: bool,
    pub seq: u32,
    pub next_page: u32,
    pub header_objs: Vec<Ino>,
}

/// One object in a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CkptObject {
    pub ino: Ino,
    pub header: u32,
    pub max_chunk_on_flash: u32,
    /// The object's header record, encoded as on its header page.
    pub record: Vec<u8>,
    pub chunks: Vec<u32>,
}

/// The whole in-RAM state of a cleanly unmounted file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointImage {
    pub next_serial: u64,
    pub next_seq: u32,
    pub next_ino: Ino,
    pub alloc_cursor: u32,
    pub super_page: u32,
    pub streams: Vec<u32>,
    pub blocks: Vec<CkptBlock>,
    pub valid_bits: Vec<u64>,
    pub headers_on_flash: Vec<(Ino, u32)>,
    pub tombstones: Vec<(Ino, u32)>,
    pub objects: Vec<CkptObject>,
}

impl CheckpointImage {
    /// magic, length, body, CRC32C of the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        let put32 = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        b.extend_from_slice(&self.next_serial.to_le_bytes());
        for v in [
            self.next_seq,
            self.next_ino,
            self.alloc_cursor,
            self.super_page,
        ] {
            put32(&mut b, v);
        }
        put32(&mut b, self.streams.len() as u32);
        for &s in &self.streams {
            put32(&mut b, s);
        }
        put32(&mut b, self.blocks.len() as u32);
        for blk in &self.blocks {
            b.push(blk.state);
            b.push(u8::from(blk.retire) | u8::from(blk.scrub) << 1);
            put32(&mut b, blk.seq);
            put32(&mut b, blk.next_page);
            put32(&mut b, blk.header_objs.len() as u32);
            for &o in &blk.header_objs {
                put32(&mut b, o);
            }
        }
        put32(&mut b, self.valid_bits.len() as u32);
        for w in &self.valid_bits {
            b.extend_from_slice(&w.to_le_bytes());
        }
        for list in [&self.headers_on_flash, &self.tombstones] {
            put32(&mut b, list.len() as u32);
            for &(k, v) in list {
                put32(&mut b, k);
                put32(&mut b, v);
            }
        }
        put32(&mut b, self.objects.len() as u32);
        for o in &self.objects {
            for v in [o.ino, o.header, o.max_chunk_on_flash, o.record.len() as u32] {
                put32(&mut b, v);
            }
            b.extend_from_slice(&o.record);
            put32(&mut b, o.chunks.len() as u32);
            for &c in &o.chunks {
                put32(&mut b, c);
            }
        }
        let mut out = Vec::with_capacity(b.len() + 16);
        out.extend_from_slice(&CKPT_MAGIC.to_le_bytes());
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(&b);
        out.extend_from_slice(&crc(&b).to_le_bytes());
        out
    }

    /// Total encoded length, from the first bytes of the stream (magic + length).
    pub fn stream_len(head: &[u8]) -> Option<u64> {
        let mut r = Reader { b: head, at: 0 };
        if r.u32()? != CKPT_MAGIC {
            return None;
        }
        r.u64()?.checked_add(16)
    }

    pub fn decode(bytes: &[u8]) -> Option<CheckpointImage> {
        let len = Self::stream_len(bytes)? as usize;
        if bytes.len() < len {
            return None;
        }
        let body = &bytes[12..len - 4];
        let stored = u32::from_le_bytes(bytes[len - 4..len].try_into().ok()?);
        if crc(body) != stored {
            return None;
        }
        let mut r = Reader { b: body, at: 0 };
        // Counts come from flash: cap what they may allocate by what the body can hold.
        let count = |r: &mut Reader, unit: usize| -> Option<usize> {
            let n = r.u32()? as usize;
            (n.checked_mul(unit)? <= r.b.len() - r.at).then_some(n)
        };
        let next_serial = r.u64()?;
        let (next_seq, next_ino, alloc_cursor, super_page) =
            (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let n = count(&mut r, 4)?;
        let streams = (0..n).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
        let n = count(&mut r, 14)?;
        let mut blocks = Vec::with_capacity(n);
        for _ in 0..n {
            let state = r.u8()?;
            let flags = r.u8()?;
            let (seq, next_page) = (r.u32()?, r.u32()?);
            let m = count(&mut r, 4)?;
            let header_objs = (0..m).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
            blocks.push(CkptBlock {
                state,
                retire: flags & 1 != 0,
                scrub: flags & 2 != 0,
                seq,
                next_page,
                header_objs,
            });
        }
        let n = count(&mut r, 8)?;
        let valid_bits = (0..n).map(|_| r.u64()).collect::<Option<Vec<_>>>()?;
        let pairs = |r: &mut Reader| -> Option<Vec<(u32, u32)>> {
            let n = count(r, 8)?;
            (0..n).map(|_| Some((r.u32()?, r.u32()?))).collect()
        };
        let headers_on_flash = pairs(&mut r)?;
        let tombstones = pairs(&mut r)?;
        let n = count(&mut r, 20)?;
        let mut objects = Vec::with_capacity(n);
        for _ in 0..n {
            let (ino, header, max_chunk_on_flash, rlen) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
            let record = r.take(rlen as usize)?.to_vec();
            let m = count(&mut r, 4)?;
            let chunks = (0..m).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
            objects.push(CkptObject {
                ino,
                header,
                max_chunk_on_flash,
                record,
                chunks,
            });
        }
        if r.at != body.len() {
            return None;
        }
        Some(CheckpointImage {
            next_serial,
            next_seq,
            next_ino,
            alloc_cursor,
            super_page,
            streams,
            blocks,
            valid_bits,
            headers_on_flash,
            tombstones,
            objects,
        })
    }
}
