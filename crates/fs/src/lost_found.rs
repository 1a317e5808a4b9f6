//! lost+found: objects a scan finds whose directory is gone.
//!
//! A directory is deleted only once it is empty, after each child's name-less header, so
//! a live object naming a directory that has no header at all lost it to damage (a block
//! erased or unreadable). Dropping such an object's names would make the mount delete it
//! with everything under it, files nobody deleted. Instead, as fsck tools do, it is given
//! the name `#<number>` in `/lost+found` (made if missing, mode 0700), and keeps its data
//! and, for a directory, its whole subtree. A writable mount writes the new names; fsck
//! on a mount that has not (read-only) reports each object it would move.
//!
//! Data pages whose object has no header at all lost it to damage too, where the profile
//! keeps a deleted object's tombstone until every data page of it is erased
//! (`FsConfig::tombs_cover_data`): such an object becomes a file `#<number>` in
//! lost+found, owned by root with mode 0600, holding the newest copy of each chunk found
//! (its size and kind were in the lost header; a file is the safe guess). No data page is
//! written before its object's first header: a file's header is written when it is
//! created, and a long symlink or attribute set whose payload goes to data chunks first
//! gets a name-less header, its tombstone should the payload be cut short.
//!
//! Where tombstones do not cover data (the papers' designs as they were built, and images
//! made before tombstones could), header-less pages are only counted
//! (`headerless_pages`) and noted by fsck: there a deleted file's stale pages outlive its
//! tombstone and look the same, and bringing them back could return deleted data to
//! anyone who can read lost+found.

use nandkit_flash::Flash;

use crate::format::record::{Name, Record};
use crate::fs::FileSystem;
use crate::object::{Details, Object};
use crate::types::{Ino, Kind, ROOT_INO};

/// The directory's name under the root.
pub const LOST_FOUND: &[u8] = b"lost+found";

impl<F: Flash> FileSystem<F> {
    /// Gives every object whose claimed directories are all missing a name in
    /// `/lost+found` (see the module comment). Runs before the tree is linked.
    pub(crate) fn adopt_disconnected(&mut self) {
        let mut lost: Vec<(Ino, Ino)> = Vec::new();
        for (&ino, o) in &self.objects {
            if ino == ROOT_INO || o.kind == Kind::Xattrs {
                continue;
            }
            let claimed = self.parents_claimed(ino);
            let missing = |p: &Ino| self.objects.get(p).is_none_or(|d| d.kind != Kind::Dir);
            if !claimed.is_empty() && claimed.iter().all(missing) {
                lost.push((ino, claimed[0]));
            }
        }
        if lost.is_empty() {
            return;
        }
        lost.sort_unstable();
        let lf = self.lost_found_dir();
        for (ino, gone) in lost {
            if self.load(ino).is_err() {
                continue; // its header does not read: the tree drops it, fsck says so
            }
            let Some(o) = self.objects.get_mut(&ino) else {
                continue;
            };
            let d = o.d_mut();
            d.names = vec![Name {
                parent: lf,
                name: format!("#{ino}").into_bytes().into_boxed_slice(),
            }];
            o.parent = lf;
            o.set_dirty(true);
            self.repairs.push(ino);
            self.adopted.push((ino, gone));
        }
    }

    /// Makes each object that has data pages but no header a file in lost+found (see the
    /// module comment), given with the blocks holding its pages. Runs before the tree is
    /// linked; its chunks are mapped with everyone else's.
    pub(crate) fn adopt_headerless(&mut self, found: Vec<(Ino, u32)>) {
        if found.is_empty() {
            return;
        }
        let lf = self.lost_found_dir();
        let now = self.now();
        for (ino, data_blocks) in found {
            let mut rec = Record::bare(Kind::File, 0o600, now);
            rec.names = vec![Name {
                parent: lf,
                name: format!("#{ino}").into_bytes().into_boxed_slice(),
            }];
            let mut o = Object::new(Kind::File, self.config.mapping, self.layout.map_shape());
            o.parent = lf;
            o.details = Some(Box::new(Details::from_record(rec)));
            o.data_blocks = data_blocks;
            o.set_dirty(true);
            self.objects.insert(ino, o);
            self.repairs.push(ino);
            self.restored.push(ino);
        }
    }

    /// The root's `lost+found` directory, made (in RAM, written by the repairs) if the
    /// root has none.
    fn lost_found_dir(&mut self) -> Ino {
        let mut under_root: Vec<Ino> = self
            .objects
            .iter()
            .filter(|(&i, o)| i != ROOT_INO && o.parent == ROOT_INO)
            .map(|(&i, _)| i)
            .collect();
        under_root.sort_unstable();
        // The name is taken by something that is not a directory: ours gets its number.
        let mut name = LOST_FOUND.to_vec();
        for ino in under_root {
            let named = self.load(ino).is_ok()
                && self.objects[&ino]
                    .d()
                    .names
                    .iter()
                    .any(|n| n.parent == ROOT_INO && &*n.name == LOST_FOUND);
            if named && self.objects[&ino].kind == Kind::Dir {
                return ino;
            }
            if named {
                name = format!("lost+found.{}", self.next_ino).into_bytes();
            }
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let mut rec = Record::bare(Kind::Dir, 0o700, self.now());
        rec.names = vec![Name {
            parent: ROOT_INO,
            name: name.into_boxed_slice(),
        }];
        let mut o = Object::new(Kind::Dir, self.config.mapping, self.layout.map_shape());
        o.details = Some(Box::new(Details::from_record(rec)));
        o.parent = ROOT_INO;
        o.set_dirty(true);
        self.objects.insert(ino, o);
        self.repairs.push(ino);
        ino
    }
}
