//! nandkit's own UBI headers of before Linux's format (nandkit up to 2026-12-07): read only
//! to convert an image to Linux's format ([`convert`]), which keeps every LEB where the file
//! system above expects it.
//!
//! The old headers were 40 bytes, little-endian, closed by a CRC-32C, one page each: the EC
//! header in page 0 ("UBI#", version 1, parity flag at byte 5, erase count at 8, LEBs at 16,
//! bad-block limit at 20, wear-levelling threshold at 24, image sequence at 28), the VID
//! header in page 1 ("UBI!", version 1, copy flag at 5, LEB at 8, copied pages at 12,
//! sequence number at 16, copied data's CRC at 24, image sequence at 28). The data started
//! at page 2, as in Linux's layout without sub-pages, so a LEB keeps its size.

use std::collections::BTreeMap;

use super::header::{EcHeader, Layout, VidHeader};
use super::vtbl::{self, Volume, LAYOUT_COMPAT, LAYOUT_VOLUME_EBS, LAYOUT_VOLUME_ID};
use super::{FS_PARITY_VOLUME, FS_VOLUME, FS_VOLUME_ID};
use crate::device::Flash;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, PageAddr};

const BODY: usize = 36;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The 36-byte body of an old header with this magic, if its CRC holds.
fn body<'a>(page: &'a [u8], magic: &[u8; 4]) -> Option<&'a [u8]> {
    let b = page.get(..BODY + 4)?;
    (&b[..4] == magic && b[4] == 1 && crc32c::crc32c(&b[..BODY]).to_le_bytes() == b[BODY..BODY + 4])
        .then_some(&b[..BODY])
}

/// Whether a page holds an old EC header.
pub fn is_legacy_ec(page: &[u8]) -> bool {
    body(page, b"UBI#").is_some()
}

struct OldEc {
    ec: u64,
    lebs: u32,
    parity: bool,
    image_seq: u32,
}

struct OldVid {
    leb: u32,
    sqnum: u64,
    copy: bool,
    data_pages: u32,
    data_crc: u32,
}

fn old_ec(page: &[u8]) -> Option<OldEc> {
    let b = body(page, b"UBI#")?;
    Some(OldEc {
        ec: u64_at(b, 8),
        lebs: u32_at(b, 16),
        parity: b[5] == 1,
        image_seq: u32_at(b, 28),
    })
}

fn old_vid(page: &[u8]) -> Option<(OldVid, u32)> {
    let b = body(page, b"UBI!")?;
    Some((
        OldVid {
            copy: b[5] != 0,
            leb: u32_at(b, 8),
            data_pages: u32_at(b, 12),
            sqnum: u64_at(b, 16),
            data_crc: u32_at(b, 24),
        },
        u32_at(b, 28),
    ))
}

/// What a conversion did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Converted {
    pub chips: u32,
    pub lebs_per_chip: u32,
    /// LEBs that held data, moved with their data into PEBs of the new format.
    pub lebs_moved: u32,
    pub parity: bool,
}

type Page = (Vec<u8>, Vec<u8>);

fn read<F: Flash>(dev: &mut F, addr: PageAddr) -> Result<Option<Page>, FlashError> {
    let g = dev.geometry();
    let mut data = vec![0; g.page_size_bytes as usize];
    let mut oob = vec![0; g.oob_size_bytes as usize];
    match dev.read_page(addr, &mut data, &mut oob) {
        Ok(_) => Ok(Some((data, oob))),
        Err(FlashError::PowerLost) => Err(FlashError::PowerLost),
        Err(_) => Ok(None),
    }
}

/// Rewrites every chip of `dev` from the old headers to Linux's format: each LEB's pages
/// (data and OOB) go, with new headers, into a PEB of the new format; the LEB count stays, so
/// the file system above finds its blocks where they were; the layout volume's two PEBs come
/// out of the bad-block reserve. The caller works on a copy of the image and puts it in
/// place only when this returns (a cut part way leaves a mix of both formats).
pub fn convert<F: Flash>(dev: &mut F) -> Result<Converted, FlashError> {
    let g = dev.geometry();
    let layout = Layout::whole_pages(g.page_size_bytes);
    let mut out = Converted {
        chips: g.chips,
        ..Converted::default()
    };
    for chip in 0..g.chips {
        // The old map: per LEB its newest PEB whose copy (if it is one) is whole.
        let mut ecs: BTreeMap<u32, u64> = BTreeMap::new();
        let mut holders: BTreeMap<u32, (u32, OldVid)> = BTreeMap::new();
        let mut shape: Option<OldEc> = None;
        let mut good = Vec::new();
        for block in 0..g.blocks_per_chip {
            if dev.is_bad(BlockAddr::new(chip, block))? {
                continue;
            }
            good.push(block);
            let Some((p0, _)) = read(dev, PageAddr::new(chip, block, 0))? else {
                continue;
            };
            let Some(ec) = old_ec(&p0) else { continue };
            ecs.insert(block, ec.ec);
            let Some((p1, _)) = read(dev, PageAddr::new(chip, block, 1))? else {
                continue;
            };
            let Some((vid, seq)) = old_vid(&p1) else {
                shape.get_or_insert(ec);
                continue;
            };
            if seq != ec.image_seq || vid.leb >= ec.lebs {
                continue;
            }
            if vid.copy && !old_copy_intact(dev, chip, block, &vid)? {
                continue;
            }
            let newer = holders
                .get(&vid.leb)
                .is_none_or(|(_, o)| vid.sqnum > o.sqnum);
            if newer {
                holders.insert(vid.leb, (block, vid));
            }
            shape.get_or_insert(ec);
        }
        let Some(shape) = shape else {
            return Err(FlashError::Ubi(format!(
                "chip {chip} carries no old nandkit UBI header: nothing to convert"
            )));
        };
        out.lebs_per_chip = shape.lebs;
        out.parity = shape.parity;
        // Every LEB's pages, before their PEBs are erased.
        let mut lebs: BTreeMap<u32, Vec<Page>> = BTreeMap::new();
        for (&leb, (peb, _)) in &holders {
            let mut pages = Vec::new();
            for p in layout.data_page()..g.pages_per_block {
                let page = read(dev, PageAddr::new(chip, *peb, p))?.ok_or_else(|| {
                    FlashError::Ubi(format!(
                        "chip {chip} PEB {peb} (LEB {leb}): page {p} cannot be read; the \
                         image is left as it was"
                    ))
                })?;
                pages.push(page);
            }
            let end = pages
                .iter()
                .rposition(|(d, o)| d.iter().chain(o).any(|&b| b != 0xFF))
                .map_or(0, |i| i + 1);
            pages.truncate(end);
            lebs.insert(leb, pages);
        }
        if good.len() < (shape.lebs + LAYOUT_VOLUME_EBS) as usize {
            return Err(FlashError::Ubi(format!(
                "chip {chip} has {} good blocks, too few for {} LEBs and the volume table",
                good.len(),
                shape.lebs
            )));
        }
        let mean = ecs.values().sum::<u64>() / ecs.len().max(1) as u64;
        let image_seq = shape.image_seq;
        let volumes = vec![Volume::dynamic(
            FS_VOLUME_ID,
            if shape.parity {
                FS_PARITY_VOLUME
            } else {
                FS_VOLUME
            },
            shape.lebs,
        )];
        let leb_bytes = (g.pages_per_block - layout.data_page()) * g.page_size_bytes;
        let table = vtbl::table_pages(
            &volumes,
            leb_bytes,
            g.page_size_bytes as usize,
            g.oob_size_bytes as usize,
        );
        let mut sqnum = 0u64;
        // What goes where: the layout volume's two LEBs, then the file system's LEBs, onto
        // the good PEBs in order; the rest erased with an EC header.
        let mut contents: Vec<(u32, u32, Vec<Page>)> = Vec::new();
        for lnum in 0..LAYOUT_VOLUME_EBS {
            contents.push((LAYOUT_VOLUME_ID, lnum, table.clone()));
        }
        for (leb, pages) in lebs {
            contents.push((FS_VOLUME_ID, leb, pages));
            out.lebs_moved += 1;
        }
        let blank_oob = vec![0xFF; g.oob_size_bytes as usize];
        let mut contents = contents.into_iter();
        for &block in &good {
            let ec = ecs.get(&block).copied().unwrap_or(mean) + 1;
            let addr = BlockAddr::new(chip, block);
            dev.erase_block(addr)?;
            let ech = EcHeader {
                ec: ec.min(0x7FFF_FFFF),
                vid_hdr_offset: layout.vid_hdr_offset,
                data_offset: layout.data_offset,
                image_seq,
            };
            dev.program_page(addr.page(0), &layout.header_page(&ech, None), &blank_oob)?;
            let Some((vol, lnum, pages)) = contents.next() else {
                continue;
            };
            if pages.is_empty() {
                // An old mapping with no page written: left unmapped (the PEB stays free).
                continue;
            }
            sqnum += 1;
            let compat = if vol == LAYOUT_VOLUME_ID {
                LAYOUT_COMPAT
            } else {
                0
            };
            let vid = VidHeader {
                compat,
                ..VidHeader::dynamic(vol, lnum, sqnum)
            };
            dev.program_page(addr.page(1), &layout.vid_page_bytes(&vid), &blank_oob)?;
            for (i, (d, o)) in pages.iter().enumerate() {
                dev.program_page(addr.page(layout.data_page() + i as u32), d, o)?;
            }
        }
    }
    Ok(out)
}

/// An old copy's pages read back whole (its CRC-32C over data and the OOB's free bytes).
fn old_copy_intact<F: Flash>(
    dev: &mut F,
    chip: u32,
    peb: u32,
    vid: &OldVid,
) -> Result<bool, FlashError> {
    let g = dev.geometry();
    if vid.data_pages > g.pages_per_block - 2 {
        return Ok(false);
    }
    let free = g.oob_free_range();
    let mut crc = 0;
    for i in 0..vid.data_pages {
        let Some((d, o)) = read(dev, PageAddr::new(chip, peb, 2 + i))? else {
            return Ok(false);
        };
        crc = crc32c::crc32c_append(crc, &d);
        crc = crc32c::crc32c_append(crc, &o[free.clone()]);
    }
    Ok(crc == vid.data_crc)
}
