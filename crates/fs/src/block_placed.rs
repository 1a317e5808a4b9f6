//! MNFS's data placement (with the iBAT, `blocks::ibat`): a file's data lives in erase
//! blocks of its own, chunk `c` at page `c % ppb` of the block that holds its logical
//! block `c / ppb`. Every data page's tags name the file and the chunk, so a block's first
//! (or last) spare area says whose logical block it is: allocation and data go to flash in
//! one page program, and a mount rebuilds the whole table from one spare area per block
//! (`scan_ibat`), as the MNFS paper's iBAT does.
//!
//! Pages of a block are programmed in order, so the rules are block mapping's:
//! - a chunk past the block's last written page is appended; a gap before it is padded
//!   with zero pages (the chunks there were holes, and read as zeros either way);
//! - a chunk whose page is written already (an overwrite, a file's partial tail written
//!   again) makes a copy of the block: a fresh block gets every page of the old one, the
//!   new chunk in its place, pads for pages that held nothing live, and the next
//!   generation; then the old block is erased. (The SmartCard scheme the MNFS paper cites;
//!   its cost, a block's worth of reads and programs and an erase, is MNFS's trade for a
//!   4-byte-a-block map.)
//! - a block is never moved by cleaning, only copied this way when it fails or needs a
//!   scrub, and erased when its file no longer holds any of it.
//!
//! Crash rules. A copy is written whole before the old block is erased, and it has at
//! least as many pages as the old one; so when a mount finds two blocks for one logical
//! block, the newer generation wins if it has as many pages as the older, and the older
//! wins otherwise (the copy was cut short). A shrink that leaves pages past the new end in
//! the file's last block copies that block without them, so that no later growth of the
//! file can bring stale data back.

use nandkit_flash::{Flash, FlashError};

use crate::blocks::{BlockState, RETIRE};
use crate::error::{FsError, Result};
use crate::format::tags::{DataTags, Serial, TagRead, Tags};
use crate::fs::FileSystem;
use crate::object::{LOST_PAGE, NO_PAGE};
use crate::types::Ino;

/// What `nandkit info` shows of an iBAT.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IbatReport {
    /// Blocks holding file data (a word each).
    pub data_blocks: u32,
    /// Blocks the word cannot describe, kept exactly (the directory-entry log's).
    pub exact_blocks: u32,
    /// Heap bytes of the whole table.
    pub table_bytes: u64,
    /// Objects with data, and the data blocks they hold: fewest, most.
    pub files: u64,
    pub blocks_per_file_min: u32,
    pub blocks_per_file_max: u32,
}

/// Where a file's logical block lives.
enum Placed {
    /// Nowhere yet.
    Nowhere,
    /// In this data block, at its pages' places.
    Block(u32),
    /// Somewhere the rules do not hold (never written by this placement): the next write
    /// copies it into a block of its own.
    Astray,
}

/// What became of a program in a data block.
enum Programmed {
    Done(u32),
    /// The block cannot take it (a torn page, a failing block): go elsewhere.
    Refused,
}

fn is_page(p: u32) -> bool {
    p != NO_PAGE && p != LOST_PAGE
}

impl<F: Flash> FileSystem<F> {
    /// The iBAT in figures (`None` for a profile without one). Counts objects whose map is
    /// in RAM (`load_everything` first for all).
    pub fn ibat_report(&self) -> Option<IbatReport> {
        let t = self.blocks.ibat()?;
        let (data_blocks, exact_blocks) = t.counts();
        let ppb = self.layout.pages_per_block;
        let mut r = IbatReport {
            data_blocks,
            exact_blocks,
            table_bytes: self.blocks.heap_bytes() as u64,
            blocks_per_file_min: u32::MAX,
            ..IbatReport::default()
        };
        for o in self.objects.values() {
            let mut blocks: Vec<u32> = o
                .chunks
                .runs()
                .iter()
                .filter(|r| is_page(r.1))
                .flat_map(|&(_, p, n)| p / ppb..=(p + n - 1) / ppb)
                .collect();
            if blocks.is_empty() {
                continue;
            }
            blocks.sort_unstable();
            blocks.dedup();
            let n = blocks.len() as u32;
            r.files += 1;
            r.blocks_per_file_min = r.blocks_per_file_min.min(n);
            r.blocks_per_file_max = r.blocks_per_file_max.max(n);
        }
        if r.files == 0 {
            r.blocks_per_file_min = 0;
        }
        Some(r)
    }

    /// Programs one chunk of file data at its place; the chunk's map entry points at the
    /// page when this returns (the old page, if any, is no longer valid).
    pub(crate) fn program_placed(
        &mut self,
        tags: Tags,
        data: &[u8],
        accepted: bool,
    ) -> Result<u32> {
        let Tags::Data(d) = tags else {
            return Err(FsError::Invalid("only file data is placed by block"));
        };
        self.settle()?;
        let ppb = self.layout.pages_per_block;
        let (lb, k) = (d.chunk / ppb, d.chunk % ppb);
        let block = match self.placed(d.obj, lb) {
            // Appended past the block's last written page, or the block copied.
            Placed::Block(b) if k >= self.blocks.get(b).next_page() => Some(b),
            Placed::Block(_) | Placed::Astray => None,
            Placed::Nowhere => Some(self.open_data_block(accepted, 0)?),
        };
        if let Some(b) = block {
            if let Some(pno) = self.append_placed(b, d, data)? {
                return Ok(pno);
            }
        }
        // Refused, an overwrite, or astray: a copy takes the chunk.
        self.copy_placed(d.obj, lb, Some((d, data)))
    }

    /// Where logical block `lb` of `ino` lives, from the file's map.
    fn placed(&self, ino: Ino, lb: u32) -> Placed {
        let ppb = self.layout.pages_per_block;
        let Some(o) = self.objects.get(&ino) else {
            return Placed::Nowhere;
        };
        let mut found = Placed::Nowhere;
        for j in 0..ppb {
            let p = o.chunks.get(lb * ppb + j);
            if !is_page(p) {
                continue;
            }
            let b = p / ppb;
            match found {
                Placed::Nowhere if p % ppb == j && self.blocks.is_data_block(b) => {
                    found = Placed::Block(b)
                }
                Placed::Block(x) if x == b && p % ppb == j => {}
                _ => return Placed::Astray,
            }
        }
        found
    }

    /// Opens an erased block for file data, leaving the reserves alone for new data (a
    /// copy or data already accepted may go down to the last two erased blocks).
    fn open_data_block(&mut self, accepted: bool, generation: u8) -> Result<u32> {
        let floor = if accepted {
            crate::write_path::ACCEPTED_DATA_FLOOR.min(self.config.reserve_blocks)
        } else {
            self.config.reserve_blocks
        };
        self.clean_while_empty_at_most(floor)?;
        let block = self.find_empty().ok_or(FsError::NoSpace)?;
        self.meta_hook(|store, fs| store.block_event(fs, block, crate::meta::BlockEvent::Opened))?;
        self.blocks.update(block, |b| {
            b.base_serial = 0;
            b.set_next_page(0);
            b.set_overhead(0);
        });
        self.blocks.set_state(block, BlockState::Full);
        self.blocks.set_data_block(block, true);
        self.blocks.set_generation(block, generation);
        Ok(block)
    }

    /// Appends chunk `d.chunk` to its block `b`, padding any gap; `None` if the block
    /// refused (the caller copies it elsewhere).
    fn append_placed(&mut self, b: u32, d: DataTags, data: &[u8]) -> Result<Option<u32>> {
        let ppb = self.layout.pages_per_block;
        let k = d.chunk % ppb;
        let base = d.chunk - k;
        let generation = self.blocks.generation(b);
        for j in self.blocks.get(b).next_page()..k {
            let zeros = vec![0u8; self.layout.chunk_bytes as usize];
            let pad = self.pad_tags(d.obj, base + j, &zeros);
            match self.program_at(b, j, pad, generation, &zeros)? {
                Programmed::Done(pno) => self.take_chunk(d.obj, base + j, pno),
                Programmed::Refused => return Ok(None),
            }
        }
        match self.program_at(b, k, d, generation, data)? {
            Programmed::Done(pno) => {
                self.take_chunk(d.obj, d.chunk, pno);
                Ok(Some(pno))
            }
            Programmed::Refused => Ok(None),
        }
    }

    /// The tags of a zero page standing for a hole.
    fn pad_tags(&self, obj: Ino, chunk: u32, zeros: &[u8]) -> DataTags {
        DataTags {
            obj,
            chunk,
            n_bytes: Some(zeros.len() as u32),
            serial: Serial::Full(0),
            data_crc: Some(crate::format::crc(zeros)),
            run_start: None,
        }
    }

    /// Points chunk `chunk` of `ino` at `pno`, now valid; the page it had is not.
    fn take_chunk(&mut self, ino: Ino, chunk: u32, pno: u32) {
        self.blocks.set_valid(pno);
        let Some(o) = self.objects.get_mut(&ino) else {
            return;
        };
        let old = o.chunks.set(chunk, pno);
        o.saw_chunk(chunk);
        self.touch_chunk(ino, chunk);
        self.reserves.chunk_changed(ino, chunk, old, pno);
        if is_page(old) && old != pno {
            self.blocks.invalidate(old);
        }
    }

    /// `take_chunk` for the run of chunks `first..first + n`, moved to pages
    /// `page..page + n` in one map entry if the map can say it; false (nothing done) if not.
    fn move_run(&mut self, ino: Ino, first: u32, n: u32, page: u32) -> bool {
        let Some(o) = self.objects.get_mut(&ino) else {
            return false;
        };
        let Some(old) = o.chunks.move_run(first, n, page) else {
            return false;
        };
        o.saw_chunk(first + n - 1);
        self.touch_run(ino, first, n);
        for j in 0..n {
            let was = old.get(j as usize).copied().unwrap_or(NO_PAGE);
            self.blocks.set_valid(page + j);
            self.reserves.chunk_changed(ino, first + j, was, page + j);
            if is_page(was) {
                self.blocks.invalidate(was);
            }
        }
        true
    }

    /// Programs page `page` of data block `block` (the block's next page).
    fn program_at(
        &mut self,
        block: u32,
        page: u32,
        mut d: DataTags,
        generation: u8,
        data: &[u8],
    ) -> Result<Programmed> {
        debug_assert_eq!(self.blocks.get(block).next_page(), page);
        d.serial = Serial::Full(u64::from(generation));
        d.run_start = None;
        let (buf, oob) = self.layout.encode_page(&Tags::Data(d), data);
        let addr = self.layout.block_addr(block).page(page);
        let mut erased_for_retry = false;
        loop {
            match self.dev.get_mut().program_page(addr, &buf, &oob) {
                Ok(()) => {
                    self.blocks.update(block, |b| b.advance());
                    return Ok(Programmed::Done(self.layout.pno(block, page)));
                }
                Err(FlashError::NotErased(_)) if page == 0 && !erased_for_retry => {
                    // A block that looked empty after a cut erase: erase it for real.
                    erased_for_retry = true;
                    self.erase_block(block)?;
                    if self.blocks.get(block).state != BlockState::Empty {
                        return Ok(Programmed::Refused);
                    }
                    self.blocks.set_state(block, BlockState::Full);
                    self.blocks.set_data_block(block, true);
                    self.blocks.set_generation(block, generation);
                }
                Err(FlashError::NotErased(_)) => {
                    // Torn by an earlier cut: the block takes nothing more.
                    self.blocks.update(block, |b| b.advance());
                    self.stats.pages_spoiled += 1;
                    return Ok(Programmed::Refused);
                }
                Err(e) if e.is_media_failure() => {
                    self.blocks.update(block, |b| {
                        b.advance();
                        b.flags |= RETIRE;
                    });
                    return Ok(Programmed::Refused);
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
    }

    /// Copies logical block `lb` of `ino` into a fresh block, with `new` (a chunk's new
    /// contents) in its place, then erases the old block (unless cleaning holds it, which
    /// erases or retires it itself). Returns the new chunk's page.
    pub(crate) fn copy_placed(
        &mut self,
        ino: Ino,
        lb: u32,
        new: Option<(DataTags, &[u8])>,
    ) -> Result<u32> {
        let ppb = self.layout.pages_per_block;
        let base = lb * ppb;
        let old = match self.placed(ino, lb) {
            Placed::Block(b) => Some(b),
            _ => None,
        };
        let generation = old.map_or(0, |b| {
            (self.blocks.generation(b) + 1) % crate::blocks::ibat::GENERATIONS
        });
        let (mapped, size_chunks) = {
            let o = self.obj(ino)?;
            let c = u64::from(self.layout.chunk_bytes);
            let mapped: Vec<(u32, u32)> = (0..ppb)
                .map(|j| (j, o.chunks.get(base + j)))
                .filter(|&(_, p)| is_page(p))
                .collect();
            (mapped, o.size.div_ceil(c))
        };
        let pnos: Vec<u32> = mapped.iter().map(|&(_, p)| p).collect();
        let reads = self.read_pages(&pnos)?;
        let mut contents: Vec<Option<(DataTags, Vec<u8>)>> = vec![None; ppb as usize];
        for (&(j, pno), (page, oob, ok)) in mapped.iter().zip(reads) {
            match self.parse_page(page, &oob, ok) {
                Some(r) if !r.damaged => {
                    if let Tags::Data(t) = r.tags {
                        contents[j as usize] = Some((t, r.data));
                    }
                }
                // Unreadable: its chunk is lost (reads give EIO), as cleaning would.
                _ => self.forget_page(pno),
            }
        }
        let k = new.as_ref().map(|(d, _)| d.chunk % ppb);
        if let Some((d, data)) = new {
            contents[(d.chunk % ppb) as usize] = Some((d, data.to_vec()));
        }
        // At least as many pages as the old block had (see the crash rules).
        let end = contents
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |j| j as u32 + 1)
            .max(old.map_or(0, |b| self.blocks.get(b).next_page()))
            .min(ppb);
        let zeros = vec![0u8; self.layout.chunk_bytes as usize];
        'fresh: loop {
            let fresh = self.open_data_block(true, generation)?;
            let mut written = Vec::with_capacity(end as usize);
            for j in 0..end {
                let (tags, bytes) = match &contents[j as usize] {
                    Some((t, bytes)) => (*t, bytes.as_slice()),
                    None => (self.pad_tags(ino, base + j, &zeros), zeros.as_slice()),
                };
                match self.program_at(fresh, j, tags, generation, bytes)? {
                    Programmed::Done(pno) => written.push(pno),
                    // The fresh block failed: it holds nothing live (cleaning erases or
                    // retires it); start again in another.
                    Programmed::Refused => continue 'fresh,
                }
            }
            self.stats.block_copy_pages += u64::from(end);
            self.stats.blocks_copied += 1;
            // The copy is on flash: chunks move to it. Pads stand for holes within the
            // file and for nothing past its end.
            let live: Vec<bool> = (0..end)
                .map(|j| contents[j as usize].is_some() || u64::from(base + j) < size_chunks)
                .collect();
            let out = k.map_or(NO_PAGE, |k| written[k as usize]);
            // Usually the live chunks are the block's first pages: the map moves them in
            // one entry and stays block-granular.
            let run = live.iter().take_while(|&&l| l).count() as u32;
            let moved = !live[run as usize..].contains(&true)
                && run > 0
                && self.move_run(ino, base, run, written[0]);
            if !moved {
                for (j, pno) in written.into_iter().enumerate() {
                    if live[j] {
                        self.take_chunk(ino, base + j as u32, pno);
                    }
                }
            }
            if let Some(b) = old {
                if !self.blocks.is_pinned(b) && self.blocks.get(b).valid() == 0 {
                    if self.blocks.get(b).retire() {
                        self.retire_block(b)?;
                    } else {
                        self.erase_block(b)?;
                    }
                }
            }
            return Ok(out);
        }
    }

    /// After a shrink: if the file's last block keeps pages past the new end, copy it
    /// without them (a later growth must find holes there, not stale data), and erase the
    /// blocks the shrink left without a live page.
    pub(crate) fn placed_after_shrink(&mut self, ino: Ino) -> Result<()> {
        let ppb = self.layout.pages_per_block;
        let c = u64::from(self.layout.chunk_bytes);
        let keep = self.obj(ino)?.size.div_ceil(c);
        let lb = (keep / u64::from(ppb)) as u32;
        let within = (keep % u64::from(ppb)) as u32;
        if within > 0 {
            if let Placed::Block(b) = self.placed(ino, lb) {
                let blk = self.blocks.get(b);
                if blk.next_page() > within || blk.valid() < blk.next_page() {
                    // The chunks past the end are unmapped already: they become pads.
                    self.copy_placed(ino, lb, None)?;
                }
            }
        }
        self.erase_emptied_blocks()
    }

    /// Copies data block `block` (whose valid pages are `valid`) for cleaning: its owner
    /// and logical block come from the first valid page's tags.
    pub(crate) fn copy_data_block(&mut self, block: u32, valid: &[u32]) -> Result<()> {
        let ppb = self.layout.pages_per_block;
        match self.read_tags(valid[0])? {
            TagRead::Valid(Tags::Data(d)) if self.objects.contains_key(&d.obj) => {
                self.map(d.obj)?;
                self.copy_placed(d.obj, d.chunk / ppb, None)?;
            }
            _ => {}
        }
        // Whatever is still valid here belongs to nobody the tags name: its owner loses it.
        for pno in self.blocks.valid_pages(block) {
            self.forget_page(pno);
        }
        Ok(())
    }
}
