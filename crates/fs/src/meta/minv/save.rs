//! What a clean unmount leaves for the next mount: an index of the namespace (`index`),
//! the next header version and the files with fallocated chunks. The NVRAM manager's free
//! space (the heap bitmap) and which flash pages hold published data (the page states,
//! `layout`) every mount reads as they are. (The paper's structures are never rebuilt.
//! Ours are used in place too: the file system keeps its own object of each file in RAM,
//! built the first time a call reaches it, see `lazy`, with its chunk map the first time
//! the file is used, see `Minv::load_map`. The tree kept in the inodes, `tree`, and the
//! log region's counts hold the same facts, exact after any crash, and a mount without a
//! state reads those; the index finds an object by a binary search instead of a hash
//! chain, and spares the walk a file with fallocated chunks would cost.)
//!
//! ```text
//! CLEAN_OFF   offset of the saved state in the heap (0: none; the mount reads the tree)
//! saved state:
//!   0   magic "NKMVSAV3"
//!   8   the heap room it was given (its length rounded up, and one extent's worth more)
//!   16  CRC-32C of the head and reserved list, with this word zero
//!   24  pages of the device (a state of another device is ignored)
//!   32  0 (free extents, listed by earlier layouts: the bitmap says them now)
//!   40  objects in the index
//!   48  entries of the child array
//!   56  objects a listing shows (not hard links or attribute sets), root included
//!   64  the next header version to give
//!   72  files with fallocated chunks
//!   80  the files with fallocated chunks: object number u64 each (their reservations
//!       count against free space from the mount on)
//!   ..  the namespace index (`index`): read entry by entry, never whole
//! ```
//!
//! The word is stored (and persisted) last at unmount, after the state itself; a writable
//! mount clears it (persisted) before it changes anything and frees the state. So a state
//! that the word points at always describes the NVRAM as it is. A crash mid-way leaves the
//! word 0 and the next mount reads the tree in place, as after any crash. A state that
//! fails its checks is ignored the same way: the tree is the authority.

use super::index::{Entry, ENTRY};
use super::layout::{get64, UNIT};
use super::recover::Reader;
use super::Regions;
use crate::error::Result;
use crate::types::Ino;

/// The word after the redo log's entries (always 0 in images made before it existed).
pub(crate) const CLEAN_OFF: u64 = super::layout::LOG_OFF + super::layout::LOG_BYTES - 16;
/// (States of earlier layouts are ignored: that mount walks.)
const MAGIC: [u8; 8] = *b"NKMVSAV4";
const HEAD: u64 = 80;

/// The state's sizes, for the space model.
pub(crate) const SAVED_STATE: nandkit_models::SavedState = nandkit_models::SavedState {
    head: HEAD,
    per_object: ENTRY,
    per_child: 4,
    unit: UNIT,
};

/// The namespace part of a state, as the unmount gives it.
#[derive(Default)]
pub(crate) struct Namespace {
    pub entries: Vec<Entry>,
    pub children: Vec<u32>,
    pub visible: u64,
    pub next_serial: u64,
    pub reserved: Vec<Ino>,
}

/// A saved state, checked.
pub(crate) struct Saved {
    /// Where it is (heap offset and its allocation's bytes).
    pub off: u64,
    pub bytes: u64,
    pub objects: u64,
    pub children: u64,
    pub visible: u64,
    pub next_serial: u64,
    pub reserved: Vec<Ino>,
    /// NVRAM offsets of the object table and the child array.
    pub table_off: u64,
    pub children_off: u64,
}

/// Bytes of the checked part of a state: head, `reserved` files.
fn checked_bytes(reserved: usize) -> u64 {
    HEAD + 8 * reserved as u64
}

/// At most the bytes of a saved state for `reserved` fallocated files and `objects`
/// objects (each one entry and at most one child slot).
pub(crate) fn bound_bytes(reserved: u64, objects: u64) -> u64 {
    checked_bytes(reserved as usize) + (ENTRY + 4) * objects
}

/// Bytes of a saved state for namespace `ns`.
pub(crate) fn state_bytes(ns: &Namespace) -> u64 {
    checked_bytes(ns.reserved.len())
        + ENTRY * ns.entries.len() as u64
        + 4 * ns.children.len() as u64
}

/// Encodes a saved state written into `room` bytes of heap.
pub(crate) fn encode(pages: u64, ns: &Namespace, room: u64) -> Vec<u8> {
    let len = state_bytes(ns);
    debug_assert!(len <= room);
    let mut b = Vec::with_capacity(len as usize);
    b.extend_from_slice(&MAGIC);
    for w in [
        room,
        0,
        pages,
        0,
        ns.entries.len() as u64,
        ns.children.len() as u64,
        ns.visible,
        ns.next_serial,
        ns.reserved.len() as u64,
    ] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for &r in &ns.reserved {
        b.extend_from_slice(&u64::from(r).to_le_bytes());
    }
    let crc = u64::from(crc32c::crc32c(&b));
    b[16..24].copy_from_slice(&crc.to_le_bytes());
    b.extend_from_slice(&super::index::encode(&ns.entries, &ns.children));
    b
}

/// The saved state the clean word points at, if there is one and it passes every check
/// (otherwise None: the mount reads the tree in place).
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
    let (objects, children) = (get64(&head, 40), get64(&head, 48));
    let n_reserved = get64(&head, 72);
    let most = regions.heap_end / UNIT;
    if head[0..8] != MAGIC
        || get64(&head, 24) != pages
        || get64(&head, 32) != 0
        || objects > most
        || children > most
        || n_reserved > most
        || !room.is_multiple_of(UNIT)
        || !in_heap(off, room)
    {
        return Ok(None);
    }
    let len = checked_bytes(n_reserved as usize);
    if len + ENTRY * objects + 4 * children > room {
        return Ok(None);
    }
    let mut b = r.read(off, len)?;
    let crc = get64(&b, 16);
    b[16..24].fill(0);
    if u64::from(crc32c::crc32c(&b)) != crc {
        return Ok(None);
    }
    let at = HEAD as usize;
    let reserved = (0..n_reserved as usize)
        .map(|i| Ino::try_from(get64(&b, at + 8 * i)).unwrap_or(0))
        .collect();
    Ok(Some(Saved {
        off,
        bytes: room,
        objects,
        children,
        visible: get64(&head, 56),
        next_serial: get64(&head, 64),
        reserved,
        table_off: off + len,
        children_off: off + len + ENTRY * objects,
    }))
}
