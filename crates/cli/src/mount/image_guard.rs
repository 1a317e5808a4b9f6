//! The image file shrinking under a live mount (another program truncating it).
//!
//! The daemon reads and writes the image through a memory map: touching a page of the map
//! past the file's new end raises SIGBUS, which killed the daemon with nothing in its log
//! and left the mount answering ENOTCONN. Two guards:
//!
//! - every request first compares the file's length with the length the mount started
//!   with (one `fstat`, well under a microsecond): once it is shorter, the daemon logs it
//!   once and answers EIO to every request, and touches the map no more;
//! - a truncate that lands while a request is using the map still raises SIGBUS; a
//!   handler then writes why to the log (async-signal-safe `write(2)` only) and exits.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct ImageGuard {
    file: File,
    len: u64,
    shrunk: AtomicBool,
    name: String,
}

impl ImageGuard {
    /// Watches `image`, whose length now is the one it must keep.
    pub fn new(image: &Path) -> std::io::Result<ImageGuard> {
        let file = File::open(image)?;
        let len = file.metadata()?.len();
        install_sigbus_note();
        Ok(ImageGuard {
            file,
            len,
            shrunk: AtomicBool::new(false),
            name: image.display().to_string(),
        })
    }

    /// Is the image still whole? Logs the first time it is not.
    pub fn intact(&self) -> bool {
        if self.shrunk.load(Ordering::Relaxed) {
            return false;
        }
        let now = self.file.metadata().map_or(0, |m| m.size());
        if now >= self.len {
            return true;
        }
        if !self.shrunk.swap(true, Ordering::Relaxed) {
            eprintln!(
                "nandkit: {} shrank from {} to {now} bytes under the mount (truncated by \
                 another program?): every request now fails with EIO; unmount, and check \
                 the image (nandkit fsck) before using it again",
                self.name, self.len
            );
        }
        false
    }
}

/// What the SIGBUS handler writes (a static: the handler may not allocate).
static SIGBUS_NOTE: &[u8] = b"nandkit: SIGBUS: a page of a mapped image could not be \
read or written: the image file shrank while the daemon was using it (truncated by another \
program?), or the host file system is full and the image is sparse (made before nandkit \
reserved its images' space at mkfs); the daemon stops here, and the mount answers ENOTCONN \
until it is unmounted\n";

extern "C" fn on_sigbus(_: libc::c_int) {
    // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is static.
    unsafe {
        libc::write(2, SIGBUS_NOTE.as_ptr().cast(), SIGBUS_NOTE.len());
        libc::_exit(3);
    }
}

fn install_sigbus_note() {
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}
