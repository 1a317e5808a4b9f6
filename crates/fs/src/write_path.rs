//! The flash write path: allocation of pages on write streams, block summaries, bad-block
//! handling, and the space rules that keep cleaning and the checkpoint always possible.
//!
//! Every block a stream fills ends with its summary (the tags of all its pages in one
//! page), except a block whose last page ends a run of one file's consecutive chunks that
//! started at most a couple of pages in: its last page's tags say so, and a mount needs no
//! summary for it. So writing a big file sequentially costs one program per chunk, while a
//! mount still reads about one page per full block.
//!
//! The small tag layout keeps 14 bits of each serial: a block without a summary must never
//! hold pages older than `SMALL_AGE_LIMIT` serials, so that a mount can rebuild the full
//! serials from the low bits. A stream's block that gets that old is sealed (given its
//! summary early); a mount seals the blocks a crash left open.

use nandkit_flash::{Flash, FlashError};

use crate::alloc::{WriteCause, WriteHint};
use crate::batch::Posted;
use crate::blocks::{BlockState, NO_SUMMARY, RETIRE};
use crate::error::{FsError, Result};
use crate::format::record::Record;
use crate::format::special::Special;
use crate::format::summary::{Summary, SummaryEntry};
use crate::format::tags::{
    HeaderTags, Serial, SpecialKind, SpecialTags, TagLayout, Tags, SMALL_SERIAL_BITS,
};
use crate::fs::{FileSystem, OpenBlock};
use crate::types::Ino;

/// Serials of slack kept below the small layout's window: room for the pages of every
/// block that may lack a summary when power fails (see `scan::serial_upper_bound`).
pub(crate) const SMALL_WINDOW_SLACK: u64 = 1024;
/// Small layout: how many serials a block may stay open without a summary.
pub(crate) const SMALL_AGE_LIMIT: u64 = (1 << SMALL_SERIAL_BITS) - SMALL_WINDOW_SLACK;
/// Large layout: a block whose last page ends a run that started at most this many pages
/// in needs no summary (a mount reads those few pages' tags instead).
const RUN_MAX_PREFIX_LARGE: u32 = 2;

/// Most bytes a header's summary entry takes (tag, object, version, facts).
const MAX_HEADER_ENTRY_BYTES: usize = 1 + 5 + 10 + 1 + 5 + 10;

/// Erased blocks that flushing already-accepted file data leaves alone: one for cleaning,
/// one for the headers deletes write.
pub(crate) const ACCEPTED_DATA_FLOOR: u32 = 2;

impl<F: Flash> FileSystem<F> {
    /// Most chunks the write cache may hold at once: what flushing them can take from the
    /// reserve. Past that, partial chunks are written through.
    pub(crate) fn cache_limit(&self) -> usize {
        let blocks = self
            .config
            .reserve_blocks
            .saturating_sub(ACCEPTED_DATA_FLOOR);
        if self.block_placed() {
            // Block-placed data: each cached chunk may need an erased block of its own
            // when flushed (a logical block new to its file, or a copy).
            return blocks as usize;
        }
        blocks as usize * (self.layout.pages_per_block as usize - 1)
    }

    pub(crate) fn take_serial(&mut self) -> u64 {
        let s = self.next_serial;
        self.next_serial += 1;
        s
    }

    /// Marks the file system dead after the device failed under it.
    pub(crate) fn fail(&self, e: FlashError) -> FsError {
        if matches!(e, FlashError::PowerLost) {
            self.dead.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        FsError::Flash(e)
    }

    /// Writes one header page for `ino`, giving `rec` its version. The caller updates the
    /// object's RAM state.
    pub(crate) fn write_header_page(&mut self, ino: Ino, rec: &mut Record) -> Result<u32> {
        if rec.encoded_len() > self.layout.chunk_bytes as usize {
            return Err(FsError::NameTooLong);
        }
        rec.version = self.take_serial();
        let bytes = rec.encode();
        let tags = Tags::Header(HeaderTags {
            obj: ino,
            version: Serial::Full(rec.version),
            facts: Some(rec.facts(ino)),
        });
        let hint = WriteHint::metadata(ino, self.header_page(ino));
        let pno = self.program(hint, tags, &bytes).inspect_err(|_| {
            self.give_back_serial(rec.version);
        })?;
        self.stats.header_pages_written += 1;
        Ok(pno)
    }

    /// Programs a page somewhere the allocator chooses, handling torn and failing pages,
    /// and marks it valid.
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
        if self.block_placed() && matches!(tags, Tags::Data(_)) {
            return self.program_placed(tags, data, accepted);
        }
        // YAFFS1: what earlier writes made stale is marked deleted first (each page's
        // replacement is on flash already). Its pages are never posted: a chunk's version
        // comes from the tags of the copy on flash it replaces.
        self.mark_stale_pages()?;
        // Data pages in a batch scope are posted; anything else is programmed now, after
        // whatever was posted (see `batch`).
        let post = self.batching() && matches!(tags, Tags::Data(_)) && !self.yaffs1_log();
        if !post {
            self.settle()?;
        }
        // YAFFS1: the chunk's version, one more than the copy it replaces (a cleaning copy
        // carries the victim's tags; anything else reads the current copy's).
        let version = match (&tags, self.yaffs1_log()) {
            (Tags::Data(d), true) => Some(match (hint.cause, d.serial) {
                (WriteCause::Cleaning, Serial::Low(v)) => crate::deletion_marks::version_after(v),
                _ => self.next_chunk_version(d.obj, d.chunk)?,
            }),
            _ => None,
        };
        let ppb = self.layout.pages_per_block;
        let mut erased_for_retry = false;
        loop {
            let stream = self.choose_stream(&hint);
            if let Some(s) = self.allocator.take_reassigned() {
                // The stream now belongs to another file: the block open there holds the
                // previous file's pages only, so it is closed (per-file allocation). Not
                // when data already accepted is being made durable on a device down to its
                // reserve: closing would cost a fresh block per file flushed, and sync
                // must work on a full device. The next file shares the block instead.
                if !(accepted && self.down_to_reserve()) {
                    self.close_stream(s)?;
                }
            }
            let block = self.active_block(stream, hint.cause, accepted)?;
            if self.seal_aged_streams()? {
                continue;
            }
            let page = self.blocks.get(block).next_page();
            let summaries = self.summarised();
            if page == ppb - 1 && summaries {
                // The last page: a data page ending a run, or the block's summary.
                match self.run_start(stream, &tags) {
                    Some(k) => {
                        if let Tags::Data(d) = &mut tags {
                            d.run_start = Some(k);
                        }
                    }
                    None => {
                        self.close_stream(stream)?;
                        continue;
                    }
                }
            } else {
                if let Tags::Data(d) = &mut tags {
                    d.run_start = None;
                }
                if summaries && !self.summary_has_room(stream, &tags, data.len()) {
                    // This page's entry would not fit the block's summary page: the
                    // entries so far get theirs here, and a new segment starts.
                    self.write_segment_summary(stream)?;
                    continue;
                }
            }
            // A data page's serial is given now, after any cleaning this write set off:
            // the newest version of a chunk must have the highest serial.
            if let Tags::Data(d) = &mut tags {
                let serial = self.take_serial();
                d.serial = match version {
                    Some(v) => Serial::Low(v),
                    None => Serial::Full(serial),
                };
            }
            let (buf, oob) = self.layout.encode_page(&tags, data);
            let addr = self.layout.block_addr(block).page(page);
            if let Tags::Data(d) = &tags {
                // Before the program: a page that fails may still read back.
                self.count_data(block, d.obj);
            }
            let result = if post {
                // What the chunk maps to now (the caller repoints it once this returns):
                // restored if the page can be written nowhere (see `batch::redo`).
                let replaced = match &tags {
                    Tags::Data(d) => self
                        .objects
                        .get(&d.obj)
                        .map_or(crate::object::NO_PAGE, |o| o.chunks.get(d.chunk)),
                    _ => crate::object::NO_PAGE,
                };
                self.post(Posted {
                    pno: self.layout.pno(block, page),
                    page: buf,
                    oob,
                    replaced,
                });
                Ok(())
            } else {
                self.dev.get_mut().program_page(addr, &buf, &oob)
            };
            match result {
                Ok(()) => {
                    self.blocks.update(block, |b| b.advance());
                    let pno = self.layout.pno(block, page);
                    self.blocks.set_valid(pno);
                    self.allocator.placed(&hint, stream, pno);
                    if let Tags::Header(h) = &tags {
                        self.blocks.add_header(block, h.obj);
                        self.count_header(h.obj);
                    }
                    if let Some(e) = summaries
                        .then(|| self.summary_entry(&tags, data.len()))
                        .flatten()
                    {
                        let base = self.blocks.get(block).base_serial;
                        if let Some(open) = self.streams[stream].as_mut() {
                            open.push(e, base, self.layout.chunk_bytes);
                        }
                    }
                    if page == ppb - 1 {
                        // Ended by a run (or the store keeps no summaries): full without
                        // a summary page.
                        self.blocks.set_state(block, BlockState::Full);
                        self.streams[stream] = None;
                    }
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
                    self.spoil_page(stream, block);
                }
                Err(e) if e.is_media_failure() => {
                    self.blocks.update(block, |b| {
                        b.advance();
                        b.flags |= RETIRE | NO_SUMMARY;
                    });
                    self.streams[stream] = None;
                    self.blocks.set_state(block, BlockState::Full);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
    }

    /// The allocator's stream for `hint`, except for a cleaning copy while erased blocks
    /// are scarce: a stream without an open block would take a fresh block for it, and
    /// cleaning one victim into every stream at once could need more blocks than are
    /// erased. Then the copy goes to a stream that has an open block (its class is lost
    /// for that page; space is not). With one stream this is always the allocator's.
    fn choose_stream(&mut self, hint: &WriteHint) -> usize {
        let want = self.allocator.stream_for(hint);
        let scarce = self.blocks.empty() as usize <= self.streams.len();
        if hint.cause == WriteCause::Cleaning && scarce && self.streams[want].is_none() {
            if let Some(open) = self.streams.iter().position(Option::is_some) {
                return open;
            }
        }
        want
    }

    /// Erased blocks new user data and new objects leave alone: cleaning's reserve and the
    /// checkpoint's.
    fn reserved_blocks(&self) -> u32 {
        self.config.reserve_blocks + self.checkpoint_reserve_blocks()
    }

    /// Erased blocks are down to the reserves: new user data may not open a block.
    fn down_to_reserve(&self) -> bool {
        self.blocks.empty() <= self.reserved_blocks()
    }

    /// The page holding `ino`'s current header, if it has one on flash.
    fn header_page(&self, ino: Ino) -> Option<u32> {
        let o = self.objects.get(&ino)?;
        (o.header != crate::object::NO_PAGE).then_some(o.header)
    }

    /// One more header page of `ino` is on flash.
    fn count_header(&mut self, ino: Ino) {
        self.newest_header_ino = self.newest_header_ino.max(ino);
        if let Some(o) = self.objects.get_mut(&ino) {
            o.headers_on_flash += 1;
        } else if let Some(t) = self.tombstones.get_mut(&ino) {
            t.headers_on_flash += 1;
        }
    }

    /// A data page of `ino` is being programmed in `block` (see `blocks::data_owners`).
    fn count_data(&mut self, block: u32, ino: Ino) {
        if !self.tracks_data_owners() || !self.blocks.data.add(block, ino) {
            return;
        }
        if let Some(o) = self.objects.get_mut(&ino) {
            o.data_blocks += 1;
        } else if let Some(t) = self.tombstones.get_mut(&ino) {
            t.data_blocks += 1;
        }
    }

    /// A page of an open block turned out torn by an earlier cut: it is skipped.
    fn spoil_page(&mut self, stream: usize, block: u32) {
        let ppb = self.layout.pages_per_block;
        self.blocks.update(block, |b| b.advance());
        self.stats.pages_spoiled += 1;
        let base = self.blocks.get(block).base_serial;
        if let Some(open) = self.streams[stream].as_mut() {
            open.push(SummaryEntry::Garbage, base, self.layout.chunk_bytes);
        }
        if self.blocks.get(block).next_page() >= ppb {
            self.blocks.update(block, |b| b.flags |= NO_SUMMARY);
            self.blocks.set_state(block, BlockState::Full);
            self.streams[stream] = None;
        }
    }

    /// Whether the stream's pending summary still fits one page with the entry of a page
    /// about to be written (its serial not yet taken: the next one).
    fn summary_has_room(&self, stream: usize, tags: &Tags, len: usize) -> bool {
        let Some(open) = self.streams[stream].as_ref() else {
            return true;
        };
        let mut tags = *tags;
        if let Tags::Data(d) = &mut tags {
            d.serial = Serial::Full(self.next_serial);
        }
        let base = self.blocks.get(open.block).base_serial;
        let page = self.layout.chunk_bytes;
        let extra = self
            .summary_entry(&tags, len)
            .map_or(0, |e| Summary::entry_len(&e, base, page));
        Summary::fits(open.pending.len() + 1, open.pending_bytes + extra, page)
    }

    /// Writes the summary of the stream's pages since its last summary at the next page,
    /// leaving the block open (see `format::summary`: segments).
    fn write_segment_summary(&mut self, stream: usize) -> Result<()> {
        self.settle()?;
        let Some(open) = self.streams[stream].as_mut() else {
            return Ok(());
        };
        let block = open.block;
        let summary = Summary {
            base_serial: self.blocks.get(block).base_serial,
            entries: std::mem::take(&mut open.pending),
        };
        open.pending_bytes = 0;
        let ended = self.write_summary_page(block, &summary, false)?;
        if ended {
            self.streams[stream] = None;
        }
        Ok(())
    }

    /// What a block's summary says of a page just written.
    fn summary_entry(&self, tags: &Tags, len: usize) -> Option<SummaryEntry> {
        match *tags {
            Tags::Data(d) => Some(SummaryEntry::Data {
                obj: d.obj,
                chunk: d.chunk,
                n_bytes: d.n_bytes.unwrap_or(len as u32),
                serial: d.serial.full().expect("written with a full serial"),
            }),
            Tags::Header(h) => Some(SummaryEntry::Header {
                obj: h.obj,
                version: h.version.full().expect("written with a full version"),
                facts: h.facts,
            }),
            Tags::Special(_) => None,
        }
    }

    /// Small layout: seals every stream's open block that has reached the age at which a
    /// mount could no longer rebuild its pages' serials (any stream: a block of a cold
    /// stream ages while others write). True if it sealed one.
    fn seal_aged_streams(&mut self) -> Result<bool> {
        if self.layout.tags != TagLayout::Small || !self.summarised() {
            return Ok(false);
        }
        let mut sealed = false;
        for stream in 0..self.streams.len() {
            let Some(open) = &self.streams[stream] else {
                continue;
            };
            let b = self.blocks.get(open.block);
            if b.next_page() > 0
                && self.next_serial.saturating_sub(b.base_serial) >= SMALL_AGE_LIMIT
            {
                self.close_stream(stream)?;
                sealed = true;
            }
        }
        Ok(sealed)
    }

    /// Makes sure `pages` header writes for `ino` fit the metadata stream's open block, so
    /// that they open no block and so set off no cleaning: if the open block is too full
    /// (or, on the small layout, close to its age limit), it is closed now and a new one
    /// opened, cleaning as usual. (A punch needs this: see `punch`.)
    pub(crate) fn room_for_headers(&mut self, ino: Ino, pages: u32) -> Result<()> {
        self.check_writable()?;
        if !self.metadata_on_flash() {
            return Ok(()); // headers take no pages
        }
        self.erase_stale_checkpoint()?;
        let hint = WriteHint::metadata(ino, self.header_page(ino));
        let ppb = self.layout.pages_per_block;
        loop {
            let stream = self.allocator.stream_for(&hint);
            let block = self.active_block(stream, WriteCause::Metadata, false)?;
            let b = self.blocks.get(block);
            let aged = self.summarised()
                && self.layout.tags == TagLayout::Small
                && b.next_page() > 0
                && (self.next_serial + u64::from(pages) + 1).saturating_sub(b.base_serial)
                    >= SMALL_AGE_LIMIT;
            // The header pages, and the summary after them on the last page; and their
            // entries must fit the pending summary, or a segment summary would take a page.
            let fits = !self.summarised()
                || self.streams[stream].as_ref().is_none_or(|open| {
                    Summary::fits(
                        open.pending.len() + pages as usize,
                        open.pending_bytes + pages as usize * MAX_HEADER_ENTRY_BYTES,
                        self.layout.chunk_bytes,
                    )
                });
            if !aged && fits && b.next_page() + pages < ppb {
                return Ok(());
            }
            self.close_stream(stream)?;
        }
    }

    /// Returns a serial taken for a page that was never written, when nothing was taken
    /// since: a run of refused writes does not eat the small layout's serial window.
    pub(crate) fn give_back_serial(&mut self, s: u64) {
        if self.next_serial == s + 1 {
            self.next_serial = s;
        }
    }

    /// If `tags` (about to go to the last page of the stream's block) ends a run of one
    /// file's consecutive chunks with consecutive serials, all full, that started at most
    /// the layout's prefix in: where it starts.
    fn run_start(&self, stream: usize, tags: &Tags) -> Option<u32> {
        let Tags::Data(d) = tags else {
            return None;
        };
        let open = self.streams[stream].as_ref()?;
        let ppb = self.layout.pages_per_block;
        let page_size = self.layout.chunk_bytes;
        // The serial this page will get.
        let serial = self.next_serial;
        // The small layout keeps 14 serial bits: a full block needs its summary to say the
        // rest, so it never ends in a run.
        if self.layout.tags == TagLayout::Small {
            return None;
        }
        let max_prefix = RUN_MAX_PREFIX_LARGE;
        let mut start = ppb - 1;
        for (i, e) in open.pending.iter().enumerate().rev() {
            let back = u64::from(ppb - 1) - i as u64;
            let fits = matches!(*e, SummaryEntry::Data { obj, chunk, n_bytes, serial: s }
                if obj == d.obj
                    && u64::from(chunk) + back == u64::from(d.chunk)
                    && s + back == serial
                    && n_bytes == page_size);
            if !fits {
                break;
            }
            start = i as u32;
        }
        (start <= max_prefix && open.pending.len() as u32 == ppb - 1).then_some(start)
    }

    /// Writes the summary of a stream's open block (at its next page) and closes it.
    pub(crate) fn close_stream(&mut self, stream: usize) -> Result<()> {
        // Posted pages of this block go first; a failure among them may close it.
        self.settle()?;
        let Some(open) = self.streams[stream].take() else {
            return Ok(());
        };
        if !self.summarised() {
            // No summaries: the block is simply done.
            self.blocks.set_state(open.block, BlockState::Full);
            return Ok(());
        }
        let summary = Summary {
            base_serial: self.blocks.get(open.block).base_serial,
            entries: open.pending,
        };
        self.write_summary(open.block, &summary)
    }

    /// Gives a block its summary at its next free page (the last page of a full block, or
    /// an earlier one when sealing) and marks it full. A block the summary cannot be
    /// written to is flagged, so cleaning reclaims it first.
    pub(crate) fn write_summary(&mut self, block: u32, summary: &Summary) -> Result<()> {
        self.write_summary_page(block, summary, true).map(|_| ())
    }

    /// Writes a summary at the block's next free page. `last`: the block is full after it;
    /// otherwise it stays open unless it has no page left after the summary (or failed).
    /// True if the block is full now.
    fn write_summary_page(&mut self, block: u32, summary: &Summary, last: bool) -> Result<bool> {
        let ppb = self.layout.pages_per_block;
        let mut summary = summary.clone();
        loop {
            let page = self.blocks.get(block).next_page();
            if page >= ppb {
                self.blocks.update(block, |b| b.flags |= NO_SUMMARY);
                self.blocks.set_state(block, BlockState::Full);
                return Ok(true);
            }
            let special = summary
                .to_special(self.layout.chunk_bytes as usize)
                .ok_or(FsError::Invalid("a block summary does not fit a page"))?;
            let tags = Tags::Special(SpecialTags {
                kind: SpecialKind::Summary,
            });
            let (buf, oob) = self.layout.encode_page(&tags, &special.encode());
            let addr = self.layout.block_addr(block).page(page);
            self.settle()?;
            match self.dev.get_mut().program_page(addr, &buf, &oob) {
                Ok(()) => {
                    self.blocks.update(block, |b| {
                        b.advance();
                        b.set_overhead(b.overhead() + 1);
                    });
                    self.stats.summary_pages_written += 1;
                    if !last && page + 1 < ppb {
                        return Ok(false);
                    }
                    self.blocks.set_state(block, BlockState::Full);
                    if page + 1 < ppb {
                        self.stats.blocks_sealed += 1;
                    }
                    return Ok(true);
                }
                Err(FlashError::NotErased(_)) => {
                    self.blocks.update(block, |b| b.advance());
                    self.stats.pages_spoiled += 1;
                    summary.entries.push(SummaryEntry::Garbage);
                }
                Err(e) if e.is_media_failure() => {
                    self.blocks.update(block, |b| {
                        b.advance();
                        b.flags |= RETIRE | NO_SUMMARY;
                    });
                    self.blocks.set_state(block, BlockState::Full);
                    return Ok(true);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
    }

    /// Blocks kept erased for the checkpoint a clean unmount writes (statfs leaves them
    /// out): enough for the checkpoint of the file system as it is now, and one more.
    pub(crate) fn checkpoint_reserve_blocks(&self) -> u32 {
        if !self.config.checkpoint {
            return 0;
        }
        let objects = self.objects.len() as u64;
        let headers = self.blocks.header_total() + self.tombstones.len() as u64;
        let bytes = 256
            + u64::from(self.layout.blocks) * 16
            + objects * 40
            + headers * 5
            + self.blocks.data.pairs() * 5
            + self.blocks.valid_total() * 6;
        let per_block = u64::from(self.layout.pages_per_block)
            * Special::capacity(self.layout.chunk_bytes as usize) as u64;
        (bytes.div_ceil(per_block) + 1) as u32
    }

    /// The open block of a stream, opening (and first making room for) a new one if needed.
    fn active_block(&mut self, stream: usize, cause: WriteCause, accepted: bool) -> Result<u32> {
        let new_data = cause == WriteCause::UserData && !accepted;
        let keep = self.reserved_blocks();
        if new_data && self.blocks.empty() < keep {
            // Metadata may take a block out of the reserve and leave it open on a stream
            // user data shares: new user data must not follow it there.
            self.clean_while_empty_at_most(keep - 1)?;
        }
        if let Some(open) = &self.streams[stream] {
            return Ok(open.block);
        }
        if matches!(cause, WriteCause::UserData | WriteCause::Metadata) {
            self.make_room(stream, cause, accepted)?;
            // Cleaning may have opened a block for this stream meanwhile.
            if let Some(open) = &self.streams[stream] {
                return Ok(open.block);
            }
        }
        let block = self.find_empty().ok_or(FsError::NoSpace)?;
        self.meta_hook(|store, fs| store.block_event(fs, block, crate::meta::BlockEvent::Opened))?;
        self.blocks.set_state(block, BlockState::Active);
        let base = self.next_serial.saturating_sub(1);
        self.blocks.update(block, |b| {
            b.base_serial = base;
            b.set_next_page(0);
            b.set_overhead(0);
        });
        self.streams[stream] = Some(OpenBlock::new(
            block,
            Vec::new(),
            base,
            self.layout.chunk_bytes,
        ));
        Ok(block)
    }

    pub(crate) fn find_empty(&mut self) -> Option<u32> {
        let n = self.layout.blocks;
        for k in 0..n {
            let b = (self.alloc_cursor + k) % n;
            if self.blocks.get(b).state == BlockState::Empty {
                self.alloc_cursor = (b + 1) % n;
                return Some(b);
            }
        }
        None
    }

    /// Cleans until a new block may be opened for `cause`. New user data leaves the
    /// reserves alone (cleaning's and the checkpoint's); data a `write` already accepted
    /// may use all but two erased blocks, and metadata (which deletes need, to free space
    /// on a full device) all but the last one, which cleaning itself needs: on a device
    /// that full the checkpoint may not fit at unmount, and the next mount scans.
    fn make_room(&mut self, stream: usize, cause: WriteCause, accepted: bool) -> Result<()> {
        if let Some(victim) = self.pick_victim(crate::clean::Need::Opportunistic)? {
            self.clean_block(victim)?;
        }
        let floor = match cause {
            WriteCause::UserData if accepted => ACCEPTED_DATA_FLOOR.min(self.config.reserve_blocks),
            WriteCause::UserData => {
                let keep = self.reserved_blocks();
                return self.clean_while_empty_at_most(keep);
            }
            _ => 1,
        };
        while self.blocks.empty() <= floor {
            // Cleaning copies into this stream's block too: once it has opened one, metadata
            // and accepted data can go there (new user data keeps to the reserve rule).
            if self.streams[stream].is_some() {
                return Ok(());
            }
            self.absorb_scrubs();
            match self.pick_victim(crate::clean::Need::Space)? {
                Some(victim) => self.clean_block(victim)?,
                None => return Err(FsError::NoSpace),
            }
        }
        Ok(())
    }

    /// Cleans until more than `floor` blocks are erased, or fails with ENOSPC.
    pub(crate) fn clean_while_empty_at_most(&mut self, floor: u32) -> Result<()> {
        self.absorb_scrubs();
        while self.blocks.empty() <= floor {
            match self.pick_victim(crate::clean::Need::Space)? {
                Some(victim) => self.clean_block(victim)?,
                None => return Err(FsError::NoSpace),
            }
        }
        Ok(())
    }

    /// Called before a new object's first header is written. New objects, like user data,
    /// leave the reserves alone (YAFFS lets only rewrites of existing headers use them), so
    /// that on a device full of objects a delete can still write its tombstone.
    pub(crate) fn make_room_for_new_object(&mut self) -> Result<()> {
        self.check_writable()?;
        self.erase_stale_checkpoint()?;
        let keep = self.reserved_blocks();
        if self.blocks.empty() < keep {
            self.clean_while_empty_at_most(keep - 1)?;
        }
        Ok(())
    }
}
