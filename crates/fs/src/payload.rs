//! New objects, and payloads bigger than a header page.
//!
//! Every object is born with one header page. What does not fit that page beside the
//! header's fixed fields (a symlink target of up to PATH_MAX, an object's extended
//! attributes of up to 64 KiB each) goes into the object's data chunks, written before its
//! first header. Such an object never rewrites its payload: its chunks are older than every
//! header of it and within the size the header records, so a scan keeps them, and a crash
//! before the first header leaves chunks of an object no header names, which a scan
//! ignores. A change to a payload makes a new object (see `xattr`).

use nandkit_flash::Flash;

use crate::error::{FsError, Result};
use crate::format::record::Name;
use crate::fs::FileSystem;
use crate::object::{Details, Object, NO_PAGE};
use crate::types::{Ino, Kind};

impl<F: Flash> FileSystem<F> {
    /// Writes a new object: `d` is its header, `updates` ride along in that header (names
    /// it takes from other objects), `size` is its size field (a symlink's target length,
    /// a hard link's file). A symlink target or attribute set that does not fit the header
    /// goes to data chunks first (an attribute set's size is then the bytes there).
    /// Returns the new object's number; nothing is left in RAM if it fails.
    pub(crate) fn create_object(
        &mut self,
        kind: Kind,
        d: Details,
        size: u64,
        updates: Vec<(Ino, Vec<Name>)>,
    ) -> Result<Ino> {
        self.make_room_for_new_object()?;
        self.check_room_for_new_pages(1)?;
        let ino = self.next_ino;
        if ino > self.layout.tags.max_obj() {
            return Err(FsError::NoObjectNumbers(self.object_numbers().1));
        }
        let mut o = Object::new(kind, self.config.mapping, self.layout.map_shape());
        o.size = size;
        o.details = Some(Box::new(d.clone()));
        self.objects.insert(ino, o);
        let payload = if self.fits(ino, &d, &updates) {
            None
        } else {
            match kind {
                Kind::Symlink => Some(d.target.clone()),
                Kind::Xattrs => Some(crate::format::record::encode_xattrs(&d.xattrs)),
                _ => None,
            }
        };
        if let Some(bytes) = &payload {
            self.obj_mut(ino)?.size = bytes.len() as u64;
            // Chunks of this number are about to reach flash: it is never given again,
            // whatever happens next.
            self.next_ino += 1;
            let covered = self.tracks_data_owners();
            let headers = if covered { 2 } else { 1 };
            if let Err(e) = self.check_room_for_new_pages(self.chunks_for(bytes.len()) + headers) {
                self.discard_new_object(ino);
                return Err(e);
            }
            if covered {
                // A name-less header first, where tombstones cover data: should the
                // payload be cut short, that header is the object's tombstone and covers
                // its chunks, which a scan would otherwise take for a file whose header
                // was lost (see `lost_found`).
                let mut first = d.clone();
                first.names.clear();
                first.target.clear();
                first.xattrs.clear();
                if let Err(e) = self.persist(ino, first, Vec::new()) {
                    self.discard_new_object(ino);
                    return Err(e);
                }
            }
            let written = self.write_payload(ino, bytes);
            if let Err(e) = written {
                self.discard_new_object(ino);
                return Err(e);
            }
            if !self.fits(ino, &d, &updates) {
                self.discard_new_object(ino);
                return Err(FsError::NameTooLong);
            }
        } else if !self.fits(ino, &d, &updates) {
            self.objects.remove(&ino);
            return Err(FsError::NameTooLong);
        }
        if let Err(e) = self.persist(ino, d, updates) {
            self.discard_new_object(ino);
            return Err(e);
        }
        if payload.is_none() {
            self.next_ino += 1;
        }
        Ok(ino)
    }

    fn chunks_for(&self, len: usize) -> u64 {
        (len as u64).div_ceil(u64::from(self.layout.chunk_bytes))
    }

    /// Forgets an object whose named header never reached flash (its chunks are invalid).
    /// A name-less first header (see `create_object`) stays as its tombstone.
    fn discard_new_object(&mut self, ino: Ino) {
        if self.objects.get(&ino).is_some_and(|o| o.header != NO_PAGE) {
            self.delete_object(ino);
            return;
        }
        if let Some(o) = self.objects.remove(&ino) {
            for (_, pno) in o.chunks.entries() {
                if pno != crate::object::LOST_PAGE {
                    self.blocks.invalidate(pno);
                }
            }
        }
    }

    /// Writes `bytes` as the data chunks of `ino` (whose size is already their length).
    fn write_payload(&mut self, ino: Ino, bytes: &[u8]) -> Result<()> {
        let c = self.layout.chunk_bytes as usize;
        for (i, piece) in bytes.chunks(c).enumerate() {
            self.write_payload_chunk(ino, i as u32, piece)?;
        }
        Ok(())
    }

    /// The payload of `ino` from its data chunks.
    pub(crate) fn read_payload(&mut self, ino: Ino) -> Result<Vec<u8>> {
        let size = usize::try_from(self.obj(ino)?.size)
            .map_err(|_| FsError::Io(format!("object {ino}: payload size out of range")))?;
        let c = self.layout.chunk_bytes as usize;
        let mut out = vec![0u8; size];
        for (i, piece) in out.chunks_mut(c).enumerate() {
            self.read_chunk_into(ino, i as u32, 0, piece)?;
        }
        Ok(out)
    }

    /// Makes sure a symlink's target or an attribute set's list is in its details, reading
    /// it from the data chunks if it lives there.
    pub(crate) fn load_payload(&mut self, ino: Ino) -> Result<()> {
        self.load(ino)?;
        let o = self.obj(ino)?;
        if o.chunks.end() == 0 {
            return Ok(());
        }
        match o.kind {
            Kind::Symlink if o.d().target.len() as u64 != o.size => {
                let target = self.read_payload(ino)?;
                self.obj_mut(ino)?.d_mut().target = target;
            }
            Kind::Xattrs if o.d().xattrs.is_empty() => {
                let bytes = self.read_payload(ino)?;
                let list = crate::format::record::decode_xattrs(&bytes).ok_or_else(|| {
                    FsError::Io(format!("object {ino}: extended attributes are damaged"))
                })?;
                self.obj_mut(ino)?.d_mut().xattrs = list;
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use nandkit_flash::{preset, FlashDevice};

    use crate::{CountingClock, FileSystem, FsConfig, FsError, NewObject, ROOT_INO};

    /// The small tag layout names about a million objects, and numbers are never reused:
    /// the last one goes out, the next create fails with its own error (ENOSPC), nothing
    /// else breaks, and a remount remembers.
    #[test]
    fn object_numbers_run_out_with_their_own_error() {
        let mut c = preset("smallblock-64m")
            .unwrap()
            .with_total_bytes(2 << 20)
            .unwrap();
        c.ecc.rber_fresh = 0.0;
        c.ecc.rber_at_endurance = 0.0;
        let blocks = c.geometry.total_blocks() as u32;
        let clock = Arc::new(CountingClock::new(1_000_000_000));
        let mut fs = FileSystem::format(
            FlashDevice::ram(c).unwrap(),
            FsConfig::profile("yaffs", blocks).unwrap(),
            clock.clone(),
        )
        .unwrap();
        let (given, max) = fs.object_numbers();
        assert_eq!((given, max), (0, 1_048_573));
        // As if all but two had been used (a million creates take too long for a test).
        fs.next_ino = fs.layout.tags.max_obj() - 1;
        let a = fs
            .create(ROOT_INO, b"a", NewObject::regular_file())
            .unwrap()
            .ino;
        fs.write(a, 0, b"kept").unwrap();
        let b = fs
            .create(ROOT_INO, b"b", NewObject::regular_file())
            .unwrap()
            .ino;
        assert_eq!(b, fs.layout.tags.max_obj());
        assert_eq!(fs.object_numbers(), (max, max));
        let e = fs
            .create(ROOT_INO, b"c", NewObject::regular_file())
            .unwrap_err();
        assert!(matches!(e, FsError::NoObjectNumbers(n) if n == max), "{e}");
        assert_eq!(e.errno(), 28);
        // Deleting frees room, not numbers.
        fs.unlink(ROOT_INO, b"b").unwrap();
        assert!(matches!(
            fs.create(ROOT_INO, b"c", NewObject::regular_file()),
            Err(FsError::NoObjectNumbers(_))
        ));
        let dev = fs.unmount().unwrap();
        let mut fs = FileSystem::mount(
            dev,
            crate::MountOptions {
                clock,
                ..crate::MountOptions::default()
            },
        )
        .unwrap();
        assert_eq!(fs.object_numbers(), (max, max));
        assert!(matches!(
            fs.create(ROOT_INO, b"d", NewObject::regular_file()),
            Err(FsError::NoObjectNumbers(_))
        ));
        let mut buf = [0u8; 4];
        assert_eq!(fs.read(a, 0, &mut buf).unwrap(), 4);
        assert_eq!(&buf, b"kept");
        assert!(fs.fsck().is_clean());
    }
}
