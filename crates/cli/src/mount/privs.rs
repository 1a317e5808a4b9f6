//! Dropping privileges when a file changes, done by the daemon (FUSE_HANDLE_KILLPRIV_V2).
//!
//! Linux clears a file's setuid and setgid bits, and its file capability
//! (`security.capability`), when someone without CAP_FSETID writes it, truncates it or
//! preallocates in it, and on chown. Left to the kernel, FUSE asks the daemon for
//! `security.capability` before every write (a round trip that halves small-write speed,
//! and stops the write-back cache from absorbing them) and applies an old rule for setgid.
//! With the file system owning the job, the kernel marks inodes it has checked as having
//! nothing to drop and stops asking, and the daemon applies today's rules:
//!
//! - the file capability goes on every write, truncate and chown;
//! - on write, truncate and fallocate by a caller without CAP_FSETID: setuid goes; setgid
//!   goes if group-execute is set, or if the caller is not in the file's group;
//! - on chown (of anything but a directory): setuid goes; setgid goes if group-execute is
//!   set.
//!
//! The kernel flags a write by a caller without CAP_FSETID; for truncate and fallocate the
//! FUSE library does not pass the flag on, so the daemon reads the caller's capabilities
//! and groups from `/proc/PID/status` (only when the file has a bit to lose).

use std::fs;

/// Who made a request.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

const CAP_FSETID: u32 = 4;
const CAPABILITY: &[u8] = b"security.capability";

/// The xattr holding a file capability.
pub fn capability_name() -> &'static [u8] {
    CAPABILITY
}

fn status(pid: u32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

fn field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

impl Caller {
    /// Does the caller hold CAP_FSETID? A process that is gone by now is judged by its
    /// user (root has it).
    pub fn has_fsetid(&self) -> bool {
        match status(self.pid).as_deref().and_then(|s| field(s, "CapEff")) {
            Some(hex) => {
                u64::from_str_radix(hex, 16).is_ok_and(|caps| caps & (1 << CAP_FSETID) != 0)
            }
            None => self.uid == 0,
        }
    }

    /// A file's permission bits after this caller wrote, truncated or preallocated in it
    /// (`gid`: the file's group): `after_change`'s rule unless the caller holds
    /// CAP_FSETID. None: nothing changes.
    pub fn perm_after_change(&self, perm: u32, gid: u32) -> Option<u32> {
        if self.has_fsetid() {
            None
        } else {
            after_change(perm, || self.in_group(gid))
        }
    }

    /// Is the caller in group `gid` (as its file system group or a supplementary one)?
    pub fn in_group(&self, gid: u32) -> bool {
        if self.gid == gid {
            return true;
        }
        status(self.pid)
            .as_deref()
            .and_then(|s| field(s, "Groups"))
            .is_some_and(|groups| {
                groups
                    .split_whitespace()
                    .any(|g| g.parse::<u32>() == Ok(gid))
            })
    }
}

/// A file's permission bits after a write, truncate or fallocate by a caller without
/// CAP_FSETID (`in_group`: is the caller in the file's group). None: nothing changes.
pub fn after_change(perm: u32, in_group: impl FnOnce() -> bool) -> Option<u32> {
    let suid = perm & libc::S_ISUID != 0;
    let sgid = perm & libc::S_ISGID != 0;
    if !suid && !sgid {
        return None;
    }
    let mut out = perm & !libc::S_ISUID;
    if sgid && (perm & libc::S_IXGRP != 0 || !in_group()) {
        out &= !libc::S_ISGID;
    }
    (out != perm).then_some(out)
}

/// A file's permission bits after chown. None: nothing changes.
pub fn after_chown(perm: u32) -> Option<u32> {
    let mut out = perm & !libc::S_ISUID;
    if perm & libc::S_IXGRP != 0 {
        out &= !libc::S_ISGID;
    }
    (out != perm).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setuid_always_goes_setgid_by_group_execute_or_membership() {
        // The case: 6666 changed by a user outside the file's group.
        assert_eq!(after_change(0o6666, || false), Some(0o0666));
        // In the group, no group-execute: setgid stays (a mandatory-locking mark once).
        assert_eq!(after_change(0o6666, || true), Some(0o2666));
        assert_eq!(after_change(0o6676, || true), Some(0o0676));
        assert_eq!(after_change(0o4755, || true), Some(0o0755));
        assert_eq!(after_change(0o0755, || unreachable!()), None);
        assert_eq!(after_change(0o2644, || true), None);
    }

    #[test]
    fn chown_drops_setuid_and_executable_setgid() {
        assert_eq!(after_chown(0o6755), Some(0o0755));
        assert_eq!(after_chown(0o6745), Some(0o2745));
        assert_eq!(after_chown(0o0644), None);
    }

    #[test]
    fn status_fields_parse() {
        let s = "Name:\tx\nGroups:\t4 24 1001 \nCapEff:\t000001ffffffffff\n";
        assert_eq!(field(s, "Groups"), Some("4 24 1001"));
        assert_eq!(field(s, "CapEff"), Some("000001ffffffffff"));
        assert_eq!(field(s, "Nope"), None);
    }

    #[test]
    fn this_process_is_judged_from_proc() {
        // SAFETY: getpid/getuid/getgid have no failure modes.
        let me = unsafe {
            Caller {
                pid: libc::getpid() as u32,
                uid: libc::getuid(),
                gid: libc::getgid(),
            }
        };
        assert!(me.in_group(me.gid));
        // Whatever the answer, it comes from /proc (a container may drop the capability).
        let caps = status(me.pid).and_then(|s| field(&s, "CapEff").map(str::to_owned));
        assert!(caps.is_some());
    }
}
