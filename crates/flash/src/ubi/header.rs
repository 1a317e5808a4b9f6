//! UBI's two on-flash headers, one page each at the start of every physical erase block
//! (PEB), as Linux UBI writes them on NAND without sub-pages:
//!
//! - page 0, the **erase-counter (EC) header**, written right after every erase: how often
//!   this PEB was erased, and the volume's shape (LEBs per chip, bad-block limit,
//!   wear-levelling threshold), so attaching needs nothing but the chip;
//! - page 1, the **volume-identifier (VID) header**, written when a logical erase block
//!   (LEB) is mapped onto the PEB: which LEB, and a sequence number so the newest of two
//!   PEBs claiming one LEB wins. A PEB written by wear levelling or recovery is a *copy*:
//!   its header also carries the number of data pages copied and their CRC, so a copy cut
//!   short by a power loss is recognised and the original kept.
//!
//! Each header is CRC-checked (crc32c); a page that is all 0xFF is "not written".

/// Pages at the start of every PEB that UBI keeps for its headers; a LEB is the rest.
pub const HEADER_PAGES: u32 = 2;

const EC_MAGIC: &[u8; 4] = b"UBI#";
const VID_MAGIC: &[u8; 4] = b"UBI!";
const VERSION: u8 = 1;
/// Bytes of a header, its CRC included.
pub const HEADER_BYTES: usize = 40;

/// The erase-counter header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcHeader {
    pub ec: u64,
    /// Logical erase blocks on this chip (the volume's size).
    pub lebs: u32,
    /// Bad PEBs the chip may have over its life before UBI runs out of spares.
    pub bad_limit: u32,
    /// Erase-count spread at which wear levelling moves a long-lived LEB.
    pub wl_threshold: u32,
    /// Identifies one format: PEBs of another format are not this volume's.
    pub image_seq: u32,
    /// The array keeps a parity page per stripe (see `crate::striped::parity`): each chip's
    /// LEB pages are addressed on their own, not round-robin.
    pub parity: bool,
}

/// The volume-identifier header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VidHeader {
    pub leb: u32,
    pub sqnum: u64,
    /// Set on a PEB written by copying a LEB (wear levelling, recovery from a failed
    /// program): `data_pages` and `data_crc` then cover the copied pages.
    pub copy: bool,
    pub data_pages: u32,
    pub data_crc: u32,
    pub image_seq: u32,
}

/// What a header page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// All 0xFF: never written since the erase.
    Empty,
    /// Written, but not a header of ours (torn, or another format's data).
    Corrupt,
    Valid(T),
}

fn seal(mut b: Vec<u8>, page_bytes: usize) -> Vec<u8> {
    let crc = crc32c::crc32c(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(b.len(), HEADER_BYTES);
    b.resize(page_bytes, 0xFF);
    b
}

fn open<'a>(page: &'a [u8], magic: &[u8; 4]) -> Parsed<&'a [u8]> {
    let Some(h) = page.get(..HEADER_BYTES) else {
        return Parsed::Corrupt;
    };
    if page.iter().all(|&b| b == 0xFF) {
        return Parsed::Empty;
    }
    let (body, crc) = h.split_at(HEADER_BYTES - 4);
    let crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    if &body[..4] != magic || body[4] != VERSION || crc32c::crc32c(body) != crc {
        return Parsed::Corrupt;
    }
    Parsed::Valid(body)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl EcHeader {
    /// The page's data: the header, then 0xFF.
    pub fn encode(&self, page_bytes: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_BYTES);
        b.extend_from_slice(EC_MAGIC);
        b.extend_from_slice(&[VERSION, u8::from(self.parity), 0, 0]);
        b.extend_from_slice(&self.ec.to_le_bytes());
        b.extend_from_slice(&self.lebs.to_le_bytes());
        b.extend_from_slice(&self.bad_limit.to_le_bytes());
        b.extend_from_slice(&self.wl_threshold.to_le_bytes());
        b.extend_from_slice(&self.image_seq.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        seal(b, page_bytes)
    }

    pub fn decode(page: &[u8]) -> Parsed<EcHeader> {
        match open(page, EC_MAGIC) {
            Parsed::Empty => Parsed::Empty,
            Parsed::Corrupt => Parsed::Corrupt,
            Parsed::Valid(b) => Parsed::Valid(EcHeader {
                ec: u64_at(b, 8),
                lebs: u32_at(b, 16),
                bad_limit: u32_at(b, 20),
                wl_threshold: u32_at(b, 24),
                image_seq: u32_at(b, 28),
                parity: b[5] == 1,
            }),
        }
    }
}

impl VidHeader {
    pub fn encode(&self, page_bytes: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_BYTES);
        b.extend_from_slice(VID_MAGIC);
        b.extend_from_slice(&[VERSION, u8::from(self.copy), 0, 0]);
        b.extend_from_slice(&self.leb.to_le_bytes());
        b.extend_from_slice(&self.data_pages.to_le_bytes());
        b.extend_from_slice(&self.sqnum.to_le_bytes());
        b.extend_from_slice(&self.data_crc.to_le_bytes());
        b.extend_from_slice(&self.image_seq.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        seal(b, page_bytes)
    }

    pub fn decode(page: &[u8]) -> Parsed<VidHeader> {
        match open(page, VID_MAGIC) {
            Parsed::Empty => Parsed::Empty,
            Parsed::Corrupt => Parsed::Corrupt,
            Parsed::Valid(b) => Parsed::Valid(VidHeader {
                copy: b[5] != 0,
                leb: u32_at(b, 8),
                data_pages: u32_at(b, 12),
                sqnum: u64_at(b, 16),
                data_crc: u32_at(b, 24),
                image_seq: u32_at(b, 28),
            }),
        }
    }
}

/// CRC of a copied LEB's pages (the VID header's `data_crc`): each page's data and the
/// free bytes of its OOB, in order. The caller leaves out the OOB's bad-block marker and
/// ECC bytes, which are the chip's: a copy gets its own.
pub fn copy_crc<'a>(pages: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> u32 {
    let mut crc = 0;
    for (data, oob) in pages {
        crc = crc32c::crc32c_append(crc, data);
        crc = crc32c::crc32c_append(crc, oob);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let ec = EcHeader {
            ec: 77,
            lebs: 1000,
            bad_limit: 20,
            wl_threshold: 4096,
            image_seq: 0xdead_beef,
            parity: true,
        };
        let page = ec.encode(2048);
        assert_eq!(page.len(), 2048);
        assert_eq!(EcHeader::decode(&page), Parsed::Valid(ec));
        assert_eq!(VidHeader::decode(&page), Parsed::Corrupt);
        let vid = VidHeader {
            leb: 5,
            sqnum: 1 << 40,
            copy: true,
            data_pages: 3,
            data_crc: 9,
            image_seq: 1,
        };
        let mut page = vid.encode(512);
        assert_eq!(VidHeader::decode(&page), Parsed::Valid(vid));
        page[9] ^= 1;
        assert_eq!(VidHeader::decode(&page), Parsed::Corrupt);
        assert_eq!(EcHeader::decode(&[0xFF; 512]), Parsed::Empty);
        assert_eq!(EcHeader::decode(&[0xFF; 8]), Parsed::Corrupt);
    }
}
