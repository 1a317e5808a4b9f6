//! Dropping the kernel's cached pages of a file whose write was refused.
//!
//! A write-back of an mmap'd page (or of any page, with `-o writeback`) that the file
//! system refuses, say with ENOSPC, leaves the page in the kernel's cache: readers would see
//! bytes that were never stored. The handler queues the file here and a thread of its own
//! tells the kernel to drop the file's pages. It cannot be done before the reply: since
//! Linux 6.14 the page stays under write-back until the kernel has the reply, and dropping
//! it waits for that, so a handler doing it itself would wait on its own reply.
//!
//! The commit thread uses the same notification to have the kernel write back dirty pages
//! (the kernel writes a dirty page to the daemon before it drops it; see `commit`).
//!
//! Attributes the daemon changes on its own (setgid cleared by a write, an access time moved
//! by a read) are another matter: the kernel keeps its copy for the attribute timeout, so
//! the handler tells it to forget that copy (`attrs_changed`) before it replies, and the
//! caller's next `stat` asks the daemon. That notification is sent from the handler itself:
//! with a negative offset the kernel only marks the inode's attributes stale (no page is
//! touched, no lock a request holds is taken, nothing waits for the daemon), so it cannot
//! wait on a reply the handler has yet to send, and it is done when the handler's reply goes
//! out: the caller cannot see the old attributes after its call returns.
//!
//! Ordering: the drop comes after the writer's reply, so `open` waits (briefly, bounded)
//! for queued drops before it answers. A reader that opens a file after the refused
//! write-back finished then reads what is stored. A reader that held the file open
//! throughout may still race, as it could with a local disk file system and a writer.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// How long `open` waits for queued drops. Dropping pages can wait on a page lock held by
/// a read that this very daemon must serve: with the default single request thread that
/// would be a deadlock, so the wait is bounded (the drop still happens, just later).
const OPEN_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Invalidations {
    queue: Mutex<Option<Sender<u64>>>,
    /// Queued drops not yet done.
    pending: Mutex<u64>,
    drained: Condvar,
    /// For `attrs_changed`, sent from the calling thread.
    direct: OnceLock<fuser::Notifier>,
}

impl Invalidations {
    /// Queues a drop of every cached page of `ino` (and its cached attributes).
    pub fn request(&self, ino: u64) {
        let Ok(queue) = self.queue.lock() else {
            return;
        };
        if let Some(tx) = queue.as_ref() {
            if let Ok(mut n) = self.pending.lock() {
                *n += 1;
            }
            if tx.send(ino).is_err() {
                self.done();
            }
        }
    }

    /// The daemon changed attributes of `ino` the kernel did not ask it to change: has the
    /// kernel forget its copy now, from the calling thread (see the module comment).
    pub fn attrs_changed(&self, ino: u64) {
        let Some(n) = self.direct.get() else {
            return;
        };
        // Offset -1: attributes only, no pages. ENOENT (the kernel no longer has the
        // inode, so nothing is cached) is taken as done by fuser.
        if let Err(e) = n.inval_inode(fuser::INodeNo(ino), -1, 0) {
            eprintln!("nandkit: could not refresh the attributes of {ino}: {e}");
        }
    }

    /// Waits until every queued drop is done, or `OPEN_WAIT` passed.
    pub fn wait(&self) {
        let _ = self.wait_for(OPEN_WAIT);
    }

    /// Waits until every queued drop is done, or `limit` passed. Whether they are done.
    pub fn wait_for(&self, limit: Duration) -> bool {
        let Ok(n) = self.pending.lock() else {
            return false;
        };
        self.drained
            .wait_timeout_while(n, limit, |n| *n > 0)
            .is_ok_and(|(n, _)| *n == 0)
    }

    fn done(&self) {
        if let Ok(mut n) = self.pending.lock() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.drained.notify_all();
            }
        }
    }

    /// Starts the thread that tells the kernel, through `notifier`, to drop what queued.
    /// `direct` serves `attrs_changed`.
    pub fn start(
        self: &std::sync::Arc<Self>,
        notifier: fuser::Notifier,
        direct: fuser::Notifier,
    ) -> anyhow::Result<()> {
        let _ = self.direct.set(direct);
        let (tx, rx) = channel::<u64>();
        if let Ok(mut q) = self.queue.lock() {
            *q = Some(tx);
        }
        let me = std::sync::Arc::clone(self);
        std::thread::Builder::new()
            .name("invalidate".into())
            .spawn(move || {
                for ino in rx {
                    // Offset 0, length -1: every cached page of the file, and its attributes.
                    if let Err(e) = notifier.inval_inode(fuser::INodeNo(ino), 0, -1) {
                        // ENOENT: the kernel no longer has the inode, so nothing is cached.
                        if e.raw_os_error() != Some(libc::ENOENT) {
                            eprintln!("nandkit: could not drop cached pages of {ino}: {e}");
                        }
                    }
                    me.done();
                }
            })
            .map_err(|e| anyhow::anyhow!("starting the invalidation thread: {e}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_thread_requests_are_dropped_and_wait_returns() {
        let inv = Invalidations::default();
        inv.request(5);
        assert_eq!(*inv.pending.lock().unwrap(), 0);
        inv.wait();
    }

    #[test]
    fn pending_counts_down_to_zero() {
        let inv = Invalidations::default();
        let (tx, rx) = channel();
        *inv.queue.lock().unwrap() = Some(tx);
        inv.request(3);
        inv.request(4);
        assert_eq!(*inv.pending.lock().unwrap(), 2);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [3, 4]);
        inv.done();
        assert!(!inv.wait_for(Duration::from_millis(1)), "one still queued");
        inv.done();
        assert_eq!(*inv.pending.lock().unwrap(), 0);
        assert!(inv.wait_for(Duration::ZERO));
    }
}
