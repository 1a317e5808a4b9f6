//! Truncation floors: what keeps stale chunks dead without writing zeros.
//!
//! A header with size S and version V says "no data at or past S, as of V": on a scan,
//! chunks older than the newest header and past its size do not count. When a file is
//! shrunk and then grown over the cut without writing it (a hole), the newer header's
//! bigger size no longer rules out the stale chunks in the hole, so it carries the older
//! header's (S, V) as a floor, with `end_chunk` (one past the highest chunk that was on
//! flash then) bounding the range. Each object keeps in RAM the floors of its headers that
//! still protect a hole: after every header write the new header's own floor joins them
//! and floors it supersedes go; a floor is forgotten once every chunk of its range has
//! been written again (a mapped chunk is always newer than every floor below it).

use nandkit_flash::Flash;

use crate::error::Result;
use crate::format::record::Floor;
use crate::fs::FileSystem;
use crate::object::NO_CHUNK;
use crate::types::Ino;

/// Most floors a header carries; past that the two oldest are merged.
pub(crate) const MAX_FLOORS: usize = 8;

impl<F: Flash> FileSystem<F> {
    fn first_chunk_past(&self, size: u64) -> u32 {
        size.div_ceil(u64::from(self.layout.chunk_bytes))
            .min(u64::from(u32::MAX)) as u32
    }

    /// Does anything in chunks `[from, to)` of `ino` lack a page (a hole a stale chunk
    /// could show through)?
    fn has_hole(&self, ino: Ino, from: u32, to: u32) -> bool {
        self.objects
            .get(&ino)
            .is_some_and(|o| from < to && o.chunks.holes_in(from, to) > 0)
    }

    /// The floors to keep in RAM: those whose range still has a hole.
    pub(crate) fn live_floors(&self, ino: Ino, floors: &[Floor]) -> Vec<Floor> {
        floors
            .iter()
            .copied()
            .filter(|f| self.has_hole(ino, self.first_chunk_past(f.size), f.end_chunk))
            .collect()
    }

    /// The floors a header for `ino` at `size` must carry: those with a hole within the
    /// size (past it, the header itself rules stale chunks out).
    pub(crate) fn floors_for_header(&self, ino: Ino, floors: &[Floor], size: u64) -> Vec<Floor> {
        let end = self.first_chunk_past(size);
        floors
            .iter()
            .copied()
            .filter(|f| self.has_hole(ino, self.first_chunk_past(f.size), f.end_chunk.min(end)))
            .collect()
    }

    /// The floors after a header (size, version) was written: its own joins those it
    /// does not supersede. (Not pruned here: the caller may be about to drop chunks, a
    /// shrink; the next header write prunes.)
    pub(crate) fn floors_after_header(
        &self,
        ino: Ino,
        floors: &[Floor],
        size: u64,
        version: u64,
    ) -> Vec<Floor> {
        let end_chunk = self.objects.get(&ino).map_or(0, |o| {
            if o.max_chunk_on_flash == NO_CHUNK {
                0
            } else {
                o.max_chunk_on_flash.saturating_add(1)
            }
        });
        let mut out: Vec<Floor> = floors.iter().copied().filter(|f| f.size < size).collect();
        out.push(Floor {
            size,
            serial: version,
            end_chunk,
        });
        out
    }

    /// Before a header write: if it would carry too many floors, the two oldest become one,
    /// after rewriting the live chunks between them (so the merged floor, newer than some
    /// of them, cannot hide them).
    pub(crate) fn merge_floors_if_needed(
        &mut self,
        ino: Ino,
        floors: &mut Vec<Floor>,
    ) -> Result<()> {
        floors.sort_by_key(|f| f.serial);
        while floors.len() > MAX_FLOORS {
            let (a, b) = (floors[0], floors[1]);
            let from = self.first_chunk_past(a.size);
            let to = self
                .first_chunk_past(b.size)
                .min(b.end_chunk.max(a.end_chunk));
            self.rewrite_chunks(ino, from, to)?;
            floors.remove(1);
            floors[0] = Floor {
                size: a.size,
                serial: b.serial,
                end_chunk: a.end_chunk.max(b.end_chunk),
            };
        }
        Ok(())
    }

    /// Makes a floor unneeded the old way: zero chunks over the holes of its range that
    /// lie within the file (a rare fallback, for a header too full to carry the floor).
    pub(crate) fn fill_floor_holes(&mut self, ino: Ino, f: Floor, size: u64) -> Result<()> {
        let from = self.first_chunk_past(f.size);
        let to = f.end_chunk.min(self.first_chunk_past(size));
        let zeros = vec![0u8; self.layout.chunk_bytes as usize];
        for chunk in from..to {
            if self.obj(ino)?.chunks.get(chunk) == crate::object::NO_PAGE {
                self.write_zero_chunk(ino, chunk, &zeros)?;
            }
        }
        Ok(())
    }
}
