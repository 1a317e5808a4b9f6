//! A FUSE mount for the CLI tests: an image and a mount point in a temporary directory,
//! mounted with the `nandkit` binary, detached if a test fails; and the small process
//! helpers those tests share.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use super::nandkit;

pub const BIN: &str = env!("CARGO_BIN_EXE_nandkit");

/// Why FUSE cannot be used here, if it cannot.
pub fn fuse_unavailable() -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata("/dev/fuse") {
        Err(e) => return Some(format!("/dev/fuse: {e}")),
        Ok(m) if !m.file_type().is_char_device() => {
            return Some("/dev/fuse is not a character device".into())
        }
        Ok(_) => {}
    }
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    if Command::new("fusermount3").arg("-V").output().is_err() {
        return Some("fusermount3 not found (install Debian's fuse3: scripts/setup.sh)".into());
    }
    None
}

/// The variable that lets the FUSE tests pass without FUSE (as SKIPPED).
pub const SKIP_VAR: &str = "NANDKIT_SKIP_FUSE";

/// Can this test use FUSE? Where FUSE is missing the test fails, saying why and how to
/// install it, unless NANDKIT_SKIP_FUSE=1 asks to skip (then it says SKIPPED and passes).
/// Under `CI=true` it fails even then: the CI machine has FUSE.
pub fn fuse_ready(name: &str) -> bool {
    let Some(why) = fuse_unavailable() else {
        return true;
    };
    let skip = std::env::var(SKIP_VAR).is_ok_and(|v| v == "1");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{name}: FUSE is required under CI=true: {why}");
    }
    if !skip {
        panic!(
            "{name}: FUSE is missing: {why}. Install it with scripts/setup.sh, or set \
             {SKIP_VAR}=1 to skip the FUSE tests"
        );
    }
    // Straight to stderr, past the test harness's capture, so a plain `cargo test` shows it.
    let _ = writeln!(std::io::stderr(), "SKIPPED {name}: {why} ({SKIP_VAR}=1)");
    false
}

/// A message that shows even when the harness captures test output.
pub fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "note: {msg}");
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Is a nandkit FUSE mount up at `mnt` (per /proc/mounts)?
pub fn is_mounted(mnt: &Path) -> bool {
    let want = mnt.canonicalize().unwrap_or_else(|_| mnt.to_path_buf());
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            f.len() > 2 && Path::new(f[1]) == want && f[2] == "fuse.nandkit"
        })
}

/// A device, an image and a mount point in one temporary directory.
pub struct Rig {
    pub dir: tempfile::TempDir,
    pub img: PathBuf,
    pub mnt: PathBuf,
    /// The NVRAM image, when the profile under test keeps its metadata there.
    pub nvram: Option<PathBuf>,
}

/// `NANDKIT_TEST_PROFILE=NAME` runs the mount tests on that profile instead of the default
/// (tests that name a profile keep theirs); minv gets an NVRAM image beside the flash one.
pub fn test_profile() -> Option<String> {
    std::env::var("NANDKIT_TEST_PROFILE")
        .ok()
        .filter(|p| !p.is_empty())
}

/// `NANDKIT_TEST_GEOMETRY=NAME` makes every test image on that preset (yaffs1 needs a
/// small-page one: `smallblock-64m`).
pub fn test_geometry() -> Option<String> {
    std::env::var("NANDKIT_TEST_GEOMETRY")
        .ok()
        .filter(|g| !g.is_empty())
}

/// mkfs arguments with the geometry `NANDKIT_TEST_GEOMETRY` names, if set.
fn with_test_geometry(mkfs_args: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = mkfs_args.iter().map(|a| a.to_string()).collect();
    let Some(g) = test_geometry() else {
        return args;
    };
    match args.iter().position(|a| a == "--geometry" || a == "-g") {
        Some(i) if i + 1 < args.len() => args[i + 1] = g,
        _ => args.extend(["--geometry".to_string(), g]),
    }
    args
}

impl Rig {
    pub fn new(mkfs_args: &[&str]) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("nand.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mut args: Vec<String> = vec!["mkfs".into(), s(&img).into()];
        args.extend(with_test_geometry(mkfs_args));
        let mut nvram = None;
        if let Some(p) = test_profile().filter(|_| !mkfs_args.contains(&"--profile")) {
            if p == "minv" {
                let nv = dir.path().join("nand.nvram");
                args.extend(["--nvram".to_string(), s(&nv).to_string()]);
                nvram = Some(nv);
            }
            args.extend(["--profile".to_string(), p]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = nandkit(&args);
        assert!(o.status.success(), "mkfs: {}", text(&o.stderr));
        Rig {
            dir,
            img,
            mnt,
            nvram,
        }
    }

    /// `--nvram FILE` for commands on this image, when it has one.
    pub fn nvram_args(&self) -> Vec<&str> {
        match &self.nvram {
            Some(nv) => vec!["--nvram", s(nv)],
            None => Vec::new(),
        }
    }

    pub fn mount(&self, opts: &[&str]) -> Mounted {
        let mut args = vec!["mount", s(&self.img), s(&self.mnt)];
        args.extend(self.nvram_args());
        args.extend_from_slice(opts);
        let o = nandkit(&args);
        assert!(
            o.status.success(),
            "mount failed:\n{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        wait_until("the mount in /proc/mounts", Duration::from_secs(20), || {
            is_mounted(&self.mnt)
        });
        Mounted {
            mnt: self.mnt.clone(),
            done: false,
        }
    }

    pub fn fsck_clean(&self) {
        let mut args = vec!["fsck", s(&self.img)];
        args.extend(self.nvram_args());
        let o = nandkit(&args);
        assert!(
            o.status.success(),
            "fsck not clean:\n{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

/// A live mount; dropping it (say, when a test fails) detaches it so nothing is left behind.
pub struct Mounted {
    pub mnt: PathBuf,
    pub done: bool,
}

impl Mounted {
    pub fn unmount(mut self) {
        // Tests run in parallel threads of one process: a child another thread is
        // starting holds copies of this thread's descriptors between its fork and exec,
        // so right after a close the mount can be busy for a moment. Only that is retried.
        let mut last = String::new();
        wait_until(
            "an unmount that is not busy",
            Duration::from_secs(20),
            || {
                let o = Command::new("fusermount3")
                    .arg("-u")
                    .arg(&self.mnt)
                    .output()
                    .unwrap();
                last = text(&o.stderr);
                assert!(
                    o.status.success() || last.contains("busy"),
                    "fusermount3 -u: {last}"
                );
                o.status.success()
            },
        );
        wait_until("the unmount", Duration::from_secs(20), || {
            !is_mounted(&self.mnt)
        });
        self.done = true;
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if !self.done && is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.mnt)
                .output();
        }
    }
}

/// Runs a shell script in `dir` with `set -eux`; on failure shows its trace.
pub fn sh(dir: &Path, env: &[(&str, &Path)], script: &str) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("set -eux\n{script}"))
        .current_dir(dir)
        .env("LC_ALL", "C");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "script failed ({}):\n--- script ---\n{script}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
}

pub fn source_tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../flash/src")
        .canonicalize()
        .unwrap()
}

pub fn unsafe_is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn daemon_pid(o: &Output) -> i32 {
    let out = text(&o.stdout);
    out.split("daemon pid ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}"))
}

/// Has process `pid` exited? (A zombie nobody has reaped yet counts as exited.)
pub fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|st| {
            st.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

pub fn wait_child(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("process did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// lseek(2) on an open file: the offset, or the errno.
pub fn seek(f: &std::fs::File, off: u64, whence: i32) -> Result<u64, i32> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: lseek(2) on an open descriptor.
    let r = unsafe { libc::lseek(f.as_raw_fd(), off as i64, whence) };
    if r < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    } else {
        Ok(r as u64)
    }
}
