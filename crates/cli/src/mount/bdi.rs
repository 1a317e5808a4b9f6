//! How much of the kernel's dirty-page allowance the mount may hold.
//!
//! The kernel limits every FUSE mount to 1% of the system's dirty-page allowance, strictly
//! (a slow or hostile daemon must not pin the page cache). Past that, a writer waits for
//! the daemon at every page: with the write-back cache, random 4 KiB writes over a 64 MiB
//! file ran at a third of the speed they reach with the limit relaxed. nandkit's daemon
//! serves from memory and writes back at memory speed, and a commit hands dirty pages of
//! files open for writing to it every commit interval whatever the limit, so a larger
//! share costs no durability. When it may (as root), the daemon sets this mount's share
//! (`-o dirty_ratio=PERCENT`, default 20) and lifts the strict limit, through the mount's
//! backing device in /sys/class/bdi. The settings go with the mount.

use std::path::Path;

/// The "major:minor" device number of the mount at `mountpoint`, from
/// /proc/self/mountinfo (asking the mount itself would need the daemon to answer).
fn device_of(mountpoint: &Path) -> Option<String> {
    let want = std::fs::canonicalize(mountpoint).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|line| {
        let mut f = line.split(' ');
        let (_id, _parent, dev, _root, point) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        (unescape(point) == want.as_os_str().to_string_lossy()).then(|| dev.to_string())
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Sets the mount's share of the dirty-page allowance; says why not if it cannot.
pub fn set_dirty_share(mountpoint: &Path, percent: u32) {
    let Some(dev) = device_of(mountpoint) else {
        eprintln!(
            "nandkit: dirty_ratio: {} not found in /proc/self/mountinfo",
            mountpoint.display()
        );
        return;
    };
    let dir = Path::new("/sys/class/bdi").join(&dev);
    for (file, value) in [
        ("max_ratio", percent.to_string()),
        ("strict_limit", "0".into()),
    ] {
        if let Err(e) = std::fs::write(dir.join(file), &value) {
            eprintln!(
                "nandkit: dirty_ratio: cannot set {}/{file} ({e}); the kernel's FUSE default \
                 (1%, strict) stays",
                dir.display()
            );
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_unescape() {
        assert_eq!(unescape("/tmp/a\\040b"), "/tmp/a b");
        assert_eq!(unescape("/x\\134y"), "/x\\y");
    }

    #[test]
    fn the_root_mount_has_a_device_number() {
        let dev = device_of(Path::new("/")).expect("/ in mountinfo");
        assert!(dev.contains(':'), "{dev}");
    }
}
