//! Which objects have data pages (any version, live or stale) in which block, so that a
//! deleted object's tombstone outlives every data page of it (see `FileSystem::
//! tomb_needed`): a scan can then tell a deleted file's stale pages (its tombstone is
//! still on flash) from pages whose header was lost to damage (no tombstone: they go to
//! lost+found). Each object is listed once per block, however many pages it has there.
//!
//! Most blocks hold one file's data, so the first owner of each block is a plain array
//! entry (4 bytes a block, allocated on first use, so a profile that keeps no lists pays
//! nothing) and only the blocks shared by several objects have a list for the rest.

use std::collections::HashMap;

const NONE: u32 = u32::MAX;

#[derive(Default)]
pub struct DataOwners {
    blocks: u32,
    /// Each block's first owner (`NONE`: no data); empty until the first `add`.
    first: Vec<u32>,
    /// The other owners of blocks with more than one.
    rest: HashMap<u32, Vec<u32>>,
    /// Entries over all blocks.
    pairs: u64,
}

impl DataOwners {
    pub fn new(blocks: u32) -> Self {
        Self {
            blocks,
            ..Self::default()
        }
    }

    /// Lists `ino` in `block`. Returns whether it was not listed there yet.
    pub fn add(&mut self, block: u32, ino: u32) -> bool {
        if self.first.is_empty() {
            self.first = vec![NONE; self.blocks as usize];
        }
        let Some(first) = self.first.get_mut(block as usize) else {
            debug_assert!(false, "block {block} out of range");
            return false;
        };
        if *first == NONE {
            *first = ino;
        } else if *first == ino {
            return false;
        } else {
            let v = self.rest.entry(block).or_default();
            // Data arrives in runs of one object: the last entry is the usual match.
            if v.last() == Some(&ino) || v.contains(&ino) {
                return false;
            }
            v.push(ino);
        }
        self.pairs += 1;
        true
    }

    /// The objects with data pages in `block`.
    pub fn of(&self, block: u32) -> Vec<u32> {
        match self.first.get(block as usize) {
            None | Some(&NONE) => Vec::new(),
            Some(&f) => {
                let mut v = vec![f];
                v.extend(self.rest.get(&block).into_iter().flatten());
                v
            }
        }
    }

    /// Whether `block` lists `ino`.
    pub fn has(&self, block: u32, ino: u32) -> bool {
        self.first.get(block as usize) == Some(&ino)
            || self.rest.get(&block).is_some_and(|v| v.contains(&ino))
    }

    /// Forgets (and returns) the data owners of an erased block.
    pub fn take(&mut self, block: u32) -> Vec<u32> {
        let v = self.of(block);
        if let Some(f) = self.first.get_mut(block as usize) {
            *f = NONE;
        }
        self.rest.remove(&block);
        self.pairs -= v.len() as u64;
        v
    }

    /// Replaces a block's list (a checkpoint's).
    pub fn set(&mut self, block: u32, inos: Vec<u32>) {
        self.take(block);
        for ino in inos {
            self.add(block, ino);
        }
    }

    /// Entries over all blocks (each one object in one block).
    pub fn pairs(&self) -> u64 {
        self.pairs
    }

    /// For each object listed anywhere, how many blocks list it.
    pub fn blocks_per_object(&self) -> HashMap<u32, u32> {
        let mut n: HashMap<u32, u32> = HashMap::new();
        let firsts = self.first.iter().filter(|&&f| f != NONE);
        for &ino in firsts.chain(self.rest.values().flatten()) {
            *n.entry(ino).or_insert(0) += 1;
        }
        n
    }

    /// Every block with data, with its owners.
    pub fn all(&self) -> impl Iterator<Item = (u32, Vec<u32>)> + '_ {
        (0..self.first.len() as u32)
            .filter(|&b| self.first[b as usize] != NONE)
            .map(|b| (b, self.of(b)))
    }

    pub fn heap_bytes(&self) -> usize {
        self.first.capacity() * 4
            + self.rest.capacity() * (4 + std::mem::size_of::<Vec<u32>>())
            + self.rest.values().map(|v| v.capacity() * 4).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_listed_once_per_block_until_the_block_is_erased() {
        let mut d = DataOwners::new(8);
        assert_eq!(d.heap_bytes(), 0, "nothing until the first owner");
        assert!(d.add(3, 7));
        assert!(!d.add(3, 7));
        assert!(d.add(3, 8));
        assert!(d.add(3, 9));
        assert!(!d.add(3, 7), "the first owner is found too");
        assert!(!d.add(3, 8), "an earlier owner is found too");
        assert!(d.add(4, 7));
        assert_eq!(d.of(3), vec![7, 8, 9]);
        assert!(d.has(3, 8) && d.has(4, 7) && !d.has(4, 8) && !d.has(5, 7));
        assert_eq!(d.pairs(), 4);
        assert_eq!(d.take(3), vec![7, 8, 9]);
        assert!(d.of(3).is_empty());
        assert_eq!(d.pairs(), 1);
        assert!(d.add(3, 8), "an erased block starts afresh");
        assert_eq!(d.of(3), vec![8]);
        d.set(5, vec![1, 2]);
        d.set(5, vec![4]);
        assert_eq!(d.pairs(), 3);
        let all: Vec<(u32, Vec<u32>)> = d.all().collect();
        assert_eq!(all, vec![(3, vec![8]), (4, vec![7]), (5, vec![4])]);
        d.add(5, 7);
        let n = d.blocks_per_object();
        assert_eq!((n[&7], n[&8], n[&4], n.len()), (2, 1, 1, 3));
    }
}
