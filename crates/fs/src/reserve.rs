//! fallocate: space reserved for a file, so that a later write into the range cannot fail
//! for want of room. A log-structured file system writes every chunk out of place anyway,
//! so nothing is written ahead: the file's header records the reserved chunk range, and
//! every hole in it counts as used space (in statfs, and against every other writer) until
//! it is written. Writes into a reserved hole may use the space set aside for it.
//!
//! A file has one reserved range; a second fallocate widens it to cover both. A shrink
//! gives back what lies past the new end (as on Linux, also what KEEP_SIZE reserved past
//! the end of the file).

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::Reserve;
use crate::fs::FileSystem;
use crate::types::{Ino, Kind};

impl<F: Flash> FileSystem<F> {
    /// The checks fallocate, punch and zero-range share: a writable mount, a regular file
    /// with its data (not hollow), a non-empty range within the largest file. Returns the
    /// range's end.
    pub(crate) fn check_range_call(&mut self, ino: Ino, offset: u64, len: u64) -> Result<u64> {
        self.check_writable()?;
        match self.visible(ino)?.kind {
            Kind::File => {}
            Kind::Dir => return Err(FsError::IsDir),
            _ => return Err(FsError::NoDevice),
        }
        self.file(ino)?;
        if len == 0 {
            return Err(FsError::Invalid("a range of zero bytes"));
        }
        let end = offset.checked_add(len).ok_or(FsError::TooBig)?;
        if end > self.max_file_size() {
            return Err(FsError::TooBig);
        }
        Ok(end)
    }

    /// The file's reservation widened to cover bytes `[offset, end)`: (the old one, the
    /// new one, how many holes become reserved that were not).
    pub(crate) fn widened_reserve(
        &self,
        ino: Ino,
        offset: u64,
        end: u64,
    ) -> Result<(Option<Reserve>, Reserve, u64)> {
        let c = u64::from(self.layout.chunk_bytes);
        let want = Reserve {
            start: (offset / c) as u32,
            end: end.div_ceil(c) as u32,
        };
        let old = self.reserves.get(&ino).copied();
        let new = match old {
            Some(r) => Reserve {
                start: r.start.min(want.start),
                end: r.end.max(want.end),
            },
            None => want,
        };
        let o = self.obj(ino)?;
        let extra = o.chunks.holes_in(new.start, new.end)
            - old.map_or(0, |r| o.chunks.holes_in(r.start, r.end));
        Ok((old, new, extra))
    }

    /// Reserves room for bytes `[offset, offset + len)` of a file; unless `keep_size`, the
    /// file grows to cover them. Durable once it returns (one header write).
    pub fn fallocate(&mut self, ino: Ino, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        let end = self.check_range_call(ino, offset, len)?;
        self.load(ino)?;
        let (old, new, extra) = self.widened_reserve(ino, offset, end)?;
        let o = self.obj(ino)?;
        let holes = o.chunks.holes_in(new.start, new.end);
        let size = o.size;
        let grow = !keep_size && end > size;
        if extra == 0 && !grow {
            return Ok(());
        }
        // Always against statfs (room net of every reservation): the shared check below
        // leaves a file system without reservations to the allocator, which would let
        // the first reservation promise more than the device holds.
        if self.free_chunks() < extra + 1 {
            return Err(FsError::NoSpace);
        }
        let now = self.now();
        if holes > 0 {
            self.reserves.insert(ino, new);
        }
        let result = if grow {
            self.truncate(ino, end)
        } else {
            Ok(())
        }
        .and_then(|()| {
            self.flush_cache(ino)?;
            let o = self.obj_mut(ino)?;
            let d = o.d_mut();
            d.ctime = crate::types::Time::from_ns(now);
            if grow {
                d.mtime = d.ctime;
            }
            let d = d.clone();
            self.persist(ino, d, Vec::new())
        });
        if result.is_err() {
            match old {
                Some(r) => self.reserves.insert(ino, r),
                None => self.reserves.remove(&ino),
            };
        }
        result
    }

    /// Chunks of every reservation, written or not.
    pub(crate) fn reserved_span(&self) -> u64 {
        self.reserves
            .values()
            .map(|r| u64::from(r.end.saturating_sub(r.start)))
            .sum()
    }

    /// Chunks reserved by fallocate and not written yet.
    pub(crate) fn reserved_chunks(&self) -> u64 {
        self.reserves
            .iter()
            .map(|(ino, r)| {
                self.objects
                    .get(ino)
                    .map_or(0, |o| o.chunks.holes_in(r.start, r.end))
            })
            .sum()
    }

    /// Is `chunk` of `ino` a reserved hole (a write there has its page set aside)?
    pub(crate) fn in_reserve(&self, ino: Ino, chunk: u32) -> bool {
        self.reserves
            .get(&ino)
            .is_some_and(|r| (r.start..r.end).contains(&chunk))
    }

    /// Fails with ENOSPC unless `pages` more pages fit beside what is used and reserved.
    /// (Without reservations the allocator's own checks decide, as before.)
    pub(crate) fn check_room_for_new_pages(&self, pages: u64) -> Result<()> {
        if self.reserves.is_empty() {
            return Ok(());
        }
        // Called at every write while any file holds a reservation: first the cheap
        // bound that counts every reserved chunk as a hole, and only when that is tight
        // the exact count (which walks each reserved range's map).
        if self.free_chunks_floor() >= pages {
            return Ok(());
        }
        if self.free_chunks() < pages {
            return Err(FsError::NoSpace);
        }
        Ok(())
    }

    /// A file shrank to `size`: its reservation past the new end is given back.
    pub(crate) fn clip_reserve(&mut self, ino: Ino, size: u64) {
        let c = u64::from(self.layout.chunk_bytes);
        let end = size.div_ceil(c).min(u64::from(u32::MAX)) as u32;
        if let Some(r) = self.reserves.get_mut(&ino) {
            r.end = r.end.min(end);
            if r.start >= r.end {
                self.reserves.remove(&ino);
            }
        }
    }
}
