//! Which objects have header pages (any version) in which block, for tombstone lifetimes
//! (see the file system's tombstone handling). Blocks holding none (file data) have no
//! entry.

use std::collections::HashMap;

#[derive(Default)]
pub struct HeaderOwners {
    pub(super) objs: HashMap<u32, Vec<u32>>,
    /// Header page entries over all blocks.
    pub(super) pages: u64,
}

impl HeaderOwners {
    pub fn heap_bytes(&self) -> usize {
        self.objs.capacity() * (4 + std::mem::size_of::<Vec<u32>>())
            + self.objs.values().map(|v| v.capacity() * 4).sum::<usize>()
    }
}
