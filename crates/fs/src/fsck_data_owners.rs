//! fsck's check of the data-owner lists (`blocks::data_owners`), where the profile keeps
//! them: a tombstone dropped while data of its object is still on flash would let the
//! next scan bring deleted data back in lost+found, so the lists and the counts drawn
//! from them must be exact.

use nandkit_flash::Flash;

use crate::fs::FileSystem;
use crate::fsck::Owner;
use crate::types::Ino;

impl<F: Flash> FileSystem<F> {
    /// Problems with the data-owner lists: a valid data page whose block does not list
    /// its object, an object or tombstone whose count of blocks differs from the lists,
    /// and a listed object that is neither (its data is on flash with nothing to bury it),
    /// unless damage took its tombstone (`untombed`: returned as notes).
    pub(crate) fn check_data_owners(&self, pages: &[(u32, Owner)]) -> (Vec<String>, Vec<String>) {
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        if !self.tracks_data_owners() {
            return (out, notes);
        }
        for &(pno, owner) in pages {
            if let Owner::Chunk(ino, chunk) = owner {
                let b = self.layout.block_of(pno);
                if !self.blocks.data.has(b, ino) {
                    out.push(format!(
                        "object {ino}: chunk {chunk} is in block {b}, whose data owners leave it out"
                    ));
                }
            }
        }
        let mut counts = self.blocks.data.blocks_per_object();
        let objects = self
            .objects
            .iter()
            .map(|(&i, o)| ("object", i, o.data_blocks));
        let tombs = self
            .tombstones
            .iter()
            .map(|(&i, t)| ("tombstone of", i, t.data_blocks));
        for (what, ino, counted) in objects.chain(tombs) {
            let n = counts.remove(&ino).unwrap_or(0);
            if counted != n {
                out.push(format!(
                    "{what} {ino}: counts {counted} blocks with its data, the lists {n}"
                ));
            }
        }
        let mut left: Vec<(Ino, u32)> = counts
            .into_iter()
            .filter(|(ino, _)| !self.unnamed_left.contains(ino))
            .collect();
        left.sort_unstable();
        for (ino, n) in left {
            if self.untombed.contains(&ino) {
                notes.push(format!(
                    "object {ino}: deleted, with data pages in {n} blocks, and its tombstone lost to damage: until cleaning erases them, a scan restores them as /lost+found/#{ino}"
                ));
            } else {
                out.push(format!(
                    "object {ino}: data pages in {n} blocks, with neither the object nor its tombstone kept (a scan would take them for a file whose header was lost)"
                ));
            }
        }
        (out, notes)
    }
}
