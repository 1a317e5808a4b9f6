//! The compressors a UBIFS data node may name: none, LZO (mkfs.ubifs's default), zlib (raw
//! deflate, as Linux's crypto API gives it) and zstd. Reading takes all four; what nandkit
//! writes is uncompressed (`none`, an allowed UBIFS compressor).

use super::media::{COMPR_LZO, COMPR_NONE, COMPR_ZLIB, COMPR_ZSTD};
use std::io::Read;

/// Why a block would not decompress.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecompressError {
    #[error("unknown compressor {0}")]
    Unknown(u16),
    #[error("{0} data does not decompress")]
    Corrupt(&'static str),
    #[error("block decompresses to {got} bytes, its node says {want}")]
    WrongSize { got: usize, want: usize },
}

/// Human name of a compressor.
pub fn name(compr: u16) -> &'static str {
    match compr {
        COMPR_NONE => "none",
        COMPR_LZO => "lzo",
        COMPR_ZLIB => "zlib",
        COMPR_ZSTD => "zstd",
        _ => "unknown",
    }
}

/// The `size` bytes of a block stored with compressor `compr`.
pub fn decompress(compr: u16, stored: &[u8], size: usize) -> Result<Vec<u8>, DecompressError> {
    let out = match compr {
        COMPR_NONE => stored.to_vec(),
        COMPR_LZO => lzokay_native::decompress_all(stored, Some(size))
            .map_err(|_| DecompressError::Corrupt("lzo"))?,
        COMPR_ZLIB => {
            let mut out = Vec::with_capacity(size);
            flate2::read::DeflateDecoder::new(stored)
                .take(size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|_| DecompressError::Corrupt("zlib"))?;
            out
        }
        COMPR_ZSTD => {
            let mut out = Vec::with_capacity(size);
            ruzstd::streaming_decoder::StreamingDecoder::new(stored)
                .map_err(|_| DecompressError::Corrupt("zstd"))?
                .take(size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|_| DecompressError::Corrupt("zstd"))?;
            out
        }
        other => return Err(DecompressError::Unknown(other)),
    };
    if out.len() != size {
        return Err(DecompressError::WrongSize {
            got: out.len(),
            want: size,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn each_compressor_reads_back_and_bad_input_is_an_error() {
        let block: Vec<u8> = (0..4096u32).map(|i| (i / 7) as u8).collect();
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&block).unwrap();
        let zlib = z.finish().unwrap();
        assert_eq!(decompress(COMPR_ZLIB, &zlib, 4096).unwrap(), block);
        let lzo = lzokay_native::compress(&block).unwrap();
        assert_eq!(decompress(COMPR_LZO, &lzo, 4096).unwrap(), block);
        assert_eq!(decompress(COMPR_NONE, &block, 4096).unwrap(), block);
        assert!(decompress(COMPR_NONE, &block, 4000).is_err());
        assert!(decompress(COMPR_ZLIB, &zlib[..zlib.len() / 2], 4096).is_err());
        assert!(decompress(COMPR_LZO, &[0xFF; 16], 4096).is_err());
        assert!(decompress(COMPR_ZSTD, &[1, 2, 3], 4096).is_err());
        assert_eq!(decompress(9, &[], 0), Err(DecompressError::Unknown(9)));
    }
}
