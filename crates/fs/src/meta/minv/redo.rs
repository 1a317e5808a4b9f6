//! The redo log: a few 8-byte stores made all-or-nothing.
//!
//! ```text
//! LOG_OFF + 0    count: entries of the committed transaction (0: none)
//! LOG_OFF + 8    check: CRC-32C of the entries, and their count in the high half
//! LOG_OFF + 16   entries: (offset u64, value u64) each
//! ```
//!
//! Commit writes the entries and the check and persists them, then stores the count (the
//! commit point, one aligned store) and persists it; then applies each store, persists
//! them together (one fence), and clears the count. A mount that finds a count replays the entries (applying them
//! twice is harmless: each sets a word to a value) and clears it.

use nandkit_nvram::NvramError;

use super::layout::{get64, LOG_ENTRIES, LOG_OFF};
use super::Minv;

/// Entries of a committed transaction found at mount, checked.
pub(crate) type Entries = Vec<(u64, u64)>;

fn check_word(bytes: &[u8], n: usize) -> u64 {
    u64::from(crc32c::crc32c(bytes)) | ((n as u64) << 32)
}

fn encode(entries: &[(u64, u64)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 * entries.len());
    for (o, v) in entries {
        b.extend_from_slice(&o.to_le_bytes());
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

impl Minv {
    /// Makes the stores in `entries` durable together. One store needs no log.
    pub(crate) fn commit(&mut self, entries: &[(u64, u64)]) -> Result<(), NvramError> {
        if let [(off, value)] = *entries {
            return self.store_persist(off, value);
        }
        assert!(entries.len() <= LOG_ENTRIES, "a redo transaction too big");
        let bytes = encode(entries);
        self.unclean()?;
        self.nv.write(LOG_OFF + 16, &bytes)?;
        self.nv
            .write_u64(LOG_OFF + 8, check_word(&bytes, entries.len()))?;
        self.nv.persist(LOG_OFF + 8, 8 + bytes.len() as u64)?;
        self.store_persist(LOG_OFF, entries.len() as u64)?;
        self.apply(entries)?;
        self.store_persist(LOG_OFF, 0)
    }

    pub(crate) fn apply(&mut self, entries: &[(u64, u64)]) -> Result<(), NvramError> {
        for &(off, value) in entries {
            self.nv.write_u64(off, value)?;
        }
        let offsets: Vec<u64> = entries.iter().map(|&(off, _)| off).collect();
        self.nv.persist_words(&offsets)
    }
}

/// Reads the log: the committed entries, if any. `Err` says why the log is damaged.
pub(crate) fn read(
    nv: &mut nandkit_nvram::Nvram,
    valid: impl Fn(u64) -> bool,
) -> Result<Option<Entries>, String> {
    let mut head = [0u8; 16];
    nv.read(LOG_OFF, &mut head).map_err(|e| e.to_string())?;
    let count = get64(&head, 0);
    if count == 0 {
        return Ok(None);
    }
    if count < 2 || count > LOG_ENTRIES as u64 {
        return Err(format!("redo log count {count} out of range"));
    }
    let n = count as usize;
    let mut bytes = vec![0u8; 16 * n];
    nv.read(LOG_OFF + 16, &mut bytes)
        .map_err(|e| e.to_string())?;
    if check_word(&bytes, n) != get64(&head, 8) {
        return Err("redo log entries fail their checksum".into());
    }
    let entries: Entries = (0..n)
        .map(|i| (get64(&bytes, 16 * i), get64(&bytes, 16 * i + 8)))
        .collect();
    if let Some((o, _)) = entries.iter().find(|(o, _)| o % 8 != 0 || !valid(*o)) {
        return Err(format!("redo log stores to offset {o}, outside the tables"));
    }
    Ok(Some(entries))
}
