//! MiNV's Figure 7: the NVRAM the space model predicts against what a real minv image
//! uses. For each file size, a fresh minv file system on the paper's chip (32 MB of it)
//! takes as many files of that size as fit (the last one that does not is removed), and
//! the NVRAM bytes in use are compared with equations 1-4 evaluated with our structure
//! sizes (`nandkit model nvram-space`, without --paper-constants) for the same files.

use anyhow::Context;
use clap::Args;
use nandkit_fs::{FsError, NewObject, ROOT_INO};
use serde::Serialize;

use super::{print_json, Fs};

pub const LONG_ABOUT: &str = "MiNV's Figure 7: for each file size (1 KiB to 32 MiB by \
    default, as in the paper), fill a fresh minv file system with as many files of that \
    size as fit, then compare the NVRAM bytes in use with the space model (equations 1-4 \
    with our structure sizes) for those files. File names are 8 bytes, as the model \
    assumes. Then a clean unmount: the state it saves (the namespace index the next mount \
    reads objects through) \
    against the model's.";

/// Bytes of each file's name (the model's inode size includes the name).
const NAME_BYTES: usize = 8;

#[derive(Args)]
pub struct SpaceArgs {
    #[command(flatten)]
    board: super::minv_synthetic::BoardArgs,
    /// File sizes, comma-separated [default: 1 KiB to 32 MiB, x4 each step].
    #[arg(long, value_delimiter = ',', value_name = "SIZES", value_parser = crate::device_args::parse_bytes)]
    sizes: Vec<u64>,
    /// Print a JSON array of rows instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    file_size: u64,
    files: u64,
    measured_bytes: u64,
    model_bytes: u64,
    /// The state a clean unmount saved, as the next mount holds it.
    saved_state_bytes: u64,
    /// The model's saved state for these files.
    model_saved_state_bytes: u64,
    /// measured / model.
    ratio: f64,
}

pub fn run(args: SpaceArgs) -> anyhow::Result<()> {
    let config = args.board.config()?;
    let sizes: Vec<u64> = if args.sizes.is_empty() {
        (0..9)
            .map(|k| 1024u64 << (2 * k))
            .take_while(|&s| s <= 32 << 20)
            .collect()
    } else {
        args.sizes.clone()
    };
    anyhow::ensure!(
        sizes.iter().all(|&s| s > 0),
        "file sizes must be at least 1 byte"
    );
    let g = config.geometry.striped();
    let nvram_bytes = args
        .board
        .format(&config, "minv")?
        .nvram()
        .context("the NVRAM")?
        .size_bytes;
    let constants = nandkit_fs::meta::minv::model_constants(g, nvram_bytes, NAME_BYTES)?;
    let flash = u64::from(config.geometry.blocks_per_chip) * constants.block_size;
    let mut rows = Vec::new();
    for size in sizes {
        let mut fs = args.board.format(&config, "minv")?;
        let files = fill(&mut fs, size).with_context(|| format!("files of {size} bytes"))?;
        fs.sync().context("sync")?;
        let r = fs.nvram().context("the NVRAM")?;
        let measured = r.bytes_in_use;
        let model = nandkit_models::nvram_space_uniform(&constants, flash, files, size)?;
        // A clean unmount, then the mount that holds what it saved.
        let parts = fs.unmount_parts().context("unmounting")?;
        let fs = super::mount_parts(parts, super::mount_options(false))?;
        let saved = fs.nvram().context("the NVRAM")?.saved_state_bytes;
        rows.push(Row {
            saved_state_bytes: saved,
            model_saved_state_bytes: constants.saved_state.bytes(files + 1),
            file_size: size,
            files,
            measured_bytes: measured,
            model_bytes: model.bytes,
            ratio: measured as f64 / model.bytes as f64,
        });
    }
    if args.json {
        return print_json(&rows);
    }
    println!(
        "{:>10} {:>7} {:>14} {:>14} {:>8} {:>10} {:>10}",
        "file_size", "files", "measured_B", "model_B", "ratio", "saved_B", "model_B"
    );
    for r in &rows {
        println!(
            "{:>10} {:>7} {:>14} {:>14} {:>8.4} {:>10} {:>10}",
            r.file_size,
            r.files,
            r.measured_bytes,
            r.model_bytes,
            r.ratio,
            r.saved_state_bytes,
            r.model_saved_state_bytes
        );
    }
    Ok(())
}

/// Files of `size` bytes until one does not fit (it is removed); returns how many stay.
fn fill(fs: &mut Fs, size: u64) -> anyhow::Result<u64> {
    let data = super::noise(size as usize, 3);
    let mut n = 0u64;
    loop {
        let name = format!("f{n:07}");
        debug_assert_eq!(name.len(), NAME_BYTES);
        let ino = match fs.create(ROOT_INO, name.as_bytes(), NewObject::regular_file()) {
            Ok(a) => a.ino,
            Err(FsError::NoSpace) => return Ok(n),
            Err(e) => return Err(e).context("creating a file"),
        };
        // A write that meets a full device writes what fits (a short count) or nothing.
        let r = fs.write(ino, 0, &data).and_then(|w| {
            fs.fsync(ino)?;
            Ok(w)
        });
        match r {
            Ok(w) if w == data.len() => n += 1,
            Ok(_) | Err(FsError::NoSpace) => {
                fs.unlink(ROOT_INO, name.as_bytes())
                    .context("removing the file that did not fit")?;
                fs.sync().context("sync")?;
                return Ok(n);
            }
            Err(e) => return Err(e).context("writing a file"),
        }
        if n >= 10_000_000 {
            anyhow::bail!("no end to the device");
        }
    }
}
