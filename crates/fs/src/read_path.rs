//! Page reads with their checks. A page is trusted only when its tags decode and its
//! contents pass every check the layout has: the chip's ECC (which reports a torn or
//! damaged page as uncorrectable), the data CRC in the large tag layout, and the CRC a
//! header record or special page carries in band.

use nandkit_flash::{EccReport, Flash, FlashError};

use crate::blocks::SCRUB;
use crate::error::{FsError, Result};
use crate::format::crc;
use crate::format::record::Record;
use crate::format::special::Special;
use crate::format::summary::Summary;
use crate::format::tags::{self, SpecialKind, TagRead, Tags};
use crate::fs::FileSystem;
use crate::types::Ino;

/// A page as read back: its tags and its contents.
pub(crate) struct PageRead {
    pub tags: Tags,
    /// Data pages: the chunk's bytes in use. Header and special pages: the whole page.
    pub data: Vec<u8>,
    /// The contents failed a check (ECC, a CRC, an impossible length): they are damaged.
    pub damaged: bool,
}

impl<F: Flash> FileSystem<F> {
    /// Reads a whole page (data and OOB). `Ok(false)`: ECC could not correct it (the
    /// buffers hold the bytes as read). A correctable read that asks for a scrub flags
    /// the block.
    pub(crate) fn read_full(&mut self, pno: u32) -> Result<(Vec<u8>, Vec<u8>, bool)> {
        self.settle()?;
        self.read_full_now(pno)
    }

    /// `read_full` for a shared reader, with nothing posted.
    pub(crate) fn read_full_now(&self, pno: u32) -> Result<(Vec<u8>, Vec<u8>, bool)> {
        self.check_alive()?;
        debug_assert!(self.settled(), "a shared read with pages posted");
        let g = self.layout.geometry;
        let mut page = vec![0u8; g.page_size_bytes as usize];
        let mut oob = vec![0u8; g.oob_size_bytes as usize];
        let addr = self.layout.page_addr(pno);
        let read = self.dev.lock().read_page(addr, &mut page, &mut oob);
        let ok = match read {
            Ok(ecc) => {
                self.note_ecc(pno, ecc);
                true
            }
            Err(FlashError::Uncorrectable { .. }) => false,
            Err(e) => return Err(self.fail(e)),
        };
        self.note_tag_correction(pno, &oob);
        Ok((page, oob, ok))
    }

    /// A correctable read that asks for a scrub: the block is flagged (by the next
    /// exclusive call, as a shared reader cannot touch the block table), and cleaning
    /// moves its data before the errors grow past what ECC corrects.
    pub(crate) fn note_ecc(&self, pno: u32, ecc: EccReport) {
        if ecc.scrub {
            let b = self.layout.block_of(pno);
            self.scrub_later
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(b);
        }
    }

    /// Tags read with a flipped bit corrected (see `format::tags`): the block is flagged
    /// for a scrub like a page whose data ECC corrected many bits, so cleaning rewrites
    /// it before a second bit flips.
    fn note_tag_correction(&self, pno: u32, oob: &[u8]) {
        if Tags::corrected(self.layout.tag_bytes(oob), self.layout.tags) {
            self.note_ecc(
                pno,
                EccReport {
                    scrub: true,
                    ..EccReport::default()
                },
            );
        }
    }

    /// Flags the blocks shared readers asked to scrub.
    pub(crate) fn absorb_scrubs(&mut self) {
        let later = self
            .scrub_later
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if later.is_empty() {
            return;
        }
        for b in std::mem::take(later) {
            self.blocks.update(b, |blk| blk.flags |= SCRUB);
        }
    }

    /// Reads only a page's tags (an OOB read). Unreadable tags count as garbage.
    pub(crate) fn read_tags(&mut self, pno: u32) -> Result<TagRead> {
        Ok(self.read_tags_marked(pno)?.0)
    }

    /// `read_tags`, and whether the tags are YAFFS1's deletion marker (its tag bytes
    /// cleared by a second program of the spare area): a stale page, not a damaged one.
    pub(crate) fn read_tags_marked(&mut self, pno: u32) -> Result<(TagRead, bool)> {
        self.check_alive()?;
        let g = self.layout.geometry;
        let mut oob = vec![0u8; g.oob_size_bytes as usize];
        self.settle()?;
        let addr = self.layout.page_addr(pno);
        match self.dev.get_mut().read_oob(addr, &mut oob) {
            Ok(_) => {
                self.note_tag_correction(pno, &oob);
                let at = self.layout.tag_offset;
                let tags = oob.get(at..at + self.layout.tags.bytes());
                let marked = tags.is_some_and(|t| t.iter().all(|&b| b == 0));
                Ok((self.layout.decode_tags(&oob), marked))
            }
            Err(FlashError::Uncorrectable { .. }) => Ok((TagRead::Garbage, false)),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Checks a whole page read and turns it into tags and contents. `None` when the tags
    /// are erased or garbage.
    pub(crate) fn parse_page(&self, page: Vec<u8>, oob: &[u8], ecc_ok: bool) -> Option<PageRead> {
        let TagRead::Valid(tags) = self.layout.decode_tags(oob) else {
            return None;
        };
        let mut damaged = !ecc_ok;
        let data = match tags {
            Tags::Data(d) => {
                let n = match d.n_bytes {
                    Some(n) => n,
                    None => match tags::inband_len(&page) {
                        Some(n) => n,
                        None => {
                            damaged = true;
                            0
                        }
                    },
                };
                if n > self.layout.chunk_bytes {
                    return None;
                }
                let mut page = page;
                page.truncate(n as usize);
                if let Some(c) = d.data_crc {
                    damaged |= crc(&page) != c;
                }
                page
            }
            Tags::Header(_) => {
                damaged |= Record::decode(&page).is_none();
                page
            }
            Tags::Special(_) => {
                damaged |= Special::decode(&page).is_none();
                page
            }
        };
        Some(PageRead {
            tags,
            data,
            damaged,
        })
    }

    /// Reads a page with its tags and checks it. `None` when the tags are erased or
    /// garbage.
    pub(crate) fn read_raw(&mut self, pno: u32) -> Result<Option<PageRead>> {
        self.settle()?;
        self.read_raw_now(pno)
    }

    /// `read_raw` for a shared reader, with nothing posted.
    pub(crate) fn read_raw_now(&self, pno: u32) -> Result<Option<PageRead>> {
        let (page, oob, ok) = self.read_full_now(pno)?;
        Ok(self.parse_page(page, &oob, ok))
    }

    /// Reads a data page that must hold `chunk` of `ino`, checking everything.
    pub(crate) fn read_expected_data(&mut self, pno: u32, ino: Ino, chunk: u32) -> Result<Vec<u8>> {
        self.settle()?;
        self.read_expected_data_now(pno, ino, chunk)
    }

    /// `read_expected_data` for a shared reader, with nothing posted.
    pub(crate) fn read_expected_data_now(&self, pno: u32, ino: Ino, chunk: u32) -> Result<Vec<u8>> {
        let read = self.read_raw_now(pno)?;
        Self::expected_data(read, pno, ino, chunk)
    }

    /// A page as read (see `read_raw`) if it holds `chunk` of `ino` undamaged.
    pub(crate) fn expected_data(
        read: Option<PageRead>,
        pno: u32,
        ino: Ino,
        chunk: u32,
    ) -> Result<Vec<u8>> {
        match read {
            Some(r) if matches!(r.tags, Tags::Data(d) if d.obj == ino && d.chunk == chunk) => {
                if r.damaged {
                    Err(FsError::Io(format!(
                        "page {pno} (object {ino}, chunk {chunk}) is damaged"
                    )))
                } else {
                    Ok(r.data)
                }
            }
            _ => Err(FsError::Io(format!(
                "page {pno} (object {ino}, chunk {chunk}) does not hold what the file system \
                 expects"
            ))),
        }
    }

    /// Reads a header page that must belong to `ino`; returns the whole page.
    pub(crate) fn read_expected_header(&mut self, pno: u32, ino: Ino) -> Result<Vec<u8>> {
        match self.read_raw(pno)? {
            Some(r) if matches!(r.tags, Tags::Header(h) if h.obj == ino) => {
                if r.damaged {
                    Err(FsError::Io(format!(
                        "page {pno} (header of object {ino}) is damaged"
                    )))
                } else {
                    Ok(r.data)
                }
            }
            _ => Err(FsError::Io(format!(
                "page {pno} does not hold the header of object {ino}"
            ))),
        }
    }
    /// The summary of block `b` whose last summary page is `q`, joined back to page 0
    /// through its segments (see `format::summary`), and how many summary pages that took.
    /// `last`: page `q` as already read (data, OOB, ECC ok). `None` if any link is missing
    /// or damaged: the caller then reads the block page by page.
    pub(crate) fn summary_chain(
        &mut self,
        b: u32,
        q: u32,
        last: Option<crate::batch::RawPage>,
    ) -> Result<Option<(Summary, u32)>> {
        let mut segments: Vec<Summary> = Vec::new();
        let mut page = q;
        let mut read = last;
        loop {
            let (data, oob, ok) = match read.take() {
                Some(r) => r,
                None => self.read_full(self.layout.pno(b, page))?,
            };
            let is_summary = matches!(
                self.layout.decode_tags(&oob),
                TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Summary
            );
            let Some(sum) = Special::decode(&data)
                .filter(|_| ok && is_summary)
                .and_then(|sp| Summary::from_special(&sp, self.layout.chunk_bytes, page as usize))
            else {
                return Ok(None);
            };
            let covered = sum.entries.len() as u32;
            segments.push(sum);
            if covered == page {
                break;
            }
            // The pages before this segment end with the previous segment's summary.
            page -= covered + 1;
        }
        let count = segments.len() as u32;
        let mut joined = segments.pop().expect("at least one segment");
        while let Some(later) = segments.pop() {
            match Summary::after(joined, later) {
                Some(s) => joined = s,
                None => return Ok(None),
            }
        }
        Ok(Some((joined, count)))
    }
}
