//! Lazy loading (YAFFS2 does the same): a mount learns each object's type, parent, size and
//! data from tags, summaries or the checkpoint, without reading headers. The rest of an
//! object (permissions, owner, times, names, symlink target, extended attributes) is read
//! from its header page the first time a call needs it, and a directory's names the first
//! time it is looked into.

use std::collections::BTreeMap;

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::Name;
use crate::format::Record;
use crate::fs::FileSystem;
use crate::object::Details;
use crate::types::{Ino, Kind};

impl<F: Flash> FileSystem<F> {
    /// Makes sure an object's details are in RAM, reading its header if they are not.
    /// A header that cannot be read (damage) gives way to the newest older header of the
    /// object still on flash; with none, the object gets fresh details and the name
    /// `lost+found-INO` in its directory, so it and what is below it stay reachable. Either
    /// way its header is rewritten by the next repair.
    pub(crate) fn load(&mut self, ino: Ino) -> Result<()> {
        let o = self.obj(ino)?;
        if o.details.is_some() {
            return Ok(());
        }
        let kind = o.kind;
        let current = o.header_page();
        if let Some(pno) = current {
            if let Ok(rec) = self.read_record(pno, ino) {
                if rec.kind == kind {
                    self.stats.details_loaded += 1;
                    let d = self.details_from_record(ino, rec);
                    self.obj_mut(ino)?.details = Some(Box::new(d));
                    return Ok(());
                }
            }
        }
        self.check_alive()?;
        if let Some(pno) = current {
            // The header a mount found for it fails its checks: damage (no cut tears a
            // header a scan or a checkpoint took as current), which fsck reports.
            if !self.unexplained_pages.contains(&pno) {
                self.unexplained_pages.push(pno);
            }
        }
        let older = self.older_header(ino, current)?;
        let parent = match self.obj(ino)?.parent {
            0 => crate::types::ROOT_INO,
            p => p,
        };
        let lost_name = vec![Name {
            parent,
            name: format!("lost+found-{ino}").into_bytes().into(),
        }];
        let mut d = match older {
            Some(rec) => self.details_from_record(ino, rec),
            None => {
                let now = self.now();
                let perm = if kind == Kind::Dir { 0o700 } else { 0o600 };
                Details::from_record(Record::bare(kind, perm, now))
            }
        };
        // The directories know the object by its parent only: an older header's names
        // elsewhere (it was moved since) would not be found there.
        if ino == crate::types::ROOT_INO {
            d.names.clear();
        } else if d.names.is_empty() || d.names.iter().any(|n| n.parent != parent) {
            d.names = lost_name;
        }
        let o = self.obj_mut(ino)?;
        if kind == Kind::Symlink && o.chunks.end() == 0 {
            // The target was in the lost header: what is left says how long it is.
            o.size = d.target.len() as u64;
        }
        o.parent = d.names.first().map_or(0, |n| n.parent);
        o.details = Some(Box::new(d));
        o.set_dirty(true);
        self.repairs.push(ino);
        Ok(())
    }

    /// The newest readable header of `ino` other than `skip`, from the blocks that hold
    /// headers of it (their summaries, or their pages' tags).
    fn older_header(&mut self, ino: Ino, skip: Option<u32>) -> Result<Option<Record>> {
        let kind = self.obj(ino)?.kind;
        let blocks = self.blocks.blocks_with_headers_of(ino);
        let mut best: Option<Record> = None;
        for b in blocks {
            for pno in self.header_pages_in(b, ino)? {
                if Some(pno) == skip {
                    continue;
                }
                if let Ok(rec) = self.read_record(pno, ino) {
                    if rec.kind == kind && best.as_ref().is_none_or(|x| x.version < rec.version) {
                        best = Some(rec);
                    }
                }
            }
        }
        Ok(best)
    }

    /// Pages of block `b` that hold headers of `ino`.
    fn header_pages_in(&mut self, b: u32, ino: Ino) -> Result<Vec<u32>> {
        use crate::format::summary::SummaryEntry;
        use crate::format::tags::{TagRead, Tags};
        let blk = self.blocks.get(b);
        let ppb = self.layout.pages_per_block;
        if blk.overhead() > 0 && blk.next_page() > 0 {
            let summary = self.summary_chain(b, blk.next_page() - 1, None)?;
            if let Some((s, _)) = summary {
                return Ok(s
                    .entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| matches!(e, SummaryEntry::Header { obj, .. } if *obj == ino))
                    .map(|(i, _)| self.layout.pno(b, i as u32))
                    .collect());
            }
        }
        let mut out = Vec::new();
        for page in 0..blk.next_page().min(ppb) {
            let pno = self.layout.pno(b, page);
            if let TagRead::Valid(Tags::Header(h)) = self.read_tags(pno)? {
                if h.obj == ino {
                    out.push(pno);
                }
            }
        }
        Ok(out)
    }

    /// Details from an object's newest header record. Besides the floors it carries, the
    /// header is itself a floor for its own size (see `floors`).
    pub(crate) fn details_from_record(&self, ino: Ino, rec: Record) -> Details {
        let floors = self.floors_after_header(ino, &rec.floors, rec.size, rec.version);
        let mut d = Details::from_record(rec);
        d.floors = floors;
        d
    }

    /// Reads and decodes the header record at `pno`, which must belong to `ino`.
    pub(crate) fn read_record(&mut self, pno: u32, ino: Ino) -> Result<Record> {
        let data = self.read_expected_header(pno, ino)?;
        Record::decode(&data)
            .ok_or_else(|| FsError::Io(format!("object {ino}: header at page {pno} is damaged")))
    }

    /// A directory whose index is needed: checks it is one and loads its names.
    pub(crate) fn dir_loaded(&mut self, dir: Ino) -> Result<&BTreeMap<Box<[u8]>, Ino>> {
        if self.obj(dir)?.kind != Kind::Dir {
            return Err(FsError::NotDir);
        }
        self.load_dir(dir)?;
        self.dirs
            .get(&dir)
            .and_then(|d| d.index.as_ref())
            .ok_or(FsError::NotDir)
    }

    /// Loads the names of a directory's children into its index. A child whose header
    /// cannot be read stays out of the index (fsck reports it); two children claiming one
    /// name (only after damage) are settled by header version, the older one losing it.
    pub(crate) fn load_dir(&mut self, dir: Ino) -> Result<()> {
        self.expand(dir)?;
        let Some(d) = self.dirs.get_mut(&dir) else {
            return Err(FsError::NotDir);
        };
        if d.index.is_some() {
            return Ok(());
        }
        let mut children = std::mem::take(&mut d.unnamed);
        children.sort_unstable();
        children.dedup();
        let mut index: BTreeMap<Box<[u8]>, crate::types::Ino> = BTreeMap::new();
        let mut unreadable = Vec::new();
        for child in children {
            if !self.objects.contains_key(&child) {
                continue;
            }
            if self.load(child).is_err() {
                unreadable.push(child);
                continue;
            }
            let names: Vec<Box<[u8]>> = self.objects[&child]
                .d()
                .names
                .iter()
                .filter(|n| n.parent == dir)
                .map(|n| n.name.clone())
                .collect();
            for name in names {
                match index.get(&name).copied() {
                    None => {
                        index.insert(name, child);
                    }
                    Some(other) => {
                        let (keep, lose) = if self.objects[&other].d().version
                            >= self.objects[&child].d().version
                        {
                            (other, child)
                        } else {
                            (child, other)
                        };
                        index.insert(name.clone(), keep);
                        self.drop_name_in_ram(lose, dir, &name);
                    }
                }
            }
        }
        let d = self.dirs.get_mut(&dir).expect("checked above");
        d.index = Some(index);
        d.unnamed = unreadable;
        if !self.repairs.is_empty() && !self.read_only && !self.is_dead() {
            self.apply_repairs()?;
        }
        Ok(())
    }

    /// Recovery found an object without a name it claims (another claim was newer): the
    /// name goes in RAM, and the header is rewritten by the next repair. An object left
    /// with no name is deleted by the repair.
    pub(crate) fn drop_name_in_ram(&mut self, ino: Ino, parent: Ino, name: &[u8]) {
        let Some(o) = self.objects.get_mut(&ino) else {
            return;
        };
        let is_dir = o.kind == Kind::Dir;
        if let Some(d) = o.details.as_deref_mut() {
            d.names
                .retain(|n| !(n.parent == parent && &*n.name == name));
            o.parent = d.names.first().map_or(0, |n| n.parent);
        }
        o.set_dirty(true);
        if is_dir {
            if let Some(p) = self.objects.get_mut(&parent) {
                p.subdirs = p.subdirs.saturating_sub(1);
            }
        }
        self.repairs.push(ino);
    }
}
