//! The MA executor: a request dispatcher (the submitting thread) splits each batch by chip
//! and hands every chip's share to that chip's worker thread through its own queue. Workers
//! run concurrently, so with real-time latencies p chips finish p operations in the wall
//! time of one.
//!
//! Queues are a mutex and a condition variable each, not channels: a channel allocates a
//! thread's waiting context the first time that thread blocks, which happens or not
//! depending on timing, so the heap a mount holds (MA's Figure 9, measured) would vary from
//! run to run. Here every allocation is made by the dispatcher, or by a worker before it
//! reports its share done.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::Job;
use crate::chip::Chip;
use crate::command::Completion;

/// Stack each chip's worker thread reserves: its part of a mount's RAM per chip (MA's
/// Figure 9), set rather than left to the platform's default (2 MiB on Linux) so the
/// figure is known. A worker only runs chip operations, whose buffers are on the heap.
pub const WORKER_STACK_BYTES: usize = 128 << 10;

/// Locks a mutex whose holder may have panicked: the data is plain bookkeeping, go on.
fn hold<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A worker's queue: batches of its chip's jobs, or `None` to stop.
#[derive(Default)]
struct Queue {
    work: Mutex<VecDeque<Option<Vec<Job>>>>,
    ready: Condvar,
}

/// Where workers put one batch's completions, each in its job's slot, and say they have
/// started.
struct Done {
    slots: Mutex<(Vec<Option<Completion>>, usize)>,
    all_in: Condvar,
    started: Mutex<usize>,
    all_started: Condvar,
}

pub struct ThreadedExecutor {
    pub(crate) chips: Vec<Arc<Mutex<Chip>>>,
    queues: Vec<Arc<Queue>>,
    done: Arc<Done>,
    workers: Vec<JoinHandle<()>>,
}

impl ThreadedExecutor {
    pub fn new(chips: Vec<Chip>) -> Self {
        let chips: Vec<_> = chips.into_iter().map(|c| Arc::new(Mutex::new(c))).collect();
        let done = Arc::new(Done {
            slots: Mutex::new((Vec::new(), 0)),
            all_in: Condvar::new(),
            started: Mutex::new(0),
            all_started: Condvar::new(),
        });
        let mut queues = Vec::new();
        let mut workers = Vec::new();
        for (i, chip) in chips.iter().enumerate() {
            let queue = Arc::new(Queue::default());
            let (chip, q, d) = (Arc::clone(chip), Arc::clone(&queue), Arc::clone(&done));
            let handle = std::thread::Builder::new()
                .name(format!("nand-chip-{i}"))
                .stack_size(WORKER_STACK_BYTES)
                .spawn(move || worker(&chip, &q, &d))
                .expect("spawn chip worker thread");
            queues.push(queue);
            workers.push(handle);
        }
        // Whatever the threads' start-up allocates is done before anyone measures the heap.
        let mut started = hold(&done.started);
        while *started < chips.len() {
            started = done
                .all_started
                .wait(started)
                .unwrap_or_else(|p| p.into_inner());
        }
        drop(started);
        Self {
            chips,
            queues,
            done,
            workers,
        }
    }

    pub(crate) fn run(&mut self, jobs: Vec<Job>) -> Vec<Completion> {
        let total = jobs.len();
        let mut per_chip: Vec<Vec<Job>> = (0..self.chips.len()).map(|_| Vec::new()).collect();
        for job in jobs {
            per_chip[job.cmd.chip() as usize].push(job);
        }
        {
            let mut d = hold(&self.done.slots);
            d.0 = (0..total).map(|_| None).collect();
            d.1 = 0;
        }
        for (chip, jobs) in per_chip.into_iter().enumerate() {
            if jobs.is_empty() {
                continue;
            }
            let q = &self.queues[chip];
            hold(&q.work).push_back(Some(jobs));
            q.ready.notify_one();
        }
        let mut d = hold(&self.done.slots);
        while d.1 < total {
            d = self.done.all_in.wait(d).unwrap_or_else(|p| p.into_inner());
        }
        std::mem::take(&mut d.0)
            .into_iter()
            .map(|c| c.expect("every job completed"))
            .collect()
    }

    fn stop(&mut self) {
        for q in &self.queues {
            hold(&q.work).push_back(None);
            q.ready.notify_one();
        }
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

fn worker(chip: &Mutex<Chip>, queue: &Queue, done: &Done) {
    *hold(&done.started) += 1;
    done.all_started.notify_one();
    loop {
        let next = {
            let mut q = hold(&queue.work);
            loop {
                if let Some(next) = q.pop_front() {
                    break next;
                }
                q = queue.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        let Some(jobs) = next else {
            return;
        };
        let mut out = Vec::with_capacity(jobs.len());
        let mut chip = hold(chip);
        for job in jobs {
            out.push((job.index, chip.execute(job.cmd, job.issue_ns, job.verdict)));
        }
        drop(chip);
        let count = out.len();
        let mut d = hold(&done.slots);
        for (index, c) in out.drain(..) {
            d.0[index] = Some(c);
        }
        // The batch's vectors are freed before the share is reported, so the dispatcher
        // never sees a worker still freeing memory.
        drop(out);
        d.1 += count;
        drop(d);
        done.all_in.notify_one();
    }
}

impl Drop for ThreadedExecutor {
    fn drop(&mut self) {
        self.stop();
    }
}
