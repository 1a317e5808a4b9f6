//! YAFFS1's tnode tree (the `yaffs1` profile's file map): a file's chunk-to-page map as
//! the YAFFS of 2006 held it in RAM. Level-0 tnodes hold 16 entries of `width` bits, where
//! `width` is the bits that name any page of the device (18 on a 128 MiB small-page chip:
//! 36 bytes a tnode); internal tnodes hold 8 children. A file takes one level-0 tnode per
//! 16 chunks it has ever been written in, whatever their order, so its map grows with its
//! size: 9 KiB per MiB of file on small pages, where the page-mapped log's extents take a
//! few bytes per erase block. That is what `bench heap` measures for yaffs1.
//!
//! Tnodes live in two arenas (one array of level-0 tnodes, one of internal ones) indexed
//! by 32-bit numbers, so a tnode costs what it cost YAFFS1 on a 32-bit CPU (level-0:
//! 2 x width bytes; internal: 8 x 4 bytes) rather than a 64-bit host's pointers and
//! allocator headers. A truncate returns emptied tnodes to free lists, as YAFFS1 did.
//! Entry 0 is a hole and 1 a chunk lost to a media error: pages 0 and 1 lie in the first
//! anchor block (or a bad block), which never holds file data.

use super::ChunkMap;
use crate::object::{LOST_PAGE, NO_PAGE};

/// Entries of a level-0 tnode (YAFFS_NTNODES_LEVEL0).
const LEAF_ENTRIES: u32 = 16;
const LEAF_BITS: u32 = 4;
/// Children of an internal tnode (YAFFS_NTNODES_INTERNAL).
const FANOUT: u32 = 8;
const FANOUT_BITS: u32 = 3;
const HOLE: u32 = 0;
const LOST: u32 = 1;

pub struct TnodeMap {
    /// Bits an entry takes.
    width: u8,
    /// Internal levels above the level-0 tnodes (the root is a level-0 tnode at 0).
    height: u8,
    /// The root tnode's number + 1 (0: none yet).
    root: u32,
    /// Level-0 tnodes, `2 * width` bytes each.
    leaves: Vec<u8>,
    /// Internal tnodes: children's numbers + 1 (0: none).
    internals: Vec<[u32; FANOUT as usize]>,
    free_leaves: Vec<u32>,
    free_internals: Vec<u32>,
    /// One past the highest chunk with an entry.
    end: u32,
    mapped: u64,
}

/// Bits that name every page of a device of `pages` pages.
pub fn width_for(pages: u32) -> u8 {
    (32 - pages.saturating_sub(1).leading_zeros()).max(2) as u8
}

impl TnodeMap {
    /// An empty map for a device of `pages` pages.
    pub fn new(pages: u32) -> Self {
        TnodeMap {
            width: width_for(pages),
            height: 0,
            root: 0,
            leaves: Vec::new(),
            internals: Vec::new(),
            free_leaves: Vec::new(),
            free_internals: Vec::new(),
            end: 0,
            mapped: 0,
        }
    }

    fn leaf_bytes(&self) -> usize {
        2 * self.width as usize
    }

    /// Chunks the tree covers at its height.
    fn span(&self) -> u64 {
        1u64 << (LEAF_BITS + FANOUT_BITS * u32::from(self.height))
    }

    fn encode(pno: u32) -> u32 {
        match pno {
            NO_PAGE => HOLE,
            LOST_PAGE => LOST,
            p => {
                assert!(p > LOST, "page {p} lies in the first anchor block");
                p
            }
        }
    }

    fn decode(v: u32) -> u32 {
        match v {
            HOLE => NO_PAGE,
            LOST => LOST_PAGE,
            p => p,
        }
    }

    fn read_entry(&self, leaf: u32, i: u32) -> u32 {
        let w = u64::from(self.width);
        let bit = leaf as u64 * self.leaf_bytes() as u64 * 8 + u64::from(i) * w;
        let byte = (bit / 8) as usize;
        let mut buf = [0u8; 8];
        let end = (byte + 8).min(self.leaves.len());
        buf[..end - byte].copy_from_slice(&self.leaves[byte..end]);
        ((u64::from_le_bytes(buf) >> (bit % 8)) & ((1 << w) - 1)) as u32
    }

    fn write_entry(&mut self, leaf: u32, i: u32, v: u32) {
        let w = u64::from(self.width);
        let bit = leaf as u64 * self.leaf_bytes() as u64 * 8 + u64::from(i) * w;
        let byte = (bit / 8) as usize;
        let mut buf = [0u8; 8];
        let end = (byte + 8).min(self.leaves.len());
        buf[..end - byte].copy_from_slice(&self.leaves[byte..end]);
        let mask = ((1u64 << w) - 1) << (bit % 8);
        let word = (u64::from_le_bytes(buf) & !mask) | (u64::from(v) << (bit % 8));
        self.leaves[byte..end].copy_from_slice(&word.to_le_bytes()[..end - byte]);
    }

    fn new_leaf(&mut self) -> u32 {
        if let Some(n) = self.free_leaves.pop() {
            let (a, b) = (
                n as usize * self.leaf_bytes(),
                (n as usize + 1) * self.leaf_bytes(),
            );
            self.leaves[a..b].fill(0);
            return n;
        }
        let n = (self.leaves.len() / self.leaf_bytes()) as u32;
        // Grow by an eighth: little slack, as YAFFS1 allocated tnodes in small groups.
        if self.leaves.len() == self.leaves.capacity() {
            let more = (self.leaves.len() / 8).max(self.leaf_bytes());
            self.leaves.reserve_exact(more);
        }
        self.leaves.resize(self.leaves.len() + self.leaf_bytes(), 0);
        n
    }

    fn new_internal(&mut self) -> u32 {
        if let Some(n) = self.free_internals.pop() {
            self.internals[n as usize] = [0; FANOUT as usize];
            return n;
        }
        if self.internals.len() == self.internals.capacity() {
            self.internals
                .reserve_exact((self.internals.len() / 8).max(1));
        }
        self.internals.push([0; FANOUT as usize]);
        (self.internals.len() - 1) as u32
    }

    /// The level-0 tnode holding `chunk`, if there is one.
    fn find_leaf(&self, chunk: u32) -> Option<u32> {
        if self.root == 0 || u64::from(chunk) >= self.span() {
            return None;
        }
        let mut node = self.root - 1;
        for level in (1..=u32::from(self.height)).rev() {
            let i = (chunk >> (LEAF_BITS + FANOUT_BITS * (level - 1))) & (FANOUT - 1);
            let child = self.internals[node as usize][i as usize];
            if child == 0 {
                return None;
            }
            node = child - 1;
        }
        Some(node)
    }

    /// The level-0 tnode holding `chunk`, made (with the tnodes above it) if needed.
    fn leaf_for(&mut self, chunk: u32) -> u32 {
        if self.root == 0 {
            self.root = self.new_leaf() + 1;
        }
        while u64::from(chunk) >= self.span() {
            let top = self.new_internal();
            self.internals[top as usize][0] = self.root;
            self.root = top + 1;
            self.height += 1;
        }
        let mut node = self.root - 1;
        for level in (1..=u32::from(self.height)).rev() {
            let i = ((chunk >> (LEAF_BITS + FANOUT_BITS * (level - 1))) & (FANOUT - 1)) as usize;
            let mut child = self.internals[node as usize][i];
            if child == 0 {
                child = if level == 1 {
                    self.new_leaf()
                } else {
                    self.new_internal()
                } + 1;
                self.internals[node as usize][i] = child;
            }
            node = child - 1;
        }
        node
    }

    /// (chunk, entry) of every non-hole entry from `from` on, in chunk order.
    fn entries_from(&self, from: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        if self.root != 0 {
            self.walk(self.root - 1, self.height, 0, from, &mut out);
        }
        out
    }

    fn walk(&self, node: u32, level: u8, base: u32, from: u32, out: &mut Vec<(u32, u32)>) {
        if level == 0 {
            for i in 0..LEAF_ENTRIES {
                let c = base + i;
                if c >= from {
                    let v = self.read_entry(node, i);
                    if v != HOLE {
                        out.push((c, v));
                    }
                }
            }
            return;
        }
        let child_span = 1u64 << (LEAF_BITS + FANOUT_BITS * u32::from(level - 1));
        for (i, &child) in self.internals[node as usize].iter().enumerate() {
            let start = u64::from(base) + i as u64 * child_span;
            if child != 0 && start + child_span > u64::from(from) && start <= u64::from(u32::MAX) {
                self.walk(child - 1, level - 1, start as u32, from, out);
            }
        }
    }

    /// Frees the tnodes below `node` that hold no entry; true if `node` itself is empty.
    fn prune(&mut self, node: u32, level: u8) -> bool {
        if level == 0 {
            return (0..LEAF_ENTRIES).all(|i| self.read_entry(node, i) == HOLE);
        }
        let mut empty = true;
        for i in 0..FANOUT as usize {
            let child = self.internals[node as usize][i];
            if child == 0 {
                continue;
            }
            if self.prune(child - 1, level - 1) {
                self.internals[node as usize][i] = 0;
                if level == 1 {
                    self.free_leaves.push(child - 1);
                } else {
                    self.free_internals.push(child - 1);
                }
            } else {
                empty = false;
            }
        }
        empty
    }

    /// Heap bytes: the arenas and free lists (what YAFFS1 held for this file's map).
    pub fn heap_bytes(&self) -> usize {
        self.leaves.capacity()
            + self.internals.capacity() * 4 * FANOUT as usize
            + (self.free_leaves.capacity() + self.free_internals.capacity()) * 4
    }
}

impl ChunkMap for TnodeMap {
    fn get(&self, chunk: u32) -> u32 {
        match self.find_leaf(chunk) {
            Some(leaf) => Self::decode(self.read_entry(leaf, chunk % LEAF_ENTRIES)),
            None => NO_PAGE,
        }
    }

    fn set(&mut self, chunk: u32, pno: u32) -> u32 {
        let v = Self::encode(pno);
        let leaf = if v == HOLE {
            match self.find_leaf(chunk) {
                Some(l) => l,
                None => return NO_PAGE,
            }
        } else {
            self.leaf_for(chunk)
        };
        let old = self.read_entry(leaf, chunk % LEAF_ENTRIES);
        self.write_entry(leaf, chunk % LEAF_ENTRIES, v);
        let real = |x: u32| x != HOLE && x != LOST;
        self.mapped = self.mapped + u64::from(real(v)) - u64::from(real(old));
        if v != HOLE {
            self.end = self.end.max(chunk + 1);
        } else if chunk + 1 == self.end {
            self.end = self.entries_from(0).last().map_or(0, |&(c, _)| c + 1);
        }
        Self::decode(old)
    }

    fn truncate(&mut self, keep: u32) -> Vec<u32> {
        let dropped: Vec<(u32, u32)> = self.entries_from(keep);
        for &(c, _) in &dropped {
            if let Some(leaf) = self.find_leaf(c) {
                self.write_entry(leaf, c % LEAF_ENTRIES, HOLE);
            }
        }
        let pages: Vec<u32> = dropped
            .iter()
            .filter(|&&(_, v)| v != LOST)
            .map(|&(_, v)| v)
            .collect();
        self.mapped -= pages.len() as u64;
        if self.root != 0 && self.prune(self.root - 1, self.height) {
            if self.height == 0 {
                self.free_leaves.push(self.root - 1);
            } else {
                self.free_internals.push(self.root - 1);
            }
            self.root = 0;
            self.height = 0;
        }
        self.end = self.end.min(keep);
        if self.end > 0 && self.get(self.end - 1) == NO_PAGE {
            self.end = self.entries_from(0).last().map_or(0, |&(c, _)| c + 1);
        }
        pages
    }

    fn runs(&self) -> Vec<(u32, u32, u32)> {
        let mut out: Vec<(u32, u32, u32)> = Vec::new();
        for (c, v) in self.entries_from(0) {
            let p = Self::decode(v);
            match out.last_mut() {
                Some((c0, p0, n))
                    if *c0 + *n == c
                        && ((p == LOST_PAGE && *p0 == LOST_PAGE)
                            || (p != LOST_PAGE && *p0 != LOST_PAGE && *p0 + *n == p)) =>
                {
                    *n += 1
                }
                _ => out.push((c, p, 1)),
            }
        }
        out
    }

    fn mapped(&self) -> u64 {
        self.mapped
    }

    fn holes_in(&self, from: u32, to: u32) -> u64 {
        let to = to.max(from);
        let upto = to.min(self.end);
        let present = (from..upto).filter(|&c| self.get(c) != NO_PAGE).count() as u64;
        u64::from(to - from) - present
    }

    fn end(&self) -> u32 {
        self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::page_mapped::PageMap;
    use proptest::prelude::*;

    #[test]
    fn width_names_every_page() {
        assert_eq!(width_for(262_144), 18, "128 MiB of 512-byte pages");
        assert_eq!(width_for(4096), 12);
        assert_eq!(width_for(4097), 13);
    }

    #[test]
    fn a_level_zero_tnode_is_sixteen_entries_of_width_bits() {
        let mut m = TnodeMap::new(262_144);
        for c in 0..16 {
            m.set(c, 1000 + c);
        }
        assert_eq!(m.leaves.len(), 36);
        m.set(16, 5000);
        assert_eq!(m.leaves.len(), 72, "a second level-0 tnode");
        assert_eq!(m.internals.len(), 1, "and an internal one above both");
        assert_eq!(m.get(16), 5000);
        assert_eq!(m.get(3), 1003);
    }

    proptest! {
        /// Whatever is done to it, the tnode tree maps every chunk as the page map does.
        #[test]
        fn maps_as_the_page_map_does(ops in proptest::collection::vec(
            (0u32..4, 0u32..3000, 2u32..262_144), 0..300)) {
            let mut t = TnodeMap::new(262_144);
            let mut p = PageMap::default();
            for (kind, chunk, page) in ops {
                match kind {
                    0 | 1 => prop_assert_eq!(t.set(chunk, page), p.set(chunk, page)),
                    2 => {
                        let v = if page % 2 == 0 { NO_PAGE } else { LOST_PAGE };
                        prop_assert_eq!(t.set(chunk, v), p.set(chunk, v));
                    }
                    _ => {
                        let mut a = t.truncate(chunk);
                        let mut b = p.truncate(chunk);
                        a.sort_unstable();
                        b.sort_unstable();
                        prop_assert_eq!(a, b);
                    }
                }
                prop_assert_eq!(t.end(), p.end());
                prop_assert_eq!(t.mapped(), p.mapped());
                prop_assert_eq!(t.runs(), p.runs());
                for c in [0, chunk, chunk + 1, t.end(), t.end().saturating_sub(1)] {
                    prop_assert_eq!(t.get(c), p.get(c));
                    prop_assert_eq!(t.holes_in(c / 2, c + 5), p.holes_in(c / 2, c + 5));
                }
            }
        }
    }
}
