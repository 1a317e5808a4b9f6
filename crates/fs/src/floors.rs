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

/// Most floors a header carries; past that two are merged (`merge_floors_if_needed`).
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
        if !self.metadata_on_flash() {
            // Metadata in NVRAM: slots are cleared exactly, nothing stale to rule out.
            return Vec::new();
        }
        floors
            .iter()
            .copied()
            .filter(|f| self.has_hole(ino, self.first_chunk_past(f.size), f.end_chunk))
            .collect()
    }

    /// The floors a header for `ino` at `size` must carry: those with a hole within the
    /// size (past it, the header itself rules stale chunks out).
    pub(crate) fn floors_for_header(&self, ino: Ino, floors: &[Floor], size: u64) -> Vec<Floor> {
        if !self.metadata_on_flash() {
            return Vec::new();
        }
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
        if !self.metadata_on_flash() {
            return Vec::new();
        }
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

    /// Before a header write: if it would carry too many floors, two of them become one.
    ///
    /// The rule: merging floors `a` and `b`, `b` the newer, gives `m` = (the range from the
    /// lower of their first chunks to the higher of their end chunks, b's serial), which
    /// kills every chunk of that range older than b. Within b's own range that is what b
    /// says already: a chunk mapped there now is newer than b (b's chunks left the map when
    /// b was made: a shrink cut them, a punch dropped them). Anywhere else in m's range a
    /// live chunk may be older than b, so those are rewritten first (new serials, newer
    /// than every floor). Truncation floors only ever grow their end chunk, so between two
    /// of them that is the stretch from a's first chunk to b's; a punch's floor ends where
    /// the punch did, and then the stretch past its end is rewritten too. Of all pairs the
    /// one with the fewest chunks to rewrite is merged (neighbouring punches, usually).
    pub(crate) fn merge_floors_if_needed(
        &mut self,
        ino: Ino,
        floors: &mut Vec<Floor>,
    ) -> Result<()> {
        floors.sort_by_key(|f| f.serial);
        while floors.len() > MAX_FLOORS {
            let mut best: Option<(u64, usize, usize)> = None;
            for i in 0..floors.len() {
                for j in i + 1..floors.len() {
                    let cost = self
                        .merge_rewrites(floors[i], floors[j])
                        .iter()
                        .map(|&(from, to)| self.live_in(ino, from, to))
                        .sum::<u64>();
                    if best.is_none_or(|(c, _, _)| cost < c) {
                        best = Some((cost, i, j));
                    }
                }
            }
            let (_, i, j) = best.expect("more than one floor");
            let (a, b) = (floors[i], floors[j]);
            for (from, to) in self.merge_rewrites(a, b) {
                self.rewrite_chunks(ino, from, to)?;
            }
            floors.remove(j);
            floors[i] = Floor {
                size: a.size.min(b.size),
                serial: b.serial,
                end_chunk: a.end_chunk.max(b.end_chunk),
            };
            floors.sort_by_key(|f| f.serial);
        }
        Ok(())
    }

    /// The chunk ranges to rewrite before merging `a` into the newer `b`: the merged
    /// range minus b's.
    fn merge_rewrites(&self, a: Floor, b: Floor) -> Vec<(u32, u32)> {
        debug_assert!(a.serial <= b.serial);
        let (a_start, b_start) = (self.first_chunk_past(a.size), self.first_chunk_past(b.size));
        let start = a_start.min(b_start);
        let end = a.end_chunk.max(b.end_chunk);
        let mut out = Vec::new();
        if start < b_start.min(end) {
            out.push((start, b_start.min(end)));
        }
        let from = b.end_chunk.max(start).max(b_start.min(end));
        if from < end {
            out.push((from, end));
        }
        out
    }

    /// Chunks of `ino` in `[from, to)` with a page.
    fn live_in(&self, ino: Ino, from: u32, to: u32) -> u64 {
        self.objects.get(&ino).map_or(0, |o| {
            let to = to.min(o.chunks.end());
            if from >= to {
                0
            } else {
                u64::from(to - from) - o.chunks.holes_in(from, to)
            }
        })
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
