//! What keeps an object with no name left alive: open handles, and the kernel's
//! references (FUSE lookups not yet forgotten).
//!
//! POSIX lets an unlinked file live on while it is open: reads and writes through the open
//! handle work until the last close. The kernel also keeps references to inodes it looked
//! up, with no handle open: an `O_PATH` descriptor, a current directory, a directory
//! replaced by rename while a process sits in it. Those must still answer `fstat` (with a
//! link count of 0), but can never read or write the data again.
//!
//! So an unlinked file held only by kernel references is *hollowed*: its data is freed at
//! once (a delete on a full device makes room at once, though FUSE tells the daemon the
//! kernel forgot the inode only later, and asynchronously) and only its attributes stay in
//! RAM until the kernel forgets it. Opening a hollow file again fails with ENOENT.
//!
//! Each hold is counted in `Object::open`; open handles alone are also counted in
//! `handles` (a small map: few files are open at once).

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::fs::FileSystem;
use crate::object::LOST_PAGE;
use crate::types::{Ino, Kind, ROOT_INO};

impl<F: Flash> FileSystem<F> {
    /// A handle was opened on `ino`.
    pub fn open(&mut self, ino: Ino) -> Result<()> {
        self.present(ino)?;
        self.check_alive()?;
        if self.hollow.contains(&ino) {
            return Err(FsError::NotFound);
        }
        // Readers that share the file system need the map in RAM.
        self.map(ino)?;
        let o = self.obj_mut(ino)?;
        o.open = o.open.saturating_add(1);
        let n = self.handles.entry(ino).or_insert(0);
        *n = n.saturating_add(1);
        Ok(())
    }

    /// A handle was closed: flushes the file's buffered chunk and header (as YAFFS does on
    /// close), and deletes it if it was unlinked and this was the last hold.
    pub fn release(&mut self, ino: Ino) -> Result<()> {
        self.present(ino)?;
        self.check_alive()?;
        let o = self.obj_mut(ino)?;
        o.open = o.open.saturating_sub(1);
        if let Some(n) = self.handles.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                self.handles.remove(&ino);
            }
        }
        if self.is_orphan(ino) {
            return self.let_go(ino);
        }
        if !self.read_only {
            self.fsync(ino)?;
        }
        Ok(())
    }

    /// The kernel learned of `ino` (a lookup or a create it answered): this keeps it in
    /// RAM if its last name goes, until the kernel forgets it.
    pub fn remember(&mut self, ino: Ino) -> Result<()> {
        self.present(ino)?;
        self.check_alive()?;
        let o = self.obj_mut(ino)?;
        o.open = o.open.saturating_add(1);
        Ok(())
    }

    /// The kernel forgot `n` lookups of `ino`.
    pub fn forget(&mut self, ino: Ino, n: u64) -> Result<()> {
        self.present(ino)?;
        self.check_alive()?;
        let Some(o) = self.objects.get_mut(&ino) else {
            return Ok(());
        };
        o.open = o.open.saturating_sub(u32::try_from(n).unwrap_or(u32::MAX));
        if self.is_orphan(ino) {
            return self.let_go(ino);
        }
        Ok(())
    }

    /// Open handles on `ino` (kernel references not counted).
    pub(crate) fn handles_on(&self, ino: Ino) -> u32 {
        self.handles.get(&ino).copied().unwrap_or(0)
    }

    /// Has `ino` lost every name (and hard link), so it only lives while held?
    pub(crate) fn is_orphan(&self, ino: Ino) -> bool {
        self.objects.get(&ino).is_some_and(|o| {
            ino != ROOT_INO
                && o.parent == 0
                && o.details.as_ref().is_some_and(|d| d.names.is_empty())
                && o.kind.is_visible()
                && self.link_count(ino) == 0
        })
    }

    /// An orphan is let go of: deleted once nothing holds it (its name-less header is on
    /// flash already, or is written now on a writable mount), hollowed once no handle does.
    pub(crate) fn let_go(&mut self, ino: Ino) -> Result<()> {
        if self.read_only {
            if self.objects.get(&ino).is_some_and(|o| o.open == 0) {
                self.delete_object(ino);
            }
            return Ok(());
        }
        self.bury_if_orphan(ino)?;
        self.erase_emptied_blocks()
    }

    /// MiNV and MNFS erase the blocks a delete left without a valid page at once (erase
    /// on delete), so writes later find them erased; other flash-log profiles leave them
    /// to cleaning, as YAFFS does. With the metadata on flash this is safe for the same
    /// reason cleaning's erase of an empty block is: a tombstone that still buries older
    /// headers counts as a valid page, so a block without one holds only dead headers. A stream's
    /// open block that the delete emptied is closed and erased too: left open, the next
    /// file's pages would join the dead ones there, and cleaning would later copy them out
    /// (a flash read MiNV never needs).
    pub(crate) fn erase_emptied_blocks(&mut self) -> Result<()> {
        let on_flash = self.metadata_on_flash();
        if on_flash && !self.config.erase_on_delete || self.read_only {
            return Ok(());
        }
        // Posted programs land first, so the valid counts are final and the delete's
        // header (with the metadata on flash) is on flash before its blocks are erased.
        self.settle()?;
        // Full blocks come from the block table's index; open blocks are the streams' few.
        let mut empty = self.blocks.full_and_dead();
        for open in self.streams.iter().flatten() {
            let x = self.blocks.get(open.block);
            if x.valid() == 0 && x.state == crate::blocks::BlockState::Active && x.next_page() > 0 {
                empty.push(open.block);
            }
        }
        empty.sort_unstable();
        empty.dedup();
        for b in empty {
            if self.blocks.get(b).state == crate::blocks::BlockState::Active {
                for open in &mut self.streams {
                    if open.as_ref().is_some_and(|o| o.block == b) {
                        *open = None;
                    }
                }
                self.blocks.set_state(b, crate::blocks::BlockState::Full);
            }
            self.erase_block(b)?;
        }
        Ok(())
    }

    /// Frees the data of an orphan file no handle has open (see the module comment). Its
    /// name-less header is on flash already: after a crash the scan deletes it anyway.
    pub(crate) fn hollow_out(&mut self, ino: Ino) {
        let Some(o) = self.objects.get_mut(&ino) else {
            return;
        };
        if o.kind != Kind::File || !self.hollow.insert(ino) {
            return;
        }
        // Its name-less header drops these at any mount: no deletion marker needed.
        for pno in o.chunks.truncate(0) {
            if pno != LOST_PAGE {
                self.blocks.invalidate_unlisted(pno);
            }
        }
        self.touch_cut(ino, 0);
        self.caches.remove(&ino);
        self.reserves.remove(ino);
    }
}
