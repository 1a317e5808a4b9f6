//! Movie player: a portable media player filled with movies, which are then played.
//!
//! The MODA paper (sec. 6.2): "simulates the workload of a Portable Media Players" (its
//! ref. [26]); with Camera, a workload that accesses "large files sequentially". Table 1
//! leaves u = 0.99, i = 0.0001: the device ends full, and almost nothing is overwritten.
//!
//! Parameters (the paper gives none but the fill):
//! - movie size: uniform in [1/16, 1/8] of the capacity, 4-8 MiB at 64 MiB (a few minutes
//!   of the small-screen video of the paper's players). Scales with the capacity, so a
//!   small test device holds as many movies (about 10).
//! - copy: movies are copied in, one after another, in 32 KiB write requests, each closed
//!   at its end, until they total 99% of the capacity (Table 1's u; scales). A file
//!   system that keeps part of the device for itself fills first: the copy stops at the
//!   first "device full", keeps what it had written of the last movie (closing it, which
//!   may fail the same way on a full device), and reports where in `Summary::enospc`.
//! - play: then every movie is read from start to end in 32 KiB requests, in the order
//!   copied, the device idle for the movie's playing time after each (its bytes at a
//!   nominal 1 Mbit/s).
//!
//! A step is one write or read request, so that in a combination the copying interleaves
//! with the other parts request by request, as a player copying a movie while it updates
//! its database would.

use rand::Rng as _;

use crate::common::{bytes, bytes_of_fraction, rng, Counted, Rng, Stepper};
use crate::{Target, TargetError};

/// Fraction of the capacity the movies fill (Table 1's u).
const FILL_FRACTION: f64 = 0.99;
const REQUEST: usize = 32 << 10;
/// Playing time per byte, at 1 Mbit/s.
const PLAY_NS_PER_BYTE: u64 = 8_000;

enum Phase {
    Start,
    /// Copying movie `movies.len() - 1`, `written` bytes of it so far.
    Copy {
        written: u64,
    },
    /// Playing movie `index` from `offset`.
    Play {
        index: usize,
        offset: u64,
    },
    Done,
}

pub struct Movie {
    rng: Rng,
    dir: String,
    movie_min: u64,
    movie_max: u64,
    fill_target: u64,
    /// Movies copied (the last one possibly in progress): (path, bytes).
    movies: Vec<(String, u64)>,
    copied: u64,
    phase: Phase,
}

impl Movie {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        Self::filling(seed, device_bytes, FILL_FRACTION, dir)
    }

    /// Run until its data fill `fraction` of the capacity, not Table 1's u.
    pub fn filling(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Self {
        Self {
            rng: rng(seed),
            dir: dir.to_string(),
            movie_min: device_bytes / 16,
            movie_max: device_bytes / 8,
            fill_target: bytes_of_fraction(device_bytes, fraction),
            movies: Vec::new(),
            copied: 0,
            phase: Phase::Start,
        }
    }

    /// Starts copying the next movie, or playing if all are in.
    fn next_copy(&mut self, t: &mut Counted<'_>) -> Result<(), TargetError> {
        if self.copied >= self.fill_target {
            self.phase = Phase::Play {
                index: 0,
                offset: 0,
            };
            return Ok(());
        }
        let size = self
            .rng
            .gen_range(self.movie_min..=self.movie_max)
            .min(self.fill_target - self.copied);
        let path = format!("{}/movie{:03}.mp4", self.dir, self.movies.len() + 1);
        match t.create(&path) {
            Err(TargetError::NoSpace) => return self.full(t, None),
            r => r?,
        }
        self.movies.push((path, size));
        self.phase = Phase::Copy { written: 0 };
        Ok(())
    }

    /// The device filled: keep what the last movie got, close it, and go play.
    fn full(&mut self, t: &mut Counted<'_>, copying: Option<usize>) -> Result<(), TargetError> {
        t.note_enospc();
        if let Some(i) = copying {
            let path = self.movies[i].0.clone();
            match t.fsync(&path) {
                Ok(()) | Err(TargetError::NoSpace) => {}
                Err(e) => return Err(e),
            }
            // Part of the failed request may have been written; and a file system whose
            // sync failed may keep less than it had taken (littlefs drops what it could
            // not commit): the movie is what the file holds after the sync.
            self.movies[i].1 = t.size(&path)?;
        }
        self.phase = Phase::Play {
            index: 0,
            offset: 0,
        };
        Ok(())
    }
}

impl Stepper for Movie {
    fn name(&self) -> &'static str {
        "movie"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2 (portable media player) and Table 1 (u = 0.99); movie sizes, \
         request size and playing rate our choice"
    }

    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        match self.phase {
            Phase::Start => {
                t.mkdir(&self.dir)?;
                self.next_copy(t)?;
            }
            Phase::Copy { written } => {
                let i = self.movies.len() - 1;
                let size = self.movies[i].1;
                let n = (size - written).min(REQUEST as u64);
                let data = bytes(written / REQUEST as u64, n as usize);
                match t.write(&self.movies[i].0, written, data) {
                    Err(TargetError::NoSpace) => return self.full(t, Some(i)).map(|()| true),
                    r => r?,
                }
                self.copied += n;
                if written + n < size {
                    self.phase = Phase::Copy {
                        written: written + n,
                    };
                } else {
                    match t.fsync(&self.movies[i].0) {
                        Err(TargetError::NoSpace) => return self.full(t, Some(i)).map(|()| true),
                        r => r?,
                    }
                    self.next_copy(t)?;
                }
            }
            Phase::Play { index, offset } => {
                let Some((path, size)) = self.movies.get(index) else {
                    self.phase = Phase::Done;
                    return Ok(false);
                };
                let size = *size;
                if offset < size {
                    let n = t.read(path, offset, REQUEST)?;
                    if n == 0 {
                        return Err(TargetError::Other(format!(
                            "{path}: ends at {offset} bytes, expected {size}"
                        )));
                    }
                    self.phase = Phase::Play {
                        index,
                        offset: offset + n as u64,
                    };
                } else {
                    t.idle(size * PLAY_NS_PER_BYTE)?;
                    self.phase = Phase::Play {
                        index: index + 1,
                        offset: 0,
                    };
                }
            }
            Phase::Done => return Ok(false),
        }
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        let request = REQUEST as u64;
        match self.phase {
            Phase::Done => 0,
            // Writes still to do, then a read per request of everything, and an idle
            // per movie.
            Phase::Start | Phase::Copy { .. } => {
                let all = self.fill_target / request;
                let movies = self.fill_target / self.movie_min.max(1);
                all - self.copied / request + all + movies
            }
            Phase::Play { index, offset } => {
                let left: u64 = self.movies.iter().skip(index).map(|m| m.1).sum();
                (left - offset) / request + (self.movies.len() - index) as u64
            }
        }
    }
}
