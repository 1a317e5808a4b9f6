//! The flash write path (allocation, bad-block handling), page reads with their checks,
//! and the cleaning engine that reclaims blocks the cleaning policy picks.

use nandkit_flash::{Flash, FlashError};

use crate::alloc::{WriteCause, WriteHint};
use crate::blocks::BlockState;
use crate::clean::Need;
use crate::error::{FsError, Result};
use crate::format::{crc, PageKind, Record, TagRead, Tags, TAG_BYTES};
use crate::fs::FileSystem;
use crate::layout::{TagPlace, OOB_TAG_OFFSET};
use crate::object::LOST_PAGE;
use crate::types::{Ino, SUPER_INO};

/// A page as read back: its tags and its data bytes (`n_bytes` of them).
pub(crate) struct PageRead {
    pub tags: Tags,
    pub data: Vec<u8>,
    /// The data did not match its CRC (or ECC gave up): the bytes are damaged.
    pub damaged: bool,
}

/// Erased blocks that flushing already-accepted file data leaves alone: one for cleaning,
/// one for the headers deletes write.
const ACCEPTED_DATA_FLOOR: u32 = 2;

impl<F: Flash> FileSystem<F> {
    /// Most chunks the write cache may hold at once: what flushing them can take from the
    /// reserve. Past that, partial chunks are written through.
    pub(crate) fn cache_limit(&self) -> usize {
        let blocks = self
            .config
            .reserve_blocks
            .saturating_sub(ACCEPTED_DATA_FLOOR);
        blocks as usize * self.layout.pages_per_block as usize
    }

    pub(crate) fn take_serial(&mut self) -> u64 {
        let s = self.next_serial;
        self.next_serial += 1;
        s
    }

    /// Lays out a page: data, padding, and the tags in OOB or in band.
    pub(crate) fn encode_page(&self, tags: &Tags, data: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let g = self.layout.geometry;
        let mut page = vec![0xFF; g.page_size_bytes as usize];
        let mut oob = vec![0xFF; g.oob_size_bytes as usize];
        page[..data.len()].copy_from_slice(data);
        let t = tags.encode();
        match self.layout.tags {
            TagPlace::Oob => oob[OOB_TAG_OFFSET..OOB_TAG_OFFSET + TAG_BYTES].copy_from_slice(&t),
            TagPlace::InBand => {
                let at = page.len() - TAG_BYTES;
                page[at..].copy_from_slice(&t)
            }
        }
        (page, oob)
    }

    /// Where the tag bytes are in a read page.
    pub(crate) fn tag_bytes<'a>(&self, page: &'a [u8], oob: &'a [u8]) -> &'a [u8] {
        match self.layout.tags {
            TagPlace::Oob => &oob[OOB_TAG_OFFSET.min(oob.len())..],
            TagPlace::InBand => &page[page.len() - TAG_BYTES..],
        }
    }

    /// Marks the file system dead after the device failed under it.
    fn fail(&mut self, e: FlashError) -> FsError {
        if matches!(e, FlashError::PowerLost) {
            self.dead = Some("power lost; remount".into());
        }
        FsError::Flash(e)
    }

    /// Writes one header page for `ino`. The caller updates the object's RAM state.
    pub(crate) fn write_header_page(&mut self, ino: Ino, rec: &Record) -> Result<u32> {
        let bytes = rec.encode();
        if bytes.len() > self.layout.chunk_bytes as usize {
            return Err(FsError::NameTooLong);
        }
        let serial = self.take_serial();
        let tags = Tags {
            kind: PageKind::Header,
            obj: ino,
            chunk: 0,
            n_bytes: bytes.len() as u32,
            block_seq: 0,
            serial,
            data_crc: crc(&bytes),
        };
        let hint = WriteHint {
            cause: WriteCause::Metadata,
            obj: ino,
            chunk: 0,
        };
        let pno = self.program(hint, tags, &bytes)?;
        self.stats.header_pages_written += 1;
        Ok(pno)
    }

    /// Programs a page somewhere the allocator chooses, handling torn and failing pages,
    /// and marks it valid. `tags.block_seq` is filled in here.
    pub(crate) fn program(&mut self, hint: WriteHint, tags: Tags, data: &[u8]) -> Result<u32> {
        self.program_in(hint, tags, data, false)
    }

    /// `program`, for file data that `write` already accepted into the write cache: like
    /// YAFFS's cache flush, it may use the cleaning reserve (all but the two blocks that
    /// cleaning and deletes need), so fsync and unmount work on a full device.
    pub(crate) fn program_accepted(
        &mut self,
        hint: WriteHint,
        tags: Tags,
        data: &[u8],
    ) -> Result<u32> {
        self.program_in(hint, tags, data, true)
    }

    fn program_in(
        &mut self,
        hint: WriteHint,
        mut tags: Tags,
        data: &[u8],
        accepted: bool,
    ) -> Result<u32> {
        self.check_writable()?;
        self.erase_stale_checkpoint()?;
        let mut erased_for_retry = false;
        loop {
            let stream = self.allocator.stream_for(&hint);
            let block = self.active_block(stream, hint.cause, accepted)?;
            let page = self.blocks.blocks[block as usize].next_page;
            tags.block_seq = self.blocks.blocks[block as usize].seq;
            let (buf, oob) = self.encode_page(&tags, data);
            let addr = self.layout.block_addr(block).page(page);
            let result = self.dev.program_page(addr, &buf, &oob);
            let blk = &mut self.blocks.blocks[block as usize];
            match result {
                Ok(()) => {
                    blk.next_page += 1;
                    let pno = self.layout.pno(block, page);
                    self.blocks.set_valid(pno);
                    if tags.kind == PageKind::Header {
                        self.blocks.header_objs[block as usize].push(tags.obj);
                        *self.headers_on_flash.entry(tags.obj).or_insert(0) += 1;
                    }
                    self.close_if_full(stream, block);
                    return Ok(pno);
                }
                Err(FlashError::NotErased(_)) if page == 0 && !erased_for_retry => {
                    // A block that looked empty after a cut erase: erase it for real.
                    erased_for_retry = true;
                    self.streams[stream] = None;
                    self.blocks.set_state(block, BlockState::Full);
                    self.erase_block(block)?;
                }
                Err(FlashError::NotErased(_)) => {
                    // A page torn by an earlier cut: skip it.
                    blk.next_page += 1;
                    self.stats.pages_spoiled += 1;
                    self.close_if_full(stream, block);
                }
                Err(e) if e.is_media_failure() => {
                    blk.next_page += 1;
                    blk.retire = true;
                    self.streams[stream] = None;
                    self.blocks.set_state(block, BlockState::Full);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
    }

    fn close_if_full(&mut self, stream: usize, block: u32) {
        if self.blocks.blocks[block as usize].next_page >= self.layout.pages_per_block {
            self.blocks.set_state(block, BlockState::Full);
            if self.streams[stream] == Some(block) {
                self.streams[stream] = None;
            }
        }
    }

    /// The open block of a stream, opening (and first making room for) a new one if needed.
    fn active_block(&mut self, stream: usize, cause: WriteCause, accepted: bool) -> Result<u32> {
        let new_data = cause == WriteCause::UserData && !accepted;
        if new_data && self.blocks.empty < self.config.reserve_blocks {
            // Metadata may take a block out of the reserve and leave it open on a stream
            // user data shares: new user data must not follow it there.
            self.clean_while_empty_at_most(self.config.reserve_blocks - 1)?;
        }
        if let Some(b) = self.streams[stream] {
            return Ok(b);
        }
        if matches!(cause, WriteCause::UserData | WriteCause::Metadata) {
            self.make_room(stream, cause, accepted)?;
            // Cleaning may have opened a block for this stream meanwhile.
            if let Some(b) = self.streams[stream] {
                return Ok(b);
            }
        }
        let block = self.find_empty().ok_or(FsError::NoSpace)?;
        self.blocks.set_state(block, BlockState::Active);
        let seq = self.next_seq;
        self.next_seq += 1;
        let b = &mut self.blocks.blocks[block as usize];
        b.seq = seq;
        b.next_page = 0;
        self.streams[stream] = Some(block);
        Ok(block)
    }

    pub(crate) fn find_empty(&mut self) -> Option<u32> {
        let n = self.layout.blocks;
        for k in 0..n {
            let b = (self.alloc_cursor + k) % n;
            if self.blocks.blocks[b as usize].state == BlockState::Empty {
                self.alloc_cursor = (b + 1) % n;
                return Some(b);
            }
        }
        None
    }

    /// Cleans until a new block may be opened for `cause`: user data must leave the
    /// reserve alone; metadata (which deletes need, to free space on a full device) may
    /// use all but the last erased block, which cleaning itself needs.
    fn make_room(&mut self, stream: usize, cause: WriteCause, accepted: bool) -> Result<()> {
        if let Some(victim) = self.cleaner.pick(&self.blocks, Need::Opportunistic) {
            self.clean_block(victim)?;
        }
        let floor = match cause {
            WriteCause::UserData if accepted => ACCEPTED_DATA_FLOOR.min(self.config.reserve_blocks),
            WriteCause::UserData => {
                return self.clean_while_empty_at_most(self.config.reserve_blocks)
            }
            _ => 1,
        };
        while self.blocks.empty <= floor {
            // Cleaning copies into this stream's block too: once it has opened one, metadata
            // and accepted data can go there (new user data keeps to the reserve rule).
            if self.streams[stream].is_some() {
                return Ok(());
            }
            match self.cleaner.pick(&self.blocks, Need::Space) {
                Some(victim) => self.clean_block(victim)?,
                None => return Err(FsError::NoSpace),
            }
        }
        Ok(())
    }

    /// Cleans until more than `floor` blocks are erased, or fails with ENOSPC.
    fn clean_while_empty_at_most(&mut self, floor: u32) -> Result<()> {
        while self.blocks.empty <= floor {
            match self.cleaner.pick(&self.blocks, Need::Space) {
                Some(victim) => self.clean_block(victim)?,
                None => return Err(FsError::NoSpace),
            }
        }
        Ok(())
    }

    /// Called before a new object's first header is written. New objects, like user data,
    /// leave the cleaning reserve alone (YAFFS lets only rewrites of existing headers use
    /// it), so that on a device full of objects a delete can still write its tombstone.
    pub(crate) fn make_room_for_new_object(&mut self) -> Result<()> {
        self.check_writable()?;
        self.erase_stale_checkpoint()?;
        if self.blocks.empty < self.config.reserve_blocks {
            self.clean_while_empty_at_most(self.config.reserve_blocks - 1)?;
        }
        Ok(())
    }

    /// Explicit cleaning: reclaims up to `max_blocks` blocks the policy picks. Returns how
    /// many it reclaimed.
    pub fn gc(&mut self, max_blocks: u32) -> Result<u32> {
        self.check_writable()?;
        self.erase_stale_checkpoint()?;
        let mut done = 0;
        while done < max_blocks {
            let Some(victim) = self.cleaner.pick(&self.blocks, Need::Explicit) else {
                break;
            };
            self.clean_block(victim)?;
            done += 1;
        }
        Ok(done)
    }

    /// Moves every valid page out of `block`, then erases it (or retires it if it failed).
    pub(crate) fn clean_block(&mut self, block: u32) -> Result<()> {
        debug_assert!(self.blocks.is_candidate(block));
        for pno in self.blocks.valid_pages(block) {
            self.relocate(pno)?;
        }
        debug_assert_eq!(self.blocks.blocks[block as usize].valid, 0);
        self.stats.blocks_cleaned += 1;
        if self.blocks.blocks[block as usize].scrub {
            self.stats.scrubs += 1;
        }
        if self.blocks.blocks[block as usize].retire {
            self.retire_block(block)
        } else {
            self.erase_block(block)
        }
    }

    /// Copies one valid page elsewhere, keeping its serial, and repoints its owner.
    fn relocate(&mut self, pno: u32) -> Result<()> {
        let read = self.read_raw(pno)?;
        let Some(read) = read else {
            // Tags unreadable: find the owner the slow way and mark its chunk lost.
            self.forget_page(pno);
            return Ok(());
        };
        let tags = read.tags;
        if tags.kind == PageKind::Header
            && !self.objects.contains_key(&tags.obj)
            && self.tombstones.get(&tags.obj) == Some(&pno)
            && self.headers_on_flash.get(&tags.obj).copied().unwrap_or(0) <= 1
        {
            // A tombstone with nothing left to bury: drop it instead of copying.
            self.tombstones.remove(&tags.obj);
            self.blocks.invalidate(pno);
            return Ok(());
        }
        let hint = WriteHint {
            cause: WriteCause::Cleaning,
            obj: tags.obj,
            chunk: tags.chunk,
        };
        let new = self.program(hint, tags, &read.data)?;
        self.stats.pages_copied += 1;
        if self.repoint(&tags, pno, new) {
            self.blocks.invalidate(pno);
        } else {
            // The page holds something its owner does not expect (it was overwritten or
            // damaged since a checkpoint vouched for it): the copy belongs to nobody, and
            // whoever referenced the page has lost it.
            self.blocks.invalidate(new);
            self.forget_page(pno);
        }
        Ok(())
    }

    /// Whatever referenced page `old` now references `new`. False if nothing did.
    fn repoint(&mut self, tags: &Tags, old: u32, new: u32) -> bool {
        let mut found = false;
        match tags.kind {
            PageKind::Data => {
                if let Some(o) = self.objects.get_mut(&tags.obj) {
                    if o.chunk_page(tags.chunk) == old {
                        o.set_chunk(tags.chunk, new);
                        found = true;
                    }
                }
            }
            PageKind::Header => {
                if tags.obj == SUPER_INO && self.super_page == Some(old) {
                    self.super_page = Some(new);
                    found = true;
                }
                if let Some(o) = self.objects.get_mut(&tags.obj) {
                    if o.header == Some(old) {
                        o.header = Some(new);
                        found = true;
                    }
                }
                if let Some(t) = self.tombstones.get_mut(&tags.obj) {
                    if *t == old {
                        *t = new;
                        found = true;
                    }
                }
            }
            PageKind::Checkpoint => {}
        }
        found
    }

    /// A valid page whose tags cannot be read: whoever owns it loses it (reads give EIO,
    /// a lost header is rewritten from RAM).
    fn forget_page(&mut self, pno: u32) {
        self.blocks.invalidate(pno);
        for (ino, o) in self.objects.iter_mut() {
            if o.header == Some(pno) {
                o.header = None;
                o.header_dirty = true;
                self.repairs.push(*ino);
            }
            for (chunk, c) in o.chunk_entries() {
                if c == pno {
                    o.set_chunk(chunk, LOST_PAGE);
                }
            }
        }
        self.tombstones.retain(|_, p| *p != pno);
        if self.super_page == Some(pno) {
            self.super_page = None;
        }
    }

    /// Reads a page with its tags. `None` when the tags are erased or garbage. Data that
    /// fails its CRC or ECC comes back marked damaged, with the bytes as read.
    pub(crate) fn read_raw(&mut self, pno: u32) -> Result<Option<PageRead>> {
        self.check_alive()?;
        let g = self.layout.geometry;
        let mut page = vec![0u8; g.page_size_bytes as usize];
        let mut oob = vec![0u8; g.oob_size_bytes as usize];
        let addr = self.layout.page_addr(pno);
        let mut damaged = false;
        match self.dev.read_page(addr, &mut page, &mut oob) {
            Ok(ecc) => {
                if ecc.scrub {
                    self.blocks.blocks[self.layout.block_of(pno) as usize].scrub = true;
                }
            }
            Err(FlashError::Uncorrectable { .. }) => damaged = true,
            Err(e) => return Err(self.fail(e)),
        }
        let tags = match Tags::decode(self.tag_bytes(&page, &oob)) {
            TagRead::Valid(t) => t,
            _ => return Ok(None),
        };
        let n = tags.n_bytes as usize;
        if n > self.layout.chunk_bytes as usize {
            return Ok(None);
        }
        page.truncate(n);
        damaged |= crc(&page) != tags.data_crc;
        Ok(Some(PageRead {
            tags,
            data: page,
            damaged,
        }))
    }

    /// Reads a page that must hold (kind, obj, chunk), checking everything.
    pub(crate) fn read_expected(
        &mut self,
        pno: u32,
        kind: PageKind,
        obj: Ino,
        chunk: u32,
    ) -> Result<Vec<u8>> {
        let where_ = || format!("page {pno} (object {obj}, chunk {chunk})");
        match self.read_raw(pno)? {
            Some(r)
                if r.tags.kind == kind
                    && r.tags.obj == obj
                    && r.tags.chunk == chunk
                    && !r.damaged =>
            {
                Ok(r.data)
            }
            Some(r) if r.damaged => Err(FsError::Io(format!("{} is damaged", where_()))),
            _ => Err(FsError::Io(format!(
                "{} does not hold what the file system expects",
                where_()
            ))),
        }
    }

    /// Erases a block and returns it to the empty pool; a block that fails goes bad.
    pub(crate) fn erase_block(&mut self, block: u32) -> Result<()> {
        let addr = self.layout.block_addr(block);
        match self.dev.erase_block(addr) {
            Ok(()) => {
                let b = &mut self.blocks.blocks[block as usize];
                b.next_page = 0;
                b.seq = 0;
                b.retire = false;
                b.scrub = false;
                debug_assert_eq!(b.valid, 0);
                self.blocks.set_state(block, BlockState::Empty);
                self.forget_headers_in(block);
                Ok(())
            }
            Err(e) if e.is_media_failure() => self.retire_block(block),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Marks a block bad for good.
    fn retire_block(&mut self, block: u32) -> Result<()> {
        match self.dev.mark_bad(self.layout.block_addr(block)) {
            Ok(()) => {}
            Err(e) if !matches!(e, FlashError::PowerLost) => {}
            Err(e) => return Err(self.fail(e)),
        }
        self.blocks.set_state(block, BlockState::Bad);
        self.stats.blocks_retired += 1;
        self.forget_headers_in(block);
        Ok(())
    }

    /// The header pages of an erased block are gone: count them off, and drop tombstones
    /// that no longer bury anything.
    fn forget_headers_in(&mut self, block: u32) {
        for obj in std::mem::take(&mut self.blocks.header_objs[block as usize]) {
            let Some(n) = self.headers_on_flash.get_mut(&obj) else {
                continue;
            };
            *n -= 1;
            let left = *n;
            if left == 0 {
                self.headers_on_flash.remove(&obj);
            }
            if left <= 1 && !self.objects.contains_key(&obj) {
                if let Some(page) = self.tombstones.remove(&obj) {
                    self.blocks.invalidate(page);
                }
            }
        }
    }

    /// Before the first write after a checkpoint mount, the checkpoint is erased: it
    /// would describe a state that no longer exists.
    pub(crate) fn erase_stale_checkpoint(&mut self) -> Result<()> {
        while let Some(b) = self.checkpoint_blocks.pop() {
            self.blocks.set_state(b, BlockState::Full);
            if self.blocks.blocks[b as usize].valid > 0 {
                // Live pages beside checkpoint pages (a damaged image: a scan trusts valid
                // pages wherever they are): cleaning copies them out before it erases.
                continue;
            }
            self.erase_block(b)?;
        }
        Ok(())
    }
}
