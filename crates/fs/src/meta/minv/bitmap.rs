//! The heap allocation bitmap: the NVRAM manager's state kept in the NVRAM, a bit per heap
//! unit, set exactly while the unit belongs to a structure reachable from the inode table
//! (or an inode still on the dying list, see `pages`). Its words change in the same redo
//! transaction as the pointer store that makes a structure reachable or drops it, so after
//! any crash the bitmap is the manager's free space, and no mount has to walk the
//! structures to learn it.
//!
//! The manager in DRAM (`heap`) hands out room before it is published; that room is free in
//! the bitmap until the store that publishes it, and a crash in between leaves it free.
//! What a clean unmount saves is not a structure: its room is never marked.

use nandkit_nvram::NvramError;

use super::pages::{put, Tx};
use super::{Extent, Minv};

/// One change a transaction carries besides its pointer stores.
#[derive(Clone, Copy, Debug)]
pub(super) enum Change {
    /// Page `p` takes this state.
    Page(u32, super::layout::PageState),
    /// The heap units of an extent are taken (true) or free.
    Heap(Extent, bool),
}

impl Minv {
    /// Bitmap words the units of `e` span.
    pub(super) fn bit_words(&self, e: Extent) -> usize {
        let (first, last) = self.unit_range(e);
        (last / 64 - first / 64 + 1) as usize
    }

    /// The first and last heap unit of `e`.
    fn unit_range(&self, e: Extent) -> (u64, u64) {
        let units = self.regions.units_of(e.off, e.bytes);
        (units.start, units.end - 1)
    }

    /// Adds to `tx` the stores that mark `e`'s units taken or free, each word read through
    /// the stores `tx` already holds.
    pub(super) fn heap_bits(
        &mut self,
        tx: &mut Tx,
        e: Extent,
        taken: bool,
    ) -> Result<(), NvramError> {
        let (first, last) = self.unit_range(e);
        let mut i = first;
        while i <= last {
            let (off, bit) = self.regions.unit_bit(i);
            let n = (64 - u64::from(bit)).min(last - i + 1);
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << bit
            };
            let word = match tx.iter().find(|(o, _)| *o == off) {
                Some(&(_, v)) => v,
                None => self.nv.read_u64(off)?,
            };
            put(tx, off, if taken { word | mask } else { word & !mask });
            i += n;
        }
        Ok(())
    }

    /// Words `c` adds to a transaction, at most.
    pub(super) fn change_words(&self, c: &Change) -> usize {
        match *c {
            Change::Page(..) => 1,
            Change::Heap(e, _) => self.bit_words(e),
        }
    }

    /// Adds `c`'s stores to `tx`.
    pub(super) fn add_change(&mut self, tx: &mut Tx, c: &Change) -> Result<(), NvramError> {
        match *c {
            Change::Page(p, st) => self.page_state(tx, p, st),
            Change::Heap(e, taken) => self.heap_bits(tx, e, taken),
        }
    }

    /// `pointers` and `changes` as one transaction, if they fit the log.
    pub(super) fn one_tx(
        &mut self,
        pointers: &[(u64, u64)],
        changes: &[Change],
    ) -> Result<Option<Tx>, NvramError> {
        let most: usize = changes.iter().map(|c| self.change_words(c)).sum();
        if pointers.len() + most > super::layout::LOG_ENTRIES {
            return Ok(None);
        }
        let mut tx = Tx::new();
        for c in changes {
            self.add_change(&mut tx, c)?;
        }
        tx.extend_from_slice(pointers);
        Ok(Some(tx))
    }
}
