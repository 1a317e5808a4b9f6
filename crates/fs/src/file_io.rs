//! File data: read, write at any offset, truncate, and the one-chunk write cache.
//!
//! Data is page-mapped (DESIGN axis 2, YAFFS style): chunk i of a file covers bytes
//! [i*C, (i+1)*C) and lives in whatever page last received it. Writes go out of place;
//! the old page becomes invalid.
//!
//! Bytes of a chunk past the file size are garbage (left by a truncate). Growing a file
//! therefore first zeroes the tail of its last chunk, and writes zero chunks over holes at
//! indexes where a stale chunk may still sit on flash, so no old data can reappear.

use nandkit_flash::Flash;

use crate::alloc::{WriteCause, WriteHint};
use crate::error::{FsError, Result};
use crate::format::{crc, PageKind, Tags};
use crate::fs::FileSystem;
use crate::object::{WriteCache, LOST_PAGE, NO_PAGE};
use crate::types::{Ino, Kind};

/// Largest file size: chunk indexes are u32.
const MAX_CHUNKS: u64 = u32::MAX as u64 - 2;

impl<F: Flash> FileSystem<F> {
    fn file(&self, ino: Ino) -> Result<()> {
        match self.obj(ino)?.kind() {
            Kind::File => Ok(()),
            Kind::Dir => Err(FsError::IsDir),
            _ => Err(FsError::Invalid("not a regular file")),
        }
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at end of file).
    pub fn read(&mut self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.check_alive()?;
        self.file(ino)?;
        let size = self.obj(ino)?.meta.size;
        if offset >= size {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset) as usize;
        let c = u64::from(self.layout.chunk_bytes);
        let mut done = 0;
        while done < len {
            let pos = offset + done as u64;
            let chunk = (pos / c) as u32;
            let within = (pos % c) as usize;
            let n = (c as usize - within).min(len - done);
            let out = &mut buf[done..done + n];
            self.read_chunk_into(ino, chunk, within, out)?;
            done += n;
        }
        Ok(len)
    }

    /// Copies bytes `within..within + out.len()` of a chunk (cache, flash or hole).
    fn read_chunk_into(
        &mut self,
        ino: Ino,
        chunk: u32,
        within: usize,
        out: &mut [u8],
    ) -> Result<()> {
        let o = self.obj(ino)?;
        if let Some(cache) = &o.cache {
            if cache.chunk == chunk {
                out.copy_from_slice(&cache.data[within..within + out.len()]);
                return Ok(());
            }
        }
        match o.chunk_page(chunk) {
            NO_PAGE => out.fill(0),
            LOST_PAGE => {
                return Err(FsError::Io(format!(
                    "chunk {chunk} of object {ino} was lost to a media error"
                )))
            }
            pno => {
                let data = self.read_expected(pno, PageKind::Data, ino, chunk)?;
                for (i, b) in out.iter_mut().enumerate() {
                    *b = data.get(within + i).copied().unwrap_or(0);
                }
            }
        }
        Ok(())
    }

    /// Writes `data` at `offset`, growing the file as needed. Returns bytes written; a
    /// full device gives a short write, or ENOSPC if nothing could be written.
    pub fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.check_writable()?;
        self.file(ino)?;
        let c = u64::from(self.layout.chunk_bytes);
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(FsError::Invalid("offset overflow"))?;
        if end.div_ceil(c) > MAX_CHUNKS {
            return Err(FsError::Invalid("file too large"));
        }
        if data.is_empty() {
            return Ok(0);
        }
        let size = self.obj(ino)?.meta.size;
        if offset > size {
            self.extend(ino, offset)?;
        }
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let chunk = (pos / c) as u32;
            let within = (pos % c) as usize;
            let n = (c as usize - within).min(data.len() - done);
            match self.write_chunk(ino, chunk, within, &data[done..done + n]) {
                Ok(()) => done += n,
                Err(FsError::NoSpace) if done > 0 => break,
                Err(e) => {
                    // Nothing was written: neither is the file extended.
                    if offset > size {
                        self.shrink_back(ino, size);
                    }
                    return Err(e);
                }
            }
        }
        let now = self.now();
        let o = self.obj_mut(ino)?;
        o.meta.size = o.meta.size.max(offset + done as u64);
        o.meta.mtime_ns = now;
        o.meta.ctime_ns = now;
        o.header_dirty = true;
        self.stats.user_bytes_written += done as u64;
        Ok(done)
    }

    /// Puts bytes into the cached chunk, loading it first if the write does not cover
    /// what is already there, and flushes it once it is full.
    fn write_chunk(&mut self, ino: Ino, chunk: u32, within: usize, bytes: &[u8]) -> Result<()> {
        let c = self.layout.chunk_bytes as usize;
        let cached = self
            .obj(ino)?
            .cache
            .as_ref()
            .is_some_and(|w| w.chunk == chunk);
        if !cached {
            self.flush_cache(ino)?;
            let size = self.obj(ino)?.meta.size;
            let chunk_start = u64::from(chunk) * c as u64;
            // Bytes of this chunk that hold file data and that this write does not cover.
            let live = size.saturating_sub(chunk_start).min(c as u64) as usize;
            let mut buf = vec![0u8; c];
            if live > 0 && !(within == 0 && bytes.len() >= live) {
                self.read_chunk_into(ino, chunk, 0, &mut buf[..live])?;
            }
            self.obj_mut(ino)?.cache = Some(WriteCache { chunk, data: buf });
        }
        // A new cache entry may later be flushed from the reserve; their number is bounded
        // by what the reserve holds, and past that a partial chunk is written at once.
        let full = within + bytes.len() == c || (!cached && self.cache_is_full());
        let saved = {
            let o = self.obj_mut(ino)?;
            let w = o.cache.as_mut().expect("cache loaded");
            let range = within..within + bytes.len();
            // A full chunk is flushed at once; if that fails the write did not happen, so
            // the bytes it replaced must come back.
            let saved = full.then(|| w.data[range.clone()].to_vec());
            w.data[range].copy_from_slice(bytes);
            saved
        };
        if let Some(saved) = saved {
            // Size must cover the chunk before it is flushed (n_bytes comes from it).
            let o = self.obj_mut(ino)?;
            let end = u64::from(chunk) * c as u64 + (within + bytes.len()) as u64;
            let old_size = o.meta.size;
            o.meta.size = old_size.max(end);
            let flushed = match self.obj_mut(ino)?.cache.take() {
                Some(w) => {
                    let r = self.write_data_chunk(ino, w.chunk, &w.data, cached);
                    if r.is_err() {
                        self.obj_mut(ino)?.cache = Some(w);
                    }
                    r
                }
                None => Ok(()),
            };
            if let Err(e) = flushed {
                let o = self.obj_mut(ino)?;
                o.meta.size = old_size;
                if cached {
                    if let Some(w) = o.cache.as_mut() {
                        w.data[within..within + saved.len()].copy_from_slice(&saved);
                    }
                } else {
                    // Loaded (or not even read) for this write only: flash still has it.
                    o.cache = None;
                }
                return Err(e);
            }
        } else {
            let o = self.obj_mut(ino)?;
            let end = u64::from(chunk) * c as u64 + (within + bytes.len()) as u64;
            o.meta.size = o.meta.size.max(end);
        }
        Ok(())
    }

    /// Writes the cached chunk to flash (if any). On failure the chunk stays cached.
    pub(crate) fn flush_cache(&mut self, ino: Ino) -> Result<()> {
        let Some(cache) = self.obj_mut(ino)?.cache.take() else {
            return Ok(());
        };
        match self.write_data_chunk(ino, cache.chunk, &cache.data, true) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.obj_mut(ino)?.cache = Some(cache);
                Err(e)
            }
        }
    }

    /// Does the write cache already hold as many chunks as the reserve can flush?
    fn cache_is_full(&self) -> bool {
        let limit = self.cache_limit();
        self.objects.len() > limit
            && self.objects.values().filter(|o| o.cache.is_some()).count() >= limit
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
        let size = self.obj(ino)?.meta.size;
        let n = size.saturating_sub(u64::from(chunk) * c).min(c) as usize;
        if n == 0 {
            return Ok(()); // truncated away meanwhile
        }
        let bytes = &data[..n];
        let tags = Tags {
            kind: PageKind::Data,
            obj: ino,
            chunk,
            n_bytes: n as u32,
            block_seq: 0,
            serial: self.take_serial(),
            data_crc: crc(bytes),
        };
        let hint = WriteHint {
            cause: WriteCause::UserData,
            obj: ino,
            chunk,
        };
        let pno = if accepted {
            self.program_accepted(hint, tags, bytes)?
        } else {
            self.program(hint, tags, bytes)?
        };
        self.stats.data_pages_written += 1;
        let o = self.obj_mut(ino)?;
        let old = o.set_chunk(chunk, pno);
        o.saw_chunk(chunk);
        if old != NO_PAGE && old != LOST_PAGE {
            self.blocks.invalidate(old);
        }
        Ok(())
    }

    /// Grows a file to `new_size` with zeros (see the module comment for why some zeros
    /// are written out).
    /// On failure the file keeps its old size.
    fn extend(&mut self, ino: Ino, new_size: u64) -> Result<()> {
        let old = self.obj(ino)?.meta.size;
        debug_assert!(new_size > old);
        let r = self.extend_from(ino, old, new_size);
        if r.is_err() {
            self.shrink_back(ino, old);
        }
        r
    }

    fn extend_from(&mut self, ino: Ino, old: u64, new_size: u64) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        if !old.is_multiple_of(c) {
            // Zero the garbage past the end of the last chunk.
            let chunk = (old / c) as u32;
            let within = (old % c) as usize;
            let upto = (c as usize).min((new_size - u64::from(chunk) * c) as usize);
            self.write_chunk(ino, chunk, within, &vec![0u8; upto - within])?;
        }
        let first_hole = old.div_ceil(c) as u32;
        let end_chunk = new_size.div_ceil(c) as u32;
        if let Some(max_stale) = self.obj(ino)?.max_chunk_on_flash {
            let zeros = vec![0u8; c as usize];
            for chunk in first_hole..end_chunk.min(max_stale + 1) {
                let chunk_end = (u64::from(chunk) + 1) * c;
                let o = self.obj_mut(ino)?;
                o.meta.size = o.meta.size.max(chunk_end.min(new_size));
                self.write_data_chunk(ino, chunk, &zeros, false)?;
            }
        }
        let o = self.obj_mut(ino)?;
        o.meta.size = o.meta.size.max(new_size);
        Ok(())
    }

    /// Undoes a failed extension: the file keeps `size`. Zero chunks written past it are
    /// dropped, and the header is rewritten so that a scan does not take them (or the
    /// zeroed tail of the last chunk, flushed whole) as data newer than the header: it
    /// would grow the file back. If even that fails, the next fsync writes it.
    fn shrink_back(&mut self, ino: Ino, size: u64) {
        let c = u64::from(self.layout.chunk_bytes);
        let Ok(o) = self.obj_mut(ino) else {
            return;
        };
        o.meta.size = size;
        o.header_dirty = true;
        let keep = size.div_ceil(c) as usize;
        if o.cache.as_ref().is_some_and(|w| w.chunk as usize >= keep) {
            o.cache = None;
        }
        for pno in o.truncate_chunks(keep as u32) {
            self.blocks.invalidate(pno);
        }
        if let Some(meta) = self.obj(ino).ok().map(|o| o.meta.clone()) {
            let _ = self.persist(ino, meta, Vec::new());
        }
    }

    /// Sets the file size. A shrink is written out at once, so stale chunks past the new
    /// end can never come back after a crash.
    pub(crate) fn truncate(&mut self, ino: Ino, new_size: u64) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        if new_size.div_ceil(c) > MAX_CHUNKS {
            return Err(FsError::Invalid("file too large"));
        }
        let old = self.obj(ino)?.meta.size;
        let now = self.now();
        if new_size > old {
            self.extend(ino, new_size)?;
            let o = self.obj_mut(ino)?;
            o.meta.mtime_ns = now;
            o.meta.ctime_ns = now;
            o.header_dirty = true;
            return Ok(());
        }
        if new_size == old {
            return Ok(());
        }
        // Flush (or drop) the cached chunk first so nothing past the end is written later.
        let keep_chunks = new_size.div_ceil(c) as usize;
        let o = self.obj_mut(ino)?;
        if o.cache
            .as_ref()
            .is_some_and(|w| w.chunk as usize >= keep_chunks)
        {
            o.cache = None;
        }
        self.flush_cache(ino)?;
        let mut meta = self.obj(ino)?.meta.clone();
        meta.size = new_size;
        meta.mtime_ns = now;
        meta.ctime_ns = now;
        self.persist(ino, meta, Vec::new())?;
        let o = self.obj_mut(ino)?;
        for pno in o.truncate_chunks(keep_chunks as u32) {
            self.blocks.invalidate(pno);
        }
        Ok(())
    }
}
