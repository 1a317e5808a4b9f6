//! The two anchor blocks: the file system record (written twice, once in page 0 of each)
//! and the log of checkpoint pointers that lets a mount find the checkpoint without
//! sweeping every block.
//!
//! Each anchor page is a special page (kind anchor) whose frame id is the anchor block's
//! epoch: page 0 of a block holds the file system record, pages 1.. hold checkpoint
//! pointers appended at each clean unmount. The anchor block with the higher epoch (and a
//! good page 0) is the current one; when it is full, the other is erased and takes over
//! with the next epoch.

use super::{Put, Reader, FORMAT_VERSION};

/// The file system record: what mkfs chose, and where the anchors are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsRecord {
    /// The two anchor blocks.
    pub anchors: [u32; 2],
    /// Geometry the file system was made for (a mount on another refuses).
    pub page_size: u32,
    pub oob_size: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
    /// `FsConfig` as JSON.
    pub config_json: Vec<u8>,
    /// The file system's id, random at mkfs (0: none, a record made before ids). A
    /// `minv` NVRAM image carries it too, so a mount can tell it belongs to this flash.
    pub fs_id: u128,
}

impl FsRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_u8(FORMAT_VERSION);
        for v in [
            self.anchors[0],
            self.anchors[1],
            self.page_size,
            self.oob_size,
            self.pages_per_block,
            self.blocks,
        ] {
            b.put_u32(v);
        }
        b.put_varint(self.config_json.len() as u64);
        b.extend_from_slice(&self.config_json);
        // Last and optional, so records made before ids read as they always did.
        if self.fs_id != 0 {
            b.extend_from_slice(&self.fs_id.to_le_bytes());
        }
        b
    }

    pub fn decode(payload: &[u8]) -> Option<FsRecord> {
        match Self::decode_any_version(payload)? {
            (FORMAT_VERSION, r) => Some(r),
            _ => None,
        }
    }

    /// Decodes a record of this or an earlier format version (whose record had the same
    /// layout), with the version it says: a mount refuses an older one by name.
    pub fn decode_any_version(payload: &[u8]) -> Option<(u8, FsRecord)> {
        let mut r = Reader::new(payload);
        let version = r.u8()?;
        if !(2..=FORMAT_VERSION).contains(&version) {
            return None;
        }
        let anchors = [r.u32()?, r.u32()?];
        let (page_size, oob_size, pages_per_block, blocks) =
            (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
        let n = r.count(1)?;
        let config_json = r.take(n)?.to_vec();
        let fs_id = match r.left() {
            0 => 0,
            16 => u128::from_le_bytes(r.take(16)?.try_into().ok()?),
            _ => return None,
        };
        (r.left() == 0).then_some((
            version,
            FsRecord {
                anchors,
                page_size,
                oob_size,
                pages_per_block,
                blocks,
                config_json,
                fs_id,
            },
        ))
    }
}

/// Where the checkpoint of the last clean unmount is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointPointer {
    /// The checkpoint's id (every page of it carries it in its frame).
    pub id: u64,
    /// Pages of the checkpoint stream.
    pub pages: u32,
    /// Its blocks, in stream order.
    pub blocks: Vec<u32>,
}

impl CheckpointPointer {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.put_u64(self.id);
        b.put_u32(self.pages);
        b.put_varint(self.blocks.len() as u64);
        for &x in &self.blocks {
            b.put_u32(x);
        }
        b
    }

    pub fn decode(payload: &[u8]) -> Option<CheckpointPointer> {
        let mut r = Reader::new(payload);
        let id = r.u64()?;
        let pages = r.u32()?;
        let n = r.count(4)?;
        let blocks = (0..n).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
        (r.left() == 0).then_some(CheckpointPointer { id, pages, blocks })
    }
}

/// A `minv` file system's NVRAM generation, as the flash records it: appended to the
/// anchor log (where the flash log profiles append checkpoint pointers) each time the
/// NVRAM's moves forward (a writable mount, a clean unmount), so an older copy of the
/// NVRAM, whose generation is lower, is told from the one this flash goes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerationEntry {
    pub generation: u64,
}

/// Tells a generation entry from a checkpoint pointer (which is never 12 bytes long).
const GENERATION_MAGIC: [u8; 4] = *b"NKGN";

impl GenerationEntry {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = GENERATION_MAGIC.to_vec();
        b.extend_from_slice(&self.generation.to_le_bytes());
        b
    }

    pub fn decode(payload: &[u8]) -> Option<GenerationEntry> {
        if payload.len() != 12 || payload[..4] != GENERATION_MAGIC {
            return None;
        }
        let generation = u64::from_le_bytes(payload[4..12].try_into().ok()?);
        Some(GenerationEntry { generation })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let f = FsRecord {
            anchors: [0, 1],
            page_size: 2048,
            oob_size: 64,
            pages_per_block: 64,
            blocks: 256,
            config_json: b"{\"profile\":\"yaffs\"}".to_vec(),
            fs_id: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        };
        let b = f.encode();
        assert_eq!(FsRecord::decode(&b), Some(f.clone()));
        assert_eq!(FsRecord::decode(&b[..b.len() - 1]), None);
        // A record made before ids: no id, still read.
        let old = FsRecord { fs_id: 0, ..f };
        let b = old.encode();
        assert_eq!(FsRecord::decode(&b), Some(old));
        assert_eq!(FsRecord::decode(&[&b[..], &[0u8; 3]].concat()), None);
        let p = CheckpointPointer {
            id: 77,
            pages: 19,
            blocks: vec![4, 9],
        };
        assert_eq!(CheckpointPointer::decode(&p.encode()), Some(p.clone()));
        // Generation entries and checkpoint pointers never read as each other.
        let g = GenerationEntry { generation: 9 };
        assert_eq!(GenerationEntry::decode(&g.encode()), Some(g));
        assert_eq!(CheckpointPointer::decode(&g.encode()), None);
        assert_eq!(GenerationEntry::decode(&p.encode()), None);
    }
}
