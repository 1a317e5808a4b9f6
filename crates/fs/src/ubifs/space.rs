//! LEB properties in RAM (what the LPT holds on flash, kept up to date between commits):
//! per LEB its free space, its dirty space (written bytes no live node takes), whether it
//! holds index nodes, and what it is used for now.

use super::lpt::LebProps;

/// What a main-area LEB is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Use {
    /// Not written since it was last unmapped (if free is the whole LEB), or closed.
    #[default]
    Idle,
    /// A journal head writes into it.
    Head,
    /// The index head writes into it.
    IndexHead,
    /// Garbage collection emptied it; it is unmapped at the next commit (until then the
    /// index on flash may still point into it).
    Freeable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Lp {
    pub free: u32,
    pub dirty: u32,
    pub index: bool,
    pub used_as: Use,
}

impl Lp {
    /// An idle index LEB no live index node is left in: the next commit empties it.
    pub fn is_dead_index(&self, leb_size: u32) -> bool {
        self.index && self.used_as == Use::Idle && self.free + self.dirty == leb_size
    }
}

/// The main area's LEB properties.
#[derive(Clone, Debug)]
pub struct Space {
    pub main_first: u32,
    pub leb_size: u32,
    pub lps: Vec<Lp>,
}

impl Space {
    /// Every main-area LEB empty.
    pub fn empty(main_first: u32, main_lebs: u32, leb_size: u32) -> Space {
        Space {
            main_first,
            leb_size,
            lps: vec![
                Lp {
                    free: leb_size,
                    ..Default::default()
                };
                main_lebs as usize
            ],
        }
    }

    /// From the LPT read at mount.
    pub fn from_lpt(main_first: u32, leb_size: u32, props: &[LebProps]) -> Space {
        Space {
            main_first,
            leb_size,
            lps: props
                .iter()
                .map(|p| Lp {
                    free: p.free,
                    dirty: p.dirty,
                    index: p.index,
                    used_as: Use::Idle,
                })
                .collect(),
        }
    }

    pub fn get(&self, lnum: u32) -> Option<&Lp> {
        self.lps.get(lnum.checked_sub(self.main_first)? as usize)
    }

    pub fn get_mut(&mut self, lnum: u32) -> &mut Lp {
        &mut self.lps[(lnum - self.main_first) as usize]
    }

    /// Space that no live node takes any more (an obsolete node, padding).
    pub fn add_dirt(&mut self, lnum: u32, bytes: u32) {
        if let Some(i) = lnum.checked_sub(self.main_first) {
            if let Some(lp) = self.lps.get_mut(i as usize) {
                // Not capped at the programmed part: the node may still be in a write buffer.
                lp.dirty = (lp.dirty + bytes).min(self.leb_size);
            }
        }
    }

    /// An empty LEB nothing uses, lowest number first.
    pub fn pick_empty(&self) -> Option<u32> {
        self.lps
            .iter()
            .position(|lp| lp.free == self.leb_size && lp.used_as == Use::Idle && !lp.index)
            .map(|i| self.main_first + i as u32)
    }

    /// Empty LEBs nothing uses.
    pub fn empty_lebs(&self) -> u32 {
        self.lps
            .iter()
            .filter(|lp| lp.free == self.leb_size && lp.used_as == Use::Idle && !lp.index)
            .count() as u32
    }

    /// The LEB garbage collection would gain most from: the idle data LEB with the most
    /// space no live node takes (dirty, and free space no head will write), if that is at
    /// least `min_gain`.
    pub fn gc_victim(&self, min_gain: u32) -> Option<u32> {
        self.lps
            .iter()
            .enumerate()
            .filter(|(_, lp)| lp.used_as == Use::Idle && !lp.index && lp.free < self.leb_size)
            .filter(|(_, lp)| lp.dirty + lp.free >= min_gain)
            .max_by_key(|(i, lp)| (lp.dirty + lp.free, std::cmp::Reverse(*i)))
            .map(|(i, _)| self.main_first + i as u32)
    }

    /// The LPT's view: free, dirty and index flag of every LEB.
    pub fn props(&self) -> Vec<LebProps> {
        self.lps
            .iter()
            .map(|lp| LebProps {
                free: lp.free,
                dirty: lp.dirty,
                index: lp.index,
            })
            .collect()
    }

    /// Totals: free, dirty, used (written and live).
    pub fn totals(&self) -> (u64, u64, u64) {
        let mut t = (0u64, 0u64, 0u64);
        for lp in &self.lps {
            t.0 += u64::from(lp.free);
            t.1 += u64::from(lp.dirty);
            t.2 += u64::from(self.leb_size - lp.free - lp.dirty);
        }
        t
    }
}
