//! Shape of a NAND device: pages, erase blocks, chips, and addresses into them.

use serde::{Deserialize, Serialize};

use crate::error::FlashError;

/// Bytes at the start of every page's OOB reserved for the bad block marker (the chip writes
/// its marker at OOB byte 0 of page 0; Linux reserves two bytes on every page).
pub const OOB_BBM_BYTES: u32 = 2;

/// The shape of one flash device (one chip, or an array of identical chips).
///
/// Every count is a plain number; every size is in bytes.
///
/// A page's OOB is laid out as Linux MTD lays it out:
/// `[bad block marker: 2][free: oob_free_bytes()][ECC: oob_ecc_bytes]`. The chip writes the
/// ECC bytes itself when it programs a page; a file system may use only the free bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    /// Bytes in the main (data) area of a page. Programs and reads move whole pages.
    pub page_size_bytes: u32,
    /// Bytes in the spare (OOB) area of a page: bad block marker, free bytes (tags), ECC.
    /// Larger OOB lets a file system keep its tags out of band; tiny OOB forces in-band tags.
    pub oob_size_bytes: u32,
    /// Pages in one erase block. Pages of a block must be programmed in order 0, 1, 2, ...
    pub pages_per_block: u32,
    /// Erase blocks on one chip.
    pub blocks_per_chip: u32,
    /// Identical chips (dies with their own bus) side by side. `1` for a plain MTD device.
    pub chips: u32,
    /// OOB bytes at the end of each page's OOB holding ECC check bytes, written by the chip:
    /// data codewords per page times the ECC's check bytes per codeword. 0 (the default of
    /// older sidecars) means the device stores no ECC bytes.
    #[serde(default)]
    pub oob_ecc_bytes: u32,
}

impl Geometry {
    /// Checks that the numbers describe a device the simulator can hold.
    pub fn validate(&self) -> Result<(), FlashError> {
        let bad = |why: &str| Err(FlashError::InvalidGeometry(why.to_string()));
        if self.page_size_bytes == 0 || !self.page_size_bytes.is_power_of_two() {
            return bad("page size must be a power of two");
        }
        if self.pages_per_block == 0 || self.pages_per_block > 65_536 {
            return bad("pages per block must be 1..=65536");
        }
        if self.blocks_per_chip == 0 {
            return bad("a chip needs at least one block");
        }
        if self.chips == 0 || self.chips > 64 {
            return bad("chips must be 1..=64");
        }
        if self.oob_size_bytes > self.page_size_bytes {
            return bad("OOB larger than the page");
        }
        if self.oob_ecc_bytes > 0
            && u64::from(self.oob_ecc_bytes) + u64::from(OOB_BBM_BYTES)
                > u64::from(self.oob_size_bytes)
        {
            return bad("ECC bytes and the bad block marker do not fit in the OOB");
        }
        // Every size derived from the geometry (raw image bytes above all) must fit a u64.
        let raw_bytes = (self.raw_page_bytes() as u64)
            .checked_mul(self.pages_per_chip())
            .and_then(|b| b.checked_mul(u64::from(self.chips)));
        if raw_bytes.is_none() {
            return bad("device too large");
        }
        Ok(())
    }

    /// Bytes at the start of the OOB reserved for the bad block marker (also [`OOB_BBM_BYTES`]).
    pub const OOB_BBM_BYTES: u32 = OOB_BBM_BYTES;

    /// Where the OOB bytes free for the file system start: just after the bad block marker
    /// (2; less only for an OOB smaller than the marker, so the range is always in bounds).
    pub fn oob_free_offset(&self) -> usize {
        OOB_BBM_BYTES.min(self.oob_size_bytes) as usize
    }

    /// OOB bytes free for the file system: all but the marker and the ECC bytes.
    pub fn oob_free_bytes(&self) -> usize {
        (self.oob_size_bytes as usize)
            .saturating_sub(OOB_BBM_BYTES as usize)
            .saturating_sub(self.oob_ecc_bytes as usize)
    }

    /// The free OOB bytes as a range of an OOB buffer.
    pub fn oob_free_range(&self) -> std::ops::Range<usize> {
        let start = self.oob_free_offset();
        start..start + self.oob_free_bytes()
    }

    /// Where the ECC bytes start: they fill the end of the OOB.
    pub fn oob_ecc_offset(&self) -> usize {
        (self.oob_size_bytes as usize).saturating_sub(self.oob_ecc_bytes as usize)
    }

    /// Bytes a page occupies in a raw dump: data followed by OOB.
    pub fn raw_page_bytes(&self) -> usize {
        self.page_size_bytes as usize + self.oob_size_bytes as usize
    }

    /// Data bytes in one erase block.
    pub fn block_bytes(&self) -> u64 {
        u64::from(self.page_size_bytes) * u64::from(self.pages_per_block)
    }

    /// Bytes of one erase block in a raw dump, with each page's OOB if `oob`.
    pub fn block_bytes_with(&self, oob: bool) -> u64 {
        let page = if oob {
            self.raw_page_bytes() as u64
        } else {
            u64::from(self.page_size_bytes)
        };
        page * u64::from(self.pages_per_block)
    }

    /// Data bytes on one chip.
    pub fn chip_bytes(&self) -> u64 {
        self.block_bytes() * u64::from(self.blocks_per_chip)
    }

    /// Data bytes on the whole device (all chips).
    pub fn total_bytes(&self) -> u64 {
        self.chip_bytes() * u64::from(self.chips)
    }

    /// Pages on one chip.
    pub fn pages_per_chip(&self) -> u64 {
        u64::from(self.pages_per_block) * u64::from(self.blocks_per_chip)
    }

    /// Erase blocks on the whole device.
    pub fn total_blocks(&self) -> u64 {
        u64::from(self.blocks_per_chip) * u64::from(self.chips)
    }

    /// The array as its striped view shows it (see `StripedFlash`): one chip whose block is
    /// block b of every chip.
    pub fn striped(&self) -> Geometry {
        Geometry {
            pages_per_block: self.pages_per_block * self.chips,
            chips: 1,
            ..*self
        }
    }

    /// The same total capacity split over `chips` chips (MA Table 2: 1 GiB as 1, 2 or 4 MTDs).
    pub fn split_over(&self, chips: u32) -> Result<Geometry, FlashError> {
        let total_blocks = u64::from(self.blocks_per_chip) * u64::from(self.chips);
        if chips == 0 || !total_blocks.is_multiple_of(u64::from(chips)) {
            return Err(FlashError::InvalidGeometry(format!(
                "{total_blocks} blocks cannot be split evenly over {chips} chips"
            )));
        }
        let g = Geometry {
            blocks_per_chip: (total_blocks / u64::from(chips)) as u32,
            chips,
            ..*self
        };
        g.validate()?;
        Ok(g)
    }

    /// The same chip shape with a different total data capacity, kept on the same number of
    /// chips. `total_bytes` must be a whole number of blocks per chip.
    pub fn resized(&self, total_bytes: u64) -> Result<Geometry, FlashError> {
        let per_chip_block_bytes = self.block_bytes() * u64::from(self.chips);
        if total_bytes == 0 || !total_bytes.is_multiple_of(per_chip_block_bytes) {
            return Err(FlashError::InvalidGeometry(format!(
                "{total_bytes} bytes is not a whole number of {}-byte blocks on each of {} chip(s)",
                self.block_bytes(),
                self.chips
            )));
        }
        let blocks = total_bytes / per_chip_block_bytes;
        let g = Geometry {
            blocks_per_chip: u32::try_from(blocks)
                .map_err(|_| FlashError::InvalidGeometry("too many blocks".into()))?,
            ..*self
        };
        g.validate()?;
        Ok(g)
    }

    pub(crate) fn check_block(&self, addr: BlockAddr) -> Result<(), FlashError> {
        if addr.chip >= self.chips || addr.block >= self.blocks_per_chip {
            return Err(FlashError::OutOfRange {
                what: format!("{addr}"),
            });
        }
        Ok(())
    }

    pub(crate) fn check_page(&self, addr: PageAddr) -> Result<(), FlashError> {
        self.check_block(addr.block_addr())?;
        if addr.page >= self.pages_per_block {
            return Err(FlashError::OutOfRange {
                what: format!("{addr}"),
            });
        }
        Ok(())
    }
}

/// One erase block: which chip, which block on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockAddr {
    pub chip: u32,
    pub block: u32,
}

impl BlockAddr {
    pub fn new(chip: u32, block: u32) -> Self {
        Self { chip, block }
    }

    /// Page `page` of this block.
    pub fn page(self, page: u32) -> PageAddr {
        PageAddr {
            chip: self.chip,
            block: self.block,
            page,
        }
    }
}

impl std::fmt::Display for BlockAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "chip {} block {}", self.chip, self.block)
    }
}

/// One page: chip, block on that chip, page within that block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PageAddr {
    pub chip: u32,
    pub block: u32,
    pub page: u32,
}

impl PageAddr {
    pub fn new(chip: u32, block: u32, page: u32) -> Self {
        Self { chip, block, page }
    }

    pub fn block_addr(self) -> BlockAddr {
        BlockAddr {
            chip: self.chip,
            block: self.block,
        }
    }
}

impl std::fmt::Display for PageAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chip {} block {} page {}",
            self.chip, self.block, self.page
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g() -> Geometry {
        Geometry {
            page_size_bytes: 2048,
            oob_size_bytes: 64,
            pages_per_block: 64,
            blocks_per_chip: 8192,
            chips: 1,
            oob_ecc_bytes: 28,
        }
    }

    #[test]
    fn split_keeps_capacity() {
        let four = g().split_over(4).unwrap();
        assert_eq!(four.blocks_per_chip, 2048);
        assert_eq!(four.total_bytes(), g().total_bytes());
        assert!(g().split_over(3).is_err());
    }

    #[test]
    fn resize_to_whole_blocks_only() {
        let small = g().resized(128 << 20).unwrap();
        assert_eq!(small.blocks_per_chip, 1024);
        assert!(g().resized(1000).is_err());
    }

    #[test]
    fn validate_rejects_nonsense() {
        assert!(Geometry {
            page_size_bytes: 3000,
            ..g()
        }
        .validate()
        .is_err());
        assert!(Geometry { chips: 0, ..g() }.validate().is_err());
    }

    #[test]
    fn oob_layout_is_marker_free_ecc() {
        let g = g();
        assert_eq!(g.oob_free_offset(), 2);
        assert_eq!(g.oob_free_bytes(), 34);
        assert_eq!(g.oob_free_range(), 2..36);
        assert_eq!(g.oob_ecc_offset(), 36);
        assert_eq!(g.split_over(4).unwrap().oob_ecc_bytes, 28);
        assert_eq!(g.resized(128 << 20).unwrap().oob_ecc_bytes, 28);
        // ECC may take everything but the marker, not more.
        assert!(Geometry {
            oob_ecc_bytes: 62,
            ..g
        }
        .validate()
        .is_ok());
        assert!(Geometry {
            oob_ecc_bytes: 63,
            ..g
        }
        .validate()
        .is_err());
        // Without stored ECC: marker and free bytes only, even on a tiny OOB.
        let legacy = Geometry {
            oob_ecc_bytes: 0,
            oob_size_bytes: 1,
            ..g
        };
        legacy.validate().unwrap();
        assert_eq!(legacy.oob_free_range(), 1..1);
        assert_eq!(legacy.oob_ecc_offset(), 1);
    }
}
