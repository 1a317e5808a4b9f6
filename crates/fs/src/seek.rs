//! SEEK_DATA and SEEK_HOLE, at chunk granularity: a chunk with a page (or in the write
//! cache) is data, any other is a hole, and the end of file is a hole. Answers are clipped
//! to the file size; as on Linux, an offset at or past the end is ENXIO for both, and so is
//! SEEK_DATA with no data past the offset.

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::types::{Ino, Kind};

impl<F: Flash> FileSystem<F> {
    /// The first offset at or past `offset` that holds data.
    pub fn seek_data(&mut self, ino: Ino, offset: u64) -> Result<u64> {
        self.present(ino)?;
        self.map(ino)?;
        let (size, data) = self.data_extents(ino)?;
        if offset >= size {
            return Err(FsError::NoSuchOffset);
        }
        let c = u64::from(self.layout.chunk_bytes);
        let chunk = offset / c;
        data.iter()
            .find(|&&(_, end)| end > chunk)
            .map(|&(start, _)| offset.max(start * c))
            .filter(|&at| at < size)
            .ok_or(FsError::NoSuchOffset)
    }

    /// The first offset at or past `offset` in a hole (the end of file at the latest).
    pub fn seek_hole(&mut self, ino: Ino, offset: u64) -> Result<u64> {
        self.present(ino)?;
        self.map(ino)?;
        let (size, data) = self.data_extents(ino)?;
        if offset >= size {
            return Err(FsError::NoSuchOffset);
        }
        let c = u64::from(self.layout.chunk_bytes);
        let mut chunk = offset / c;
        for &(start, end) in &data {
            if start > chunk {
                break;
            }
            chunk = chunk.max(end);
        }
        Ok(offset.max(chunk * c).min(size))
    }

    /// A file's size and its data as sorted, disjoint chunk ranges `[start, end)` (adjacent
    /// ones merged).
    fn data_extents(&self, ino: Ino) -> Result<(u64, Vec<(u64, u64)>)> {
        self.check_alive()?;
        match self.visible(ino)?.kind {
            Kind::File => {}
            Kind::Dir => return Err(FsError::IsDir),
            _ => return Err(FsError::Invalid("not a regular file")),
        }
        self.file(ino)?;
        let o = self.obj(ino)?;
        let mut runs: Vec<(u64, u64)> = o
            .chunks
            .runs()
            .into_iter()
            .map(|(chunk, _, n)| (u64::from(chunk), u64::from(chunk) + u64::from(n)))
            .collect();
        if let Some(w) = self.caches.get(&ino) {
            runs.push((u64::from(w.chunk), u64::from(w.chunk) + 1));
        }
        runs.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
        for (s, e) in runs {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        Ok((o.size, out))
    }
}
