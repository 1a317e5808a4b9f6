//! A flash image on disk that survives restarts.
//!
//! Two files:
//! - `IMAGE`: every page's data followed by its OOB, page after page, block after block,
//!   chip after chip: the layout `nanddump --oob` writes for one MTD device, with the
//!   chips of an array one after another.
//! - `IMAGE.meta`: the sidecar. A 4096-byte header holding the device configuration as JSON
//!   (padded with spaces), then a 16-byte record per block, chip after chip: erase count,
//!   next programmable page, flags (all little-endian u32), one reserved u32.
//!
//! Both are memory-mapped, so every program, erase and wear update is in the OS page cache
//! the moment it happens: a killed process loses nothing the simulated chip had done.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};
use serde::{Deserialize, Serialize};

use super::{BlockMeta, Storage, FLAG_ERASE_TORN, FLAG_FACTORY_BAD, FLAG_GROWN_BAD};
use crate::config::DeviceConfig;
use crate::error::FlashError;

const HEADER_BYTES: usize = 4096;
const RECORD_BYTES: usize = 16;
const FORMAT: &str = "nandkit-flash-image";
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    config: DeviceConfig,
}

/// Path of the sidecar that belongs to an image.
pub fn sidecar_path(image: &Path) -> PathBuf {
    let mut name = image.as_os_str().to_owned();
    name.push(".meta");
    PathBuf::from(name)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> FlashError + '_ {
    move |source| FlashError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn bad_image(path: &Path, why: impl Into<String>) -> FlashError {
    FlashError::BadImage {
        path: path.display().to_string(),
        why: why.into(),
    }
}

/// Bytes of the page file for a device.
fn data_len(config: &DeviceConfig) -> u64 {
    let g = &config.geometry;
    g.raw_page_bytes() as u64 * g.pages_per_chip() * u64::from(g.chips)
}

fn meta_len(config: &DeviceConfig) -> u64 {
    HEADER_BYTES as u64 + RECORD_BYTES as u64 * config.geometry.total_blocks()
}

/// Creates a new, fully erased image (every byte 0xFF) and its sidecar. Refuses to replace
/// an existing image unless `overwrite` is set.
pub fn create(
    path: &Path,
    config: &DeviceConfig,
    overwrite: bool,
) -> Result<Vec<FileStorage>, FlashError> {
    config.validate()?;
    let meta_path = sidecar_path(path);
    let mut opts = OpenOptions::new();
    opts.read(true).write(true);
    if overwrite {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let mut data = opts.open(path).map_err(io_err(path))?;
    // Erased NAND reads as 0xFF, so the page file is filled, not left sparse (zeros).
    let chunk = vec![0xFFu8; 1 << 20];
    let mut left = data_len(config);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        data.write_all(&chunk[..n]).map_err(io_err(path))?;
        left -= n as u64;
    }
    data.sync_all().map_err(io_err(path))?;

    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        config: config.clone(),
    };
    let mut text = serde_json::to_vec_pretty(&header).expect("config serialises");
    if text.len() > HEADER_BYTES - 1 {
        return Err(bad_image(
            path,
            "device description too long for the header",
        ));
    }
    text.resize(HEADER_BYTES - 1, b' ');
    text.push(b'\n');
    let mut meta = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&meta_path)
        .map_err(io_err(&meta_path))?;
    meta.write_all(&text).map_err(io_err(&meta_path))?;
    meta.set_len(meta_len(config)).map_err(io_err(&meta_path))?;
    meta.sync_all().map_err(io_err(&meta_path))?;
    drop((data, meta));
    open(path).map(|(_, chips)| chips)
}

/// Reads an image's configuration without mapping it.
pub fn read_config(path: &Path) -> Result<DeviceConfig, FlashError> {
    let meta_path = sidecar_path(path);
    let mut header = vec![0u8; HEADER_BYTES];
    let mut file = File::open(&meta_path).map_err(io_err(&meta_path))?;
    use std::io::Read;
    file.read_exact(&mut header)
        .map_err(|_| bad_image(path, "sidecar shorter than its header"))?;
    let parsed: Header = serde_json::from_slice(header.trim_ascii_end())
        .map_err(|e| bad_image(path, format!("sidecar header is not valid: {e}")))?;
    if parsed.format != FORMAT || parsed.version != VERSION {
        return Err(bad_image(
            path,
            format!(
                "sidecar says {} v{}, expected {FORMAT} v{VERSION}",
                parsed.format, parsed.version
            ),
        ));
    }
    parsed.config.validate()?;
    Ok(parsed.config)
}

/// Opens an existing image, checking that its files match the geometry it records.
pub fn open(path: &Path) -> Result<(DeviceConfig, Vec<FileStorage>), FlashError> {
    let config = read_config(path)?;
    let meta_path = sidecar_path(path);
    let data = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    let meta = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&meta_path)
        .map_err(io_err(&meta_path))?;
    let data_size = data.metadata().map_err(io_err(path))?.len();
    if data_size != data_len(&config) {
        return Err(bad_image(
            path,
            format!(
                "page file is {data_size} bytes, the geometry needs {}",
                data_len(&config)
            ),
        ));
    }
    let meta_size = meta.metadata().map_err(io_err(&meta_path))?.len();
    if meta_size != meta_len(&config) {
        return Err(bad_image(
            path,
            format!(
                "sidecar is {meta_size} bytes, the geometry needs {}",
                meta_len(&config)
            ),
        ));
    }
    let g = config.geometry;
    let chip_data_bytes = g.raw_page_bytes() as u64 * g.pages_per_chip();
    let chip_meta_bytes = RECORD_BYTES as u64 * u64::from(g.blocks_per_chip);
    let mut chips = Vec::with_capacity(g.chips as usize);
    for chip in 0..u64::from(g.chips) {
        // SAFETY: the maps cover disjoint ranges of files this process opened for writing;
        // nandkit assumes nothing else writes an image while it is open.
        let data_map = unsafe {
            MmapOptions::new()
                .offset(chip * chip_data_bytes)
                .len(chip_data_bytes as usize)
                .map_mut(&data)
        }
        .map_err(io_err(path))?;
        let meta_map = unsafe {
            MmapOptions::new()
                .offset(HEADER_BYTES as u64 + chip * chip_meta_bytes)
                .len(chip_meta_bytes as usize)
                .map_mut(&meta)
        }
        .map_err(io_err(&meta_path))?;
        let storage = FileStorage {
            data: data_map,
            meta: meta_map,
            raw_page_bytes: g.raw_page_bytes(),
            pages_per_block: g.pages_per_block as usize,
        };
        storage.check_records(path, g.pages_per_block, chip as u32)?;
        chips.push(storage);
    }
    Ok((config, chips))
}

/// One chip's share of an image.
pub struct FileStorage {
    data: MmapMut,
    meta: MmapMut,
    raw_page_bytes: usize,
    pages_per_block: usize,
}

impl FileStorage {
    fn check_records(
        &self,
        path: &Path,
        pages_per_block: u32,
        chip: u32,
    ) -> Result<(), FlashError> {
        let known = FLAG_FACTORY_BAD | FLAG_GROWN_BAD | FLAG_ERASE_TORN;
        for block in 0..(self.meta.len() / RECORD_BYTES) as u32 {
            let m = self.meta(block);
            if m.write_ptr > pages_per_block || m.flags & !known != 0 {
                return Err(bad_image(
                    path,
                    format!("sidecar record of chip {chip} block {block} is corrupt"),
                ));
            }
        }
        Ok(())
    }

    fn page_range(&self, block: u32, page: u32) -> std::ops::Range<usize> {
        let start = (block as usize * self.pages_per_block + page as usize) * self.raw_page_bytes;
        start..start + self.raw_page_bytes
    }
}

fn le32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
}

impl Storage for FileStorage {
    fn page(&self, block: u32, page: u32) -> &[u8] {
        &self.data[self.page_range(block, page)]
    }

    fn page_mut(&mut self, block: u32, page: u32) -> &mut [u8] {
        let range = self.page_range(block, page);
        &mut self.data[range]
    }

    fn erase(&mut self, block: u32) {
        let start = self.page_range(block, 0).start;
        let len = self.raw_page_bytes * self.pages_per_block;
        self.data[start..start + len].fill(0xFF);
    }

    fn meta(&self, block: u32) -> BlockMeta {
        let r = &self.meta[block as usize * RECORD_BYTES..][..RECORD_BYTES];
        BlockMeta {
            erase_count: le32(&r[0..4]),
            write_ptr: le32(&r[4..8]),
            flags: le32(&r[8..12]),
        }
    }

    fn set_meta(&mut self, block: u32, meta: BlockMeta) {
        let r = &mut self.meta[block as usize * RECORD_BYTES..][..RECORD_BYTES];
        r[0..4].copy_from_slice(&meta.erase_count.to_le_bytes());
        r[4..8].copy_from_slice(&meta.write_ptr.to_le_bytes());
        r[8..12].copy_from_slice(&meta.flags.to_le_bytes());
        r[12..16].fill(0);
    }

    fn flush(&mut self) -> Result<(), FlashError> {
        let to_err = |source| FlashError::Io {
            path: "flash image".into(),
            source,
        };
        self.data.flush().map_err(to_err)?;
        self.meta.flush().map_err(to_err)
    }
}
