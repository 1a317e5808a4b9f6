//! MNFS's mount: the iBAT is rebuilt from the spare areas, one per data block, as the
//! MNFS paper's is. Nothing on flash describes allocation as a whole (no checkpoint, no
//! summaries, no table); each data page's tags name its file and chunk (`block_placed`).
//!
//! Per block, the spare area of the last page is read first: a data page there, the
//! block's last chunk, means a full data block, whose every page holds the next chunk of
//! one logical block: one read. Otherwise the first page's spare says what the block is:
//! erased (an empty block: two reads), a data block still being filled (a file's last
//! block: the spare of each written page is read to find where it ends, and the last
//! one read whole, as the one a cut can have torn), or a log block (directory entries:
//! the tags of all its pages, headers read whole, as `scan_every_page` reads YAFFS1's,
//! past any page that reads erased: a torn erase can leave one that takes no program,
//! which the writer skips).
//!
//! A chunk counts only within its file's size as the newest header records it (fsync
//! writes the header after the data). Of two blocks found for one logical block (a cut
//! between an overwrite's copy and the erase of the old block), the newer generation wins
//! if it has as many pages as the older (the copy finished), the older otherwise.

use std::collections::HashMap;

use nandkit_flash::Flash;

use crate::blocks::BlockState;
use crate::error::Result;
use crate::format::tags::{Serial, TagLayout, TagRead, Tags};
use crate::fs::FileSystem;
use crate::scan::{Found, Seen};
use crate::scan_damage::BlockPages;
use crate::scan_every_page::EveryPage;
use crate::types::Ino;

/// A data block found, and the logical block it claims.
#[derive(Clone, Copy, Debug)]
struct Claim {
    block: u32,
    generation: u8,
    /// Pages programmed (a torn one included).
    written: u32,
    /// Pages, from the first, that hold their chunk intact.
    good: u32,
}

/// Is generation `b` the one after `a`?
fn follows(b: u8, a: u8) -> bool {
    (a + 1) % crate::blocks::ibat::GENERATIONS == b
}

fn generation_of(serial: Serial) -> u8 {
    (serial.low() % u16::from(crate::blocks::ibat::GENERATIONS)) as u8
}

impl<F: Flash> FileSystem<F> {
    pub(crate) fn scan_ibat(&mut self) -> Result<()> {
        let ppb = self.layout.pages_per_block;
        let mut log = EveryPage::default();
        let mut claims: HashMap<(Ino, u32), Vec<Claim>> = HashMap::new();
        for b in 0..self.layout.blocks {
            if !self.scans_block(b)? {
                continue;
            }
            let last = self.read_tags(self.layout.pno(b, ppb - 1))?;
            if let TagRead::Valid(Tags::Data(d)) = last {
                if d.chunk % ppb == ppb - 1 {
                    claims
                        .entry((d.obj, d.chunk / ppb))
                        .or_default()
                        .push(Claim {
                            block: b,
                            generation: generation_of(d.serial),
                            written: ppb,
                            good: ppb,
                        });
                    continue;
                }
            }
            match self.read_tags(self.layout.pno(b, 0))? {
                TagRead::Erased if last == TagRead::Erased => {}
                TagRead::Valid(Tags::Data(d)) if d.chunk.is_multiple_of(ppb) => {
                    let claim = self.scan_open_data_block(b, d.obj, d.chunk, d.serial)?;
                    claims
                        .entry((d.obj, d.chunk / ppb))
                        .or_default()
                        .push(claim);
                }
                // The log, or a block a cut left in a state no write here makes (a torn
                // first page, a torn erase): every page is read; data pages found there
                // are no file's (block-placed data is never anywhere else).
                _ => self.scan_block_tags(b, &mut log, true)?,
            }
        }
        let EveryPage { mut seen, .. } = log;
        seen.retain(|s| matches!(s.what, Found::Header { .. }));
        for ((obj, lb), mut list) in claims {
            if list.len() > 1 {
                // A copy's last page may be torn with its tags whole: checked before it
                // can win.
                for c in list.iter_mut().filter(|c| c.good == ppb) {
                    let last = self.layout.pno(c.block, ppb - 1);
                    if self.read_raw(last)?.is_none_or(|r| r.damaged) {
                        c.good -= 1;
                    }
                }
            }
            let winner = newest_whole(&list);
            for c in &list {
                // A losing block holds nothing live: cleaning (or the mount's repairs)
                // erases it.
                self.blocks.update(c.block, |blk| {
                    blk.set_next_page(c.written);
                    blk.base_serial = 0;
                });
                self.blocks.set_state(c.block, BlockState::Full);
                self.blocks.set_data_block(c.block, true);
                self.blocks.set_generation(c.block, c.generation);
            }
            // A block with a torn page takes no appends (the next write copies it).
            if winner.good < winner.written {
                self.blocks
                    .update(winner.block, |blk| blk.set_next_page(ppb));
            }
            let first = self.layout.pno(winner.block, 0);
            seen.extend((0..winner.good).map(|j| Seen {
                pno: first + j,
                what: Found::Data {
                    obj,
                    chunk: lb * ppb + j,
                    n_bytes: self.layout.chunk_bytes,
                    // Within the file's size only (see the module comment).
                    serial: Serial::Full(0),
                },
            }));
        }
        // Chunk order within each file, so that its map is built by block.
        seen.sort_by_key(|s| match s.what {
            Found::Header { .. } => (0, 0, s.pno),
            Found::Data { obj, chunk, .. } => (1, obj, chunk),
        });
        self.rebuild(seen)
    }

    /// A data block not yet full: the spare of each page after the first, up to the first
    /// erased one; the last programmed page read whole.
    fn scan_open_data_block(
        &mut self,
        b: u32,
        obj: Ino,
        first_chunk: u32,
        serial: Serial,
    ) -> Result<Claim> {
        let ppb = self.layout.pages_per_block;
        let generation = generation_of(serial);
        let mut written = 1;
        let mut good = 1;
        let mut intact = true;
        // Pages that fail their tags' checks, and whether a power cut explains them (see
        // `scan_damage`).
        // Page 0 is known by its tags only (a cut erase can leave tags that pass a small
        // layout's check): it counts for nothing here.
        let mut pages = BlockPages::new(self.programs_in_flight());
        for page in 1..ppb {
            let pno = self.layout.pno(b, page);
            let t = self.read_tags(pno)?;
            if t == TagRead::Erased {
                break;
            }
            written = page + 1;
            let ours = matches!(t, TagRead::Valid(Tags::Data(d))
                if d.obj == obj && d.chunk == first_chunk + page && generation_of(d.serial) == generation);
            match t {
                _ if ours && self.layout.tags == TagLayout::Small => {
                    pages.written_after_by_small_tags(page)
                }
                _ if ours => pages.written_after(page),
                TagRead::Garbage => pages.failed(pno, page),
                _ => pages.passed(page),
            }
            if intact && ours {
                good = page + 1;
            } else {
                intact = false;
            }
        }
        self.unexplained_pages.extend(pages.damage());
        // The last intact page may be torn with its tags whole: its data is checked.
        if good == written {
            let last = self.layout.pno(b, good - 1);
            if self.read_raw(last)?.is_none_or(|r| r.damaged) {
                good -= 1;
            }
        }
        Ok(Claim {
            block: b,
            generation,
            written,
            good,
        })
    }
}

/// Of the blocks claiming one logical block: the newer generation if it is whole (as many
/// pages as the older, none torn), else the older.
fn newest_whole(list: &[Claim]) -> Claim {
    let mut best = list[0];
    for &c in &list[1..] {
        let (newer, older) = if follows(c.generation, best.generation) {
            (c, best)
        } else if follows(best.generation, c.generation) {
            (best, c)
        } else {
            // Not one copy of the other (nothing this file system writes): the fuller.
            best = if c.good > best.good { c } else { best };
            continue;
        };
        best = if newer.good == newer.written && newer.written >= older.written {
            newer
        } else {
            older
        };
    }
    best
}
