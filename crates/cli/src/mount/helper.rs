//! nandkit as mount(8)'s helper: `mount -t fuse.nandkit IMAGE DIR` and /etc/fstab lines.
//!
//! mount(8) runs `/sbin/mount.fuse.nandkit SPEC DIR [-sfnv] [-o OPTIONS]`. Linked under
//! that name, this program answers as `nandkit mount SPEC DIR -o OPTIONS --quiet`, with
//! mount(8)'s conventions:
//! - mount(8) leaves out the options that are its defaults (rw, suid, dev, exec) when it
//!   calls a helper. FUSE's defaults are nodev,nosuid, so as root the helper asks for suid
//!   and dev unless nosuid or nodev was given, as libfuse's own mount.fuse3 does: a device
//!   node or setuid program there then works as on any file system root mounts.
//! - It prints nothing on success (`-v`: the usual line); `-f` (fake) does nothing.
//! - fstab words that are mount(8)'s own (noauto, nofail, user, x-...) are not passed on.

use std::ffi::{OsStr, OsString};
use std::path::Path;

/// The name mount(8) looks for to mount a `fuse.nandkit` file system.
pub const HELPER_NAME: &str = "mount.fuse.nandkit";

/// Options that only mount(8) reads (from fstab), never the file system.
fn is_mount8_own(opt: &str) -> bool {
    matches!(
        opt,
        "defaults"
            | "auto"
            | "noauto"
            | "nofail"
            | "_netdev"
            | "user"
            | "nouser"
            | "users"
            | "owner"
            | "group"
    ) || opt.starts_with("x-")
        || opt.starts_with("comment=")
}

/// If this process was started as mount(8)'s helper, the `nandkit mount ...` command line
/// it stands for (`Err`: the helper's arguments were wrong); otherwise `None`.
pub fn translate(argv: &[OsString], root: bool) -> Option<Result<Vec<OsString>, String>> {
    let name = Path::new(argv.first()?).file_name()?;
    if name != OsStr::new(HELPER_NAME) {
        return None;
    }
    Some(command_line(&argv[1..], root))
}

fn command_line(args: &[OsString], root: bool) -> Result<Vec<OsString>, String> {
    let mut positional = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let (mut verbose, mut fake) = (false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(s) = a.to_str() else {
            positional.push(a.clone());
            continue;
        };
        match s {
            "-o" => {
                let list = it.next().ok_or("-o needs a list of options")?;
                let list = list.to_str().ok_or("mount options must be UTF-8")?;
                options.extend(
                    list.split(',')
                        .filter(|o| !o.is_empty() && !is_mount8_own(o))
                        .map(str::to_string),
                );
            }
            // -t fuse.nandkit: the type that led here.
            "-t" => {
                it.next();
            }
            "-N" => return Err("-N (another mount namespace) is not supported".into()),
            _ if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        'v' => verbose = true,
                        'f' => fake = true,
                        // -n (no mtab) and -s (sloppy): nothing to do.
                        'n' | 's' => {}
                        _ => return Err(format!("unknown helper flag -{c}")),
                    }
                }
            }
            _ => positional.push(a.clone()),
        }
    }
    let [spec, dir] = <[OsString; 2]>::try_from(positional)
        .map_err(|_| "usage: mount.fuse.nandkit IMAGE DIR [-o OPTIONS]".to_string())?;
    if root {
        for (on, off) in [("dev", "nodev"), ("suid", "nosuid")] {
            if !options.iter().any(|x| x == on || x == off) {
                options.push(on.into());
            }
        }
    }
    let mut out: Vec<OsString> = vec!["nandkit".into(), "mount".into(), spec, dir];
    if !options.is_empty() {
        out.push("-o".into());
        out.push(options.join(",").into());
    }
    if !verbose {
        out.push("--quiet".into());
    }
    if fake {
        out.push("--fake".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str], root: bool) -> Option<Result<Vec<String>, String>> {
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        translate(&argv, root).map(|r| {
            r.map(|v| {
                v.into_iter()
                    .map(|s| s.into_string().unwrap())
                    .collect::<Vec<_>>()
            })
        })
    }

    #[test]
    fn mount8_arguments_become_a_mount_command() {
        assert!(run(&["nandkit", "mount", "a", "b"], true).is_none());
        assert_eq!(
            run(
                &[
                    "/sbin/mount.fuse.nandkit",
                    "/i.img",
                    "/m",
                    "-o",
                    "rw,allow_other"
                ],
                true
            ),
            Some(Ok(vec![
                "nandkit".into(),
                "mount".into(),
                "/i.img".into(),
                "/m".into(),
                "-o".into(),
                "rw,allow_other,dev,suid".into(),
                "--quiet".into(),
            ]))
        );
        // Not root: FUSE's nodev,nosuid stand. fstab-only words are dropped.
        assert_eq!(
            run(
                &[
                    "mount.fuse.nandkit",
                    "-v",
                    "/i",
                    "/m",
                    "-o",
                    "nofail,x-systemd.automount,ro"
                ],
                false
            ),
            Some(Ok(vec![
                "nandkit".into(),
                "mount".into(),
                "/i".into(),
                "/m".into(),
                "-o".into(),
                "ro".into(),
            ]))
        );
        // An explicit nosuid is kept, and dev still added for root.
        let v = run(
            &["mount.fuse.nandkit", "/i", "/m", "-n", "-o", "nosuid"],
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(v[5], "nosuid,dev");
        assert!(run(&["mount.fuse.nandkit", "/i"], true).unwrap().is_err());
        assert!(run(&["mount.fuse.nandkit", "/i", "/m", "-o"], true)
            .unwrap()
            .is_err());
        let fake = run(&["mount.fuse.nandkit", "-f", "/i", "/m"], false)
            .unwrap()
            .unwrap();
        assert!(fake.contains(&"--fake".to_string()));
    }
}
