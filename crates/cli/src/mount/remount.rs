//! `-o remount`: change a live mount's flags, as `mount -o remount,ro` does for any file
//! system. The daemon keeps serving; what changes is what the kernel enforces: read-only
//! or not, suid, dev, exec, sync and dirsync.
//!
//! The kernel flushes its cached writes to the daemon before a remount to read-only, and
//! refuses it (EBUSY) while a file is open for writing there, as for any file system.
//! Settings the daemon applies itself (access times, commit interval, the write-back
//! cache, threads, limits) were fixed when it started: asking to change one at a remount
//! is an error that says so, not an option silently kept.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context};

use crate::image::{self, FUSE_TYPE};

/// What a remount asks the kernel for.
#[derive(Debug, PartialEq, Eq)]
pub struct Remount {
    /// mount(2) flags besides MS_REMOUNT: exactly the set given, as mount(2) applies it.
    pub flags: libc::c_ulong,
    /// allow_other or allow_root was given: the mount must already let other users in.
    pub wants_allow_other: bool,
}

impl Remount {
    pub fn read_only(&self) -> bool {
        self.flags & libc::MS_RDONLY != 0
    }
}

/// Does this `-o` list ask for a remount?
pub fn requested(options: &[String]) -> bool {
    options
        .iter()
        .flat_map(|a| a.split(','))
        .any(|o| o == "remount")
}

/// Parses a remount's options. mount(8) may pass the mount's whole option list back
/// (`ro,nosuid,nodev,relatime,remount,user_id=0,group_id=0,default_permissions,allow_other`
/// for `mount -o remount,ro DIR`), so FUSE's own fixed options are accepted unchanged.
pub fn parse(options: &[String]) -> anyhow::Result<Remount> {
    let mut r = Remount {
        flags: 0,
        wants_allow_other: false,
    };
    let mut set = |flag: libc::c_ulong, on: bool| {
        if on {
            r.flags |= flag
        } else {
            r.flags &= !flag
        }
    };
    let mut wants_allow_other = false;
    for opt in options
        .iter()
        .flat_map(|a| a.split(','))
        .filter(|o| !o.is_empty())
    {
        let key = opt.split_once('=').map_or(opt, |(k, _)| k);
        match opt {
            "remount" => {}
            "ro" => set(libc::MS_RDONLY, true),
            "rw" => set(libc::MS_RDONLY, false),
            "nosuid" => set(libc::MS_NOSUID, true),
            "suid" => set(libc::MS_NOSUID, false),
            "nodev" => set(libc::MS_NODEV, true),
            "dev" => set(libc::MS_NODEV, false),
            "noexec" => set(libc::MS_NOEXEC, true),
            "exec" => set(libc::MS_NOEXEC, false),
            "sync" => set(libc::MS_SYNCHRONOUS, true),
            "async" => set(libc::MS_SYNCHRONOUS, false),
            "dirsync" => set(libc::MS_DIRSYNC, true),
            // The kernel's own access-time flag of every FUSE mount (the daemon keeps the
            // times): mount(8) passes it back unchanged.
            "relatime" | "atime" | "diratime" => {}
            "allow_other" | "allow_root" => wants_allow_other = true,
            // Fixed for the life of a FUSE mount; always on for nandkit.
            "default_permissions" => {}
            _ if matches!(key, "user_id" | "group_id" | "fsname" | "subtype") => {}
            "noatime" | "strictatime" | "nodiratime" => bail!(
                "-o {opt}: access times are kept by the daemon, which was started with its \
                 policy; unmount and mount again with -o {opt}"
            ),
            _ if matches!(
                key,
                "writeback"
                    | "nowriteback"
                    | "commit"
                    | "threads"
                    | "dirty_limit"
                    | "idle_clean"
                    | "attr_timeout"
                    | "entry_timeout"
            ) =>
            {
                bail!(
                    "-o {key}: the daemon's setting, fixed when it started; unmount and mount \
                     again to change it"
                )
            }
            _ => bail!("unknown mount option -o {opt} (see nandkit mount --help)"),
        }
    }
    r.wants_allow_other = wants_allow_other;
    Ok(r)
}

/// Remounts the nandkit mount of `image` on `mountpoint` with `options`.
pub fn run(image: &Path, mountpoint: &Path, options: &[String]) -> anyhow::Result<()> {
    let r = parse(options)?;
    let mnt = mountpoint
        .canonicalize()
        .with_context(|| format!("mount point {}", mountpoint.display()))?;
    // The last entry for a directory is the mount on top, the one a remount changes.
    let Some(entry) = image::mounts()
        .into_iter()
        .rev()
        .find(|m| m.mountpoint == mnt)
    else {
        bail!("{}: nothing is mounted there to remount", mnt.display());
    };
    if entry.fstype != FUSE_TYPE {
        bail!(
            "{} holds {} ({}), not a nandkit mount",
            mnt.display(),
            entry.source,
            entry.fstype
        );
    }
    if image::mounted_at(image).as_deref() != Some(mnt.as_path())
        && image::canonical(image) != Path::new(&entry.source)
    {
        bail!(
            "{} serves {}, not {}",
            mnt.display(),
            entry.source,
            image.display()
        );
    }
    check_fixed(&r, image, &mnt, &entry.options)?;
    mount_call(None, &mnt, libc::MS_REMOUNT | r.flags).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) => " (changing a mount's flags needs root)",
            Some(libc::EBUSY) if r.read_only() => " (a file there is open for writing)",
            _ => "",
        };
        anyhow::anyhow!("remounting {}: {e}{hint}", mnt.display())
    })
}

/// Mounts `image`, already served on `existing`, on `mountpoint` too: as a disk file
/// system's device mounted twice shares one file system, the new mount is a bind mount of
/// the first, served by the same daemon (a second daemon on one image would wreck it).
/// The daemon ends once both are unmounted. Needs root, as any bind mount.
pub fn mount_again(
    image: &Path,
    existing: &Path,
    mountpoint: &Path,
    r: &Remount,
) -> anyhow::Result<()> {
    let Some(entry) = image::mounts()
        .into_iter()
        .rev()
        .find(|m| m.mountpoint == existing)
    else {
        bail!(
            "{}: its mount on {} went away",
            image.display(),
            existing.display()
        );
    };
    check_fixed(r, image, existing, &entry.options)?;
    mount_call(Some(existing), mountpoint, libc::MS_BIND).map_err(|e| {
        anyhow::anyhow!(
            "{} is mounted on {}; mounting it on {} too (a bind mount of that one): {e}",
            image.display(),
            existing.display(),
            mountpoint.display()
        )
    })?;
    // A bind mount starts with the first one's flags; then this mount's own.
    mount_call(None, mountpoint, libc::MS_REMOUNT | libc::MS_BIND | r.flags).map_err(|e| {
        let _ = crate::mount::unmount(mountpoint);
        anyhow::anyhow!("setting the flags of {}: {e}", mountpoint.display())
    })
}

/// What a remount or a second mount cannot change: the mount's allow_other, and a daemon
/// that opened the image read-only.
fn check_fixed(r: &Remount, image: &Path, mnt: &Path, options: &str) -> anyhow::Result<()> {
    if r.wants_allow_other && !options.split(',').any(|o| o == "allow_other") {
        bail!(
            "-o allow_other: {} was mounted without it, and a FUSE mount cannot let other \
             users in later; unmount and mount again with it",
            mnt.display()
        );
    }
    if !r.read_only() && image::read_owner(image).is_some_and(|o| o.read_only) {
        bail!(
            "{} was mounted with -o ro: its daemon opened the image read-only, so it cannot \
             be made writable; unmount and mount again without -o ro",
            mnt.display()
        );
    }
    Ok(())
}

/// mount(2) without a type or data: a remount, or a bind mount of `source`.
fn mount_call(source: Option<&Path>, target: &Path, flags: libc::c_ulong) -> std::io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let target = c(target)?;
    let source = source.map(c).transpose()?;
    // SAFETY: a plain system call; the paths are valid C strings for its duration.
    let rc = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> anyhow::Result<Remount> {
        parse(&[s.to_string()])
    }

    #[test]
    fn remount_options_map_to_mount_flags() {
        assert!(requested(&["rw".into(), "ro,remount".into()]));
        assert!(!requested(&["ro".into()]));
        let r = p("remount,ro").unwrap();
        assert_eq!(r.flags, libc::MS_RDONLY);
        assert!(r.read_only() && !r.wants_allow_other);
        // What mount(8) passes for `mount -o remount,ro DIR`: the mount's own list back.
        let r = p(
            "ro,nosuid,nodev,relatime,remount,user_id=0,group_id=0,default_permissions,\
                   allow_other",
        )
        .unwrap();
        assert_eq!(r.flags, libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV);
        assert!(r.wants_allow_other);
        // The last word wins, as in mount(8).
        assert_eq!(
            p("remount,ro,rw,noexec,exec,sync").unwrap().flags,
            libc::MS_SYNCHRONOUS
        );
        assert_eq!(p("remount,dirsync").unwrap().flags, libc::MS_DIRSYNC);
        for daemon_only in [
            "commit=9",
            "nowriteback",
            "threads=3",
            "noatime",
            "nodiratime",
        ] {
            let e = p(&format!("remount,{daemon_only}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("mount again"), "{daemon_only}: {e}");
        }
        assert!(p("remount,bogus").is_err());
    }
}
