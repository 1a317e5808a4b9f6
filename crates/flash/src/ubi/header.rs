//! UBI's two on-flash headers at the start of every physical erase block (PEB), byte for
//! byte as Linux writes them (`drivers/mtd/ubi/ubi-media.h`; mtd-utils carries the same
//! file): 64 bytes each, big-endian, each closed by a CRC-32 of its first 60 bytes.
//!
//! - the **erase-counter (EC) header**, at offset 0, written right after every erase: how
//!   often this PEB was erased, where the VID header and the data start, and the image
//!   sequence number that tells this UBI's PEBs from another format's;
//! - the **volume-identifier (VID) header**, at the EC header's `vid_hdr_offset`, written
//!   when a logical erase block (LEB) is mapped onto the PEB: which volume and LEB, and a
//!   sequence number so the newest of two PEBs claiming one LEB wins. A PEB written by wear
//!   levelling or recovery is a *copy*: its header then carries the size and CRC of the
//!   copied data, so a copy cut short by a power loss is recognised and the original kept.
//!   A static volume's headers always carry them, and how many LEBs the volume uses.
//!
//! Where the headers sit (see [`Layout`]): without sub-pages, the EC header fills page 0,
//! the VID header page 1 and the data starts at page 2; with sub-pages (a chip that
//! programs a page in parts), both headers share page 0 and the data starts at page 1.
//!
//! The CRC is Linux's `crc32(UBI_CRC32_INIT, ...)`: the reflected IEEE polynomial seeded
//! with all ones and no final inversion, i.e. the bitwise complement of zlib's CRC-32.

/// Bytes of each header, its CRC included (`UBI_EC_HDR_SIZE`, `UBI_VID_HDR_SIZE`).
pub const HEADER_BYTES: usize = 64;
/// Bytes a header's CRC covers.
const CRC_COVERS: usize = HEADER_BYTES - 4;

const EC_MAGIC: u32 = 0x5542_4923; // "UBI#"
const VID_MAGIC: u32 = 0x5542_4921; // "UBI!"
const VERSION: u8 = 1;

/// `UBI_VID_DYNAMIC` and `UBI_VID_STATIC`.
pub const VOL_DYNAMIC: u8 = 1;
pub const VOL_STATIC: u8 = 2;

/// Linux's `crc32(UBI_CRC32_INIT, buf, len)`.
pub fn linux_crc32(buf: &[u8]) -> u32 {
    !crc32fast::hash(buf)
}

/// The erase-counter header (`struct ubi_ec_hdr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcHeader {
    pub ec: u64,
    /// Byte offset of the VID header in the PEB.
    pub vid_hdr_offset: u32,
    /// Byte offset of the LEB's data in the PEB (`leb_start`).
    pub data_offset: u32,
    /// Identifies one format: PEBs of another image are not this UBI's.
    pub image_seq: u32,
}

/// The volume-identifier header (`struct ubi_vid_hdr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VidHeader {
    /// [`VOL_DYNAMIC`] or [`VOL_STATIC`].
    pub vol_type: u8,
    /// Written by copying a LEB (wear levelling, recovery from a failed program):
    /// `data_size` and `data_crc` then cover the copied bytes.
    pub copy: bool,
    /// What an older UBI must do with a volume it does not know (internal volumes only).
    pub compat: u8,
    pub vol_id: u32,
    pub lnum: u32,
    /// Bytes of data in this LEB (static volumes and copies), else 0.
    pub data_size: u32,
    /// LEBs the static volume uses, else 0.
    pub used_ebs: u32,
    /// Bytes left unused at the end of every LEB of the volume (for alignment).
    pub data_pad: u32,
    /// CRC of the `data_size` bytes (static volumes and copies), else 0.
    pub data_crc: u32,
    pub sqnum: u64,
}

/// What a header's bytes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// All 0xFF: never written since the erase.
    Empty,
    /// Written, but not a valid header (torn, damaged, or another format's data).
    Corrupt,
    Valid(T),
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Closes a 60-byte header body with its CRC.
fn seal(mut b: Vec<u8>) -> [u8; HEADER_BYTES] {
    debug_assert_eq!(b.len(), CRC_COVERS);
    let crc = linux_crc32(&b);
    b.extend_from_slice(&crc.to_be_bytes());
    b.try_into().expect("64 bytes")
}

/// The header at the start of `bytes` if its magic, version and CRC hold.
fn open(bytes: &[u8], magic: u32) -> Parsed<&[u8]> {
    let Some(h) = bytes.get(..HEADER_BYTES) else {
        return Parsed::Corrupt;
    };
    if h.iter().all(|&b| b == 0xFF) {
        return Parsed::Empty;
    }
    if be32(h, 0) != magic || h[4] != VERSION || linux_crc32(&h[..CRC_COVERS]) != be32(h, 60) {
        return Parsed::Corrupt;
    }
    Parsed::Valid(h)
}

impl EcHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = Vec::with_capacity(HEADER_BYTES);
        b.extend_from_slice(&EC_MAGIC.to_be_bytes());
        b.extend_from_slice(&[VERSION, 0, 0, 0]);
        b.extend_from_slice(&self.ec.to_be_bytes());
        b.extend_from_slice(&self.vid_hdr_offset.to_be_bytes());
        b.extend_from_slice(&self.data_offset.to_be_bytes());
        b.extend_from_slice(&self.image_seq.to_be_bytes());
        b.resize(CRC_COVERS, 0);
        seal(b)
    }

    /// The header at the start of a PEB's first page. Linux refuses an erase counter past
    /// `UBI_MAX_ERASECOUNTER` (0x7FFFFFFF): so does this.
    pub fn decode(bytes: &[u8]) -> Parsed<EcHeader> {
        match open(bytes, EC_MAGIC) {
            Parsed::Empty => Parsed::Empty,
            Parsed::Corrupt => Parsed::Corrupt,
            Parsed::Valid(b) => {
                let h = EcHeader {
                    ec: be64(b, 8),
                    vid_hdr_offset: be32(b, 16),
                    data_offset: be32(b, 20),
                    image_seq: be32(b, 24),
                };
                if h.ec > 0x7FFF_FFFF || h.vid_hdr_offset < HEADER_BYTES as u32 {
                    return Parsed::Corrupt;
                }
                Parsed::Valid(h)
            }
        }
    }
}

impl VidHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = Vec::with_capacity(HEADER_BYTES);
        b.extend_from_slice(&VID_MAGIC.to_be_bytes());
        b.extend_from_slice(&[VERSION, self.vol_type, u8::from(self.copy), self.compat]);
        b.extend_from_slice(&self.vol_id.to_be_bytes());
        b.extend_from_slice(&self.lnum.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.data_size.to_be_bytes());
        b.extend_from_slice(&self.used_ebs.to_be_bytes());
        b.extend_from_slice(&self.data_pad.to_be_bytes());
        b.extend_from_slice(&self.data_crc.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.sqnum.to_be_bytes());
        b.resize(CRC_COVERS, 0);
        seal(b)
    }

    /// The header at the start of `bytes`. Fields Linux's `validate_vid_hdr` refuses (an
    /// unknown volume type or copy flag, a negative LEB number, a static LEB with no
    /// data count) make it corrupt; checks against the LEB size are the attach's.
    pub fn decode(bytes: &[u8]) -> Parsed<VidHeader> {
        match open(bytes, VID_MAGIC) {
            Parsed::Empty => Parsed::Empty,
            Parsed::Corrupt => Parsed::Corrupt,
            Parsed::Valid(b) => {
                let h = VidHeader {
                    vol_type: b[5],
                    copy: b[6] == 1,
                    compat: b[7],
                    vol_id: be32(b, 8),
                    lnum: be32(b, 12),
                    data_size: be32(b, 20),
                    used_ebs: be32(b, 24),
                    data_pad: be32(b, 28),
                    data_crc: be32(b, 32),
                    sqnum: be64(b, 40),
                };
                let bad = !matches!(h.vol_type, VOL_DYNAMIC | VOL_STATIC)
                    || b[6] > 1
                    || h.lnum > 0x7FFF_FFFF
                    || h.vol_id > 0x7FFF_FFFF
                    || (h.vol_type == VOL_STATIC && (h.used_ebs == 0 || h.lnum >= h.used_ebs))
                    || (h.vol_type == VOL_DYNAMIC && h.used_ebs != 0);
                if bad {
                    return Parsed::Corrupt;
                }
                Parsed::Valid(h)
            }
        }
    }

    /// A dynamic volume's header for `lnum` (no data count, no copy).
    pub fn dynamic(vol_id: u32, lnum: u32, sqnum: u64) -> Self {
        VidHeader {
            vol_type: VOL_DYNAMIC,
            copy: false,
            compat: 0,
            vol_id,
            lnum,
            data_size: 0,
            used_ebs: 0,
            data_pad: 0,
            data_crc: 0,
            sqnum,
        }
    }
}

/// Where a chip's UBI keeps its headers and data in a PEB, in bytes and pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub page_bytes: u32,
    pub vid_hdr_offset: u32,
    pub data_offset: u32,
}

impl Layout {
    /// Linux's layout on a chip that programs whole pages only (sub-page size = page
    /// size): the VID header at the second page, the data from the third.
    pub fn whole_pages(page_bytes: u32) -> Self {
        Layout {
            page_bytes,
            vid_hdr_offset: page_bytes,
            data_offset: 2 * page_bytes,
        }
    }

    /// The layout an EC header describes, if this chip can hold it: both offsets inside a
    /// PEB of `pages_per_block` pages, the VID header before the data, the data on a page
    /// boundary with at least one page left for it.
    pub fn from_ec(h: &EcHeader, page_bytes: u32, pages_per_block: u32) -> Option<Self> {
        let peb = u64::from(page_bytes) * u64::from(pages_per_block);
        let ok = h.data_offset.is_multiple_of(page_bytes)
            && u64::from(h.vid_hdr_offset) + HEADER_BYTES as u64 <= u64::from(h.data_offset)
            && u64::from(h.data_offset) < peb
            && h.vid_hdr_offset.is_multiple_of(8);
        ok.then_some(Layout {
            page_bytes,
            vid_hdr_offset: h.vid_hdr_offset,
            data_offset: h.data_offset,
        })
    }

    /// The page holding the VID header.
    pub fn vid_page(&self) -> u32 {
        self.vid_hdr_offset / self.page_bytes
    }

    /// Byte offset of the VID header in its page.
    pub fn vid_in_page(&self) -> usize {
        (self.vid_hdr_offset % self.page_bytes) as usize
    }

    /// The first data page of a PEB (pages before it are UBI's).
    pub fn data_page(&self) -> u32 {
        self.data_offset / self.page_bytes
    }

    /// Both headers share page 0 (a sub-page layout): a VID header cannot be added to a
    /// PEB whose EC header is already programmed, as this simulator programs whole pages;
    /// such a PEB is erased and given both headers in one program.
    pub fn shared(&self) -> bool {
        self.vid_page() == 0
    }

    /// An EC header page (with the VID header too, when given, in a shared layout).
    pub fn header_page(&self, ec: &EcHeader, vid: Option<&VidHeader>) -> Vec<u8> {
        let mut page = vec![0xFF; self.page_bytes as usize];
        page[..HEADER_BYTES].copy_from_slice(&ec.encode());
        if let Some(v) = vid {
            debug_assert!(self.shared());
            let at = self.vid_in_page();
            page[at..at + HEADER_BYTES].copy_from_slice(&v.encode());
        }
        page
    }

    /// A VID header page (separate layouts only).
    pub fn vid_page_bytes(&self, vid: &VidHeader) -> Vec<u8> {
        let mut page = vec![0xFF; self.page_bytes as usize];
        let at = self.vid_in_page();
        page[at..at + HEADER_BYTES].copy_from_slice(&vid.encode());
        page
    }

    /// The VID header's bytes in the page that holds it.
    pub fn vid_bytes<'a>(&self, page: &'a [u8]) -> &'a [u8] {
        page.get(self.vid_in_page()..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The EC header `ubinize -p 128KiB -m 2048 -s 2048 -e 7` wrote for image sequence
    /// 0x60cb3fd5 (its first 64 bytes, as `xxd` showed them): our encoder gives the same
    /// bytes, CRC included, and the decoder reads them back.
    #[test]
    fn an_ec_header_is_byte_for_byte_what_ubinize_writes() {
        let mut want = [0u8; 64];
        want[..28].copy_from_slice(&[
            0x55, 0x42, 0x49, 0x23, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x07, 0, 0, 0x08, 0, 0, 0,
            0x10, 0, 0x60, 0xcb, 0x3f, 0xd5,
        ]);
        want[60..].copy_from_slice(&[0x6e, 0x73, 0x8b, 0x56]);
        let h = EcHeader {
            ec: 7,
            vid_hdr_offset: 2048,
            data_offset: 4096,
            image_seq: 0x60cb_3fd5,
        };
        assert_eq!(h.encode(), want);
        assert_eq!(EcHeader::decode(&want), Parsed::Valid(h));
    }

    /// ubinize's VID header of the layout volume's LEB 0 (volume 0x7fffefff, dynamic,
    /// compat 5 "reject", sequence number 0).
    #[test]
    fn a_vid_header_is_byte_for_byte_what_ubinize_writes() {
        let mut want = [0u8; 64];
        want[..12].copy_from_slice(&[
            0x55, 0x42, 0x49, 0x21, 0x01, 0x01, 0x00, 0x05, 0x7f, 0xff, 0xef, 0xff,
        ]);
        want[60..].copy_from_slice(&[0xb8, 0x25, 0x64, 0xa8]);
        let h = VidHeader {
            compat: 5,
            ..VidHeader::dynamic(0x7fff_efff, 0, 0)
        };
        assert_eq!(h.encode(), want);
        assert_eq!(VidHeader::decode(&want), Parsed::Valid(h));
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let ec = EcHeader {
            ec: 77,
            vid_hdr_offset: 512,
            data_offset: 2048,
            image_seq: 0xdead_beef,
        };
        let bytes = ec.encode();
        assert_eq!(EcHeader::decode(&bytes), Parsed::Valid(ec));
        assert_eq!(VidHeader::decode(&bytes), Parsed::Corrupt, "wrong magic");
        let vid = VidHeader {
            vol_type: VOL_STATIC,
            copy: true,
            data_size: 3000,
            used_ebs: 6,
            data_crc: 9,
            ..VidHeader::dynamic(3, 5, 1 << 40)
        };
        let bytes = vid.encode();
        assert_eq!(VidHeader::decode(&bytes), Parsed::Valid(vid));
        // Every bit of the CRC-covered bytes, flipped, is caught.
        for bit in 0..CRC_COVERS * 8 {
            let mut b = bytes;
            b[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(VidHeader::decode(&b), Parsed::Corrupt, "bit {bit}");
        }
        assert_eq!(EcHeader::decode(&[0xFF; 64]), Parsed::Empty);
        assert_eq!(EcHeader::decode(&[0xFF; 8]), Parsed::Corrupt, "short");
        // A header whose fields Linux refuses, even with a good CRC.
        let lnum_past_used = VidHeader { lnum: 6, ..vid };
        assert_eq!(VidHeader::decode(&lnum_past_used.encode()), Parsed::Corrupt);
        let huge_ec = EcHeader { ec: 1 << 31, ..ec };
        assert_eq!(EcHeader::decode(&huge_ec.encode()), Parsed::Corrupt);
    }

    #[test]
    fn layouts_with_and_without_sub_pages() {
        let whole = Layout::whole_pages(2048);
        assert_eq!((whole.vid_page(), whole.data_page()), (1, 2));
        assert!(!whole.shared());
        let ec = EcHeader {
            ec: 0,
            vid_hdr_offset: 512,
            data_offset: 2048,
            image_seq: 1,
        };
        let sub = Layout::from_ec(&ec, 2048, 64).expect("a sub-page layout");
        assert_eq!(
            (sub.vid_page(), sub.vid_in_page(), sub.data_page()),
            (0, 512, 1)
        );
        assert!(sub.shared());
        let vid = VidHeader::dynamic(0, 3, 9);
        let page = sub.header_page(&ec, Some(&vid));
        assert_eq!(EcHeader::decode(&page), Parsed::Valid(ec));
        assert_eq!(VidHeader::decode(sub.vid_bytes(&page)), Parsed::Valid(vid));
        // Offsets a chip cannot hold.
        for (vid_hdr_offset, data_offset) in [(2048, 2048), (512, 1000), (512, 64 * 2048)] {
            let h = EcHeader {
                vid_hdr_offset,
                data_offset,
                ..ec
            };
            assert_eq!(
                Layout::from_ec(&h, 2048, 64),
                None,
                "{vid_hdr_offset} {data_offset}"
            );
        }
    }
}
