//! fsck: checks every invariant of the mounted state against itself and against flash, and
//! reports what is wrong without changing anything.
//!
//! - every page is valid, invalid or free exactly once: valid bits agree with the block
//!   table, sit below each block's write point, and each valid page has exactly one owner;
//! - maps and tags agree: every referenced page reads back with the tags and CRC its owner
//!   expects;
//! - the tree is connected: every object but the root has names, under directories
//!   reachable from the root, and the directory index says the same;
//! - sizes match: no chunk lies past its file's end.

use std::collections::{HashMap, HashSet};

use nandkit_flash::Flash;
use serde::Serialize;

use crate::blocks::BlockState;
use crate::format::{PageKind, Record};
use crate::fs::FileSystem;
use crate::object::LOST_PAGE;
use crate::types::{Ino, Kind, ROOT_INO, SUPER_INO};

#[derive(Clone, Debug, Default, Serialize)]
pub struct FsckReport {
    pub problems: Vec<String>,
    pub pages_checked: u64,
    pub objects_checked: u64,
}

impl FsckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Who owns a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Super,
    Header(Ino),
    Tombstone(Ino),
    Chunk(Ino, u32),
}

impl<F: Flash> FileSystem<F> {
    pub fn fsck(&mut self) -> FsckReport {
        let mut r = FsckReport::default();
        let p = |r: &mut FsckReport, s: String| {
            if r.problems.len() < 1000 {
                r.problems.push(s);
            }
        };
        if let Some(why) = &self.dead {
            p(&mut r, format!("file system is dead: {why}"));
            return r;
        }
        // Owners of pages.
        let mut owners: HashMap<u32, Owner> = HashMap::new();
        let mut claim = |r: &mut FsckReport, pno: u32, o: Owner| {
            if let Some(prev) = owners.insert(pno, o) {
                p(r, format!("page {pno} owned twice: {prev:?} and {o:?}"));
            }
        };
        match self.super_page {
            Some(pno) => claim(&mut r, pno, Owner::Super),
            None => p(&mut r, "file system record has no page".into()),
        }
        let mut inos: Vec<Ino> = self.objects.keys().copied().collect();
        inos.sort_unstable();
        for &ino in &inos {
            let o = &self.objects[&ino];
            match o.header {
                Some(h) => claim(&mut r, h, Owner::Header(ino)),
                None if !o.header_dirty => p(&mut r, format!("object {ino} has no header page")),
                None => {}
            }
            for (i, c) in o.chunk_entries() {
                if c != LOST_PAGE {
                    claim(&mut r, c, Owner::Chunk(ino, i));
                }
            }
        }
        for (&ino, &pno) in &self.tombstones {
            if self.objects.contains_key(&ino) {
                p(&mut r, format!("object {ino} is both live and buried"));
            }
            claim(&mut r, pno, Owner::Tombstone(ino));
        }
        // Block table against valid bits and owners.
        let ppb = self.layout.pages_per_block;
        for b in 0..self.layout.blocks {
            let blk = self.blocks.blocks[b as usize];
            let mut valid = 0;
            for page in 0..ppb {
                let pno = self.layout.pno(b, page);
                if !self.blocks.is_valid(pno) {
                    continue;
                }
                valid += 1;
                if page >= blk.next_page {
                    p(
                        &mut r,
                        format!(
                            "block {b}: page {page} valid past the write point {}",
                            blk.next_page
                        ),
                    );
                }
                if !owners.contains_key(&pno) {
                    p(&mut r, format!("page {pno} is valid but nothing owns it"));
                }
            }
            if valid != blk.valid {
                p(
                    &mut r,
                    format!(
                        "block {b}: {valid} valid bits but the table says {}",
                        blk.valid
                    ),
                );
            }
            if matches!(blk.state, BlockState::Empty | BlockState::Bad) && valid > 0 {
                p(
                    &mut r,
                    format!("block {b} is {:?} but holds {valid} valid pages", blk.state),
                );
            }
        }
        // Every owned page reads back as its owner expects.
        let mut pages: Vec<(u32, Owner)> = owners.into_iter().collect();
        pages.sort_unstable_by_key(|x| x.0);
        let c = u64::from(self.layout.chunk_bytes);
        for (pno, owner) in pages {
            r.pages_checked += 1;
            if !self.blocks.is_valid(pno) {
                p(
                    &mut r,
                    format!("page {pno} ({owner:?}) is referenced but not valid"),
                );
            }
            let read = match self.read_raw(pno) {
                Ok(Some(read)) => read,
                Ok(None) => {
                    p(
                        &mut r,
                        format!("page {pno} ({owner:?}) has unreadable tags"),
                    );
                    continue;
                }
                Err(e) => {
                    p(
                        &mut r,
                        format!("page {pno} ({owner:?}) cannot be read: {e}"),
                    );
                    continue;
                }
            };
            if read.damaged {
                p(&mut r, format!("page {pno} ({owner:?}) fails its data CRC"));
            }
            let t = read.tags;
            let ok = match owner {
                Owner::Super => t.kind == PageKind::Header && t.obj == SUPER_INO,
                Owner::Header(ino) | Owner::Tombstone(ino) => {
                    t.kind == PageKind::Header && t.obj == ino
                }
                Owner::Chunk(ino, i) => t.kind == PageKind::Data && t.obj == ino && t.chunk == i,
            };
            if !ok {
                p(
                    &mut r,
                    format!("page {pno} tags {t:?} do not match its owner {owner:?}"),
                );
            }
            if let Owner::Header(ino) = owner {
                match Record::decode(&read.data) {
                    Some(rec) => {
                        let o = &self.objects[&ino];
                        if !o.header_dirty && rec.kind != o.meta.kind {
                            p(
                                &mut r,
                                format!("object {ino}: header kind differs from RAM"),
                            );
                        }
                    }
                    None => p(
                        &mut r,
                        format!("object {ino}: header record does not decode"),
                    ),
                }
            }
            if let Owner::Chunk(ino, i) = owner {
                let size = self.objects[&ino].meta.size;
                if u64::from(i) * c >= size {
                    p(
                        &mut r,
                        format!("object {ino}: chunk {i} lies past the end ({size} bytes)"),
                    );
                }
            }
        }
        // The tree.
        let mut reachable: HashSet<Ino> = HashSet::from([ROOT_INO]);
        let mut stack = vec![ROOT_INO];
        while let Some(d) = stack.pop() {
            for (name, &child) in self.dirs.get(&d).into_iter().flatten() {
                match self.objects.get(&child) {
                    None => p(
                        &mut r,
                        format!("directory {d} lists missing object {child}"),
                    ),
                    Some(o) => {
                        if !o
                            .meta
                            .names
                            .iter()
                            .any(|n| n.parent == d && n.name == *name)
                        {
                            p(&mut r, format!("directory {d} lists object {child} under a name it does not have"));
                        }
                        if reachable.insert(child) && o.kind() == Kind::Dir {
                            stack.push(child);
                        }
                    }
                }
            }
        }
        for &ino in &inos {
            if ino == SUPER_INO {
                continue;
            }
            r.objects_checked += 1;
            let o = &self.objects[&ino];
            if ino != ROOT_INO && o.meta.names.is_empty() && o.open == 0 {
                p(&mut r, format!("object {ino} has no name and is not open"));
            }
            if ino != ROOT_INO && !o.meta.names.is_empty() && !reachable.contains(&ino) {
                p(
                    &mut r,
                    format!("object {ino} is not reachable from the root"),
                );
            }
            for n in &o.meta.names {
                if self.dirs.get(&n.parent).and_then(|d| d.get(&n.name)) != Some(&ino) {
                    p(
                        &mut r,
                        format!(
                            "object {ino}'s name {:?} in {} is not in the directory index",
                            String::from_utf8_lossy(&n.name),
                            n.parent
                        ),
                    );
                }
            }
            if o.kind() == Kind::Dir {
                let subdirs = self
                    .dirs
                    .get(&ino)
                    .into_iter()
                    .flatten()
                    .filter(|(_, c)| self.objects.get(c).is_some_and(|x| x.kind() == Kind::Dir))
                    .count() as u32;
                if subdirs != o.subdirs {
                    p(
                        &mut r,
                        format!(
                            "directory {ino}: {subdirs} subdirectories, nlink counts {}",
                            o.subdirs
                        ),
                    );
                }
            }
        }
        r
    }
}
