//! Why a model refused its input.

/// An input outside the domain a model is defined on.
///
/// Every variant names the offending parameter as the paper does (`u`, `i`, ...), so a message
/// can be matched to the equation without knowing which API or command produced it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A fraction or other bounded parameter outside its closed range (NaN included).
    #[error("{name} = {value} is outside [{min}, {max}]")]
    OutOfRange {
        name: &'static str,
        value: f64,
        min: f64,
        max: f64,
    },
    /// Valid plus invalid pages would exceed all pages.
    #[error(
        "invalidity i = {i} is more than 1 - u with u = {u}: valid and invalid pages together \
         cannot exceed all pages"
    )]
    InvalidityAboveFree { i: f64, u: f64 },
    /// A count that must be positive (blocks, pages per block) is zero.
    #[error("{name} must be at least 1")]
    Zero { name: &'static str },
    /// An operation time that is negative, NaN or infinite.
    #[error("{name} = {value} us is not a time: it must be finite and at least 0")]
    BadTime { name: &'static str, value: f64 },
    /// The LFS write cost 2/(1-u) has no finite value on a full device.
    #[error(
        "the LFS write cost 2/(1-u) is unbounded at u = 1: cleaning a full device frees no space"
    )]
    FullDevice,
    /// The files would not fit on the flash: more than one allocation unit each, or more
    /// bytes than the flash holds.
    #[error("{files} files of {bytes} bytes in all do not fit in {flash_bytes} bytes of flash")]
    DoesNotFit {
        files: u64,
        bytes: u64,
        flash_bytes: u64,
    },
}
