//! The idle cleaner: once no request has reached the daemon for a while (`-o
//! idle_clean=S`), it reclaims blocks one at a time, each under the file system's lock, so
//! that the next burst of writes finds erased blocks instead of cleaning on demand. Which
//! blocks, and when to stop, is the file system's idle rule (`nandkit_fs::clean::idle`);
//! `bench moda-repeat --modes idle` measures the same rule in simulated time.
//!
//! A request that arrives while a step runs waits for that one block (its valid pages
//! copied, then the erase), never for more: the thread checks for new requests between
//! steps. Once the rule finds nothing worth taking, the thread waits for the next request
//! before it looks again (nothing changes on flash without one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::fuse::SharedFs;

/// When the last request was seen, for the idle cleaner.
pub struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the end of the latest request.
    last_ms: AtomicU64,
    /// Requests seen so far.
    requests: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }
}

impl Activity {
    /// A request is being served (called as it starts and as it ends).
    pub fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// How long since the last request.
    fn idle_for(&self) -> Duration {
        let now = self.start.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

/// Starts the idle cleaner; it ends when the file system is handed back for unmounting.
pub fn start(
    shared: SharedFs,
    activity: std::sync::Arc<Activity>,
    after: Duration,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("idle-clean".into())
        .spawn(move || {
            // The request count when the rule last found nothing to take.
            let mut nothing_since: Option<u64> = None;
            // Blocks reclaimed since the rule last found nothing (logged when it does).
            let mut streak = 0u64;
            loop {
                let idle = activity.idle_for();
                if idle < after {
                    std::thread::sleep(after - idle);
                    continue;
                }
                if nothing_since == Some(activity.requests()) {
                    std::thread::sleep(after);
                    continue;
                }
                let seen = activity.requests();
                let Ok(mut guard) = shared.write() else {
                    return;
                };
                let Some(fs) = guard.as_mut() else {
                    return;
                };
                match fs.clean_idle_step() {
                    Ok(true) => streak += 1,
                    Ok(false) => {
                        if streak > 0 {
                            eprintln!("nandkit: idle cleaning: {streak} blocks reclaimed");
                        }
                        streak = 0;
                        nothing_since = Some(seen);
                    }
                    Err(e) => {
                        eprintln!("nandkit: idle cleaning: {e}");
                        nothing_since = Some(seen);
                    }
                }
            }
        })
        .context("starting the idle cleaner")?;
    Ok(())
}
