//! One chip's UBI state in RAM: the eraseblock association table (LEB -> PEB), every PEB's
//! erase counter and state, and the free and used pools ordered by erase count (for the
//! allocator and for wear levelling). Nothing here touches flash.

use std::collections::{BTreeMap, BTreeSet};

/// Erases of a chip during which a PEB just given new data may not be moved by wear
/// levelling (UBI's `UBI_PROT_QUEUE_LEN`): fresh data is likely hot, and moving it onto a
/// worn PEB would only wear that PEB out faster.
pub const PROTECTION_ERASES: u64 = 10;

/// No PEB: the LEB is unmapped and reads as erased.
const UNMAPPED: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PebState {
    /// Erased with a valid EC header, ready to map.
    Free,
    /// Needs an erase and a new EC header before use: attach found it half-written, torn or
    /// a loser of a duplicate. Erased lazily when allocated, so a read-only attach writes
    /// nothing.
    Dirty,
    /// Holds a LEB.
    Used { leb: u32 },
    /// Factory or grown bad: never touched again.
    Bad,
}

#[derive(Clone, Copy, Debug)]
pub struct Peb {
    pub ec: u32,
    pub state: PebState,
}

/// A chip's map.
#[derive(Debug)]
pub struct ChipMap {
    pub chip: u32,
    pub eba: Vec<u32>,
    pub pebs: Vec<Peb>,
    /// (erase count, PEB) of every free or dirty PEB.
    pub free: BTreeSet<(u32, u32)>,
    /// (erase count, PEB) of every used PEB.
    pub used: BTreeSet<(u32, u32)>,
    /// Sequence number of the next VID header.
    pub sqnum: u64,
    /// Bad PEBs the chip may have before its spares run out.
    pub bad_limit: u32,
    /// PEBs recycled on this chip so far (the protection queue's clock).
    pub erases: u64,
    /// PEBs given new data, with the erase count of the chip until which they are young.
    pub protected: BTreeMap<u32, u64>,
}

impl ChipMap {
    pub fn new(chip: u32, lebs: u32, pebs: Vec<Peb>, bad_limit: u32) -> Self {
        let mut m = ChipMap {
            chip,
            eba: vec![UNMAPPED; lebs as usize],
            free: BTreeSet::new(),
            used: BTreeSet::new(),
            pebs,
            sqnum: 1,
            bad_limit,
            erases: 0,
            protected: BTreeMap::new(),
        };
        for (i, p) in m.pebs.iter().enumerate() {
            match p.state {
                PebState::Free | PebState::Dirty => {
                    m.free.insert((p.ec, i as u32));
                }
                PebState::Used { leb } => {
                    m.used.insert((p.ec, i as u32));
                    m.eba[leb as usize] = i as u32;
                }
                PebState::Bad => {}
            }
        }
        m
    }

    pub fn lebs(&self) -> u32 {
        self.eba.len() as u32
    }

    pub fn peb_of(&self, leb: u32) -> Option<u32> {
        match self.eba.get(leb as usize) {
            Some(&p) if p != UNMAPPED => Some(p),
            _ => None,
        }
    }

    /// Takes a free PEB for new data, as UBI's `find_mean_wl_entry` chooses: if the free
    /// PEBs' erase counts lie within twice the wear-levelling threshold, the median one;
    /// else the most worn of those within one threshold of the least worn. Its number,
    /// erase count and whether it must be erased first.
    pub fn take_for_new_data(&mut self, threshold: u32) -> Option<(u32, u32, bool)> {
        let (min, _) = *self.free.first()?;
        let (max, _) = *self.free.last()?;
        let (_, peb) = if max - min < threshold.saturating_mul(2) {
            *self.free.iter().nth(self.free.len() / 2)?
        } else {
            let bound = min.saturating_add(threshold);
            *self.free.range(..(bound, 0)).next_back()?
        };
        let (ec, dirty) = self.take(peb);
        Some((peb, ec, dirty))
    }

    /// Wear levelling's target, left in the pool: as UBI's `find_wl_entry`, the most worn
    /// free PEB within twice the threshold of the least worn one (not the most worn of
    /// all, which would take every move until it wore out).
    pub fn wl_target(&self, threshold: u32) -> Option<(u32, u32)> {
        let (min, _) = *self.free.first()?;
        let bound = min.saturating_add(threshold.saturating_mul(2));
        self.free.range(..(bound, 0)).next_back().copied()
    }

    /// Takes `peb` out of the pool: its erase count and whether it must be erased first.
    pub fn take(&mut self, peb: u32) -> (u32, bool) {
        let p = self.pebs[peb as usize];
        self.free.remove(&(p.ec, peb));
        (p.ec, p.state == PebState::Dirty)
    }

    /// Maps `leb` onto `peb` (taken from the pool), whose EC is now `ec`.
    pub fn map(&mut self, leb: u32, peb: u32, ec: u32) {
        self.pebs[peb as usize] = Peb {
            ec,
            state: PebState::Used { leb },
        };
        self.used.insert((ec, peb));
        self.eba[leb as usize] = peb;
    }

    /// Unmaps `leb`: its PEB (returned) leaves the used pool; the caller erases it.
    pub fn unmap(&mut self, leb: u32) -> Option<u32> {
        let peb = self.peb_of(leb)?;
        self.eba[leb as usize] = UNMAPPED;
        let ec = self.pebs[peb as usize].ec;
        self.used.remove(&(ec, peb));
        self.pebs[peb as usize].state = PebState::Dirty;
        Some(peb)
    }

    /// An erase and EC header that did not complete: the PEB waits, dirty, for another.
    pub fn put_dirty(&mut self, peb: u32) {
        let p = &mut self.pebs[peb as usize];
        p.state = PebState::Dirty;
        self.free.insert((p.ec, peb));
    }

    /// `peb` was just given new data: wear levelling leaves it alone for a while.
    pub fn protect(&mut self, peb: u32) {
        self.protected.insert(peb, self.erases + PROTECTION_ERASES);
    }

    /// Whether wear levelling may move the data in `peb`.
    pub fn is_protected(&self, peb: u32) -> bool {
        self.protected.contains_key(&peb)
    }

    /// An erased PEB with its new EC header goes back to the pool.
    pub fn put_free(&mut self, peb: u32, ec: u32) {
        self.erases += 1;
        let now = self.erases;
        self.protected.retain(|_, until| *until > now);
        self.protected.remove(&peb);
        self.pebs[peb as usize] = Peb {
            ec,
            state: PebState::Free,
        };
        self.free.insert((ec, peb));
    }

    /// A PEB that failed: retired for good.
    pub fn retire(&mut self, peb: u32) {
        let p = self.pebs[peb as usize];
        self.free.remove(&(p.ec, peb));
        self.used.remove(&(p.ec, peb));
        if let PebState::Used { leb } = p.state {
            if self.eba[leb as usize] == peb {
                self.eba[leb as usize] = UNMAPPED;
            }
        }
        self.pebs[peb as usize].state = PebState::Bad;
    }

    pub fn next_sqnum(&mut self) -> u64 {
        let s = self.sqnum;
        self.sqnum += 1;
        s
    }

    pub fn bad(&self) -> u32 {
        self.pebs
            .iter()
            .filter(|p| p.state == PebState::Bad)
            .count() as u32
    }

    /// Erase counts of every good PEB: (min, max, mean).
    pub fn ec_spread(&self) -> (u32, u32, f64) {
        let (mut min, mut max, mut sum, mut n) = (u32::MAX, 0, 0u64, 0u64);
        for p in self.pebs.iter().filter(|p| p.state != PebState::Bad) {
            min = min.min(p.ec);
            max = max.max(p.ec);
            sum += u64::from(p.ec);
            n += 1;
        }
        if n == 0 {
            return (0, 0, 0.0);
        }
        (min, max, sum as f64 / n as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chip map whose PEBs are all free with erase counts `ecs`, no LEB mapped.
    fn free_with(ecs: &[u32]) -> ChipMap {
        let pebs = ecs
            .iter()
            .map(|&ec| Peb {
                ec,
                state: PebState::Free,
            })
            .collect();
        ChipMap::new(0, 4, pebs, 1)
    }

    /// UBI's `find_wl_entry` with WL_FREE_MAX_DIFF = 2 * threshold: the most worn free PEB
    /// whose erase count is below the least worn one's plus twice the threshold (strictly:
    /// one at exactly that bound is out of reach).
    #[test]
    fn the_wl_target_is_the_most_worn_free_peb_below_twice_the_threshold() {
        // threshold 2: bound 1 + 4 = 5.
        let m = free_with(&[9, 1, 4, 5, 3]);
        assert_eq!(m.wl_target(2), Some((4, 2)), "4 is below 5; 5 is the bound");
        assert_eq!(m.wl_target(3), Some((5, 3)), "bound 7");
        assert_eq!(m.wl_target(100), Some((9, 0)), "all within: the most worn");
        assert_eq!(free_with(&[]).wl_target(2), None, "an empty pool");
    }

    /// UBI's `find_mean_wl_entry`: free PEBs within twice the threshold of each other
    /// (spread strictly below 2t) give the median one; wider, the most worn of those below
    /// the least worn plus one threshold (not the least worn: fresh data is likely hot).
    #[test]
    fn new_data_takes_the_median_free_peb_or_one_within_a_threshold_of_the_least_worn() {
        // Spread 3 < 2 * 2: the median of (1, 2, 3, 4) by (ec, peb) order, index 2.
        let mut m = free_with(&[4, 1, 3, 2]);
        assert_eq!(m.take_for_new_data(2), Some((2, 3, false)));
        assert!(!m.free.contains(&(3, 2)), "taken out of the pool");
        // Spread exactly 2t (4): not below it, so the most worn below 1 + 2 = 3.
        let mut m = free_with(&[5, 1, 2, 3]);
        assert_eq!(m.take_for_new_data(2), Some((2, 2, false)));
        // A dirty PEB says so (it must be erased first).
        let mut m = free_with(&[7]);
        m.pebs[0].state = PebState::Dirty;
        assert_eq!(m.take_for_new_data(2), Some((0, 7, true)));
        assert_eq!(m.take_for_new_data(2), None, "an empty pool");
    }

    /// UBI's protection queue (UBI_PROT_QUEUE_LEN = 10): a PEB given new data is not a
    /// wear-levelling source until the chip has recycled 10 more PEBs; erasing it ends
    /// its protection at once.
    #[test]
    fn a_peb_given_new_data_is_protected_for_10_erases_of_its_chip() {
        assert_eq!(PROTECTION_ERASES, 10);
        let mut m = free_with(&[0, 0, 0, 0]);
        let (ec, _) = m.take(0);
        m.map(0, 0, ec);
        m.protect(0);
        for k in 1..=10 {
            let (ec, _) = m.take(1);
            m.put_free(1, ec + 1);
            assert_eq!(m.is_protected(0), k < 10, "after {k} erases");
        }
        // Protected again, then erased itself: no longer protected.
        m.protect(0);
        assert!(m.is_protected(0));
        m.unmap(0);
        m.put_free(0, ec + 1);
        assert!(!m.is_protected(0));
        assert_eq!(m.pebs[0].ec, ec + 1);
    }
}
