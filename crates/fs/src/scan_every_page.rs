//! YAFFS1's mount: the tags of every page of every used block are read (an OOB read each),
//! as YAFFS1 did on small-page chips; headers are read whole. Nothing on flash summarises a
//! block, so this costs one read per page where the YAFFS2-style scan (`scan`) costs about
//! one per block: the mount time the 2006-07 papers measured against.
//!
//! A page marked deleted (`deletion_marks`) or torn reads as garbage and is skipped. Of the
//! unmarked copies of a chunk (a power cut between a new copy and the old one's marker),
//! the newest by version wins. Only the last programmed page of a block can be torn with
//! its tags intact, so it is read whole: the chip's ECC checks its data (YAFFS1 would
//! have returned an ECC error on the first read instead). A block found written is full
//! from then on (never appended to), and every stale page the mount found unmarked is
//! marked by a writable mount.
//!
//! Data chunks have no write order here, so the rules that need one do not apply: a chunk
//! counts only within its file's size as its newest header records it (data written past
//! the last header, which fsync always writes, is lost with the power), and truncation
//! floors are not read: the deletion markers of the chunks a shrink dropped are on flash
//! before any later header can grow the file over them.

use std::collections::HashMap;

use nandkit_flash::Flash;

use crate::blocks::BlockState;
use crate::deletion_marks::{version_newer, version_of};
use crate::error::Result;
use crate::format::record::Record;
use crate::format::tags::{Serial, TagLayout, TagRead, Tags};
use crate::fs::FileSystem;
use crate::scan::{Found, Seen};
use crate::scan_damage::BlockPages;
use crate::types::Ino;

/// What reading every page's tags found.
#[derive(Default)]
pub(crate) struct EveryPage {
    pub seen: Vec<Seen>,
    copies: Vec<Copy>,
    /// Every page with valid tags, and its object: the ones rebuild does not take are
    /// stale.
    pub tagged: Vec<(u32, Ino)>,
}

/// An unmarked data page.
struct Copy {
    pno: u32,
    obj: Ino,
    chunk: u32,
    n_bytes: u32,
    version: u16,
}

impl<F: Flash> FileSystem<F> {
    pub(crate) fn scan_every_page(&mut self) -> Result<()> {
        let mut found = EveryPage::default();
        for b in 0..self.layout.blocks {
            if !self.scans_block(b)? {
                continue;
            }
            self.scan_block_tags(b, &mut found, false)?;
        }
        let EveryPage {
            mut seen,
            copies,
            tagged,
        } = found;
        seen.extend(newest_copies(copies));
        self.rebuild(seen)?;
        // What rebuild did not take of a live object is stale: a writable mount marks it
        // (`apply_repairs`). Pages of deleted objects need no marker (soft deletion: their
        // name-less header, or the absence of any, drops them at every mount).
        for (pno, obj) in tagged {
            if !self.blocks.is_valid(pno) && self.objects.contains_key(&obj) {
                self.blocks.note_stale(pno);
            }
        }
        Ok(())
    }

    /// Reads the tags of every page of block `b` (found written), in order, into `found`,
    /// and leaves the block full. `whole_block`: past an erased page too (a torn erase can
    /// leave pages that read erased but take no program, which the writer skips); else the
    /// first erased page ends the block.
    pub(crate) fn scan_block_tags(
        &mut self,
        b: u32,
        found: &mut EveryPage,
        whole_block: bool,
    ) -> Result<()> {
        let ppb = self.layout.pages_per_block;
        let EveryPage {
            seen,
            copies,
            tagged,
        } = found;
        let first_copy = copies.len();
        let mut programmed = 0;
        let mut last_read_whole = false;
        // Pages whose tags or header fail their checks (not YAFFS1's deletion marker), and
        // whether a power cut explains them (see `scan_damage`).
        let mut pages = BlockPages::new(self.programs_in_flight());
        for page in 0..ppb {
            let pno = self.layout.pno(b, page);
            // A full block's last page is read whole (the one a cut can have torn).
            let whole = if page == ppb - 1 {
                let (data, oob, ok) = self.read_full(pno)?;
                let erased = data.iter().chain(&oob).all(|&x| x == 0xFF);
                Some((self.parse_page(data, &oob, ok), erased))
            } else {
                None
            };
            let (t, marked) = match &whole {
                Some((_, true)) => (TagRead::Erased, false),
                Some((Some(r), false)) if !r.damaged => (TagRead::Valid(r.tags), false),
                Some(_) => (TagRead::Garbage, false),
                None => self.read_tags_marked(pno)?,
            };
            if t == TagRead::Erased {
                if whole_block {
                    pages.erased(page);
                    continue;
                }
                // Pages go in order: the rest of the block is erased.
                break;
            }
            programmed = page + 1;
            last_read_whole = whole.is_some();
            // YAFFS1's deletion marker is a second program of the spare: one cut by power
            // leaves tags that fail their check over data and ECC that pass. Such a page
            // was stale already (its replacement was on flash before its marker).
            let torn_marker = t == TagRead::Garbage
                && !marked
                && self.yaffs1_log()
                && whole.is_none()
                && self.read_full(pno)?.2;
            match t {
                TagRead::Garbage if torn_marker => pages.passed(page),
                TagRead::Valid(Tags::Data(_) | Tags::Header(_))
                    if whole.is_none() && self.layout.tags == TagLayout::Small =>
                {
                    pages.written_after_by_small_tags(page)
                }
                TagRead::Valid(Tags::Data(_) | Tags::Header(_)) => pages.written_after(page),
                TagRead::Garbage if !marked => pages.failed(pno, page),
                _ => pages.passed(page),
            }
            match t {
                TagRead::Valid(Tags::Data(d)) => {
                    let n_bytes = match (d.n_bytes, &whole) {
                        (_, Some((Some(r), _))) => r.data.len() as u32,
                        (Some(n), _) => n,
                        // A partial chunk says its length in band.
                        (None, _) => match self.read_raw(pno)? {
                            Some(r) if !r.damaged => {
                                last_read_whole = true;
                                r.data.len() as u32
                            }
                            // Good tags over contents that fail their checks.
                            _ => {
                                pages.failed(pno, page);
                                continue;
                            }
                        },
                    };
                    tagged.push((pno, d.obj));
                    copies.push(Copy {
                        pno,
                        obj: d.obj,
                        chunk: d.chunk,
                        n_bytes,
                        version: version_of(d.serial),
                    });
                }
                TagRead::Valid(Tags::Header(h)) => {
                    last_read_whole = true;
                    tagged.push((pno, h.obj));
                    let found = match whole {
                        Some((Some(r), _)) => Record::decode(&r.data).map(|rec| Found::Header {
                            obj: h.obj,
                            version: rec.version,
                            facts: rec.facts(h.obj),
                            record: Some(Box::new(rec)),
                        }),
                        _ => self.read_header_found(pno, h.obj)?,
                    };
                    match found {
                        Some(what) => seen.push(Seen {
                            pno,
                            what: without_floors(what),
                        }),
                        // Good tags over a header that fails its checks.
                        None => pages.failed(pno, page),
                    }
                }
                // Marked deleted, torn, or nothing this log writes.
                _ => {}
            }
        }
        self.unexplained_pages.extend(pages.damage());
        if programmed == 0 {
            return Ok(());
        }
        let last = self.layout.pno(b, programmed - 1);
        // A block left partly written: its last page, read by its tags only so far.
        if !last_read_whole
            && copies.len() > first_copy
            && copies.last().is_some_and(|c| c.pno == last)
        {
            let whole = self.read_raw(last)?;
            if whole.is_none_or(|r| r.damaged) {
                copies.pop();
            }
        }
        // Never appended to after a mount: the next page may be torn.
        self.blocks.update(b, |blk| {
            blk.set_next_page(programmed);
            blk.base_serial = 0;
        });
        self.blocks.set_state(b, BlockState::Full);
        Ok(())
    }
}

/// Of each chunk's unmarked copies, the newest by version; all with serial 0, so that a
/// chunk counts within its file's size only (see the module comment).
fn newest_copies(copies: Vec<Copy>) -> Vec<Seen> {
    let mut best: HashMap<(Ino, u32), Copy> = HashMap::new();
    for c in copies {
        let key = (c.obj, c.chunk);
        match best.get(&key) {
            Some(b) if !version_newer(c.version, b.version) => {}
            _ => {
                best.insert(key, c);
            }
        }
    }
    let mut out: Vec<Seen> = best
        .into_values()
        .map(|c| Seen {
            pno: c.pno,
            what: Found::Data {
                obj: c.obj,
                chunk: c.chunk,
                n_bytes: c.n_bytes,
                serial: Serial::Full(0),
            },
        })
        .collect();
    out.sort_by_key(|s| s.pno);
    out
}

/// A header as this log reads it: truncation floors are YAFFS2's and play no part here.
fn without_floors(what: Found) -> Found {
    match what {
        Found::Header {
            obj,
            version,
            mut facts,
            record,
        } => {
            let record = record.map(|mut r| {
                r.floors.clear();
                r
            });
            if let Some(r) = &record {
                facts = r.facts(obj);
            }
            Found::Header {
                obj,
                version,
                facts,
                record,
            }
        }
        other => other,
    }
}
