//! Andrew: the first two phases of the Andrew benchmark (Howard et al., ACM TOCS 1988):
//! MakeDir builds a directory tree, Copy copies a source tree's files into it.
//!
//! The MODA paper (sec. 6.2, its refs. [12], [21]) runs only these two of the five phases
//! (the others read, stat and compile, writing little). Table 1 leaves u = 0.09 and
//! i = 0.0008 on the 64 MB device.
//!
//! Parameters:
//! - files: 70, the size of Andrew's source tree ("a directory hierarchy containing 70
//!   files and 200 Kbytes of data": Nelson, Welch and Ousterhout, ACM TOCS 1988, Table
//!   5). Absolute.
//! - file sizes: the original 200 KB would be u = 0.003 on 64 MB, so the tree's bytes
//!   are scaled to 9% of the capacity (Table 1's u; scales), spread over the 70 files in
//!   proportion to weights drawn log-uniform in [1, 64] (source files range from small
//!   headers to large modules; the spread is our choice).
//! - directories: a tree of 10 (the top one and 3 subdirectories, each with 2 of its
//!   own; our choice, the source does not say); files go to directories in turn.
//! - the source tree is on another device: only the copies are written here. Files are
//!   copied in 4 KiB requests (what `cp` uses on a 4 KiB-page system) and closed.
//!
//! Few pages are superseded: each file's first header (written at create) and each
//! directory's header rewritten once its entries change, about 80 on any device: i is
//! 0.0006 at 64 MiB, as Table 1's 0.0008.
//!
//! A step is one mkdir or one file copied.

use rand::Rng as _;

use crate::common::{bytes_of_fraction, rng, write_sequential, Counted, Stepper};
use crate::{Target, TargetError};

const FILES: usize = 70;
/// Fraction of the capacity the copied tree fills (Table 1's u).
const TREE_FRACTION: f64 = 0.09;
const REQUEST: usize = 4 << 10;

pub struct Andrew {
    /// Directories in creation order (parents first).
    dirs: Vec<String>,
    /// Files still to copy, last first: (path, bytes).
    files: Vec<(String, u64)>,
    dirs_made: usize,
}

impl Andrew {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        Self::filling(seed, device_bytes, TREE_FRACTION, dir)
    }

    /// The same tree with its bytes scaled to `fraction` of the capacity instead of
    /// Table 1's 0.09: a pre-fill to a chosen utilization (the MODA paper's Figure 7).
    pub fn filling(seed: u64, device_bytes: u64, fraction: f64, dir: &str) -> Self {
        let mut rng = rng(seed);
        let mut dirs = vec![dir.to_string()];
        for a in 0..3 {
            let sub = format!("{dir}/d{a}");
            dirs.push(sub.clone());
            for b in 0..2 {
                dirs.push(format!("{sub}/d{a}{b}"));
            }
        }
        let weights: Vec<f64> = (0..FILES)
            .map(|_| 2f64.powf(rng.gen_range(0.0..6.0)))
            .collect();
        let total: f64 = weights.iter().sum();
        let tree = bytes_of_fraction(device_bytes, fraction) as f64;
        let mut files: Vec<(String, u64)> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let d = &dirs[i % dirs.len()];
                (format!("{d}/f{i:02}.c"), (tree * w / total) as u64)
            })
            .collect();
        files.reverse();
        Self {
            dirs,
            files,
            dirs_made: 0,
        }
    }
}

impl Stepper for Andrew {
    fn name(&self) -> &'static str {
        "andrew"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2 (Andrew phases 1-2) and Table 1 (u = 0.09, i = 0.0008); Howard \
         et al. 1988; Nelson et al. 1988 (70 files, 200 KB); tree bytes scaled to u, shape our choice"
    }

    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        if let Some(d) = self.dirs.get(self.dirs_made) {
            t.mkdir(d)?;
            self.dirs_made += 1;
            return Ok(true);
        }
        let Some((path, size)) = self.files.pop() else {
            return Ok(false);
        };
        t.create(&path)?;
        write_sequential(t, &path, size, REQUEST)?;
        t.fsync(&path)?;
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        (self.dirs.len() - self.dirs_made + self.files.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_has_parents_first() {
        let a = Andrew::new(1, 64 << 20, "/andrew");
        assert_eq!(a.dirs.len(), 10);
        for (i, d) in a.dirs.iter().enumerate().skip(1) {
            let parent = &d[..d.rfind('/').unwrap()];
            assert!(
                a.dirs[..i].iter().any(|p| p == parent),
                "{d} before {parent}"
            );
        }
        let bytes: u64 = a.files.iter().map(|f| f.1).sum();
        let want = (64u64 << 20) * 9 / 100;
        assert!(bytes <= want && bytes + 70 >= want, "{bytes} vs {want}");
    }
}
