//! The on-flash index (UBIFS's wandering tree): index nodes from the master node's root
//! down to level 0, whose branches point at the leaf nodes (inodes, data, entries). A walk
//! reads index nodes only; the leaves stay where they are until asked for.

use super::image::{Loc, UbifsError};
use super::key::Key;
use super::media::{IdxNode, MAX_NLEN};
use super::volume::LebSource;
use std::collections::BTreeMap;

/// Leaves by key. Entry keys hash names, so one key may hold several entries (collisions);
/// inode and data keys hold one.
pub type Leaves = BTreeMap<Key, Vec<Loc>>;

/// What a walk of the index found.
#[derive(Debug, Default, Clone, Copy)]
pub struct IndexStats {
    pub index_nodes: u64,
    pub index_bytes: u64,
    /// Levels of index nodes (a tree of one index node has height 1).
    pub height: u32,
    pub leaves: u64,
}

/// Reads one node's bytes at `loc` (the LEB read whole, then cut).
pub fn node_bytes<S: LebSource>(src: &mut S, loc: Loc) -> Result<Vec<u8>, UbifsError> {
    if loc.lnum >= src.leb_count()
        || loc.len == 0
        || loc.offs as usize + loc.len as usize > src.leb_size()
    {
        return Err(UbifsError::corrupt(loc, "reference outside the volume"));
    }
    src.read(loc.lnum, loc.offs as usize, loc.len as usize)?
        .ok_or(UbifsError::Unreadable { lnum: loc.lnum })
}

/// Walks the index from `root`, checking each index node's CRC, its level against its
/// parent's and its keys' order, and collects the leaves.
pub fn walk<S: LebSource>(src: &mut S, root: Loc) -> Result<Walked, UbifsError> {
    let mut leaves = Leaves::new();
    let mut index_nodes = Vec::new();
    let mut stats = IndexStats::default();
    // (where, the level the parent expects, the lowest key the parent filed it under)
    let mut stack: Vec<(Loc, Option<u16>, Option<Key>)> = vec![(root, None, None)];
    while let Some((loc, want_level, low)) = stack.pop() {
        let bytes = node_bytes(src, loc)?;
        let (_, idx) =
            IdxNode::decode(&bytes).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
        if want_level.is_some_and(|l| l != idx.level) {
            return Err(UbifsError::corrupt(loc, "index node at the wrong level"));
        }
        if stats.index_nodes == 0 {
            stats.height = u32::from(idx.level) + 1;
        }
        stats.index_nodes += 1;
        stats.index_bytes += u64::from(loc.len);
        index_nodes.push(loc);
        if let (Some(low), Some(first)) = (low, idx.branches.first()) {
            if first.key < low {
                return Err(UbifsError::corrupt(loc, "index key below its parent's"));
            }
        }
        if idx.branches.windows(2).any(|w| w[1].key < w[0].key) {
            return Err(UbifsError::corrupt(loc, "index keys out of order"));
        }
        // Children are pushed in reverse so they pop (and leaves collect) in key order.
        for br in idx.branches.iter().rev() {
            let child = Loc {
                lnum: br.lnum,
                offs: br.offs,
                len: br.len,
            };
            if idx.level == 0 {
                let max_leaf = super::media::INO_NODE_SZ + super::media::MAX_INO_DATA;
                if br.len as usize > max_leaf.max(super::media::DENT_NODE_SZ + MAX_NLEN + 1) {
                    return Err(UbifsError::corrupt(child, "leaf longer than any node"));
                }
                leaves.entry(br.key).or_default().insert(0, child);
                stats.leaves += 1;
            } else {
                stack.push((child, Some(idx.level - 1), Some(br.key)));
            }
        }
    }
    Ok(Walked {
        leaves,
        stats,
        index_nodes,
    })
}

/// What a walk of the index gives.
pub struct Walked {
    pub leaves: Leaves,
    pub stats: IndexStats,
    /// Where each index node is.
    pub index_nodes: Vec<Loc>,
}
