//! File system errors, each mapped to the errno a POSIX caller expects.

use nandkit_flash::FlashError;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("no space left on device")]
    NoSpace,
    /// Every object number the tag layout can name has been given out (numbers are never
    /// reused): ENOSPC, with its own message.
    #[error(
        "no object numbers left: this image has created the {0} objects its tag layout can \
         name, and numbers are never reused (see docs/format.md)"
    )]
    NoObjectNumbers(u64),
    #[error("name too long (names at most 255 bytes, symlink targets at most 4,095)")]
    NameTooLong,
    #[error("file too large")]
    TooBig,
    #[error("attribute value too large (at most 65,536 bytes)")]
    ValueTooBig,
    #[error("not a regular file")]
    NoDevice,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("I/O error: {0}")]
    Io(String),
    #[error("read-only file system")]
    ReadOnly,
    #[error("operation not permitted")]
    NotPermitted,
    #[error("too many links")]
    TooManyLinks,
    #[error("no such attribute")]
    NoData,
    #[error("operation not supported: {0}")]
    NotSupported(&'static str),
    #[error("no data or hole at or past that offset")]
    NoSuchOffset,
    #[error("not a nandkit file system: {0}")]
    NotFormatted(String),
    #[error(
        "this image has nandkit on-flash format version {found}; this nandkit reads version \
         {supported}"
    )]
    OldFormat { found: u8, supported: u8 },
    #[error("flash: {0}")]
    Flash(#[from] FlashError),
    #[error("NVRAM: {0}")]
    Nvram(#[from] nandkit_nvram::NvramError),
    #[error("corrupt NVRAM: {0}")]
    CorruptNvram(String),
    #[error(
        "this file system keeps its metadata in NVRAM: give the NVRAM image it was made \
         with (--nvram FILE)"
    )]
    NeedsNvram,
    /// A `minv` NVRAM image given with a flash image it was not made with (mkfs writes
    /// one random file system id on both).
    #[error(
        "the NVRAM image belongs to another file system: the NVRAM image holds file system \
         {nvram}, the flash image holds file system {flash}; give the NVRAM image mkfs made \
         with this flash image"
    )]
    NvramMismatch { nvram: String, flash: String },
    /// A `minv` NVRAM image that is not the one this flash goes with now: an older copy
    /// of it (its generation is behind the flash's), or a newer one beside an older copy
    /// of the flash (see `meta::minv::layout::GENERATION_OFF`).
    #[error("{}", stale_message(*nvram, *flash))]
    NvramStale { nvram: u64, flash: u64 },
}

fn stale_message(nvram: u64, flash: u64) -> String {
    let why = if nvram < flash {
        "the NVRAM image is an older copy: the flash has moved on since, and its metadata \
         would return data since overwritten and files since deleted"
    } else {
        "the flash image is an older copy than the NVRAM image: the NVRAM's metadata names \
         data the flash does not hold"
    };
    format!(
        "the NVRAM image does not describe this flash image: the NVRAM is at generation \
         {nvram}, the flash records generation {flash} (the two move forward together at \
         each mount and unmount); {why}. Refused: give the NVRAM image last used with this \
         flash image"
    )
}

impl FsError {
    /// The errno this error reports through POSIX interfaces (FUSE).
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => 2,              // ENOENT
            FsError::Exists => 17,               // EEXIST
            FsError::NotDir => 20,               // ENOTDIR
            FsError::IsDir => 21,                // EISDIR
            FsError::NotEmpty => 39,             // ENOTEMPTY
            FsError::NoSpace => 28,              // ENOSPC
            FsError::NoObjectNumbers(_) => 28,   // ENOSPC
            FsError::NameTooLong => 36,          // ENAMETOOLONG
            FsError::TooBig => 27,               // EFBIG
            FsError::ValueTooBig => 7,           // E2BIG
            FsError::NoDevice => 19,             // ENODEV
            FsError::Invalid(_) => 22,           // EINVAL
            FsError::Io(_) => 5,                 // EIO
            FsError::ReadOnly => 30,             // EROFS
            FsError::NotPermitted => 1,          // EPERM
            FsError::TooManyLinks => 31,         // EMLINK
            FsError::NoData => 61,               // ENODATA
            FsError::NotSupported(_) => 95,      // EOPNOTSUPP
            FsError::NoSuchOffset => 6,          // ENXIO
            FsError::NotFormatted(_) => 22,      // EINVAL
            FsError::OldFormat { .. } => 22,     // EINVAL
            FsError::Flash(_) => 5,              // EIO
            FsError::Nvram(_) => 5,              // EIO
            FsError::CorruptNvram(_) => 117,     // EUCLEAN
            FsError::NeedsNvram => 22,           // EINVAL
            FsError::NvramMismatch { .. } => 22, // EINVAL
            FsError::NvramStale { .. } => 22,    // EINVAL
        }
    }
}

pub type Result<T> = std::result::Result<T, FsError>;
