//! YAFFS1's deletion markers and chunk versions (the `yaffs1` profile's log).
//!
//! YAFFS1 keeps no block summaries and no global write order on small-page chips: its
//! 8 bytes of tags hold an object, a chunk and a short version. Two rules make that enough:
//!
//! - a page made stale (a chunk rewritten, a file truncated or deleted, an old header) is
//!   marked deleted in its spare area, by a second, partial program of the spare that
//!   clears its tag bytes (small-page chips allow two programs of the spare area per
//!   erase: `DeviceConfig::spare_programs`); a mount skips marked pages;
//! - a rewritten chunk's tags carry its version: one more (mod 2^14) than the copy it
//!   replaces, read from that copy's tags. A power cut between a new copy and the marker
//!   of the old one leaves both unmarked: the mount keeps the newer by version.
//!
//! A marker is written only once the page's replacement (the new copy, the header that
//! truncated or deleted) is on flash: invalidations follow their replacement everywhere in
//! the write path, and the pages are marked before the next page is programmed (and at
//! sync and unmount). A power cut before a marker leaves a stale page unmarked; the mount
//! drops it (a newer version, a size that ends before it, a deleted object) and a
//! writable mount marks it then.

use nandkit_flash::{Flash, FlashError};

use crate::error::{FsError, Result};
use crate::format::tags::{Serial, TagRead, Tags, SMALL_SERIAL_BITS};
use crate::fs::FileSystem;
use crate::object::{LOST_PAGE, NO_PAGE};
use crate::types::Ino;

/// Versions wrap at this many.
const VERSIONS: u32 = 1 << SMALL_SERIAL_BITS;

/// Is version `b` newer than `a`? (The copies of a chunk on flash at once are never
/// more than a few versions apart, far less than half the circle.)
pub(crate) fn version_newer(b: u16, a: u16) -> bool {
    let d = (u32::from(b) + VERSIONS - u32::from(a)) % VERSIONS;
    d != 0 && d < VERSIONS / 2
}

/// The version after `v`.
pub(crate) fn version_after(v: u16) -> u16 {
    ((u32::from(v) + 1) % VERSIONS) as u16
}

impl<F: Flash> FileSystem<F> {
    /// The version the next copy of `chunk` of `obj` gets: one more than the copy on
    /// flash now (whose tags are read, as YAFFS1 reads them), or 0 for a first copy.
    pub(crate) fn next_chunk_version(&mut self, obj: Ino, chunk: u32) -> Result<u16> {
        let old = self
            .objects
            .get(&obj)
            .map_or(NO_PAGE, |o| o.chunks.get(chunk));
        if old == NO_PAGE || old == LOST_PAGE {
            return Ok(0);
        }
        self.stats.version_reads += 1;
        Ok(match self.read_tags(old)? {
            TagRead::Valid(Tags::Data(d)) if d.obj == obj && d.chunk == chunk => {
                version_after(d.serial.low())
            }
            // Unreadable tags: the copy cannot win against any version.
            _ => 0,
        })
    }

    /// Marks every page made stale since the last call deleted on flash.
    pub(crate) fn mark_stale_pages(&mut self) -> Result<()> {
        if !self.yaffs1_log() || self.read_only {
            return Ok(());
        }
        let pages = self.blocks.take_stale();
        if pages.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        let g = self.layout.geometry;
        let mut marker = vec![0xFF; g.oob_size_bytes as usize];
        let tags = self.layout.tag_offset..self.layout.tag_offset + self.layout.tags.bytes();
        marker[tags].fill(0);
        for pno in pages {
            // A page listed twice, or made valid again by a mount, is left alone.
            if self.blocks.is_valid(pno) {
                continue;
            }
            // A victim being cleaned is erased next: its copies are newer versions, so
            // it needs no markers (as YAFFS1's cleaning wrote none). Kept listed in case
            // the cleaning stops before the erase.
            if self.blocks.is_pinned(pno / self.layout.pages_per_block) {
                self.blocks.note_stale(pno);
                continue;
            }
            let addr = self.layout.page_addr(pno);
            match self.dev.get_mut().program_spare(addr, &marker) {
                Ok(()) => self.stats.deletion_markers_written += 1,
                Err(FlashError::PartialProgramLimit { times: 1, .. }) => {
                    return Err(FsError::Invalid(
                        "this chip allows no second program of a page's spare area, which \
                         yaffs1's deletion markers need (small-page SLC chips allow it)",
                    ))
                }
                // Marked already, the block went bad, or the medium failed there: the
                // page is stale anyway, and a mount drops an unmarked stale page by its
                // version or its size.
                Err(FlashError::PartialProgramLimit { .. })
                | Err(FlashError::SpareOfErasedPage(_))
                | Err(FlashError::BadBlock(_)) => {}
                Err(e) if e.is_media_failure() => {}
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(())
    }
}

/// A data page's version, as the tags carry it.
pub(crate) fn version_of(serial: Serial) -> u16 {
    serial.low()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_around_the_circle() {
        assert!(version_newer(1, 0));
        assert!(!version_newer(0, 1));
        assert!(!version_newer(5, 5));
        assert!(version_newer(0, (VERSIONS - 1) as u16), "wraps");
        assert!(!version_newer((VERSIONS - 1) as u16, 0));
        assert!(version_newer(3, (VERSIONS - 2) as u16));
    }
}
