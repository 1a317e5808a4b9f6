//! fsck: checks every invariant of the mounted state against itself and against flash, and
//! reports what is wrong (loading every object's details and every directory's names on
//! the way, but writing nothing).
//!
//! - every page is valid, invalid, overhead or free exactly once: valid bits agree with the
//!   block table, sit below each block's write point, and each valid page has exactly one
//!   owner;
//! - maps and tags agree: every referenced page reads back with the tags and checks its
//!   owner expects, and every block summary says of its valid pages what their owners do;
//! - the tree is connected: every object but the root has names, under directories
//!   reachable from the root, and the directory indexes say the same;
//! - hard links name files that exist, and each file's link count is what they say;
//!   attribute sets belong to objects that exist; payloads in data chunks read back;
//! - sizes match: no chunk lies past its file's end;
//! - space adds up: what statfs counts as used is the files' valid pages, the metadata's
//!   and the holes the files' reservations hold, nothing more;
//! - both copies of the file system record are readable.

use std::collections::{HashMap, HashSet};

use nandkit_flash::Flash;
use serde::Serialize;

use crate::blocks::BlockState;
use crate::format::record::Record;
use crate::format::summary::SummaryEntry;
use crate::format::tags::Tags;
use crate::fs::FileSystem;
use crate::object::LOST_PAGE;
use crate::types::{Ino, Kind, ROOT_INO};

#[derive(Clone, Debug, Default, Serialize)]
pub struct FsckReport {
    pub problems: Vec<String>,
    /// Not problems: what the next writable mount will finish (a read-only mount after a
    /// crash shows the state it will leave).
    pub notes: Vec<String>,
    pub pages_checked: u64,
    pub objects_checked: u64,
    pub summaries_checked: u64,
    pub space: SpaceAccount,
}

/// Where the space statfs counts as used goes, in chunks. fsck reports a difference
/// between `used` and the sum of the rest: space that no file and no metadata holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SpaceAccount {
    /// What statfs counts as used (valid pages and reserved holes).
    pub used: u64,
    /// Valid pages holding files' data.
    pub data: u64,
    /// Valid pages holding headers and deletion markers.
    pub metadata: u64,
    /// Holes fallocate reserved, counted from the files' maps.
    pub reserved: u64,
}

impl FsckReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Who owns a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    Header(Ino),
    Tombstone(Ino),
    Chunk(Ino, u32),
}

impl<F: Flash> FileSystem<F> {
    pub fn fsck(&mut self) -> FsckReport {
        let mut r = FsckReport::default();
        if let Err(e) = self.map_all() {
            r.problems
                .push(format!("a file's chunk map does not load: {e}"));
        }
        let p = |r: &mut FsckReport, s: String| {
            if r.problems.len() < 1000 {
                r.problems.push(s);
            }
        };
        if self.is_dead() {
            p(
                &mut r,
                format!("file system is dead: {}", crate::fs::POWER_LOST),
            );
            return r;
        }
        let on_flash = self.metadata_on_flash();
        for (i, &e) in self.anchors.epochs.iter().enumerate() {
            if e == 0 && on_flash {
                p(
                    &mut r,
                    format!(
                        "file system record copy {} (block {}) is missing or unreadable",
                        i + 1,
                        self.anchors.blocks[i]
                    ),
                );
            }
        }
        // Load everything: details of every object, names of every directory.
        let mut inos: Vec<Ino> = self.objects.keys().copied().collect();
        inos.sort_unstable();
        for &ino in &inos {
            if let Err(e) = self.load_payload(ino) {
                p(
                    &mut r,
                    format!("object {ino}: details cannot be loaded: {e}"),
                );
            }
        }
        let dirs: Vec<Ino> = inos
            .iter()
            .copied()
            .filter(|i| self.objects[i].kind == Kind::Dir)
            .collect();
        for d in dirs {
            if let Err(e) = self.load_dir(d) {
                p(
                    &mut r,
                    format!("directory {d}: names cannot be loaded: {e}"),
                );
            }
        }
        // Owners of pages.
        let mut owners: HashMap<u32, Owner> = HashMap::new();
        let mut claim = |r: &mut FsckReport, pno: u32, o: Owner| {
            if let Some(prev) = owners.insert(pno, o) {
                p(r, format!("page {pno} owned twice: {prev:?} and {o:?}"));
            }
        };
        let inos: Vec<Ino> = {
            let mut v: Vec<Ino> = self.objects.keys().copied().collect();
            v.sort_unstable();
            v
        };
        for &ino in &inos {
            let o = &self.objects[&ino];
            match o.header_page() {
                Some(h) => claim(&mut r, h, Owner::Header(ino)),
                None if !o.is_dirty() && on_flash => {
                    p(&mut r, format!("object {ino} has no header page"))
                }
                None => {}
            }
            for (i, c) in o.chunks.entries() {
                if c != LOST_PAGE {
                    claim(&mut r, c, Owner::Chunk(ino, i));
                }
            }
        }
        for (&ino, t) in &self.tombstones {
            if self.objects.contains_key(&ino) {
                p(&mut r, format!("object {ino} is both live and buried"));
            }
            claim(&mut r, t.page, Owner::Tombstone(ino));
        }
        // Block table against valid bits and owners.
        let ppb = self.layout.pages_per_block;
        for b in 0..self.layout.blocks {
            let blk = self.blocks.get(b);
            let mut valid = 0;
            for page in 0..ppb {
                let pno = self.layout.pno(b, page);
                if !self.blocks.is_valid(pno) {
                    continue;
                }
                valid += 1;
                if page >= blk.next_page() {
                    p(
                        &mut r,
                        format!(
                            "block {b}: page {page} valid past the write point {}",
                            blk.next_page()
                        ),
                    );
                }
                if !owners.contains_key(&pno) {
                    p(&mut r, format!("page {pno} is valid but nothing owns it"));
                }
            }
            if valid != blk.valid() {
                p(
                    &mut r,
                    format!(
                        "block {b}: {valid} valid bits but the table says {}",
                        blk.valid()
                    ),
                );
            }
            if blk.valid() + blk.overhead() > blk.next_page() {
                p(
                    &mut r,
                    format!("block {b}: more valid and summary pages than written pages"),
                );
            }
            let holds_nothing = matches!(
                blk.state,
                BlockState::Empty | BlockState::Bad | BlockState::Anchor
            );
            if holds_nothing && valid > 0 {
                p(
                    &mut r,
                    format!("block {b} is {:?} but holds {valid} valid pages", blk.state),
                );
            }
        }
        let counted: u64 = self
            .blocks
            .records()
            .iter()
            .map(|b| u64::from(b.valid()))
            .sum();
        if counted != self.blocks.valid_total() {
            p(
                &mut r,
                format!(
                    "the block table counts {} valid pages in all, its blocks {counted}",
                    self.blocks.valid_total()
                ),
            );
        }
        // Every owned page reads back as its owner expects.
        let mut pages: Vec<(u32, Owner)> = owners.into_iter().collect();
        pages.sort_unstable_by_key(|x| x.0);
        let c = u64::from(self.layout.chunk_bytes);
        for &(pno, owner) in &pages {
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
                p(&mut r, format!("page {pno} ({owner:?}) fails its checks"));
            }
            let ok = match (owner, read.tags) {
                (Owner::Header(ino) | Owner::Tombstone(ino), Tags::Header(h)) => h.obj == ino,
                (Owner::Chunk(ino, i), Tags::Data(d)) => d.obj == ino && d.chunk == i,
                _ => false,
            };
            if !ok {
                p(
                    &mut r,
                    format!(
                        "page {pno} tags {:?} do not match its owner {owner:?}",
                        read.tags
                    ),
                );
            }
            if let Owner::Header(ino) = owner {
                match Record::decode(&read.data) {
                    Some(rec) => {
                        let o = &self.objects[&ino];
                        if !o.is_dirty() && rec.kind != o.kind {
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
                let size = self.objects[&ino].size;
                if u64::from(i) * c >= size {
                    p(
                        &mut r,
                        format!("object {ino}: chunk {i} lies past the end ({size} bytes)"),
                    );
                }
            }
        }
        self.account_space(&mut r, &pages);
        let (problems, notes) = self.check_data_owners(&pages);
        for s in problems {
            p(&mut r, s);
        }
        r.notes.extend(notes);
        self.check_summaries(&mut r, &pages);
        if self.block_placed() {
            self.check_placement(&mut r, &pages);
        }
        self.check_tree(&mut r, &inos);
        for &(ino, gone) in &self.adopted {
            p(
                &mut r,
                format!(
                    "object {ino}: the directory {gone} it is in is missing (its headers are lost): a writable mount moves it to /lost+found/#{ino}"
                ),
            );
        }
        for &ino in &self.restored {
            let o = &self.objects[&ino];
            p(
                &mut r,
                format!(
                    "object {ino}: {} data chunks ({} bytes) whose header is lost: a writable mount restores them as /lost+found/#{ino}",
                    o.chunks.entries().len(),
                    o.size
                ),
            );
        }
        if !self.headerless_pages.is_empty() {
            let pages: u32 = self.headerless_pages.values().sum();
            let shown: Vec<String> = self
                .headerless_pages
                .iter()
                .take(10)
                .map(|(o, n)| format!("{o} ({n})"))
                .collect();
            r.notes.push(format!(
                "{pages} data pages belong to {} objects with no header (pages by object: {}{}): {}",
                self.headerless_pages.len(),
                shown.join(", "),
                if self.headerless_pages.len() > 10 { ", ..." } else { "" },
                if self.tracks_data_owners() {
                    "objects made after the newest header on flash (a power cut before their first header), not restored"
                } else {
                    "stale pages of deleted files, or files whose headers were lost (where tombstones do not outlive their data, as in the papers' designs or an image made before they could, nothing tells which), not restored"
                }
            ));
        }
        for &pno in &self.unexplained_pages {
            p(
                &mut r,
                format!(
                    "page {pno} (block {}) is programmed but fails its checks, and no power cut tore it (pages written after it pass, or too many fail together): damage, and a file or directory may have lost what it held here (its tags no longer say which)",
                    pno / self.layout.pages_per_block
                ),
            );
        }
        if !on_flash {
            let mut store = self.metadata.take().expect("a metadata store");
            let found = store.check(self);
            self.metadata = Some(store);
            for s in found.problems {
                p(&mut r, s);
            }
            r.notes.extend(found.notes);
        }
        r
    }

    /// Fills `r.space` and reports used space that nothing holds (or holds twice).
    fn account_space(&self, r: &mut FsckReport, owners: &[(u32, Owner)]) {
        let mut a = SpaceAccount {
            used: self.space().1,
            ..SpaceAccount::default()
        };
        for &(pno, owner) in owners {
            if !self.blocks.is_valid(pno) {
                continue; // reported above
            }
            match owner {
                Owner::Chunk(..) => a.data += 1,
                Owner::Header(_) | Owner::Tombstone(_) => a.metadata += 1,
            }
        }
        a.reserved = self
            .reserves
            .inos()
            .map(|ino| {
                self.objects.get(&ino).map_or(0, |o| {
                    crate::reserve_table::holes_in(&o.chunks, &self.reserves.get(ino))
                })
            })
            .sum();
        let held = a.data + a.metadata + a.reserved;
        if held != a.used {
            r.problems.push(format!(
                "space: {} chunks are counted used, the files and metadata hold {held} ({} data pages, {} metadata pages, {} reserved holes): {} {}",
                a.used,
                a.data,
                a.metadata,
                a.reserved,
                a.used.abs_diff(held),
                if a.used > held { "held by nothing" } else { "not counted" }
            ));
        }
        r.space = a;
    }

    /// Block-placed data (MNFS's iBAT): chunk `c` of a file sits at page `c % ppb` of the
    /// one data block holding its logical block; a data block holds one logical block of
    /// one file, and its pages carry the generation the iBAT has for it; no data block is
    /// a cleaning candidate while it holds a live page, unless it is flagged.
    fn check_placement(&mut self, r: &mut FsckReport, owners: &[(u32, Owner)]) {
        let ppb = self.layout.pages_per_block;
        let mut holder: HashMap<(Ino, u32), u32> = HashMap::new();
        let mut held: HashMap<u32, (Ino, u32)> = HashMap::new();
        let mut first_page: HashMap<u32, u32> = HashMap::new();
        for &(pno, owner) in owners {
            let Owner::Chunk(ino, chunk) = owner else {
                if self.blocks.is_data_block(pno / ppb) {
                    r.problems
                        .push(format!("page {pno}: {owner:?} in data block {}", pno / ppb));
                }
                continue;
            };
            let (b, lb) = (pno / ppb, chunk / ppb);
            if !self.blocks.is_data_block(b) {
                r.problems.push(format!(
                    "object {ino}: chunk {chunk} on page {pno}, not in a data block"
                ));
                continue;
            }
            if pno % ppb != chunk % ppb {
                r.problems.push(format!(
                    "object {ino}: chunk {chunk} at page {} of block {b}, not {}",
                    pno % ppb,
                    chunk % ppb
                ));
            }
            if let Some(&other) = holder.get(&(ino, lb)) {
                if other != b {
                    r.problems.push(format!(
                        "object {ino}: logical block {lb} in blocks {other} and {b}"
                    ));
                }
            }
            holder.insert((ino, lb), b);
            if let Some(&(o, l)) = held.get(&b) {
                if (o, l) != (ino, lb) {
                    r.problems.push(format!(
                        "block {b}: holds logical block {l} of {o} and {lb} of {ino}"
                    ));
                }
            }
            held.insert(b, (ino, lb));
            first_page.entry(b).or_insert(pno);
        }
        for (b, pno) in first_page {
            let blk = self.blocks.get(b);
            if self.blocks.is_candidate(b) && blk.flags == 0 {
                r.problems.push(format!(
                    "block {b}: a data block with live pages is a cleaning candidate"
                ));
            }
            let want = self.blocks.generation(b);
            if let Ok(crate::format::tags::TagRead::Valid(Tags::Data(d))) = self.read_tags(pno) {
                let got = (d.serial.low() % u16::from(crate::blocks::ibat::GENERATIONS)) as u8;
                if got != want {
                    r.problems.push(format!(
                        "block {b}: its pages say generation {got}, the iBAT {want}"
                    ));
                }
            }
        }
    }

    /// Every block summary must say of each valid page what its owner says.
    fn check_summaries(&mut self, r: &mut FsckReport, owners: &[(u32, Owner)]) {
        let owner_of: HashMap<u32, Owner> = owners.iter().copied().collect();
        for b in 0..self.layout.blocks {
            let blk = self.blocks.get(b);
            if blk.state != BlockState::Full || blk.overhead() == 0 || blk.next_page() == 0 {
                continue;
            }
            let spno = self.layout.pno(b, blk.next_page() - 1);
            let summary = match self.summary_chain(b, blk.next_page() - 1, None) {
                Ok(Some((s, _))) => Some(s),
                _ => None,
            };
            let Some(summary) = summary else {
                r.problems.push(format!(
                    "block {b}: its summary (page {spno}) is unreadable"
                ));
                continue;
            };
            r.summaries_checked += 1;
            for (page, e) in summary.entries.iter().enumerate() {
                let pno = self.layout.pno(b, page as u32);
                let Some(owner) = owner_of.get(&pno) else {
                    continue;
                };
                let agrees = match (*owner, *e) {
                    (Owner::Header(i) | Owner::Tombstone(i), SummaryEntry::Header { obj, .. }) => {
                        i == obj
                    }
                    (Owner::Chunk(i, c), SummaryEntry::Data { obj, chunk, .. }) => {
                        i == obj && c == chunk
                    }
                    _ => false,
                };
                if !agrees {
                    r.problems.push(format!(
                        "block {b}: the summary says page {page} holds {e:?}, but it belongs to \
                         {owner:?}"
                    ));
                }
            }
        }
    }

    fn check_tree(&mut self, r: &mut FsckReport, inos: &[Ino]) {
        let mut p = |s: String| {
            if r.problems.len() < 1000 {
                r.problems.push(s);
            }
        };
        let mut reachable: HashSet<Ino> = HashSet::from([ROOT_INO]);
        let mut stack = vec![ROOT_INO];
        while let Some(d) = stack.pop() {
            let Some(dir) = self.dirs.get(&d) else {
                continue;
            };
            if !dir.unnamed.is_empty() {
                p(format!(
                    "directory {d}: {} children whose names cannot be read",
                    dir.unnamed.len()
                ));
            }
            for (name, &child) in dir.index.iter().flatten() {
                match self.objects.get(&child) {
                    None => p(format!("directory {d} lists missing object {child}")),
                    Some(o) => {
                        let named = o.details.as_ref().is_some_and(|det| {
                            det.names.iter().any(|n| n.parent == d && n.name == *name)
                        });
                        if !named {
                            p(format!(
                                "directory {d} lists object {child} under a name it does not have"
                            ));
                        }
                        if reachable.insert(child) && o.kind == Kind::Dir {
                            stack.push(child);
                        }
                    }
                }
            }
        }
        let mut links: HashMap<Ino, u32> = HashMap::new();
        for &ino in inos {
            let Some(o) = self.objects.get(&ino) else {
                continue;
            };
            r.objects_checked += 1;
            let Some(d) = o.details.as_deref() else {
                continue; // reported as unloadable above
            };
            match o.kind {
                Kind::Xattrs => {
                    let owner = d.names.first().map_or(0, |n| n.parent);
                    if d.names.len() != 1 || self.xattr_sets.get(&owner) != Some(&ino) {
                        p(format!(
                            "attribute set {ino} is not the set of its owner {owner}"
                        ));
                    }
                    if self
                        .objects
                        .get(&owner)
                        .is_none_or(|x| !x.kind.is_visible())
                    {
                        p(format!("attribute set {ino}: owner {owner} does not exist"));
                    }
                    continue;
                }
                Kind::HardLink => {
                    let target = Ino::try_from(o.size).unwrap_or(0);
                    match self.objects.get(&target) {
                        Some(t) if t.kind.is_visible() && t.kind != Kind::Dir => {
                            *links.entry(target).or_insert(0) += 1;
                        }
                        _ => p(format!("hard link {ino} names no file ({target})")),
                    }
                }
                Kind::Symlink if d.target.len() as u64 != o.size => {
                    p(format!(
                        "symlink {ino}: target length differs from its size"
                    ));
                }
                _ => {}
            }
            let held = self.links.get(&ino).is_some_and(|&n| n > 0);
            if ino != ROOT_INO && d.names.is_empty() && o.open == 0 && !held {
                p(format!("object {ino} has no name and is not open"));
            }
            if ino != ROOT_INO && !d.names.is_empty() && !reachable.contains(&ino) {
                p(format!("object {ino} is not reachable from the root"));
            }
            if o.parent != d.names.first().map_or(0, |n| n.parent) {
                p(format!(
                    "object {ino}: parent {} is not its first name's",
                    o.parent
                ));
            }
            for n in &d.names {
                let listed = self
                    .dirs
                    .get(&n.parent)
                    .and_then(|x| x.index.as_ref())
                    .and_then(|i| i.get(&n.name));
                if listed != Some(&ino) {
                    p(format!(
                        "object {ino}'s name {:?} in {} is not in the directory index",
                        String::from_utf8_lossy(&n.name),
                        n.parent
                    ));
                }
            }
            if o.kind == Kind::Dir {
                let subdirs = self
                    .dirs
                    .get(&ino)
                    .and_then(|x| x.index.as_ref())
                    .into_iter()
                    .flatten()
                    .filter(|(_, c)| self.objects.get(c).is_some_and(|x| x.kind == Kind::Dir))
                    .count() as u32;
                if subdirs != o.subdirs {
                    p(format!(
                        "directory {ino}: {subdirs} subdirectories, nlink counts {}",
                        o.subdirs
                    ));
                }
            }
        }
        if links != self.links {
            p(format!(
                "hard link counts differ: the links say {links:?}, RAM {:?}",
                self.links
            ));
        }
        for (owner, set) in &self.xattr_sets {
            if self.objects.get(set).is_none_or(|o| o.kind != Kind::Xattrs) {
                p(format!(
                    "object {owner}: its attribute set {set} is missing"
                ));
            }
        }
        for (ino, kept, actual) in self
            .reserves
            .miscounted(|ino| self.objects.get(&ino).map(|o| &o.chunks))
        {
            p(format!(
                "file {ino}: its reservation counts {kept} unwritten chunks, its map {actual}"
            ));
        }
        for ino in self.reserves.inos() {
            if self.objects.get(&ino).is_none_or(|o| o.kind != Kind::File) {
                p(format!(
                    "a reservation is held for {ino}, which is not a file"
                ));
            }
        }
    }
}
