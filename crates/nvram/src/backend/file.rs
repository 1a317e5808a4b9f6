//! An NVRAM image on disk that survives restarts.
//!
//! One file: a 4096-byte header, then exactly `size_bytes` of NVRAM contents. The header is
//! a page so the contents start page-aligned in the map. Header fields, little-endian:
//!
//! | bytes     | field                                                     |
//! |-----------|-----------------------------------------------------------|
//! | 0..8      | magic `NKNVRAM\0`                                         |
//! | 8..12     | format version, u32 (1)                                   |
//! | 12..16    | header length, u32 (4096)                                 |
//! | 16..24    | `size_bytes`, u64                                         |
//! | 24..48    | timing: read ns/word, write ns/word, persist ns, u64 each |
//! | 48..64    | energy: read pJ/byte, write pJ/byte, u64 each             |
//! | 64..96    | preset name, UTF-8, NUL-padded                            |
//! | 96..100   | CRC-32C of bytes 0..96, u32                               |
//! | 100..4096 | zero                                                      |
//!
//! The contents are memory-mapped, so every store is in the OS page cache the moment it
//! happens: a killed process loses nothing, as if power had stayed up until the caches
//! drained. Only [`crate::Nvram::crash`] simulates a power failure. To survive a host crash
//! too, [`crate::Nvram::persist_all`] msyncs the map.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use memmap2::{MmapMut, MmapOptions};

use super::Storage;
use crate::config::{NvramConfig, NAME_MAX_BYTES};
use crate::cost::{NvramEnergy, NvramTiming};
use crate::error::NvramError;

/// Bytes before the NVRAM contents.
pub const HEADER_BYTES: u64 = 4096;
const MAGIC: [u8; 8] = *b"NKNVRAM\0";
const VERSION: u32 = 1;
/// Header bytes covered by the CRC; the CRC follows them.
const FIELDS_BYTES: usize = 96;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> NvramError + '_ {
    move |source| NvramError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn bad_header(path: &Path, why: impl Into<String>) -> NvramError {
    NvramError::BadHeader {
        path: path.display().to_string(),
        why: why.into(),
    }
}

fn encode_header(config: &NvramConfig) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_BYTES as usize);
    h.extend_from_slice(&MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    h.extend_from_slice(&(HEADER_BYTES as u32).to_le_bytes());
    let (t, e) = (&config.timing, &config.energy);
    for field in [
        config.size_bytes,
        t.read_ns_per_word,
        t.write_ns_per_word,
        t.persist_ns,
        e.read_pj_per_byte,
        e.write_pj_per_byte,
    ] {
        h.extend_from_slice(&field.to_le_bytes());
    }
    let mut name = [0u8; NAME_MAX_BYTES];
    name[..config.name.len()].copy_from_slice(config.name.as_bytes());
    h.extend_from_slice(&name);
    debug_assert_eq!(h.len(), FIELDS_BYTES);
    h.extend_from_slice(&crc32c::crc32c(&h).to_le_bytes());
    h.resize(HEADER_BYTES as usize, 0);
    h
}

fn decode_header(path: &Path, h: &[u8]) -> Result<NvramConfig, NvramError> {
    let u32_at = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    if crc32c::crc32c(&h[..FIELDS_BYTES]) != u32_at(FIELDS_BYTES) {
        return Err(bad_header(path, "header CRC mismatch"));
    }
    if u32_at(8) != VERSION {
        return Err(bad_header(
            path,
            format!("format version {}, expected {VERSION}", u32_at(8)),
        ));
    }
    if u64::from(u32_at(12)) != HEADER_BYTES {
        return Err(bad_header(
            path,
            format!("header length {}, expected {HEADER_BYTES}", u32_at(12)),
        ));
    }
    let name = &h[64..64 + NAME_MAX_BYTES];
    let name =
        std::str::from_utf8(&name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())])
            .map_err(|_| bad_header(path, "preset name is not UTF-8"))?;
    let config = NvramConfig {
        name: name.to_string(),
        size_bytes: u64_at(16),
        timing: NvramTiming {
            read_ns_per_word: u64_at(24),
            write_ns_per_word: u64_at(32),
            persist_ns: u64_at(40),
        },
        energy: NvramEnergy {
            read_pj_per_byte: u64_at(48),
            write_pj_per_byte: u64_at(56),
        },
    };
    config
        .validate()
        .map_err(|e| bad_header(path, e.to_string()))?;
    Ok(config)
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

/// Creates a new image, every NVRAM byte zero. Refuses to replace an existing file unless
/// `overwrite` is set.
pub fn create(
    path: &Path,
    config: &NvramConfig,
    overwrite: bool,
) -> Result<FileStorage, NvramError> {
    config.validate()?;
    let mut opts = OpenOptions::new();
    opts.read(true).write(true);
    if overwrite {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let mut file = opts.open(path).map_err(io_err(path))?;
    file.write_all(&encode_header(config))
        .map_err(io_err(path))?;
    file.set_len(HEADER_BYTES + config.size_bytes)
        .map_err(io_err(path))?;
    reserve(&file, HEADER_BYTES + config.size_bytes).map_err(io_err(path))?;
    file.sync_all().map_err(io_err(path))?;
    map(path, &file, config)
}

/// Opens an existing image, checking its header and that the file is exactly as long as
/// the header says.
pub fn open(path: &Path) -> Result<(NvramConfig, FileStorage), NvramError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    let mut header = Vec::with_capacity(HEADER_BYTES as usize);
    (&mut file)
        .take(HEADER_BYTES)
        .read_to_end(&mut header)
        .map_err(io_err(path))?;
    if !header.starts_with(&MAGIC) {
        return Err(NvramError::NotAnImage {
            path: path.display().to_string(),
        });
    }
    let truncated = |expected| NvramError::Truncated {
        path: path.display().to_string(),
        expected,
        actual: len,
    };
    if (header.len() as u64) < HEADER_BYTES {
        return Err(truncated(HEADER_BYTES));
    }
    let config = decode_header(path, &header)?;
    let want = HEADER_BYTES + config.size_bytes;
    if len < want {
        return Err(truncated(want));
    }
    if len > want {
        return Err(bad_header(
            path,
            format!("file is {len} bytes, longer than the {want} its header describes"),
        ));
    }
    let storage = map(path, &file, &config)?;
    Ok((config, storage))
}

fn map(path: &Path, file: &File, config: &NvramConfig) -> Result<FileStorage, NvramError> {
    // SAFETY: the map covers the contents of a file this process opened for writing;
    // nandkit assumes nothing else writes or truncates an image while it is open.
    let map = unsafe {
        MmapOptions::new()
            .offset(HEADER_BYTES)
            .len(config.size_bytes as usize)
            .map_mut(file)
    }
    .map_err(io_err(path))?;
    Ok(FileStorage {
        map,
        path: path.display().to_string(),
    })
}

/// The contents of an image, mapped.
pub struct FileStorage {
    map: MmapMut,
    path: String,
}

impl Storage for FileStorage {
    fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    fn flush(&mut self) -> Result<(), NvramError> {
        self.map.flush().map_err(|source| NvramError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_image_has_its_space_reserved_and_a_failed_reservation_says_so() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.nvram");
        let config = crate::preset("feram")
            .unwrap()
            .with_size_bytes(1 << 20)
            .unwrap();
        drop(create(&path, &config, false).unwrap());
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!(m.len(), HEADER_BYTES + (1 << 20));
        assert!(m.blocks() * 512 >= m.len(), "{} blocks: sparse", m.blocks());
        // A reservation the host refuses (here: a descriptor not open for writing) is an
        // error that says what it was doing.
        let ro = File::open(&path).unwrap();
        let e = reserve(&ro, 1 << 30).unwrap_err();
        assert!(e.to_string().contains("reserving the image's"), "{e}");
    }

    #[test]
    fn header_round_trips_and_detects_damage() {
        let config = crate::preset("pram").unwrap();
        let path = Path::new("x.nvram");
        let mut h = encode_header(&config);
        assert_eq!(h.len() as u64, HEADER_BYTES);
        assert_eq!(decode_header(path, &h).unwrap(), config);
        h[20] ^= 1;
        assert!(matches!(
            decode_header(path, &h),
            Err(NvramError::BadHeader { .. })
        ));
    }
}
