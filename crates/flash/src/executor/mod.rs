//! Who runs a batch of operations on the chips. Both executors give identical results and
//! simulated times: every operation's power verdict is fixed before dispatch, and each chip
//! runs its share of a batch in submission order.

pub mod simulated;
pub mod threaded;

use std::sync::{Arc, Mutex};

use crate::chip::Chip;
use crate::command::{Command, Completion};
use crate::power::Verdict;

/// Which executor a device uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExecutorKind {
    /// One thread runs every chip's operations in turn. Deterministic and cheapest.
    #[default]
    Simulated,
    /// The MA design: a dispatcher and one worker thread with its own queue per chip, so
    /// real-time backends overlap chip latencies in wall time.
    Threaded,
}

/// One operation of a batch, ready to run.
pub(crate) struct Job {
    pub index: usize,
    pub cmd: Command,
    pub verdict: Verdict,
    /// When the dispatcher hands it to its chip (the batch's issue time plus the host's
    /// hand-offs before it).
    pub issue_ns: u64,
}

pub(crate) enum Executor {
    Simulated(simulated::SimulatedExecutor),
    Threaded(threaded::ThreadedExecutor),
}

impl Executor {
    pub fn new(kind: ExecutorKind, chips: Vec<Chip>) -> Self {
        match kind {
            ExecutorKind::Simulated => {
                Executor::Simulated(simulated::SimulatedExecutor::new(chips))
            }
            ExecutorKind::Threaded => Executor::Threaded(threaded::ThreadedExecutor::new(chips)),
        }
    }

    /// Stops the executor (joining its workers, if any) and gives its chips back.
    pub fn into_chips(self) -> Vec<Chip> {
        match self {
            Executor::Simulated(e) => e.chips,
            Executor::Threaded(e) => e.into_chips(),
        }
    }

    pub fn kind(&self) -> ExecutorKind {
        match self {
            Executor::Simulated(_) => ExecutorKind::Simulated,
            Executor::Threaded(_) => ExecutorKind::Threaded,
        }
    }

    pub fn chip_count(&self) -> usize {
        match self {
            Executor::Simulated(e) => e.chips.len(),
            Executor::Threaded(e) => e.chips.len(),
        }
    }

    /// Runs `f` on one chip directly, in the caller's thread (single operations, queries).
    pub fn with_chip<R>(&mut self, chip: usize, f: impl FnOnce(&mut Chip) -> R) -> R {
        match self {
            Executor::Simulated(e) => f(&mut e.chips[chip]),
            Executor::Threaded(e) => f(&mut lock(&e.chips[chip])),
        }
    }

    /// Runs a batch, each operation issued at its own `issue_ns`; completions come back in
    /// batch order.
    pub fn run(&mut self, jobs: Vec<Job>) -> Vec<Completion> {
        match self {
            Executor::Simulated(e) => e.run(jobs),
            Executor::Threaded(e) => e.run(jobs),
        }
    }
}

/// A poisoned chip lock means a worker panicked mid-operation; the chip's state is still
/// the simulator's own memory, so carry on with it rather than cascade the panic.
pub(crate) fn lock(chip: &Arc<Mutex<Chip>>) -> std::sync::MutexGuard<'_, Chip> {
    chip.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
