//! Which objects have data pages (any version, live or stale) in which block, so that a
//! deleted object's tombstone outlives every data page of it (see `FileSystem::
//! tomb_needed`): a scan can then tell a deleted file's stale pages (its tombstone is
//! still on flash) from pages whose header was lost to damage (no tombstone: they go to
//! lost+found). Each object is listed once per block, however many pages it has there;
//! blocks holding no data have no entry.

use std::collections::HashMap;

#[derive(Default)]
pub struct DataOwners {
    objs: HashMap<u32, Vec<u32>>,
    /// Entries over all blocks.
    pairs: u64,
}

impl DataOwners {
    /// Lists `ino` in `block`. Returns whether it was not listed there yet.
    pub fn add(&mut self, block: u32, ino: u32) -> bool {
        let v = self.objs.entry(block).or_default();
        // Data arrives in runs of one object: the last entry is the usual match.
        if v.last() == Some(&ino) || v.contains(&ino) {
            return false;
        }
        v.push(ino);
        self.pairs += 1;
        true
    }

    /// The objects with data pages in `block`.
    pub fn of(&self, block: u32) -> &[u32] {
        self.objs.get(&block).map_or(&[], |v| v.as_slice())
    }

    /// Forgets (and returns) the data owners of an erased block.
    pub fn take(&mut self, block: u32) -> Vec<u32> {
        let v = self.objs.remove(&block).unwrap_or_default();
        self.pairs -= v.len() as u64;
        v
    }

    /// Replaces a block's list (a checkpoint's).
    pub fn set(&mut self, block: u32, inos: Vec<u32>) {
        self.take(block);
        self.pairs += inos.len() as u64;
        if !inos.is_empty() {
            self.objs.insert(block, inos);
        }
    }

    /// Entries over all blocks (each one object in one block).
    pub fn pairs(&self) -> u64 {
        self.pairs
    }

    pub fn all(&self) -> impl Iterator<Item = (u32, &[u32])> {
        self.objs.iter().map(|(&b, v)| (b, v.as_slice()))
    }

    pub fn heap_bytes(&self) -> usize {
        self.objs.capacity() * (4 + std::mem::size_of::<Vec<u32>>())
            + self.objs.values().map(|v| v.capacity() * 4).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_listed_once_per_block_until_the_block_is_erased() {
        let mut d = DataOwners::default();
        assert!(d.add(3, 7));
        assert!(!d.add(3, 7));
        assert!(d.add(3, 8));
        assert!(!d.add(3, 7), "an earlier owner is found too");
        assert!(d.add(4, 7));
        assert_eq!(d.of(3), &[7, 8]);
        assert_eq!(d.pairs(), 3);
        assert_eq!(d.take(3), vec![7, 8]);
        assert!(d.of(3).is_empty());
        assert_eq!(d.pairs(), 1);
        d.set(5, vec![1, 2]);
        d.set(5, vec![4]);
        assert_eq!(d.pairs(), 2);
        assert!(d.add(3, 7), "an erased block starts afresh");
    }
}
