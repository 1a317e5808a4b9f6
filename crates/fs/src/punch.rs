//! Hole punching and zeroing (fallocate PUNCH_HOLE | KEEP_SIZE, and ZERO_RANGE).
//!
//! A punch frees the whole chunks of the range at once and records the hole with a
//! truncation floor (see `floors`) in the file's next header: `Floor { size: a * C, serial:
//! S, end_chunk: b }` says "chunks `[a, b)` older than serial S are stale", which is exactly
//! what a scan needs to keep the punched chunks dead. S is the next serial when the chunks
//! are dropped: every copy of them on flash is older, and everything written since is
//! newer. The partial chunks at the edges are rewritten with zeros in the punched part,
//! through the write path. The order:
//!
//! 1. the edge chunks (data, each one page: all-or-nothing per chunk);
//! 2. the cached chunk is flushed and room for the header made in the open block
//!    (`room_for_headers`), so whatever cleaning that takes runs while the chunks are
//!    still mapped; then the whole chunks leave the RAM map, but their pages stay valid on
//!    flash (listed in `punching`) until the header is written. Cleaning can still run in
//!    between only if the header write rewrites chunks first (merging floors, or filling
//!    floors a full header cannot carry); it drops such a page instead of copying it (a
//!    copy would be newer than S and survive the floor). A cut then, after the block was
//!    erased and before the header, could let an older copy of the chunk show (as after
//!    a shrink cut at the same point);
//! 3. the header, carrying the floor (and the new size, times and reservation);
//! 4. the pages become invalid: they count for cleaning at once, like a discard.
//!
//! After a crash each chunk of the range holds its old bytes or zeros, and bytes outside
//! the range are untouched; once the call returns the range reads zeros for good.
//!
//! The floor lives in RAM (and in headers) while part of its range is a hole; with more
//! than `MAX_FLOORS` two are merged, which first rewrites the live chunks the merged
//! floor covers beyond the newer one's range (see `merge_floors_if_needed`).
//!
//! ZERO_RANGE is a punch whose range stays allocated: the chunks it frees join the file's
//! fallocate reservation (see `reserve`), so writes into it cannot run out of room; unless
//! KEEP_SIZE the file grows to cover it. Both land in the same header as the floor.

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::Floor;
use crate::format::reserved::Reserve;
use crate::fs::FileSystem;
use crate::object::{LOST_PAGE, NO_CHUNK, NO_PAGE};
use crate::types::{Ino, Time};

impl<F: Flash> FileSystem<F> {
    /// A punch is recorded as a truncation floor, which needs the write order of data
    /// pages; YAFFS1's log has none (and YAFFS1 predates hole punching).
    fn check_punch_supported(&self) -> Result<()> {
        if self.yaffs1_log() {
            return Err(crate::error::FsError::NotSupported(
                "yaffs1 cannot punch holes: its log keeps no write order to record one (YAFFS1 predates hole punching)",
            ));
        }
        if self.block_placed() {
            return Err(crate::error::FsError::NotSupported(
                "mnfs cannot punch holes: its files own whole erase blocks, mapped by block (MNFS has no holes to free)",
            ));
        }
        Ok(())
    }

    /// Frees bytes `[offset, offset + len)` of a file (they read as zeros); the size stays.
    /// Durable once it returns.
    pub fn punch_hole(&mut self, ino: Ino, offset: u64, len: u64) -> Result<()> {
        self.present(ino)?;
        self.check_punch_supported()?;
        let end = self.check_range_call(ino, offset, len)?;
        self.load(ino)?;
        let c = u64::from(self.layout.chunk_bytes);
        let size = self.obj(ino)?.size;
        // The reservation gives back the whole chunks the punch frees (an edge chunk
        // keeps its data, and its reservation).
        let old_reserve = self.reserves.get(ino);
        if !old_reserve.is_empty() {
            let a = offset.div_ceil(c).min(u64::from(u32::MAX)) as u32;
            let b = if end >= size {
                end.div_ceil(c)
            } else {
                end / c
            };
            let b = b.min(u64::from(u32::MAX)) as u32;
            let mut new = old_reserve.clone();
            new.remove(Reserve { start: a, end: b });
            self.set_reserve(ino, new);
        }
        let q = end.min(size);
        let r = if offset < q {
            self.punch_range(ino, offset, q)
        } else if old_reserve != self.reserves.get(ino) {
            // Past the end of file: only the reservation changed (times stay, as on Linux
            // a punch past the end changes nothing).
            self.persist_punch(ino, None, false)
        } else {
            Ok(())
        };
        if r.is_err() {
            self.set_reserve(ino, old_reserve);
        }
        r
    }

    /// Makes bytes `[offset, offset + len)` of a file read as zeros and keeps them
    /// allocated (a write into them cannot hit ENOSPC); unless `keep_size`, the file grows
    /// to cover them. Durable once it returns.
    pub fn zero_range(&mut self, ino: Ino, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        self.present(ino)?;
        self.check_punch_supported()?;
        let end = self.check_range_call(ino, offset, len)?;
        self.load(ino)?;
        // Room for what becomes reserved (the holes of the new range that were not
        // reserved yet; chunks the zeroing frees stay counted), the edges and the header.
        let (old, new, extra) = self.widened_reserve(ino, offset, end)?;
        let o = self.obj(ino)?;
        if extra > 0 && self.free_chunks() < extra + 3 {
            return Err(FsError::NoSpace);
        }
        let size = o.size;
        self.set_reserve(ino, new);
        let grow = !keep_size && end > size;
        if grow {
            if let Err(e) = self.truncate(ino, end) {
                self.set_reserve(ino, old);
                return Err(e);
            }
        }
        let q = end.min(self.obj(ino)?.size);
        if offset < q {
            self.punch_range(ino, offset, q)
        } else {
            self.persist_punch(ino, None, true)
        }
    }

    /// Punches bytes `[p, q)` (within the file): zeros into the edge chunks, the whole
    /// chunks dropped, then the header with their floor.
    fn punch_range(&mut self, ino: Ino, p: u64, q: u64) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        let size = self.obj(ino)?.size;
        debug_assert!(p < q && q <= size);
        // Whole chunks [a, b): the chunk holding the end of file counts as whole when the
        // range reaches the end (its bytes past the size are not file data).
        let a = p.div_ceil(c);
        let b = if q == size { q.div_ceil(c) } else { q / c };
        let mut edges = Vec::new();
        if p < a * c {
            edges.push((p, q.min(a * c)));
        }
        if b * c < q && b >= a {
            edges.push((b * c, q));
        }
        for (s, e) in edges {
            let chunk = (s / c) as u32;
            let cached = self.caches.get(&ino).is_some_and(|w| w.chunk == chunk);
            if !cached && self.obj(ino)?.chunks.get(chunk) == NO_PAGE {
                continue; // a hole reads zeros already
            }
            let n = self.write(ino, s, &vec![0u8; (e - s) as usize])?;
            debug_assert_eq!(n as u64, e - s);
        }
        let (a, b) = (a as u32, b.min(u64::from(u32::MAX)) as u32);
        let floor = if a < b {
            if self
                .caches
                .get(&ino)
                .is_some_and(|w| (a..b).contains(&w.chunk))
            {
                self.caches.remove(&ino);
            }
            // Every write before the header is done now, and the header fits the open
            // block: cleaning runs now, while the chunks are still mapped (copies of them
            // are then older than the floor), not while their pages wait for the header.
            self.flush_cache(ino)?;
            self.room_for_headers(ino, 1)?;
            // Only chunks that were ever on flash need a floor.
            let on_flash = match self.obj(ino)?.max_chunk_on_flash {
                NO_CHUNK => 0,
                m => m.saturating_add(1),
            };
            let serial = self.next_serial;
            let o = self.obj_mut(ino)?;
            let mut pages = Vec::new();
            let mut cleared = Vec::new();
            for (chunk, pno) in o.chunks.entries() {
                if chunk >= a && chunk < b {
                    o.chunks.set(chunk, NO_PAGE);
                    cleared.push(chunk);
                    if pno != LOST_PAGE {
                        pages.push(pno);
                    }
                }
            }
            for chunk in cleared {
                self.touch_chunk(ino, chunk);
            }
            self.punching.extend(pages);
            self.recount_reserve(ino);
            (a < on_flash).then_some(Floor {
                size: u64::from(a) * c,
                serial,
                end_chunk: b.min(on_flash),
            })
        } else {
            None
        };
        self.persist_punch(ino, floor, true)
    }

    /// Writes the file's header (with `floor`, if any, among its floors; with new times if
    /// `touch`), after its cached chunk; then the pages punched are invalid. If the header
    /// cannot be written, RAM keeps the punch (and the floor) and the next header write
    /// records it.
    fn persist_punch(&mut self, ino: Ino, floor: Option<Floor>, touch: bool) -> Result<()> {
        let now = Time::from_ns(self.now());
        let o = self.obj_mut(ino)?;
        let d = o.d_mut();
        if touch {
            d.mtime = now;
            d.ctime = now;
        }
        if let Some(f) = floor {
            d.floors.push(f);
        }
        let d = d.clone();
        o.set_dirty(true);
        let r = self
            .flush_cache(ino)
            .and_then(|()| self.persist(ino, d, Vec::new()));
        for pno in std::mem::take(&mut self.punching) {
            self.blocks.invalidate(pno);
        }
        r
    }
}
