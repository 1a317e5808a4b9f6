//! What a workload run did, counted at the [`crate::Target`] boundary.

use serde::Serialize;

/// Target calls by kind. An `append` counts once, as an append (not also as the `size`
/// and `write` a target may make of it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    pub mkdir: u64,
    pub create: u64,
    pub write: u64,
    pub append: u64,
    pub read: u64,
    pub size: u64,
    pub truncate: u64,
    pub unlink: u64,
    pub fsync: u64,
    pub idle: u64,
}

impl OpCounts {
    /// All calls.
    pub fn total(&self) -> u64 {
        self.mkdir
            + self.create
            + self.write
            + self.append
            + self.read
            + self.size
            + self.truncate
            + self.unlink
            + self.fsync
            + self.idle
    }
}

/// The totals of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub ops: OpCounts,
    /// Bytes handed to `write` and `append` (including those of a call that failed).
    pub bytes_written: u64,
    /// Bytes `read` returned.
    pub bytes_read: u64,
    /// Regular files created (directories are `ops.mkdir`).
    pub files_created: u64,
    pub files_deleted: u64,
    /// Simulated idle time the workload asked for, in nanoseconds.
    pub idle_ns: u64,
    /// Index (from 0, over all calls of the run) of the call that found the device full,
    /// when a workload meant to fill it stopped there.
    pub enospc: Option<u64>,
}
