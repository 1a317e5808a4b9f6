//! Bytes in memory: gone when the process ends, like an NVRAM whose contents nobody saved.

use super::Storage;
use crate::error::NvramError;

pub struct RamStorage {
    bytes: Vec<u8>,
}

impl RamStorage {
    /// A zero-filled region of `size_bytes`.
    pub fn new(size_bytes: usize) -> Self {
        Self {
            bytes: vec![0; size_bytes],
        }
    }
}

impl Storage for RamStorage {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    fn flush(&mut self) -> Result<(), NvramError> {
        Ok(())
    }
}
