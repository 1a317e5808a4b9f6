//! File data: read, write at any offset, truncate, and the one-chunk write cache.
//!
//! Data is page-mapped (DESIGN axis 2, YAFFS style): chunk i of a file covers bytes
//! [i*C, (i+1)*C) and lives in whatever page last received it. Writes go out of place;
//! the old page becomes invalid.
//!
//! A shrink writes the header with the new size at once, so chunks past it no longer count
//! after a crash (they are older than the header and beyond its size). Growing the file
//! again over that range does not write zeros: later headers carry the shrink as a floor
//! (see `floors`) for as long as part of the range is a hole. So truncating a 100 MB file
//! to nothing and growing it back costs a couple of header pages (YAFFS2 keeps "shrink
//! headers" on flash for the same purpose). Bytes of the last chunk past the file size are
//! garbage: growing the file first zeroes them.

use nandkit_flash::Flash;

use crate::alloc::WriteHint;
use crate::error::{FsError, Result};
use crate::format::crc;
use crate::format::tags::{DataTags, Serial, Tags};
use crate::fs::FileSystem;
use crate::object::{WriteCache, LOST_PAGE, NO_PAGE};
use crate::types::{Ino, Kind, Time};

/// Copies `data[within..]` into `out`; bytes past what the page stored (a chunk written
/// shorter than the file now reaches) read as zeros.
fn copy_stored(data: &[u8], within: usize, out: &mut [u8]) {
    let have = data.len().saturating_sub(within).min(out.len());
    if have > 0 {
        out[..have].copy_from_slice(&data[within..within + have]);
    }
    out[have..].fill(0);
}

impl<F: Flash> FileSystem<F> {
    pub(crate) fn file(&self, ino: Ino) -> Result<()> {
        // A hollow file's data is gone (see `holds`): only its attributes answer.
        if !self.hollow.is_empty() && self.hollow.contains(&ino) {
            return Err(FsError::NotFound);
        }
        match self.obj(ino)?.kind {
            Kind::File => Ok(()),
            Kind::Dir => Err(FsError::IsDir),
            _ => Err(FsError::Invalid("not a regular file")),
        }
    }

    /// Largest chunk count a file may have.
    fn max_chunks(&self) -> u64 {
        u64::from(self.layout.tags.max_chunk()) + 1
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at end of file).
    /// The access time moves as the mount's policy says.
    pub fn read(&mut self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.present(ino)?;
        self.settle()?;
        // A file whose chunk map is damaged cannot be read: EIO, as for damaged data.
        self.map(ino).map_err(|e| match e {
            FsError::CorruptNvram(why) => FsError::Io(format!("corrupt NVRAM: {why}")),
            e => e,
        })?;
        let n = self.read_shared(ino, offset, buf)?;
        self.accessed(ino)?;
        Ok(n)
    }

    /// `read` for a caller that shares the file system with other readers (`&self`): the
    /// bytes only. The access time is the caller's to move afterwards, with
    /// [`FileSystem::access`] when [`FileSystem::atime_due`] says so.
    pub fn read_shared(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_alive()?;
        self.file(ino)?;
        if !self.map_loaded(ino) {
            // Loading it takes the file system exclusively (`read` does; so does `open`).
            return Err(FsError::Invalid(
                "the file's chunk map is not loaded yet: open or read it exclusively first",
            ));
        }
        let size = self.obj(ino)?.size;
        if offset >= size {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset) as usize;
        let c = u64::from(self.layout.chunk_bytes);
        // Chunks on flash are fetched together, a batch at a time (in parallel on an
        // array); cached chunks and holes are copied on the way.
        let mut on_flash: Vec<(u32, u32, usize, usize, usize)> = Vec::new();
        let mut done = 0;
        while done < len {
            let pos = offset + done as u64;
            let chunk = (pos / c) as u32;
            let within = (pos % c) as usize;
            let n = (c as usize - within).min(len - done);
            let cached = self.caches.get(&ino).is_some_and(|w| w.chunk == chunk);
            match self.obj(ino)?.chunks.get(chunk) {
                pno if !cached && pno != NO_PAGE && pno != LOST_PAGE => {
                    on_flash.push((pno, chunk, within, done, n));
                }
                _ => self.read_chunk_now(ino, chunk, within, &mut buf[done..done + n])?,
            }
            done += n;
        }
        for group in on_flash.chunks(self.layout.pages_per_block as usize) {
            let pnos: Vec<u32> = group.iter().map(|g| g.0).collect();
            let reads = self.read_pages_now(&pnos)?;
            for (&(pno, chunk, within, at, n), (page, oob, ok)) in group.iter().zip(reads) {
                let read = self.parse_page(page, &oob, ok);
                let data = Self::expected_data(read, pno, ino, chunk)?;
                copy_stored(&data, within, &mut buf[at..at + n]);
            }
        }
        Ok(len)
    }

    /// Copies bytes `within..within + out.len()` of a chunk (cache, flash or hole).
    pub(crate) fn read_chunk_into(
        &mut self,
        ino: Ino,
        chunk: u32,
        within: usize,
        out: &mut [u8],
    ) -> Result<()> {
        self.settle()?;
        self.read_chunk_now(ino, chunk, within, out)
    }

    /// `read_chunk_into` for a shared reader, with nothing posted.
    fn read_chunk_now(&self, ino: Ino, chunk: u32, within: usize, out: &mut [u8]) -> Result<()> {
        if let Some(cache) = self.caches.get(&ino) {
            if cache.chunk == chunk {
                out.copy_from_slice(&cache.data[within..within + out.len()]);
                return Ok(());
            }
        }
        match self.obj(ino)?.chunks.get(chunk) {
            NO_PAGE => out.fill(0),
            LOST_PAGE => {
                return Err(FsError::Io(format!(
                    "chunk {chunk} of object {ino} was lost to a media error"
                )))
            }
            pno => {
                let data = self.read_expected_data_now(pno, ino, chunk)?;
                copy_stored(&data, within, out);
            }
        }
        Ok(())
    }

    /// Writes `data` at `offset`, growing the file as needed; mtime and ctime move.
    /// Returns bytes written; a full device gives a short write, or ENOSPC if nothing
    /// could be written.
    pub fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.present(ino)?;
        self.write_touching(ino, offset, data, true)
    }

    /// `write` that leaves mtime and ctime alone: for data a page cache wrote back, whose
    /// owner keeps the times of the write and sets them itself (FUSE's write-back cache
    /// sends them after the data, and the data may arrive later than that).
    pub fn write_back(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.present(ino)?;
        self.write_touching(ino, offset, data, false)
    }

    fn write_touching(&mut self, ino: Ino, offset: u64, data: &[u8], touch: bool) -> Result<usize> {
        self.check_writable()?;
        self.file(ino)?;
        self.map(ino)?;
        self.load(ino)?;
        let c = u64::from(self.layout.chunk_bytes);
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(FsError::TooBig)?;
        if end.div_ceil(c) > self.max_chunks() {
            return Err(FsError::TooBig);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let size = self.obj(ino)?.size;
        // The header this write leaves for later (new chunks, a new size) must find room
        // where it goes (NVRAM): ENOSPC now, not at fsync.
        let first = (offset.min(size) / c) as u32;
        self.metadata_room(ino, Some(first..end.div_ceil(c) as u32))?;
        // The classifying allocators count modifications (MODA's virtual clock).
        self.allocator.write_request(ino);
        if offset > size {
            self.extend(ino, offset)?;
        }
        // Whole chunks go to flash as batches: on an array, several chips at once.
        let written = self.in_batch(|fs| {
            let mut done = 0;
            while done < data.len() {
                let pos = offset + done as u64;
                let chunk = (pos / c) as u32;
                let within = (pos % c) as usize;
                let n = (c as usize - within).min(data.len() - done);
                match fs.write_chunk(ino, chunk, within, &data[done..done + n]) {
                    Ok(()) => done += n,
                    Err(FsError::NoSpace) if done > 0 => break,
                    Err(e) => return Err(e),
                }
                fs.settle_if_full()?;
            }
            Ok(done)
        });
        let done = match written {
            Ok(done) => done,
            Err(e) => {
                // Nothing was written: neither is the file extended.
                if offset > size {
                    self.shrink_back(ino, size);
                }
                return Err(e);
            }
        };
        let now = Time::from_ns(self.now());
        let o = self.obj_mut(ino)?;
        o.size = o.size.max(offset + done as u64);
        if touch {
            let d = o.d_mut();
            d.mtime = now;
            d.ctime = now;
        }
        o.set_dirty(true);
        self.stats.user_bytes_written += done as u64;
        Ok(done)
    }

    /// Puts bytes into the cached chunk, loading it first if the write does not cover
    /// what is already there, and flushes it once it is full.
    fn write_chunk(&mut self, ino: Ino, chunk: u32, within: usize, bytes: &[u8]) -> Result<()> {
        let c = self.layout.chunk_bytes as usize;
        let cached = self.caches.get(&ino).is_some_and(|w| w.chunk == chunk);
        // A hole fallocate reserved has its page set aside: writing it may use that room.
        let hole = self.obj(ino)?.chunks.get(chunk) == NO_PAGE;
        let reserved = hole && self.in_reserve(ino, chunk);
        if !cached {
            if hole && !reserved {
                // A new page: it must not take room reserved for other files' holes.
                self.check_room_for_new_pages(1)?;
            }
            self.flush_cache(ino)?;
            let size = self.obj(ino)?.size;
            let chunk_start = u64::from(chunk) * c as u64;
            // Bytes of this chunk that hold file data and that this write does not cover.
            let live = size.saturating_sub(chunk_start).min(c as u64) as usize;
            let mut buf = vec![0u8; c];
            if live > 0 && !(within == 0 && bytes.len() >= live) {
                self.read_chunk_into(ino, chunk, 0, &mut buf[..live])?;
            }
            self.caches.insert(ino, WriteCache { chunk, data: buf });
        }
        // A new cache entry may later be flushed from the reserve; their number is bounded
        // by what the reserve holds, and past that a partial chunk is written at once.
        let full = within + bytes.len() == c || (!cached && self.cache_is_full());
        let saved = {
            let w = self.caches.get_mut(&ino).expect("cache loaded");
            let range = within..within + bytes.len();
            // A full chunk is flushed at once; if that fails the write did not happen, so
            // the bytes it replaced must come back.
            let saved = full.then(|| w.data[range.clone()].to_vec());
            w.data[range].copy_from_slice(bytes);
            saved
        };
        let end = u64::from(chunk) * c as u64 + (within + bytes.len()) as u64;
        let Some(saved) = saved else {
            let o = self.obj_mut(ino)?;
            o.size = o.size.max(end);
            return Ok(());
        };
        // Size must cover the chunk before it is flushed (its byte count comes from it).
        let o = self.obj_mut(ino)?;
        let old_size = o.size;
        o.size = old_size.max(end);
        let w = self.caches.remove(&ino).expect("cache loaded");
        let flushed = self.write_data_chunk(ino, w.chunk, &w.data, cached || reserved);
        if let Err(e) = flushed {
            self.obj_mut(ino)?.size = old_size;
            if cached {
                let mut w = w;
                w.data[within..within + saved.len()].copy_from_slice(&saved);
                self.caches.insert(ino, w);
            }
            // Loaded (or not even read) for this write only: flash still has it.
            return Err(e);
        }
        Ok(())
    }

    /// Writes the cached chunk to flash (if any). On failure the chunk stays cached.
    pub(crate) fn flush_cache(&mut self, ino: Ino) -> Result<()> {
        let Some(cache) = self.caches.remove(&ino) else {
            return Ok(());
        };
        match self.write_data_chunk(ino, cache.chunk, &cache.data, true) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.caches.insert(ino, cache);
                Err(e)
            }
        }
    }

    /// Does the write cache already hold as many chunks as the reserve can flush?
    fn cache_is_full(&self) -> bool {
        self.caches.len() >= self.cache_limit()
    }

    /// Programs one chunk of file data (as much of `data` as the file size covers).
    /// `accepted`: bytes a past `write` already reported written (a cache flush), which
    /// may use the cleaning reserve.
    fn write_data_chunk(
        &mut self,
        ino: Ino,
        chunk: u32,
        data: &[u8],
        accepted: bool,
    ) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        let size = self.obj(ino)?.size;
        let n = size.saturating_sub(u64::from(chunk) * c).min(c) as usize;
        if n == 0 {
            return Ok(()); // truncated away meanwhile
        }
        let bytes = &data[..n];
        // The serial is given when the page is programmed (after any cleaning the write
        // sets off, whose copies get serials too).
        let tags = Tags::Data(DataTags {
            obj: ino,
            chunk,
            n_bytes: Some(n as u32),
            serial: Serial::Full(0),
            data_crc: Some(crc(bytes)),
            run_start: None,
        });
        let old = self.obj(ino)?.chunks.get(chunk);
        let old = (old != NO_PAGE && old != LOST_PAGE).then_some(old);
        let hint = WriteHint::user_data(ino, chunk, old).with_partial((n as u64) < c);
        // Bytes bound for a reserved hole have their page set aside, like accepted ones.
        let accepted = accepted
            || (self.in_reserve(ino, chunk) && self.obj(ino)?.chunks.get(chunk) == NO_PAGE);
        let written = if accepted {
            self.program_accepted(hint, tags, bytes)
        } else {
            self.program(hint, tags, bytes)
        };
        let pno = written?;
        self.stats.data_pages_written += 1;
        let o = self.obj_mut(ino)?;
        if o.chunks.get(chunk) == pno {
            return Ok(()); // placed by block: the map points there already
        }
        let old = o.chunks.set(chunk, pno);
        o.saw_chunk(chunk);
        self.touch_chunk(ino, chunk);
        self.reserves.chunk_changed(ino, chunk, old, pno);
        if old != NO_PAGE && old != LOST_PAGE {
            self.blocks.invalidate(old);
        }
        Ok(())
    }

    /// Grows a file to `new_size` with zeros: the garbage past the end of its last chunk
    /// is zeroed; a hole over stale chunks is covered by the header's floors.
    /// On failure the file keeps its old size.
    fn extend(&mut self, ino: Ino, new_size: u64) -> Result<()> {
        let old = self.obj(ino)?.size;
        debug_assert!(new_size > old);
        let c = u64::from(self.layout.chunk_bytes);
        if !old.is_multiple_of(c) {
            let chunk = (old / c) as u32;
            let within = (old % c) as usize;
            let upto = (c as usize).min((new_size - u64::from(chunk) * c) as usize);
            if let Err(e) = self.write_chunk(ino, chunk, within, &vec![0u8; upto - within]) {
                self.shrink_back(ino, old);
                return Err(e);
            }
        }
        let o = self.obj_mut(ino)?;
        o.size = o.size.max(new_size);
        o.set_dirty(true);
        Ok(())
    }

    /// Undoes a failed extension: the file keeps `size` (a shrink, written like one). If
    /// even that fails, the next fsync writes it.
    fn shrink_back(&mut self, ino: Ino, size: u64) {
        if self.obj(ino).is_ok_and(|o| o.size > size) {
            let _ = self.shrink(ino, size, self.now());
        }
    }

    /// Sets the file size. A shrink is written out at once, so stale chunks past the new
    /// end can never come back after a crash.
    pub(crate) fn truncate(&mut self, ino: Ino, new_size: u64) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        if new_size.div_ceil(c) > self.max_chunks() {
            return Err(FsError::TooBig);
        }
        self.load(ino)?;
        let old = self.obj(ino)?.size;
        let now = self.now();
        if new_size > old {
            self.extend(ino, new_size)?;
            let o = self.obj_mut(ino)?;
            let d = o.d_mut();
            d.mtime = Time::from_ns(now);
            d.ctime = d.mtime;
            o.set_dirty(true);
            return Ok(());
        }
        if new_size == old {
            return Ok(());
        }
        self.shrink(ino, new_size, now)
    }

    /// Shrinks a file: its header, with the new size, goes to flash before the chunks past
    /// the end are dropped.
    fn shrink(&mut self, ino: Ino, new_size: u64, now: i64) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        // Drop the cached chunk if it is cut away, else flush it, so nothing past the end
        // is written later.
        let keep_chunks = new_size.div_ceil(c) as u32;
        if self
            .caches
            .get(&ino)
            .is_some_and(|w| w.chunk >= keep_chunks)
        {
            self.caches.remove(&ino);
        }
        self.flush_cache(ino)?;
        let old_size = self.obj(ino)?.size;
        let mut d = self.obj(ino)?.d().clone();
        d.mtime = Time::from_ns(now);
        d.ctime = d.mtime;
        self.obj_mut(ino)?.size = new_size;
        let reserve = self.reserves.get(ino);
        self.clip_reserve(ino, new_size);
        if let Err(e) = self.persist(ino, d, Vec::new()) {
            self.obj_mut(ino)?.size = old_size;
            if !reserve.is_empty() {
                self.set_reserve(ino, reserve);
            }
            return Err(e);
        }
        let o = self.obj_mut(ino)?;
        // From the end back: a block-placed block's live pages stay a prefix.
        for pno in o.chunks.truncate(keep_chunks).into_iter().rev() {
            self.blocks.invalidate(pno);
        }
        self.touch_cut(ino, keep_chunks);
        self.recount_reserve(ino);
        if self.block_placed() {
            self.placed_after_shrink(ino)?;
        }
        Ok(())
    }

    /// Writes one chunk of a new object's payload (see `payload`): new data, which must
    /// find room like any.
    pub(crate) fn write_payload_chunk(&mut self, ino: Ino, chunk: u32, bytes: &[u8]) -> Result<()> {
        self.write_data_chunk(ino, chunk, bytes, false)
    }

    /// Writes a chunk of zeros (a hole filled, see `floors`).
    pub(crate) fn write_zero_chunk(&mut self, ino: Ino, chunk: u32, zeros: &[u8]) -> Result<()> {
        self.write_data_chunk(ino, chunk, zeros, true)
    }

    /// Rewrites the live chunks `[from, to)`, so they are newer than every floor so far.
    pub(crate) fn rewrite_chunks(&mut self, ino: Ino, from: u32, to: u32) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        let end = to.min(self.obj(ino)?.size.div_ceil(c) as u32);
        self.flush_cache(ino)?;
        for chunk in from..end {
            let pno = self.obj(ino)?.chunks.get(chunk);
            if pno == NO_PAGE || pno == LOST_PAGE {
                continue;
            }
            let data = self.read_expected_data(pno, ino, chunk)?;
            self.write_data_chunk(ino, chunk, &data, true)?;
        }
        Ok(())
    }
}
