//! Every way an NVRAM operation can fail. None of them panics: a bad offset or a foreign file
//! is the caller's (or the disk's) problem, reported as a value.

/// A refused or failed NVRAM operation.
#[derive(Debug, thiserror::Error)]
pub enum NvramError {
    #[error("access of {len} bytes at offset {offset} is outside the {size}-byte NVRAM")]
    OutOfRange { offset: u64, len: u64, size: u64 },

    #[error("8-byte access at offset {offset} is not 8-byte aligned")]
    Misaligned { offset: u64 },

    #[error("power lost: the NVRAM refuses operations until crash() brings it back")]
    PowerLost,

    #[error("invalid NVRAM configuration: {0}")]
    InvalidConfig(String),

    #[error("unknown NVRAM preset '{name}' (known: {known})")]
    UnknownPreset { name: String, known: String },

    #[error("{path} is not an nvram image (no nandkit-nvram magic at its start)")]
    NotAnImage { path: String },

    #[error("bad nvram image header in {path}: {why}")]
    BadHeader { path: String, why: String },

    #[error("nvram image {path} is truncated: {actual} bytes, its header needs {expected}")]
    Truncated {
        path: String,
        expected: u64,
        actual: u64,
    },

    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
