//! fallocate: space reserved for a file, so that a later write into the range cannot fail
//! for want of room. A log-structured file system writes every chunk out of place anyway,
//! so nothing is written ahead: the file's header records the reserved chunk range, and
//! every hole in it counts as used space (in statfs, and against every other writer) until
//! it is written. Writes into a reserved hole may use the space set aside for it.
//!
//! A file keeps the ranges it was asked to reserve and nothing between them (see
//! `format::reserved`). A punch gives back the whole chunks it frees; a shrink gives back
//! what lies past the new end (as on Linux, also what KEEP_SIZE reserved past the end of
//! the file); an unlink gives back everything once the file's last user closes it.

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::reserved::{Reserve, Reserved};
use crate::fs::FileSystem;
use crate::reserve_table::holes_in;
use crate::types::{Ino, Kind};

impl<F: Flash> FileSystem<F> {
    /// The checks fallocate, punch and zero-range share: a writable mount, a regular file
    /// with its data (not hollow), a non-empty range within the largest file. Returns the
    /// range's end.
    pub(crate) fn check_range_call(&mut self, ino: Ino, offset: u64, len: u64) -> Result<u64> {
        self.check_writable()?;
        self.map(ino)?;
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

    /// The file's reservation with bytes `[offset, end)` added: (the old ranges, the new
    /// ones, how many holes become reserved that were not).
    pub(crate) fn widened_reserve(
        &self,
        ino: Ino,
        offset: u64,
        end: u64,
    ) -> Result<(Reserved, Reserved, u64)> {
        let c = u64::from(self.layout.chunk_bytes);
        let old = self.reserves.get(ino);
        let mut new = old.clone();
        new.add(Reserve {
            start: (offset / c) as u32,
            end: end.div_ceil(c) as u32,
        });
        let o = self.obj(ino)?;
        let extra = holes_in(&o.chunks, &new).saturating_sub(holes_in(&o.chunks, &old));
        Ok((old, new, extra))
    }

    /// Reserves room for bytes `[offset, offset + len)` of a file; unless `keep_size`, the
    /// file grows to cover them. Durable once it returns (one header write).
    pub fn fallocate(&mut self, ino: Ino, offset: u64, len: u64, keep_size: bool) -> Result<()> {
        self.present(ino)?;
        let end = self.check_range_call(ino, offset, len)?;
        self.load(ino)?;
        let (old, new, extra) = self.widened_reserve(ino, offset, end)?;
        let o = self.obj(ino)?;
        let holes = holes_in(&o.chunks, &new);
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
            self.set_reserve(ino, new);
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
            self.set_reserve(ino, old);
        }
        result
    }

    /// Gives `ino` the reserved ranges `r` (empty: none), their unwritten chunks counted.
    pub(crate) fn set_reserve(&mut self, ino: Ino, r: Reserved) {
        let map = self.objects.get(&ino).map(|o| &o.chunks);
        self.reserves.set(ino, r, map);
    }

    /// Counts `ino`'s reserved holes again after a change of many chunks of its map.
    pub(crate) fn recount_reserve(&mut self, ino: Ino) {
        let map = self.objects.get(&ino).map(|o| &o.chunks);
        self.reserves.recount(ino, map);
    }

    /// Counts every file's reserved holes again (after mount filled the maps).
    pub(crate) fn recount_reserves(&mut self) {
        let inos: Vec<Ino> = self.reserves.inos().collect();
        for ino in inos {
            self.recount_reserve(ino);
        }
    }

    /// Chunks reserved by fallocate and not written yet.
    pub(crate) fn reserved_chunks(&self) -> u64 {
        self.reserves.holes()
    }

    /// Is `chunk` of `ino` a reserved hole (a write there has its page set aside)?
    pub(crate) fn in_reserve(&self, ino: Ino, chunk: u32) -> bool {
        self.reserves.covers(ino, chunk)
    }

    /// Fails with ENOSPC unless `pages` more pages fit beside what is used and reserved.
    /// (Without reservations the allocator's own checks decide, as before.)
    pub(crate) fn check_room_for_new_pages(&self, pages: u64) -> Result<()> {
        if self.reserves.is_empty() {
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
        let mut r = self.reserves.get(ino);
        if !r.is_empty() {
            r.clip(end);
            self.set_reserve(ino, r);
        }
    }
}
