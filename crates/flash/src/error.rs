//! Every way a flash operation can fail.

use crate::geometry::{BlockAddr, PageAddr};

/// A refused or failed flash operation. The chip enforces NAND's rules with these instead of
/// silently allowing what a real chip would corrupt.
#[derive(Debug, thiserror::Error)]
pub enum FlashError {
    #[error("address out of range: {what}")]
    OutOfRange { what: String },

    #[error("{0} is a bad block")]
    BadBlock(BlockAddr),

    #[error("{0} is not erased: a NAND page can be programmed once per erase")]
    NotErased(PageAddr),

    #[error("{addr} programmed out of order: the next programmable page of this block is {next}")]
    OutOfOrder { addr: PageAddr, next: u32 },

    #[error(
        "{addr}: its spare area was already programmed {times} time(s), the chip's limit (NOP)"
    )]
    PartialProgramLimit { addr: PageAddr, times: u32 },

    #[error("{0}: a spare-area program needs a page programmed since the last erase")]
    SpareOfErasedPage(PageAddr),

    #[error("buffer of {got} bytes where the page needs {want}")]
    BufferSize { got: usize, want: usize },

    #[error("program failed at {0} (block worn out)")]
    ProgramFailed(PageAddr),

    #[error("erase failed at {0} (block worn out)")]
    EraseFailed(BlockAddr),

    #[error("uncorrectable ECC error at {addr}: {codewords} codeword(s) beyond correction")]
    Uncorrectable { addr: PageAddr, codewords: u32 },

    #[error("power lost: the device refuses operations until it is reopened")]
    PowerLost,

    /// The whole chip is gone (it died, or its image file was removed): every operation on
    /// it fails. An array with parity goes on without it; any other device cannot.
    #[error("chip {0} has failed: every operation on it errors")]
    ChipFailed(u32),

    #[error("invalid geometry: {0}")]
    InvalidGeometry(String),

    /// A wear or error-rate parameter out of its range (a hand-edited sidecar, say).
    #[error("invalid device model: {0}")]
    InvalidModel(String),

    #[error("unknown preset '{name}' (known: {known})")]
    UnknownPreset { name: String, known: String },

    #[error("bad flash image {path}: {why}")]
    BadImage { path: String, why: String },

    /// The UBI layer of an array (`crate::ubi`) cannot go on: not a UBI image, spares used
    /// up, headers that disagree.
    #[error("UBI: {0}")]
    Ubi(String),

    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl FlashError {
    /// True for errors that mean the medium itself failed at this block (the caller should
    /// retire the block and retry elsewhere), as opposed to a misuse or a power cut.
    pub fn is_media_failure(&self) -> bool {
        matches!(
            self,
            FlashError::ProgramFailed(_) | FlashError::EraseFailed(_)
        )
    }
}
