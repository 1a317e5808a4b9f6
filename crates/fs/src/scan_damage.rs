//! Which pages a scan found failing are damage, and which a power cut explains.
//!
//! A page that is programmed but fails its checks (ECC, its tags' check, a header that does
//! not decode) is damage, never a hole or an unwritten page, except where a power cut can
//! leave one:
//! - **a torn program**: the pages in flight when power failed, which end a block's
//!   programmed pages (a batch puts one on each chip of an array), and a seal summary a
//!   mount was writing then: at most [`TORN_PAGES_MAX`] failing pages at the end of a
//!   block, or just before the summary that sealed it;
//! - **a torn erase**: a block whose erase was cut holds half-erased cells all through it.
//!   Over an array, the virtual block is one block of each chip, and only one chip's erase
//!   is torn: its pages (every p-th page) fail or read erased, the other chips' pages pass.
//!
//! Anything else is damage: a failing page with a passing page written after it (in its
//! chip's stride), or more failing pages at a block's end than a cut can tear. fsck reports
//! those pages as problems (`FileSystem::unexplained_pages`). What cannot be told apart is
//! named in the damage campaign's list of undetectable classes
//! (`crates/fs/tests/all/damage_campaign.rs`): a block garbled whole reads as a torn erase.

use nandkit_flash::Flash;

use crate::fs::FileSystem;

/// Most failing pages a power cut can leave before the end of a block's programmed pages
/// (or the seal after them): the programs in flight at once (one per chip of an array; 8
/// chips are the most the benches use), a torn summary of the seal after them, and as many
/// again for a cut during that mount.
pub(crate) const TORN_PAGES_MAX: u32 = 16;

/// The failing and passing pages of one block, in the order a scan reads them.
#[derive(Debug)]
pub(crate) struct BlockPages {
    /// Programs a cut can find in flight at once: one per chip of the array (a row of the
    /// block), 1 on one chip.
    row: u32,
    /// Failing pages: offset in the block, page number.
    failed: Vec<(u32, u32)>,
    /// Offsets of data and header pages that pass.
    written_at: Vec<u32>,
    /// Offsets of other pages that pass (summaries, deletion markers).
    passed_at: Vec<u32>,
    /// Offsets of summaries that sealed the block after a crash.
    sealed_at: Vec<u32>,
    /// Offsets of pages that read erased among programmed ones.
    erased_at: Vec<u32>,
    /// Offsets of written pages known by small tags alone, whose check is a few bits: a
    /// cut erase's random bytes pass it now and then, so they do not show an erase whole.
    weak_at: Vec<u32>,
}

impl BlockPages {
    /// A block of a device that has `in_flight` programs in flight at most.
    pub(crate) fn new(in_flight: u32) -> BlockPages {
        BlockPages {
            row: in_flight.max(1),
            failed: Vec::new(),
            written_at: Vec::new(),
            passed_at: Vec::new(),
            sealed_at: Vec::new(),
            erased_at: Vec::new(),
            weak_at: Vec::new(),
        }
    }

    /// Page `pno`, at `offset` in its block, fails its checks.
    pub(crate) fn failed(&mut self, pno: u32, offset: u32) {
        self.failed.push((offset, pno));
    }

    /// The page at `offset` reads erased, with programmed pages after it (a scan that
    /// walks past erased pages says so): a torn erase leaves such pages among its failing
    /// ones.
    pub(crate) fn erased(&mut self, offset: u32) {
        self.erased_at.push(offset);
    }

    /// A data or header page passes: a failing page before it, outside its row, was not
    /// in flight when power failed.
    pub(crate) fn written_after(&mut self, offset: u32) {
        self.written_at.push(offset);
    }

    /// A data or header page passes by its small tags alone (see `weak_at`).
    pub(crate) fn written_after_by_small_tags(&mut self, offset: u32) {
        self.written_at.push(offset);
        self.weak_at.push(offset);
    }

    /// Another page passes (a summary, a deletion marker): it says nothing of the pages
    /// before it, but it is no half-erased cell.
    pub(crate) fn passed(&mut self, offset: u32) {
        self.passed_at.push(offset);
    }

    /// A summary at `offset` sealed the block after a crash: the failing pages just
    /// before it were that crash's tear.
    pub(crate) fn sealed(&mut self, offset: u32) {
        self.sealed_at.push(offset);
        self.passed_at.push(offset);
    }

    /// The pages of this block that are damage.
    pub(crate) fn damage(self) -> Vec<u32> {
        if self.torn_erase() {
            return Vec::new();
        }
        let end = self
            .failed
            .iter()
            .map(|f| f.0)
            .chain(self.written_at.iter().copied())
            .chain(self.passed_at.iter().copied())
            .max()
            .map_or(0, |o| o + 1);
        self.failed
            .iter()
            .filter(|&&(o, _)| !self.torn_program(o, end) && !self.worn_chip(o))
            .map(|f| f.1)
            .collect()
    }

    /// Is the failing page at `offset` on a chip of an array that fails its programs from
    /// some page on (worn out)? The batch went on on the other chips, so their pages pass
    /// after it, but none of that chip's pages passes after its first failure: the block
    /// takes nothing more.
    fn worn_chip(&self, offset: u32) -> bool {
        if self.row < 2 {
            return false;
        }
        let chip = offset % self.row;
        let Some(first) = self
            .failed
            .iter()
            .map(|f| f.0)
            .filter(|o| o % self.row == chip)
            .min()
        else {
            return false;
        };
        !self
            .written_at
            .iter()
            .chain(&self.passed_at)
            .any(|&p| p > first && p % self.row == chip)
    }

    /// Was the failing page at `offset` in flight when power failed? Then it ends the
    /// programmed pages (or those a seal closed), a few pages from that end at most, and no
    /// data or header page passes after its row (the row's other chips may complete).
    fn torn_program(&self, offset: u32, end: u32) -> bool {
        let until = self
            .sealed_at
            .iter()
            .copied()
            .filter(|&s| s > offset)
            .min()
            .unwrap_or(end);
        let row_end = (offset / self.row + 1) * self.row;
        // A cut tears a few pages at most: a longer run of failing pages before the end
        // is damage all through.
        let window = until.saturating_sub(TORN_PAGES_MAX + 1);
        let failing_near_end = self
            .failed
            .iter()
            .filter(|f| f.0 >= window && f.0 < until)
            .count();
        until - offset <= TORN_PAGES_MAX
            && failing_near_end <= TORN_PAGES_MAX as usize
            && !self.written_at.iter().any(|&w| w >= row_end && w < until)
    }

    /// Do the failing pages fall where one chip's cut erase puts them: one stride of the
    /// block (every p-th page, all on one chip of p; p = 1 on one chip), its pages failing
    /// or reading erased, none of them passing, and more than one of them?
    fn torn_erase(&self) -> bool {
        let Some(&(first, _)) = self.failed.first() else {
            return false;
        };
        let passing = || {
            self.written_at
                .iter()
                .filter(|w| !self.weak_at.contains(w))
                .chain(&self.passed_at)
        };
        // Erased pages after the last programmed one are the block's unwritten end.
        let last = self
            .failed
            .iter()
            .map(|f| f.0)
            .chain(passing().copied())
            .max()
            .unwrap_or(0);
        let in_class = |d: u32, o: u32| o.abs_diff(first).is_multiple_of(d);
        // The stride of one chip's pages: the whole block on one chip, every row-th page
        // over an array.
        [1, self.row].iter().any(|&d| {
            let one_chip = self.failed.iter().all(|&(f, _)| in_class(d, f));
            // A cut erase: the chip's share fails (or reads erased) all through.
            let erased_too = self
                .erased_at
                .iter()
                .filter(|&&e| e < last && in_class(d, e))
                .count();
            one_chip && !passing().any(|&p| in_class(d, p)) && self.failed.len() + erased_too > 1
        })
    }
}

impl<F: Flash> FileSystem<F> {
    /// Programs a power cut can find in flight at once (see [`Flash::programs_in_flight`]).
    pub(crate) fn programs_in_flight(&self) -> u32 {
        self.dev.lock().programs_in_flight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(pages: &[(u32, bool)]) -> Vec<u32> {
        let mut b = BlockPages::new(1);
        for &(offset, ok) in pages {
            if ok {
                b.written_after(offset);
            } else {
                b.failed(100 + offset, offset);
            }
        }
        b.damage()
    }

    #[test]
    fn a_failing_page_with_a_good_one_after_it_is_damage() {
        assert_eq!(block(&[(0, true), (1, false), (2, true)]), vec![101]);
    }

    #[test]
    fn a_few_failing_pages_at_the_end_are_a_tear() {
        let pages: Vec<(u32, bool)> = (0..10).map(|i| (i, i < 6)).collect();
        assert!(block(&pages).is_empty());
    }

    #[test]
    fn more_failing_pages_at_the_end_than_a_cut_tears_are_damage() {
        let n = TORN_PAGES_MAX + 1;
        let pages: Vec<(u32, bool)> = (0..n + 2).map(|i| (i, i < 2)).collect();
        assert_eq!(block(&pages).len(), n as usize);
    }

    #[test]
    fn a_block_failing_whole_is_a_torn_erase() {
        let pages: Vec<(u32, bool)> = (0..64).map(|i| (i, false)).collect();
        assert!(block(&pages).is_empty());
    }

    #[test]
    fn one_failing_page_among_erased_ones_of_its_chip_is_a_torn_erase() {
        // 4 chips: chip 0's page 0 fails, its other pages read erased.
        let mut b = BlockPages::new(4);
        for i in 0..32 {
            match i % 4 {
                0 if i == 0 => b.failed(100, 0),
                0 => b.erased(i),
                _ => b.written_after(i),
            }
        }
        assert!(b.damage().is_empty());
        // A single failing page among passing ones of every stride is damage.
        assert_eq!(
            block(&[(0, true), (1, false), (2, true), (3, true)]),
            vec![101]
        );
    }

    #[test]
    fn on_an_array_a_torn_page_may_have_its_rows_other_pages_after_it() {
        let mut b = BlockPages::new(4);
        for i in 0..9 {
            b.written_after(i);
        }
        b.failed(109, 9); // chip 1 of row 2 torn; chips 2 and 3 completed
        b.written_after(10);
        b.written_after(11);
        assert!(b.damage().is_empty());
        // On one chip nothing completes after a torn page.
        assert_eq!(block(&[(0, true), (1, false), (2, true)]), vec![101]);
    }

    #[test]
    fn failing_pages_just_before_a_seal_are_the_tear_it_sealed() {
        let mut b = BlockPages::new(1);
        b.written_after(0);
        b.failed(101, 1);
        b.sealed(2);
        b.written_after(3);
        assert!(b.damage().is_empty());
    }

    #[test]
    fn one_chips_torn_erase_in_an_array_fails_every_pth_page() {
        // 4 chips: chip 1's pages (offsets 1, 5, 9, ...) fail, the others hold old data.
        let chip_1_fails = |except: Option<u32>| {
            let mut b = BlockPages::new(4);
            for i in 0..64 {
                if i % 4 != 1 || Some(i) == except {
                    b.written_after(i);
                } else {
                    b.failed(100 + i, i);
                }
            }
            b.damage()
        };
        assert!(chip_1_fails(None).is_empty());
        // One of chip 1's pages passing after its failures: neither a torn erase nor a
        // worn chip.
        assert!(!chip_1_fails(Some(41)).is_empty());
    }

    #[test]
    fn a_worn_chip_of_an_array_fails_from_some_page_on() {
        let mut b = BlockPages::new(4);
        for i in 0..12 {
            if i % 4 == 3 && i >= 3 {
                b.failed(100 + i, i);
            } else {
                b.written_after(i);
            }
        }
        assert!(b.damage().is_empty());
    }
}
