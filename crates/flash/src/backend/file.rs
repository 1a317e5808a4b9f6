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
//! An image with chip files (arrays with parity) keeps chip k's pages in a file of its own
//! (see [`chip_path`]), followed by the chip's label: [`LABEL_BYTES`] in which the array
//! records the chip's membership (a file of the pages alone, made before labels, has none).
//! A chip file of any other size is a failed chip, not a broken image.
//!
//! Both are memory-mapped, so every program, erase and wear update is in the OS page cache
//! the moment it happens: a killed process loses nothing the simulated chip had done.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};
use serde::{Deserialize, Serialize};

use super::{BlockMeta, Storage, FLAG_ERASE_TORN, FLAG_FACTORY_BAD, FLAG_GROWN_BAD, LABEL_BYTES};
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

/// Where chip `chip`'s pages live: the image file, or with chip files (arrays with parity)
/// chip 0 in the image file and chip k in `IMAGE.chip<k>`, so one chip can be removed or
/// replaced on its own.
pub fn chip_path(image: &Path, chip: u32) -> PathBuf {
    if chip == 0 {
        return image.to_path_buf();
    }
    let mut name = image.as_os_str().to_owned();
    name.push(format!(".chip{chip}"));
    PathBuf::from(name)
}

/// Every file an image is made of: its page file(s), then its sidecar.
pub fn image_files(image: &Path, config: &DeviceConfig) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = if config.chip_files {
        (0..config.geometry.chips)
            .map(|c| chip_path(image, c))
            .collect()
    } else {
        vec![image.to_path_buf()]
    };
    out.push(sidecar_path(image));
    out
}

/// Bytes of one chip's pages.
fn chip_data_len(config: &DeviceConfig) -> u64 {
    let g = &config.geometry;
    g.raw_page_bytes() as u64 * g.pages_per_chip()
}

/// Bytes of a chip file: its pages and its label.
fn chip_file_len(config: &DeviceConfig) -> u64 {
    chip_data_len(config) + LABEL_BYTES as u64
}

/// Writes `len` bytes of 0xFF (erased NAND reads as 0xFF, so a page file is filled, not left
/// sparse: zeros).
fn fill_erased(file: &mut File, path: &Path, len: u64) -> Result<(), FlashError> {
    let chunk = vec![0xFFu8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).map_err(io_err(path))?;
        left -= n as u64;
    }
    file.sync_all().map_err(io_err(path))
}

/// Reserves the disk blocks of a new file's first `len` bytes (posix_fallocate), so a full
/// host file system is an error now rather than a SIGBUS later, when the memory map first
/// writes a page the file system has no room for. A file system without fallocate (glibc
/// then writes the blocks itself, or says it cannot) is taken as it is.
pub(crate) fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let n = libc::off_t::try_from(len)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "file too large"))?;
    // SAFETY: posix_fallocate only reads its arguments; the descriptor is open.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, n) } {
        0 | libc::EOPNOTSUPP => Ok(()),
        e => {
            let e = std::io::Error::from_raw_os_error(e);
            Err(std::io::Error::new(
                e.kind(),
                format!("reserving the image's {len} bytes on the host file system: {e}"),
            ))
        }
    }
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
    let page_files: Vec<(PathBuf, u64)> = if config.chip_files {
        (0..config.geometry.chips)
            .map(|c| (chip_path(path, c), chip_file_len(config)))
            .collect()
    } else {
        vec![(path.to_path_buf(), data_len(config))]
    };
    for (file, len) in &page_files {
        let mut data = opts.open(file).map_err(io_err(file))?;
        // Room first: a host file system too full for the image fails here, at once.
        reserve(&data, *len).map_err(io_err(file))?;
        fill_erased(&mut data, file, *len)?;
    }

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
    // Never a sidecar left in place unasked: it holds the geometry of the chips beside it.
    let mut meta = opts.open(&meta_path).map_err(io_err(&meta_path))?;
    meta.write_all(&text).map_err(io_err(&meta_path))?;
    meta.set_len(meta_len(config)).map_err(io_err(&meta_path))?;
    reserve(&meta, meta_len(config)).map_err(io_err(&meta_path))?;
    meta.sync_all().map_err(io_err(&meta_path))?;
    drop(meta);
    let (_, chips, failed) = open(path)?;
    debug_assert!(failed.is_empty());
    Ok(chips)
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

fn open_rw(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Chips of an image that cannot be used, and why (the chip has failed).
pub type FailedChips = Vec<(u32, String)>;

/// Opens an existing image, checking that its files match the geometry it records. With
/// chip files, a chip whose file is gone or of the wrong size (a copy cut short) is listed
/// in the third value, with why (its storage is a placeholder the device never touches: the
/// chip has failed).
pub fn open(path: &Path) -> Result<(DeviceConfig, Vec<FileStorage>, FailedChips), FlashError> {
    let config = read_config(path)?;
    let meta_path = sidecar_path(path);
    let meta = open_rw(&meta_path).map_err(io_err(&meta_path))?;
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
    let chip_data_bytes = chip_data_len(&config);
    // The page file(s) and where each chip starts in its file.
    let mut files: Vec<Option<(PathBuf, File, u64)>> = Vec::with_capacity(g.chips as usize);
    let mut failed = Vec::new();
    if config.chip_files {
        for chip in 0..g.chips {
            let p = chip_path(path, chip);
            match open_rw(&p) {
                Ok(f) => {
                    let size = f.metadata().map_err(io_err(&p))?.len();
                    // Pages alone: a chip file made before labels.
                    if size == chip_file_len(&config) || size == chip_data_bytes {
                        files.push(Some((p, f, 0)));
                    } else {
                        failed.push((
                            chip,
                            format!(
                                "its image file {} is {size} bytes, the geometry needs {}",
                                p.display(),
                                chip_file_len(&config)
                            ),
                        ));
                        files.push(None);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    failed.push((chip, format!("its image file {} is missing", p.display())));
                    files.push(None);
                }
                Err(e) => return Err(io_err(&p)(e)),
            }
        }
    } else {
        let data = open_rw(path).map_err(io_err(path))?;
        check_size(path, path, &data, data_len(&config))?;
        for chip in 0..u64::from(g.chips) {
            let f = data.try_clone().map_err(io_err(path))?;
            files.push(Some((path.to_path_buf(), f, chip * chip_data_bytes)));
        }
    }
    let mut chips = Vec::with_capacity(g.chips as usize);
    for (chip, file) in files.into_iter().enumerate() {
        let storage = map_chip(&config, &meta, &meta_path, chip as u32, file)?;
        storage.check_records(path, g.pages_per_block, chip as u32)?;
        chips.push(storage);
    }
    Ok((config, chips, failed))
}

fn check_size(image: &Path, file: &Path, f: &File, want: u64) -> Result<(), FlashError> {
    let size = f.metadata().map_err(io_err(file))?.len();
    if size == want {
        return Ok(());
    }
    let which = if file == image {
        "page file".to_string()
    } else {
        format!("chip file {}", file.display())
    };
    Err(bad_image(
        image,
        format!("{which} is {size} bytes, the geometry needs {want}"),
    ))
}

/// Maps one chip: its pages from `file` at its offset (or, for a chip whose file is gone,
/// anonymous memory standing in for it) and its records from the sidecar.
fn map_chip(
    config: &DeviceConfig,
    meta: &File,
    meta_path: &Path,
    chip: u32,
    file: Option<(PathBuf, File, u64)>,
) -> Result<FileStorage, FlashError> {
    let g = config.geometry;
    let chip_data_bytes = chip_data_len(config);
    let chip_meta_bytes = RECORD_BYTES as u64 * u64::from(g.blocks_per_chip);
    let (data_map, own_file, label) = match file {
        // SAFETY: the maps cover disjoint ranges of files this process opened for writing;
        // nandkit assumes nothing else writes an image while it is open.
        Some((p, f, offset)) => {
            let map = unsafe {
                MmapOptions::new()
                    .offset(offset)
                    .len(chip_data_bytes as usize)
                    .map_mut(&f)
            }
            .map_err(io_err(&p))?;
            let label = if config.chip_files {
                Some(read_label(&f, chip_data_bytes))
            } else {
                None
            };
            (map, config.chip_files.then_some(f), label)
        }
        None => (
            MmapMut::map_anon(chip_data_bytes as usize).map_err(io_err(meta_path))?,
            None,
            None,
        ),
    };
    // SAFETY: as above; each chip's records are a disjoint range of the sidecar.
    let meta_map = unsafe {
        MmapOptions::new()
            .offset(HEADER_BYTES as u64 + u64::from(chip) * chip_meta_bytes)
            .len(chip_meta_bytes as usize)
            .map_mut(meta)
    }
    .map_err(io_err(meta_path))?;
    Ok(FileStorage {
        data: data_map,
        meta: meta_map,
        raw_page_bytes: g.raw_page_bytes(),
        pages_per_block: g.pages_per_block as usize,
        own_file,
        label,
        label_at: chip_data_bytes,
    })
}

/// A chip file's label (all 0xFF where the file has none: a new chip, or a file made
/// before labels).
fn read_label(f: &File, at: u64) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut label = vec![0xFF; LABEL_BYTES];
    if f.read_exact_at(&mut label, at).is_err() {
        label.fill(0xFF);
    }
    label
}

/// A new chip in place of chip `chip` of an image with chip files: an erased page file
/// (created, or overwritten) and fresh records (no erases, no bad blocks yet: the device
/// draws the new chip's factory bad blocks).
pub fn fresh_chip(path: &Path, chip: u32) -> Result<FileStorage, FlashError> {
    let config = read_config(path)?;
    if !config.chip_files {
        return Err(bad_image(
            path,
            "its chips share one page file: a single chip cannot be replaced",
        ));
    }
    if chip >= config.geometry.chips {
        return Err(FlashError::OutOfRange {
            what: format!("chip {chip} of {}", config.geometry.chips),
        });
    }
    let p = chip_path(path, chip);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .map_err(io_err(&p))?;
    fill_erased(&mut f, &p, chip_file_len(&config))?;
    let meta_path = sidecar_path(path);
    let meta = open_rw(&meta_path).map_err(io_err(&meta_path))?;
    let mut storage = map_chip(&config, &meta, &meta_path, chip, Some((p, f, 0)))?;
    storage.meta.fill(0);
    storage.meta.flush().map_err(io_err(&meta_path))?;
    Ok(storage)
}

/// One chip's share of an image.
pub struct FileStorage {
    data: MmapMut,
    meta: MmapMut,
    raw_page_bytes: usize,
    pages_per_block: usize,
    /// The chip's own page file (chip files only): a file removed under a running device
    /// means the chip is gone.
    own_file: Option<File>,
    /// The chip's label as in its file (chip files only), and where in the file it is.
    label: Option<Vec<u8>>,
    label_at: u64,
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

    fn label(&self) -> Vec<u8> {
        self.label.clone().unwrap_or_default()
    }

    fn set_label(&mut self, bytes: &[u8]) -> Result<(), FlashError> {
        use std::os::unix::fs::FileExt;
        let (Some(f), Some(label)) = (&self.own_file, &mut self.label) else {
            // Chips sharing one page file have nowhere to keep a label.
            return Ok(());
        };
        let mut new = bytes.to_vec();
        new.resize(LABEL_BYTES, 0xFF);
        let to_err = |source| FlashError::Io {
            path: "chip image file (its label)".into(),
            source,
        };
        // Pages first: a label must never be durable before the pages it vouches for.
        self.data.flush().map_err(to_err)?;
        f.write_all_at(&new, self.label_at).map_err(to_err)?;
        f.sync_data().map_err(to_err)?;
        *label = new;
        Ok(())
    }

    fn gone(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.own_file
            .as_ref()
            .is_some_and(|f| f.metadata().map_or(true, |m| m.nlink() == 0))
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
