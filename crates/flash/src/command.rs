//! Operations as values, for batches submitted to several chips at once.

use crate::ecc::EccReport;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, PageAddr};

/// One flash operation in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read a page's data and OOB.
    Read { addr: PageAddr },
    /// Read only a page's OOB.
    ReadOob { addr: PageAddr },
    /// Program a page with `data` (one page) and `oob` (the OOB size).
    Program {
        addr: PageAddr,
        data: Vec<u8>,
        oob: Vec<u8>,
    },
    /// Program more bits of a programmed page's spare area (`oob`: the OOB size; only its
    /// 0 bits are programmed), within the chip's partial-program limit.
    ProgramSpare { addr: PageAddr, oob: Vec<u8> },
    /// Erase a block.
    Erase { addr: BlockAddr },
}

impl Command {
    /// The chip this operation runs on.
    pub fn chip(&self) -> u32 {
        match self {
            Command::Read { addr }
            | Command::ReadOob { addr }
            | Command::Program { addr, .. }
            | Command::ProgramSpare { addr, .. } => addr.chip,
            Command::Erase { addr } => addr.chip,
        }
    }

    /// Programs and erases change the medium (and so count toward a power cut).
    pub fn changes_state(&self) -> bool {
        matches!(
            self,
            Command::Program { .. } | Command::ProgramSpare { .. } | Command::Erase { .. }
        )
    }
}

/// What a successful operation returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Read {
        data: Vec<u8>,
        oob: Vec<u8>,
        ecc: EccReport,
    },
    ReadOob {
        oob: Vec<u8>,
        ecc: EccReport,
    },
    Done,
}

/// The outcome of one operation and when it ran, in simulated nanoseconds.
#[derive(Debug)]
pub struct Completion {
    pub result: Result<Reply, FlashError>,
    /// When the chip started the operation (after anything queued before it on that chip).
    pub start_ns: u64,
    /// When the operation finished.
    pub end_ns: u64,
}
