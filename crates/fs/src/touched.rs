//! Which chunks of a file changed page since its metadata store last published its map,
//! for a store that publishes maps piecewise (MiNV's page slots): with this, a close
//! compares what changed, not the whole map (a file of 12,850 chunks made every close
//! of a one-chunk write walk 12,850 entries).
//!
//! A file is tracked only once the store asks for it (`track`, after it has published
//! the whole map); until then the store compares the whole map. Every change of a chunk
//! map in RAM after a mount goes through `touch_chunk` or `touch_cut`. Which files are
//! tracked is a bit per object number; only files with changes have an entry, so what
//! this costs grows with the changes not yet published, not with the files.

use std::collections::BTreeSet;

use nandkit_flash::Flash;

use crate::fs::FileSystem;
use crate::types::Ino;

/// What changed in one file's map since the store last published it.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    /// Chunks whose page was set, moved, lost or cleared.
    pub chunks: BTreeSet<u32>,
    /// The lowest `keep` of a truncate since: chunks from it on may have gone.
    pub cut: Option<u32>,
}

impl<F: Flash> FileSystem<F> {
    /// From now on, note the changes of `ino`'s map (its store has just published it).
    pub(crate) fn track(&mut self, ino: Ino) {
        let (w, b) = (ino as usize / 64, ino % 64);
        if self.tracked.len() <= w {
            self.tracked.resize(w + 1, 0);
        }
        self.tracked[w] |= 1 << b;
        self.touched.remove(&ino);
    }

    /// Stop noting `ino`'s changes (its store forgot it).
    pub(crate) fn untrack(&mut self, ino: Ino) {
        if let Some(w) = self.tracked.get_mut(ino as usize / 64) {
            *w &= !(1 << (ino % 64));
        }
        self.touched.remove(&ino);
    }

    /// Whether `ino`'s changes are noted (its store published its whole map).
    pub(crate) fn is_tracked(&self, ino: Ino) -> bool {
        self.tracked
            .get(ino as usize / 64)
            .is_some_and(|w| w & (1 << (ino % 64)) != 0)
    }

    /// What changed in `ino`'s map since it was tracked, if one was noted.
    fn changes(&mut self, ino: Ino) -> Option<&mut Touched> {
        self.is_tracked(ino)
            .then(|| self.touched.entry(ino).or_default())
    }

    /// Chunk `chunk` of `ino` now maps elsewhere (or nowhere).
    pub(crate) fn touch_chunk(&mut self, ino: Ino, chunk: u32) {
        if let Some(t) = self.changes(ino) {
            t.chunks.insert(chunk);
        }
    }

    /// Chunks `first..first + n` of `ino` map elsewhere.
    pub(crate) fn touch_run(&mut self, ino: Ino, first: u32, n: u32) {
        if let Some(t) = self.changes(ino) {
            t.chunks.extend(first..first.saturating_add(n));
        }
    }

    /// `ino`'s map was truncated to its first `keep` chunks.
    pub(crate) fn touch_cut(&mut self, ino: Ino, keep: u32) {
        if let Some(t) = self.changes(ino) {
            t.cut = Some(t.cut.map_or(keep, |c| c.min(keep)));
        }
    }
}
