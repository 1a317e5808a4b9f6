//! Mount by scan: read the tags of every page, take the newest version of everything (by
//! write serial), and rebuild the object table, directory index, chunk maps and block
//! table. A clean unmount's checkpoint short-cuts this (see `checkpoint`).
//!
//! Recovery rules (see docs/format.md):
//! - a page whose tags fail their CRC is garbage; the last programmed page of every block
//!   also has its data CRC checked, since only a write in flight when power failed can be
//!   torn, and the file system never appends to a block it found partly written;
//! - an object is described by its newest readable header; a header's `name_updates`
//!   also name other objects whose own headers are older;
//! - when two objects claim one name, the newer claim wins; an object left without names
//!   (and not the root) is deleted;
//! - a data chunk counts if it is newer than the object's header or lies within the size
//!   that header records; the newest copy of each chunk wins.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use nandkit_flash::{Flash, FlashError};

use crate::blocks::BlockState;
use crate::config::FsConfig;
use crate::error::{FsError, Result};
use crate::format::{Name, PageKind, Record, RecordKind, TagRead, Tags};
use crate::fs::{FileSystem, MountOptions};
use crate::layout::{Layout, TagPlace};
use crate::object::Object;
use crate::types::{Ino, Kind, ROOT_INO, SUPER_INO};

/// (parent directory, name).
type NameKey = (Ino, Box<[u8]>);

/// A page whose tags decoded.
#[derive(Clone, Copy)]
struct Seen {
    pno: u32,
    tags: Tags,
}

impl<F: Flash> FileSystem<F> {
    /// Rebuilds the in-RAM state through the metadata store (the flash log: checkpoint if
    /// possible, else a full scan). The store kind is recorded in the file system record,
    /// which the flash log holds; the flash log is therefore asked first.
    pub(crate) fn recover(dev: F, options: &MountOptions) -> Result<Self> {
        let blocks = Layout::new(dev.geometry()).blocks;
        let placeholder = FsConfig::profile("yaffs", blocks)?;
        let mut fs = Self::empty(dev, placeholder, Arc::clone(&options.clock));
        fs.read_only = options.read_only;
        let mut store = crate::meta::make::<F>(crate::meta::MetadataKind::FlashLog);
        fs.mount_method = store.recover(&mut fs, options)?;
        fs.metadata = Some(store);
        Ok(fs)
    }

    /// Forgets all RAM state (but the device, clock and mode), as before a first mount.
    pub(crate) fn reset_state(&mut self) {
        let blocks = self.layout.blocks;
        let config = FsConfig::profile("yaffs", blocks).expect("the baseline profile exists");
        self.set_config(config);
        self.blocks = crate::blocks::BlockTable::new(blocks, self.layout.pages_per_block);
        self.objects.clear();
        self.dirs.clear();
        self.tombstones.clear();
        self.headers_on_flash.clear();
        self.super_page = None;
        self.next_serial = 1;
        self.next_seq = 1;
        self.next_ino = ROOT_INO + 1;
        self.alloc_cursor = 0;
        self.checkpoint_blocks.clear();
        self.repairs.clear();
        self.header_serials.clear();
    }

    /// Reads the tags of one page. Unreadable tags count as garbage.
    fn scan_tags(&mut self, pno: u32) -> Result<TagRead> {
        let g = self.layout.geometry;
        let addr = self.layout.page_addr(pno);
        let mut oob = vec![0u8; g.oob_size_bytes as usize];
        let res = match self.layout.tags {
            TagPlace::Oob => self.dev.read_oob(addr, &mut oob).map(|_| ()),
            TagPlace::InBand => {
                let mut page = vec![0u8; g.page_size_bytes as usize];
                let r = self.dev.read_page(addr, &mut page, &mut oob).map(|_| ());
                oob = page;
                r
            }
        };
        match res {
            Ok(()) => {}
            Err(FlashError::Uncorrectable { .. }) => return Ok(TagRead::Garbage),
            Err(e) => return Err(FsError::Flash(e)),
        }
        Ok(Tags::decode(match self.layout.tags {
            TagPlace::Oob => &oob[crate::layout::OOB_TAG_OFFSET.min(oob.len())..],
            TagPlace::InBand => &oob[oob.len() - crate::format::TAG_BYTES..],
        }))
    }

    pub(crate) fn scan(&mut self) -> Result<()> {
        let ppb = self.layout.pages_per_block;
        let mut seen: Vec<Seen> = Vec::new();
        let (mut max_serial, mut max_seq, mut max_ino) = (0u64, 0u32, ROOT_INO);
        for b in 0..self.layout.blocks {
            if self.dev.is_bad(self.layout.block_addr(b))? {
                self.blocks.set_state(b, BlockState::Bad);
                continue;
            }
            let first_seen = seen.len();
            let mut used = 0;
            let mut holds_checkpoint = false;
            let mut last_valid = None;
            for page in 0..ppb {
                let pno = self.layout.pno(b, page);
                match self.scan_tags(pno)? {
                    TagRead::Erased => break,
                    TagRead::Garbage => last_valid = None,
                    TagRead::Valid(tags) => {
                        max_serial = max_serial.max(tags.serial);
                        max_seq = max_seq.max(tags.block_seq);
                        if tags.kind != PageKind::Checkpoint {
                            max_ino = max_ino.max(tags.obj);
                            last_valid = Some(seen.len());
                            seen.push(Seen { pno, tags });
                        } else {
                            holds_checkpoint = true;
                            last_valid = None;
                        }
                    }
                }
                used = page + 1;
            }
            // Only the last page written can be torn: check its data too.
            if let Some(i) = last_valid {
                if seen[i].tags.kind != PageKind::Checkpoint && !self.data_intact(seen[i])? {
                    seen.truncate(i);
                }
            }
            let blk = &mut self.blocks.blocks[b as usize];
            blk.next_page = used;
            blk.seq = seen[first_seen..]
                .iter()
                .map(|s| s.tags.block_seq)
                .max()
                .unwrap_or(0);
            if holds_checkpoint {
                // A checkpoint this scan does not use: erased before the first write, or
                // a later mount could take it for current.
                self.blocks.set_state(b, BlockState::Checkpoint);
                self.checkpoint_blocks.push(b);
            } else if used > 0 {
                // Never append to a block found partly written: its next page may be torn.
                self.blocks.set_state(b, BlockState::Full);
            }
        }
        self.next_serial = max_serial + 1;
        self.next_seq = max_seq + 1;
        self.next_ino = max_ino + 1;
        self.rebuild(seen)
    }

    fn data_intact(&mut self, s: Seen) -> Result<bool> {
        Ok(self
            .read_raw(s.pno)?
            .is_some_and(|r| !r.damaged && r.tags == s.tags))
    }

    /// Builds objects, names, chunk maps and page validity from what the scan found.
    fn rebuild(&mut self, seen: Vec<Seen>) -> Result<()> {
        // Header pages, newest first per object; all of them count toward tombstones.
        let mut headers: HashMap<Ino, Vec<Seen>> = HashMap::new();
        let mut data: Vec<Seen> = Vec::new();
        for s in seen {
            match s.tags.kind {
                PageKind::Header => {
                    *self.headers_on_flash.entry(s.tags.obj).or_insert(0) += 1;
                    self.blocks.header_objs[self.layout.block_of(s.pno) as usize].push(s.tags.obj);
                    headers.entry(s.tags.obj).or_default().push(s);
                }
                PageKind::Data => data.push(s),
                PageKind::Checkpoint => {}
            }
        }
        // The newest readable header of each object.
        let mut newest: HashMap<Ino, (Seen, Record)> = HashMap::new();
        let mut inos: Vec<Ino> = headers.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let list = headers.get_mut(&ino).expect("listed");
            list.sort_by_key(|s| std::cmp::Reverse(s.tags.serial));
            for s in list.clone() {
                let rec = self
                    .read_raw(s.pno)?
                    .filter(|r| !r.damaged)
                    .and_then(|r| Record::decode(&r.data));
                if let Some(rec) = rec {
                    newest.insert(ino, (s, rec));
                    break;
                }
            }
        }
        // The file system record.
        let (super_seen, super_rec) = newest.remove(&SUPER_INO).ok_or_else(|| {
            FsError::NotFormatted("no file system record found (run mkfs)".into())
        })?;
        if super_rec.kind != RecordKind::Super {
            return Err(FsError::NotFormatted(
                "object 0 is not a file system record".into(),
            ));
        }
        let config: FsConfig = serde_json::from_slice(&super_rec.target)
            .map_err(|e| FsError::NotFormatted(format!("file system record unreadable: {e}")))?;
        self.set_config(config);
        self.super_page = Some(super_seen.pno);
        self.blocks.set_valid(super_seen.pno);

        // Names: own claims, then name updates carried by newer headers of others.
        let mut names: HashMap<Ino, (Vec<Name>, u64)> = HashMap::new();
        for (&ino, (s, rec)) in &newest {
            names.insert(ino, (rec.names.clone(), s.tags.serial));
        }
        let mut updates: Vec<(u64, Ino, Vec<Name>)> = Vec::new();
        for (s, rec) in newest.values() {
            for (target, n) in &rec.name_updates {
                updates.push((s.tags.serial, *target, n.clone()));
            }
        }
        updates.sort_by_key(|u| u.0);
        for (serial, target, n) in updates {
            if let Some(entry) = names.get_mut(&target) {
                if entry.1 < serial {
                    *entry = (n, serial);
                    self.repairs.push(target);
                }
            }
        }
        // One owner per (parent, name): the newest claim.
        let mut owner: HashMap<NameKey, (Ino, u64)> = HashMap::new();
        let mut order: Vec<Ino> = names.keys().copied().collect();
        order.sort_unstable();
        for &ino in &order {
            let (list, serial) = &names[&ino];
            for n in list {
                let key = (n.parent, n.name.clone());
                match owner.get(&key) {
                    Some(&(_, s)) if s > *serial => {}
                    _ => {
                        owner.insert(key, (ino, *serial));
                    }
                }
            }
        }
        for &ino in &order {
            let entry = names.get_mut(&ino).expect("listed");
            let before = entry.0.len();
            entry
                .0
                .retain(|n| owner.get(&(n.parent, n.name.clone())).map(|o| o.0) == Some(ino));
            if entry.0.len() != before {
                self.repairs.push(ino);
            }
        }

        // Objects: every object whose newest header had a name, plus the root.
        for (ino, (s, mut rec)) in newest {
            let Some((n, _)) = names.remove(&ino) else {
                continue;
            };
            let had_names = !rec.names.is_empty();
            rec.names = n;
            rec.name_updates.clear();
            if !had_names && ino != ROOT_INO {
                // A tombstone (or an orphan unlinked while open): the object is gone.
                if self.headers_on_flash.get(&ino).copied().unwrap_or(0) > 1 {
                    self.tombstones.insert(ino, s.pno);
                    self.blocks.set_valid(s.pno);
                }
                continue;
            }
            if !matches!(rec.kind, RecordKind::Object(_)) {
                continue;
            }
            let mut o = Object::new(rec, self.config.mapping);
            o.header = Some(s.pno);
            self.blocks.set_valid(s.pno);
            if o.kind() == Kind::Dir {
                self.dirs.insert(ino, BTreeMap::new());
            }
            self.objects.insert(ino, o);
            // Remember the header serial for the data pass.
            self.header_serials.insert(ino, s.tags.serial);
        }
        if !self.objects.contains_key(&ROOT_INO) || self.objects[&ROOT_INO].kind() != Kind::Dir {
            // The root's header is unreadable: give it a fresh one.
            let now = self.now();
            let root = Record::bare(RecordKind::Object(Kind::Dir), 0o755, now);
            if let Some(old) = self
                .objects
                .insert(ROOT_INO, Object::new(root, self.config.mapping))
                .and_then(|o| o.header)
            {
                self.blocks.invalidate(old);
            }
            self.dirs.insert(ROOT_INO, BTreeMap::new());
            self.objects.get_mut(&ROOT_INO).expect("root").header_dirty = true;
            self.repairs.push(ROOT_INO);
        }
        self.objects
            .get_mut(&ROOT_INO)
            .expect("root")
            .meta
            .names
            .clear();
        self.link_tree();
        self.rebuild_data(data);
        self.header_serials.clear();
        Ok(())
    }

    /// Fills the directory index from the objects' names, dropping names whose parent is
    /// not a directory reachable from the root; objects left with no name are deleted.
    fn link_tree(&mut self) {
        let mut inos: Vec<Ino> = self
            .objects
            .keys()
            .copied()
            .filter(|&i| i != ROOT_INO)
            .collect();
        inos.sort_unstable();
        let mut reachable: HashSet<Ino> = HashSet::from([ROOT_INO]);
        // Breadth-first from the root over names: a name counts only under a reachable
        // directory, so cycles and orphaned subtrees fall away.
        let mut children: HashMap<Ino, Vec<(Ino, Name)>> = HashMap::new();
        for &ino in &inos {
            for n in &self.objects[&ino].meta.names {
                children.entry(n.parent).or_default().push((ino, n.clone()));
            }
        }
        let mut queue = vec![ROOT_INO];
        let mut kept: HashMap<Ino, Vec<Name>> = HashMap::new();
        while let Some(dir) = queue.pop() {
            if self.objects.get(&dir).is_none_or(|o| o.kind() != Kind::Dir) {
                continue;
            }
            for (ino, n) in children.remove(&dir).unwrap_or_default() {
                let is_dir = self.objects[&ino].kind() == Kind::Dir;
                // A directory has exactly one name.
                if is_dir && kept.get(&ino).is_some_and(|k| !k.is_empty()) {
                    continue;
                }
                kept.entry(ino).or_default().push(n);
                if reachable.insert(ino) && is_dir {
                    queue.push(ino);
                }
            }
        }
        for ino in inos {
            let new_names = kept.remove(&ino).unwrap_or_default();
            let o = self.objects.get_mut(&ino).expect("listed");
            if new_names.len() != o.meta.names.len() {
                self.repairs.push(ino);
            }
            o.meta.names.clear();
            for n in new_names {
                self.add_name(ino, n.parent, &n.name);
            }
        }
    }

    /// Chunk maps: the newest copy of each chunk that the object's header does not rule
    /// out; sizes grow to cover chunks written after the header.
    fn rebuild_data(&mut self, data: Vec<Seen>) {
        let c = u64::from(self.layout.chunk_bytes);
        let mut best: HashMap<(Ino, u32), Seen> = HashMap::new();
        for s in data {
            let Some(o) = self.objects.get_mut(&s.tags.obj) else {
                continue;
            };
            if o.kind() != Kind::File || s.tags.n_bytes as u64 > c {
                continue;
            }
            o.saw_chunk(s.tags.chunk);
            let header_serial = self.header_serials.get(&s.tags.obj).copied().unwrap_or(0);
            let newer = s.tags.serial > header_serial;
            if !newer && u64::from(s.tags.chunk) * c >= o.meta.size {
                continue;
            }
            let key = (s.tags.obj, s.tags.chunk);
            if best.get(&key).is_none_or(|b| b.tags.serial < s.tags.serial) {
                best.insert(key, s);
            }
        }
        let mut chosen: Vec<Seen> = best.into_values().collect();
        chosen.sort_by_key(|s| s.pno);
        for s in chosen {
            let header_serial = self.header_serials.get(&s.tags.obj).copied().unwrap_or(0);
            let o = self.objects.get_mut(&s.tags.obj).expect("checked above");
            if s.tags.serial > header_serial {
                let end = u64::from(s.tags.chunk) * c + u64::from(s.tags.n_bytes);
                if end > o.meta.size {
                    o.meta.size = end;
                    o.header_dirty = true;
                }
            }
            o.set_chunk(s.tags.chunk, s.pno);
            self.blocks.set_valid(s.pno);
        }
    }

    pub(crate) fn set_config(&mut self, config: FsConfig) {
        self.allocator = crate::alloc::make(config.allocator);
        self.cleaner = crate::clean::make(&config);
        self.streams = vec![None; self.allocator.streams()];
        self.config = config;
    }

    /// Writes what recovery decided: fresh headers for objects whose names changed, and
    /// tombstones for objects that lost every name.
    pub(crate) fn apply_repairs(&mut self) -> Result<()> {
        let mut todo = std::mem::take(&mut self.repairs);
        todo.sort_unstable();
        todo.dedup();
        for ino in todo {
            let Some(o) = self.objects.get(&ino) else {
                continue;
            };
            let meta = o.meta.clone();
            let orphan = meta.names.is_empty() && ino != ROOT_INO;
            self.persist(ino, meta, Vec::new())?;
            if orphan {
                self.delete_object(ino);
            }
        }
        // Objects left unnamed by recovery without a repair entry (none expected).
        let unnamed: Vec<Ino> = self
            .objects
            .iter()
            .filter(|(&i, o)| i != ROOT_INO && o.meta.names.is_empty() && o.open == 0)
            .map(|(&i, _)| i)
            .collect();
        for ino in unnamed {
            let meta = self.objects[&ino].meta.clone();
            self.persist(ino, meta, Vec::new())?;
            self.delete_object(ino);
        }
        Ok(())
    }
}
