//! Batches: pages handed to the device together, so that on an array of chips (MA, seen
//! through its striped view) they program or read in parallel instead of one after another.
//!
//! Writes. Inside a batch scope (`in_batch`), a data page the write path places is not
//! programmed at once: it is posted, with all the bookkeeping of a programmed page already
//! done (block state, valid bit, summary entry, the owner's chunk map). The posted pages go
//! to the device as one submit when the scope ends, when enough have gathered
//! (`settle_if_full`, between chunks), and before any other device operation (`settle`:
//! every read, header, summary, erase and checkpoint page waits for them), so flash never
//! sees a page out of its block's order and nothing reads a page not yet programmed. A
//! scope ends only after its pages are programmed: durability is unchanged (fsync and
//! O_SYNC writes return after their pages are on flash).
//!
//! The device programs a batch in the order it was given, so a power cut inside one leaves
//! the same shapes a cut between single programs does: the pages before the cut programmed,
//! the one in flight torn, the rest never programmed. Other failures are known only when
//! the batch completes; each failed page is written again elsewhere (a later serial, so it
//! wins over the failed copy) and its owner repointed, as cleaning does. The block it
//! failed in is closed without a summary (a mount reads it page by page), and retired if
//! the failure was the medium's.
//!
//! Reads. `read_pages` fetches several pages in one submit (a multi-chunk read, cleaning's
//! valid pages).

use nandkit_flash::{Command, Flash, FlashError, Reply};

use crate::blocks::{BlockState, NO_SUMMARY, RETIRE};
use crate::error::Result;
use crate::format::tags::{Serial, Tags};
use crate::fs::FileSystem;
use crate::object::{LOST_PAGE, NO_PAGE};

/// A whole page as read: data, OOB, and whether ECC could correct it.
pub(crate) type RawPage = (Vec<u8>, Vec<u8>, bool);

/// A page placed but not yet programmed.
pub(crate) struct Posted {
    pub pno: u32,
    pub page: Vec<u8>,
    pub oob: Vec<u8>,
    /// The page (or `NO_PAGE`, `LOST_PAGE`) the chunk mapped to before this one. No erase
    /// happens before the batch settles, so a replaced page is still on flash until then.
    pub replaced: u32,
}

/// The posted pages and how deep the batch scopes are nested.
#[derive(Default)]
pub(crate) struct Batch {
    depth: u32,
    posted: Vec<Posted>,
    /// Set while posted pages are being submitted and their failures redone: pages
    /// written then go to the device at once.
    settling: bool,
}

impl<F: Flash> FileSystem<F> {
    /// Runs `body` with data page programs batched; everything it posted is programmed
    /// before this returns (or the file system is dead).
    pub(crate) fn in_batch<T>(&mut self, body: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.batch.depth += 1;
        let out = body(self);
        self.batch.depth -= 1;
        let settled = if self.batch.depth == 0 {
            self.settle()
        } else {
            Ok(())
        };
        let v = out?;
        settled?;
        Ok(v)
    }

    /// Whether a data page placed now may be posted instead of programmed.
    pub(crate) fn batching(&self) -> bool {
        self.batch.depth > 0 && !self.batch.settling
    }

    pub(crate) fn post(&mut self, p: Posted) {
        self.batch.posted.push(p);
    }

    /// Programs the posted pages if a batch's worth has gathered. Called between whole
    /// chunks, when every posted page's owner already points at it.
    pub(crate) fn settle_if_full(&mut self) -> Result<()> {
        if self.batch.posted.len() >= self.batch_pages() {
            self.settle()?;
        }
        Ok(())
    }

    /// Pages per submit: a block of the device as the file system sees it, which on an
    /// array is a block of every chip, so each chip gets a block's worth of work.
    fn batch_pages(&self) -> usize {
        self.layout.pages_per_block as usize
    }

    /// Programs every posted page, in the order posted, as one batch; then writes again
    /// elsewhere any that failed.
    pub(crate) fn settle(&mut self) -> Result<()> {
        self.absorb_scrubs();
        if self.batch.posted.is_empty() || self.batch.settling {
            return Ok(());
        }
        let posted = std::mem::take(&mut self.batch.posted);
        if self.is_dead() {
            // The device is gone; what was posted was never promised durable.
            return Ok(());
        }
        let commands = posted
            .iter()
            .map(|p| Command::Program {
                addr: self.layout.page_addr(p.pno),
                data: p.page.clone(),
                oob: p.oob.clone(),
            })
            .collect();
        let done = self.dev.get_mut().submit(commands);
        let mut failed = Vec::new();
        for (p, c) in posted.into_iter().zip(done) {
            match c.result {
                Ok(_) => {}
                Err(FlashError::PowerLost) => return Err(self.fail(FlashError::PowerLost)),
                Err(e) => failed.push((p, e)),
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        self.batch.settling = true;
        let out = self.redo(failed);
        self.batch.settling = false;
        out
    }

    /// Writes each failed page again (see the module comment).
    fn redo(&mut self, failed: Vec<(Posted, FlashError)>) -> Result<()> {
        for (p, e) in &failed {
            let block = self.layout.block_of(p.pno);
            let media = e.is_media_failure();
            if matches!(e, FlashError::NotErased(_)) {
                self.stats.pages_spoiled += 1;
            }
            self.blocks.update(block, |b| {
                b.flags |= NO_SUMMARY;
                if media {
                    b.flags |= RETIRE;
                }
            });
            for stream in 0..self.streams.len() {
                if self.streams[stream]
                    .as_ref()
                    .is_some_and(|o| o.block == block)
                {
                    self.streams[stream] = None;
                }
            }
            if self.blocks.get(block).state == BlockState::Active {
                self.blocks.set_state(block, BlockState::Full);
            }
        }
        // Every failed page stops counting as valid before any is written again: writing
        // one may set off cleaning, which must not take the others for pages on flash
        // (it would copy what the failed program left there, or lose them as unreadable).
        let mut again = Vec::new();
        for (p, _) in failed {
            if !self.blocks.is_valid(p.pno) {
                continue; // overwritten or dropped since it was posted
            }
            let replaced = p.replaced;
            let Some(read) = self.parse_page(p.page, &p.oob, true) else {
                continue;
            };
            let mut tags = read.tags;
            let hint = match &mut tags {
                Tags::Data(d) => {
                    d.serial = Serial::Full(0);
                    d.run_start = None;
                    // The page it replaced is not known here (a rare retry): placed as new.
                    crate::alloc::WriteHint::user_data(d.obj, d.chunk, None)
                }
                // Only data pages are posted.
                _ => continue,
            };
            self.blocks.invalidate(p.pno);
            again.push((p.pno, replaced, hint, tags, read.data));
        }
        let mut again = again.into_iter();
        while let Some((old, replaced, hint, tags, data)) = again.next() {
            match self.program_accepted(hint, tags, &data) {
                Ok(new) => {
                    if !self.repoint_page(&tags, old, new) {
                        self.blocks.invalidate(new);
                    }
                }
                Err(e) => {
                    // No room to write it anywhere (blocks worn out): this page and the
                    // ones not yet written again go back to what their chunks held
                    // before, still on flash, so nothing points into the failed block.
                    self.restore_replaced(&tags, old, replaced);
                    for (old, replaced, _, tags, _) in again {
                        self.restore_replaced(&tags, old, replaced);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Points a chunk that `failed` (a page never programmed) was to replace back at
    /// `replaced`, if it still points at `failed`.
    fn restore_replaced(&mut self, tags: &Tags, failed: u32, replaced: u32) {
        let Tags::Data(d) = tags else {
            return;
        };
        let Some(o) = self.objects.get_mut(&d.obj) else {
            return;
        };
        if o.chunks.get(d.chunk) != failed {
            return;
        }
        o.chunks.set(d.chunk, replaced);
        self.touch_chunk(d.obj, d.chunk);
        self.reserves
            .chunk_changed(d.obj, d.chunk, failed, replaced);
        if replaced != NO_PAGE && replaced != LOST_PAGE {
            self.blocks.set_valid(replaced);
        }
    }

    /// Whether no page is posted: what a shared reader relies on (batch scopes need
    /// `&mut self` and settle before they end).
    pub(crate) fn settled(&self) -> bool {
        self.batch.posted.is_empty()
    }

    /// Reads whole pages in one submit: (data, OOB, ECC ok) per page, in order.
    pub(crate) fn read_pages(&mut self, pnos: &[u32]) -> Result<Vec<RawPage>> {
        self.settle()?;
        self.read_pages_now(pnos)
    }

    /// `read_pages` for a shared reader, with nothing posted.
    pub(crate) fn read_pages_now(&self, pnos: &[u32]) -> Result<Vec<RawPage>> {
        // One page (each 4 KiB read through the mount): the device's single read, without
        // a batch's bookkeeping. Same timing and power checks; an uncorrectable page comes
        // back zeroed as from a batch.
        if let [pno] = *pnos {
            let (mut page, mut oob, ok) = self.read_full_now(pno)?;
            if !ok {
                page.fill(0);
                oob.fill(0);
            }
            return Ok(vec![(page, oob, ok)]);
        }
        self.check_alive()?;
        debug_assert!(self.settled(), "a shared read with pages posted");
        let commands = pnos
            .iter()
            .map(|&pno| Command::Read {
                addr: self.layout.page_addr(pno),
            })
            .collect();
        let g = self.layout.geometry;
        let mut out = Vec::with_capacity(pnos.len());
        let done = self.dev.lock().submit(commands);
        for (&pno, c) in pnos.iter().zip(done) {
            match c.result {
                Ok(Reply::Read { data, oob, ecc }) => {
                    self.note_ecc(pno, ecc);
                    out.push((data, oob, true));
                }
                Ok(_) => {
                    return Err(crate::error::FsError::Io(format!(
                        "page {pno}: the device answered a read without a page"
                    )))
                }
                Err(FlashError::Uncorrectable { .. }) => out.push((
                    vec![0u8; g.page_size_bytes as usize],
                    vec![0u8; g.oob_size_bytes as usize],
                    false,
                )),
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(out)
    }
}
