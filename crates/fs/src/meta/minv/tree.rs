//! The namespace as the paper keeps it: inodes linked to each other into the directory
//! hierarchy (its Figure 3). Each directory's inode points at its first child and the
//! children are a doubly linked sibling list; an inode also holds how many hard link
//! objects name it, its attribute set's number and, for a directory, its subdirectories
//! (words in `layout`). So what a directory holds, and what an object's `stat` needs,
//! can be read from the NVRAM without reading every record.
//!
//! Membership follows the record: an object whose record names directory `p` (its first
//! name) is in `p`'s list; an attribute set is not in a list but is its owner's set; a
//! hard link object counts in its file's links. Every change goes in the same redo
//! transaction as the record pointer that makes it true (a create's link, a rename's
//! record, a removal's unchaining), so the tree is exact at every instant, and a removal
//! takes what cannot outlive its object with it ([`Minv::removal_group`]): an object's
//! attribute set, and the file a last hard link leaves with no name.
//!
//! The store knows where each inode hangs (`NvInode::place`): the first name's directory,
//! kind and, for a hard link, its file, as the NVRAM record says.

use std::collections::{BTreeSet, HashMap};

use nandkit_nvram::NvramError;

use super::layout::{get64, INODE_BYTES, INODE_CHILD, INODE_FACTS, INODE_SIB_NEXT, INODE_SIB_PREV};
use super::pages::{put, Tx};
use super::recover::{Found2, Reader};
use super::Minv;
use crate::format::Record;
use crate::types::{Ino, Kind, ROOT_INO};

/// Where an inode hangs in the tree, from its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// The directory its first name is in (an attribute set: its owner); 0 for none.
    pub parent: Ino,
    pub kind: Kind,
    /// A hard link object's file.
    pub target: Ino,
}

impl Place {
    pub(crate) fn of(rec: &Record) -> Place {
        Place {
            parent: rec.names.first().map_or(0, |n| n.parent),
            kind: rec.kind,
            target: match rec.kind {
                Kind::HardLink => Ino::try_from(rec.size).unwrap_or(0),
                _ => 0,
            },
        }
    }
}

/// Which half of a word a count lives in.
#[derive(Clone, Copy)]
pub(crate) enum Half {
    Low,
    High,
}

pub(super) fn half(word: u64, h: Half) -> u32 {
    match h {
        Half::Low => word as u32,
        Half::High => (word >> 32) as u32,
    }
}

fn with_half(word: u64, h: Half, v: u32) -> u64 {
    match h {
        Half::Low => word & !0xffff_ffff | u64::from(v),
        Half::High => word & 0xffff_ffff | u64::from(v) << 32,
    }
}

/// The counts an inode holds: (hard links, attribute set, subdirectories).
pub(crate) fn facts(inode: &[u8]) -> (u32, Ino, u32) {
    let w0 = get64(inode, 0);
    let w7 = get64(inode, INODE_FACTS as usize);
    (
        half(w0, Half::High),
        half(w7, Half::Low),
        half(w7, Half::High),
    )
}

/// fsck: the tree as the NVRAM holds it against what the walked records say it must be:
/// each directory's list exactly the inodes whose record names it first (linked both
/// ways, no loop), its subdirectory count, each file's hard link count, each owner's
/// attribute set (of two a replacement cut short left, the newer).
pub(super) fn check(r: &mut Reader, found: &Found2) -> Vec<String> {
    let mut p = Vec::new();
    let by_at: HashMap<u64, Ino> = found.inodes.iter().map(|(&i, w)| (w.0.at, i)).collect();
    let mut members: HashMap<Ino, BTreeSet<Ino>> = HashMap::new();
    let mut subdirs: HashMap<Ino, u32> = HashMap::new();
    let mut links: HashMap<Ino, u32> = HashMap::new();
    let mut sets: HashMap<Ino, (u64, Ino)> = HashMap::new();
    for (&ino, (n, rec, _)) in &found.inodes {
        let pl = n.place;
        if pl.parent == 0 || !found.inodes.contains_key(&pl.parent) {
            if pl.kind == Kind::HardLink {
                *links.entry(pl.target).or_default() += 1;
            }
            continue;
        }
        match pl.kind {
            Kind::Xattrs => {
                let e = sets.entry(pl.parent).or_insert((rec.version, ino));
                if rec.version > e.0 {
                    *e = (rec.version, ino);
                }
                continue;
            }
            Kind::HardLink => *links.entry(pl.target).or_default() += 1,
            Kind::Dir => *subdirs.entry(pl.parent).or_default() += 1,
            _ => {}
        }
        members.entry(pl.parent).or_default().insert(ino);
    }
    let mut inos: Vec<Ino> = found.inodes.keys().copied().collect();
    inos.sort_unstable();
    // Names a record gives another object are in that object's record too, from the
    // same transaction (`Minv::rename_in_place`), unless its own later record settled them.
    for &ino in &inos {
        let rec = &found.inodes[&ino].1;
        for (t, names) in &rec.name_updates {
            let Some((_, trec, _)) = found.inodes.get(t) else {
                continue;
            };
            if *t != ino && trec.version < rec.version && &trec.names != names {
                p.push(format!(
                    "object {t}: its record's names differ from those object {ino}'s newer \
                     record gives it"
                ));
            }
        }
    }
    for ino in inos {
        let at = found.inodes[&ino].0.at;
        let inode = match r.read(at, INODE_BYTES) {
            Ok(b) => b,
            Err(e) => {
                p.push(format!("object {ino}: its inode cannot be read: {e}"));
                continue;
            }
        };
        let (l, set, sub) = facts(&inode);
        let want = (
            links.get(&ino).copied().unwrap_or(0),
            sets.get(&ino).map_or(0, |s| s.1),
            subdirs.get(&ino).copied().unwrap_or(0),
        );
        if (l, set, sub) != want {
            p.push(format!(
                "object {ino}: its inode says {l} hard links, attribute set {set}, {sub} \
                 subdirectories; the records say {}, {}, {}",
                want.0, want.1, want.2
            ));
        }
        // Its child list.
        let (mut cur, mut prev) = (get64(&inode, INODE_CHILD as usize), 0u64);
        let mut listed = BTreeSet::new();
        let mut bad = None;
        while cur != 0 {
            let Some(&c) = by_at.get(&cur) else {
                bad = Some(format!("points at {cur}, not an inode"));
                break;
            };
            if !listed.insert(c) {
                bad = Some(format!("loops at object {c}"));
                break;
            }
            let words = match r.read(cur + INODE_SIB_NEXT, 16) {
                Ok(w) => w,
                Err(e) => {
                    bad = Some(format!("cannot be read: {e}"));
                    break;
                }
            };
            if get64(&words, 8) != prev {
                bad = Some(format!("object {c}'s previous sibling is wrong"));
                break;
            }
            prev = cur;
            cur = get64(&words, 0);
        }
        let want = members.remove(&ino).unwrap_or_default();
        match bad {
            Some(why) => p.push(format!("object {ino}: its child list {why}")),
            None if listed != want => {
                let extra: Vec<_> = listed.difference(&want).take(5).collect();
                let missing: Vec<_> = want.difference(&listed).take(5).collect();
                p.push(format!(
                    "object {ino}: its child list holds {extra:?} it should not and lacks \
                     {missing:?}"
                ));
            }
            None => {}
        }
    }
    p
}

impl Minv {
    /// The word at `off` as the stores in `tx` leave it.
    pub(super) fn word(&mut self, tx: &Tx, off: u64) -> Result<u64, NvramError> {
        match tx.iter().rev().find(|(o, _)| *o == off) {
            Some(&(_, v)) => Ok(v),
            None => self.nv.read_u64(off),
        }
    }

    fn set_half(&mut self, tx: &mut Tx, off: u64, h: Half, v: u32) -> Result<(), NvramError> {
        let w = self.word(tx, off)?;
        put(tx, off, with_half(w, h, v));
        Ok(())
    }

    pub(super) fn add_half(
        &mut self,
        tx: &mut Tx,
        off: u64,
        h: Half,
        up: bool,
    ) -> Result<u32, NvramError> {
        let w = self.word(tx, off)?;
        let v = match up {
            true => half(w, h).saturating_add(1),
            false => half(w, h).saturating_sub(1),
        };
        put(tx, off, with_half(w, h, v));
        Ok(v)
    }

    /// The inode of object `ino`, if the store has one.
    fn at_of(&self, ino: Ino) -> Option<u64> {
        self.inodes.get(&ino).map(|n| n.at)
    }

    /// Stores that put the inode at `at` first in the child list of the directory whose
    /// inode is at `dir`.
    fn list_insert(&mut self, tx: &mut Tx, at: u64, dir: u64) -> Result<(), NvramError> {
        let head = self.word(tx, dir + INODE_CHILD)?;
        put(tx, at + INODE_SIB_PREV, 0);
        put(tx, at + INODE_SIB_NEXT, head);
        if head != 0 {
            put(tx, head + INODE_SIB_PREV, at);
        }
        put(tx, dir + INODE_CHILD, at);
        Ok(())
    }

    /// Stores that take the inode at `at` out of the child list of the directory at
    /// `dir`.
    fn list_remove(&mut self, tx: &mut Tx, at: u64, dir: u64) -> Result<(), NvramError> {
        let next = self.word(tx, at + INODE_SIB_NEXT)?;
        let prev = self.word(tx, at + INODE_SIB_PREV)?;
        match prev {
            0 => put(tx, dir + INODE_CHILD, next),
            p => put(tx, p + INODE_SIB_NEXT, next),
        }
        if next != 0 {
            put(tx, next + INODE_SIB_PREV, prev);
        }
        Ok(())
    }

    /// Stores that hang object `ino` (its inode at `at`, placed `p`) in the tree: into its
    /// directory's list, its file's links, its owner's set.
    pub(super) fn tree_join(
        &mut self,
        tx: &mut Tx,
        ino: Ino,
        at: u64,
        p: Place,
    ) -> Result<(), NvramError> {
        match p.kind {
            Kind::Xattrs => {
                if let Some(owner) = self.at_of(p.parent) {
                    self.set_half(tx, owner + INODE_FACTS, Half::Low, ino)?;
                }
                return Ok(());
            }
            Kind::HardLink => {
                if let Some(file) = self.at_of(p.target) {
                    self.add_half(tx, file, Half::High, true)?;
                }
            }
            _ => {}
        }
        if let Some(dir) = self.at_of(p.parent).filter(|_| p.parent != 0) {
            self.list_insert(tx, at, dir)?;
            if p.kind == Kind::Dir {
                self.add_half(tx, dir + INODE_FACTS, Half::High, true)?;
            }
        }
        Ok(())
    }

    /// Stores that take object `ino` (inode at `at`, placed `p`) out of the tree. Returns
    /// its file's links left, for a hard link object.
    pub(super) fn tree_leave(
        &mut self,
        tx: &mut Tx,
        ino: Ino,
        at: u64,
        p: Place,
    ) -> Result<Option<u32>, NvramError> {
        let mut links = None;
        match p.kind {
            Kind::Xattrs => {
                if let Some(owner) = self.at_of(p.parent) {
                    let facts = self.word(tx, owner + INODE_FACTS)?;
                    // Of two sets a replacement cut short left, the owner has the newer.
                    if half(facts, Half::Low) == ino {
                        put(tx, owner + INODE_FACTS, with_half(facts, Half::Low, 0));
                    }
                }
                return Ok(None);
            }
            Kind::HardLink => {
                if let Some(file) = self.at_of(p.target) {
                    links = Some(self.add_half(tx, file, Half::High, false)?);
                }
            }
            _ => {}
        }
        if let Some(dir) = self.at_of(p.parent).filter(|_| p.parent != 0) {
            self.list_remove(tx, at, dir)?;
            if p.kind == Kind::Dir {
                self.add_half(tx, dir + INODE_FACTS, Half::High, false)?;
            }
        }
        Ok(links)
    }

    /// Stores that move object `ino` from the directory it is in to `parent` (its record
    /// now names `parent` first; 0: no name left of its own).
    pub(super) fn tree_move(
        &mut self,
        tx: &mut Tx,
        ino: Ino,
        parent: Ino,
    ) -> Result<(), NvramError> {
        let n = &self.inodes[&ino];
        let (at, p) = (n.at, n.place);
        if p.parent == parent || p.kind == Kind::Xattrs {
            return Ok(());
        }
        // Leave and join as what it is: a hard link's count goes down and back up.
        self.tree_leave(tx, ino, at, p)?;
        self.tree_join(tx, ino, at, Place { parent, ..p })
    }

    /// The objects removing `ino` removes: itself, its attribute set, and for a hard link
    /// object whose file is left with no name and no other link, that file (and its set).
    /// `tx` holds the stores so far (the file's link count is read through them).
    pub(super) fn removal_group(&mut self, tx: &Tx, ino: Ino) -> Result<Vec<Ino>, NvramError> {
        let mut out = vec![ino];
        let mut i = 0;
        while i < out.len() {
            let x = out[i];
            i += 1;
            let n = &self.inodes[&x];
            let (at, p) = (n.at, n.place);
            let set = half(self.word(tx, at + INODE_FACTS)?, Half::Low);
            if set != 0 && self.inodes.contains_key(&set) && !out.contains(&set) {
                out.push(set);
            }
            if p.kind == Kind::HardLink {
                let t = p.target;
                let Some(file) = self.inodes.get(&t) else {
                    continue;
                };
                let (file_at, nameless) = (file.at, file.place.parent == 0);
                // Its count before this link leaves.
                let links = half(self.word(tx, file_at)?, Half::High);
                if links <= 1 && nameless && t != ROOT_INO && !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_change_alone() {
        let w = 0x0000_0007_0000_0009u64;
        assert_eq!(half(w, Half::Low), 9);
        assert_eq!(half(w, Half::High), 7);
        assert_eq!(with_half(w, Half::Low, 5), 0x0000_0007_0000_0005);
        assert_eq!(with_half(w, Half::High, 1), 0x0000_0001_0000_0009);
    }
}
