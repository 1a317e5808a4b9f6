//! Checkpoints: at clean unmount the RAM state is written to erased blocks (taken from the
//! blocks the space accounting keeps for it) and a pointer to it is appended to the anchor
//! blocks, so the next mount reads the anchors and the checkpoint instead of scanning
//! (YAFFS2 does the same, but finds its checkpoint by reading every block).
//!
//! A checkpoint on flash is always current: whichever way a file system was mounted, the
//! first write after the mount erases any checkpoint blocks it found. One that is
//! incomplete or fails a check (power cut while writing or erasing it) is ignored, and the
//! mount scans.

use std::collections::HashMap;

use nandkit_flash::Flash;

use crate::blocks::BlockState;
use crate::error::Result;
use crate::format::anchor::CheckpointPointer;
use crate::format::checkpoint::{
    CheckpointImage, ChunkRun, CkptBlock, CkptObject, CkptStream, RUN_LOST,
};
use crate::format::special::Special;
use crate::format::summary::Summary;
use crate::format::tags::{SpecialKind, SpecialTags, Tags};
use crate::fs::{FileSystem, OpenBlock, Tomb};
use crate::mapping::FileMap;
use crate::object::{Object, LOST_PAGE, NO_CHUNK, NO_PAGE};
use crate::types::{Ino, Kind};

fn state_code(s: BlockState) -> u8 {
    match s {
        BlockState::Empty => 0,
        BlockState::Active => 1,
        BlockState::Full | BlockState::Checkpoint => 2,
        BlockState::Bad => 3,
        BlockState::Anchor => 4,
    }
}

impl<F: Flash> FileSystem<F> {
    fn checkpoint_image(&self) -> CheckpointImage {
        let parents = self.parents_from_dirs();
        let mut objects: Vec<CkptObject> = self
            .objects
            .iter()
            .map(|(&ino, o)| CkptObject {
                ino,
                kind: o.kind,
                parents: match &o.details {
                    Some(d) => d.names.iter().map(|n| n.parent).collect(),
                    // An attribute set's one name is in its owner, not a directory.
                    None if o.kind == Kind::Xattrs => vec![o.parent],
                    None => {
                        let mut p = parents.get(&ino).cloned().unwrap_or_default();
                        if let Some(i) = p.iter().position(|&x| x == o.parent) {
                            p.swap(0, i);
                        }
                        p
                    }
                },
                header: o.header_page(),
                size: o.size,
                max_chunk_on_flash: o.max_chunk(),
                headers_on_flash: o.headers_on_flash,
                runs: o
                    .chunks
                    .runs()
                    .into_iter()
                    .map(|(chunk, page, len)| ChunkRun {
                        chunk,
                        page: if page == LOST_PAGE { RUN_LOST } else { page },
                        len,
                    })
                    .collect(),
                reserve: self.reserves.get(ino),
            })
            .collect();
        objects.sort_by_key(|o| o.ino);
        let mut tombstones: Vec<(Ino, u32)> =
            self.tombstones.iter().map(|(&k, t)| (k, t.page)).collect();
        tombstones.sort_unstable();
        CheckpointImage {
            next_serial: self.next_serial,
            next_ino: self.next_ino,
            alloc_cursor: self.alloc_cursor,
            streams: self
                .streams
                .iter()
                .map(|s| {
                    s.as_ref().map(|open| CkptStream {
                        block: open.block,
                        pending: Summary {
                            base_serial: self.blocks.get(open.block).base_serial,
                            entries: open.pending.clone(),
                        },
                    })
                })
                .collect(),
            blocks: self
                .blocks
                .records()
                .iter()
                .enumerate()
                .map(|(i, b)| CkptBlock {
                    state: state_code(b.state),
                    flags: b.flags,
                    next_page: b.next_page(),
                    base_serial: b.base_serial,
                    overhead: b.overhead(),
                    header_objs: self.blocks.headers_in(i as u32).to_vec(),
                    data_objs: self.blocks.data.of(i as u32),
                })
                .collect(),
            tombstones,
            objects,
        }
    }

    /// For every object, the directories it has a name in (several for a hard link), from
    /// the directories' child lists: what an object with unloaded details cannot say.
    fn parents_from_dirs(&self) -> HashMap<Ino, Vec<Ino>> {
        let mut out: HashMap<Ino, Vec<Ino>> = HashMap::new();
        for (&p, d) in &self.dirs {
            for &c in d
                .unnamed
                .iter()
                .chain(d.index.iter().flat_map(|i| i.values()))
            {
                out.entry(c).or_default().push(p);
            }
        }
        out
    }

    /// Writes the checkpoint and its pointer. `Ok(false)` when it could not be written
    /// (no room, a failing block): the next mount scans.
    pub(crate) fn write_checkpoint(&mut self) -> Result<bool> {
        self.erase_stale_checkpoint()?;
        let c = self.layout.chunk_bytes;
        let bytes = self.checkpoint_image().encode(c);
        let cap = Special::capacity(c as usize);
        let ppb = self.layout.pages_per_block as usize;
        let pages = bytes.len().div_ceil(cap);
        let blocks_needed = pages.div_ceil(ppb);
        let mut chosen = Vec::new();
        let n = self.layout.blocks;
        let mut cursor = self.alloc_cursor;
        for _ in 0..blocks_needed {
            let b = (0..n)
                .map(|k| (cursor + k) % n)
                .find(|&b| self.blocks.get(b).state == BlockState::Empty && !chosen.contains(&b));
            match b {
                Some(b) => {
                    chosen.push(b);
                    cursor = (b + 1) % n;
                }
                None => return Ok(false),
            }
        }
        let id = self.next_serial;
        for &b in &chosen {
            self.blocks.set_state(b, BlockState::Checkpoint);
            self.checkpoint_blocks.push(b);
        }
        for (k, piece) in bytes.chunks(cap).enumerate() {
            let block = chosen[k / ppb];
            let special = Special {
                kind: SpecialKind::Checkpoint,
                id,
                index: k as u32,
                payload: piece.to_vec(),
            };
            let tags = Tags::Special(SpecialTags {
                kind: SpecialKind::Checkpoint,
            });
            let (page, oob) = self.layout.encode_page(&tags, &special.encode());
            let addr = self.layout.block_addr(block).page((k % ppb) as u32);
            self.settle()?;
            let r = self.dev.get_mut().program_page(addr, &page, &oob);
            self.blocks.update(block, |b| b.advance());
            match r {
                Ok(()) => self.stats.checkpoint_pages_written += 1,
                Err(nandkit_flash::FlashError::PowerLost) => {
                    return Err(self.fail(nandkit_flash::FlashError::PowerLost))
                }
                // A failing block: give up on the checkpoint; the next mount scans.
                Err(_) => return Ok(false),
            }
        }
        let pointer = CheckpointPointer {
            id,
            pages: pages as u32,
            blocks: chosen,
        };
        self.append_checkpoint_pointer(&pointer)
    }

    /// Tries to mount from the checkpoint the anchors point to. `Ok(false)` means there is
    /// none usable (the caller scans).
    pub(crate) fn load_checkpoint(&mut self) -> Result<bool> {
        let Some(p) = self.latest_checkpoint_pointer()? else {
            return Ok(false);
        };
        let ppb = self.layout.pages_per_block;
        let usable = p
            .blocks
            .iter()
            .all(|&b| b < self.layout.blocks && self.blocks.get(b).state == BlockState::Empty);
        if !usable || p.pages as usize > p.blocks.len() * ppb as usize || p.pages == 0 {
            return Ok(false);
        }
        for &block in &p.blocks {
            if self.dev.get_mut().is_bad(self.layout.block_addr(block))? {
                return Ok(false);
            }
        }
        // Every page at once: on an array they lie over all the chips and read in parallel.
        let pnos: Vec<u32> = (0..p.pages)
            .map(|k| self.layout.pno(p.blocks[(k / ppb) as usize], k % ppb))
            .collect();
        let pages = self.read_pages(&pnos)?;
        let mut bytes = Vec::new();
        for (k, (data, oob, ok)) in (0..p.pages).zip(pages) {
            let is_ckpt = matches!(
                self.layout.decode_tags(&oob),
                crate::format::TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Checkpoint
            );
            let Some(s) = Special::decode(&data).filter(|s| {
                ok && is_ckpt && s.kind == SpecialKind::Checkpoint && s.id == p.id && s.index == k
            }) else {
                return Ok(false);
            };
            bytes.extend_from_slice(&s.payload);
        }
        let Some(image) = CheckpointImage::decode(&bytes, self.layout.chunk_bytes, ppb) else {
            return Ok(false);
        };
        self.restore(image, &p.blocks)
    }

    /// Installs a decoded checkpoint. `Ok(false)` (the caller scans) if it does not fit
    /// this device or contradicts itself.
    fn restore(&mut self, image: CheckpointImage, ckpt_blocks: &[u32]) -> Result<bool> {
        let n = self.layout.blocks as usize;
        let ppb = self.layout.pages_per_block;
        let total_pages = self.layout.total_pages();
        if image.blocks.len() != n || image.streams.len() != self.streams.len() {
            return Ok(false);
        }
        for (b, cb) in image.blocks.iter().enumerate() {
            let b = b as u32;
            let ram = self.blocks.get(b).state;
            let state = match cb.state {
                0 => BlockState::Empty,
                1 => BlockState::Active,
                2 => BlockState::Full,
                3 => BlockState::Bad,
                _ => BlockState::Anchor,
            };
            if (state == BlockState::Anchor) != (ram == BlockState::Anchor)
                || cb.next_page > ppb
                || cb.overhead > cb.next_page
            {
                return Ok(false);
            }
            if state == BlockState::Anchor {
                continue;
            }
            self.blocks.set_state(b, state);
            self.blocks.update(b, |blk| {
                blk.set_next_page(cb.next_page);
                blk.base_serial = cb.base_serial;
                blk.set_overhead(cb.overhead);
                blk.flags = cb.flags;
            });
            self.blocks.set_headers(b, cb.header_objs.clone());
            self.blocks.data.set(b, cb.data_objs.clone());
        }
        // Pages owned by objects and tombstones are the valid ones; each at most once.
        let claim = |fs: &mut Self, pno: u32| -> bool {
            if u64::from(pno) >= total_pages || fs.blocks.is_valid(pno) {
                return false;
            }
            let blk = fs.blocks.get(pno / ppb);
            if pno % ppb >= blk.next_page()
                || matches!(
                    blk.state,
                    BlockState::Empty | BlockState::Bad | BlockState::Anchor
                )
            {
                return false;
            }
            fs.blocks.set_valid(pno);
            true
        };
        let mut children: HashMap<Ino, Vec<Ino>> = HashMap::new();
        for o in &image.objects {
            let mut obj = Object::new(o.kind, self.config.mapping, self.layout.map_shape());
            obj.size = o.size;
            obj.parent = o.parents.first().copied().unwrap_or(0);
            obj.header = o.header.unwrap_or(NO_PAGE);
            obj.max_chunk_on_flash = o.max_chunk_on_flash.unwrap_or(NO_CHUNK);
            obj.headers_on_flash = o.headers_on_flash;
            if let Some(h) = o.header {
                if !claim(self, h) {
                    return Ok(false);
                }
            }
            let mut runs = Vec::with_capacity(o.runs.len());
            for r in &o.runs {
                if r.page == RUN_LOST {
                    runs.push((r.chunk, LOST_PAGE, r.len));
                    continue;
                }
                for k in 0..r.len {
                    if !claim(self, r.page.saturating_add(k)) {
                        return Ok(false);
                    }
                }
                runs.push((r.chunk, r.page, r.len));
            }
            if !runs.is_empty() {
                obj.chunks =
                    FileMap::from_runs(self.config.mapping, self.layout.map_shape(), &runs);
            }
            match o.kind {
                Kind::Xattrs => match o.parents.as_slice() {
                    [owner] => {
                        if self.xattr_sets.insert(*owner, o.ino).is_some() {
                            return Ok(false);
                        }
                    }
                    _ => return Ok(false),
                },
                _ => {
                    for &p in &o.parents {
                        children.entry(p).or_default().push(o.ino);
                    }
                }
            }
            if o.kind == Kind::HardLink {
                let target = Ino::try_from(o.size).unwrap_or(0);
                *self.links.entry(target).or_insert(0) += 1;
            }
            // Counted once the chunks are in (`recount_reserves` at the end of mount).
            self.reserves.set(o.ino, o.reserve.clone(), None);
            if self.objects.insert(o.ino, obj).is_some() {
                return Ok(false);
            }
        }
        for o in &image.objects {
            if o.parents.is_empty()
                && o.ino != crate::types::ROOT_INO
                && !self.links.contains_key(&o.ino)
            {
                // Unlinked while open at unmount: deleted by the mount's repairs.
                self.repairs.push(o.ino);
            }
        }
        // Every hard link names a file there is, every attribute set belongs to an
        // object there is: else the checkpoint contradicts itself.
        let known = |i: &Ino, fs: &Self| fs.objects.get(i).is_some_and(|t| t.kind.is_visible());
        if !self
            .links
            .keys()
            .all(|t| known(t, self) && self.objects[t].kind != Kind::Dir)
            || !self.xattr_sets.keys().all(|t| known(t, self))
        {
            return Ok(false);
        }
        let mut headers: HashMap<Ino, u32> =
            image.tombstones.iter().map(|&(ino, _)| (ino, 0)).collect();
        for (_, list) in self.blocks.all_headers() {
            for ino in list {
                if let Some(n) = headers.get_mut(ino) {
                    *n += 1;
                }
            }
        }
        for &(ino, page) in &image.tombstones {
            if !claim(self, page) {
                return Ok(false);
            }
            let headers = headers[&ino];
            self.tombstones.insert(
                ino,
                Tomb {
                    page,
                    headers_on_flash: headers,
                    data_blocks: 0,
                },
            );
        }
        for (ino, n) in self.blocks.data.blocks_per_object() {
            if let Some(o) = self.objects.get_mut(&ino) {
                o.data_blocks = n;
            } else if let Some(t) = self.tombstones.get_mut(&ino) {
                t.data_blocks = n;
            } else {
                // Its tombstone was lost to damage before the checkpoint (see `untombed`).
                self.untombed.insert(ino);
            }
        }
        // Directories, their children and subdirectory counts.
        let children = self.install_dirs(children);
        if !children.is_empty() {
            return Ok(false); // names under something that is not a directory
        }
        for (i, s) in image.streams.into_iter().enumerate() {
            self.streams[i] = match s {
                None => None,
                Some(s) => {
                    let b = s.block;
                    if b as usize >= n
                        || self.blocks.get(b).state != BlockState::Active
                        || s.pending.entries.len() > self.blocks.get(b).next_page() as usize
                    {
                        return Ok(false);
                    }
                    Some(OpenBlock::new(
                        b,
                        s.pending.entries,
                        self.blocks.get(b).base_serial,
                        self.layout.chunk_bytes,
                    ))
                }
            };
        }
        for &b in ckpt_blocks {
            self.blocks.set_state(b, BlockState::Checkpoint);
            self.checkpoint_blocks.push(b);
        }
        self.next_serial = image.next_serial;
        self.next_ino = image.next_ino;
        // Every object and tombstone in the image has its header on flash.
        self.newest_header_ino = self
            .objects
            .keys()
            .chain(self.tombstones.keys())
            .copied()
            .max()
            .unwrap_or(crate::types::ROOT_INO);
        self.alloc_cursor = image.alloc_cursor % self.layout.blocks.max(1);
        Ok(self.objects.contains_key(&crate::types::ROOT_INO))
    }
}
