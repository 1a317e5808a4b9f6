//! `-o` mount options: the usual mount(8) flags plus a few of nandkit's own.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use fuser::{MountOption, SessionACL};

use nandkit_fs::AtimePolicy;

use super::fuse::FuseOptions;
use crate::image::FUSE_TYPE;

/// Default seconds between commits of written-but-unsynced data, as ext4's `commit=`.
const DEFAULT_COMMIT_SECS: u64 = 5;

/// Default request threads. Reads share the file system's lock and run together; every
/// other call runs alone under it. Two threads: while one thread replies, the other is
/// already waiting in /dev/fuse for the next request, so the kernel hands it over without
/// waking a sleeping daemon. Measured on this 2-core machine (2026-11-25, fio 4 KiB, 4
/// jobs, 32 MiB each): random reads 92-98k IOPS with one thread, 105-115k with two, 110k
/// with four; random writes with fsync every 32 119k / 126-129k / 124-126k; one process's
/// small calls without the write-back cache (`bench fuse --options nowriteback`): 4-byte
/// appends 19-22k calls/s with one thread, 59-60k with two, 4 KiB pwrites 18k / 41k. (An
/// earlier machine measured the opposite, 34-40k / 26-29k random writes: the gain comes
/// from the kernel's wake-up path, which differs between machines.)
const DEFAULT_THREADS: usize = 2;

/// Default seconds without a request before the idle cleaner starts (`-o idle_clean=`).
/// Long enough that a program pausing between writes is not interrupted by cleaning,
/// short enough that a device left alone has erased blocks ready well before the next
/// burst.
const DEFAULT_IDLE_CLEAN_SECS: u64 = 2;

/// Largest `-o dirty_limit=`: beyond this the kernel's own allowance is the limit.
const MAX_DIRTY_LIMIT: u64 = 1 << 40;

#[derive(Debug)]
pub struct MountConfig {
    pub read_only: bool,
    pub acl: SessionACL,
    /// Kernel flags passed through (dev, suid, noatime, ...).
    pub flags: Vec<MountOption>,
    pub threads: usize,
    /// Bytes the kernel may hold dirty for the mount (`-o dirty_limit=`; by default an
    /// eighth of the file system: see `space_guard`).
    pub dirty_limit: Option<u64>,
    /// Idle time before background cleaning (`-o idle_clean=`; `None`: never).
    pub idle_clean: Option<Duration>,
    pub fuse: FuseOptions,
}

fn seconds(key: &str, value: &str) -> anyhow::Result<Duration> {
    let s: f64 = value
        .parse()
        .with_context(|| format!("-o {key}={value}: not a number of seconds"))?;
    if !(0.0..=3600.0).contains(&s) {
        bail!("-o {key}={value}: must be between 0 and 3600 seconds");
    }
    Ok(Duration::from_secs_f64(s))
}

impl MountConfig {
    /// Parses every `-o` argument (each a comma-separated list).
    pub fn parse(args: &[String]) -> anyhow::Result<MountConfig> {
        let mut c = MountConfig {
            read_only: false,
            acl: SessionACL::Owner,
            flags: Vec::new(),
            threads: DEFAULT_THREADS,
            dirty_limit: None,
            idle_clean: Some(Duration::from_secs(DEFAULT_IDLE_CLEAN_SECS)),
            fuse: FuseOptions {
                read_only: false,
                writeback: true,
                attr_ttl: Duration::ZERO,
                entry_ttl: Duration::from_secs(1),
                commit: Duration::from_secs(DEFAULT_COMMIT_SECS),
                atime: AtimePolicy::Relatime,
                dir_atime: true,
            },
        };
        let mut attr_ttl = None;
        for opt in args
            .iter()
            .flat_map(|a| a.split(','))
            .filter(|o| !o.is_empty())
        {
            let (key, value) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (opt, None),
            };
            match (key, value) {
                ("ro", None) => c.read_only = true,
                ("rw", None) => c.read_only = false,
                ("allow_other", None) => c.acl = SessionACL::All,
                ("allow_root", None) => c.acl = SessionACL::RootAndOwner,
                // Always on: the kernel checks modes and owners for every caller.
                ("default_permissions", None) => {}
                ("writeback", None) => c.fuse.writeback = true,
                ("nowriteback", None) => c.fuse.writeback = false,
                ("threads", Some(v)) => {
                    c.threads = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=64).contains(n))
                        .with_context(|| format!("-o threads={v}: must be 1..=64"))?;
                }
                ("dirty_limit", Some(v)) => {
                    let bytes = crate::device_args::parse_bytes(v)
                        .map_err(|e| anyhow::anyhow!("-o dirty_limit={v}: {e}"))?;
                    if !(4096..=MAX_DIRTY_LIMIT).contains(&bytes) {
                        bail!("-o dirty_limit={v}: must be between 4KiB and 1TiB");
                    }
                    c.dirty_limit = Some(bytes);
                }
                ("attr_timeout", Some(v)) => attr_ttl = Some(seconds(key, v)?),
                ("idle_clean", Some(v)) => {
                    let after = seconds(key, v)?;
                    c.idle_clean = (!after.is_zero()).then_some(after);
                }
                ("commit", Some(v)) => {
                    let secs: u64 = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=3600).contains(n))
                        .with_context(|| format!("-o commit={v}: must be 1..=3600 seconds"))?;
                    c.fuse.commit = Duration::from_secs(secs);
                }
                // Access times are the daemon's to keep (FUSE leaves them to it).
                ("relatime" | "atime", None) => c.fuse.atime = AtimePolicy::Relatime,
                ("strictatime", None) => c.fuse.atime = AtimePolicy::Strict,
                ("noatime", None) => c.fuse.atime = AtimePolicy::Never,
                ("nodiratime", None) => c.fuse.dir_atime = false,
                ("diratime", None) => c.fuse.dir_atime = true,
                ("entry_timeout", Some(v)) => c.fuse.entry_ttl = seconds(key, v)?,
                (flag, None) => c.flags.push(match flag {
                    "dev" => MountOption::Dev,
                    "nodev" => MountOption::NoDev,
                    "suid" => MountOption::Suid,
                    "nosuid" => MountOption::NoSuid,
                    "exec" => MountOption::Exec,
                    "noexec" => MountOption::NoExec,
                    "sync" => MountOption::Sync,
                    "async" => MountOption::Async,
                    "dirsync" => MountOption::DirSync,
                    _ => bail!("unknown mount option -o {flag} (see nandkit mount --help)"),
                }),
                (key, Some(_)) => {
                    bail!("unknown mount option -o {key}=... (see nandkit mount --help)")
                }
            }
        }
        c.fuse.read_only = c.read_only;
        // Nothing to write back on a read-only mount.
        c.fuse.writeback &= !c.read_only;
        // With write-back caching the kernel owns file sizes and times while it writes;
        // a short attribute TTL saves a GETATTR per write(2) and cannot hide a change,
        // since every change passes through this kernel mount.
        c.fuse.attr_ttl = attr_ttl.unwrap_or(if c.fuse.writeback {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        });
        Ok(c)
    }

    /// The fuser session configuration for mounting `image`.
    pub fn fuser_config(&self, image: &Path) -> fuser::Config {
        let mut options = vec![
            // /proc/mounts names the image as the source, and `df -T` says fuse.nandkit.
            MountOption::FSName(image.display().to_string()),
            // Passed in the kernel's mount data, which works both for a direct mount (root)
            // and through fusermount3.
            MountOption::CUSTOM(format!("subtype={}", FUSE_TYPE.trim_start_matches("fuse."))),
            MountOption::DefaultPermissions,
            if self.read_only {
                MountOption::RO
            } else {
                MountOption::RW
            },
        ];
        options.extend(self.flags.iter().cloned());
        let mut config = fuser::Config::default();
        config.mount_options = options;
        config.acl = self.acl;
        config.n_threads = Some(self.threads);
        config.clone_fd = self.threads > 1;
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<MountConfig> {
        MountConfig::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn options_parse() {
        let c = parse(&["ro,allow_other", "noatime,nodev"]).unwrap();
        assert!(c.read_only && c.fuse.read_only);
        assert_eq!(c.acl, SessionACL::All);
        assert_eq!(c.flags, vec![MountOption::NoDev]);
        assert_eq!(c.fuse.atime, AtimePolicy::Never);
        assert_eq!(c.fuse.attr_ttl, Duration::ZERO);
        assert_eq!(c.fuse.commit, Duration::from_secs(5));
        let d = parse(&["commit=30,strictatime"]).unwrap();
        assert_eq!(d.fuse.commit, Duration::from_secs(30));
        assert_eq!(d.fuse.atime, AtimePolicy::Strict);
        assert_eq!(parse(&[]).unwrap().fuse.atime, AtimePolicy::Relatime);
        assert!(parse(&[]).unwrap().fuse.dir_atime);
        assert!(!parse(&["relatime,nodiratime"]).unwrap().fuse.dir_atime);
        assert!(parse(&["commit=0"]).is_err());
        assert!(
            parse(&[]).unwrap().fuse.writeback,
            "the (guarded) write-back cache is the default"
        );
        let n = parse(&["nowriteback"]).unwrap();
        assert!(!n.fuse.writeback);
        assert_eq!(n.fuse.attr_ttl, Duration::ZERO);
        assert_eq!(parse(&[]).unwrap().fuse.attr_ttl, Duration::from_secs(1));
        assert_eq!(parse(&[]).unwrap().threads, 2);
        let w = parse(&["writeback,threads=3"]).unwrap();
        assert!(w.fuse.writeback);
        assert_eq!(w.threads, 3);
        assert_eq!(w.fuse.attr_ttl, Duration::from_secs(1));
        assert!(parse(&["bogus"]).is_err());
        assert!(parse(&["threads=0"]).is_err());
        assert_eq!(parse(&[]).unwrap().dirty_limit, None);
        assert_eq!(
            parse(&["dirty_limit=16MiB"]).unwrap().dirty_limit,
            Some(16 << 20)
        );
        assert!(parse(&["dirty_limit=0"]).is_err());
        assert!(parse(&["dirty_limit=lots"]).is_err());
        assert!(!parse(&["ro"]).unwrap().fuse.writeback);
        assert!(parse(&["attr_timeout=-1"]).is_err());
        assert_eq!(parse(&[]).unwrap().idle_clean, Some(Duration::from_secs(2)));
        assert_eq!(
            parse(&["idle_clean=0.5"]).unwrap().idle_clean,
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse(&["idle_clean=0"]).unwrap().idle_clean, None);
        assert!(parse(&["idle_clean=soon"]).is_err());
    }
}
