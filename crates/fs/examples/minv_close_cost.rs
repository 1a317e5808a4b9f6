//! Host time of a close on a big `minv` file (issue 34.8): each close publishes the
//! file's changed page slots, and used to compare the whole chunk map to find them.
//!
//! Writes one chunk at a time into a file of `CHUNKS` chunks, `ROUNDS` times, first with
//! an open, a write and a close each time, then with the file kept open (a write each
//! time, one close at the end), and prints the host time of each per write.
//!
//! ```text
//! cargo run --release -p nandkit-fs --example minv_close_cost [CHUNKS [ROUNDS]]
//! ```

use std::sync::Arc;
use std::time::Instant;

use nandkit_flash::{preset, FlashDevice, StripedFlash};
use nandkit_fs::clock::CountingClock;
use nandkit_fs::{FileSystem, FsConfig, NewObject, ROOT_INO};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let chunks: u64 = args.next().map_or(Ok(12_850), |a| a.parse())?;
    let rounds: u64 = args.next().map_or(Ok(2_000), |a| a.parse())?;
    // The MiNV paper's chip: 64 MiB of 512-byte pages.
    let flash = preset("smallblock-64m")?;
    let blocks = flash.geometry.blocks_per_chip;
    let nv =
        nandkit_nvram::Nvram::new_ram(nandkit_nvram::preset("feram")?.with_size_bytes(4 << 20)?)?;
    let mut fs = FileSystem::format_with_nvram(
        StripedFlash::new(FlashDevice::ram(flash)?),
        nv,
        FsConfig::profile("minv", blocks)?,
        Arc::new(CountingClock::new(1_000_000_000)),
    )?;
    let chunk = u64::from(fs.chunk_bytes());
    let ino = fs.create(ROOT_INO, b"big", NewObject::regular_file())?.ino;
    let data = vec![0x5au8; chunk as usize];
    // The file, one chunk a write, then published.
    fs.open(ino)?;
    for c in 0..chunks {
        fs.write(ino, c * chunk, &data)?;
    }
    fs.release(ino)?;
    // Chunks spread over the file (a fixed stride, no randomness needed).
    let at = |i: u64| (i * 7919 % chunks) * chunk;
    let start = Instant::now();
    for i in 0..rounds {
        fs.open(ino)?;
        fs.write(ino, at(i), &data)?;
        fs.release(ino)?;
    }
    let closing = start.elapsed();
    let start = Instant::now();
    fs.open(ino)?;
    for i in 0..rounds {
        fs.write(ino, at(i), &data)?;
    }
    fs.release(ino)?;
    let open = start.elapsed();
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / rounds as f64;
    println!(
        "minv, file of {chunks} chunks of {chunk} B, {rounds} one-chunk writes (host time):\n  \
         open-write-close  {:9.1} us a write\n  kept open         {:9.1} us a write\n  \
         ratio             {:9.1} x",
        per(closing),
        per(open),
        closing.as_secs_f64() / open.as_secs_f64()
    );
    Ok(())
}
