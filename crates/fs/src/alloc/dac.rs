//! DAC, dynamic data clustering (Chiang, Lee and Chang, "Using data clustering to improve
//! cleaning performance for flash memory", 1999), the MODA paper's competitor: the flash
//! is split into k regions by update frequency, one stream each, region 0 the coldest.
//! New data starts in region 0; a page updated moves up one region; a page still valid
//! when its block is cleaned (it has cooled) moves down one. Per page, and blind to what
//! the page is: DAC works below the file system, so headers are pages like any other.
//!
//! A page's region is the stream its block was filled by (`BlockStreams`): no table per
//! page. Blocks filled before this mount are unknown and count as region 0; nothing is
//! kept on flash (see `alloc`).

use super::{Allocator, BlockStreams, WriteCause, WriteHint};
use crate::config::AllocParams;

pub struct Dac {
    regions: usize,
    blocks: BlockStreams,
}

impl Dac {
    pub fn new(params: &AllocParams, blocks: u32, pages_per_block: u32) -> Self {
        Self {
            regions: (params.regions as usize).max(1),
            blocks: BlockStreams::new(blocks, pages_per_block),
        }
    }
}

impl Allocator for Dac {
    fn name(&self) -> &'static str {
        "dac"
    }

    fn streams(&self) -> usize {
        self.regions
    }

    fn stream_for(&mut self, hint: &WriteHint) -> usize {
        let Some(old) = hint.old_page else {
            return 0;
        };
        let region = self.blocks.of_page(old).unwrap_or(0).min(self.regions - 1);
        match hint.cause {
            WriteCause::Cleaning => region.saturating_sub(1),
            _ => (region + 1).min(self.regions - 1),
        }
    }

    fn placed(&mut self, _hint: &WriteHint, stream: usize, pno: u32) {
        self.blocks.record(pno, stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_climb_and_cleaning_copies_sink() {
        let mut d = Dac::new(&AllocParams::default(), 16, 32);
        let new = WriteHint::user_data(5, 0, None);
        assert_eq!(d.stream_for(&new), 0);
        d.placed(&new, 0, 0);
        let mut page = 0;
        for want in [1, 2, 3, 3] {
            let update = WriteHint::user_data(5, 0, Some(page));
            let s = d.stream_for(&update);
            assert_eq!(s, want);
            page = 32 * (s as u32 + 1);
            d.placed(&update, s, page);
        }
        let copy = WriteHint {
            cause: WriteCause::Cleaning,
            ..WriteHint::user_data(5, 0, Some(page))
        };
        assert_eq!(d.stream_for(&copy), 2);
        // Headers are pages like any other.
        assert_eq!(d.stream_for(&WriteHint::metadata(5, Some(page))), 3);
    }
}
