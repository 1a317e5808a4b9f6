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
                Err(e) => return Err(e),
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
        let full = {
            let o = self.obj_mut(ino)?;
            let w = o.cache.as_mut().expect("cache loaded");
            w.data[within..within + bytes.len()].copy_from_slice(bytes);
            within + bytes.len() == c
        };
        if full {
            // Size must cover the chunk before it is flushed (n_bytes comes from it).
            let o = self.obj_mut(ino)?;
            let end = u64::from(chunk) * c as u64 + (within + bytes.len()) as u64;
            let old_size = o.meta.size;
            o.meta.size = old_size.max(end);
            if let Err(e) = self.flush_cache(ino) {
                let o = self.obj_mut(ino)?;
                o.meta.size = old_size;
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
        match self.write_data_chunk(ino, cache.chunk, &cache.data) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.obj_mut(ino)?.cache = Some(cache);
                Err(e)
            }
        }
    }

    /// Programs one chunk of file data (as much of `data` as the file size covers).
    fn write_data_chunk(&mut self, ino: Ino, chunk: u32, data: &[u8]) -> Result<()> {
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
        let pno = self.program(hint, tags, bytes)?;
        self.stats.data_pages_written += 1;
        let o = self.obj_mut(ino)?;
        let old = o.chunk_page(chunk);
        o.set_chunk(chunk, pno);
        o.saw_chunk(chunk);
        if old != NO_PAGE && old != LOST_PAGE {
            self.blocks.invalidate(old);
        }
        Ok(())
    }

    /// Grows a file to `new_size` with zeros (see the module comment for why some zeros
    /// are written out).
    fn extend(&mut self, ino: Ino, new_size: u64) -> Result<()> {
        let c = u64::from(self.layout.chunk_bytes);
        let old = self.obj(ino)?.meta.size;
        debug_assert!(new_size > old);
        if old % c != 0 {
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
                self.write_data_chunk(ino, chunk, &zeros)?;
            }
        }
        let o = self.obj_mut(ino)?;
        o.meta.size = o.meta.size.max(new_size);
        Ok(())
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
        let dropped: Vec<u32> = o.chunks.drain(keep_chunks.min(o.chunks.len())..).collect();
        for pno in dropped {
            if pno != NO_PAGE && pno != LOST_PAGE {
                self.blocks.invalidate(pno);
            }
        }
        Ok(())
    }
}
