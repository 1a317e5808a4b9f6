//! The mount's backing device in /sys/class/bdi: where the kernel keeps the limit on
//! how much of the mount's page cache may be dirty (see `space_guard`, which sets and
//! reads it).

use std::path::{Path, PathBuf};

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

/// The /sys/class/bdi directory of the mount at `mountpoint`.
pub fn dir_of(mountpoint: &Path) -> Option<PathBuf> {
    device_of(mountpoint).map(|dev| Path::new("/sys/class/bdi").join(dev))
}

/// Writes a number into one of the device's settings (root only).
pub fn write(dir: &Path, file: &str, value: u64) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value.to_string())
}

/// Reads a number from one of the device's settings.
pub fn read(dir: &Path, file: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
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
    fn settings_read_back() {
        let d = std::env::temp_dir().join(format!("nandkit-bdi-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        write(&d, "max_bytes", 4096).unwrap();
        assert_eq!(read(&d, "max_bytes"), Some(4096));
        assert_eq!(read(&d, "missing"), None);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_root_mount_has_a_device_number() {
        let dev = device_of(Path::new("/")).expect("/ in mountinfo");
        assert!(dev.contains(':'), "{dev}");
    }
}
