//! Everything that defines a simulated NVRAM. Stored in a file image's header so an image
//! reopens as exactly the device that wrote it.

use serde::{Deserialize, Serialize};

use crate::cost::{NvramEnergy, NvramTiming, WORD_BYTES};
use crate::error::NvramError;

/// Longest preset name a file image header can hold, in bytes of UTF-8.
pub const NAME_MAX_BYTES: usize = 32;

/// A complete NVRAM description: size, speed and energy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvramConfig {
    /// Preset this device came from (or a free-form label), at most [`NAME_MAX_BYTES`].
    pub name: String,
    /// Capacity in bytes: a positive multiple of 8, so every byte lies in a whole word.
    pub size_bytes: u64,
    pub timing: NvramTiming,
    pub energy: NvramEnergy,
}

impl NvramConfig {
    pub fn validate(&self) -> Result<(), NvramError> {
        if self.size_bytes == 0 || self.size_bytes % WORD_BYTES != 0 {
            return Err(NvramError::InvalidConfig(format!(
                "size {} bytes: must be a positive multiple of {WORD_BYTES}",
                self.size_bytes
            )));
        }
        if usize::try_from(self.size_bytes).is_err() {
            return Err(NvramError::InvalidConfig(format!(
                "size {} bytes does not fit this host's address space",
                self.size_bytes
            )));
        }
        if self.name.len() > NAME_MAX_BYTES {
            return Err(NvramError::InvalidConfig(format!(
                "name '{}' is longer than {NAME_MAX_BYTES} bytes",
                self.name
            )));
        }
        Ok(())
    }

    /// The same device with a different capacity in bytes.
    pub fn with_size_bytes(mut self, size_bytes: u64) -> Result<Self, NvramError> {
        self.size_bytes = size_bytes;
        self.validate()?;
        Ok(self)
    }
}
