//! UBIFS keys in the simple key format (`UBIFS_SIMPLE_KEY_FMT`): 64 bits, the inode number
//! in the first 32, then 3 bits of key type and 29 bits of block number (data) or name hash
//! (directory and xattr entries). Keys sort as two unsigned 32-bit words, which is the
//! order of the index: an inode's node, then its data blocks, then its entries.

/// The four key types.
pub const INO_KEY: u8 = 0;
pub const DATA_KEY: u8 = 1;
pub const DENT_KEY: u8 = 2;
pub const XENT_KEY: u8 = 3;

/// Bits of block number or hash below the key type.
const LOW_BITS: u32 = 29;
const LOW_MASK: u32 = (1 << LOW_BITS) - 1;

/// Bytes of a key as it sits in a node (`UBIFS_MAX_KEY_LEN`: the simple format uses the
/// first 8, the rest is zero) and in an index branch (`UBIFS_SK_LEN`).
pub const NODE_KEY_LEN: usize = 16;
pub const BRANCH_KEY_LEN: usize = 8;

/// A key. The derived order is the index's order (inode number, then type and low bits as
/// one unsigned word).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Key {
    pub inum: u32,
    /// Key type in the top 3 bits, block or hash in the low 29.
    word: u32,
}

impl Key {
    pub fn new(inum: u32, kind: u8, low: u32) -> Key {
        Key {
            inum,
            word: (u32::from(kind) << LOW_BITS) | (low & LOW_MASK),
        }
    }

    pub fn ino(inum: u32) -> Key {
        Key::new(inum, INO_KEY, 0)
    }

    pub fn data(inum: u32, block: u32) -> Key {
        Key::new(inum, DATA_KEY, block)
    }

    /// A directory entry's key: parent and the R5 hash of the name.
    pub fn dent(parent: u32, name: &[u8]) -> Key {
        Key::new(parent, DENT_KEY, r5_hash(name))
    }

    /// An extended attribute entry's key: host inode and the R5 hash of the name.
    pub fn xent(host: u32, name: &[u8]) -> Key {
        Key::new(host, XENT_KEY, r5_hash(name))
    }

    pub fn kind(&self) -> u8 {
        (self.word >> LOW_BITS) as u8
    }

    /// Block number (data keys) or name hash (entry keys).
    pub fn low(&self) -> u32 {
        self.word & LOW_MASK
    }

    /// The smallest key of an inode (its inode key) and the first key past all of it.
    pub fn inode_range(inum: u32) -> std::ops::Range<Key> {
        Key::ino(inum)..Key {
            inum: inum + 1,
            word: 0,
        }
    }

    /// Every key of one type of an inode.
    pub fn kind_range(inum: u32, kind: u8) -> std::ops::RangeInclusive<Key> {
        Key::new(inum, kind, 0)..=Key::new(inum, kind, LOW_MASK)
    }

    /// Decodes the first 8 bytes of `b` (little-endian words).
    pub fn decode(b: &[u8]) -> Key {
        Key {
            inum: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            word: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// The 8 bytes of the key.
    pub fn encode(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.inum.to_le_bytes());
        b[4..].copy_from_slice(&self.word.to_le_bytes());
        b
    }
}

/// The R5 hash UBIFS gives names (borrowed by UBIFS from reiserfs): over the name's bytes
/// as signed chars, masked to 29 bits, with 0-2 moved up (they mean ".", ".." and the end
/// of a directory to readdir).
pub fn r5_hash(name: &[u8]) -> u32 {
    let mut a: u32 = 0;
    for &b in name {
        let c = i32::from(b as i8);
        a = a.wrapping_add((c << 4) as u32);
        a = a.wrapping_add((c >> 4) as u32);
        a = a.wrapping_mul(11);
    }
    a &= LOW_MASK;
    if a <= 2 {
        a += 3;
    }
    a
}

/// A key for people: `inum:ino`, `inum:data:block`, `inum:dent:hash`.
impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind() {
            INO_KEY => write!(f, "{}:ino", self.inum),
            DATA_KEY => write!(f, "{}:data:{}", self.inum, self.low()),
            DENT_KEY => write!(f, "{}:dent:{:#x}", self.inum, self.low()),
            XENT_KEY => write!(f, "{}:xent:{:#x}", self.inum, self.low()),
            k => write!(f, "{}:type{}:{:#x}", self.inum, k, self.low()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_the_index_does() {
        let ino = Key::ino(65);
        let d0 = Key::data(65, 0);
        let d9 = Key::data(65, 9);
        let dent = Key::dent(65, b"x");
        let next = Key::ino(66);
        assert!(ino < d0 && d0 < d9 && d9 < dent && dent < next);
        assert!(Key::inode_range(65).contains(&dent));
        assert!(!Key::inode_range(65).contains(&next));
        assert_eq!(Key::decode(&dent.encode()), dent);
        assert_eq!(dent.kind(), DENT_KEY);
    }

    #[test]
    fn r5_hash_masks_and_skips_reserved_values() {
        // The empty name hashes to 0, which is reserved for ".": it moves to 3.
        assert_eq!(r5_hash(b""), 3);
        for name in [&b"a"[..], b"hello", b"\xff\xfe", b"a-much-longer-name.txt"] {
            let h = r5_hash(name);
            assert!(h > 2 && h <= LOW_MASK, "{h:#x}");
        }
        // Bytes above 0x7f count as negative chars: the hash differs from the unsigned one.
        let unsigned = (0xC3u32 << 4).wrapping_add(0xC3 >> 4).wrapping_mul(11) & LOW_MASK;
        assert_ne!(r5_hash(b"\xC3"), unsigned);
    }
}
