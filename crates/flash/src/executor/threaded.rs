//! The MA executor: a request dispatcher (the submitting thread) splits each batch by chip
//! and hands every chip's share to that chip's worker thread through its own queue. Workers
//! run concurrently, so with real-time latencies p chips finish p operations in the wall
//! time of one.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::{lock, Job};
use crate::chip::Chip;
use crate::command::Completion;

/// Stack each chip's worker thread reserves: its part of a mount's RAM per chip (MA's
/// Figure 9), set rather than left to the platform's default (2 MiB on Linux) so the
/// figure is known. A worker only runs chip operations, whose buffers are on the heap.
pub const WORKER_STACK_BYTES: usize = 128 << 10;

struct Work {
    jobs: Vec<Job>,
    done: Sender<Vec<(usize, Completion)>>,
}

pub struct ThreadedExecutor {
    pub(crate) chips: Vec<Arc<Mutex<Chip>>>,
    queues: Vec<Sender<Work>>,
    workers: Vec<JoinHandle<()>>,
}

impl ThreadedExecutor {
    pub fn new(chips: Vec<Chip>) -> Self {
        let chips: Vec<_> = chips.into_iter().map(|c| Arc::new(Mutex::new(c))).collect();
        let mut queues = Vec::new();
        let mut workers = Vec::new();
        for (i, chip) in chips.iter().enumerate() {
            let (tx, rx) = channel::<Work>();
            let chip = Arc::clone(chip);
            let handle = std::thread::Builder::new()
                .name(format!("nand-chip-{i}"))
                .stack_size(WORKER_STACK_BYTES)
                .spawn(move || worker(chip, rx))
                .expect("spawn chip worker thread");
            queues.push(tx);
            workers.push(handle);
        }
        Self {
            chips,
            queues,
            workers,
        }
    }

    pub(crate) fn run(&mut self, jobs: Vec<Job>) -> Vec<Completion> {
        let total = jobs.len();
        let mut per_chip: Vec<Vec<Job>> = (0..self.chips.len()).map(|_| Vec::new()).collect();
        for job in jobs {
            per_chip[job.cmd.chip() as usize].push(job);
        }
        let (done_tx, done_rx) = channel();
        let mut waiting = 0;
        for (chip, jobs) in per_chip.into_iter().enumerate() {
            if jobs.is_empty() {
                continue;
            }
            let work = Work {
                jobs,
                done: done_tx.clone(),
            };
            self.queues[chip].send(work).expect("chip worker alive");
            waiting += 1;
        }
        drop(done_tx);
        let mut slots: Vec<Option<Completion>> = (0..total).map(|_| None).collect();
        for _ in 0..waiting {
            for (index, completion) in done_rx.recv().expect("chip worker replies") {
                slots[index] = Some(completion);
            }
        }
        slots
            .into_iter()
            .map(|c| c.expect("every job completed"))
            .collect()
    }
}

fn worker(chip: Arc<Mutex<Chip>>, queue: Receiver<Work>) {
    while let Ok(work) = queue.recv() {
        let mut chip = lock(&chip);
        let out = work
            .jobs
            .into_iter()
            .map(|job| (job.index, chip.execute(job.cmd, job.issue_ns, job.verdict)))
            .collect();
        drop(chip);
        // The dispatcher may have gone (its thread panicked); nothing to report to then.
        let _ = work.done.send(out);
    }
}

impl ThreadedExecutor {
    fn stop(&mut self) {
        self.queues.clear();
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
    }

    /// Stops the workers and gives the chips back.
    pub(crate) fn into_chips(mut self) -> Vec<Chip> {
        self.stop();
        std::mem::take(&mut self.chips)
            .into_iter()
            .map(|c| match Arc::try_unwrap(c) {
                Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
                Err(_) => unreachable!("the workers are joined: nobody else holds a chip"),
            })
            .collect()
    }
}

impl Drop for ThreadedExecutor {
    fn drop(&mut self) {
        self.stop();
    }
}
