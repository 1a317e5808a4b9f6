//! The namespace index a clean unmount saves beside the heap's free extents (see `save`), so
//! the next mount instantiates no object: an object is read from the NVRAM the first time
//! a call reaches it (`lazy`), a directory's children the first time it is looked into.
//!
//! Our core keeps every object it knows in DRAM and names live in the child (the record
//! names its parent), so without this a mount must read every inode and record to know
//! what each directory holds: time that grows with the files stored. The paper's MiNV uses
//! its NVRAM structures in place and has no such cost; the index is how ours avoids it.
//!
//! ```text
//! object table, sorted by object number, one entry per inode (ENTRY bytes each):
//!   0   object number u32
//!   4   hard links naming it u32
//!   8   its attribute set's object number u32 (0: none)
//!   12  subdirectories u32 (directories)
//!   16  NVRAM offset of its inode u64
//!   24  first child u32: index into the child array (directories)
//!   28  children u32
//!   32  CRC-32C of its children's slice of the child array u32
//!   36  CRC-32C of bytes 0..36 u32
//! child array: u32 entry indexes, each directory's children together
//! ```
//!
//! Nothing here is read at mount: an entry is checked (its CRC, its indexes in range) when
//! it is read, and a slice of children against the CRC its directory's entry holds. A
//! directory that exists must have an entry: a missing one is damage, never an empty
//! directory.

use super::layout::get32;
use super::layout::get64;

/// Bytes of one object-table entry.
pub(crate) const ENTRY: u64 = 40;

/// One object as the unmount left it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub ino: u32,
    pub links: u32,
    pub xattr_set: u32,
    pub subdirs: u32,
    pub at: u64,
    pub first_child: u32,
    pub children: u32,
    pub children_crc: u32,
}

impl Entry {
    /// What the entry says of its object beside its record.
    pub(crate) fn facts(&self) -> crate::lazy::IndexFacts {
        crate::lazy::IndexFacts {
            links: self.links,
            xattr_set: self.xattr_set,
            subdirs: self.subdirs,
        }
    }

    pub(crate) fn encode(&self) -> [u8; ENTRY as usize] {
        let mut b = [0u8; ENTRY as usize];
        b[0..4].copy_from_slice(&self.ino.to_le_bytes());
        b[4..8].copy_from_slice(&self.links.to_le_bytes());
        b[8..12].copy_from_slice(&self.xattr_set.to_le_bytes());
        b[12..16].copy_from_slice(&self.subdirs.to_le_bytes());
        b[16..24].copy_from_slice(&self.at.to_le_bytes());
        b[24..28].copy_from_slice(&self.first_child.to_le_bytes());
        b[28..32].copy_from_slice(&self.children.to_le_bytes());
        b[32..36].copy_from_slice(&self.children_crc.to_le_bytes());
        let crc = crc32c::crc32c(&b[..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The entry in `b`, if its CRC holds.
    pub(crate) fn decode(b: &[u8]) -> Option<Entry> {
        if b.len() < ENTRY as usize || crc32c::crc32c(&b[..36]) != get32(b, 36) {
            return None;
        }
        Some(Entry {
            ino: get32(b, 0),
            links: get32(b, 4),
            xattr_set: get32(b, 8),
            subdirs: get32(b, 12),
            at: get64(b, 16),
            first_child: get32(b, 24),
            children: get32(b, 28),
            children_crc: get32(b, 32),
        })
    }
}

/// The two arrays, as encoded.
pub(crate) fn encode(entries: &[Entry], children: &[u32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(entries.len() * ENTRY as usize + 4 * children.len());
    for e in entries {
        b.extend_from_slice(&e.encode());
    }
    for c in children {
        b.extend_from_slice(&c.to_le_bytes());
    }
    b
}

/// CRC of a slice of the child array.
pub(crate) fn children_crc(children: &[u32]) -> u32 {
    let mut b = Vec::with_capacity(4 * children.len());
    for c in children {
        b.extend_from_slice(&c.to_le_bytes());
    }
    crc32c::crc32c(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_a_flipped_bit_is_caught() {
        let e = Entry {
            ino: 7,
            links: 2,
            xattr_set: 9,
            subdirs: 1,
            at: 4096 + 32 * 5,
            first_child: 3,
            children: 4,
            children_crc: children_crc(&[1, 2, 3, 4]),
        };
        let mut b = e.encode();
        assert_eq!(Entry::decode(&b), Some(e));
        b[17] ^= 4;
        assert_eq!(Entry::decode(&b), None);
    }
}
