//! `nandkit trace`: traces from elsewhere made into the format `bench trace` replays
//! (docs/trace-format.md).

use std::fs;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::bench::trace::{format, strace};

#[derive(Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Convert a log another tool wrote into a trace.
    #[command(subcommand)]
    Import(ImportCommand),
}

#[derive(Subcommand)]
enum ImportCommand {
    /// An strace log: each regular file the program opened becomes a file of the trace,
    /// each read, write, create and delete a request at the time strace stamped it.
    #[command(
        long_about = "Converts the output of\n\n  \
            strace -f -tt -e trace=openat,read,write,pwrite64,lseek,close,unlink,rename,\
            fsync,ftruncate -o LOG PROGRAM\n\n\
            into a trace (docs/trace-format.md). Each regular file the program opened \
            becomes a file of the trace in its root directory, named after the last part \
            of its path (made unique; characters the format cannot hold become '_'). A \
            read or write becomes a request of what the kernel returned, at the offset the \
            calls so far leave; unlink a delete (at the file's last close, if it was open); \
            O_EXCL, O_TRUNC, or O_CREAT of a path the trace removed, a create; ftruncate \
            to 0 a delete and a create; rename moves the name (and deletes the file it \
            replaces). A file first opened without those exists before the trace: the \
            replay's setup makes it.\n\n\
            What the format cannot say is skipped and counted on stderr, never guessed: \
            failed calls, descriptors that are not regular files opened in the log \
            (stdin, pipes, sockets, /proc, /sys, /dev), fsync (every write replays as \
            O_SYNC), truncates to a non-zero length. A line that is not strace's syntax \
            is an error naming the line. -tt or -ttt timestamps are required; open, \
            creat, pread64, readv, writev, unlinkat, renameat, renameat2, truncate and \
            fdatasync are understood too.",
        after_help = "Examples:\n  \
            strace -f -tt -e trace=openat,read,write,pwrite64,lseek,close,unlink,rename,fsync,ftruncate \
            -o sqlite.log sqlite3 test.db < inserts.sql\n  \
            nandkit trace import strace sqlite.log > sqlite.csv\n  \
            nandkit bench trace --trace-file sqlite.csv"
    )]
    Strace(StraceArgs),
}

#[derive(Args)]
struct StraceArgs {
    /// The strace log.
    log: PathBuf,
    /// Write the trace here instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run(args: TraceArgs) -> anyhow::Result<()> {
    match args.command {
        TraceCommand::Import(ImportCommand::Strace(a)) => import_strace(a),
    }
}

fn import_strace(a: StraceArgs) -> anyhow::Result<()> {
    let text = fs::read(&a.log).with_context(|| format!("reading {}", a.log.display()))?;
    let im = strace::import(&text).with_context(|| format!("{}", a.log.display()))?;
    let (reads, writes) = im
        .requests
        .iter()
        .fold((0u64, 0u64), |(r, w), q| match q.op {
            format::Op::Read => (r + q.size, w),
            format::Op::Write => (r, w + q.size),
            _ => (r, w),
        });
    let mut comments = vec![format!(
        "imported from the strace log {} ({} lines): {} requests on {} files, {} bytes \
         read, {} bytes written",
        a.log.display(),
        im.lines,
        im.requests.len(),
        im.files.len(),
        reads,
        writes
    )];
    comments.extend(
        im.files
            .iter()
            .map(|(name, path)| format!("file {name}: {path}")),
    );
    let mut buf = Vec::new();
    format::write(&mut buf, &comments, &im.requests)?;
    match &a.out {
        Some(p) => fs::write(p, &buf).with_context(|| format!("writing {}", p.display()))?,
        None => std::io::stdout().write_all(&buf)?,
    }
    eprintln!(
        "{} requests on {} files ({reads} bytes read, {writes} bytes written) from {} lines",
        im.requests.len(),
        im.files.len(),
        im.lines
    );
    let skipped = im.skipped.lines();
    if !skipped.is_empty() {
        eprintln!("skipped (not in the trace format):");
        for s in skipped {
            eprintln!("  {s}");
        }
    }
    Ok(())
}
