//! Camera: a digital camera taking, browsing and erasing pictures.
//!
//! The MODA paper (sec. 6.2): "executes a number of transactions repeatedly, where each
//! transaction consists of three steps; creating, reading and deleting some of these files
//! randomly", as camera users take, browse and erase pictures (its refs. [21], [26]).
//! Table 1 leaves u = 0.3, i = 0.002 on the 64 MB device; sequential photo files, erased
//! whole, leave few invalid pages once the cleaner has reclaimed the erased photos' blocks.
//!
//! Parameters (the paper gives none of them):
//! - photo size: uniform in [1/128, 3/128] of the capacity, 0.5-1.5 MiB at 64 MiB, the
//!   JPEG size of a 2-3 megapixel camera of the paper's time. Scales with the capacity, so
//!   a small test device holds as many photos as the paper's (about 20).
//! - transaction: take 1-4 photos (each written in 32 KiB requests and closed), view 1-3
//!   stored photos (read whole), erase 0-2 stored photos, all chosen uniformly; then the
//!   camera sits idle for 30 s (nominal). Photos grow by 1.5 per transaction on average.
//! - length: transactions go on until the photos kept fill 30% of the capacity: Table 1's
//!   u = 0.3, the one figure the paper gives for the volume (scales with the capacity).
//!
//! How much of the erased photos is still invalid at the end is up to the file system,
//! not the workload. nandkit's yaffs cleaner looks for a nearly empty block once per
//! block it opens (YAFFS: at every write request), and the photos erased by the last
//! transaction are followed by no write at all; so i ends anywhere from 0.04 to 0.15 at
//! 64 MiB, by seed. YAFFS, which the paper measured, counts a deleted file's pages as in
//! use until their block is cleaned (see `postmark.rs`), which keeps them out of its i.

use rand::Rng as _;

use crate::common::{bytes_of_fraction, read_sequential, rng, secs, write_sequential};
use crate::common::{Counted, Rng, Stepper};
use crate::{Target, TargetError};

/// Fraction of the capacity the kept photos fill at the end (Table 1's u).
const KEPT_FRACTION: f64 = 0.30;
/// Write and read request size.
const REQUEST: usize = 32 << 10;

pub struct Camera {
    rng: Rng,
    dir: String,
    /// Photo sizes are drawn from [min, max].
    photo_min: u64,
    photo_max: u64,
    kept_target: u64,
    /// Stored photos: (number, bytes).
    photos: Vec<(u32, u64)>,
    kept: u64,
    next_photo: u32,
    started: bool,
}

impl Camera {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        Self::filling(seed, device_bytes, KEPT_FRACTION, dir)
    }

    /// Run until its data fill `fraction` of the capacity, not Table 1's u.
    pub fn filling(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Self {
        Self {
            rng: rng(seed),
            dir: dir.to_string(),
            photo_min: device_bytes / 128,
            photo_max: device_bytes * 3 / 128,
            kept_target: bytes_of_fraction(device_bytes, fraction),
            photos: Vec::new(),
            kept: 0,
            next_photo: 1,
            started: false,
        }
    }

    fn path(&self, photo: u32) -> String {
        format!("{}/dsc{photo:05}.jpg", self.dir)
    }

    fn shoot(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        let size = self.rng.gen_range(self.photo_min..=self.photo_max);
        let photo = self.next_photo;
        self.next_photo += 1;
        let path = self.path(photo);
        t.create(&path)?;
        write_sequential(t, &path, size, REQUEST)?;
        t.fsync(&path)?;
        self.photos.push((photo, size));
        self.kept += size;
        Ok(())
    }

    fn view(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        let (photo, size) = self.photos[self.rng.gen_range(0..self.photos.len())];
        read_sequential(t, &self.path(photo), size, REQUEST)
    }

    fn erase(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        let (photo, size) = self
            .photos
            .swap_remove(self.rng.gen_range(0..self.photos.len()));
        t.unlink(&self.path(photo))?;
        self.kept -= size;
        Ok(())
    }
}

impl Stepper for Camera {
    fn name(&self) -> &'static str {
        "camera"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2 (take, browse, erase photos) and Table 1 (u = 0.3); photo sizes \
         and transaction mix our choice"
    }

    /// One transaction.
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        if !self.started {
            self.started = true;
            t.mkdir(&self.dir)?;
        }
        if self.kept >= self.kept_target {
            return Ok(false);
        }
        for _ in 0..self.rng.gen_range(1..=4) {
            self.shoot(t)?;
        }
        for _ in 0..self.rng.gen_range(1..=3) {
            self.view(t)?;
        }
        for _ in 0..self.rng.gen_range(0..=2) {
            if !self.photos.is_empty() {
                self.erase(t)?;
            }
        }
        t.idle(secs(30))?;
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        if self.kept >= self.kept_target {
            return 0;
        }
        let mean_growth = (self.photo_min + self.photo_max) / 2 * 3 / 2;
        (self.kept_target - self.kept) / mean_growth.max(1) + 1
    }
}
