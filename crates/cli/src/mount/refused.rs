//! Telling a cached writer at write(2) that its write-backs are being refused.
//!
//! With the write-back cache, write(2) only copies into the kernel's page cache; the
//! daemon sees the bytes at write-back, when the writer has long returned. If the device
//! is full by then, the write-back is refused and the kernel throws the pages away (the
//! error waits for fsync or close), so the cache never fills and a writer that never
//! closes writes on forever (generic/015: a 211 GB file on a 256 MiB image).
//!
//! The one request a cached write(2) sends the daemon: before copying, the kernel checks
//! the file's size and mode, and when its copy of the attributes is stale it asks for
//! them (GETATTR with the writer's file handle, `fuse_update_attributes` in
//! `fuse_cache_write_iter`); an error there is what write(2) returns. So after a refused
//! write-back the daemon records the error here and has the kernel forget the file's
//! attributes before it replies to the write-back (its pages follow, see `invalidate`);
//! the next write(2) through a handle open for writing asks, and gets the error.
//!
//! Past the largest file the format holds (EFBIG) this is all that can be done under the
//! cache: the first write(2) there never reaches the daemon, and FUSE cannot lower the
//! kernel's limit for the mount (its `s_maxbytes`, the largest size the kernel handles;
//! the FUSE_INIT reply has no field for it), so it is refused at write-back. Attributes asked without a handle (stat, fstat) and
//! through handles open only for reading are answered as usual. The kernel keeps its copy
//! stale while it gets errors, so every later write(2) asks again: ENOSPC is answered
//! until the room left covers what the kernel may hold dirty again (see `space_guard`),
//! other errors (EFBIG past the largest file) until the last writer closes.
//!
//! This is the last resort: on a filling device `gate` stops cached writers at write(2)
//! before anything they wrote is refused. What still reaches a refused write-back (one
//! write(2) longer than the room left, pages written through a mapping, a write past the
//! largest file) is lost; fsync or close report it too if a write-back failed since the
//! kernel's per-file error flag was last looked at.

use std::collections::HashMap;
use std::sync::Mutex;

/// File handles of opens for writing are odd, and those whose writes go through the
/// page cache have bit 1 set too, so a GETATTR names its kind of open.
pub fn handle(n: u64, writes: bool, cached: bool) -> u64 {
    (n << 2) | u64::from(writes && cached) << 1 | u64::from(writes)
}

/// Was the handle opened for writing?
pub fn writes(fh: u64) -> bool {
    fh & 1 == 1
}

/// Was the handle opened for writing through the page cache (see `gate`)?
pub fn cached(fh: u64) -> bool {
    fh & 3 == 3
}

/// Errors of refused write-backs, per inode, still to be reported at write(2).
#[derive(Default)]
pub struct Refused(Mutex<HashMap<u64, i32>>);

impl Refused {
    /// A write-back of `ino` was refused with `errno`.
    pub fn record(&self, ino: u64, errno: i32) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(ino, errno);
        }
    }

    /// The error a write(2) to `ino` is to get, if any. `room` says whether the room
    /// left covers the kernel's dirty pages again, which ends an ENOSPC.
    pub fn pending(&self, ino: u64, room: impl FnOnce() -> bool) -> Option<i32> {
        let mut m = self.0.lock().ok()?;
        let errno = *m.get(&ino)?;
        if errno == libc::ENOSPC && room() {
            m.remove(&ino);
            return None;
        }
        Some(errno)
    }

    /// The last writer of `ino` closed: whatever was refused has been reported by close.
    pub fn forget(&self, ino: u64) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(&ino);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_say_whether_they_write() {
        assert!(writes(handle(7, true, false)));
        assert!(!writes(handle(7, false, false)));
        assert_ne!(handle(7, true, true), handle(8, true, true));
        assert!(cached(handle(7, true, true)));
        assert!(!cached(handle(7, true, false)));
        assert!(
            !cached(handle(7, false, true)),
            "a read-only open writes nothing"
        );
        assert!(writes(handle(7, true, true)));
    }

    #[test]
    fn enospc_lasts_until_there_is_room_and_others_until_forgotten() {
        let r = Refused::default();
        assert_eq!(r.pending(1, || false), None);
        r.record(1, libc::ENOSPC);
        r.record(2, libc::EFBIG);
        assert_eq!(r.pending(1, || false), Some(libc::ENOSPC));
        assert_eq!(r.pending(1, || true), None);
        assert_eq!(r.pending(1, || false), None, "room came back: cleared");
        assert_eq!(r.pending(2, || true), Some(libc::EFBIG));
        r.forget(2);
        assert_eq!(r.pending(2, || false), None);
    }
}
