//! Checkpoints: at clean unmount the whole in-RAM state is written to erased blocks, so the
//! next mount reads those instead of scanning every page (YAFFS2 does the same).
//!
//! A checkpoint on flash is always current: whichever way a file system was mounted, the
//! first write after the mount erases any checkpoint blocks it found. One that is
//! incomplete or fails its CRC (power cut while writing or erasing it) is ignored, and the
//! mount scans.

use std::collections::BTreeMap;

use nandkit_flash::{Flash, FlashError};

use crate::blocks::BlockState;
use crate::config::FsConfig;
use crate::error::{FsError, Result};
use crate::format::{
    crc, CheckpointImage, CkptBlock, CkptObject, PageKind, Record, RecordKind, TagRead, Tags,
    CKPT_NONE,
};
use crate::fs::FileSystem;
use crate::object::{Object, NO_PAGE};
use crate::types::{Ino, Kind, SUPER_INO};

fn state_code(s: BlockState) -> u8 {
    match s {
        BlockState::Empty => 0,
        BlockState::Active => 1,
        BlockState::Full | BlockState::Checkpoint => 2,
        BlockState::Bad => 3,
    }
}

/// A file's chunk map as a dense list (`NO_PAGE` for holes), the checkpoint's form.
fn dense_chunks(o: &Object) -> Vec<u32> {
    let entries = o.chunk_entries();
    let mut dense = vec![NO_PAGE; entries.last().map_or(0, |e| e.0 as usize + 1)];
    for (chunk, pno) in entries {
        dense[chunk as usize] = pno;
    }
    dense
}

fn opt(v: Option<u32>) -> u32 {
    v.unwrap_or(CKPT_NONE)
}

impl<F: Flash> FileSystem<F> {
    fn checkpoint_image(&self) -> CheckpointImage {
        let mut objects: Vec<CkptObject> = self
            .objects
            .iter()
            .map(|(&ino, o)| CkptObject {
                ino,
                header: opt(o.header),
                max_chunk_on_flash: opt(o.max_chunk_on_flash),
                record: o.meta.encode(),
                chunks: dense_chunks(o),
            })
            .collect();
        objects.sort_by_key(|o| o.ino);
        let mut headers_on_flash: Vec<(Ino, u32)> = self
            .headers_on_flash
            .iter()
            .map(|(&k, &v)| (k, v))
            .collect();
        headers_on_flash.sort_unstable();
        let mut tombstones: Vec<(Ino, u32)> =
            self.tombstones.iter().map(|(&k, &v)| (k, v)).collect();
        tombstones.sort_unstable();
        CheckpointImage {
            next_serial: self.next_serial,
            next_seq: self.next_seq,
            next_ino: self.next_ino,
            alloc_cursor: self.alloc_cursor,
            super_page: opt(self.super_page),
            streams: self.streams.iter().map(|s| opt(*s)).collect(),
            blocks: self
                .blocks
                .blocks
                .iter()
                .zip(&self.blocks.header_objs)
                .map(|(b, h)| CkptBlock {
                    state: state_code(b.state),
                    retire: b.retire,
                    scrub: b.scrub,
                    seq: b.seq,
                    next_page: b.next_page,
                    header_objs: h.clone(),
                })
                .collect(),
            valid_bits: self.blocks.valid_words().to_vec(),
            headers_on_flash,
            tombstones,
            objects,
        }
    }

    /// Writes the checkpoint into erased blocks. Skipped (the next mount scans) when there
    /// are not enough erased blocks or a program fails.
    pub(crate) fn write_checkpoint(&mut self) -> Result<()> {
        self.erase_stale_checkpoint()?;
        let bytes = self.checkpoint_image().encode();
        let c = self.layout.chunk_bytes as usize;
        let ppb = self.layout.pages_per_block as usize;
        let pages = bytes.len().div_ceil(c);
        let blocks_needed = pages.div_ceil(ppb);
        // Leave the pool alone if the checkpoint would take most of it.
        if blocks_needed as u32 + 1 > self.blocks.empty {
            return Ok(());
        }
        let mut chosen = Vec::new();
        let mut cursor = self.alloc_cursor;
        for _ in 0..blocks_needed {
            let b = (0..self.layout.blocks)
                .map(|k| (cursor + k) % self.layout.blocks)
                .find(|&b| {
                    self.blocks.blocks[b as usize].state == BlockState::Empty
                        && !chosen.contains(&b)
                });
            match b {
                Some(b) => {
                    chosen.push(b);
                    cursor = (b + 1) % self.layout.blocks;
                }
                None => return Ok(()),
            }
        }
        let id = self.next_serial as u32;
        for (k, piece) in bytes.chunks(c).enumerate() {
            let block = chosen[k / ppb];
            let tags = Tags {
                kind: PageKind::Checkpoint,
                obj: id,
                chunk: k as u32,
                n_bytes: piece.len() as u32,
                block_seq: 0,
                serial: self.next_serial,
                data_crc: crc(piece),
            };
            let (page, oob) = self.encode_page(&tags, piece);
            let addr = self.layout.block_addr(block).page((k % ppb) as u32);
            match self.dev.program_page(addr, &page, &oob) {
                Ok(()) => self.stats.checkpoint_pages_written += 1,
                Err(FlashError::PowerLost) => return Err(FsError::Flash(FlashError::PowerLost)),
                // A failing block: give up on the checkpoint; the next mount scans and
                // cleaning reclaims what was written.
                Err(_) => return Ok(()),
            }
        }
        Ok(())
    }

    /// Tries to mount from a checkpoint. `Ok(false)` means there is none usable.
    pub(crate) fn load_checkpoint(&mut self) -> Result<bool> {
        // Page 0 of each block says whether it holds a checkpoint, and which part.
        let ppb = self.layout.pages_per_block;
        let mut parts: BTreeMap<u32, (u32, u32)> = BTreeMap::new(); // first chunk -> (block, id)
        for b in 0..self.layout.blocks {
            if self.dev.is_bad(self.layout.block_addr(b))? {
                continue;
            }
            let pno = self.layout.pno(b, 0);
            if let TagRead::Valid(t) = self.read_tags_only(pno)? {
                if t.kind == PageKind::Checkpoint
                    && (t.chunk % ppb != 0 || parts.insert(t.chunk, (b, t.obj)).is_some())
                {
                    return Ok(false);
                }
            }
        }
        let Some(&(_, id)) = parts.values().next() else {
            return Ok(false);
        };
        if parts.values().any(|&(_, i)| i != id) {
            return Ok(false);
        }
        let mut bytes = Vec::new();
        let mut want: Option<u64> = None;
        let mut k = 0u32;
        loop {
            if want.is_some_and(|w| bytes.len() as u64 >= w) {
                break;
            }
            let Some(&(block, _)) = parts.get(&(k - k % ppb)) else {
                return Ok(false);
            };
            let pno = self.layout.pno(block, k % ppb);
            let Some(read) = self.read_raw(pno)? else {
                return Ok(false);
            };
            let t = read.tags;
            if read.damaged || t.kind != PageKind::Checkpoint || t.obj != id || t.chunk != k {
                return Ok(false);
            }
            bytes.extend_from_slice(&read.data);
            if want.is_none() {
                match CheckpointImage::stream_len(&bytes) {
                    Some(w)
                        if w <= self.layout.total_pages() * u64::from(self.layout.chunk_bytes) =>
                    {
                        want = Some(w)
                    }
                    _ => return Ok(false),
                }
            }
            k += 1;
        }
        let Some(image) = CheckpointImage::decode(&bytes) else {
            return Ok(false);
        };
        let ckpt_blocks: Vec<u32> = parts.values().map(|&(b, _)| b).collect();
        self.restore(image, ckpt_blocks)
    }

    fn read_tags_only(&mut self, pno: u32) -> Result<TagRead> {
        let g = self.layout.geometry;
        let mut page = vec![0u8; g.page_size_bytes as usize];
        let mut oob = vec![0u8; g.oob_size_bytes as usize];
        let addr = self.layout.page_addr(pno);
        let res = match self.layout.tags {
            crate::layout::TagPlace::Oob => self.dev.read_oob(addr, &mut oob).map(|_| ()),
            crate::layout::TagPlace::InBand => {
                self.dev.read_page(addr, &mut page, &mut oob).map(|_| ())
            }
        };
        match res {
            Ok(()) => Ok(Tags::decode(self.tag_bytes(&page, &oob))),
            Err(FlashError::Uncorrectable { .. }) => Ok(TagRead::Garbage),
            Err(e) => Err(FsError::Flash(e)),
        }
    }

    /// Installs a decoded checkpoint. `Ok(false)` (nothing installed that matters: the
    /// caller scans) if it does not fit this device.
    fn restore(&mut self, image: CheckpointImage, ckpt_blocks: Vec<u32>) -> Result<bool> {
        let n = self.layout.blocks as usize;
        if image.blocks.len() != n || image.streams.len() != self.streams.len() {
            return Ok(false);
        }
        // The configuration lives in the file system record.
        if image.super_page == CKPT_NONE || u64::from(image.super_page) >= self.layout.total_pages()
        {
            return Ok(false);
        }
        let Some(read) = self.read_raw(image.super_page)? else {
            return Ok(false);
        };
        let Some(super_rec) = Record::decode(&read.data)
            .filter(|r| r.kind == RecordKind::Super && read.tags.obj == SUPER_INO)
        else {
            return Ok(false);
        };
        let Ok(config) = serde_json::from_slice::<FsConfig>(&super_rec.target) else {
            return Ok(false);
        };
        let total_pages = self.layout.total_pages();
        let page_ok = |p: u32| p == CKPT_NONE || u64::from(p) < total_pages;
        if !image
            .objects
            .iter()
            .all(|o| page_ok(o.header) && o.chunks.iter().all(|&c| c >= u32::MAX - 1 || page_ok(c)))
        {
            return Ok(false);
        }
        let mut objects = Vec::with_capacity(image.objects.len());
        for o in &image.objects {
            let Some(meta) = Record::decode(&o.record) else {
                return Ok(false);
            };
            objects.push((o, meta));
        }
        self.set_config(config);
        for (b, cb) in image.blocks.iter().enumerate() {
            let state = match cb.state {
                0 => BlockState::Empty,
                1 => BlockState::Active,
                2 => BlockState::Full,
                _ => BlockState::Bad,
            };
            if cb.next_page > self.layout.pages_per_block {
                return Ok(false);
            }
            self.blocks.set_state(b as u32, state);
            let blk = &mut self.blocks.blocks[b];
            blk.seq = cb.seq;
            blk.next_page = cb.next_page;
            blk.retire = cb.retire;
            blk.scrub = cb.scrub;
            self.blocks.header_objs[b] = cb.header_objs.clone();
        }
        if !self.blocks.restore_valid_words(image.valid_bits) {
            return Ok(false);
        }
        for b in ckpt_blocks {
            self.blocks.set_state(b, BlockState::Checkpoint);
            self.checkpoint_blocks.push(b);
        }
        self.next_serial = image.next_serial;
        self.next_seq = image.next_seq;
        self.next_ino = image.next_ino;
        self.alloc_cursor = image.alloc_cursor % self.layout.blocks.max(1);
        self.super_page = Some(image.super_page);
        self.streams = image
            .streams
            .iter()
            .map(|&s| (s != CKPT_NONE && (s as usize) < n).then_some(s))
            .collect();
        self.headers_on_flash = image.headers_on_flash.into_iter().collect();
        self.tombstones = image.tombstones.into_iter().collect();
        for (o, meta) in objects {
            let mut obj = Object::new(meta, self.config.mapping);
            obj.header = (o.header != CKPT_NONE).then_some(o.header);
            obj.max_chunk_on_flash =
                (o.max_chunk_on_flash != CKPT_NONE).then_some(o.max_chunk_on_flash);
            for (chunk, &pno) in o.chunks.iter().enumerate() {
                if pno != NO_PAGE {
                    obj.set_chunk(chunk as u32, pno);
                }
            }
            if obj.kind() == Kind::Dir {
                self.dirs.entry(o.ino).or_default();
            }
            self.objects.insert(o.ino, obj);
        }
        // The directory index and subdirectory counts follow from the names.
        let mut named: Vec<(Ino, Vec<crate::format::Name>)> = self
            .objects
            .iter_mut()
            .map(|(&ino, o)| (ino, std::mem::take(&mut o.meta.names)))
            .collect();
        named.sort_by_key(|x| x.0);
        for (ino, names) in named {
            for n in names {
                self.add_name(ino, n.parent, &n.name);
            }
        }
        Ok(true)
    }
}
