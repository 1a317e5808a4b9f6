//! POSIX ACLs (FUSE_POSIX_ACL): the kernel checks them, caches them, and reads and writes
//! them as the attributes `system.posix_acl_access` and `system.posix_acl_default`. What
//! a disk file system does in its own code the daemon does here:
//!
//! - setting an access ACL sets the mode bits from it (owner, mask or owning group,
//!   other), and drops setgid when the caller is neither in the file's group nor holds
//!   CAP_FSETID; an ACL that says no more than the mode bits (owner, owning group and
//!   other only) is not stored, as on Linux: it only sets the mode;
//! - chmod rewrites a stored access ACL's owner, mask (or owning group) and other entries;
//! - a new object takes its access ACL from its directory's default ACL, masked by the
//!   mode it is created with (`posix_acl_create` in Linux), and a new directory takes the
//!   default ACL too; where the directory has none, the umask applies (the kernel passes
//!   it on unapplied: FUSE_DONT_MASK).
//!
//! The stored form is the kernel's: a 4-byte version (2), then 8-byte entries
//! {u16 tag, u16 perm, u32 id}, little-endian, sorted by tag then id.

use nandkit_flash::Flash;
use nandkit_fs::{Attr, FileSystem, FsError, Ino, Kind, NewObject, SetAttr, XattrMode};

use super::privs::Caller;

pub const ACCESS: &[u8] = b"system.posix_acl_access";
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
/// The id of entries that name nobody (ACL_UNDEFINED_ID).
const NO_ID: u32 = u32::MAX;

/// Is `name` one of the two ACL attributes?
pub fn is_acl(name: &[u8]) -> bool {
    name == ACCESS || name == DEFAULT
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// One ACL, as valid as Linux's `posix_acl_valid` demands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl(Vec<Entry>);

impl Acl {
    /// Parses the attribute's bytes; None if they are not a valid ACL.
    pub fn parse(b: &[u8]) -> Option<Acl> {
        if b.len() < 4 || !(b.len() - 4).is_multiple_of(8) {
            return None;
        }
        if u32::from_le_bytes(b[0..4].try_into().ok()?) != VERSION {
            return None;
        }
        let entries: Vec<Entry> = b[4..]
            .chunks_exact(8)
            .map(|e| Entry {
                tag: u16::from_le_bytes([e[0], e[1]]),
                perm: u16::from_le_bytes([e[2], e[3]]),
                id: u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            })
            .collect();
        let acl = Acl(entries);
        acl.valid().then_some(acl)
    }

    /// One each of owner, owning group and other; a mask if any user or group is named
    /// (at most one); named entries unique; permissions within rwx.
    fn valid(&self) -> bool {
        let count = |tag| self.0.iter().filter(|e| e.tag == tag).count();
        let named = count(USER) + count(GROUP);
        let mut ids: Vec<(u16, u32)> = self
            .0
            .iter()
            .filter(|e| e.tag == USER || e.tag == GROUP)
            .map(|e| (e.tag, e.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        self.0.iter().all(|e| {
            e.perm & !7 == 0 && [USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER].contains(&e.tag)
        }) && count(USER_OBJ) == 1
            && count(GROUP_OBJ) == 1
            && count(OTHER) == 1
            && count(MASK) <= 1
            && (named == 0 || count(MASK) == 1)
            && ids.len() == named
    }

    /// The ACL that says what `perm`'s permission bits say.
    #[cfg(test)]
    fn from_mode(perm: u32) -> Acl {
        let e = |tag, shift: u32| Entry {
            tag,
            perm: ((perm >> shift) & 7) as u16,
            id: NO_ID,
        };
        Acl(vec![e(USER_OBJ, 6), e(GROUP_OBJ, 3), e(OTHER, 0)])
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut sorted = self.0.clone();
        sorted.sort_by_key(|e| (e.tag, e.id));
        let mut out = VERSION.to_le_bytes().to_vec();
        for e in sorted {
            let id = if e.tag == USER || e.tag == GROUP {
                e.id
            } else {
                NO_ID
            };
            out.extend_from_slice(&e.tag.to_le_bytes());
            out.extend_from_slice(&e.perm.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    fn perm_of(&self, tag: u16) -> Option<u32> {
        self.0
            .iter()
            .find(|e| e.tag == tag)
            .map(|e| u32::from(e.perm))
    }

    /// The permission bits (0o777) the ACL gives the mode: owner, the mask (or the
    /// owning group without one), other. And whether the mode says it all (no mask, no
    /// named entries): such an ACL is not stored.
    pub fn mode(&self) -> (u32, bool) {
        let group = self
            .perm_of(MASK)
            .or_else(|| self.perm_of(GROUP_OBJ))
            .unwrap_or(0);
        let mode = self.perm_of(USER_OBJ).unwrap_or(0) << 6
            | group << 3
            | self.perm_of(OTHER).unwrap_or(0);
        let equivalent = self
            .0
            .iter()
            .all(|e| [USER_OBJ, GROUP_OBJ, OTHER].contains(&e.tag));
        (mode, equivalent)
    }

    /// chmod: the owner, mask (or owning group without one) and other entries take the
    /// new mode's bits (`posix_acl_chmod`).
    pub fn chmod(&mut self, perm: u32) {
        let has_mask = self.0.iter().any(|e| e.tag == MASK);
        for e in &mut self.0 {
            let shift = match e.tag {
                USER_OBJ => 6,
                MASK => 3,
                GROUP_OBJ if !has_mask => 3,
                OTHER => 0,
                _ => continue,
            };
            e.perm = ((perm >> shift) & 7) as u16;
        }
    }

    /// A directory's default ACL made the access ACL of an object created there with
    /// permission bits `perm` (`posix_acl_create_masq`): the owner, mask (or owning group)
    /// and other entries are limited by `perm`, and `perm` by them. Returns whether the
    /// result says more than the mode (and so is stored).
    pub fn create_masq(&mut self, perm: &mut u32) -> bool {
        let mut mode = *perm & 0o777;
        let has_mask = self.0.iter().any(|e| e.tag == MASK);
        let mut more = false;
        for e in &mut self.0 {
            let shift = match e.tag {
                USER_OBJ => 6,
                OTHER => 0,
                MASK => 3,
                GROUP_OBJ if !has_mask => 3,
                USER | GROUP => {
                    more = true;
                    continue;
                }
                _ => continue,
            };
            let allowed = (mode >> shift) & 7;
            e.perm &= allowed as u16;
            mode &= !(7 << shift) | (u32::from(e.perm) << shift);
            if e.tag == MASK {
                more = true;
            }
        }
        *perm = (*perm & !0o777) | mode;
        more
    }
}

/// What a new object takes from its directory: ACLs to store once it exists.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Inherited {
    access: Option<Vec<u8>>,
    default: Option<Vec<u8>>,
}

/// `posix_acl_create`, given the directory's default ACL (if any): adjusts `perm` (the
/// mode asked for, the umask not yet applied) and says what the new object inherits.
/// Without a default ACL only the umask applies. Symbolic links take neither.
pub fn inherit_from(default: Option<&[u8]>, kind: Kind, perm: &mut u32, umask: u32) -> Inherited {
    if kind == Kind::Symlink {
        return Inherited::default();
    }
    let Some(acl) = default.and_then(Acl::parse) else {
        *perm &= !(umask & 0o777);
        return Inherited::default();
    };
    let mut access = acl.clone();
    let more = access.create_masq(perm);
    Inherited {
        access: more.then(|| access.encode()),
        default: (kind == Kind::Dir).then(|| acl.encode()),
    }
}

/// [`inherit_from`] the default ACL of directory `parent`.
pub fn inherit<F: Flash>(
    fs: &mut FileSystem<F>,
    parent: Ino,
    kind: Kind,
    perm: &mut u32,
    umask: u32,
) -> Result<Inherited, FsError> {
    let default = if fs.has_xattrs(parent) {
        match fs.getxattr(parent, DEFAULT) {
            Ok(v) => Some(v),
            Err(FsError::NoData) => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    Ok(inherit_from(default.as_deref(), kind, perm, umask))
}

/// chmod by the daemon itself: only the permission bits change.
pub fn set_perm<F: Flash>(fs: &mut FileSystem<F>, ino: Ino, perm: u32) -> Result<(), FsError> {
    fs.setattr(
        ino,
        SetAttr {
            perm: Some(perm),
            ..SetAttr::default()
        },
    )?;
    Ok(())
}

/// Creates `name` in `parent` with what [`inherit`] found. The object and its ACLs are
/// separate writes, so a power cut between them must not leave the object more open than
/// it was to be: with ACLs to store, it is created with no permissions for its group or
/// others, the ACLs are stored, and then its mode is set. A cut leaves no object, an
/// object only its owner may use, or the object with its ACLs.
pub fn create_inheriting<F: Flash>(
    fs: &mut FileSystem<F>,
    parent: Ino,
    name: &[u8],
    mut new: NewObject<'_>,
    inherited: Inherited,
) -> Result<Attr, FsError> {
    if inherited.access.is_none() && inherited.default.is_none() {
        return fs.create(parent, name, new);
    }
    let perm = new.perm;
    new.perm &= !0o077;
    let a = fs.create(parent, name, new)?;
    for (name, value) in [(ACCESS, inherited.access), (DEFAULT, inherited.default)] {
        if let Some(v) = value {
            fs.setxattr(a.ino, name, &v, XattrMode::Set)?;
        }
    }
    if perm != a.perm {
        set_perm(fs, a.ino, perm)?;
    }
    fs.getattr(a.ino)
}

/// setxattr of an ACL attribute (the kernel has checked the caller owns the object and
/// that the ACL is valid).
pub fn set<F: Flash>(
    fs: &mut FileSystem<F>,
    ino: Ino,
    name: &[u8],
    value: &[u8],
    mode: XattrMode,
    who: Caller,
) -> Result<(), FsError> {
    let acl = Acl::parse(value).ok_or(FsError::Invalid("not a valid POSIX ACL"))?;
    let a = fs.getattr(ino)?;
    if name == DEFAULT {
        // Only directories have one (the kernel refuses others before asking).
        if a.kind != Kind::Dir {
            return Err(FsError::NotPermitted);
        }
        return fs.setxattr(ino, name, &acl.encode(), mode);
    }
    let (bits, equivalent) = acl.mode();
    let mut perm = (a.perm & !0o777) | bits;
    if perm & libc::S_ISGID != 0 && !who.in_group(a.gid) && !who.has_fsetid() {
        perm &= !libc::S_ISGID;
    }
    if equivalent {
        remove(fs, ino, name)?;
    } else {
        fs.setxattr(ino, name, &acl.encode(), mode)?;
    }
    if perm != a.perm {
        set_perm(fs, ino, perm)?;
    }
    Ok(())
}

/// removexattr of an ACL attribute: removing one that is not there is no error (the
/// kernel asks for it whenever an ACL is set to what the mode says).
pub fn remove<F: Flash>(fs: &mut FileSystem<F>, ino: Ino, name: &[u8]) -> Result<(), FsError> {
    match fs.removexattr(ino, name) {
        Ok(()) | Err(FsError::NoData) => Ok(()),
        Err(e) => Err(e),
    }
}

/// After a mode change: a stored access ACL follows the new permission bits.
pub fn chmod<F: Flash>(fs: &mut FileSystem<F>, ino: Ino, perm: u32) -> Result<(), FsError> {
    if !fs.has_xattrs(ino) {
        return Ok(());
    }
    let stored = match fs.getxattr(ino, ACCESS) {
        Ok(v) => v,
        Err(FsError::NoData) => return Ok(()),
        Err(e) => return Err(e),
    };
    let Some(mut acl) = Acl::parse(&stored) else {
        return Ok(());
    };
    acl.chmod(perm);
    let value = acl.encode();
    if value != stored {
        fs.setxattr(ino, ACCESS, &value, XattrMode::Set)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: u16, perm: u16, id: u32) -> Entry {
        Entry { tag, perm, id }
    }

    /// user::rw-, user:1000:r--, group::r--, group:2000:rwx, mask::rwx, other::---
    fn sample() -> Acl {
        Acl(vec![
            e(USER_OBJ, 6, NO_ID),
            e(USER, 4, 1000),
            e(GROUP_OBJ, 4, NO_ID),
            e(GROUP, 7, 2000),
            e(MASK, 7, NO_ID),
            e(OTHER, 0, NO_ID),
        ])
    }

    #[test]
    fn round_trip_in_the_kernels_format() {
        let b = sample().encode();
        assert_eq!(&b[0..4], &[2, 0, 0, 0]);
        assert_eq!(b.len(), 4 + 6 * 8);
        // user:1000:r--
        assert_eq!(&b[12..20], &[2, 0, 4, 0, 0xe8, 3, 0, 0]);
        assert_eq!(Acl::parse(&b), Some(sample()));
    }

    #[test]
    fn invalid_acls_are_refused() {
        let bad = |entries: Vec<Entry>| Acl::parse(&Acl(entries).encode()).is_none();
        // A named user without a mask.
        assert!(bad(vec![
            e(USER_OBJ, 6, NO_ID),
            e(USER, 4, 1000),
            e(GROUP_OBJ, 4, NO_ID),
            e(OTHER, 0, NO_ID)
        ]));
        // No other entry; a permission past rwx; the same user twice.
        assert!(bad(vec![e(USER_OBJ, 6, NO_ID), e(GROUP_OBJ, 4, NO_ID)]));
        assert!(bad(vec![
            e(USER_OBJ, 8, NO_ID),
            e(GROUP_OBJ, 4, NO_ID),
            e(OTHER, 0, NO_ID)
        ]));
        let mut twice = sample().0;
        twice.push(e(USER, 7, 1000));
        assert!(bad(twice));
        assert!(Acl::parse(b"").is_none());
        assert!(Acl::parse(&[1, 0, 0, 0]).is_none());
        assert!(Acl::parse(&[2, 0, 0, 0, 1]).is_none());
    }

    #[test]
    fn mode_comes_from_owner_mask_and_other() {
        assert_eq!(sample().mode(), (0o670, false));
        assert_eq!(Acl::from_mode(0o754).mode(), (0o754, true));
    }

    #[test]
    fn chmod_moves_the_mask_not_the_owning_group() {
        let mut a = sample();
        a.chmod(0o640);
        assert_eq!(a.perm_of(USER_OBJ), Some(6));
        assert_eq!(a.perm_of(MASK), Some(4));
        assert_eq!(a.perm_of(GROUP_OBJ), Some(4));
        assert_eq!(a.perm_of(OTHER), Some(0));
        assert_eq!(a.mode(), (0o640, false));
        // Named entries keep what they have; the mask limits them.
        assert!(a.0.contains(&e(GROUP, 7, 2000)));
        let mut plain = Acl::from_mode(0o755);
        plain.chmod(0o600);
        assert_eq!(plain, Acl::from_mode(0o600));
    }

    #[test]
    fn a_new_file_is_masked_by_its_create_mode() {
        // A default ACL with a named user: the file's access ACL keeps it; the create mode
        // (0666 from touch) takes execute from owner, mask and other.
        let default = Acl(vec![
            e(USER_OBJ, 7, NO_ID),
            e(USER, 5, 1000),
            e(GROUP_OBJ, 5, NO_ID),
            e(MASK, 7, NO_ID),
            e(OTHER, 5, NO_ID),
        ])
        .encode();
        let mut perm = 0o666;
        let got = inherit_from(Some(&default), Kind::File, &mut perm, 0o077);
        // The umask is ignored where a default ACL applies.
        assert_eq!(perm, 0o664);
        let access = Acl::parse(got.access.as_ref().unwrap()).unwrap();
        assert_eq!(access.perm_of(USER_OBJ), Some(6));
        assert_eq!(access.perm_of(MASK), Some(6));
        assert_eq!(access.perm_of(GROUP_OBJ), Some(5));
        assert_eq!(access.perm_of(OTHER), Some(4));
        assert!(access.0.contains(&e(USER, 5, 1000)));
        assert_eq!(got.default, None);
        // A directory takes the default ACL as its own default too.
        let mut perm = 0o2777;
        let got = inherit_from(Some(&default), Kind::Dir, &mut perm, 0o022);
        assert_eq!(perm, 0o2775);
        assert_eq!(got.default.as_deref(), Some(&default[..]));
        assert!(got.access.is_some());
    }

    #[test]
    fn a_minimal_default_acl_makes_no_access_acl() {
        let default = Acl::from_mode(0o750).encode();
        let mut perm = 0o666;
        let got = inherit_from(Some(&default), Kind::File, &mut perm, 0o022);
        assert_eq!(perm, 0o640);
        assert_eq!(got, Inherited::default());
    }

    #[test]
    fn without_a_default_acl_the_umask_applies() {
        for (umask, want) in [(0o022, 0o644), (0o077, 0o600), (0, 0o666)] {
            let mut perm = 0o666;
            assert_eq!(
                inherit_from(None, Kind::File, &mut perm, umask),
                Inherited::default()
            );
            assert_eq!(perm, want, "umask {umask:o}");
        }
        let mut perm = 0o4777;
        inherit_from(None, Kind::Dir, &mut perm, 0o027);
        assert_eq!(perm, 0o4750);
        // Symbolic links are 0777 whatever the umask.
        let mut perm = 0o777;
        inherit_from(None, Kind::Symlink, &mut perm, 0o077);
        assert_eq!(perm, 0o777);
    }

    /// The ACL of a new file and the file itself are separate writes: a power cut at each
    /// flash operation of the create leaves no file, a file only its owner may use, or
    /// the file with its ACL (and, with the ACL, the mode it was to have, or the owner's
    /// bits alone).
    #[test]
    fn a_power_cut_never_leaves_a_new_file_more_open_than_its_acl() {
        use nandkit_flash::{preset, FlashDevice, PowerCut};
        use nandkit_fs::{AtimePolicy, CountingClock, FsConfig, MountOptions};
        use std::sync::Arc;

        let clock = Arc::new(CountingClock::new(1_000_000_000));
        let opts = || MountOptions {
            read_only: false,
            force_scan: false,
            clock: clock.clone(),
            atime: AtimePolicy::Relatime,
        };
        let new = |kind, perm| NewObject {
            kind,
            perm,
            uid: 0,
            gid: 0,
            rdev: 0,
            target: &[],
        };
        // A directory whose default ACL names a user and a group.
        let start = || {
            let mut c = preset("tiny").unwrap();
            c.ecc.rber_fresh = 0.0;
            c.ecc.rber_at_endurance = 0.0;
            let blocks = c.geometry.total_blocks() as u32;
            let flash = FlashDevice::ram(c).unwrap();
            let cfg = FsConfig::profile("yaffs", blocks).unwrap();
            let mut fs = FileSystem::format(flash, cfg, clock.clone()).unwrap();
            let d = fs.create(1, b"d", new(Kind::Dir, 0o755)).unwrap().ino;
            fs.setxattr(d, DEFAULT, &sample().encode(), XattrMode::Set)
                .unwrap();
            fs.sync().unwrap();
            (fs, d)
        };
        let create = |fs: &mut FileSystem<FlashDevice>, d: Ino| {
            let mut perm = 0o666;
            let inherited = inherit(fs, d, Kind::File, &mut perm, 0o022)?;
            let want_acl = inherited.access.clone();
            let a = create_inheriting(fs, d, b"f", new(Kind::File, perm), inherited)?;
            fs.sync()?;
            Ok::<_, FsError>((a, want_acl))
        };
        let (mut fs, d) = start();
        let base = fs.device().state_ops();
        let (a, want_acl) = create(&mut fs, d).unwrap();
        let want_acl = want_acl.expect("a named user makes an access ACL");
        assert_eq!(
            a.perm & 0o777,
            0o660,
            "group bits are the mask (rw- of 0o666)"
        );
        let total = fs.device().state_ops() - base;
        assert!(total >= 3, "create, ACL, mode: {total} ops");
        let mut seen = [false; 3];
        for n in 0..total {
            let (mut fs, d) = start();
            fs.device_mut().arm_power_cut(PowerCut::AtOp(n));
            assert!(create(&mut fs, d).is_err(), "cut at {n}");
            let mut flash = fs.into_device();
            flash.power_cycle().unwrap();
            let mut fs = FileSystem::mount(flash, opts()).unwrap();
            assert!(fs.fsck().is_clean(), "cut at {n}");
            let Ok(f) = fs.lookup(d, b"f") else {
                seen[0] = true;
                continue;
            };
            match fs.getxattr(f.ino, ACCESS) {
                Ok(acl) => {
                    assert_eq!(acl, want_acl, "cut at {n}");
                    assert!(
                        matches!(f.perm & 0o777, 0o660 | 0o600),
                        "cut at {n}: {:o}",
                        f.perm
                    );
                    seen[2] = true;
                }
                Err(FsError::NoData) => {
                    assert_eq!(
                        f.perm & 0o077,
                        0,
                        "cut at {n}: open without its ACL: {:o}",
                        f.perm
                    );
                    seen[1] = true;
                }
                Err(e) => panic!("cut at {n}: {e}"),
            }
        }
        assert_eq!(seen, [true; 3], "each outcome happens at some cut");
    }
}
