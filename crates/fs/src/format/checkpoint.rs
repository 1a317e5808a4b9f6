//! The checkpoint stream: the file system's RAM state at a clean unmount, so the next
//! mount reads it instead of scanning. Compact, like YAFFS2's (an object is about 16
//! bytes here, without its name: attributes and names are loaded from the object's header
//! when first needed). The stream is `u32 magic "NCK5"`, `u64 body length`, the body, and
//! a CRC32C of the body; it is cut into special pages (kind checkpoint) whose frames carry
//! the checkpoint id and page number.

use super::reserved::Reserved;
use super::summary::Summary;
use super::{crc, Put, Reader};
use crate::types::{Ino, Kind};

/// "NCK5": version 4 had no data owners per block; its checkpoints are not read (the
/// mount scans instead, which finds them).
const MAGIC: u32 = 0x354b_434e; // "NCK5"
/// Marks a lost page (unreadable after a media error) in a chunk run.
pub const RUN_LOST: u32 = u32::MAX;

/// One block's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CkptBlock {
    /// 0 empty, 1 active, 2 full, 3 bad, 4 anchor.
    pub state: u8,
    /// bit 0 retire, bit 1 scrub, bit 2 no summary (must be cleaned).
    pub flags: u8,
    pub next_page: u32,
    /// Write serial of its first page.
    pub base_serial: u64,
    /// Pages that are neither valid nor invalid (its summary).
    pub overhead: u32,
    /// Objects with header pages (any version) in it.
    pub header_objs: Vec<Ino>,
    /// Objects with data pages (any version) in it, where the profile tracks them.
    pub data_objs: Vec<Ino>,
}

/// A run of a file's chunks on consecutive pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRun {
    pub chunk: u32,
    /// First page, or `RUN_LOST`.
    pub page: u32,
    pub len: u32,
}

/// One object's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CkptObject {
    pub ino: Ino,
    pub kind: Kind,
    /// Directories of its names (empty for the root).
    pub parents: Vec<Ino>,
    /// Its header page, if it has one on flash.
    pub header: Option<u32>,
    pub size: u64,
    pub max_chunk_on_flash: Option<u32>,
    pub headers_on_flash: u32,
    pub runs: Vec<ChunkRun>,
    /// Chunks fallocate reserved.
    pub reserve: Reserved,
}

/// An open block of a write stream and the summary entries of its pages so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CkptStream {
    pub block: u32,
    pub pending: Summary,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointImage {
    pub next_serial: u64,
    pub next_ino: Ino,
    pub alloc_cursor: u32,
    pub streams: Vec<Option<CkptStream>>,
    pub blocks: Vec<CkptBlock>,
    pub tombstones: Vec<(Ino, u32)>,
    pub objects: Vec<CkptObject>,
}

impl CheckpointImage {
    pub fn encode(&self, page_size: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_u64(self.next_serial);
        b.put_varint(u64::from(self.next_ino));
        b.put_varint(u64::from(self.alloc_cursor));
        b.put_varint(self.streams.len() as u64);
        for s in &self.streams {
            match s {
                None => b.put_varint(0),
                Some(s) => {
                    b.put_varint(u64::from(s.block) + 1);
                    let special = s.pending.payload(page_size);
                    b.put_u64(s.pending.base_serial);
                    b.put_varint(special.len() as u64);
                    b.extend_from_slice(&special);
                }
            }
        }
        b.put_varint(self.blocks.len() as u64);
        // A file's data fills block after block: a block whose data owners are the last
        // listed block's says so in its top bit instead of listing them again.
        let mut last_data: &[Ino] = &[];
        for blk in &self.blocks {
            let used = !matches!(blk.state, 0 | 3 | 4);
            let same = used && !blk.data_objs.is_empty() && blk.data_objs == last_data;
            b.put_u8(blk.state | (blk.flags & 7) << 4 | u8::from(same) << 7);
            if !used {
                continue;
            }
            b.put_varint(u64::from(blk.next_page));
            b.put_varint(blk.base_serial);
            b.put_varint(u64::from(blk.overhead));
            b.put_varint(blk.header_objs.len() as u64);
            for &o in &blk.header_objs {
                b.put_varint(u64::from(o));
            }
            if !same {
                b.put_varint(blk.data_objs.len() as u64);
                for &o in &blk.data_objs {
                    b.put_varint(u64::from(o));
                }
                last_data = &blk.data_objs;
            }
        }
        b.put_varint(self.tombstones.len() as u64);
        for &(ino, page) in &self.tombstones {
            b.put_varint(u64::from(ino));
            b.put_varint(u64::from(page));
        }
        b.put_varint(self.objects.len() as u64);
        let mut prev = 0u32;
        for o in &self.objects {
            b.put_varint(u64::from(o.ino.wrapping_sub(prev)));
            prev = o.ino;
            b.put_u8(o.kind.code());
            b.put_varint(o.parents.len() as u64);
            for &p in &o.parents {
                b.put_varint(u64::from(p));
            }
            b.put_varint(o.header.map_or(0, |h| u64::from(h) + 1));
            b.put_varint(o.size);
            b.put_varint(o.max_chunk_on_flash.map_or(0, |m| u64::from(m) + 1));
            b.put_varint(u64::from(o.headers_on_flash));
            b.put_varint(o.runs.len() as u64);
            let mut next_chunk = 0u32;
            for r in &o.runs {
                b.put_varint(u64::from(r.chunk - next_chunk));
                b.put_varint(if r.page == RUN_LOST {
                    0
                } else {
                    u64::from(r.page) + 1
                });
                b.put_varint(u64::from(r.len));
                next_chunk = r.chunk + r.len;
            }
            o.reserve.encode(&mut b);
        }
        let mut out = Vec::with_capacity(b.len() + 16);
        out.put_u32(MAGIC);
        out.put_u64(b.len() as u64);
        out.extend_from_slice(&b);
        out.put_u32(crc(&b));
        out
    }

    /// Total encoded length, from the first bytes of the stream (magic + length).
    pub fn stream_len(head: &[u8]) -> Option<u64> {
        let mut r = Reader::new(head);
        if r.u32()? != MAGIC {
            return None;
        }
        r.u64()?.checked_add(16)
    }

    pub fn decode(bytes: &[u8], page_size: u32, pages_per_block: u32) -> Option<CheckpointImage> {
        let len = usize::try_from(Self::stream_len(bytes)?).ok()?;
        if bytes.len() < len || len < 16 {
            return None;
        }
        let body = &bytes[12..len - 4];
        let stored = u32::from_le_bytes(bytes[len - 4..len].try_into().ok()?);
        if crc(body) != stored {
            return None;
        }
        let mut r = Reader::new(body);
        let next_serial = r.u64()?;
        let next_ino = r.varint32()?;
        let alloc_cursor = r.varint32()?;
        let n = r.count(1)?;
        let mut streams = Vec::with_capacity(n);
        for _ in 0..n {
            let block = r.varint32()?;
            if block == 0 {
                streams.push(None);
                continue;
            }
            let base_serial = r.u64()?;
            let plen = r.count(1)?;
            let payload = r.take(plen)?;
            let pending = summary_of(base_serial, payload, page_size, pages_per_block)?;
            streams.push(Some(CkptStream {
                block: block - 1,
                pending,
            }));
        }
        let n = r.count(1)?;
        let mut blocks = Vec::with_capacity(n);
        let mut last_data: Vec<Ino> = Vec::new();
        for _ in 0..n {
            let sf = r.u8()?;
            let (state, flags, same) = (sf & 0x0F, (sf >> 4) & 7, sf & 0x80 != 0);
            if state > 4 || (same && (matches!(state, 0 | 3 | 4) || last_data.is_empty())) {
                return None;
            }
            let mut blk = CkptBlock {
                state,
                flags,
                next_page: 0,
                base_serial: 0,
                overhead: 0,
                header_objs: Vec::new(),
                data_objs: Vec::new(),
            };
            if !matches!(state, 0 | 3 | 4) {
                blk.next_page = r.varint32()?;
                blk.base_serial = r.varint()?;
                blk.overhead = r.varint32()?;
                let m = r.count(1)?;
                blk.header_objs = (0..m).map(|_| r.varint32()).collect::<Option<Vec<_>>>()?;
                if same {
                    blk.data_objs = last_data.clone();
                } else {
                    let m = r.count(1)?;
                    blk.data_objs = (0..m).map(|_| r.varint32()).collect::<Option<Vec<_>>>()?;
                    last_data = blk.data_objs.clone();
                }
            }
            blocks.push(blk);
        }
        let n = r.count(2)?;
        let tombstones = (0..n)
            .map(|_| Some((r.varint32()?, r.varint32()?)))
            .collect::<Option<Vec<_>>>()?;
        let n = r.count(8)?;
        let mut objects = Vec::with_capacity(n);
        let mut prev = 0u32;
        for _ in 0..n {
            let ino = prev.checked_add(r.varint32()?)?;
            prev = ino;
            let kind = Kind::from_code(r.u8()?)?;
            let np = r.count(1)?;
            let parents = (0..np).map(|_| r.varint32()).collect::<Option<Vec<_>>>()?;
            let header = match r.varint32()? {
                0 => None,
                h => Some(h - 1),
            };
            let size = r.varint()?;
            let max_chunk_on_flash = match r.varint32()? {
                0 => None,
                m => Some(m - 1),
            };
            let headers_on_flash = r.varint32()?;
            let nr = r.count(3)?;
            let mut runs = Vec::with_capacity(nr);
            let mut next_chunk = 0u32;
            for _ in 0..nr {
                let chunk = next_chunk.checked_add(r.varint32()?)?;
                let page = match r.varint32()? {
                    0 => RUN_LOST,
                    p => p - 1,
                };
                let len = r.varint32()?;
                if len == 0 {
                    return None;
                }
                next_chunk = chunk.checked_add(len)?;
                runs.push(ChunkRun { chunk, page, len });
            }
            let reserve = Reserved::decode(&mut r)?;
            objects.push(CkptObject {
                ino,
                kind,
                parents,
                header,
                size,
                max_chunk_on_flash,
                headers_on_flash,
                runs,
                reserve,
            });
        }
        if r.left() != 0 {
            return None;
        }
        Some(CheckpointImage {
            next_serial,
            next_ino,
            alloc_cursor,
            streams,
            blocks,
            tombstones,
            objects,
        })
    }
}

fn summary_of(base: u64, payload: &[u8], page_size: u32, pages_per_block: u32) -> Option<Summary> {
    let mut r = Reader::new(payload);
    let n = r.varint32()?;
    let special = super::special::Special {
        kind: super::tags::SpecialKind::Summary,
        id: base,
        index: n,
        payload: payload.to_vec(),
    };
    Summary::from_special(&special, page_size, pages_per_block as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::summary::SummaryEntry;

    #[test]
    fn round_trip_and_damage() {
        let img = CheckpointImage {
            next_serial: 1 << 35,
            next_ino: 4000,
            alloc_cursor: 17,
            streams: vec![Some(CkptStream {
                block: 3,
                pending: Summary {
                    base_serial: 900,
                    entries: vec![SummaryEntry::Data {
                        obj: 2,
                        chunk: 0,
                        n_bytes: 100,
                        serial: 901,
                    }],
                },
            })],
            blocks: vec![
                CkptBlock {
                    state: 2,
                    flags: 1,
                    next_page: 64,
                    base_serial: 5,
                    overhead: 1,
                    header_objs: vec![1, 2, 2],
                    data_objs: vec![2, 5],
                },
                CkptBlock {
                    state: 0,
                    flags: 0,
                    next_page: 0,
                    base_serial: 0,
                    overhead: 0,
                    header_objs: vec![],
                    data_objs: vec![],
                },
                CkptBlock {
                    state: 3,
                    flags: 0,
                    next_page: 0,
                    base_serial: 0,
                    overhead: 0,
                    header_objs: vec![],
                    data_objs: vec![],
                },
                // The same owners as the last listed block: its top bit says so.
                CkptBlock {
                    state: 2,
                    flags: 4,
                    next_page: 64,
                    base_serial: 70,
                    overhead: 0,
                    header_objs: vec![],
                    data_objs: vec![2, 5],
                },
                CkptBlock {
                    state: 1,
                    flags: 0,
                    next_page: 3,
                    base_serial: 140,
                    overhead: 0,
                    header_objs: vec![],
                    data_objs: vec![5],
                },
            ],
            tombstones: vec![(9, 100)],
            objects: vec![
                CkptObject {
                    ino: 1,
                    kind: Kind::Dir,
                    parents: vec![],
                    header: Some(0),
                    size: 0,
                    max_chunk_on_flash: None,
                    headers_on_flash: 1,
                    runs: vec![],
                    reserve: Reserved::new(),
                },
                CkptObject {
                    ino: 2,
                    kind: Kind::File,
                    parents: vec![1, 1],
                    header: None,
                    size: 1 << 40,
                    max_chunk_on_flash: Some(70),
                    headers_on_flash: 2,
                    runs: vec![
                        ChunkRun {
                            chunk: 0,
                            page: 10,
                            len: 3,
                        },
                        ChunkRun {
                            chunk: 5,
                            page: RUN_LOST,
                            len: 1,
                        },
                    ],
                    reserve: Reserved::one(crate::format::reserved::Reserve { start: 2, end: 9 }),
                },
            ],
        };
        let bytes = img.encode(2048);
        assert_eq!(CheckpointImage::decode(&bytes, 2048, 64), Some(img));
        for cut in [0, 5, 12, bytes.len() - 1] {
            assert_eq!(CheckpointImage::decode(&bytes[..cut], 2048, 64), None);
        }
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert_eq!(CheckpointImage::decode(&bad, 2048, 64), None);
    }
}
