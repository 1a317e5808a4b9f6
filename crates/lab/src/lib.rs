//! nandkit-lab: nandkit's experiments as a library. The `nandkit` command parses its
//! arguments and calls these; a Rust program can call them too.
//!
//! - [`bench`]: the file system benchmarks (`nandkit bench ...`), with the trace format,
//!   its replay ([`bench::trace::replay`], over any [`bench::trace::target::Replayable`]
//!   file system) and the strace importer.
//! - [`compare`]: one workload on every design ([`compare::measure::measure`] measures one
//!   design in this process; [`compare::run`] runs the command, a worker process per
//!   design).
//! - [`reproduce`]: each paper's headline results, with verdicts and plots.
//! - [`flash_bench`]: the simulator's own speed.
//! - [`heap`]: the counting allocator behind every RAM figure. A program that wants those
//!   figures installs it: `#[global_allocator] static A: nandkit_lab::heap::CountingAlloc
//!   = nandkit_lab::heap::CountingAlloc;` (without it they read 0).
//!
//! Commands that start processes (`reproduce`'s runner, `compare::run`, the FUSE benches)
//! run the current executable's subcommands: they are for the `nandkit` binary.

pub mod bench;
pub mod compare;
pub mod device_args;
pub mod flash_bench;
pub mod heap;
pub mod reproduce;

/// The unit tests count the heap as the binary does.
#[cfg(test)]
#[global_allocator]
static ALLOC: heap::CountingAlloc = heap::CountingAlloc;
