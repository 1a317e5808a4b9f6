//! The TNC (tree node cache): UBIFS's index in RAM. The on-flash index is a B+ tree of
//! index nodes (the wandering tree); the TNC holds the part of it in use as znodes, loads a
//! znode from flash the first time a lookup passes through it, and keeps the changes the
//! journal makes (dirty znodes) until a commit writes them, children before parents, and
//! returns the new root. Clean znodes whose children are not in RAM may be dropped again
//! (`shrink`), so the RAM the index takes is bounded, as UBIFS's shrinker bounds it.
//!
//! Leaves are the branches of level-0 znodes: a key and where its node is. Entry keys hash
//! names, so several leaves may share a key (collisions); inode and data keys have one.
//!
//! How this one is built (simpler than Linux's `tnc.c`):
//!
//! - Znodes live in an arena (`Vec<Option<Znode>>` and a free list) and name each other by
//!   index: a branch of a level > 0 znode may hold its child's id, a znode its parent's id
//!   (its position in the parent is found by a scan, fanouts are small).
//! - A branch's `loc` is where its child is on flash as of the last commit; a dirty child's
//!   new place is only known once the commit writes it.
//! - Every key a subtree holds is at least the key its parent files it under (so a leaf
//!   inserted in front of all others lowers the parent keys on its way up), and below the
//!   next branch's key. The TNC never splits a run of equal keys over two znodes, so all
//!   leaves of one key sit in the level-0 znode a descent finds; a znode that is one run
//!   longer than the fanout is let grow past it rather than cut. Indexes Linux wrote may
//!   have a run of entry keys cut (its next branch key then equals the run's key), so
//!   searches for entry keys also look into the subtree left of an equal branch key.
//! - A change marks its znode and every ancestor dirty: their children's places change
//!   when the commit writes them.

use super::image::{Loc, UbifsError};
use super::key::{Key, DENT_KEY, XENT_KEY};
use super::media::{Branch, IdxNode};

/// Where the TNC reads and writes index nodes.
pub trait IndexStore {
    /// The index node at `loc` (CRC-checked).
    fn read_idx(&mut self, loc: Loc) -> Result<IdxNode, UbifsError>;
    /// Writes an index node at the index head; where it went.
    fn write_idx(&mut self, node: &IdxNode) -> Result<Loc, UbifsError>;
}

/// What a commit of the TNC did.
#[derive(Debug, Default, Clone)]
pub struct TncCommit {
    /// The new root.
    pub root: Loc,
    /// Index nodes written.
    pub written: u32,
    /// Where the replaced index nodes were: their space is dirty once the master node names
    /// the new root.
    pub obsolete: Vec<Loc>,
}

/// RAM and traffic of the TNC.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct TncStats {
    /// Znodes in RAM now.
    pub znodes: usize,
    /// Of them, dirty.
    pub dirty: usize,
    /// Index nodes read from flash since the TNC was made.
    pub loaded: u64,
    /// Znodes dropped by `shrink`.
    pub evicted: u64,
    /// Bytes the znodes in RAM take (their structures and branch arrays).
    pub bytes: usize,
}

/// UBIFS's smallest fanout (`UBIFS_MIN_FANOUT`); below it splits would not shrink nodes.
const MIN_FANOUT: usize = 3;

/// Id of a znode in the arena.
type ZId = usize;

/// One branch of a znode: the lowest key of the child and where the child is on flash
/// (for a level-0 znode the child is a leaf node, never in RAM).
#[derive(Clone, Copy, Debug)]
struct Zbranch {
    key: Key,
    /// The child's place as of the last commit (meaningless for a child never written).
    loc: Loc,
    /// The child znode, when it is in RAM.
    child: Option<ZId>,
}

#[derive(Debug)]
struct Znode {
    level: u16,
    branches: Vec<Zbranch>,
    parent: Option<ZId>,
    /// Changed since it was read or written (or never written).
    dirty: bool,
    /// Where it is on flash; None if never written.
    loc: Option<Loc>,
}

pub struct Tnc {
    nodes: Vec<Option<Znode>>,
    free: Vec<ZId>,
    /// The root znode, once loaded (always, for an index made by `new_empty`).
    root: Option<ZId>,
    /// The root on flash as of the last commit (None before the first commit of mkfs).
    root_loc: Option<Loc>,
    fanout: usize,
    /// Places of index nodes removed from the index since the last commit.
    obsolete: Vec<Loc>,
    loaded: u64,
    evicted: u64,
}

impl Tnc {
    /// An empty index (a level-0 root with no branches), as mkfs starts.
    pub fn new_empty(fanout: usize) -> Tnc {
        let mut t = Tnc::bare(None, fanout);
        let root = t.alloc(Znode {
            level: 0,
            branches: Vec::new(),
            parent: None,
            dirty: true,
            loc: None,
        });
        t.root = Some(root);
        t
    }

    /// The index whose root index node is at `root`; nothing is read until it is used.
    pub fn from_root(root: Loc, fanout: usize) -> Tnc {
        Tnc::bare(Some(root), fanout)
    }

    /// Every leaf with exactly `key`.
    pub fn lookup<S: IndexStore>(&mut self, s: &mut S, key: Key) -> Result<Vec<Loc>, UbifsError> {
        let found = self.find_leaves(s, key, key)?;
        Ok(found
            .iter()
            .map(|&(id, i)| self.z(id).branches[i].loc)
            .collect())
    }

    /// Every leaf with a key in `from..=to`, in key order.
    pub fn range<S: IndexStore>(
        &mut self,
        s: &mut S,
        from: Key,
        to: Key,
    ) -> Result<Vec<(Key, Loc)>, UbifsError> {
        let found = self.find_leaves(s, from, to)?;
        Ok(self.leaves_at(&found))
    }

    /// Adds a leaf (beside any with the same key).
    pub fn add<S: IndexStore>(&mut self, s: &mut S, key: Key, loc: Loc) -> Result<(), UbifsError> {
        let id = self.descend(s, key)?;
        let z = self.z_mut(id);
        // After the last equal key: leaves of one key keep the order they were added in.
        let pos = z.branches.partition_point(|b| b.key <= key);
        z.branches.insert(
            pos,
            Zbranch {
                key,
                loc,
                child: None,
            },
        );
        if pos == 0 {
            self.lower_parent_keys(id);
        }
        self.mark_dirty(id);
        self.fix_overflow(id)
    }

    /// Makes `loc` the only leaf of `key`; the leaves it replaced.
    pub fn replace<S: IndexStore>(
        &mut self,
        s: &mut S,
        key: Key,
        loc: Loc,
    ) -> Result<Vec<Loc>, UbifsError> {
        let found = self.find_leaves(s, key, key)?;
        let Some((&(keep_id, keep_pos), others)) = found.split_last() else {
            self.add(s, key, loc)?;
            return Ok(Vec::new());
        };
        let old = found
            .iter()
            .map(|&(id, i)| self.z(id).branches[i].loc)
            .collect();
        // Overwriting one leaf in place needs no split and leaves parent keys alone.
        self.z_mut(keep_id).branches[keep_pos].loc = loc;
        self.mark_dirty(keep_id);
        self.remove_leaves(s, others)?;
        Ok(old)
    }

    /// Removes the leaf of `key` at `loc`; whether there was one.
    pub fn remove_loc<S: IndexStore>(
        &mut self,
        s: &mut S,
        key: Key,
        loc: Loc,
    ) -> Result<bool, UbifsError> {
        let found = self.find_leaves(s, key, key)?;
        let Some(&hit) = found
            .iter()
            .find(|&&(id, i)| self.z(id).branches[i].loc == loc)
        else {
            return Ok(false);
        };
        self.remove_leaves(s, &[hit])?;
        Ok(true)
    }

    /// Removes every leaf with a key in `from..=to`; the leaves removed.
    pub fn remove_range<S: IndexStore>(
        &mut self,
        s: &mut S,
        from: Key,
        to: Key,
    ) -> Result<Vec<(Key, Loc)>, UbifsError> {
        let found = self.find_leaves(s, from, to)?;
        let removed = self.leaves_at(&found);
        self.remove_leaves(s, &found)?;
        Ok(removed)
    }

    /// Writes every dirty znode (children first) through `s.write_idx`; the new root.
    pub fn commit<S: IndexStore>(&mut self, s: &mut S) -> Result<TncCommit, UbifsError> {
        let Some(root) = self.root else {
            // Never loaded, so never changed.
            let root = self
                .root_loc
                .expect("a TNC without a root znode has one on flash");
            return Ok(TncCommit {
                root,
                written: 0,
                obsolete: std::mem::take(&mut self.obsolete),
            });
        };
        let r = self.z(root);
        if r.level == 0 && r.branches.is_empty() {
            // An index node without branches cannot be decoded; UBIFS always has the root
            // inode, so an empty index is a caller's mistake.
            return Err(UbifsError::corrupt(
                r.loc.unwrap_or_default(),
                "cannot commit an empty index (UBIFS always has the root inode)",
            ));
        }
        let mut written = 0;
        for id in self.dirty_post_order(root) {
            self.write_znode(s, id)?;
            written += 1;
        }
        let root_loc = self.z(root).loc.expect("the root was read or just written");
        self.root_loc = Some(root_loc);
        Ok(TncCommit {
            root: root_loc,
            written,
            obsolete: std::mem::take(&mut self.obsolete),
        })
    }

    /// Whether the TNC has changes a commit would write.
    pub fn is_dirty(&self) -> bool {
        // Dirt spreads to the root; removed index nodes count too, since a root replaced by
        // a clean child still has to reach the master node.
        self.root.is_some_and(|r| self.z(r).dirty) || !self.obsolete.is_empty()
    }

    /// If the index node at `loc` (at `level`, its first key `key`) is part of the index,
    /// marks it dirty so the next commit writes it elsewhere (GC of index LEBs); whether it
    /// was part of the index.
    pub fn dirty_index_node<S: IndexStore>(
        &mut self,
        s: &mut S,
        loc: Loc,
        level: u16,
        key: Key,
    ) -> Result<bool, UbifsError> {
        let root = self.root_id(s)?;
        let root_level = self.z(root).level;
        if root_level < level {
            return Ok(false);
        }
        if root_level == level {
            let hit = self.z(root).loc == Some(loc);
            if hit {
                self.mark_dirty(root);
            }
            return Ok(hit);
        }
        // Every parent whose children may hold `key` (more than one only for cut runs of
        // entry keys), then the children by their place, read only for the one that matches.
        for p in self.overlapping(s, key, key, level + 1)? {
            for i in branches_overlapping(&self.z(p).branches, key, key) {
                if self.child_flash_loc(p, i) == Some(loc) {
                    let c = self.child(s, p, i)?;
                    self.mark_dirty(c);
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Drops clean znodes none of whose children are in RAM until at most `max_znodes`
    /// remain (the root stays); how many were dropped.
    pub fn shrink(&mut self, max_znodes: usize) -> usize {
        let mut dropped = 0;
        // Each pass drops the current fringe; their parents may form the next one.
        while self.live() > max_znodes {
            let fringe: Vec<ZId> = (0..self.nodes.len())
                .filter(|&id| self.evictable(id))
                .collect();
            if fringe.is_empty() {
                break;
            }
            for id in fringe {
                if self.live() <= max_znodes {
                    break;
                }
                self.evict(id);
                dropped += 1;
            }
        }
        self.evicted += dropped as u64;
        dropped
    }

    /// Znodes in RAM (cheap: the arena's size less its free slots).
    pub fn znodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    pub fn stats(&self) -> TncStats {
        let mut st = TncStats {
            loaded: self.loaded,
            evicted: self.evicted,
            ..TncStats::default()
        };
        for z in self.nodes.iter().flatten() {
            st.znodes += 1;
            st.dirty += usize::from(z.dirty);
            st.bytes += std::mem::size_of::<Znode>()
                + z.branches.capacity() * std::mem::size_of::<Zbranch>();
        }
        st
    }
}

/// Keys that may repeat (hashed names): only for them may a Linux-written index cut a run
/// over two znodes, so only for them a branch key equal to the key sought hides leaves of
/// it to its left.
fn may_repeat(key: Key) -> bool {
    matches!(key.kind(), DENT_KEY | XENT_KEY)
}

/// The branches whose subtrees may hold keys in `from..=to`. A subtree holds keys from its
/// branch key up to below the next branch key (up to it for keys that may repeat).
fn branches_overlapping(branches: &[Zbranch], from: Key, to: Key) -> std::ops::Range<usize> {
    let n = branches.len();
    let hi = branches.partition_point(|b| b.key <= to);
    let lo = (0..n)
        .find(|&i| {
            i + 1 == n || {
                let next = branches[i + 1].key;
                next > from || (next == from && may_repeat(from))
            }
        })
        .unwrap_or(n);
    lo..hi.max(lo)
}

/// Where to cut a znode's branches in two: the boundary between different keys nearest the
/// middle, so a run of equal keys is never cut; None if all keys are equal.
fn split_point(branches: &[Zbranch]) -> Option<usize> {
    let mid = branches.len() / 2;
    (1..branches.len())
        .filter(|&i| branches[i - 1].key != branches[i].key)
        .min_by_key(|&i| i.abs_diff(mid))
}

/// Checks what the TNC relies on in an index node read from flash.
fn check_idx(idx: &IdxNode, loc: Loc) -> Result<(), UbifsError> {
    if idx.branches.is_empty() {
        return Err(UbifsError::corrupt(loc, "index node without branches"));
    }
    if idx.branches.windows(2).any(|w| w[1].key < w[0].key) {
        return Err(UbifsError::corrupt(loc, "index keys out of order"));
    }
    Ok(())
}

fn znode_from_flash(idx: IdxNode, loc: Loc, parent: Option<ZId>) -> Znode {
    let branches = idx
        .branches
        .iter()
        .map(|b| Zbranch {
            key: b.key,
            loc: Loc {
                lnum: b.lnum,
                offs: b.offs,
                len: b.len,
            },
            child: None,
        })
        .collect();
    Znode {
        level: idx.level,
        branches,
        parent,
        dirty: false,
        loc: Some(loc),
    }
}

/// The arena.
impl Tnc {
    fn bare(root_loc: Option<Loc>, fanout: usize) -> Tnc {
        Tnc {
            nodes: Vec::new(),
            free: Vec::new(),
            root: None,
            root_loc,
            fanout: fanout.max(MIN_FANOUT),
            obsolete: Vec::new(),
            loaded: 0,
            evicted: 0,
        }
    }

    fn z(&self, id: ZId) -> &Znode {
        self.nodes[id].as_ref().expect("znode id of a live znode")
    }

    fn z_mut(&mut self, id: ZId) -> &mut Znode {
        self.nodes[id].as_mut().expect("znode id of a live znode")
    }

    fn alloc(&mut self, z: Znode) -> ZId {
        match self.free.pop() {
            Some(id) => {
                self.nodes[id] = Some(z);
                id
            }
            None => {
                self.nodes.push(Some(z));
                self.nodes.len() - 1
            }
        }
    }

    fn release(&mut self, id: ZId) -> Znode {
        let z = self.nodes[id].take().expect("released twice");
        self.free.push(id);
        z
    }

    fn live(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Which branch of its parent `id` is.
    fn pos_in_parent(&self, id: ZId) -> usize {
        let p = self.z(id).parent.expect("the root has no parent");
        self.z(p)
            .branches
            .iter()
            .position(|b| b.child == Some(id))
            .expect("a znode's parent has a branch to it")
    }

    /// Where the child of branch `i` of `p` is on flash, if it was ever written.
    fn child_flash_loc(&self, p: ZId, i: usize) -> Option<Loc> {
        let b = self.z(p).branches[i];
        match b.child {
            Some(c) => self.z(c).loc,
            None => Some(b.loc),
        }
    }

    fn mark_dirty(&mut self, mut id: ZId) {
        loop {
            let z = self.z_mut(id);
            z.dirty = true;
            match z.parent {
                Some(p) => id = p,
                None => return,
            }
        }
    }
}

/// Reading the index.
impl Tnc {
    fn root_id<S: IndexStore>(&mut self, s: &mut S) -> Result<ZId, UbifsError> {
        if let Some(r) = self.root {
            return Ok(r);
        }
        let loc = self
            .root_loc
            .expect("a TNC without a root znode has one on flash");
        let idx = s.read_idx(loc)?;
        check_idx(&idx, loc)?;
        let id = self.alloc(znode_from_flash(idx, loc, None));
        self.loaded += 1;
        self.root = Some(id);
        Ok(id)
    }

    /// The child znode of branch `i` of `parent` (a level > 0 znode), read if not in RAM.
    fn child<S: IndexStore>(
        &mut self,
        s: &mut S,
        parent: ZId,
        i: usize,
    ) -> Result<ZId, UbifsError> {
        let (br, level) = {
            let p = self.z(parent);
            (p.branches[i], p.level)
        };
        if let Some(c) = br.child {
            return Ok(c);
        }
        assert!(level > 0, "the branches of a level-0 znode are leaves");
        let idx = s.read_idx(br.loc)?;
        if idx.level != level - 1 {
            return Err(UbifsError::corrupt(br.loc, "index node at the wrong level"));
        }
        check_idx(&idx, br.loc)?;
        if idx.branches[0].key < br.key {
            return Err(UbifsError::corrupt(br.loc, "index key below its parent's"));
        }
        let id = self.alloc(znode_from_flash(idx, br.loc, Some(parent)));
        self.z_mut(parent).branches[i].child = Some(id);
        self.loaded += 1;
        Ok(id)
    }

    /// The level-0 znode a leaf of `key` belongs in: at each level the last branch whose
    /// key is not above `key` (the first if all are).
    fn descend<S: IndexStore>(&mut self, s: &mut S, key: Key) -> Result<ZId, UbifsError> {
        let mut id = self.root_id(s)?;
        while self.z(id).level > 0 {
            let i = self
                .z(id)
                .branches
                .partition_point(|b| b.key <= key)
                .saturating_sub(1);
            id = self.child(s, id, i)?;
        }
        Ok(id)
    }

    /// The znodes at `level` that may hold keys in `from..=to`, left to right, reading only
    /// the subtrees that may.
    fn overlapping<S: IndexStore>(
        &mut self,
        s: &mut S,
        from: Key,
        to: Key,
        level: u16,
    ) -> Result<Vec<ZId>, UbifsError> {
        let root = self.root_id(s)?;
        let mut out = Vec::new();
        if from > to || self.z(root).level < level {
            return Ok(out);
        }
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if self.z(id).level == level {
                out.push(id);
                continue;
            }
            let hits = branches_overlapping(&self.z(id).branches, from, to);
            // Pushed right to left so they pop left to right.
            for i in hits.rev() {
                stack.push(self.child(s, id, i)?);
            }
        }
        Ok(out)
    }

    /// The leaves with keys in `from..=to` as (level-0 znode, position), in key order.
    fn find_leaves<S: IndexStore>(
        &mut self,
        s: &mut S,
        from: Key,
        to: Key,
    ) -> Result<Vec<(ZId, usize)>, UbifsError> {
        let mut found = Vec::new();
        for id in self.overlapping(s, from, to, 0)? {
            let branches = &self.z(id).branches;
            found.extend(
                (0..branches.len())
                    .filter(|&i| (from..=to).contains(&branches[i].key))
                    .map(|i| (id, i)),
            );
        }
        Ok(found)
    }

    fn leaves_at(&self, at: &[(ZId, usize)]) -> Vec<(Key, Loc)> {
        at.iter()
            .map(|&(id, i)| {
                let b = self.z(id).branches[i];
                (b.key, b.loc)
            })
            .collect()
    }
}

/// Changing the index.
impl Tnc {
    /// After a leaf went in front of znode `id`: lowers the keys its ancestors file it under
    /// so no subtree holds a key below its branch key (index.rs checks that on flash).
    fn lower_parent_keys(&mut self, mut id: ZId) {
        while let Some(p) = self.z(id).parent {
            let first = self.z(id).branches[0].key;
            let pos = self.pos_in_parent(id);
            let b = &mut self.z_mut(p).branches[pos];
            if b.key <= first {
                return;
            }
            b.key = first;
            if pos != 0 {
                return;
            }
            id = p;
        }
    }

    /// Splits znodes over the fanout, starting at `id` and going up as parents fill.
    fn fix_overflow(&mut self, id: ZId) -> Result<(), UbifsError> {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            let z = self.z(id);
            if z.branches.len() <= self.fanout {
                continue;
            }
            // One run of equal keys: let it grow past the fanout rather than cut it.
            let Some(at) = split_point(&z.branches) else {
                continue;
            };
            let right = self.split(id, at)?;
            let parent = self.z(id).parent.expect("a split znode has a parent");
            // Both halves first (a node read with a larger fanout may need more cuts),
            // then the parent that got a branch more.
            work.extend([parent, right, id]);
        }
        Ok(())
    }

    /// Moves the branches of `id` from `at` on into a new znode right of it, filed in the
    /// parent under its first key; a new root if `id` was the root. The new znode.
    fn split(&mut self, id: ZId, at: usize) -> Result<ZId, UbifsError> {
        let z = self.z_mut(id);
        let (level, parent, left_loc) = (z.level, z.parent, z.loc);
        let right_branches = z.branches.split_off(at);
        let right_key = right_branches[0].key;
        let kids: Vec<ZId> = right_branches.iter().filter_map(|b| b.child).collect();
        let right = self.alloc(Znode {
            level,
            branches: right_branches,
            parent,
            dirty: true,
            loc: None,
        });
        for k in kids {
            self.z_mut(k).parent = Some(right);
        }
        let right_branch = Zbranch {
            key: right_key,
            loc: Loc::default(),
            child: Some(right),
        };
        match parent {
            Some(p) => {
                let pos = self.pos_in_parent(id);
                self.z_mut(p).branches.insert(pos + 1, right_branch);
            }
            None => self.grow_root(id, left_loc, right_branch)?,
        }
        self.mark_dirty(id);
        Ok(right)
    }

    /// A new root one level up over the old root `left` and its new right sibling.
    fn grow_root(
        &mut self,
        left: ZId,
        left_loc: Option<Loc>,
        right: Zbranch,
    ) -> Result<(), UbifsError> {
        let z = self.z(left);
        let level = z.level.checked_add(1).ok_or_else(|| {
            UbifsError::corrupt(left_loc.unwrap_or_default(), "index too deep to grow")
        })?;
        let left_branch = Zbranch {
            key: z.branches[0].key,
            loc: left_loc.unwrap_or_default(),
            child: Some(left),
        };
        let root = self.alloc(Znode {
            level,
            branches: vec![left_branch, right],
            parent: None,
            dirty: true,
            loc: None,
        });
        self.z_mut(left).parent = Some(root);
        let r = right.child.expect("the new sibling is in RAM");
        self.z_mut(r).parent = Some(root);
        self.root = Some(root);
        Ok(())
    }

    /// Removes the leaves at `targets` (in key order, as `find_leaves` gives them), then
    /// the znodes left empty, then roots with one child.
    fn remove_leaves<S: IndexStore>(
        &mut self,
        s: &mut S,
        targets: &[(ZId, usize)],
    ) -> Result<(), UbifsError> {
        // Backwards, so the positions still to come stay valid.
        for &(id, pos) in targets.iter().rev() {
            self.z_mut(id).branches.remove(pos);
            self.mark_dirty(id);
            self.unlink_if_empty(id);
        }
        self.collapse_root(s)
    }

    /// Removes znode `id` from its parent if it has no branches left, and so on upwards.
    /// The root may stay empty.
    fn unlink_if_empty(&mut self, mut id: ZId) {
        while self.z(id).branches.is_empty() {
            let Some(p) = self.z(id).parent else {
                return;
            };
            let pos = self.pos_in_parent(id);
            self.z_mut(p).branches.remove(pos);
            self.remove_znode(id);
            self.mark_dirty(p);
            id = p;
        }
    }

    /// Frees a znode that left the index; its place on flash becomes obsolete.
    fn remove_znode(&mut self, id: ZId) {
        if let Some(loc) = self.release(id).loc {
            self.obsolete.push(loc);
        }
    }

    /// While the root is above level 0 with a single child, that child becomes the root;
    /// an emptied root above level 0 becomes an empty level-0 root.
    fn collapse_root<S: IndexStore>(&mut self, s: &mut S) -> Result<(), UbifsError> {
        loop {
            let root = self.root.expect("changes happen with the root in RAM");
            let z = self.z(root);
            if z.level == 0 {
                return Ok(());
            }
            match z.branches.len() {
                0 => {
                    // Still dirty and with its old place, so the commit obsoletes that.
                    self.z_mut(root).level = 0;
                    return Ok(());
                }
                1 => {
                    let c = self.child(s, root, 0)?;
                    self.z_mut(c).parent = None;
                    self.remove_znode(root);
                    self.root = Some(c);
                }
                _ => return Ok(()),
            }
        }
    }
}

/// Commit and shrink.
impl Tnc {
    /// The dirty znodes under `root`, children before parents. A clean znode has no dirty
    /// descendants, so clean subtrees are skipped whole.
    fn dirty_post_order(&self, root: ZId) -> Vec<ZId> {
        let mut order = Vec::new();
        let mut stack = vec![(root, false)];
        while let Some((id, children_done)) = stack.pop() {
            let z = self.z(id);
            if !z.dirty {
                continue;
            }
            if children_done {
                order.push(id);
                continue;
            }
            stack.push((id, true));
            stack.extend(
                z.branches
                    .iter()
                    .rev()
                    .filter_map(|b| b.child.map(|c| (c, false))),
            );
        }
        order
    }

    /// Writes znode `id` (whose dirty children are written already) and files its new place
    /// in the parent.
    fn write_znode<S: IndexStore>(&mut self, s: &mut S, id: ZId) -> Result<(), UbifsError> {
        let z = self.z(id);
        if z.branches.len() > usize::from(u16::MAX) {
            return Err(UbifsError::Unsupported(format!(
                "{} index branches with one key",
                z.branches.len()
            )));
        }
        let node = IdxNode {
            level: z.level,
            branches: z
                .branches
                .iter()
                .map(|b| Branch {
                    lnum: b.loc.lnum,
                    offs: b.loc.offs,
                    len: b.loc.len,
                    key: b.key,
                })
                .collect(),
        };
        let new = s.write_idx(&node)?;
        let z = self.z_mut(id);
        z.dirty = false;
        if let Some(old) = z.loc.replace(new) {
            self.obsolete.push(old);
        }
        if let Some(p) = self.z(id).parent {
            let pos = self.pos_in_parent(id);
            self.z_mut(p).branches[pos].loc = new;
        }
        Ok(())
    }

    /// A clean znode other than the root with no child in RAM: dropping it loses nothing.
    fn evictable(&self, id: ZId) -> bool {
        self.nodes[id].as_ref().is_some_and(|z| {
            !z.dirty && z.parent.is_some() && z.branches.iter().all(|b| b.child.is_none())
        })
    }

    fn evict(&mut self, id: ZId) {
        let p = self.z(id).parent.expect("the root is never evicted");
        let pos = self.pos_in_parent(id);
        let z = self.release(id);
        let b = &mut self.z_mut(p).branches[pos];
        debug_assert_eq!(z.loc, Some(b.loc), "a clean znode is where its parent says");
        b.child = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap, HashSet};

    /// Index nodes kept as the bytes `IdxNode::encode` makes (so every read decodes them
    /// again), at made-up places that are never reused.
    #[derive(Default)]
    struct MemStore {
        nodes: HashMap<Loc, Vec<u8>>,
        written: u32,
        sqnum: u64,
    }

    impl MemStore {
        fn node(&self, loc: Loc) -> IdxNode {
            IdxNode::decode(&self.nodes[&loc])
                .expect("a node this store wrote")
                .1
        }

        /// Puts a node at a chosen place, to build indexes the TNC would not.
        fn put(&mut self, loc: Loc, node: &IdxNode) {
            self.nodes.insert(loc, node.encode(1));
        }
    }

    impl IndexStore for MemStore {
        fn read_idx(&mut self, loc: Loc) -> Result<IdxNode, UbifsError> {
            let bytes = self
                .nodes
                .get(&loc)
                .ok_or_else(|| UbifsError::corrupt(loc, "no index node here"))?;
            IdxNode::decode(bytes)
                .map(|(_, n)| n)
                .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))
        }

        fn write_idx(&mut self, node: &IdxNode) -> Result<Loc, UbifsError> {
            self.sqnum += 1;
            let bytes = node.encode(self.sqnum);
            let n = self.written;
            self.written += 1;
            let loc = Loc {
                lnum: 10 + n / 16,
                offs: (n % 16) * 1024,
                len: bytes.len() as u32,
            };
            self.nodes.insert(loc, bytes);
            Ok(loc)
        }
    }

    type Model = BTreeMap<Key, Vec<Loc>>;

    fn leaf(n: u32) -> Loc {
        Loc {
            lnum: 100_000 + n,
            offs: 0,
            len: 48,
        }
    }

    fn dent(inum: u32, hash: u32) -> Key {
        Key::new(inum, DENT_KEY, hash)
    }

    fn sorted(mut v: Vec<Loc>) -> Vec<Loc> {
        v.sort();
        v
    }

    /// Leaves grouped by key, the places of one key sorted (their order is not promised).
    fn to_model(leaves: &[(Key, Loc)]) -> Model {
        let mut m = Model::new();
        for &(k, l) in leaves {
            m.entry(k).or_default().push(l);
        }
        m.values_mut().for_each(|v| v.sort());
        m
    }

    fn normalized(m: &Model) -> Model {
        m.iter().map(|(&k, v)| (k, sorted(v.clone()))).collect()
    }

    /// The lowest and highest keys there are.
    fn first() -> Key {
        Key::new(0, 0, 0)
    }

    fn last() -> Key {
        Key::new(u32::MAX, 7, u32::MAX)
    }

    /// Every leaf through `range`, checking it comes in key order.
    fn all_leaves(t: &mut Tnc, s: &mut MemStore) -> Model {
        let leaves = t.range(s, first(), last()).unwrap();
        assert!(
            leaves.windows(2).all(|w| w[0].0 <= w[1].0),
            "range out of order"
        );
        to_model(&leaves)
    }

    /// The stored index walked with index.rs's checks (as assertions) and the fanout.
    struct Walk {
        leaves: Model,
        /// Each index node: place, level, first key.
        nodes: Vec<(Loc, u16, Key)>,
    }

    impl Walk {
        fn places(&self) -> HashSet<Loc> {
            self.nodes.iter().map(|n| n.0).collect()
        }

        fn height(&self) -> u64 {
            u64::from(self.nodes[0].1) + 1
        }
    }

    fn walk(store: &MemStore, root: Loc, fanout: usize) -> Walk {
        let mut leaves = Model::new();
        let mut nodes = Vec::new();
        let mut stack = vec![(root, None::<u16>, None::<Key>)];
        while let Some((loc, want_level, low)) = stack.pop() {
            let idx = store.node(loc);
            if let Some(want) = want_level {
                assert_eq!(idx.level, want, "index node at {loc:?} at the wrong level");
            }
            let first = idx.branches[0].key;
            assert!(
                low.is_none_or(|low| first >= low),
                "key below the parent's at {loc:?}"
            );
            assert!(idx.branches.windows(2).all(|w| w[0].key <= w[1].key));
            assert!(
                idx.branches.len() <= fanout || idx.branches.iter().all(|b| b.key == first),
                "{} branches over fanout {fanout} at {loc:?}",
                idx.branches.len()
            );
            nodes.push((loc, idx.level, first));
            for b in idx.branches.iter().rev() {
                let child = Loc {
                    lnum: b.lnum,
                    offs: b.offs,
                    len: b.len,
                };
                if idx.level == 0 {
                    leaves.entry(b.key).or_default().push(child);
                } else {
                    stack.push((child, Some(idx.level - 1), Some(b.key)));
                }
            }
        }
        leaves.values_mut().for_each(|v| v.sort());
        Walk { leaves, nodes }
    }

    /// An index of `keys` (leaf n for the n-th) committed to a new store.
    fn build(fanout: usize, keys: &[Key]) -> (MemStore, Loc) {
        let mut s = MemStore::default();
        let mut t = Tnc::new_empty(fanout);
        for (n, &k) in keys.iter().enumerate() {
            t.add(&mut s, k, leaf(n as u32)).unwrap();
        }
        let root = t.commit(&mut s).unwrap().root;
        (s, root)
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(Key),
        Replace(Key),
        /// The n-th leaf of the key, or a place it does not have.
        RemoveLoc(Key, usize),
        RemoveRange(Key, Key),
        Lookup(Key),
        Range(Key, Key),
        Commit,
        Shrink(usize),
        Reopen,
        /// The n-th index node of the last commit.
        DirtyIdx(usize),
    }

    /// Few keys, so they repeat: inode keys, data keys, and entry keys of 4 hashes.
    fn key() -> impl Strategy<Value = Key> {
        prop_oneof![
            1 => (1u32..6).prop_map(Key::ino),
            1 => (1u32..6, 0u32..12).prop_map(|(i, b)| Key::data(i, b)),
            3 => (1u32..6, 3u32..7).prop_map(|(i, h)| dent(i, h)),
        ]
    }

    fn key_pair() -> impl Strategy<Value = (Key, Key)> {
        (key(), key()).prop_map(|(a, b)| (a.min(b), a.max(b)))
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => key().prop_map(Op::Add),
            4 => key().prop_map(Op::Replace),
            4 => (key(), 0usize..4).prop_map(|(k, n)| Op::RemoveLoc(k, n)),
            1 => key_pair().prop_map(|(a, b)| Op::RemoveRange(a, b)),
            2 => key().prop_map(Op::Lookup),
            1 => key_pair().prop_map(|(a, b)| Op::Range(a, b)),
            1 => Just(Op::Commit),
            1 => (0usize..6).prop_map(Op::Shrink),
            1 => Just(Op::Reopen),
            1 => (0usize..64).prop_map(Op::DirtyIdx),
        ]
    }

    /// A TNC and the key map it should equal.
    struct Harness {
        store: MemStore,
        tnc: Tnc,
        model: Model,
        fanout: usize,
        leaves: u32,
        /// The index as the last commit wrote it.
        committed: Option<Walk>,
        /// Leaves changed since the last commit (index nodes may have left the index).
        changed: bool,
    }

    impl Harness {
        fn new(fanout: usize) -> Harness {
            Harness {
                store: MemStore::default(),
                tnc: Tnc::new_empty(fanout),
                model: Model::new(),
                fanout,
                leaves: 0,
                committed: None,
                changed: false,
            }
        }

        fn next_leaf(&mut self) -> Loc {
            self.leaves += 1;
            leaf(self.leaves)
        }

        fn apply(&mut self, op: &Op) {
            let (t, s) = (&mut self.tnc, &mut self.store);
            match *op {
                Op::Add(k) => {
                    let l = self.next_leaf();
                    self.tnc.add(&mut self.store, k, l).unwrap();
                    self.model.entry(k).or_default().push(l);
                    self.changed = true;
                }
                Op::Replace(k) => {
                    let l = self.next_leaf();
                    let old = self.tnc.replace(&mut self.store, k, l).unwrap();
                    let was = self.model.insert(k, vec![l]).unwrap_or_default();
                    assert_eq!(sorted(old), sorted(was));
                    self.changed = true;
                }
                Op::RemoveLoc(k, n) => {
                    let target = self.model.get(&k).and_then(|v| v.get(n)).copied();
                    let absent = Loc {
                        lnum: 999_999,
                        offs: 0,
                        len: 48,
                    };
                    let hit = t.remove_loc(s, k, target.unwrap_or(absent)).unwrap();
                    assert_eq!(hit, target.is_some());
                    if target.is_some() {
                        let v = self.model.get_mut(&k).unwrap();
                        v.remove(n);
                        if v.is_empty() {
                            self.model.remove(&k);
                        }
                        self.changed = true;
                    }
                }
                Op::RemoveRange(a, b) => {
                    let got = to_model(&t.remove_range(s, a, b).unwrap());
                    let want: Model = normalized(
                        &self
                            .model
                            .range(a..=b)
                            .map(|(&k, v)| (k, v.clone()))
                            .collect(),
                    );
                    self.model.retain(|k, _| !(a..=b).contains(k));
                    assert_eq!(got, want);
                    self.changed = true;
                }
                Op::Lookup(k) => {
                    let want = self.model.get(&k).cloned().unwrap_or_default();
                    assert_eq!(sorted(t.lookup(s, k).unwrap()), sorted(want));
                }
                Op::Range(a, b) => {
                    let got = t.range(s, a, b).unwrap();
                    assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
                    let want: Model = self
                        .model
                        .range(a..=b)
                        .map(|(&k, v)| (k, v.clone()))
                        .collect();
                    assert_eq!(to_model(&got), normalized(&want));
                }
                Op::Commit => {
                    self.commit();
                }
                Op::Shrink(max) => {
                    let before = t.stats();
                    let dropped = t.shrink(max);
                    let after = t.stats();
                    assert_eq!(after.znodes, before.znodes - dropped);
                    assert_eq!(after.evicted, before.evicted + dropped as u64);
                    assert_eq!(after.dirty, before.dirty);
                    // Past `max` only if nothing clean but the root is left.
                    assert!(after.znodes <= max || after.znodes <= after.dirty + 1);
                }
                Op::Reopen => {
                    if let Some(root) = self.commit() {
                        self.tnc = Tnc::from_root(root, self.fanout);
                    }
                }
                Op::DirtyIdx(n) => self.dirty_idx(n),
            }
        }

        fn dirty_idx(&mut self, n: usize) {
            let Some(w) = &self.committed else {
                return;
            };
            let (loc, level, key) = w.nodes[n % w.nodes.len()];
            let (t, s) = (&mut self.tnc, &mut self.store);
            let hit = t.dirty_index_node(s, loc, level, key).unwrap();
            // Without leaf changes no index node has left the index.
            assert!(hit || self.changed, "{loc:?} at level {level} not found");
            assert!(!hit || t.is_dirty());
            let elsewhere = Loc {
                lnum: 888_888,
                offs: 0,
                len: 28,
            };
            assert!(!t.dirty_index_node(s, elsewhere, level, key).unwrap());
        }

        /// Commits and checks what was written against the previous commit; the new root
        /// (None for an empty index, which must be refused).
        fn commit(&mut self) -> Option<Loc> {
            if self.model.is_empty() {
                assert!(
                    self.tnc.commit(&mut self.store).is_err(),
                    "an empty index committed"
                );
                return None;
            }
            let c = self.tnc.commit(&mut self.store).unwrap();
            let w = walk(&self.store, c.root, self.fanout);
            assert_eq!(w.leaves, normalized(&self.model));
            let before = self
                .committed
                .as_ref()
                .map(Walk::places)
                .unwrap_or_default();
            let now = w.places();
            let obsolete: HashSet<Loc> = c.obsolete.iter().copied().collect();
            assert_eq!(obsolete.len(), c.obsolete.len(), "a place obsoleted twice");
            assert_eq!(obsolete, before.difference(&now).copied().collect());
            assert_eq!(c.written as usize, now.difference(&before).count());
            assert!(!self.tnc.is_dirty());
            assert_eq!(self.tnc.stats().dirty, 0);
            let again = self.tnc.commit(&mut self.store).unwrap();
            assert_eq!(
                (again.root, again.written, again.obsolete.len()),
                (c.root, 0, 0)
            );
            self.committed = Some(w);
            self.changed = false;
            Some(c.root)
        }

        fn check(&mut self) {
            assert_eq!(
                all_leaves(&mut self.tnc, &mut self.store),
                normalized(&self.model)
            );
            let st = self.tnc.stats();
            assert!(st.dirty <= st.znodes && (st.znodes == 0 || st.bytes > 0));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 96,
            // Deterministic: the same cases every run, and no regression files.
            rng_seed: proptest::test_runner::RngSeed::Fixed(1087),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever is added, replaced, removed, committed, shrunk and reopened, the TNC
        /// holds the leaves a key map holds, and every commit writes a valid index and
        /// obsoletes exactly the index nodes that left it.
        #[test]
        fn the_tnc_keeps_what_a_key_map_keeps(
            fanout in prop_oneof![Just(3usize), Just(4), Just(8)],
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let mut h = Harness::new(fanout);
            for op in &ops {
                h.apply(op);
                h.check();
            }
            h.apply(&Op::Reopen);
            h.check();
        }
    }

    #[test]
    fn collisions_past_the_fanout_stay_in_one_znode() {
        let k = dent(1, 5);
        let mut keys = vec![Key::ino(1)];
        keys.extend((0..6).map(|b| Key::data(1, b)));
        keys.extend([dent(1, 4), dent(1, 6)]);
        keys.extend(std::iter::repeat_n(k, 10));
        let (mut s, root) = build(3, &keys);
        let w = walk(&s, root, 3);
        let holders = w
            .nodes
            .iter()
            .filter(|n| n.1 == 0 && s.node(n.0).branches.iter().any(|b| b.key == k))
            .count();
        assert_eq!(holders, 1, "the run of 10 is not cut");
        let mut t = Tnc::from_root(root, 3);
        let want: Vec<Loc> = (9..19).map(leaf).collect();
        assert_eq!(sorted(t.lookup(&mut s, k).unwrap()), want);
        // Adding beside the run and around it keeps it whole.
        t.add(&mut s, k, leaf(50)).unwrap();
        t.add(&mut s, dent(1, 7), leaf(51)).unwrap();
        let root = t.commit(&mut s).unwrap().root;
        assert_eq!(walk(&s, root, 3).leaves[&k].len(), 11);
    }

    #[test]
    fn shrink_bounds_the_znodes_and_lookups_read_them_again() {
        let keys: Vec<Key> = (0..300).map(|b| Key::data(7, b)).collect();
        let (mut s, root) = build(4, &keys);
        let mut t = Tnc::from_root(root, 4);
        for b in 0..300 {
            assert_eq!(t.lookup(&mut s, Key::data(7, b)).unwrap(), vec![leaf(b)]);
        }
        let full = t.stats();
        assert!(full.znodes > 50, "{full:?}");
        let dropped = t.shrink(3);
        let st = t.stats();
        assert!(st.znodes <= 3, "{st:?}");
        assert_eq!(dropped, full.znodes - st.znodes);
        assert_eq!(st.evicted, dropped as u64);
        assert!(st.bytes < full.bytes);
        for b in (0..300).rev() {
            assert_eq!(t.lookup(&mut s, Key::data(7, b)).unwrap(), vec![leaf(b)]);
        }
        assert!(
            t.stats().loaded > full.loaded,
            "dropped znodes are read again"
        );

        // Dirty znodes (and so their ancestors) stay.
        for b in (0..300).step_by(50) {
            t.replace(&mut s, Key::data(7, b), leaf(1000 + b)).unwrap();
        }
        t.shrink(3);
        let st = t.stats();
        assert!(st.dirty > 0 && st.znodes <= 3 + st.dirty, "{st:?}");
        let leaves = all_leaves(&mut t, &mut s);
        assert_eq!(leaves.len(), 300);
        assert_eq!(leaves[&Key::data(7, 50)], vec![leaf(1050)]);
        let root = t.commit(&mut s).unwrap().root;
        assert_eq!(walk(&s, root, 4).leaves, leaves);
    }

    #[test]
    fn lookups_and_ranges_read_only_the_subtrees_they_need() {
        let keys: Vec<Key> = (0..300).map(|b| Key::data(7, b)).collect();
        let (mut s, root) = build(4, &keys);
        let w = walk(&s, root, 4);
        let height = w.height();
        assert!(height >= 4);
        // A unique key equal to a branch key: its left neighbour need not be read.
        let &(_, _, first) = w.nodes.iter().rfind(|n| n.1 == 0).unwrap();
        let mut t = Tnc::from_root(root, 4);
        assert_eq!(t.lookup(&mut s, first).unwrap().len(), 1);
        assert_eq!(t.stats().loaded, height);
        let mut t = Tnc::from_root(root, 4);
        let got = t
            .range(&mut s, Key::data(7, 100), Key::data(7, 103))
            .unwrap();
        assert_eq!(got.len(), 4);
        assert!(t.stats().loaded <= 2 * height, "{:?}", t.stats());
    }

    #[test]
    fn runs_of_entry_keys_cut_by_linux_are_found() {
        // Linux may cut a run of equal entry keys over two znodes; the right one is then
        // filed under the run's key.
        let d5 = dent(1, 5);
        let at = |n: u32| Loc {
            lnum: 5,
            offs: n * 512,
            len: 68,
        };
        let br = |loc: Loc, key: Key| Branch {
            lnum: loc.lnum,
            offs: loc.offs,
            len: loc.len,
            key,
        };
        let mut s = MemStore::default();
        let left = IdxNode {
            level: 0,
            branches: vec![br(leaf(1), Key::ino(1)), br(leaf(2), d5)],
        };
        let right = IdxNode {
            level: 0,
            branches: vec![br(leaf(3), d5), br(leaf(4), dent(1, 9))],
        };
        let root = IdxNode {
            level: 1,
            branches: vec![br(at(0), Key::ino(1)), br(at(1), d5)],
        };
        s.put(at(0), &left);
        s.put(at(1), &right);
        s.put(at(2), &root);
        let mut t = Tnc::from_root(at(2), 8);
        assert_eq!(
            sorted(t.lookup(&mut s, d5).unwrap()),
            vec![leaf(2), leaf(3)]
        );
        assert_eq!(t.range(&mut s, d5, d5).unwrap().len(), 2);
        assert!(t.remove_loc(&mut s, d5, leaf(2)).unwrap());
        assert_eq!(t.lookup(&mut s, d5).unwrap(), vec![leaf(3)]);
        t.add(&mut s, d5, leaf(6)).unwrap();
        assert_eq!(
            sorted(t.replace(&mut s, d5, leaf(7)).unwrap()),
            vec![leaf(3), leaf(6)]
        );
        assert_eq!(t.lookup(&mut s, d5).unwrap(), vec![leaf(7)]);
        let c = t.commit(&mut s).unwrap();
        let w = walk(&s, c.root, 8);
        assert_eq!(w.leaves[&d5], vec![leaf(7)]);
        assert_eq!(w.leaves.len(), 3);
    }

    #[test]
    fn corrupt_index_nodes_are_errors() {
        let br = |lnum: u32, key: Key| Branch {
            lnum,
            offs: 0,
            len: 68,
            key,
        };
        let root_loc = Loc {
            lnum: 1,
            offs: 0,
            len: 68,
        };
        let child_loc = Loc {
            lnum: 2,
            offs: 0,
            len: 68,
        };
        let root = IdxNode {
            level: 1,
            branches: vec![br(2, Key::ino(5))],
        };
        let cases = [
            ("wrong level", 1, vec![br(100, Key::ino(5))]),
            ("key below the parent's", 0, vec![br(100, Key::ino(4))]),
            (
                "keys out of order",
                0,
                vec![br(100, Key::ino(6)), br(101, Key::ino(5))],
            ),
        ];
        for (what, level, branches) in cases {
            let mut s = MemStore::default();
            s.put(root_loc, &root);
            s.put(child_loc, &IdxNode { level, branches });
            let mut t = Tnc::from_root(root_loc, 8);
            let k = Key::ino(7);
            let is_corrupt =
                |r: Result<(), UbifsError>| matches!(r, Err(UbifsError::Corrupt { .. }));
            assert!(is_corrupt(t.lookup(&mut s, k).map(drop)), "{what}: lookup");
            assert!(
                is_corrupt(t.range(&mut s, first(), last()).map(drop)),
                "{what}: range"
            );
            assert!(is_corrupt(t.add(&mut s, k, leaf(1))), "{what}: add");
            assert!(
                is_corrupt(t.replace(&mut s, k, leaf(1)).map(drop)),
                "{what}: replace"
            );
            assert!(
                is_corrupt(t.remove_range(&mut s, first(), last()).map(drop)),
                "{what}: remove"
            );
            assert!(
                is_corrupt(t.dirty_index_node(&mut s, child_loc, 0, k).map(drop)),
                "{what}: dirty_index_node"
            );
            assert!(!t.is_dirty(), "{what}: nothing changed");
        }
        // A branch to nothing is the store's error.
        let mut s = MemStore::default();
        s.put(root_loc, &root);
        assert!(Tnc::from_root(root_loc, 8)
            .lookup(&mut s, Key::ino(5))
            .is_err());
    }

    #[test]
    fn an_empty_index_is_not_committed() {
        let mut s = MemStore::default();
        let mut t = Tnc::new_empty(8);
        assert!(t.is_dirty());
        assert!(t.commit(&mut s).is_err());
        t.add(&mut s, Key::ino(1), leaf(1)).unwrap();
        let first = t.commit(&mut s).unwrap();
        assert_eq!((first.written, first.obsolete.len()), (1, 0));
        assert!(t.remove_loc(&mut s, Key::ino(1), leaf(1)).unwrap());
        assert!(t.is_dirty());
        assert!(t.commit(&mut s).is_err());
        t.add(&mut s, Key::ino(1), leaf(2)).unwrap();
        let second = t.commit(&mut s).unwrap();
        assert_eq!(second.obsolete, vec![first.root]);
        assert_eq!(walk(&s, second.root, 8).leaves[&Key::ino(1)], vec![leaf(2)]);
    }

    #[test]
    fn dirty_index_node_finds_every_node_of_the_index() {
        let mut keys = vec![Key::ino(1)];
        for h in 3..9 {
            keys.extend(std::iter::repeat_n(dent(1, h), (h % 3 + 1) as usize));
        }
        keys.extend((0..20).map(|b| Key::data(2, b)));
        let (mut s, root) = build(3, &keys);
        let w = walk(&s, root, 3);
        let mut t = Tnc::from_root(root, 3);
        for &(loc, level, key) in &w.nodes {
            assert!(
                t.dirty_index_node(&mut s, loc, level, key).unwrap(),
                "{loc:?}"
            );
            let elsewhere = Loc { lnum: 9999, ..loc };
            assert!(!t.dirty_index_node(&mut s, elsewhere, level, key).unwrap());
        }
        assert_eq!(t.stats().dirty, w.nodes.len());
        let c = t.commit(&mut s).unwrap();
        assert_eq!(c.written as usize, w.nodes.len());
        let obsolete: HashSet<Loc> = c.obsolete.into_iter().collect();
        assert_eq!(obsolete, w.places());
        assert_eq!(walk(&s, c.root, 3).leaves, w.leaves);
    }

    #[test]
    fn keys_below_all_others_lower_the_parent_keys() {
        let keys: Vec<Key> = (10..40).map(|b| Key::data(5, b)).collect();
        let (mut s, root) = build(3, &keys);
        let mut t = Tnc::from_root(root, 3);
        for b in (0..10).rev() {
            t.add(&mut s, Key::data(5, b), leaf(500 + b)).unwrap();
        }
        t.add(&mut s, Key::ino(5), leaf(600)).unwrap();
        let root = t.commit(&mut s).unwrap().root;
        // The walk asserts every child's first key is at least its parent's key for it.
        let w = walk(&s, root, 3);
        assert_eq!(w.leaves.len(), 41);
        assert_eq!(w.nodes[0].2, Key::ino(5));
    }
}
