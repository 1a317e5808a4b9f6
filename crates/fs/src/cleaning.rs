//! The cleaning engine: reclaims the blocks the cleaning policy picks (copying their valid
//! pages elsewhere first), erases and retires blocks, and keeps tombstones for as long as
//! they bury something.
//!
//! A copied data page gets a new write serial: it was the newest version of its chunk when
//! copied, so it stays the newest (any later version gets a later serial). A copied header
//! keeps its record's version, which is what orders an object's headers.

use nandkit_flash::{Flash, FlashError};

use crate::alloc::{WriteCause, WriteHint};
use crate::blocks::{BlockState, RETIRE, SCRUB};
use crate::clean::Need;
use crate::error::Result;
use crate::format::record::Record;
use crate::format::tags::{Serial, Tags};
use crate::fs::FileSystem;
use crate::object::{LOST_PAGE, NO_PAGE};

impl<F: Flash> FileSystem<F> {
    /// Explicit cleaning: reclaims up to `max_blocks` blocks the policy picks. Returns how
    /// many it reclaimed.
    pub fn gc(&mut self, max_blocks: u32) -> Result<u32> {
        self.prepare_cleaning()?;
        let mut done = 0;
        while done < max_blocks {
            let Some(victim) = self.pick_victim(Need::Explicit)? else {
                break;
            };
            self.clean_block(victim)?;
            done += 1;
        }
        Ok(done)
    }

    /// One step of idle-time cleaning: reclaims one block if one is worth reclaiming in
    /// the background (`clean::idle` says which). Returns whether it reclaimed one. A
    /// step costs at most one block's copies and its erase, so a request that arrives
    /// meanwhile waits for no more than that.
    pub fn clean_idle_step(&mut self) -> Result<bool> {
        self.prepare_cleaning()?;
        let Some(victim) = crate::clean::idle::pick(&self.blocks) else {
            return Ok(false);
        };
        self.clean_block(victim)?;
        Ok(true)
    }

    /// The cleaner's victim for `need`. With `yaffs_search_reads`, the search reads what a
    /// YAFFS without block status in RAM would read to make the same choice: the tags of
    /// every programmed page of every block it passed (one page of an erased block).
    pub(crate) fn pick_victim(&mut self, need: Need) -> Result<Option<u32>> {
        let victim = self.cleaner.pick(&self.blocks, need);
        if self.config.yaffs_search_reads {
            self.read_passed_blocks()?;
        }
        Ok(victim)
    }

    fn read_passed_blocks(&mut self) -> Result<()> {
        let n = self.layout.blocks.max(1);
        let ppb = self.layout.pages_per_block;
        let mut oob = vec![0u8; self.layout.geometry.oob_size_bytes as usize];
        for (first, count) in self.cleaner.take_passed() {
            for k in 0..count {
                let b = (first + k) % n;
                let blk = self.blocks.get(b);
                let pages = match blk.state {
                    BlockState::Bad => 0,
                    BlockState::Empty => 1,
                    _ => blk.next_page().clamp(1, ppb),
                };
                for page in 0..pages {
                    let addr = self.layout.page_addr(self.layout.pno(b, page));
                    match self.dev.get_mut().read_oob(addr, &mut oob) {
                        // What the tags say is not used: the choice is the cleaner's.
                        Ok(_) | Err(FlashError::Uncorrectable { .. }) => {}
                        Err(e) => return Err(self.fail(e)),
                    }
                    self.stats.search_reads += 1;
                }
            }
        }
        Ok(())
    }

    /// What cleaning on request (explicit or idle) does before it picks a victim.
    fn prepare_cleaning(&mut self) -> Result<()> {
        self.check_writable()?;
        self.erase_stale_checkpoint()?;
        // Blocks shared readers asked to scrub come first, as any flagged block does.
        self.absorb_scrubs();
        Ok(())
    }

    /// Moves every valid page out of `block`, then erases it (or retires it if it failed).
    pub(crate) fn clean_block(&mut self, block: u32) -> Result<()> {
        debug_assert!(self.blocks.is_candidate(block));
        self.blocks.pin(block);
        let out = self.clean_pinned(block);
        self.blocks.unpin(block);
        out
    }

    fn clean_pinned(&mut self, block: u32) -> Result<()> {
        // The valid pages are read in one batch and their copies programmed in another:
        // on an array, every chip reads and programs its share at once.
        let valid = self.blocks.valid_pages(block);
        if self.block_placed() && self.blocks.is_data_block(block) && !valid.is_empty() {
            // Block-placed data moves as a block (a failing or scrubbed one: MNFS cleans
            // no other).
            self.copy_data_block(block, &valid)?;
            return self.finish_cleaning(block);
        }
        let reads = self.read_pages(&valid)?;
        self.in_batch(|fs| {
            for (pno, read) in valid.into_iter().zip(reads) {
                if fs.blocks.is_valid(pno) {
                    fs.relocate(pno, read)?;
                }
            }
            Ok(())
        })?;
        self.finish_cleaning(block)
    }

    /// Counts a cleaned block and erases it (or retires it if it failed).
    fn finish_cleaning(&mut self, block: u32) -> Result<()> {
        debug_assert_eq!(self.blocks.get(block).valid(), 0);
        self.stats.blocks_cleaned += 1;
        let flags = self.blocks.get(block).flags;
        if flags & SCRUB != 0 {
            self.stats.scrubs += 1;
        }
        if flags & RETIRE != 0 {
            self.retire_block(block)
        } else {
            self.erase_block(block)
        }
    }

    /// Copies one valid page (as read: data, OOB, ECC ok) elsewhere and repoints its owner.
    fn relocate(&mut self, pno: u32, (page, oob, ok): crate::batch::RawPage) -> Result<()> {
        // A chunk being punched is dropped, not copied: a copy would be newer than the
        // punch's floor and come back after a crash (see `punch`).
        if self.punching.remove(&pno) {
            self.blocks.invalidate(pno);
            return Ok(());
        }
        let read = match self.parse_page(page, &oob, ok) {
            Some(r) if !r.damaged => r,
            _ => {
                // Unreadable or damaged: copying would hide the damage behind fresh
                // checks. Its owner loses it instead (reads give EIO; a lost header is
                // rewritten from RAM).
                self.forget_page(pno);
                return Ok(());
            }
        };
        if let Tags::Data(d) = &read.tags {
            // Its owner's map is repointed below: it must be in RAM. (Reading it may find
            // this page stale, a slot a crash left past the file's end: nothing to move.)
            self.map(d.obj)?;
            if !self.blocks.is_valid(pno) {
                return Ok(());
            }
        }
        let mut tags = read.tags;
        let mut data = read.data;
        let (obj, chunk) = match &mut tags {
            Tags::Data(d) => {
                // The copy is newer than the file's header, so its byte count must not
                // reach past the file's size (a truncate may have cut the chunk).
                let c = u64::from(self.layout.chunk_bytes);
                let size = self.objects.get(&d.obj).map_or(0, |o| o.size);
                let live = size.saturating_sub(u64::from(d.chunk) * c).min(c) as usize;
                if live == 0 {
                    self.forget_page(pno);
                    return Ok(());
                }
                if live < data.len() {
                    data.truncate(live);
                    d.data_crc = Some(crate::format::crc(&data));
                }
                d.n_bytes = Some(data.len() as u32);
                // A fresh serial, given when the copy is programmed (YAFFS1: the victim's
                // version stays in the tags, and the copy gets the next one).
                if !self.yaffs1_log() {
                    d.serial = Serial::Full(0);
                }
                d.run_start = None;
                (d.obj, d.chunk)
            }
            Tags::Header(h) => {
                let Some(rec) = Record::decode(&data) else {
                    self.forget_page(pno);
                    return Ok(());
                };
                if !self.objects.contains_key(&h.obj)
                    && self.tombstones.get(&h.obj).is_some_and(|t| {
                        t.page == pno && !self.tomb_needed(h.obj, t.headers_on_flash, t.data_blocks)
                    })
                {
                    // A tombstone with nothing left to bury: drop it instead of copying.
                    self.tombstones.remove(&h.obj);
                    self.blocks.invalidate(pno);
                    return Ok(());
                }
                h.version = Serial::Full(rec.version);
                h.facts = Some(rec.facts(h.obj));
                (h.obj, 0)
            }
            Tags::Special(_) => {
                // A checkpoint or summary is never valid: a valid page that reads as one
                // was overwritten by damage (a page copied over it). Its owner loses it.
                self.forget_page(pno);
                return Ok(());
            }
        };
        if let Tags::Header(_) = tags {
            let len = Record::decode(&data).map_or(0, |r| r.encoded_len());
            data.truncate(len);
        }
        let hint = WriteHint {
            cause: WriteCause::Cleaning,
            obj,
            chunk,
            header: matches!(tags, Tags::Header(_)),
            old_page: Some(pno),
            partial: matches!(&tags, Tags::Data(d)
                if d.n_bytes.is_some_and(|n| n < self.layout.chunk_bytes)),
        };
        let new = self.program(hint, tags, &data)?;
        self.stats.pages_copied += 1;
        if self.repoint_page(&tags, pno, new) {
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
    pub(crate) fn repoint_page(&mut self, tags: &Tags, old: u32, new: u32) -> bool {
        let mut found = false;
        match *tags {
            Tags::Data(d) => {
                if let Some(o) = self.objects.get_mut(&d.obj) {
                    if o.chunks.get(d.chunk) == old {
                        o.chunks.set(d.chunk, new);
                        found = true;
                    }
                }
                if found {
                    self.touch_chunk(d.obj, d.chunk);
                }
            }
            Tags::Header(h) => {
                if let Some(o) = self.objects.get_mut(&h.obj) {
                    if o.header == old {
                        o.header = new;
                        found = true;
                    }
                }
                if let Some(t) = self.tombstones.get_mut(&h.obj) {
                    if t.page == old {
                        t.page = new;
                        found = true;
                    }
                }
            }
            Tags::Special(_) => {}
        }
        found
    }

    /// A valid page that cannot be copied: whoever owns it loses it (reads give EIO, a
    /// lost header is rewritten from RAM, or the object is marked for repair).
    pub(crate) fn forget_page(&mut self, pno: u32) {
        // Whoever owns it must be found: every map in RAM. (A map that fails to load
        // reports the damage itself when its file is next used.)
        let _ = self.map_all();
        self.blocks.invalidate(pno);
        let mut lost_headers = Vec::new();
        let mut lost_chunks = Vec::new();
        for (&ino, o) in self.objects.iter_mut() {
            if o.header == pno {
                o.header = NO_PAGE;
                o.set_dirty(true);
                lost_headers.push(ino);
            }
            if crate::rebuild::has_data(o.kind) {
                for (chunk, c) in o.chunks.entries() {
                    if c == pno {
                        o.chunks.set(chunk, LOST_PAGE);
                        lost_chunks.push((ino, chunk));
                    }
                }
            }
        }
        self.repairs.extend(lost_headers);
        for (ino, chunk) in lost_chunks {
            self.touch_chunk(ino, chunk);
        }
        let untombed = &mut self.untombed;
        self.tombstones.retain(|&ino, t| {
            if t.page == pno && t.data_blocks > 0 {
                untombed.insert(ino);
            }
            t.page != pno
        });
    }

    /// Erases a block and returns it to the empty pool; a block that fails goes bad.
    pub(crate) fn erase_block(&mut self, block: u32) -> Result<()> {
        let addr = self.layout.block_addr(block);
        self.settle()?;
        // Its stale pages need no deletion marker: they are about to go.
        self.blocks.forget_stale_in(block);
        self.meta_hook(|store, fs| store.before_erase(fs, block))?;
        match self.dev.get_mut().erase_block(addr) {
            Ok(()) => {
                self.meta_hook(|store, fs| {
                    store.block_event(fs, block, crate::meta::BlockEvent::Erased)
                })?;
                debug_assert_eq!(self.blocks.get(block).valid(), 0);
                self.blocks.update(block, |b| {
                    b.set_next_page(0);
                    b.base_serial = 0;
                    b.set_overhead(0);
                    b.flags = 0;
                });
                self.blocks.set_state(block, BlockState::Empty);
                self.forget_owners_in(block);
                Ok(())
            }
            Err(e) if e.is_media_failure() => self.retire_block(block),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Marks a block bad for good.
    pub(crate) fn retire_block(&mut self, block: u32) -> Result<()> {
        self.settle()?;
        // Its stale pages get no deletion marker: the block is never read again.
        self.blocks.forget_stale_in(block);
        self.meta_hook(|store, fs| store.before_erase(fs, block))?;
        self.meta_hook(|store, fs| store.block_event(fs, block, crate::meta::BlockEvent::Retired))?;
        match self.dev.get_mut().mark_bad(self.layout.block_addr(block)) {
            Ok(()) => {}
            Err(e) if !matches!(e, FlashError::PowerLost) => {}
            Err(e) => return Err(self.fail(e)),
        }
        self.blocks.set_state(block, BlockState::Bad);
        self.stats.blocks_retired += 1;
        self.forget_owners_in(block);
        Ok(())
    }

    /// The header and data pages of an erased block are gone: count them off, and drop
    /// tombstones that no longer bury anything.
    fn forget_owners_in(&mut self, block: u32) {
        let headers = self.blocks.take_headers(block);
        let data = self.blocks.data.take(block);
        let owners = headers.iter().map(|&o| (o, 1, 0));
        for (obj, h, d) in owners.chain(data.iter().map(|&o| (o, 0, 1))) {
            if let Some(o) = self.objects.get_mut(&obj) {
                o.headers_on_flash = o.headers_on_flash.saturating_sub(h);
                o.data_blocks = o.data_blocks.saturating_sub(d);
                continue;
            }
            let Some(t) = self.tombstones.get_mut(&obj) else {
                continue;
            };
            t.headers_on_flash = t.headers_on_flash.saturating_sub(h);
            t.data_blocks = t.data_blocks.saturating_sub(d);
            let t = *t;
            if !self.tomb_needed(obj, t.headers_on_flash, t.data_blocks) {
                self.tombstones.remove(&obj);
                self.blocks.invalidate(t.page);
            }
        }
    }

    /// Before the first write after a mount, any checkpoint on flash is erased: it would
    /// describe a state that no longer exists.
    pub(crate) fn erase_stale_checkpoint(&mut self) -> Result<()> {
        while let Some(b) = self.checkpoint_blocks.pop() {
            self.blocks.set_state(b, BlockState::Full);
            if self.blocks.get(b).valid() > 0 {
                // Live pages beside checkpoint pages (a damaged image: a scan trusts valid
                // pages wherever they are): cleaning copies them out before it erases.
                continue;
            }
            self.erase_block(b)?;
        }
        Ok(())
    }
}
