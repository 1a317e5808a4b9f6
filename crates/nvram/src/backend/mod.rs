//! Where the bytes live. A backend is a plain byte region; it knows nothing of persists or
//! crashes. Those live above it, in [`crate::volatile`] and [`crate::device`].

pub mod file;
pub mod ram;

use crate::error::NvramError;

/// Raw storage for the bytes of one NVRAM.
pub trait Storage: Send + Sync {
    /// Every byte of the NVRAM, current contents.
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
    /// Hands everything stored so far to the host's stable storage (for a file: msync).
    fn flush(&mut self) -> Result<(), NvramError>;
}
