//! The commit thread: every commit interval (`-o commit=S`), whatever was written but is
//! not yet on flash is written out, so a daemon killed loses at most that interval.
//!
//! Written data can wait in two places: in the file system (the partial last chunk of a
//! file still open, headers not yet written) and, with the kernel's write-back cache, in
//! the kernel's page cache, which the daemon never sees until the kernel writes it back
//! (by default up to 30 s later). So a commit first has the kernel hand over the dirty
//! pages of every file open for writing: it asks the kernel to drop those files' cached
//! pages (the notification `invalidate` sends for refused writes), and the kernel writes
//! each dirty page to the daemon before it drops it. Then the file system's buffers are
//! written out. (Opening the mount point for `syncfs` instead would make an unmount that
//! comes at that moment fail as busy.) A file counts as open for writing until the kernel
//! releases it, which for pages dirtied through a mapping is after they are written back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use super::fuse::SharedFs;
use super::invalidate::Invalidations;

/// How long a commit waits for the kernel to hand over dirty pages.
const WRITE_BACK_WAIT: Duration = Duration::from_secs(10);

/// Files open for writing (handles per inode), counted by the FUSE handler.
#[derive(Default)]
pub struct Writers(Mutex<HashMap<u64, u32>>);

impl Writers {
    pub fn opened(&self, ino: u64) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(ino).or_insert(0) += 1;
        }
    }

    pub fn closed(&self, ino: u64) {
        if let Ok(mut m) = self.0.lock() {
            if let Some(n) = m.get_mut(&ino) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&ino);
                }
            }
        }
    }

    /// Is `ino` open for writing (so the kernel may hold dirty pages of it)?
    pub fn has(&self, ino: u64) -> bool {
        self.0.lock().is_ok_and(|m| m.contains_key(&ino))
    }

    /// Files open for writing.
    pub fn inodes(&self) -> Vec<u64> {
        self.0
            .lock()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }
}

/// Starts the commit thread. `page_cache`: the kernel's write-back cache is on, and
/// `Invalidations` reaches it. The thread ends when the file system is handed back.
pub fn start(
    shared: SharedFs,
    interval: Duration,
    writers: Arc<Writers>,
    page_cache: Option<Arc<Invalidations>>,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("commit".into())
        .spawn(move || loop {
            std::thread::sleep(interval);
            if let Some(inv) = &page_cache {
                // Without the file system's lock: the write-backs this causes need it.
                let inodes = writers.inodes();
                if !inodes.is_empty() {
                    for ino in inodes {
                        inv.request(ino);
                    }
                    inv.wait_for(WRITE_BACK_WAIT);
                }
            }
            let Ok(mut guard) = shared.write() else {
                return;
            };
            let Some(fs) = guard.as_mut() else {
                return;
            };
            if !fs.has_unsynced() {
                continue;
            }
            // Logged with the lock still held, so the line comes after every write the
            // commit covered and before any it did not (the kill tests rely on that).
            match fs.sync() {
                Ok(()) => eprintln!("nandkit: commit: written out"),
                Err(e) => eprintln!("nandkit: commit failed: {e}"),
            }
        })
        .context("starting the commit thread")?;
    Ok(())
}
