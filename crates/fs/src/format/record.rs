//! Object header records: everything about an object but its data, in band in a header
//! page, with its own length and CRC32C (the small tag layout has no room for a data CRC).
//!
//! Directories are upward: an object lists its own names (parent directory + name); a
//! directory's record says nothing of its children. An object with no names (other than
//! the root) is deleted; its record is the tombstone.

pub use super::reserved::{Reserve, Reserved};
use super::tags::HeaderFacts;
use super::{crc, Put, Reader, FORMAT_VERSION};
pub use crate::types::Time;
use crate::types::{Ino, Kind, TimeNs, ROOT_INO};

/// Bytes before the variable part: length, CRC, version, kind, record version, perm, uid,
/// gid, rdev, size, three times.
const FIXED: usize = 80;

/// One name of an object: which directory it is in and what it is called there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub parent: Ino,
    pub name: Box<[u8]>,
}

/// A truncation floor: chunks of the object written before `serial`, at indexes from the
/// first chunk wholly past `size` up to (not including) `end_chunk`, are stale. Every
/// header is such a floor for its own size; a header keeps older ones while the holes
/// they protect are still there (a file shrunk, then grown over the gap without writing
/// it). `end_chunk` is one past the highest chunk that was on flash at the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Floor {
    pub size: u64,
    pub serial: u64,
    pub end_chunk: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    /// The serial this header was first written with; cleaning copies keep it, so among
    /// an object's headers the highest version is the newest.
    pub version: u64,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    pub names: Vec<Name>,
    /// Symlink target, when it fits the header page (else it is in the object's data
    /// chunks and `size` says how long it is).
    pub target: Vec<u8>,
    /// `Kind::Xattrs` only: the owner's extended attributes, when they fit the header page
    /// (else they are in the object's data chunks, `size` bytes, see `xattr`).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Names this record also gives to other objects, as of this record's version: a
    /// rename over an existing name, or RENAME_EXCHANGE, changes two objects in one page.
    pub name_updates: Vec<(Ino, Vec<Name>)>,
    pub floors: Vec<Floor>,
    /// Files: chunks reserved by fallocate (their holes count as used: every hole among
    /// them has a page set aside, so a write there never fails for want of space).
    pub reserve: Reserved,
}

impl Record {
    /// A record with no names and no payload, owned by root, all times `now_ns`.
    pub fn bare(kind: Kind, perm: u32, now_ns: TimeNs) -> Record {
        let t = Time::from_ns(now_ns);
        Record {
            kind,
            version: 0,
            perm,
            uid: 0,
            gid: 0,
            rdev: 0,
            size: 0,
            atime: t,
            mtime: t,
            ctime: t,
            names: Vec::new(),
            target: Vec::new(),
            xattrs: Vec::new(),
            name_updates: Vec::new(),
            floors: Vec::new(),
            reserve: Reserved::new(),
        }
    }

    /// What the tags or a summary can say about this record.
    pub fn facts(&self, ino: Ino) -> HeaderFacts {
        let deleted = self.names.is_empty() && ino != ROOT_INO;
        HeaderFacts {
            kind: (!deleted).then_some(self.kind),
            parent: match self.names.as_slice() {
                [one] => one.parent,
                _ => 0,
            },
            size: self.size,
            needs_read: self.names.len() > 1
                || !self.name_updates.is_empty()
                || !self.floors.is_empty()
                || !self.reserve.is_empty(),
        }
    }

    /// Bytes `encode` would produce.
    pub fn encoded_len(&self) -> usize {
        let names = |n: &[Name]| {
            super::varint_len(n.len() as u64) + n.iter().map(|x| 5 + x.name.len()).sum::<usize>()
        };
        FIXED
            + names(&self.names)
            + super::varint_len(self.target.len() as u64)
            + self.target.len()
            + xattrs_len(&self.xattrs)
            + super::varint_len(self.name_updates.len() as u64)
            + self
                .name_updates
                .iter()
                .map(|(_, n)| 4 + names(n))
                .sum::<usize>()
            + super::varint_len(self.floors.len() as u64)
            + self
                .floors
                .iter()
                .map(|f| super::varint_len(f.size) + 8 + super::varint_len(u64::from(f.end_chunk)))
                .sum::<usize>()
            + self.reserve.encoded_len()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.encoded_len());
        b.extend_from_slice(&[0; 6]); // length and CRC, filled in below
        b.put_u8(FORMAT_VERSION);
        b.put_u8(self.kind.code());
        b.put_u64(self.version);
        for v in [self.perm, self.uid, self.gid] {
            b.put_u32(v);
        }
        b.put_u64(self.rdev);
        b.put_u64(self.size);
        for t in [self.atime, self.mtime, self.ctime] {
            b.put_u64(t.sec as u64);
            b.put_u32(t.nsec);
        }
        put_names(&mut b, &self.names);
        b.put_varint(self.target.len() as u64);
        b.extend_from_slice(&self.target);
        put_xattrs(&mut b, &self.xattrs);
        b.put_varint(self.name_updates.len() as u64);
        for (ino, names) in &self.name_updates {
            b.put_u32(*ino);
            put_names(&mut b, names);
        }
        b.put_varint(self.floors.len() as u64);
        for f in &self.floors {
            b.put_varint(f.size);
            b.put_u64(f.serial);
            b.put_varint(u64::from(f.end_chunk));
        }
        self.reserve.encode(&mut b);
        debug_assert_eq!(b.len(), self.encoded_len());
        let len = u16::try_from(b.len()).expect("a record fits a page");
        b[0..2].copy_from_slice(&len.to_le_bytes());
        let c = crc(&b[6..]);
        b[2..6].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes a record from the start of a page's data (bytes after it are ignored).
    pub fn decode(page: &[u8]) -> Option<Record> {
        let mut head = Reader::new(page);
        let len = head.u16()? as usize;
        let stored = head.u32()?;
        if len < FIXED || len > page.len() || crc(&page[6..len]) != stored {
            return None;
        }
        let mut r = Reader::new(&page[..len]);
        r.take(6)?;
        if r.u8()? != FORMAT_VERSION {
            return None;
        }
        let kind = Kind::from_code(r.u8()?)?;
        let version = r.u64()?;
        let (perm, uid, gid) = (r.u32()?, r.u32()?, r.u32()?);
        let (rdev, size) = (r.u64()?, r.u64()?);
        let mut time = || -> Option<Time> {
            let sec = r.i64()?;
            let nsec = r.u32()?;
            (nsec < 1_000_000_000).then_some(Time { sec, nsec })
        };
        let (atime, mtime, ctime) = (time()?, time()?, time()?);
        let names = get_names(&mut r)?;
        let n = r.count(1)?;
        let target = r.take(n)?.to_vec();
        let xattrs = get_xattrs(&mut r)?;
        let n = r.count(5)?;
        let mut name_updates = Vec::with_capacity(n);
        for _ in 0..n {
            let ino = r.u32()?;
            name_updates.push((ino, get_names(&mut r)?));
        }
        let n = r.count(10)?;
        let mut floors = Vec::with_capacity(n);
        for _ in 0..n {
            let size = r.varint()?;
            let serial = r.u64()?;
            let end_chunk = r.varint32()?;
            floors.push(Floor {
                size,
                serial,
                end_chunk,
            });
        }
        let reserve = Reserved::decode(&mut r)?;
        if r.left() != 0 {
            return None;
        }
        Some(Record {
            kind,
            version,
            perm,
            uid,
            gid,
            rdev,
            size,
            atime,
            mtime,
            ctime,
            names,
            target,
            xattrs,
            name_updates,
            floors,
            reserve,
        })
    }
}

type Xattrs = [(Vec<u8>, Vec<u8>)];

fn xattrs_len(list: &Xattrs) -> usize {
    super::varint_len(list.len() as u64)
        + list
            .iter()
            .map(|(k, v)| 1 + super::varint_len(v.len() as u64) + k.len() + v.len())
            .sum::<usize>()
}

fn put_xattrs(b: &mut Vec<u8>, list: &Xattrs) {
    b.put_varint(list.len() as u64);
    for (k, v) in list {
        b.put_u8(k.len() as u8);
        b.put_varint(v.len() as u64);
        b.extend_from_slice(k);
        b.extend_from_slice(v);
    }
}

fn get_xattrs(r: &mut Reader) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let n = r.count(2)?;
    let mut xattrs = Vec::with_capacity(n);
    for _ in 0..n {
        let klen = r.u8()? as usize;
        let vlen = r.varint()? as usize;
        let k = r.take(klen)?.to_vec();
        let v = r.take(vlen)?.to_vec();
        if k.is_empty() {
            return None;
        }
        xattrs.push((k, v));
    }
    Some(xattrs)
}

/// An attribute set as the data chunks of a `Kind::Xattrs` object hold it (when it does
/// not fit the header): the same encoding as in a record, then a CRC32C of it.
pub fn encode_xattrs(list: &Xattrs) -> Vec<u8> {
    let mut b = Vec::with_capacity(xattrs_len(list) + 4);
    put_xattrs(&mut b, list);
    let c = crc(&b);
    b.put_u32(c);
    b
}

pub fn decode_xattrs(bytes: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let body = bytes.get(..bytes.len().checked_sub(4)?)?;
    let stored = u32::from_le_bytes(bytes[body.len()..].try_into().ok()?);
    if crc(body) != stored {
        return None;
    }
    let mut r = Reader::new(body);
    let list = get_xattrs(&mut r)?;
    (r.left() == 0).then_some(list)
}

fn put_names(b: &mut Vec<u8>, names: &[Name]) {
    b.put_varint(names.len() as u64);
    for n in names {
        b.put_u32(n.parent);
        b.put_u8(n.name.len() as u8);
        b.extend_from_slice(&n.name);
    }
}

fn get_names(r: &mut Reader) -> Option<Vec<Name>> {
    let n = r.count(6)?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        let parent = r.u32()?;
        let len = r.u8()? as usize;
        let name = r.take(len)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            kind: Kind::Symlink,
            version: 99,
            perm: 0o777,
            uid: 1000,
            gid: 100,
            rdev: 0,
            size: 5,
            atime: Time { sec: 1, nsec: 2 },
            mtime: Time::from_ns(-2),
            ctime: Time {
                sec: 10_000_000_000,
                nsec: 999_999_999,
            },
            names: vec![Name {
                parent: 1,
                name: (*b"link").into(),
            }],
            target: b"/a/b".to_vec(),
            xattrs: vec![(b"user.k".to_vec(), b"v".to_vec())],
            name_updates: vec![(9, vec![])],
            floors: vec![Floor {
                size: 4096,
                serial: 1 << 33,
                end_chunk: 70,
            }],
            reserve: Reserved::one(Reserve { start: 3, end: 90 }),
        }
    }

    #[test]
    fn round_trip_truncation_and_damage() {
        let r = sample();
        let bytes = r.encode();
        assert_eq!(bytes.len(), r.encoded_len());
        let mut page = bytes.clone();
        page.resize(512, 0xFF);
        assert_eq!(Record::decode(&page), Some(r.clone()));
        for cut in 0..bytes.len() {
            assert_eq!(Record::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 4;
            assert_eq!(Record::decode(&b), None, "flip at {i}");
        }
        assert_eq!(Record::decode(&[0xFF; 512]), None);
    }

    #[test]
    fn xattr_payload_round_trip() {
        let list = vec![
            (b"user.a".to_vec(), vec![7u8; 70_000]),
            (b"trusted.b".to_vec(), Vec::new()),
        ];
        let bytes = encode_xattrs(&list);
        assert_eq!(decode_xattrs(&bytes), Some(list));
        let mut bad = bytes.clone();
        bad[3] ^= 1;
        assert_eq!(decode_xattrs(&bad), None);
        assert_eq!(decode_xattrs(&bytes[..bytes.len() - 1]), None);
        assert_eq!(decode_xattrs(&[]), None);
    }

    #[test]
    fn facts_say_when_a_read_is_needed() {
        let mut r = sample();
        let f = r.facts(5);
        assert!(f.needs_read);
        assert_eq!(f.kind, Some(Kind::Symlink));
        assert_eq!(f.parent, 1);
        r.name_updates.clear();
        r.floors.clear();
        assert!(r.facts(5).needs_read, "a reservation is read at mount");
        r.reserve = Reserved::new();
        assert!(!r.facts(5).needs_read);
        r.names.clear();
        assert_eq!(r.facts(5).kind, None, "no names: deleted");
        assert_eq!(
            r.facts(ROOT_INO).kind,
            Some(Kind::Symlink),
            "the root has none"
        );
    }

    #[test]
    fn times_beyond_2262_keep_seconds() {
        let t = Time {
            sec: 10_413_792_000, // 2300-01-01
            nsec: 5,
        };
        assert_eq!(t.to_ns(), i64::MAX);
        assert_eq!(
            Time::from_ns(-1),
            Time {
                sec: -1,
                nsec: 999_999_999
            }
        );
    }
}
