//! From what a scan found to the mounted state: objects, directory children, chunk maps,
//! page validity, counters. The recovery rules (docs/format.md):
//!
//! - an object is described by its newest header (highest version); a header with no
//!   names (for anything but the root) is a tombstone: the object is deleted;
//! - a header's name updates give other objects names as of its version, if their own
//!   newest header is older (a rename over a name, an exchange);
//! - a name counts only under a directory reachable from the root; an object left with no
//!   name is deleted (a writable mount writes its tombstone);
//! - a data chunk counts if its serial is newer than its object's header, or it lies
//!   within the size that header records and no truncation floor of the header rules it
//!   out; the newest copy of each chunk wins; a file grows to cover chunks newer than its
//!   header.
//!
//! Then a writable mount repairs what recovery decided: it seals blocks left without a
//! summary, cleans full ones that have none, and rewrites headers whose names changed.

use std::collections::{BTreeMap, HashMap, HashSet};

use nandkit_flash::Flash;

use crate::blocks::{BlockState, NO_SUMMARY};
use crate::error::Result;
use crate::format::record::{Floor, Name, Record};
use crate::format::summary::Summary;
use crate::format::tags::HeaderFacts;
use crate::fs::{FileSystem, Tomb};
use crate::object::{Details, Object, NO_PAGE};
use crate::scan::{Found, Seen};
use crate::types::{Ino, Kind, ROOT_INO};

/// Kinds whose objects have data chunks: files, and symlinks and attribute sets whose
/// payload did not fit their header (see `payload`).
pub(crate) fn has_data(kind: Kind) -> bool {
    matches!(kind, Kind::File | Kind::Symlink | Kind::Xattrs)
}

/// One header page the scan found.
#[derive(Clone)]
struct Hdr {
    pno: u32,
    version: u64,
    facts: HeaderFacts,
    record: Option<Box<Record>>,
}

/// One data page the scan found.
#[derive(Clone, Copy)]
struct Chunk {
    pno: u32,
    obj: Ino,
    chunk: u32,
    n_bytes: u32,
    serial: u64,
}

impl<F: Flash> FileSystem<F> {
    pub(crate) fn rebuild(&mut self, seen: Vec<Seen>) -> Result<()> {
        let mut headers: HashMap<Ino, Vec<Hdr>> = HashMap::new();
        let mut counts: HashMap<Ino, u32> = HashMap::new();
        let mut data_blocks: HashMap<Ino, u32> = HashMap::new();
        let tracks = self.tracks_data_owners();
        let mut chunks: Vec<Chunk> = Vec::new();
        let (mut max_serial, mut max_ino) = (0u64, ROOT_INO);
        for s in seen {
            match s.what {
                Found::Header {
                    obj,
                    version,
                    facts,
                    record,
                } => {
                    max_serial = max_serial.max(version);
                    max_ino = max_ino.max(obj);
                    if s.pno != NO_PAGE {
                        // (Headers kept in NVRAM have no page.)
                        *counts.entry(obj).or_insert(0) += 1;
                        self.blocks.add_header(self.layout.block_of(s.pno), obj);
                    }
                    headers.entry(obj).or_default().push(Hdr {
                        pno: s.pno,
                        version,
                        facts,
                        record,
                    });
                }
                Found::Data {
                    obj,
                    chunk,
                    n_bytes,
                    serial,
                } => {
                    let serial = serial.full().unwrap_or(0);
                    max_serial = max_serial.max(serial);
                    max_ino = max_ino.max(obj);
                    if tracks
                        && s.pno != NO_PAGE
                        && self.blocks.data.add(self.layout.block_of(s.pno), obj)
                    {
                        *data_blocks.entry(obj).or_insert(0) += 1;
                    }
                    chunks.push(Chunk {
                        pno: s.pno,
                        obj,
                        chunk,
                        n_bytes,
                        serial,
                    });
                }
            }
        }
        self.next_serial = max_serial + 1;
        self.next_ino = max_ino + 1;

        // The newest header of each object.
        let mut newest: BTreeMap<Ino, Hdr> = BTreeMap::new();
        for (ino, list) in headers {
            let h = list
                .into_iter()
                .max_by_key(|h| (h.version, h.pno))
                .expect("a list has a header");
            newest.insert(ino, h);
        }

        // Name updates carried by newer headers of other objects.
        let mut updates: Vec<(u64, Ino, Vec<Name>)> = Vec::new();
        for h in newest.values() {
            if let Some(r) = &h.record {
                for (target, names) in &r.name_updates {
                    updates.push((h.version, *target, names.clone()));
                }
            }
        }
        updates.sort_by_key(|u| u.0);
        let mut renamed: HashMap<Ino, (u64, Vec<Name>)> = HashMap::new();
        for (version, target, names) in updates {
            if newest.get(&target).is_some_and(|t| t.version < version) {
                renamed.insert(target, (version, names));
            }
        }

        // Targets of name updates get their own record read: their details change.
        let mut targets: Vec<Ino> = renamed.keys().copied().collect();
        targets.sort_unstable();
        for &ino in &targets {
            let h = newest.get(&ino).expect("targets have headers");
            if h.record.is_none() {
                let rec = self.read_record(h.pno, ino).ok().map(Box::new);
                newest.get_mut(&ino).expect("listed").record = rec;
            }
        }

        // Files some hard link names (their own header may have no name left).
        let linked: HashSet<Ino> = newest
            .values()
            .filter(|h| h.facts.kind == Some(Kind::HardLink))
            .filter_map(|h| Ino::try_from(h.facts.size).ok())
            .collect();
        for &ino in &linked {
            let Some(h) = newest.get(&ino) else { continue };
            if h.facts.kind.is_none() && h.record.is_none() {
                let rec = self.read_record(h.pno, ino).ok().map(Box::new);
                newest.get_mut(&ino).expect("listed").record = rec;
            }
        }

        // Headers on flash (not the NVRAM's: those have no page) name at most this number.
        self.newest_header_ino = newest
            .iter()
            .filter(|(_, h)| h.pno != NO_PAGE)
            .map(|(&ino, _)| ino)
            .max()
            .unwrap_or(ROOT_INO);
        // Objects: alive if their newest header has names (or is the root's), or a hard
        // link may name them (`link_tree` settles which are).
        for (ino, h) in &newest {
            let ino = *ino;
            let alive = h.facts.kind.is_some()
                || renamed.get(&ino).is_some_and(|r| !r.1.is_empty())
                || linked.contains(&ino);
            let headers_on_flash = counts.get(&ino).copied().unwrap_or(0);
            let data = data_blocks.get(&ino).copied().unwrap_or(0);
            if !alive {
                if self.tomb_needed(ino, headers_on_flash, data)
                    && ino != ROOT_INO
                    && h.pno != NO_PAGE
                {
                    self.tombstones.insert(
                        ino,
                        Tomb {
                            page: h.pno,
                            headers_on_flash,
                            data_blocks: data,
                        },
                    );
                    self.blocks.set_valid(h.pno);
                }
                continue;
            }
            let kind = match (h.facts.kind, &h.record) {
                (Some(k), _) => k,
                (None, Some(r)) => r.kind,
                (None, None) => continue,
            };
            let mut o = Object::new(kind, self.config.mapping, self.layout.map_shape());
            o.size = h.facts.size;
            o.header = h.pno;
            o.headers_on_flash = headers_on_flash;
            o.data_blocks = data;
            o.parent = h.facts.parent;
            if let Some(r) = &h.record {
                o.details = Some(Box::new(Details::from_record((**r).clone())));
                o.parent = r.names.first().map_or(0, |n| n.parent);
            }
            if h.pno != NO_PAGE {
                self.blocks.set_valid(h.pno);
            }
            self.objects.insert(ino, o);
            if let Some(r) = h.record.as_ref().map(|r| r.reserve.clone()) {
                // Counted once the chunks are in (`recount_reserves` at the end of mount).
                self.reserves.set(ino, r, None);
            }
        }
        // Names given by updates.
        for ino in targets {
            let (_, names) = renamed.remove(&ino).expect("listed");
            let Some(o) = self.objects.get_mut(&ino) else {
                continue;
            };
            let Some(d) = o.details.as_deref_mut() else {
                continue;
            };
            d.names = names;
            o.parent = d.names.first().map_or(0, |n| n.parent);
            o.set_dirty(true);
            self.repairs.push(ino);
        }
        if tracks {
            let mut headerless: Vec<(Ino, u32)> = data_blocks
                .iter()
                .filter(|(i, _)| !newest.contains_key(i))
                .map(|(&i, &n)| (i, n))
                .collect();
            headerless.sort_unstable();
            self.adopt_headerless(headerless);
        }
        self.ensure_root();
        self.adopt_disconnected();
        self.link_tree();
        let versions: HashMap<Ino, u64> = newest.iter().map(|(&i, h)| (i, h.version)).collect();
        self.attach_xattr_sets(&versions);
        let floors: HashMap<Ino, (u64, Vec<Floor>)> = newest
            .iter()
            .filter(|(i, _)| self.objects.contains_key(i))
            .map(|(&i, h)| {
                let f = h
                    .record
                    .as_ref()
                    .map(|r| r.floors.clone())
                    .unwrap_or_default();
                (i, (h.version, f))
            })
            .collect();
        self.rebuild_data(chunks, &floors);
        // Now that chunk maps are known, the floors of the records read can be judged.
        for (ino, h) in newest {
            let Some(r) = h.record else { continue };
            let floors = self.floors_after_header(ino, &r.floors, r.size, r.version);
            if let Some(d) = self
                .objects
                .get_mut(&ino)
                .and_then(|o| o.details.as_deref_mut())
            {
                d.floors = floors;
            }
        }
        Ok(())
    }

    /// The root must be a directory with a header; an unreadable one is replaced.
    fn ensure_root(&mut self) {
        if self
            .objects
            .get(&ROOT_INO)
            .is_some_and(|o| o.kind == Kind::Dir)
        {
            let o = self.objects.get_mut(&ROOT_INO).expect("checked");
            o.parent = 0;
            if let Some(d) = o.details.as_deref_mut() {
                d.names.clear();
            }
            return;
        }
        let now = self.now();
        let mut root = Object::new(Kind::Dir, self.config.mapping, self.layout.map_shape());
        root.details = Some(Box::new(Details::from_record(Record::bare(
            Kind::Dir,
            0o755,
            now,
        ))));
        root.set_dirty(true);
        if let Some(old) = self.objects.insert(ROOT_INO, root) {
            if old.header != NO_PAGE {
                self.blocks.invalidate(old.header);
            }
        }
        self.repairs.push(ROOT_INO);
    }

    /// Every name each object claims: its record's names when loaded, else the parent
    /// its facts say (names themselves are loaded later).
    pub(crate) fn parents_claimed(&self, ino: Ino) -> Vec<Ino> {
        let o = &self.objects[&ino];
        match &o.details {
            Some(d) => d.names.iter().map(|n| n.parent).collect(),
            None if o.parent != 0 => vec![o.parent],
            None => Vec::new(),
        }
    }

    /// Fills the directories' child lists from the objects' parents, keeping only names
    /// under directories reachable from the root (so cycles and orphaned subtrees fall
    /// away); an object left with no name is deleted by the repairs.
    fn link_tree(&mut self) {
        // Attribute sets belong to objects, not directories (see `attach_xattr_sets`).
        let mut inos: Vec<Ino> = self
            .objects
            .iter()
            .filter(|(&i, o)| i != ROOT_INO && o.kind != Kind::Xattrs)
            .map(|(&i, _)| i)
            .collect();
        inos.sort_unstable();
        let mut children: HashMap<Ino, Vec<Ino>> = HashMap::new();
        for &ino in &inos {
            for p in self.parents_claimed(ino) {
                children.entry(p).or_default().push(ino);
            }
        }
        let mut kept: HashMap<Ino, Vec<Ino>> = HashMap::new(); // object -> parents kept
        let mut reachable: HashSet<Ino> = HashSet::from([ROOT_INO]);
        let mut queue = vec![ROOT_INO];
        let mut lists: HashMap<Ino, Vec<Ino>> = HashMap::new();
        while let Some(dir) = queue.pop() {
            if self.objects.get(&dir).is_none_or(|o| o.kind != Kind::Dir) {
                continue;
            }
            // An object with two names in one directory comes twice: both names count.
            let kids = children.remove(&dir).unwrap_or_default();
            for ino in kids {
                let is_dir = self.objects[&ino].kind == Kind::Dir;
                // A directory has exactly one name.
                if is_dir && kept.get(&ino).is_some_and(|k| !k.is_empty()) {
                    continue;
                }
                kept.entry(ino).or_default().push(dir);
                let list = lists.entry(dir).or_default();
                if list.last() != Some(&ino) {
                    list.push(ino);
                }
                if reachable.insert(ino) && is_dir {
                    queue.push(ino);
                }
            }
        }
        // Hard links count for the files they name, if those are files (or other
        // non-directories) that exist; a link to anything else is dropped. Every link
        // object in RAM counts, kept or not: one left without a name is deleted by the
        // repairs, which counts it off (and may leave its file an orphan).
        let mut links: HashMap<Ino, u32> = HashMap::new();
        for &ino in &inos {
            let o = &self.objects[&ino];
            if o.kind != Kind::HardLink {
                continue;
            }
            let target = Ino::try_from(o.size).unwrap_or(0);
            if self
                .objects
                .get(&target)
                .is_some_and(|t| t.kind.is_visible() && t.kind != Kind::Dir)
            {
                *links.entry(target).or_insert(0) += 1;
            } else {
                kept.remove(&ino);
            }
        }
        self.links = links;
        for ino in inos {
            let parents = kept.remove(&ino).unwrap_or_default();
            let claimed = self.parents_claimed(ino);
            let held = self.link_count(ino) > 0;
            if (parents.is_empty() && !held) || parents.len() != claimed.len() {
                // Some names were dropped: write the object's header again (or its
                // tombstone, if none is left).
                if self.load(ino).is_ok() {
                    let o = self.objects.get_mut(&ino).expect("listed");
                    let d = o.d_mut();
                    let mut left = parents.clone();
                    d.names.retain(|n| {
                        if let Some(i) = left.iter().position(|&p| p == n.parent) {
                            left.swap_remove(i);
                            true
                        } else {
                            false
                        }
                    });
                    o.parent = o.d().names.first().map_or(0, |n| n.parent);
                    o.set_dirty(true);
                } else {
                    self.objects.get_mut(&ino).expect("listed").parent =
                        parents.first().copied().unwrap_or(0);
                }
                self.repairs.push(ino);
            }
        }
        // Directory entries and subdirectory counts.
        self.install_dirs(lists);
    }

    /// Chunk maps: the newest copy of each chunk that the object's header does not rule
    /// out; sizes grow to cover chunks written after the header.
    fn rebuild_data(&mut self, chunks: Vec<Chunk>, headers: &HashMap<Ino, (u64, Vec<Floor>)>) {
        let c = u64::from(self.layout.chunk_bytes);
        let mut best: HashMap<(Ino, u32), Chunk> = HashMap::new();
        for ch in chunks {
            let Some(o) = self.objects.get_mut(&ch.obj) else {
                if !self.tombstones.contains_key(&ch.obj) {
                    *self.headerless_pages.entry(ch.obj).or_insert(0) += 1;
                }
                continue;
            };
            if !has_data(o.kind) || u64::from(ch.n_bytes) > c {
                continue;
            }
            o.saw_chunk(ch.chunk);
            let (version, floors) = headers
                .get(&ch.obj)
                .map_or((0, &[][..]), |(v, f)| (*v, f.as_slice()));
            let start = u64::from(ch.chunk) * c;
            let newer = ch.serial > version;
            if !newer && start >= o.size {
                continue;
            }
            if floors.iter().any(|f| {
                ch.serial < f.serial && start >= f.size.div_ceil(c) * c && ch.chunk < f.end_chunk
            }) {
                continue;
            }
            let key = (ch.obj, ch.chunk);
            if best.get(&key).is_none_or(|b| b.serial < ch.serial) {
                best.insert(key, ch);
            }
        }
        let mut chosen: Vec<Chunk> = best.into_values().collect();
        chosen.sort_by_key(|ch| (ch.obj, ch.chunk));
        for ch in chosen {
            let version = headers.get(&ch.obj).map_or(0, |h| h.0);
            let o = self.objects.get_mut(&ch.obj).expect("checked above");
            if ch.serial > version {
                let end = u64::from(ch.chunk) * c + u64::from(ch.n_bytes);
                if end > o.size {
                    o.size = end;
                    o.set_dirty(true);
                }
            }
            o.chunks.set(ch.chunk, ch.pno);
            self.blocks.set_valid(ch.pno);
        }
        // A file whose size grew needs its details loaded to have its header rewritten;
        // that happens at the next fsync or sync (and at unmount).
    }

    /// Writes what recovery decided: summaries for blocks left open, cleaning of full
    /// blocks without one, fresh headers for objects whose names changed, and tombstones
    /// for objects that lost every name.
    pub(crate) fn apply_repairs(&mut self) -> Result<()> {
        // YAFFS1: the stale pages the mount found unmarked get their deletion markers.
        self.mark_stale_pages()?;
        if self.metadata_on_flash() {
            self.repair_anchors()?;
        }
        self.seal_found_blocks()?;
        if self.block_placed() {
            // Data blocks of deleted files, and copies a cut left behind.
            self.erase_emptied_blocks()?;
        }
        // Deleting a hard link may leave its file an orphan, which joins the list.
        while !self.repairs.is_empty() {
            let mut todo = std::mem::take(&mut self.repairs);
            todo.sort_unstable();
            todo.dedup();
            for ino in todo {
                if !self.objects.contains_key(&ino) {
                    continue;
                }
                if self.load(ino).is_err() {
                    continue;
                }
                let orphan = ino != ROOT_INO
                    && self.obj(ino)?.d().names.is_empty()
                    && self.link_count(ino) == 0;
                if orphan {
                    self.delete_subtree(ino)?;
                } else {
                    let d = self.obj(ino)?.d().clone();
                    self.persist(ino, d, Vec::new())?;
                }
            }
        }
        // Written: what was moved to lost+found is where fsck expects it now.
        self.adopted.clear();
        self.restored.clear();
        Ok(())
    }

    /// Deletes an orphaned object (and, for a directory, everything under it): each gets
    /// its name-less header, the tombstone.
    fn delete_subtree(&mut self, ino: Ino) -> Result<()> {
        let mut stack = vec![ino];
        let mut order = Vec::new();
        while let Some(x) = stack.pop() {
            order.push(x);
            if let Some(d) = self.dirs.get(&x) {
                stack.extend(d.unnamed.iter().copied());
                if let Some(i) = &d.index {
                    stack.extend(i.values().copied());
                }
            }
        }
        for x in order.into_iter().rev() {
            if !self.objects.contains_key(&x) || self.load(x).is_err() {
                continue;
            }
            let o = self.obj(x)?;
            // An object unlinked while open already has its tombstone on flash.
            let buried = !o.is_dirty() && o.header_page().is_some() && o.d().names.is_empty();
            if !buried {
                let mut d = o.d().clone();
                d.names.clear();
                self.persist(x, d, Vec::new())?;
            }
            // A file a hard link still names lives on without a name of its own.
            if self.obj(x)?.open == 0 && self.link_count(x) == 0 {
                let target = self.target_of(x);
                self.delete_object(x);
                if target != x && self.objects.contains_key(&target) {
                    // The file a dropped hard link named may be left without names.
                    self.repairs.push(target);
                }
            }
        }
        Ok(())
    }

    /// Gives each object its attribute set: the `Kind::Xattrs` object naming it. A set
    /// whose owner is gone is dead (dropped with no write, see `xattr`); of two sets of one
    /// owner (a crash between a replacement's two writes) the newer wins and the other is
    /// buried by the repairs.
    fn attach_xattr_sets(&mut self, versions: &HashMap<Ino, u64>) {
        let mut sets: Vec<(Ino, Ino)> = self
            .objects
            .iter()
            .filter(|(_, o)| o.kind == Kind::Xattrs)
            .map(|(&i, o)| (i, o.parent))
            .collect();
        sets.sort_unstable();
        self.xattr_sets.clear();
        for (set, owner) in sets {
            let owner_ok = self
                .objects
                .get(&owner)
                .is_some_and(|o| o.kind.is_visible());
            if !owner_ok {
                let o = self.objects.remove(&set).expect("listed");
                self.drop_ownerless_set(set, o);
                continue;
            }
            let version = |i: &Ino| versions.get(i).copied().unwrap_or(0);
            let loser = match self.xattr_sets.get(&owner).copied() {
                None => None,
                Some(other) if version(&other) < version(&set) => Some(other),
                Some(_) => Some(set),
            };
            if loser != Some(set) {
                self.xattr_sets.insert(owner, set);
            }
            if let Some(l) = loser {
                if self.load(l).is_ok() {
                    let o = self.objects.get_mut(&l).expect("listed");
                    o.d_mut().names.clear();
                    o.parent = 0;
                    o.set_dirty(true);
                }
                self.repairs.push(l);
            }
        }
    }

    /// Blocks the scan found written but without a summary get one now, at their first
    /// free page (a full one cannot, and is cleaned instead).
    fn seal_found_blocks(&mut self) -> Result<()> {
        let ppb = self.layout.pages_per_block;
        if !self.to_seal.is_empty() {
            // The state changes: a checkpoint on flash no longer describes it.
            self.erase_stale_checkpoint()?;
        }
        for (b, entries) in std::mem::take(&mut self.to_seal) {
            let blk = self.blocks.get(b);
            if blk.state != BlockState::Full {
                continue;
            }
            if blk.next_page() >= ppb {
                self.blocks.update(b, |x| x.flags |= NO_SUMMARY);
                if self.blocks.is_candidate(b) {
                    self.clean_block(b)?;
                }
                continue;
            }
            let summary = Summary {
                base_serial: blk.base_serial,
                entries,
            };
            self.write_summary(b, &summary)?;
        }
        Ok(())
    }
}
