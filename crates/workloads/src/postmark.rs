//! PostMark: Katcher's small-file benchmark (NetApp TR-3022, 1997), the mail server's
//! pool of short-lived files.
//!
//! The MODA paper (sec. 6.2, its ref. [23]): "creates a large number of randomly sized
//! files. It then executes read, write, delete, and append transactions on these files".
//! Table 1 leaves u = 0.08 and i = 0.0107 on the 64 MB device. The paper gives no
//! setting, so PostMark's defaults are used, as its 1.51 source sets them and its `show`
//! command prints them:
//! - 500 files in the initial pool and 500 transactions, on the 64 MB device. "Scaled to
//!   the device": 500 each per 64 MiB of capacity, so a smaller device gets a
//!   proportionally smaller pool.
//! - file sizes: uniform in [500, 10,000) bytes ("500 bytes and 9.77 kilobytes");
//!   absolute.
//! - write and read requests: 512 bytes ("Block sizes are: read=512 bytes, write=512
//!   bytes").
//! - transaction: read or append a random file, bias 5 of 10 ("read/append=5"), then
//!   create a file or delete a random one, bias 5 of 10 ("create/delete=5"). A read reads
//!   the whole file; an append adds a uniform 1 to (10,000 - size) bytes, nothing if the
//!   file is at 10,000; a new file gets a fresh name. Files are closed after being
//!   written, which here is an `fsync` (see `fs_target.rs`).
//! - no subdirectories (default 0).
//! - PostMark ends by deleting every file. Table 1's u = 0.08 after the run says the
//!   pool was still there, so that phase is left out.
//!
//! On nandkit this leaves u = 0.053 and i = 0.033 at 64 MiB: together 0.086, as Table 1's
//! 0.08 + 0.0107 = 0.091, split differently. The pages of the 250 files deleted (3,100
//! with their headers, 0.024 of the device) are invalid here. YAFFS, which the paper measured, deletes
//! a file's data "softly" (`yaffs_SoftDeleteFile` in yaffs_guts.c only counts the chunks
//! in their blocks' `softDeletions`; they stay in use until their block is cleaned), so
//! counted as in use they would move 0.024 from i to u: u = 0.077, i = 0.009. We keep
//! the defaults rather than bend the pool or the mix to the paper's split.

use rand::Rng as _;

use crate::common::{bytes, read_sequential, rng, Counted, Rng, Stepper};
use crate::{Target, TargetError};

const SIZE_LOW: u64 = 500;
const SIZE_HIGH: u64 = 10_000;
const REQUEST: usize = 512;
/// Chances in 10 of a read over an append, and of a create over a delete.
const BIAS_READ: u32 = 5;
const BIAS_CREATE: u32 = 5;
/// PostMark's default pool and transaction count ...
const DEFAULT_FILES: u64 = 500;
/// ... on the paper's 64 MB device.
const BYTES_PER_DEFAULT: u64 = 64 << 20;

pub struct PostMark {
    rng: Rng,
    dir: String,
    pool_target: u64,
    transactions_target: u64,
    /// Files in use: (number, bytes).
    files: Vec<(u64, u64)>,
    /// Files created so far (names are their numbers).
    created: u64,
    transactions: u64,
    started: bool,
}

impl PostMark {
    pub fn new(seed: u64, device_bytes: u64, dir: &str) -> Self {
        let scaled = (DEFAULT_FILES * device_bytes).div_ceil(BYTES_PER_DEFAULT);
        Self {
            rng: rng(seed),
            dir: dir.to_string(),
            pool_target: scaled,
            transactions_target: scaled,
            files: Vec::new(),
            created: 0,
            transactions: 0,
            started: false,
        }
    }

    fn path(&self, file: u64) -> String {
        format!("{}/{file}", self.dir)
    }

    /// Writes `len` bytes from `offset` in 512-byte requests.
    fn write_blocks(
        &self,
        t: &mut dyn Target,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<(), TargetError> {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(REQUEST as u64);
            t.write(path, offset + done, bytes(offset + done, n as usize))?;
            done += n;
        }
        t.fsync(path)
    }

    fn create(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        self.created += 1;
        let file = self.created;
        let size = self.rng.gen_range(SIZE_LOW..SIZE_HIGH);
        let path = self.path(file);
        t.create(&path)?;
        self.write_blocks(t, &path, 0, size)?;
        self.files.push((file, size));
        Ok(())
    }

    fn pick(&mut self) -> usize {
        self.rng.gen_range(0..self.files.len())
    }

    fn transaction(&mut self, t: &mut dyn Target) -> Result<(), TargetError> {
        if self.rng.gen_range(0..10) < BIAS_READ {
            let i = self.pick();
            let (file, size) = self.files[i];
            read_sequential(t, &self.path(file), size, REQUEST)?;
        } else {
            let i = self.pick();
            let (file, size) = self.files[i];
            if size < SIZE_HIGH {
                let more = self.rng.gen_range(1..=SIZE_HIGH - size);
                self.write_blocks(t, &self.path(file), size, more)?;
                self.files[i].1 += more;
            }
        }
        if self.rng.gen_range(0..10) < BIAS_CREATE {
            self.create(t)
        } else {
            let i = self.pick();
            let (file, _) = self.files.swap_remove(i);
            t.unlink(&self.path(file))
        }
    }
}

impl Stepper for PostMark {
    fn name(&self) -> &'static str {
        "postmark"
    }

    fn source(&self) -> &'static str {
        "MODA paper sec. 6.2 and Table 1 (u = 0.08, i = 0.0107); Katcher, PostMark, NetApp \
         TR-3022 (1997), v1.51 defaults (500 files, 500 transactions per 64 MiB)"
    }

    /// One file of the initial pool, or one transaction.
    fn step(&mut self, t: &mut Counted<'_>) -> Result<bool, TargetError> {
        if !self.started {
            self.started = true;
            t.mkdir(&self.dir)?;
        }
        if self.created < self.pool_target {
            self.create(t)?;
        } else if self.transactions < self.transactions_target && !self.files.is_empty() {
            // PostMark stops early ("out of files") if deletes empty the pool.
            self.transaction(t)?;
            self.transactions += 1;
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn steps_left(&self) -> u64 {
        self.pool_target.saturating_sub(self.created)
            + self.transactions_target.saturating_sub(self.transactions)
    }
}
