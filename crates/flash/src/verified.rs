//! Which pages' stored ECC bytes are known to match their data, so that a page read again
//! skips recomputing them. The check's outcome depends only on the stored bytes, and only
//! the chip changes those (programs, erases, torn operations, bad-block markers), so a page
//! stays verified from a program that completed (its check bytes computed from the data
//! just stored) or a read that found it clean, until the chip next writes to it. Host time
//! only: what a read returns, and its simulated time, are the same either way.
//!
//! One bit per page of the chip (64 KiB for a 1 GiB chip of 2 KiB pages), allocated when
//! the device opens; an image opened again starts with nothing verified.

pub(crate) struct VerifiedPages {
    bits: Vec<u64>,
    pages_per_block: u32,
}

impl VerifiedPages {
    pub(crate) fn new(blocks: u32, pages_per_block: u32) -> Self {
        let pages = u64::from(blocks) * u64::from(pages_per_block);
        Self {
            bits: vec![0; pages.div_ceil(64) as usize],
            pages_per_block,
        }
    }

    fn index(&self, block: u32, page: u32) -> usize {
        (u64::from(block) * u64::from(self.pages_per_block) + u64::from(page)) as usize
    }

    pub(crate) fn contains(&self, block: u32, page: u32) -> bool {
        let i = self.index(block, page);
        self.bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    pub(crate) fn insert(&mut self, block: u32, page: u32) {
        let i = self.index(block, page);
        if let Some(w) = self.bits.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }

    /// The page's stored bytes are about to change.
    pub(crate) fn forget(&mut self, block: u32, page: u32) {
        let i = self.index(block, page);
        if let Some(w) = self.bits.get_mut(i / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// Every page of the block is about to change (an erase, whole or torn).
    pub(crate) fn forget_block(&mut self, block: u32) {
        for page in 0..self.pages_per_block {
            self.forget(block, page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_independent_and_forgotten() {
        let mut v = VerifiedPages::new(3, 64);
        v.insert(1, 63);
        v.insert(2, 0);
        assert!(v.contains(1, 63) && v.contains(2, 0));
        assert!(!v.contains(1, 62) && !v.contains(0, 63));
        v.forget(2, 0);
        assert!(!v.contains(2, 0));
        v.insert(1, 5);
        v.forget_block(1);
        assert!(!v.contains(1, 5) && !v.contains(1, 63));
        // Out of range is never verified and never panics.
        v.insert(9, 9);
        assert!(!v.contains(9, 9));
    }
}
