//! What a clean unmount leaves for the next mount, so that mount need not walk every
//! file-offset structure: which flash pages hold published data, and the NVRAM manager's
//! free extents. (The paper's structures are used in place and never rebuilt; ours are
//! mirrored in RAM, so the mirror of each file's offsets is built the first time the file
//! is used instead, see `Minv::load_map`.)
//!
//! ```text
//! CLEAN_OFF   offset of the saved state in the heap (0: none; the mount walks everything)
//! saved state:
//!   0   magic "NKMVSAVE"
//!   8   the heap room it was given (its length rounded up, and one extent's worth more)
//!   16  CRC-32C of the whole state with this word zero
//!   24  pages the map covers (every page of the device)
//!   32  free extents listed
//!   40  valid-page map: one bit a flash page, 64 to a word
//!   ..  free extents: (offset u64, bytes u64) each
//! ```
//!
//! The word is stored (and persisted) last at unmount, after the state itself; a writable
//! mount clears it (persisted) before it changes anything and frees the state. So a state
//! that the word points at always describes the NVRAM as it is. A crash mid-way leaves the
//! word 0 and the next mount walks everything, as after any crash. A state that fails its
//! checks is ignored the same way: the walk is the authority, this only saves its work.

use super::layout::{get64, UNIT};
use super::recover::Reader;
use super::Regions;
use crate::error::Result;

/// The word after the redo log's entries (always 0 in images made before it existed).
pub(crate) const CLEAN_OFF: u64 = super::layout::LOG_OFF + 496;
const MAGIC: [u8; 8] = *b"NKMVSAVE";
const HEAD: u64 = 40;

/// A saved state, checked.
pub(crate) struct Saved {
    /// Where it is (heap offset and its allocation's bytes).
    pub off: u64,
    pub bytes: u64,
    /// Valid-page map, one bit a page.
    pub valid: Vec<u64>,
    pub free: Vec<(u64, u64)>,
}

impl Saved {
    /// The pages the map calls valid, in order.
    pub(crate) fn valid_pages(&self) -> impl Iterator<Item = u32> + '_ {
        self.valid.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u32)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| i as u32 * 64 + b)
        })
    }
}

/// Bytes of a saved state for `pages` pages and `free` extents.
pub(crate) fn state_bytes(pages: u64, free: usize) -> u64 {
    HEAD + 8 * pages.div_ceil(64) + 16 * free as u64
}

/// Encodes a saved state written into `room` bytes of heap.
pub(crate) fn encode(valid: &[u64], pages: u64, free: &[(u64, u64)], room: u64) -> Vec<u8> {
    let len = state_bytes(pages, free.len());
    debug_assert!(len <= room);
    let mut b = Vec::with_capacity(len as usize);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&room.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&pages.to_le_bytes());
    b.extend_from_slice(&(free.len() as u64).to_le_bytes());
    for w in valid {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for (o, n) in free {
        b.extend_from_slice(&o.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
    }
    let crc = u64::from(crc32c::crc32c(&b));
    b[16..24].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The saved state the clean word points at, if there is one and it passes every check
/// (otherwise None: the mount walks everything).
pub(crate) fn read(r: &mut Reader, regions: &Regions, pages: u64) -> Result<Option<Saved>> {
    let off = get64(&r.read(CLEAN_OFF, 8)?, 0);
    let in_heap = |o: u64, len: u64| {
        o >= regions.heap_off && o.is_multiple_of(UNIT) && o.saturating_add(len) <= regions.heap_end
    };
    if off == 0 || !in_heap(off, HEAD) {
        return Ok(None);
    }
    let head = r.read(off, HEAD)?;
    let room = get64(&head, 8);
    let n_free = get64(&head, 32);
    if head[0..8] != MAGIC
        || get64(&head, 24) != pages
        || n_free > regions.heap_end / UNIT
        || !room.is_multiple_of(UNIT)
        || !in_heap(off, room)
    {
        return Ok(None);
    }
    let len = state_bytes(pages, n_free as usize);
    if len > room {
        return Ok(None);
    }
    let mut b = r.read(off, len)?;
    let crc = get64(&b, 16);
    b[16..24].fill(0);
    if u64::from(crc32c::crc32c(&b)) != crc {
        return Ok(None);
    }
    let words = pages.div_ceil(64) as usize;
    let at = HEAD as usize;
    let valid = (0..words).map(|i| get64(&b, at + 8 * i)).collect();
    let at = at + 8 * words;
    let free = (0..n_free as usize)
        .map(|i| (get64(&b, at + 16 * i), get64(&b, at + 16 * i + 8)))
        .collect();
    Ok(Some(Saved {
        off,
        bytes: room,
        valid,
        free,
    }))
}

/// Whether `used` extents (offset, bytes; any order) all lie outside the `free` ones
/// (sorted, disjoint).
pub(crate) fn outside_free(free: &[(u64, u64)], used: &[(u64, u64)]) -> bool {
    used.iter().all(|&(off, bytes)| {
        // The last free extent starting at or before `off + bytes - 1` is the only one
        // that can overlap.
        let end = off + bytes;
        let i = free.partition_point(|&(f, _)| f < end);
        i == 0 || {
            let (f, n) = free[i - 1];
            f + n <= off
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_extents_must_miss_the_free_ones() {
        let free = [(100, 50), (300, 100)];
        assert!(outside_free(&free, &[(0, 100), (150, 150), (400, 8)]));
        assert!(!outside_free(&free, &[(140, 20)]));
        assert!(!outside_free(&free, &[(90, 20)]));
        assert!(!outside_free(&free, &[(350, 8)]));
        assert!(outside_free(&[], &[(0, 8)]));
    }

    #[test]
    fn valid_pages_lists_the_set_bits_in_order() {
        let s = Saved {
            off: 0,
            bytes: 0,
            valid: vec![0b101, 0, 1 << 63],
            free: Vec::new(),
        };
        assert_eq!(s.valid_pages().collect::<Vec<_>>(), vec![0, 2, 191]);
    }
}
