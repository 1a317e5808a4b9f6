//! Mount by scan: learn every block's pages from as few reads as possible, then hand what
//! was found to `rebuild`.
//!
//! Per block, one read usually settles it: a full block's last page is its summary (the
//! tags of all its pages), or a data page whose tags say the block is one run of a file's
//! chunks; an empty block's first page is erased. Which of the two pages to read first is
//! guessed from the block before (used blocks and empty blocks come in stretches), so a
//! mount reads about one page per block, used or not. Only blocks without a summary (the
//! ones open when power failed) are read page by page, their last programmed page in full
//! (only it can be torn). Header pages are read only when their facts (type, parent,
//! size, in the tags or the summary) do not say enough.
//!
//! The small tag layout keeps 14 bits of a data page's serial: pages of blocks without a
//! summary get their full serial back from the highest serial the summaries show (see
//! [`serial_upper_bound`]).

use std::sync::Arc;

use nandkit_flash::Flash;

use crate::blocks::{BlockState, BlockTable};
use crate::config::FsConfig;
use crate::error::Result;
use crate::format::record::Record;
use crate::format::special::Special;
use crate::format::summary::{Summary, SummaryEntry};
use crate::format::tags::{
    widen_serial, DataTags, HeaderFacts, Serial, SpecialKind, TagLayout, TagRead, Tags,
};
use crate::fs::{FileSystem, MountOptions};
use crate::layout::Layout;
use crate::scan_damage::BlockPages;
use crate::types::Ino;

/// Most serials that pages of blocks without a summary can be ahead of the highest
/// serial the summaries show: every stream's open block, and two more (a block whose
/// summary failed, waiting to be cleaned), plus a little.
pub(crate) fn unsummarised_serials(streams: usize, pages_per_block: u32) -> u64 {
    (streams as u64 + 2) * u64::from(pages_per_block) + 64
}

/// What a scan learned about one page.
#[derive(Clone, Debug)]
pub(crate) enum Found {
    Data {
        obj: Ino,
        chunk: u32,
        n_bytes: u32,
        serial: Serial,
    },
    Header {
        obj: Ino,
        version: u64,
        facts: HeaderFacts,
        /// The record, when the scan read the page.
        record: Option<Box<Record>>,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub pno: u32,
    pub what: Found,
}

/// How a block looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Empty,
    Checkpoint,
    /// Full, described by its summary or by a run.
    Full,
    /// Written, without a summary: sealed by a writable mount.
    Open,
}

impl<F: Flash> FileSystem<F> {
    /// Rebuilds the in-RAM state through the metadata store (the flash log: checkpoint if
    /// possible, else a full scan). The file system record (and with it the metadata kind)
    /// is found first, in the anchor blocks.
    pub(crate) fn recover(dev: F, options: &MountOptions) -> Result<Self> {
        let blocks = Layout::new(dev.geometry())?.blocks;
        let placeholder = FsConfig::profile("yaffs", blocks)?;
        let mut fs = Self::empty(dev, placeholder, Arc::clone(&options.clock))?;
        fs.read_only = options.read_only;
        fs.find_anchors()?;
        fs.check_layout_limits()?;
        let mut store = crate::meta::make::<F>(fs.config.metadata);
        fs.mount_method = store.recover(&mut fs, options)?;
        fs.metadata = Some(store);
        fs.recount_reserves();
        Ok(fs)
    }

    /// Forgets all RAM state but the device, clock, mode, configuration and anchors, as
    /// before a first mount.
    pub(crate) fn reset_state(&mut self) {
        let blocks = self.layout.blocks;
        self.set_config(self.config.clone());
        self.blocks = BlockTable::of_kind(self.config.records, blocks, self.layout.pages_per_block);
        if self.yaffs1_log() {
            self.blocks.list_stale();
        }
        for b in self.anchors.blocks {
            self.blocks.set_state(b, BlockState::Anchor);
        }
        self.objects.clear();
        self.dirs.clear();
        self.caches.clear();
        self.tombstones.clear();
        self.links.clear();
        self.xattr_sets.clear();
        self.reserves.clear();
        self.unexplained_pages.clear();
        self.adopted.clear();
        self.headerless_pages.clear();
        self.restored.clear();
        self.untombed.clear();
        self.next_serial = 1;
        self.next_ino = crate::types::ROOT_INO + 1;
        self.alloc_cursor = 0;
        self.checkpoint_blocks.clear();
        self.repairs.clear();
        self.to_seal.clear();
    }

    pub(crate) fn set_config(&mut self, config: FsConfig) {
        self.allocator = crate::alloc::make(
            config.allocator,
            &config.alloc_params,
            self.layout.blocks,
            self.layout.pages_per_block,
        );
        self.cleaner = crate::clean::make(&config);
        self.streams = vec![None; self.allocator.streams()];
        self.config = config;
    }

    /// Whether a mount's scan reads block `b`: not an anchor, and not bad (which it
    /// records).
    pub(crate) fn scans_block(&mut self, b: u32) -> Result<bool> {
        if self.anchors.blocks.contains(&b) {
            return Ok(false);
        }
        if self.dev.get_mut().is_bad(self.layout.block_addr(b))? {
            self.blocks.set_state(b, BlockState::Bad);
            return Ok(false);
        }
        Ok(true)
    }

    pub(crate) fn scan(&mut self) -> Result<()> {
        let mut seen: Vec<Seen> = Vec::new();
        let mut open: Vec<u32> = Vec::new();
        let mut predict_used = true;
        for b in 0..self.layout.blocks {
            if !self.scans_block(b)? {
                continue;
            }
            let shape = self.scan_block(b, predict_used, &mut seen)?;
            predict_used = shape != Shape::Empty;
            match shape {
                Shape::Empty => {}
                Shape::Checkpoint => {
                    // A checkpoint this scan does not use: erased before the first write,
                    // or a later mount could take it for current.
                    self.blocks.set_state(b, BlockState::Checkpoint);
                    self.checkpoint_blocks.push(b);
                }
                Shape::Full => self.blocks.set_state(b, BlockState::Full),
                Shape::Open => {
                    // Never append to a block found partly written; it gets its summary.
                    self.blocks.set_state(b, BlockState::Full);
                    open.push(b);
                }
            }
        }
        self.widen_serials(&mut seen, &open);
        self.to_seal = open
            .into_iter()
            .map(|b| (b, self.entries_found(b, &seen)))
            .collect();
        self.rebuild(seen)
    }

    /// The summary entries of a block without one, from what the scan found in it.
    fn entries_found(&self, b: u32, seen: &[Seen]) -> Vec<SummaryEntry> {
        let ppb = self.layout.pages_per_block;
        let n = self.blocks.get(b).next_page().min(ppb) as usize;
        let mut out = vec![SummaryEntry::Garbage; n];
        for s in seen.iter().filter(|s| s.pno / ppb == b) {
            let i = (s.pno % ppb) as usize;
            if i >= n {
                continue;
            }
            out[i] = match &s.what {
                Found::Data {
                    obj,
                    chunk,
                    n_bytes,
                    serial,
                } => SummaryEntry::Data {
                    obj: *obj,
                    chunk: *chunk,
                    n_bytes: *n_bytes,
                    serial: serial.full().unwrap_or(0),
                },
                Found::Header {
                    obj,
                    version,
                    facts,
                    ..
                } => SummaryEntry::Header {
                    obj: *obj,
                    version: *version,
                    facts: Some(*facts),
                },
            };
        }
        out
    }

    /// Reads as little of a block as tells what it holds; adds its pages to `seen`.
    fn scan_block(&mut self, b: u32, predict_used: bool, seen: &mut Vec<Seen>) -> Result<Shape> {
        let ppb = self.layout.pages_per_block;
        let last = ppb - 1;
        let mut first: Option<TagRead> = None;
        if !predict_used {
            let t = self.read_tags(self.layout.pno(b, 0))?;
            match t {
                TagRead::Erased => return Ok(Shape::Empty),
                TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Checkpoint => {
                    return Ok(Shape::Checkpoint)
                }
                _ => first = Some(t),
            }
        }
        let (data, oob, ok) = self.read_full(self.layout.pno(b, last))?;
        let last_tags = self.layout.decode_tags(&oob);
        match last_tags {
            TagRead::Erased => {
                let t0 = match first {
                    Some(t) => t,
                    None => self.read_tags(self.layout.pno(b, 0))?,
                };
                match t0 {
                    TagRead::Erased => return Ok(Shape::Empty),
                    TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Checkpoint => {
                        return Ok(Shape::Checkpoint)
                    }
                    _ => {}
                }
                return self.walk_block(b, seen);
            }
            TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Checkpoint => {
                return Ok(Shape::Checkpoint)
            }
            TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Summary && ok => {
                if let Some((summary, pages)) =
                    self.summary_chain(b, last, Some((data, oob, ok)))?
                {
                    self.apply_summary(b, &summary, seen)?;
                    self.blocks.update(b, |blk| {
                        blk.set_next_page(ppb);
                        blk.set_overhead(pages);
                        blk.base_serial = summary.base_serial;
                    });
                    return Ok(Shape::Full);
                }
            }
            TagRead::Valid(Tags::Data(d)) if d.run_start.is_some() => {
                if let Some(page) = self
                    .parse_page(data.clone(), &oob, ok)
                    .filter(|p| !p.damaged)
                {
                    if let Some(shape) = self.take_run(b, d, page.data.len() as u32, seen)? {
                        return Ok(shape);
                    }
                }
            }
            _ => {}
        }
        // Full but neither summarised nor a run: every page.
        self.walk_block(b, seen)
    }

    /// A full block whose last page ends a run: the run's pages follow from the last
    /// page's tags; the few before it are read.
    fn take_run(
        &mut self,
        b: u32,
        last: DataTags,
        last_len: u32,
        seen: &mut Vec<Seen>,
    ) -> Result<Option<Shape>> {
        let ppb = self.layout.pages_per_block;
        let start = last.run_start.unwrap_or(0);
        let serial = last.serial.full().unwrap_or(0);
        if start >= ppb
            || u64::from(last.chunk) < u64::from(ppb - 1 - start)
            || serial < u64::from(ppb - 1 - start)
        {
            return Ok(None);
        }
        let mut prefix = Vec::new();
        for page in 0..start {
            match self.scan_page(self.layout.pno(b, page))? {
                PageScan::Erased => return Ok(None),
                PageScan::Garbage => {}
                PageScan::Found(f) => prefix.push(f),
                PageScan::Summary | PageScan::Checkpoint => return Ok(None),
            }
        }
        seen.extend(prefix);
        let mut base = u64::MAX;
        for page in start..ppb {
            let back = ppb - 1 - page;
            let s = serial - u64::from(back);
            base = base.min(s);
            seen.push(Seen {
                pno: self.layout.pno(b, page),
                what: Found::Data {
                    obj: last.obj,
                    chunk: last.chunk - back,
                    n_bytes: if back == 0 {
                        last_len
                    } else {
                        self.layout.chunk_bytes
                    },
                    serial: Serial::Full(s),
                },
            });
        }
        self.blocks.update(b, |blk| {
            blk.set_next_page(ppb);
            blk.base_serial = base.saturating_sub(1);
        });
        Ok(Some(Shape::Full))
    }

    /// Adds a summary's pages to `seen`, reading the headers whose facts it does not have
    /// or that need their record.
    fn apply_summary(&mut self, b: u32, s: &Summary, seen: &mut Vec<Seen>) -> Result<()> {
        for (page, e) in s.entries.iter().enumerate() {
            let pno = self.layout.pno(b, page as u32);
            match *e {
                SummaryEntry::Garbage => {}
                SummaryEntry::Data {
                    obj,
                    chunk,
                    n_bytes,
                    serial,
                } => seen.push(Seen {
                    pno,
                    what: Found::Data {
                        obj,
                        chunk,
                        n_bytes,
                        serial: Serial::Full(serial),
                    },
                }),
                SummaryEntry::Header {
                    obj,
                    version,
                    facts,
                } => {
                    let found = match facts {
                        Some(f) if !f.needs_read => Some(Found::Header {
                            obj,
                            version,
                            facts: f,
                            record: None,
                        }),
                        _ => self.read_header_found(pno, obj)?,
                    };
                    if let Some(what) = found {
                        seen.push(Seen { pno, what });
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads a header page in full. `None` if it is unreadable or not `obj`'s.
    pub(crate) fn read_header_found(&mut self, pno: u32, obj: Ino) -> Result<Option<Found>> {
        let Some(r) = self.read_raw(pno)? else {
            return Ok(None);
        };
        match r.tags {
            Tags::Header(h) if h.obj == obj && !r.damaged => {}
            _ => return Ok(None),
        }
        Ok(Record::decode(&r.data).map(|rec| Found::Header {
            obj,
            version: rec.version,
            facts: rec.facts(obj),
            record: Some(Box::new(rec)),
        }))
    }

    /// Reads one page's tags (and a header's record when its tags do not say enough).
    fn scan_page(&mut self, pno: u32) -> Result<PageScan> {
        let t = self.read_tags(pno)?;
        self.classify(pno, t)
    }

    fn classify(&mut self, pno: u32, t: TagRead) -> Result<PageScan> {
        Ok(match t {
            TagRead::Erased => PageScan::Erased,
            TagRead::Garbage => PageScan::Garbage,
            TagRead::Valid(Tags::Special(s)) => match s.kind {
                SpecialKind::Summary => PageScan::Summary,
                SpecialKind::Checkpoint => PageScan::Checkpoint,
                SpecialKind::Anchor => PageScan::Garbage,
            },
            TagRead::Valid(Tags::Data(d)) => {
                // A partial chunk of the small layout says its length in band.
                let n_bytes = match d.n_bytes {
                    Some(n) => n,
                    None => match self.read_raw(pno)? {
                        Some(r) if !r.damaged => r.data.len() as u32,
                        _ => return Ok(PageScan::Garbage),
                    },
                };
                PageScan::Found(Seen {
                    pno,
                    what: Found::Data {
                        obj: d.obj,
                        chunk: d.chunk,
                        n_bytes,
                        serial: d.serial,
                    },
                })
            }
            TagRead::Valid(Tags::Header(h)) => match (h.facts, h.version.full()) {
                (Some(f), Some(v)) if !f.needs_read => PageScan::Found(Seen {
                    pno,
                    what: Found::Header {
                        obj: h.obj,
                        version: v,
                        facts: f,
                        record: None,
                    },
                }),
                _ => match self.read_header_found(pno, h.obj)? {
                    Some(what) => PageScan::Found(Seen { pno, what }),
                    None => PageScan::Garbage,
                },
            },
        })
    }

    /// A block without a usable summary: every page read in full and checked, up to the
    /// first erased page. Pages of such a block may be torn wherever power failed while it
    /// was written (its last page, and a summary a mount was writing when it failed too),
    /// so each is checked, not only the last. A summary found on the way (a block sealed
    /// early) describes the pages before it.
    fn walk_block(&mut self, b: u32, seen: &mut Vec<Seen>) -> Result<Shape> {
        let ppb = self.layout.pages_per_block;
        let mut found: Vec<Seen> = Vec::new();
        let mut programmed = 0;
        // A summary page that ends a segment (it does not reach back to page 0): if
        // nothing is programmed after it, the block was sealed there.
        let mut segment_end = None;
        // Pages that fail their checks, and whether a power cut explains them.
        let mut pages = BlockPages::new(self.programs_in_flight());
        for page in 0..ppb {
            let pno = self.layout.pno(b, page);
            let (data, oob, ok) = self.read_full(pno)?;
            let tags = self.layout.decode_tags(&oob);
            if tags == TagRead::Erased && data.iter().all(|&x| x == 0xFF) {
                break;
            }
            programmed = page + 1;
            segment_end = None;
            let Some(read) = self.parse_page(data, &oob, ok).filter(|r| !r.damaged) else {
                pages.failed(pno, page); // torn or damaged
                continue;
            };
            if matches!(read.tags, Tags::Data(_) | Tags::Header(_)) {
                pages.written_after(page);
            } else {
                pages.passed(page);
            }
            match read.tags {
                Tags::Special(s) if s.kind == SpecialKind::Checkpoint => {
                    return Ok(Shape::Checkpoint)
                }
                Tags::Special(s) if s.kind == SpecialKind::Summary => {
                    let sum = Special::decode(&read.data)
                        .and_then(|sp| {
                            Summary::from_special(&sp, self.layout.chunk_bytes, page as usize)
                        })
                        .filter(|s| s.entries.len() == page as usize);
                    if let Some(sum) = sum {
                        // Sealed: the summary is the truth for the pages before it.
                        pages.sealed(page);
                        self.unexplained_pages.extend(pages.damage());
                        self.apply_summary(b, &sum, seen)?;
                        self.blocks.update(b, |blk| {
                            blk.set_next_page(page + 1);
                            blk.set_overhead(1);
                            blk.base_serial = sum.base_serial;
                        });
                        return Ok(Shape::Full);
                    }
                    // A seal after a crash ends a segment: failed pages before it were
                    // the tear, whatever is written after it.
                    pages.sealed(page);
                    segment_end = Some(page);
                }
                Tags::Special(_) => {}
                Tags::Data(d) => found.push(Seen {
                    pno,
                    what: Found::Data {
                        obj: d.obj,
                        chunk: d.chunk,
                        n_bytes: read.data.len() as u32,
                        serial: d.serial,
                    },
                }),
                Tags::Header(h) => {
                    if let Some(rec) = Record::decode(&read.data) {
                        found.push(Seen {
                            pno,
                            what: Found::Header {
                                obj: h.obj,
                                version: rec.version,
                                facts: rec.facts(h.obj),
                                record: Some(Box::new(rec)),
                            },
                        });
                    }
                }
            }
        }
        self.unexplained_pages.extend(pages.damage());
        if let Some(q) = segment_end {
            if let Some((sum, pages)) = self.summary_chain(b, q, None)? {
                // Sealed after several segments: the chain is the truth, as above.
                self.apply_summary(b, &sum, seen)?;
                self.blocks.update(b, |blk| {
                    blk.set_next_page(q + 1);
                    blk.set_overhead(pages);
                    blk.base_serial = sum.base_serial;
                });
                return Ok(Shape::Full);
            }
        }
        let base = found
            .iter()
            .filter_map(|s| match s.what {
                Found::Data {
                    serial: Serial::Full(v),
                    ..
                } => Some(v),
                _ => None,
            })
            .min()
            .unwrap_or(0);
        self.blocks.update(b, |blk| {
            blk.set_next_page(programmed);
            blk.base_serial = base.saturating_sub(1);
        });
        seen.extend(found);
        Ok(if programmed == 0 {
            Shape::Empty
        } else {
            Shape::Open
        })
    }

    /// Small layout: gives every data page known only by the low bits of its serial its
    /// full serial back, the nearest at or below the bound.
    fn widen_serials(&mut self, seen: &mut [Seen], open: &[u32]) {
        if self.layout.tags != TagLayout::Small {
            return;
        }
        let upper = serial_upper_bound(seen, self.streams.len(), self.layout.pages_per_block);
        for s in seen.iter_mut() {
            if let Found::Data { serial, .. } = &mut s.what {
                if let Serial::Low(low) = *serial {
                    *serial = Serial::Full(widen_serial(low, upper));
                }
            }
        }
        // Blocks' first serials, for those the walk could not know.
        let ppb = self.layout.pages_per_block;
        for &b in open {
            let min = seen
                .iter()
                .filter(|s| s.pno / ppb == b)
                .filter_map(|s| match s.what {
                    Found::Data {
                        serial: Serial::Full(v),
                        ..
                    } => Some(v),
                    _ => None,
                })
                .min();
            if let Some(m) = min {
                self.blocks
                    .update(b, |blk| blk.base_serial = m.saturating_sub(1));
            }
        }
    }
}

/// The highest serial any page on flash can have: the highest one known in full (from
/// summaries, the large layout's tags, header records), plus what the blocks without a
/// summary can hold beyond it. Every page of such a block is younger than the small
/// layout's window (`write_path` seals blocks before they get older), so the low bits
/// name exactly one serial below the bound.
pub(crate) fn serial_upper_bound(seen: &[Seen], streams: usize, pages_per_block: u32) -> u64 {
    let known = seen
        .iter()
        .filter_map(|s| match s.what {
            Found::Data {
                serial: Serial::Full(v),
                ..
            } => Some(v),
            Found::Header { version, .. } => Some(version),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    known + unsummarised_serials(streams, pages_per_block)
}

/// What one page's tags said.
enum PageScan {
    Erased,
    Garbage,
    Found(Seen),
    Summary,
    Checkpoint,
}
