//! Runs every operation of a batch in the caller's thread. Chips still overlap in simulated
//! time, because each operation starts at max(issue time, its chip's busy_until).

use super::Job;
use crate::chip::Chip;
use crate::command::Completion;

pub struct SimulatedExecutor {
    pub(crate) chips: Vec<Chip>,
}

impl SimulatedExecutor {
    pub fn new(chips: Vec<Chip>) -> Self {
        Self { chips }
    }

    pub(crate) fn run(&mut self, jobs: Vec<Job>) -> Vec<Completion> {
        jobs.into_iter()
            .map(|job| {
                let chip = job.cmd.chip() as usize;
                self.chips[chip].execute(job.cmd, job.issue_ns, job.verdict)
            })
            .collect()
    }
}
