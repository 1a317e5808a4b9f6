//! The mount's clock.

use nandkit_fs::{Clock, SystemClock, TimeNs};

/// The host's real time as the kernel stamps files with it (CLOCK_REALTIME_COARSE: a
/// tick of a few milliseconds). With the write-back cache the kernel sets the times of
/// files being written itself, from this clock, and keeps its own: the daemon reading the
/// same clock keeps every time it sets in step with the kernel's (with a finer clock, a
/// change the daemon stamps could look later than the next one, stamped by the kernel).
pub struct CoarseClock;

impl Clock for CoarseClock {
    fn now_ns(&self) -> TimeNs {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec this function owns.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
            return SystemClock.now_ns();
        }
        ts.tv_sec
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec)
    }
}
