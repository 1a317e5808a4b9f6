//! Room in the NVRAM for what is owed to it, so a full NVRAM gives ENOSPC at the call that
//! needs the room, never at a later sync, close or unmount.
//!
//! Two debts:
//! - a promise per object whose header write a call left for later (a write maps chunks,
//!   a chmod changes attributes; the header goes out at fsync, close or sync): its new
//!   record, the offset structures its new chunks need, and an inode if it has none. The
//!   call that makes the debt checks there is room for it, or fails with ENOSPC before it
//!   changes anything; the header write spends the promise.
//! - the saved state a clean unmount writes (`save`): its room is kept free, and in one
//!   piece at the heap's top, so the unmount can always write it and the next mount need
//!   not walk every inode. Its size is bounded from what it lists: the free extents, an entry and a child slot per object, the fallocated files.
//!
//! Every allocation outside a promise keeps both debts free (`Minv::alloc`). Deletes make
//! no promise: they free more than the directory's later header write takes.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use nandkit_flash::Flash;

use super::layout::{record_bytes, INODE_BYTES, OFFSETS_BYTES, SLOTS};
use super::{save, Minv};
use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::rebuild::has_data;
use crate::types::Ino;

/// What one object's next header write will allocate.
#[derive(Clone, Debug, Default)]
pub(crate) struct Promise {
    pub need: u64,
    /// Offset structures (chunk / SLOTS) its new chunks need that it does not have.
    new_blocks: BTreeSet<u32>,
}

#[derive(Debug, Default)]
pub(crate) struct Promises {
    by_ino: HashMap<Ino, Promise>,
    total: u64,
}

impl Promises {
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Spends `ino`'s promise (its header is being written).
    pub(crate) fn take(&mut self, ino: Ino) -> Option<Promise> {
        let p = self.by_ino.remove(&ino)?;
        self.total -= p.need;
        Some(p)
    }

    /// Puts back a promise whose header write failed.
    pub(crate) fn restore(&mut self, ino: Ino, p: Promise) {
        self.total += p.need;
        if let Some(old) = self.by_ino.insert(ino, p) {
            self.total -= old.need;
        }
    }
}

impl Minv {
    /// Bytes the saved state may take at unmount, with room for one more object.
    pub(crate) fn state_room(&self) -> u64 {
        let unread = self.lazy.as_ref().map_or(0, |l| l.unread());
        let objects = self.inodes.len() as u64 + unread + 1;
        record_bytes(save::bound_bytes(self.reserved_files, objects) as usize)
    }

    /// Takes `bytes` of heap, keeping the saved state's room (in one piece at the top) and
    /// every promise free.
    pub(crate) fn alloc(&mut self, bytes: u64) -> Result<u64> {
        let state = self.state_room();
        let kept = state + self.promises.total();
        if self.heap.free_bytes() < bytes + kept || self.heap.top_bytes() < state {
            return Err(FsError::NoSpace);
        }
        self.heap
            .alloc_keeping(bytes, state)
            .ok_or(FsError::NoSpace)
    }

    /// `MetadataStore::room_for`: promises what `ino`'s next header write will need, with
    /// `chunks` mapped, or ENOSPC if the NVRAM cannot keep it.
    pub(super) fn room_for_inner<F: Flash>(
        &mut self,
        fs: &FileSystem<F>,
        ino: Ino,
        chunks: Option<Range<u32>>,
    ) -> Result<()> {
        let Some(o) = fs.objects.get(&ino) else {
            return Ok(());
        };
        self.reserved_files = fs.reserves.inos().count() as u64;
        let old = self.promises.by_ino.get(&ino).cloned();
        let mut new_blocks = old
            .as_ref()
            .map(|p| p.new_blocks.clone())
            .unwrap_or_default();
        if let Some(r) = chunks.filter(|r| r.start < r.end && has_data(o.kind)) {
            let known = self.inodes.get(&ino);
            for k in r.start / SLOTS..=(r.end - 1) / SLOTS {
                if !known.is_some_and(|n| n.blocks.contains(k)) {
                    new_blocks.insert(k);
                }
            }
        }
        if old
            .as_ref()
            .is_some_and(|p| p.new_blocks.len() == new_blocks.len())
        {
            return Ok(());
        }
        let chunk = fs.layout.chunk_bytes as usize;
        let record = match o.details.as_deref() {
            Some(d) => fs
                .record_for(ino, d, Vec::new())
                .map_or(chunk, |r| r.encoded_len().min(chunk)),
            None => chunk,
        };
        let inode = if self.inodes.contains_key(&ino) {
            0
        } else {
            INODE_BYTES
        };
        let need = record_bytes(record) + OFFSETS_BYTES * new_blocks.len() as u64 + inode;
        let more = need.saturating_sub(old.as_ref().map_or(0, |p| p.need));
        if more > 0 && self.heap.free_bytes() < self.state_room() + self.promises.total() + more {
            return Err(FsError::NoSpace);
        }
        let need = need.max(old.map_or(0, |p| p.need));
        self.promises.restore(ino, Promise { need, new_blocks });
        Ok(())
    }
}
