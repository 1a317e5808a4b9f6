//! UBIFS nodes as Linux lays them out (`ubifs-media.h`): a 24-byte common header (magic,
//! CRC, sequence number, length, type, group), then the node's own fields, little-endian.
//! Nodes start 8-byte aligned. The CRC is Linux's `crc32(0xFFFFFFFF, ...)` over everything
//! after the CRC field, without the final inversion zlib's CRC-32 applies.
//!
//! Decoders take bytes read from flash and never panic on them: a short buffer, a length
//! that runs past it or a bad CRC is a [`NodeError`].

use super::key::{Key, BRANCH_KEY_LEN, NODE_KEY_LEN};

pub const NODE_MAGIC: u32 = 0x0610_1831;
pub const CH_SZ: usize = 24;
/// File data is cut into blocks of this size, one data node each.
pub const BLOCK_SIZE: u64 = 4096;
pub const ROOT_INO: u32 = 1;
/// Fills gaps too small for a padding node.
pub const PADDING_BYTE: u8 = 0xCE;
pub const MAX_NLEN: usize = 255;
/// Largest inline data of an inode (symlink target, device number, xattr value).
pub const MAX_INO_DATA: usize = 4096;

pub const INO_NODE_SZ: usize = 160;
pub const DATA_NODE_SZ: usize = 48;
pub const DENT_NODE_SZ: usize = 56;
pub const TRUN_NODE_SZ: usize = 56;
pub const PAD_NODE_SZ: usize = 28;
pub const SB_NODE_SZ: usize = 4096;
pub const MST_NODE_SZ: usize = 512;
pub const REF_NODE_SZ: usize = 64;
pub const IDX_NODE_SZ: usize = 28;
pub const CS_NODE_SZ: usize = 32;
pub const ORPH_NODE_SZ: usize = 32;
/// An index branch: LEB, offset, length, then the key.
pub const BRANCH_SZ: usize = 12 + BRANCH_KEY_LEN;

/// Fixed LEBs of the volume: superblock, two master LEBs, then the log.
pub const SB_LNUM: u32 = 0;
pub const MST_LNUM: u32 = 1;
pub const LOG_LNUM: u32 = 3;

/// Node types (`UBIFS_*_NODE`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum NodeType {
    Ino = 0,
    Data = 1,
    Dent = 2,
    Xent = 3,
    Trun = 4,
    Pad = 5,
    Sb = 6,
    Mst = 7,
    Ref = 8,
    Idx = 9,
    Cs = 10,
    Orph = 11,
    Auth = 12,
    Sig = 13,
}

impl NodeType {
    pub fn from_u8(t: u8) -> Option<NodeType> {
        use NodeType::*;
        Some(match t {
            0 => Ino,
            1 => Data,
            2 => Dent,
            3 => Xent,
            4 => Trun,
            5 => Pad,
            6 => Sb,
            7 => Mst,
            8 => Ref,
            9 => Idx,
            10 => Cs,
            11 => Orph,
            12 => Auth,
            13 => Sig,
            _ => return None,
        })
    }
}

/// Group types: the journal writes some nodes as a group that counts only when whole.
pub const NO_NODE_GROUP: u8 = 0;
pub const IN_NODE_GROUP: u8 = 1;
pub const LAST_OF_NODE_GROUP: u8 = 2;

/// Inode flags (`UBIFS_*_FL`) this reader acts on.
pub const XATTR_FL: u32 = 0x20;
pub const CRYPT_FL: u32 = 0x40;

/// Superblock flags.
pub const FLG_BIGLPT: u32 = 0x02;
pub const FLG_SPACE_FIXUP: u32 = 0x04;
pub const FLG_DOUBLE_HASH: u32 = 0x08;
pub const FLG_ENCRYPTION: u32 = 0x10;
pub const FLG_AUTHENTICATION: u32 = 0x20;

/// Master node flags.
pub const MST_DIRTY: u32 = 1;
pub const MST_NO_ORPHS: u32 = 2;

/// Compressors (`UBIFS_COMPR_*`).
pub const COMPR_NONE: u16 = 0;
pub const COMPR_LZO: u16 = 1;
pub const COMPR_ZLIB: u16 = 2;
pub const COMPR_ZSTD: u16 = 3;

/// Linux's CRC-32 as UBIFS stores it (seed all ones, no final inversion).
pub fn crc(bytes: &[u8]) -> u32 {
    !crc32fast::hash(bytes)
}

/// Rounds up to the 8-byte alignment every node starts at.
pub fn align8(x: usize) -> usize {
    (x + 7) & !7
}

/// Why bytes are not a good node.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum NodeError {
    /// All 0xFF where a header would be: nothing was written here.
    #[error("empty space")]
    Empty,
    #[error("no node magic")]
    BadMagic,
    #[error("node length {0} out of range")]
    BadLength(u32),
    #[error("node CRC mismatch")]
    BadCrc,
    #[error("unknown node type {0}")]
    BadType(u8),
    #[error("node type {found} where {wanted} was expected")]
    WrongType { found: u8, wanted: u8 },
    #[error("bad field: {0}")]
    BadField(&'static str),
}

/// The common header of a node that checked out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Header {
    pub sqnum: u64,
    pub len: u32,
    pub node_type: NodeType,
    pub group_type: u8,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Checks the node at the start of `buf`: magic, a length that fits `buf` and is at least
/// the header, a known type, the CRC. The node's bytes are `buf[..header.len]`.
pub fn check(buf: &[u8]) -> Result<Header, NodeError> {
    if buf.len() < CH_SZ {
        return Err(if buf.iter().all(|&b| b == 0xFF) {
            NodeError::Empty
        } else {
            NodeError::BadLength(buf.len() as u32)
        });
    }
    let magic = u32_at(buf, 0);
    if magic != NODE_MAGIC {
        return Err(if buf[..CH_SZ].iter().all(|&b| b == 0xFF) {
            NodeError::Empty
        } else {
            NodeError::BadMagic
        });
    }
    let len = u32_at(buf, 16);
    if (len as usize) < CH_SZ || len as usize > buf.len() {
        return Err(NodeError::BadLength(len));
    }
    if crc(&buf[8..len as usize]) != u32_at(buf, 4) {
        return Err(NodeError::BadCrc);
    }
    let node_type = NodeType::from_u8(buf[20]).ok_or(NodeError::BadType(buf[20]))?;
    Ok(Header {
        sqnum: u64_at(buf, 8),
        len,
        node_type,
        group_type: buf[21],
    })
}

/// Checks a node and that it is of type `wanted` and at least `min` bytes long.
fn check_as(buf: &[u8], wanted: NodeType, min: usize) -> Result<Header, NodeError> {
    let h = check(buf)?;
    if h.node_type != wanted {
        return Err(NodeError::WrongType {
            found: h.node_type as u8,
            wanted: wanted as u8,
        });
    }
    if (h.len as usize) < min {
        return Err(NodeError::BadLength(h.len));
    }
    Ok(h)
}

/// Builds a node: the common header over `body` (the bytes after the header), length and
/// CRC filled in. Callers pad to 8 bytes between nodes.
pub fn seal(node_type: NodeType, group_type: u8, sqnum: u64, body: &[u8]) -> Vec<u8> {
    let len = CH_SZ + body.len();
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&NODE_MAGIC.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&sqnum.to_le_bytes());
    b.extend_from_slice(&(len as u32).to_le_bytes());
    b.push(node_type as u8);
    b.push(group_type);
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(body);
    let c = crc(&b[8..]);
    b[4..8].copy_from_slice(&c.to_le_bytes());
    b
}

/// A padding node of exactly `len` bytes (at least [`PAD_NODE_SZ`]): it tells a scan to
/// skip the rest of a min. I/O unit.
pub fn pad_node(len: usize) -> Vec<u8> {
    let pad_len = (len - PAD_NODE_SZ) as u32;
    let mut n = seal(NodeType::Pad, NO_NODE_GROUP, 0, &pad_len.to_le_bytes());
    n.resize(len, 0);
    n
}

/// Seconds and nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Time {
    pub sec: u64,
    pub nsec: u32,
}

/// An inode node: a file's attributes, and inline data for symlinks (the target), device
/// files (the device number) and xattr inodes (the value).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct InoNode {
    pub inum: u32,
    pub creat_sqnum: u64,
    pub size: u64,
    pub atime: Time,
    pub ctime: Time,
    pub mtime: Time,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub flags: u32,
    pub xattr_cnt: u32,
    pub xattr_size: u32,
    pub xattr_names: u32,
    pub compr_type: u16,
    pub data: Vec<u8>,
}

impl InoNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, InoNode), NodeError> {
        let h = check_as(buf, NodeType::Ino, INO_NODE_SZ)?;
        let b = &buf[..h.len as usize];
        let key = Key::decode(&b[CH_SZ..]);
        if key.kind() != super::key::INO_KEY {
            return Err(NodeError::BadField("inode node key"));
        }
        let data_len = u32_at(b, 112) as usize;
        if data_len > MAX_INO_DATA || INO_NODE_SZ + data_len != b.len() {
            return Err(NodeError::BadField("inode data_len"));
        }
        let t = |s, n| Time {
            sec: u64_at(b, s),
            nsec: u32_at(b, n),
        };
        Ok((
            h,
            InoNode {
                inum: key.inum,
                creat_sqnum: u64_at(b, 40),
                size: u64_at(b, 48),
                atime: t(56, 80),
                ctime: t(64, 84),
                mtime: t(72, 88),
                nlink: u32_at(b, 92),
                uid: u32_at(b, 96),
                gid: u32_at(b, 100),
                mode: u32_at(b, 104),
                flags: u32_at(b, 108),
                xattr_cnt: u32_at(b, 116),
                xattr_size: u32_at(b, 120),
                xattr_names: u32_at(b, 128),
                compr_type: u16_at(b, 132),
                data: b[INO_NODE_SZ..].to_vec(),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64, group_type: u8) -> Vec<u8> {
        let mut b = vec![0u8; INO_NODE_SZ - CH_SZ];
        let mut put = |at: usize, v: &[u8]| b[at - CH_SZ..at - CH_SZ + v.len()].copy_from_slice(v);
        put(24, &Key::ino(self.inum).encode());
        put(40, &self.creat_sqnum.to_le_bytes());
        put(48, &self.size.to_le_bytes());
        put(56, &self.atime.sec.to_le_bytes());
        put(64, &self.ctime.sec.to_le_bytes());
        put(72, &self.mtime.sec.to_le_bytes());
        put(80, &self.atime.nsec.to_le_bytes());
        put(84, &self.ctime.nsec.to_le_bytes());
        put(88, &self.mtime.nsec.to_le_bytes());
        put(92, &self.nlink.to_le_bytes());
        put(96, &self.uid.to_le_bytes());
        put(100, &self.gid.to_le_bytes());
        put(104, &self.mode.to_le_bytes());
        put(108, &self.flags.to_le_bytes());
        put(112, &(self.data.len() as u32).to_le_bytes());
        put(116, &self.xattr_cnt.to_le_bytes());
        put(120, &self.xattr_size.to_le_bytes());
        put(128, &self.xattr_names.to_le_bytes());
        put(132, &self.compr_type.to_le_bytes());
        b.extend_from_slice(&self.data);
        seal(NodeType::Ino, group_type, sqnum, &b)
    }
}

/// A data node: one block of a file, `size` bytes once decompressed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DataNode {
    pub key: Key,
    pub size: u32,
    pub compr_type: u16,
    /// The bytes as stored (compressed with `compr_type`).
    pub data: Vec<u8>,
}

impl DataNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, DataNode), NodeError> {
        let h = check_as(buf, NodeType::Data, DATA_NODE_SZ)?;
        let b = &buf[..h.len as usize];
        let key = Key::decode(&b[CH_SZ..]);
        let size = u32_at(b, 40);
        if key.kind() != super::key::DATA_KEY || u64::from(size) > BLOCK_SIZE {
            return Err(NodeError::BadField("data node key or size"));
        }
        Ok((
            h,
            DataNode {
                key,
                size,
                compr_type: u16_at(b, 44),
                data: b[DATA_NODE_SZ..].to_vec(),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64, group_type: u8) -> Vec<u8> {
        let mut b = vec![0u8; DATA_NODE_SZ - CH_SZ];
        b[..8].copy_from_slice(&self.key.encode());
        b[16..20].copy_from_slice(&self.size.to_le_bytes());
        b[20..22].copy_from_slice(&self.compr_type.to_le_bytes());
        b.extend_from_slice(&self.data);
        seal(NodeType::Data, group_type, sqnum, &b)
    }
}

/// A directory entry (`Dent`) or an extended attribute entry (`Xent`); `inum` 0 deletes
/// the entry of that name (in the journal).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DentNode {
    pub key: Key,
    pub inum: u64,
    /// `UBIFS_ITYPE_*` of the target.
    pub dtype: u8,
    pub name: Vec<u8>,
}

/// Inode types in directory entries (`UBIFS_ITYPE_*`).
pub const ITYPE_REG: u8 = 0;
pub const ITYPE_DIR: u8 = 1;
pub const ITYPE_LNK: u8 = 2;
pub const ITYPE_BLK: u8 = 3;
pub const ITYPE_CHR: u8 = 4;
pub const ITYPE_FIFO: u8 = 5;
pub const ITYPE_SOCK: u8 = 6;

impl DentNode {
    /// Decodes a directory or xattr entry (either type).
    pub fn decode(buf: &[u8]) -> Result<(Header, DentNode), NodeError> {
        let h = check(buf)?;
        if !matches!(h.node_type, NodeType::Dent | NodeType::Xent) {
            return Err(NodeError::WrongType {
                found: h.node_type as u8,
                wanted: NodeType::Dent as u8,
            });
        }
        let b = &buf[..h.len as usize];
        if b.len() < DENT_NODE_SZ {
            return Err(NodeError::BadLength(h.len));
        }
        let nlen = u16_at(b, 50) as usize;
        // The name is followed by a NUL that the length counts.
        if nlen == 0 || nlen > MAX_NLEN || DENT_NODE_SZ + nlen + 1 != b.len() {
            return Err(NodeError::BadField("entry name length"));
        }
        let key = Key::decode(&b[CH_SZ..]);
        let wanted = if h.node_type == NodeType::Dent {
            super::key::DENT_KEY
        } else {
            super::key::XENT_KEY
        };
        if key.kind() != wanted {
            return Err(NodeError::BadField("entry key type"));
        }
        Ok((
            h,
            DentNode {
                key,
                inum: u64_at(b, 40),
                dtype: b[49],
                name: b[DENT_NODE_SZ..DENT_NODE_SZ + nlen].to_vec(),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64, group_type: u8) -> Vec<u8> {
        let mut b = vec![0u8; DENT_NODE_SZ - CH_SZ];
        b[..8].copy_from_slice(&self.key.encode());
        b[16..24].copy_from_slice(&self.inum.to_le_bytes());
        b[25] = self.dtype;
        b[26..28].copy_from_slice(&(self.name.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.name);
        b.push(0);
        let t = if self.key.kind() == super::key::XENT_KEY {
            NodeType::Xent
        } else {
            NodeType::Dent
        };
        seal(t, group_type, sqnum, &b)
    }
}

/// A truncation: data of `inum` past `new_size` is gone.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TrunNode {
    pub inum: u32,
    pub old_size: u64,
    pub new_size: u64,
}

impl TrunNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, TrunNode), NodeError> {
        let h = check_as(buf, NodeType::Trun, TRUN_NODE_SZ)?;
        Ok((
            h,
            TrunNode {
                inum: u32_at(buf, 24),
                old_size: u64_at(buf, 40),
                new_size: u64_at(buf, 48),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64, group_type: u8) -> Vec<u8> {
        let mut b = vec![0u8; TRUN_NODE_SZ - CH_SZ];
        b[..4].copy_from_slice(&self.inum.to_le_bytes());
        b[16..24].copy_from_slice(&self.old_size.to_le_bytes());
        b[24..32].copy_from_slice(&self.new_size.to_le_bytes());
        seal(NodeType::Trun, group_type, sqnum, &b)
    }
}

/// The superblock node (LEB 0): the volume's geometry and the sizes of its areas.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct SbNode {
    pub key_hash: u8,
    pub key_fmt: u8,
    pub flags: u32,
    pub min_io_size: u32,
    pub leb_size: u32,
    pub leb_cnt: u32,
    pub max_leb_cnt: u32,
    pub max_bud_bytes: u64,
    pub log_lebs: u32,
    pub lpt_lebs: u32,
    pub orph_lebs: u32,
    pub jhead_cnt: u32,
    pub fanout: u32,
    pub lsave_cnt: u32,
    pub fmt_version: u32,
    pub default_compr: u16,
    pub rp_uid: u32,
    pub rp_gid: u32,
    pub rp_size: u64,
    pub time_gran: u32,
    pub uuid: [u8; 16],
    pub ro_compat_version: u32,
}

impl SbNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, SbNode), NodeError> {
        let h = check_as(buf, NodeType::Sb, SB_NODE_SZ)?;
        let b = buf;
        Ok((
            h,
            SbNode {
                key_hash: b[26],
                key_fmt: b[27],
                flags: u32_at(b, 28),
                min_io_size: u32_at(b, 32),
                leb_size: u32_at(b, 36),
                leb_cnt: u32_at(b, 40),
                max_leb_cnt: u32_at(b, 44),
                max_bud_bytes: u64_at(b, 48),
                log_lebs: u32_at(b, 56),
                lpt_lebs: u32_at(b, 60),
                orph_lebs: u32_at(b, 64),
                jhead_cnt: u32_at(b, 68),
                fanout: u32_at(b, 72),
                lsave_cnt: u32_at(b, 76),
                fmt_version: u32_at(b, 80),
                default_compr: u16_at(b, 84),
                rp_uid: u32_at(b, 88),
                rp_gid: u32_at(b, 92),
                rp_size: u64_at(b, 96),
                time_gran: u32_at(b, 104),
                uuid: b[108..124].try_into().expect("16 bytes"),
                ro_compat_version: u32_at(b, 124),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64) -> Vec<u8> {
        let mut b = vec![0u8; SB_NODE_SZ - CH_SZ];
        let mut put = |at: usize, v: &[u8]| b[at - CH_SZ..at - CH_SZ + v.len()].copy_from_slice(v);
        put(26, &[self.key_hash, self.key_fmt]);
        put(28, &self.flags.to_le_bytes());
        put(32, &self.min_io_size.to_le_bytes());
        put(36, &self.leb_size.to_le_bytes());
        put(40, &self.leb_cnt.to_le_bytes());
        put(44, &self.max_leb_cnt.to_le_bytes());
        put(48, &self.max_bud_bytes.to_le_bytes());
        put(56, &self.log_lebs.to_le_bytes());
        put(60, &self.lpt_lebs.to_le_bytes());
        put(64, &self.orph_lebs.to_le_bytes());
        put(68, &self.jhead_cnt.to_le_bytes());
        put(72, &self.fanout.to_le_bytes());
        put(76, &self.lsave_cnt.to_le_bytes());
        put(80, &self.fmt_version.to_le_bytes());
        put(84, &self.default_compr.to_le_bytes());
        put(88, &self.rp_uid.to_le_bytes());
        put(92, &self.rp_gid.to_le_bytes());
        put(96, &self.rp_size.to_le_bytes());
        put(104, &self.time_gran.to_le_bytes());
        put(108, &self.uuid);
        put(124, &self.ro_compat_version.to_le_bytes());
        seal(NodeType::Sb, NO_NODE_GROUP, sqnum, &b)
    }

    /// First LEB of the LPT area, the orphan area and the main area.
    pub fn lpt_first(&self) -> u32 {
        LOG_LNUM + self.log_lebs
    }
    pub fn orph_first(&self) -> u32 {
        self.lpt_first() + self.lpt_lebs
    }
    pub fn main_first(&self) -> u32 {
        self.orph_first() + self.orph_lebs
    }
}

/// The master node (LEBs 1 and 2, the newest copy wins): where the index root, the log,
/// the LPT and the heads are, and the space totals, as of the last commit.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct MstNode {
    pub highest_inum: u64,
    pub cmt_no: u64,
    pub flags: u32,
    pub log_lnum: u32,
    pub root_lnum: u32,
    pub root_offs: u32,
    pub root_len: u32,
    pub gc_lnum: u32,
    pub ihead_lnum: u32,
    pub ihead_offs: u32,
    pub index_size: u64,
    pub total_free: u64,
    pub total_dirty: u64,
    pub total_used: u64,
    pub total_dead: u64,
    pub total_dark: u64,
    pub lpt_lnum: u32,
    pub lpt_offs: u32,
    pub nhead_lnum: u32,
    pub nhead_offs: u32,
    pub ltab_lnum: u32,
    pub ltab_offs: u32,
    pub lsave_lnum: u32,
    pub lsave_offs: u32,
    pub lscan_lnum: u32,
    pub empty_lebs: u32,
    pub idx_lebs: u32,
    pub leb_cnt: u32,
}

impl MstNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, MstNode), NodeError> {
        let h = check_as(buf, NodeType::Mst, MST_NODE_SZ)?;
        let b = buf;
        Ok((
            h,
            MstNode {
                highest_inum: u64_at(b, 24),
                cmt_no: u64_at(b, 32),
                flags: u32_at(b, 40),
                log_lnum: u32_at(b, 44),
                root_lnum: u32_at(b, 48),
                root_offs: u32_at(b, 52),
                root_len: u32_at(b, 56),
                gc_lnum: u32_at(b, 60),
                ihead_lnum: u32_at(b, 64),
                ihead_offs: u32_at(b, 68),
                index_size: u64_at(b, 72),
                total_free: u64_at(b, 80),
                total_dirty: u64_at(b, 88),
                total_used: u64_at(b, 96),
                total_dead: u64_at(b, 104),
                total_dark: u64_at(b, 112),
                lpt_lnum: u32_at(b, 120),
                lpt_offs: u32_at(b, 124),
                nhead_lnum: u32_at(b, 128),
                nhead_offs: u32_at(b, 132),
                ltab_lnum: u32_at(b, 136),
                ltab_offs: u32_at(b, 140),
                lsave_lnum: u32_at(b, 144),
                lsave_offs: u32_at(b, 148),
                lscan_lnum: u32_at(b, 152),
                empty_lebs: u32_at(b, 156),
                idx_lebs: u32_at(b, 160),
                leb_cnt: u32_at(b, 164),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64) -> Vec<u8> {
        let mut b = vec![0u8; MST_NODE_SZ - CH_SZ];
        let words64 = [
            (24, self.highest_inum),
            (32, self.cmt_no),
            (72, self.index_size),
            (80, self.total_free),
            (88, self.total_dirty),
            (96, self.total_used),
            (104, self.total_dead),
            (112, self.total_dark),
        ];
        for (at, v) in words64 {
            b[at - CH_SZ..at - CH_SZ + 8].copy_from_slice(&v.to_le_bytes());
        }
        let words32 = [
            (40, self.flags),
            (44, self.log_lnum),
            (48, self.root_lnum),
            (52, self.root_offs),
            (56, self.root_len),
            (60, self.gc_lnum),
            (64, self.ihead_lnum),
            (68, self.ihead_offs),
            (120, self.lpt_lnum),
            (124, self.lpt_offs),
            (128, self.nhead_lnum),
            (132, self.nhead_offs),
            (136, self.ltab_lnum),
            (140, self.ltab_offs),
            (144, self.lsave_lnum),
            (148, self.lsave_offs),
            (152, self.lscan_lnum),
            (156, self.empty_lebs),
            (160, self.idx_lebs),
            (164, self.leb_cnt),
        ];
        for (at, v) in words32 {
            b[at - CH_SZ..at - CH_SZ + 4].copy_from_slice(&v.to_le_bytes());
        }
        seal(NodeType::Mst, NO_NODE_GROUP, sqnum, &b)
    }
}

/// A reference node in the log: a bud (a journal head's LEB) starts at `offs` of `lnum`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RefNode {
    pub lnum: u32,
    pub offs: u32,
    pub jhead: u32,
}

impl RefNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, RefNode), NodeError> {
        let h = check_as(buf, NodeType::Ref, REF_NODE_SZ)?;
        Ok((
            h,
            RefNode {
                lnum: u32_at(buf, 24),
                offs: u32_at(buf, 28),
                jhead: u32_at(buf, 32),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64) -> Vec<u8> {
        let mut b = vec![0u8; REF_NODE_SZ - CH_SZ];
        b[..4].copy_from_slice(&self.lnum.to_le_bytes());
        b[4..8].copy_from_slice(&self.offs.to_le_bytes());
        b[8..12].copy_from_slice(&self.jhead.to_le_bytes());
        seal(NodeType::Ref, NO_NODE_GROUP, sqnum, &b)
    }
}

/// A commit-start node: the first node of the log after a commit.
pub fn decode_cs(buf: &[u8]) -> Result<(Header, u64), NodeError> {
    let h = check_as(buf, NodeType::Cs, CS_NODE_SZ)?;
    Ok((h, u64_at(buf, 24)))
}

pub fn encode_cs(cmt_no: u64, sqnum: u64) -> Vec<u8> {
    seal(NodeType::Cs, NO_NODE_GROUP, sqnum, &cmt_no.to_le_bytes())
}

/// One branch of an index node: a child (an index node or, at level 0, a leaf node) and
/// the lowest key under it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Branch {
    pub lnum: u32,
    pub offs: u32,
    pub len: u32,
    pub key: Key,
}

/// An index node of the on-flash B+ tree.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct IdxNode {
    pub level: u16,
    pub branches: Vec<Branch>,
}

impl IdxNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, IdxNode), NodeError> {
        let h = check_as(buf, NodeType::Idx, IDX_NODE_SZ)?;
        let b = &buf[..h.len as usize];
        let count = u16_at(b, 24) as usize;
        if count == 0 || IDX_NODE_SZ + count * BRANCH_SZ != b.len() {
            return Err(NodeError::BadField("index child count"));
        }
        let branches = (0..count)
            .map(|i| {
                let at = IDX_NODE_SZ + i * BRANCH_SZ;
                Branch {
                    lnum: u32_at(b, at),
                    offs: u32_at(b, at + 4),
                    len: u32_at(b, at + 8),
                    key: Key::decode(&b[at + 12..]),
                }
            })
            .collect();
        Ok((
            h,
            IdxNode {
                level: u16_at(b, 26),
                branches,
            },
        ))
    }

    pub fn encode(&self, sqnum: u64) -> Vec<u8> {
        let mut b = Vec::with_capacity(4 + self.branches.len() * BRANCH_SZ);
        b.extend_from_slice(&(self.branches.len() as u16).to_le_bytes());
        b.extend_from_slice(&self.level.to_le_bytes());
        for br in &self.branches {
            b.extend_from_slice(&br.lnum.to_le_bytes());
            b.extend_from_slice(&br.offs.to_le_bytes());
            b.extend_from_slice(&br.len.to_le_bytes());
            b.extend_from_slice(&br.key.encode());
        }
        seal(NodeType::Idx, NO_NODE_GROUP, sqnum, &b)
    }
}

/// An orphan node: inodes unlinked while open, as of commit `cmt_no`; the top bit of the
/// commit number marks the last orphan node of a commit.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OrphNode {
    pub cmt_no: u64,
    pub last: bool,
    pub inos: Vec<u64>,
}

impl OrphNode {
    pub fn decode(buf: &[u8]) -> Result<(Header, OrphNode), NodeError> {
        let h = check_as(buf, NodeType::Orph, ORPH_NODE_SZ)?;
        let b = &buf[..h.len as usize];
        if !(b.len() - ORPH_NODE_SZ).is_multiple_of(8) {
            return Err(NodeError::BadField("orphan node length"));
        }
        let raw = u64_at(b, 24);
        Ok((
            h,
            OrphNode {
                cmt_no: raw & !(1 << 63),
                last: raw >> 63 == 1,
                inos: b[ORPH_NODE_SZ..]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
            },
        ))
    }

    pub fn encode(&self, sqnum: u64) -> Vec<u8> {
        let raw = self.cmt_no | (u64::from(self.last) << 63);
        let mut b = raw.to_le_bytes().to_vec();
        for i in &self.inos {
            b.extend_from_slice(&i.to_le_bytes());
        }
        seal(NodeType::Orph, NO_NODE_GROUP, sqnum, &b)
    }
}

/// Bytes to skip after a padding node (its own length plus `pad_len`).
pub fn pad_span(buf: &[u8]) -> Result<usize, NodeError> {
    let h = check_as(buf, NodeType::Pad, PAD_NODE_SZ)?;
    let pad_len = u32_at(buf, 24) as usize;
    Ok(h.len as usize + pad_len)
}

/// The key of a leaf node (inode, data, entry), as the index files it.
pub fn leaf_key(buf: &[u8]) -> Option<Key> {
    (buf.len() >= CH_SZ + NODE_KEY_LEN).then(|| Key::decode(&buf[CH_SZ..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip_and_sizes_are_linuxs() {
        let ino = InoNode {
            inum: 65,
            size: 10_000,
            nlink: 1,
            mode: 0o100644,
            data: b"target".to_vec(),
            mtime: Time { sec: 7, nsec: 9 },
            ..Default::default()
        };
        let b = ino.encode(5, NO_NODE_GROUP);
        assert_eq!(b.len(), INO_NODE_SZ + 6);
        let (h, back) = InoNode::decode(&b).unwrap();
        assert_eq!((h.sqnum, back), (5, ino));

        let dent = DentNode {
            key: Key::dent(1, b"file"),
            inum: 65,
            dtype: ITYPE_REG,
            name: b"file".to_vec(),
        };
        let b = dent.encode(6, NO_NODE_GROUP);
        assert_eq!(b.len(), DENT_NODE_SZ + 5);
        assert_eq!(DentNode::decode(&b).unwrap().1, dent);

        let idx = IdxNode {
            level: 1,
            branches: vec![Branch {
                lnum: 12,
                offs: 192,
                len: 188,
                key: Key::ino(1),
            }],
        };
        let b = idx.encode(7);
        assert_eq!(b.len(), IDX_NODE_SZ + BRANCH_SZ);
        assert_eq!(IdxNode::decode(&b).unwrap().1, idx);

        let sb = SbNode {
            leb_size: 126_976,
            log_lebs: 4,
            ..Default::default()
        };
        assert_eq!(SbNode::decode(&sb.encode(1)).unwrap().1, sb);
        let mst = MstNode {
            root_lnum: 12,
            leb_cnt: 100,
            total_dark: 3,
            ..Default::default()
        };
        assert_eq!(MstNode::decode(&mst.encode(1)).unwrap().1, mst);
        assert_eq!(pad_span(&pad_node(40)).unwrap(), 40);
    }

    /// Fields a CRC does not guard against (a node written wrong, not damaged): every
    /// single-byte change of every node type, the CRC made right again, decodes to an
    /// error or a node, never a panic.
    #[test]
    fn wrong_fields_under_a_good_crc_are_errors_not_panics() {
        let nodes = [
            InoNode {
                inum: 70,
                data: b"target".to_vec(),
                ..Default::default()
            }
            .encode(1, NO_NODE_GROUP),
            DataNode {
                key: Key::data(70, 3),
                size: 5,
                compr_type: COMPR_NONE,
                data: b"abcde".to_vec(),
            }
            .encode(2, NO_NODE_GROUP),
            DentNode {
                key: Key::dent(1, b"n"),
                inum: 70,
                dtype: ITYPE_REG,
                name: b"n".to_vec(),
            }
            .encode(3, NO_NODE_GROUP),
            IdxNode {
                level: 0,
                branches: vec![Branch {
                    lnum: 9,
                    offs: 0,
                    len: 160,
                    key: Key::ino(70),
                }],
            }
            .encode(4),
            OrphNode {
                cmt_no: 2,
                last: true,
                inos: vec![70],
            }
            .encode(5),
            TrunNode {
                inum: 70,
                old_size: 9,
                new_size: 1,
            }
            .encode(6, NO_NODE_GROUP),
            RefNode {
                lnum: 9,
                offs: 0,
                jhead: 1,
            }
            .encode(7),
            pad_node(40),
        ];
        for node in nodes {
            for at in 8..node.len() {
                for delta in [1u8, 0x80, 0xFF] {
                    let mut b = node.clone();
                    b[at] = b[at].wrapping_add(delta);
                    let len = (u32_at(&b, 16) as usize).clamp(8, b.len());
                    let c = crc(&b[8..len]);
                    b[4..8].copy_from_slice(&c.to_le_bytes());
                    let _ = InoNode::decode(&b);
                    let _ = DataNode::decode(&b);
                    let _ = DentNode::decode(&b);
                    let _ = IdxNode::decode(&b);
                    let _ = OrphNode::decode(&b);
                    let _ = TrunNode::decode(&b);
                    let _ = RefNode::decode(&b);
                    let _ = pad_span(&b);
                    let _ = decode_cs(&b);
                }
            }
        }
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let good = DataNode {
            key: Key::data(65, 0),
            size: 3,
            compr_type: COMPR_NONE,
            data: b"abc".to_vec(),
        }
        .encode(1, NO_NODE_GROUP);
        assert_eq!(check(&[0xFF; 64]), Err(NodeError::Empty));
        let mut flipped = good.clone();
        flipped[50] ^= 1;
        assert_eq!(check(&flipped), Err(NodeError::BadCrc));
        assert!(matches!(
            check(&good[..good.len() - 1]),
            Err(NodeError::BadLength(_))
        ));
        assert!(matches!(
            InoNode::decode(&good),
            Err(NodeError::WrongType { .. })
        ));
        // Every prefix and every single-byte change decodes to an error or a node, never a
        // panic.
        for cut in 0..good.len() {
            let _ = DataNode::decode(&good[..cut]);
        }
        for at in 0..good.len() {
            let mut b = good.clone();
            b[at] = b[at].wrapping_add(0x55);
            let _ = DataNode::decode(&b);
            let _ = DentNode::decode(&b);
            let _ = IdxNode::decode(&b);
        }
    }
}
