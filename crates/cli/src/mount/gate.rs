//! Room for what write(2) puts in the page cache, made sure of before write(2) goes on.
//!
//! ext4 reserves room for each page a write(2) dirties (delayed allocation), so a full
//! device answers ENOSPC at write(2) and a write(2) that succeeded is never refused later.
//! Under FUSE's write-back cache the daemon is not asked when write(2) dirties a page; it
//! gets the page at write-back, and refusing it then loses bytes the writer was told were
//! written (generic/015's `dd` on a 32 MiB image: ENOSPC at write(2) and again at close,
//! a 36.7 MB file of which 32.3 MB were stored).
//!
//! What the daemon is asked: a cached write(2) first checks the file's attributes and,
//! when the kernel's copy is stale, asks for them (GETATTR with the writer's handle,
//! `fuse_update_attributes` in `fuse_cache_write_iter`, before any page is touched and
//! with no lock held); an error there is what write(2) returns. So:
//!
//! - While the room left covers what the kernel may hold dirty (`space_guard`: the bound
//!   and a slack), nothing is asked: every byte accepted fits.
//! - Once something leaves less (`SpaceGuard::tight`), the daemon has the kernel forget
//!   the attributes of every file open for writing, and while it stays so it answers every
//!   attribute request with a zero timeout: each later cached write(2) asks first. (A reply
//!   to a request sent before the kernel forgot is dropped by the kernel: its
//!   `attr_version` is older.)
//! - The question comes here, off the request threads: the gate has the kernel write back
//!   the dirty pages of every file open for writing (the notification `commit` uses, which
//!   returns once they are written back; the request threads serve the write-backs
//!   meanwhile), so every byte accepted so far is stored. Then it answers: the attributes
//!   while at least `SpaceGuard::margin` (one more write(2)) is left for each writer
//!   answered at once, ENOSPC otherwise. Nothing write(2) accepted is refused later, so
//!   fsync and close have nothing to report, and the file's size is what is stored.
//!
//! The cost: near the end of the device each cached write(2) waits for a write-back, as
//! if the file were opened for direct I/O (which new opens there get, see `space_guard`).
//!
//! What this cannot cover, where the rules of a refused write-back still apply (see
//! `refused`): one write(2) longer than the room left (it is asked about once, before its
//! first byte, and the kernel gives the daemon no say over the rest: `dd bs=64M` on a
//! 32 MiB device), writers that together write more than their margins at the same
//! moment, and pages written through a mapping (nothing is asked before a mapped page is
//! dirtied).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fuser::{Errno, FileAttr, ReplyAttr};
use nandkit_fs::{Attr, Ino};

use super::commit::Writers;
use super::fuse::{room, SharedFs};
use super::invalidate::Invalidations;
use super::space_guard::SpaceGuard;

/// How long the gate waits for the kernel's write-backs. They are served by the request
/// threads, which never wait on the gate, so only a stalled kernel or daemon reaches it;
/// then the answer is ENOSPC (nothing can be promised).
const WRITE_BACK_WAIT: Duration = Duration::from_secs(30);

/// The answer to one writer's question: its inode, how many writers this round lets go
/// on counting it, and whether every dirty page was written back. Attributes and their
/// timeout, or the error write(2) gets.
pub type Answer = dyn Fn(u64, u64, bool) -> Result<(FileAttr, Duration), Errno> + Send + Sync;

/// A GETATTR waiting for its answer.
struct Asked {
    ino: u64,
    reply: ReplyAttr,
}

pub struct Gate {
    invalidations: Arc<Invalidations>,
    writers: Arc<Writers>,
    answer: Arc<Answer>,
    /// To the gate's thread, started at the first question.
    queue: OnceLock<Mutex<Sender<Asked>>>,
}

impl Gate {
    pub fn new(
        invalidations: Arc<Invalidations>,
        writers: Arc<Writers>,
        answer: Arc<Answer>,
    ) -> Gate {
        Gate {
            invalidations,
            writers,
            answer,
            queue: OnceLock::new(),
        }
    }

    /// A cached writer of `ino` asks for its attributes on a nearly full device: `reply`
    /// is answered from the gate's thread once what the kernel holds is stored.
    pub fn ask(&self, ino: u64, reply: ReplyAttr) {
        let queue = self.queue.get_or_init(|| Mutex::new(self.start()));
        let sent = match queue.lock() {
            Ok(tx) => tx.send(Asked { ino, reply }),
            Err(_) => return,
        };
        // No thread: answer here, promising nothing.
        if let Err(std::sync::mpsc::SendError(asked)) = sent {
            asked.reply.error(Errno::ENOSPC);
        }
    }

    fn start(&self) -> Sender<Asked> {
        let (tx, rx) = channel();
        let (inv, writers, answer) = (
            Arc::clone(&self.invalidations),
            Arc::clone(&self.writers),
            Arc::clone(&self.answer),
        );
        if let Err(e) = std::thread::Builder::new()
            .name("gate".into())
            .spawn(move || serve(&rx, &inv, &writers, &*answer))
        {
            eprintln!(
                "nandkit: starting the write gate: {e}; cached writes on a full device get ENOSPC"
            );
        }
        tx
    }
}

/// The gate's thread: the questions that came together share one write-back.
fn serve(rx: &Receiver<Asked>, inv: &Invalidations, writers: &Writers, answer: &Answer) {
    while let Ok(first) = rx.recv() {
        let mut round = vec![first];
        round.extend(rx.try_iter());
        for ino in writers.inodes() {
            inv.request(ino);
        }
        let stored = inv.wait_for(WRITE_BACK_WAIT);
        let mut granted = 0;
        for Asked { ino, reply } in round {
            match answer(ino, granted + 1, stored) {
                Ok((attr, ttl)) => {
                    granted += 1;
                    reply.attr(&ttl, &attr);
                }
                Err(e) => reply.error(e),
            }
        }
    }
}

/// The answer to a cached writer of `ino`, once the kernel's dirty pages are `stored`,
/// with `writers` let go on in this round counting this one: the attributes with a zero
/// timeout (its next write(2) asks again) while each has the margin left, ENOSPC once
/// not. With room enough again (a delete), the attributes with the usual `ttl`. Like the
/// commit thread, straight on the file system.
pub fn answer(
    shared: &SharedFs,
    guard: &OnceLock<SpaceGuard>,
    ttl: Duration,
    ino: u64,
    writers: u64,
    stored: bool,
) -> Result<(Attr, Duration), Errno> {
    let ino = Ino::try_from(ino).map_err(|_| Errno::ENOENT)?;
    let mut fs = shared.write().map_err(|_| Errno::EIO)?;
    let fs = fs.as_mut().ok_or(Errno::EIO)?;
    let attr = fs.getattr(ino).map_err(|e| Errno::from_i32(e.errno()))?;
    let room = room(fs);
    match guard.get() {
        Some(guard) if guard.tight(room) => {
            if stored && room >= guard.margin().saturating_mul(writers) {
                Ok((attr, Duration::ZERO))
            } else {
                Err(Errno::ENOSPC)
            }
        }
        _ => Ok((attr, ttl)),
    }
}
