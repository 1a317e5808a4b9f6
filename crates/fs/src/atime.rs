//! Access times. A read updates the access time as the mount's [`AtimePolicy`] says
//! (relatime by default, as on Linux). Only RAM changes at the read: the time reaches flash
//! with the object's next header write (fsync, close, the mount's commit, unmount), so under
//! relatime a file read over and over costs at most one header page a day, plus one after
//! each change to it.

use nandkit_flash::Flash;

use crate::error::Result;
use crate::fs::{AtimePolicy, FileSystem};
use crate::object::Details;
use crate::types::{Ino, Time};

/// Relatime's "a day old" rule.
const DAY_SECS: i64 = 24 * 60 * 60;

impl<F: Flash> FileSystem<F> {
    /// `ino` was read without a call here: opened for reading by a kernel that will serve
    /// the reads from its page cache. Its access time moves as for a read.
    pub fn access(&mut self, ino: Ino) -> Result<()> {
        self.present(ino)?;
        self.check_alive()?;
        self.visible(ino)?;
        self.accessed(ino)
    }

    /// Whether a read of `ino` now would move its access time: a shared reader asks this
    /// and calls [`FileSystem::access`] (which needs the file system exclusively) only when
    /// it says so, which under relatime is rarely. `true` when it cannot tell without
    /// loading the object's details.
    pub fn atime_due(&self, ino: Ino) -> bool {
        if self.read_only || self.is_dead() || self.atime == AtimePolicy::Never {
            return false;
        }
        match self.obj(ino).ok().and_then(|o| o.details.as_deref()) {
            Some(d) => self.moves(d, Time::from_ns(self.now())),
            None => true,
        }
    }

    /// Whether the policy moves an access time of `d` to `now`.
    fn moves(&self, d: &Details, now: Time) -> bool {
        let due = match self.atime {
            AtimePolicy::Strict => true,
            AtimePolicy::Relatime => {
                d.atime <= d.mtime
                    || d.atime <= d.ctime
                    || now.sec.saturating_sub(d.atime.sec) >= DAY_SECS
            }
            AtimePolicy::Never => false,
        };
        due && d.atime != now
    }

    /// Whether listing a directory moves its access time, as the policy says (`true`, the
    /// default) or never (`false`: Linux's `nodiratime`).
    pub fn set_dir_atime(&mut self, on: bool) {
        self.dir_atime = on;
    }

    /// `ino` was read: moves its access time to now if the policy asks for it.
    pub(crate) fn accessed(&mut self, ino: Ino) -> Result<()> {
        if self.read_only || self.is_dead() || self.atime == AtimePolicy::Never {
            return Ok(());
        }
        self.load(ino)?;
        let now = Time::from_ns(self.now());
        let moves = self
            .obj(ino)?
            .details
            .as_deref()
            .is_some_and(|d| self.moves(d, now));
        // An access time is kept only where its header write will find room (a full
        // NVRAM): a read never fails for want of it.
        if moves && self.metadata_room(ino, None).is_ok() {
            let o = self.obj_mut(ino)?;
            o.d_mut().atime = now;
            o.set_dirty(true);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use nandkit_flash::{preset, FlashDevice};

    use crate::ROOT_INO;
    use crate::{AtimePolicy, CountingClock, FileSystem, FsConfig, MountOptions, NewObject};

    fn fs_with(policy: AtimePolicy) -> FileSystem<FlashDevice> {
        let mut c = preset("tiny").unwrap();
        c.ecc.rber_fresh = 0.0;
        c.ecc.rber_at_endurance = 0.0;
        let blocks = c.geometry.total_blocks() as u32;
        let clock = Arc::new(CountingClock::new(1_000_000_000));
        let fs = FileSystem::format(
            FlashDevice::ram(c).unwrap(),
            FsConfig::profile("yaffs", blocks).unwrap(),
            clock.clone(),
        )
        .unwrap();
        let dev = fs.unmount().unwrap();
        FileSystem::mount(
            dev,
            MountOptions {
                clock,
                atime: policy,
                ..MountOptions::default()
            },
        )
        .unwrap()
    }

    fn file(fs: &mut FileSystem<FlashDevice>) -> u32 {
        let ino = fs
            .create(ROOT_INO, b"f", NewObject::regular_file())
            .unwrap()
            .ino;
        fs.write(ino, 0, b"hello").unwrap();
        fs.fsync(ino).unwrap();
        ino
    }

    #[test]
    fn relatime_updates_once_after_each_change() {
        let mut fs = fs_with(AtimePolicy::Relatime);
        let ino = file(&mut fs);
        let t0 = fs.getattr(ino).unwrap().atime;
        let mut buf = [0u8; 5];
        fs.read(ino, 0, &mut buf).unwrap();
        let t1 = fs.getattr(ino).unwrap().atime;
        assert!(t1 > t0, "first read after a write updates atime");
        fs.fsync(ino).unwrap();
        let headers = fs.stats().header_pages_written;
        fs.read(ino, 0, &mut buf).unwrap();
        assert_eq!(
            fs.getattr(ino).unwrap().atime,
            t1,
            "atime newer than mtime stays"
        );
        fs.fsync(ino).unwrap();
        assert_eq!(fs.stats().header_pages_written, headers, "no header for it");
        fs.write(ino, 0, b"x").unwrap();
        fs.read(ino, 0, &mut buf).unwrap();
        assert!(
            fs.getattr(ino).unwrap().atime > t1,
            "a change makes the next read count"
        );
    }

    #[test]
    fn strict_and_never() {
        let mut fs = fs_with(AtimePolicy::Strict);
        let ino = file(&mut fs);
        let mut buf = [0u8; 5];
        fs.read(ino, 0, &mut buf).unwrap();
        let t1 = fs.getattr(ino).unwrap().atime;
        fs.read(ino, 0, &mut buf).unwrap();
        assert!(fs.getattr(ino).unwrap().atime > t1);

        let mut fs = fs_with(AtimePolicy::Never);
        let ino = file(&mut fs);
        let t0 = fs.getattr(ino).unwrap().atime;
        fs.read(ino, 0, &mut buf).unwrap();
        fs.readdir(ROOT_INO).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().atime, t0);
    }

    /// `nodiratime`: listing a directory leaves its access time; reading a file in it
    /// still moves the file's.
    #[test]
    fn nodiratime_keeps_directories_as_they_are() {
        for dir_atime in [true, false] {
            let mut fs = fs_with(AtimePolicy::Strict);
            fs.set_dir_atime(dir_atime);
            let ino = file(&mut fs);
            let d0 = fs.getattr(ROOT_INO).unwrap().atime;
            let f0 = fs.getattr(ino).unwrap().atime;
            fs.readdir(ROOT_INO).unwrap();
            let mut buf = [0u8; 5];
            fs.read(ino, 0, &mut buf).unwrap();
            let moved = fs.getattr(ROOT_INO).unwrap().atime > d0;
            assert_eq!(
                moved, dir_atime,
                "directory atime with diratime={dir_atime}"
            );
            assert!(fs.getattr(ino).unwrap().atime > f0, "the file's moves");
        }
    }
}
