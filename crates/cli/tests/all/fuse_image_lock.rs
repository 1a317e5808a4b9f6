//! The image of a live mount, reached by another name: commands refuse at once.

use crate::common::fuse::*;
use crate::common::nandkit;

/// fsck, info and mount of a hard link to a mounted image say where it is mounted and
/// fail at once (the lock is the file's: before, they took the holder for another nandkit
/// process, waited a minute and said only that).
#[test]
fn a_hard_link_to_a_mounted_image_is_refused_at_once() {
    if !fuse_ready("a_hard_link_to_a_mounted_image_is_refused_at_once") {
        return;
    }
    let rig = Rig::new(&["--geometry", "tiny"]);
    let m = rig.mount(&[]);
    let link = rig.dir.path().join("other-name.img");
    std::fs::hard_link(&rig.img, &link).unwrap();
    let mnt2 = rig.dir.path().join("mnt2");
    std::fs::create_dir(&mnt2).unwrap();
    for args in [
        vec!["fsck", s(&link)],
        vec!["info", s(&link)],
        vec!["mount", s(&link), s(&mnt2)],
    ] {
        let o = nandkit(&args);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            err.contains("is mounted on") && err.contains(s(&rig.mnt)),
            "{args:?}: {err}"
        );
    }
    m.unmount();
    rig.fsck_clean();
}
