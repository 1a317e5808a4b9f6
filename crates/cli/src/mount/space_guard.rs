//! The write-back cache on a device that fills.
//!
//! With the kernel's write-back cache, write(2) copies into the page cache and returns;
//! the daemon gets the data later, at write-back, and may have no room for it by then.
//! The writer would learn of it only at fsync or close, and meanwhile readers would see
//! bytes the device then refuses. A disk file system avoids that by reserving space at
//! write(2) (ext4's delayed allocation); a FUSE daemon is never asked. So the daemon keeps
//! what the kernel may hold dirty smaller than the room left:
//!
//! - The kernel holds at most `bound` bytes of this mount's pages dirty: its strict
//!   per-device dirty limit, which FUSE mounts have anyway. As root the daemon sets it
//!   (`-o dirty_limit=SIZE`, by default an eighth of the file system); otherwise it reads
//!   back the limit the kernel chose.
//! - A file opened for writing while the room left is below `bound` plus a slack gets
//!   direct I/O for that open (FOPEN_DIRECT_IO): its writes reach the daemon at write(2),
//!   which answers ENOSPC there, exactly as without the cache. Reads through it skip the
//!   cache too; other opens keep it.
//! - A file opened with the cache while there was room keeps it for that open. Once the
//!   room left is below `bound` plus the slack (`tight`), each of its write(2)s asks the
//!   daemon first, which has the kernel write back what it holds and answers ENOSPC when
//!   less than `margin` is left (see `gate`): every byte write(2) accepted is stored. (Lowering the kernel's limit as the room shrinks
//!   was tried: the kernel's limit throttles writers, it does not refuse them, so a long
//!   writer crawled at the end and got the same error at close, only much later.)
//! - What `gate` cannot cover (one write(2) longer than the room left, pages written
//!   through a mapping) is refused at write-back; the rules of a refused write-back apply:
//!   the error comes from fsync and close, the refused pages are dropped so readers see
//!   what is stored, the range is a hole, and the writer's next write(2) fails with
//!   ENOSPC too (see `refused`).
//!
//! Without the bound (the kernel's settings cannot be read) every open for writing gets
//! direct I/O: no cache is better than a cache that promises what it cannot keep.

use std::path::Path;

/// Room kept beyond the dirty bound: the kernel's limit is checked every few pages per
/// writer (it overshoots by a little), and stored data needs header pages besides.
const MIN_SLACK: u64 = 1 << 20;

/// Room kept beyond one write(2) at the edge of a full device (see `margin`): the header
/// page and the buffered partial chunk of each file being written, with room to spare.
const HEADROOM: u64 = 256 << 10;

/// Default dirty bound: an eighth of the file system, within these limits.
const DEFAULT_BOUND_MIN: u64 = 1 << 20;
const DEFAULT_BOUND_MAX: u64 = 256 << 20;

/// The default dirty bound for a file system holding `capacity` bytes.
pub fn default_bound(capacity: u64) -> u64 {
    (capacity / 8).clamp(DEFAULT_BOUND_MIN, DEFAULT_BOUND_MAX)
}

/// Room beyond the bound for a given bound.
fn slack(bound: u64) -> u64 {
    (bound / 8).max(MIN_SLACK)
}

pub struct SpaceGuard {
    /// The most the kernel may hold dirty for this mount; `None`: unknown.
    bound: Option<u64>,
}

impl SpaceGuard {
    /// No cache: every open for writing gets direct I/O (the write-back cache is off, or
    /// the mount is not up yet).
    pub fn off() -> SpaceGuard {
        SpaceGuard { bound: None }
    }

    /// Sets up the guard for the mount at `mountpoint`: as root, a strict dirty limit of
    /// `wanted` bytes; otherwise the kernel's own limit, read back.
    pub fn start(mountpoint: &Path, wanted: u64) -> SpaceGuard {
        let Some(dir) = super::bdi::dir_of(mountpoint) else {
            eprintln!(
                "nandkit: {} not found in /proc/self/mountinfo: every open for writing \
                 bypasses the page cache",
                mountpoint.display()
            );
            return SpaceGuard::off();
        };
        // SAFETY: geteuid has no failure mode.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            for (file, value) in [("strict_limit", 1), ("max_bytes", wanted)] {
                if let Err(e) = super::bdi::write(&dir, file, value) {
                    eprintln!(
                        "nandkit: cannot set {}/{file} ({e}): the kernel's own dirty limit \
                         applies",
                        dir.display()
                    );
                    break;
                }
            }
        }
        let bound = super::bdi::read(&dir, "max_bytes");
        if bound.is_none() {
            eprintln!(
                "nandkit: cannot read {}/max_bytes: every open for writing bypasses the page \
                 cache",
                dir.display()
            );
        }
        SpaceGuard { bound }
    }

    /// May an open for writing use the page cache, with `room` bytes free?
    pub fn cache_writes(&self, room: u64) -> bool {
        self.bound.is_some_and(|b| room >= b + slack(b))
    }

    /// With `room` bytes free, may the kernel hold more dirty than fits? Then each
    /// write(2) through an open that caches asks first (see `gate`). Never without a
    /// bound: then no open caches writes.
    pub fn tight(&self, room: u64) -> bool {
        self.bound.is_some_and(|b| room < b + slack(b))
    }

    /// The room a cached write(2) needs once the kernel's dirty pages are stored: one
    /// write(2) of up to the slack (at least 1 MiB, `dd bs=1M`'s; an eighth of the dirty
    /// limit on larger mounts), and `HEADROOM`. A cached write(2) asks the daemon once,
    /// before its first byte (see `gate`), so a longer one can still outrun the room
    /// left. Writers answered together each need it.
    pub fn margin(&self) -> u64 {
        self.bound.map_or(MIN_SLACK, slack) + HEADROOM
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_default_bound_is_an_eighth_within_limits() {
        assert_eq!(default_bound(1024 * MIB), 128 * MIB);
        assert_eq!(default_bound(4 * MIB), MIB);
        assert_eq!(default_bound(64 * 1024 * MIB), 256 * MIB);
    }

    #[test]
    fn opens_write_through_once_room_is_below_bound_and_slack() {
        let g = SpaceGuard {
            bound: Some(8 * MIB),
        };
        assert!(g.cache_writes(100 * MIB));
        assert!(g.cache_writes(9 * MIB));
        assert!(!g.cache_writes(9 * MIB - 1));
        assert!(!g.cache_writes(0));
        assert!(
            !SpaceGuard::off().cache_writes(u64::MAX / 2),
            "no bound, no cache"
        );
    }

    #[test]
    fn tight_is_where_opens_stop_caching_and_the_margin_is_one_write_within_it() {
        let g = SpaceGuard {
            bound: Some(4 * MIB),
        };
        for room in [0, MIB, 5 * MIB - 1, 5 * MIB, 64 * MIB] {
            assert_eq!(g.tight(room), !g.cache_writes(room), "{room}");
        }
        assert_eq!(g.margin(), MIB + MIB / 4, "a 1 MiB write and the headroom");
        let big = SpaceGuard {
            bound: Some(128 * MIB),
        };
        assert_eq!(big.margin(), 16 * MIB + MIB / 4);
        assert!(!SpaceGuard::off().tight(0), "no bound: nothing caches");
        for b in [MIB, 4 * MIB, 128 * MIB, 256 * MIB] {
            let g = SpaceGuard { bound: Some(b) };
            assert!(
                g.tight(g.margin()),
                "the gate lets writers go on while tight"
            );
        }
    }
}
