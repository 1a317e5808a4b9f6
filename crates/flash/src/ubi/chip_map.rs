//! One chip's UBI state in RAM: the eraseblock association table (LEB -> PEB) of the
//! file system's volume and of every other volume (the layout volume, volumes another tool
//! made), every PEB's erase counter and state, and the free and used pools ordered by
//! erase count (for the allocator and for wear levelling). Nothing here touches flash.

use std::collections::{BTreeMap, BTreeSet};

/// Erases of a chip during which a PEB just given new data may not be moved by wear
/// levelling (UBI's `UBI_PROT_QUEUE_LEN`): fresh data is likely hot, and moving it onto a
/// worn PEB would only wear that PEB out faster.
pub const PROTECTION_ERASES: u64 = 10;

/// No PEB: the LEB is unmapped and reads as erased.
const UNMAPPED: u32 = u32::MAX;

/// The key of the volume `id` in a PEB's state: a volume slot's ID (below 128) as it is,
/// the layout volume as 255.
pub fn vol_key(id: u32) -> u8 {
    if id == super::vtbl::LAYOUT_VOLUME_ID {
        u8::MAX
    } else {
        debug_assert!(id < super::vtbl::MAX_VOLUMES);
        id as u8
    }
}

/// The volume ID a key stands for.
pub fn vol_id(key: u8) -> u32 {
    if key == u8::MAX {
        super::vtbl::LAYOUT_VOLUME_ID
    } else {
        u32::from(key)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PebState {
    /// Erased with a valid EC header, ready to map.
    Free,
    /// Needs an erase and a new EC header before use: attach found it half-written, torn or
    /// a loser of a duplicate. Erased lazily when allocated, so a read-only attach writes
    /// nothing.
    Dirty,
    /// Holds LEB `leb` of the volume whose key ([`vol_key`]) is `vol`: one byte, so a PEB's
    /// state stays 8 bytes (a map holds one per PEB).
    Used { vol: u8, leb: u32 },
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
    /// The file system's volume (the one the array above addresses), if the chip has one.
    pub fs_vol: Option<u32>,
    /// Its LEBs' PEBs.
    pub eba: Vec<u32>,
    /// (volume, LEB) -> PEB of every other volume's mapped LEBs.
    pub others: BTreeMap<(u32, u32), u32>,
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
    /// A map of `pebs` for a file system volume `fs_vol` of `lebs` LEBs.
    pub fn new(chip: u32, fs_vol: Option<u32>, lebs: u32, pebs: Vec<Peb>, bad_limit: u32) -> Self {
        let mut m = ChipMap {
            chip,
            fs_vol,
            eba: vec![UNMAPPED; lebs as usize],
            others: BTreeMap::new(),
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
                PebState::Used { vol, leb } => {
                    let vol = vol_id(vol);
                    m.used.insert((p.ec, i as u32));
                    if Some(vol) == fs_vol {
                        m.eba[leb as usize] = i as u32;
                    } else {
                        m.others.insert((vol, leb), i as u32);
                    }
                }
                PebState::Bad => {}
            }
        }
        m
    }

    /// The PEB holding LEB `leb` of the file system's volume.
    pub fn peb_of(&self, leb: u32) -> Option<u32> {
        match self.eba.get(leb as usize) {
            Some(&p) if p != UNMAPPED => Some(p),
            _ => None,
        }
    }

    /// The PEB holding LEB `leb` of volume `vol`.
    pub fn peb_of_vol(&self, vol: u32, leb: u32) -> Option<u32> {
        if Some(vol) == self.fs_vol {
            return self.peb_of(leb);
        }
        self.others.get(&(vol, leb)).copied()
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

    /// Maps LEB `leb` of `vol` onto `peb` (taken from the pool), whose EC is now `ec`.
    pub fn map(&mut self, vol: u32, leb: u32, peb: u32, ec: u32) {
        self.pebs[peb as usize] = Peb {
            ec,
            state: PebState::Used {
                vol: vol_key(vol),
                leb,
            },
        };
        self.used.insert((ec, peb));
        if Some(vol) == self.fs_vol {
            self.eba[leb as usize] = peb;
        } else {
            self.others.insert((vol, leb), peb);
        }
    }

    /// Unmaps LEB `leb` of `vol`: its PEB (returned) leaves the used pool; the caller
    /// erases it.
    pub fn unmap(&mut self, vol: u32, leb: u32) -> Option<u32> {
        let peb = self.peb_of_vol(vol, leb)?;
        if Some(vol) == self.fs_vol {
            self.eba[leb as usize] = UNMAPPED;
        } else {
            self.others.remove(&(vol, leb));
        }
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
        if let PebState::Used { vol, leb } = p.state {
            let vol = vol_id(vol);
            if self.peb_of_vol(vol, leb) == Some(peb) {
                self.unmap(vol, leb);
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
        ChipMap::new(0, Some(0), 4, pebs, 1)
    }

    /// A map keeps a state per PEB: the volume a PEB holds is a one-byte key, so a PEB
    /// costs 12 bytes (its erase count and state), as before volumes, not 16.
    #[test]
    fn a_peb_costs_twelve_bytes_and_volume_keys_round_trip() {
        assert_eq!(std::mem::size_of::<Peb>(), 12);
        for id in [0, 1, 127, crate::ubi::vtbl::LAYOUT_VOLUME_ID] {
            assert_eq!(vol_id(vol_key(id)), id);
        }
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
        m.map(0, 0, 0, ec);
        m.protect(0);
        for k in 1..=10 {
            let (ec, _) = m.take(1);
            m.put_free(1, ec + 1);
            assert_eq!(m.is_protected(0), k < 10, "after {k} erases");
        }
        // Protected again, then erased itself: no longer protected.
        m.protect(0);
        assert!(m.is_protected(0));
        m.unmap(0, 0);
        m.put_free(0, ec + 1);
        assert!(!m.is_protected(0));
        assert_eq!(m.pebs[0].ec, ec + 1);
    }
}
