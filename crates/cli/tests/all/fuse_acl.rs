//! POSIX ACLs through the kernel (FUSE_POSIX_ACL): `setfacl`, `getfacl` and `chacl` on the
//! mount, enforced for other users (run through `setpriv`):
//! - an access ACL lets a named user in, limited by the mask, and chmod moves the mask;
//! - an ACL the mode says all of is not stored, it only sets the mode; setting an ACL
//!   drops setgid as Linux does;
//! - a directory's default ACL is inherited by new files and directories, masked by the
//!   mode they are created with, and the umask does not apply there; elsewhere it does;
//! - ACLs survive a remount, and fsck finds the image clean.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Output};

use crate::common::fuse::*;

/// Can this test run (FUSE, root, the acl tools, setpriv)? Under CI=true it must.
fn ready(name: &str) -> bool {
    if !fuse_ready(name) {
        return false;
    }
    let tools = ["setfacl", "getfacl", "chacl", "setpriv", "getfattr"];
    let missing: Vec<&str> = tools.into_iter().filter(|t| !have(t)).collect();
    if unsafe_is_root() && missing.is_empty() {
        return true;
    }
    let why = format!(
        "needs root and {} (missing: {missing:?}; scripts/setup.sh installs them)",
        tools.join(", ")
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{name}: {why} under CI=true");
    }
    eprintln!("SKIPPED {name}: {why}");
    false
}

/// A mount other users may use, its root open to all.
fn open_mount(rig: &Rig) -> Mounted {
    std::fs::set_permissions(rig.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = rig.mount(&["-o", "allow_other"]);
    std::fs::set_permissions(&rig.mnt, std::fs::Permissions::from_mode(0o777)).unwrap();
    m
}

/// Runs `script` with `sh -c` as user `uid` (group `uid`, no other groups).
fn as_user(uid: u32, script: &str) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .current_dir("/")
        .output()
        .unwrap()
}

fn can(uid: u32, script: &str) -> bool {
    as_user(uid, script).status.success()
}

/// Runs a command as root in the mount; it must succeed. Returns its stdout.
fn run(rig: &Rig, script: &str) -> String {
    let o = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(&rig.mnt)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "`{script}` failed: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// `getfacl` of `rel`: entries only, numeric ids, no effective-rights comments.
fn acl(rig: &Rig, rel: &str) -> String {
    run(rig, &format!("getfacl -cnE {rel}"))
}

fn entries(list: &[&str]) -> String {
    list.iter().map(|e| format!("{e}\n")).collect::<String>() + "\n"
}

fn mode(rig: &Rig, rel: &str) -> u32 {
    std::fs::metadata(rig.path(rel)).unwrap().mode() & 0o7777
}

#[test]
fn access_acl_grants_a_named_user_within_the_mask() {
    if !ready("access_acl_grants_a_named_user_within_the_mask") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = open_mount(&rig);
    let f = s(&rig.path("f")).to_string();
    run(&rig, "echo secret > f; chmod 600 f");
    assert!(!can(1000, &format!("cat {f}")));
    run(&rig, "setfacl -m u:1000:r f");
    assert_eq!(
        acl(&rig, "f"),
        entries(&[
            "user::rw-",
            "user:1000:r--",
            "group::---",
            "mask::r--",
            "other::---"
        ])
    );
    // The mode's group bits show the mask.
    assert_eq!(mode(&rig, "f"), 0o640);
    assert!(can(1000, &format!("cat {f}")), "the named user reads");
    assert!(!can(1001, &format!("cat {f}")), "another user does not");
    assert!(!can(1000, &format!("echo x >> {f}")));

    // The mask limits the named user.
    run(&rig, "setfacl -m u:1000:rw,m::r f");
    assert!(!can(1000, &format!("echo x >> {f}")), "the mask says r");
    assert!(can(1000, &format!("cat {f}")));
    // chmod moves the mask (not the owning group's entry), as getfacl shows.
    run(&rig, "chmod 660 f");
    assert!(acl(&rig, "f").contains("mask::rw-\n"), "{}", acl(&rig, "f"));
    assert!(acl(&rig, "f").contains("group::---\n"));
    assert!(
        can(1000, &format!("echo x >> {f}")),
        "chmod 660 lets it write"
    );
    run(&rig, "chmod 600 f");
    assert!(acl(&rig, "f").contains("mask::---\n"), "{}", acl(&rig, "f"));
    assert!(!can(1000, &format!("cat {f}")), "chmod 600 shuts it out");
    assert!(acl(&rig, "f").contains("user:1000:rw-\n"));

    // An ACL the mode says all of is not stored: it only sets the mode.
    run(&rig, "setfacl --set u::rwx,g::r-x,o::-- f");
    assert_eq!(mode(&rig, "f"), 0o750);
    let attrs = run(&rig, "getfattr --absolute-names -m - -d f");
    assert!(!attrs.contains("posix_acl"), "{attrs}");
    assert!(!can(1000, &format!("cat {f}")));
    // Setting an ACL drops setgid when the owner is not in the file's group (and lacks
    // CAP_FSETID); root keeps it.
    run(&rig, "touch s r; chown 1000:2000 s r; chmod 2770 s r");
    let o = as_user(1000, &format!("setfacl -m u:1001:r {}", s(&rig.path("s"))));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(mode(&rig, "s"), 0o770);
    run(&rig, "setfacl -m u:1001:r r");
    assert_eq!(mode(&rig, "r"), 0o2770);
    // Other `system.` names stay unsupported.
    let o = Command::new("setfattr")
        .args(["-n", "system.other", "-v", "x", &f])
        .output()
        .unwrap();
    assert!(!o.status.success());
    m.unmount();
    rig.fsck_clean();
}

#[test]
fn default_acl_is_inherited_and_the_umask_applies_elsewhere() {
    if !ready("default_acl_is_inherited_and_the_umask_applies_elsewhere") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = open_mount(&rig);
    run(&rig, "mkdir -m 755 d && setfacl -d -m u:1000:rwx,o::r-x d");
    assert_eq!(
        run(&rig, "getfacl -cnE -d d"),
        entries(&[
            "user::rwx",
            "user:1000:rwx",
            "group::r-x",
            "mask::rwx",
            "other::r-x"
        ])
    );
    // The umask is ignored under a default ACL; the create mode masks the entries.
    run(
        &rig,
        "umask 077; touch d/f; mkdir d/sub; mkfifo -m 640 d/p; touch d/sub/g",
    );
    assert_eq!(
        acl(&rig, "d/f"),
        entries(&[
            "user::rw-",
            "user:1000:rwx",
            "group::r-x",
            "mask::rw-",
            "other::r--"
        ])
    );
    assert_eq!(mode(&rig, "d/f"), 0o664);
    assert_eq!(mode(&rig, "d/sub"), 0o775);
    assert_eq!(mode(&rig, "d/p"), 0o640);
    assert!(acl(&rig, "d/p").contains("mask::r--\n"));
    // A subdirectory takes the default ACL as its own, and passes it on.
    assert_eq!(
        run(&rig, "getfacl -cnE -d d/sub"),
        run(&rig, "getfacl -cnE -d d")
    );
    assert!(acl(&rig, "d/sub/g").contains("user:1000:rwx\n"));
    let g = s(&rig.path("d/sub/g")).to_string();
    assert!(can(1000, &format!("echo x >> {g}")), "the inherited entry");
    assert!(!can(1001, &format!("echo x >> {g}")));

    // Without a default ACL the umask applies.
    run(
        &rig,
        "umask 022; touch a; mkdir ad; umask 077; touch b; mkdir bd; mkfifo bp",
    );
    for (name, want) in [
        ("a", 0o644),
        ("ad", 0o755),
        ("b", 0o600),
        ("bd", 0o700),
        ("bp", 0o600),
    ] {
        assert_eq!(mode(&rig, name), want, "{name}: {:o}", mode(&rig, name));
    }
    let attrs = run(&rig, "getfattr --absolute-names -m - -d a ad b bd");
    assert!(!attrs.contains("posix_acl"), "{attrs}");
    m.unmount();
    rig.fsck_clean();
}

#[test]
fn acls_survive_a_remount_and_chacl_works() {
    if !ready("acls_survive_a_remount_and_chacl_works") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = open_mount(&rig);
    run(
        &rig,
        "echo x > f; chacl u::rw-,g::r--,o::---,u:1000:rw-,g:2000:r--,m::rw- f",
    );
    // chacl -l names users by name: the numbers come from getfacl -n.
    let chacl = run(&rig, "chacl -l f");
    assert!(chacl.contains(",m::rw-,o::---]"), "{chacl}");
    assert_eq!(
        acl(&rig, "f"),
        entries(&[
            "user::rw-",
            "user:1000:rw-",
            "group::r--",
            "group:2000:r--",
            "mask::rw-",
            "other::---"
        ])
    );
    run(
        &rig,
        "mkdir d; chacl -d u::rwx,g::r-x,o::---,u:1000:r-x,m::r-x d",
    );
    let (f_acl, d_acl) = (acl(&rig, "f"), run(&rig, "getfacl -cnE -d d"));
    assert!(d_acl.contains("user:1000:r-x\n"), "{d_acl}");
    m.unmount();
    rig.fsck_clean();

    let m = open_mount(&rig);
    assert_eq!(acl(&rig, "f"), f_acl);
    assert_eq!(run(&rig, "getfacl -cnE -d d"), d_acl);
    assert_eq!(mode(&rig, "f"), 0o660);
    let f = s(&rig.path("f")).to_string();
    assert!(can(1000, &format!("echo y >> {f}")));
    assert!(!can(1001, &format!("cat {f}")));
    // chacl -B takes every ACL away: the mode stays.
    run(&rig, "chacl -B f d");
    let attrs = run(&rig, "getfattr --absolute-names -m - -d f d");
    assert!(!attrs.contains("posix_acl"), "{attrs}");
    assert!(!can(1000, &format!("cat {f}")));
    m.unmount();
    rig.fsck_clean();
}
