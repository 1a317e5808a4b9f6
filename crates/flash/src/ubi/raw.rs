//! Raw UBI images, as the tools of Linux's world keep them: what `ubinize` makes and
//! `nandwrite` (or `ubiformat -f`) flashes, and what `nanddump` reads off a board, with or
//! without each page's OOB. A raw image is a run of PEBs, each the block's pages in order.
//!
//! Putting one on a chip is what `ubiformat -f` does: the image's PEBs go, in order, onto
//! the chip's good blocks (a bad block is skipped, the image's PEB goes to the next good
//! one), each erased first and then programmed up to its last page holding anything; every
//! good block past the image gets an erase and an EC header of the image's format, with the
//! image's mean erase count. Of a dump's OOB only the free bytes are kept (the ECC bytes and
//! the bad-block marker are the chip's, which writes its own): UBI does not use them, but a
//! nandkit file system keeps its tags there, so a dump with OOB carries it whole.

use std::io::{Read, Write};

use super::header::{EcHeader, Layout, Parsed};
use crate::device::Flash;
use crate::error::FlashError;
use crate::geometry::{BlockAddr, PageAddr};

/// How a raw image lays out its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawKind {
    /// Page data only (`ubinize`, `nanddump` without `--oob`).
    Plain,
    /// Each page's data followed by its OOB (`nanddump --oob`).
    WithOob,
}

/// What an import wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// PEBs of the image written onto the chip.
    pub image_pebs: u32,
    /// Bad blocks of the chip skipped on the way.
    pub skipped_bad: u32,
    /// Good blocks past the image given an EC header.
    pub formatted: u32,
    /// PEBs of the image that held nothing (all 0xFF): erased, given an EC header.
    pub blank: u32,
}

/// The kind of a raw image of `len` bytes starting with `head` (its first two PEBs' worth
/// of bytes, or all of it) for a chip of this page, OOB and block size, or why it is not
/// one. The image must start with a valid EC header; where its length would fit both
/// kinds, the second PEB's header decides.
pub fn detect(
    head: &[u8],
    len: u64,
    page: u32,
    oob: u32,
    pages_per_block: u32,
) -> Result<RawKind, String> {
    let plain = u64::from(page) * u64::from(pages_per_block);
    let with_oob = u64::from(page + oob) * u64::from(pages_per_block);
    let ec_at = |at: u64| -> bool {
        head.get(at as usize..)
            .is_some_and(|b| matches!(EcHeader::decode(b), Parsed::Valid(_)))
    };
    if !ec_at(0) {
        return Err(match EcHeader::decode(head) {
            Parsed::Empty => "it starts with an erased PEB, not a UBI EC header".to_string(),
            _ => "it does not start with a UBI EC header (magic \"UBI#\", version 1, CRC)"
                .to_string(),
        });
    }
    for (kind, peb) in [(RawKind::Plain, plain), (RawKind::WithOob, with_oob)] {
        if len == peb || ec_at(peb) {
            if !len.is_multiple_of(peb) {
                return Err(format!(
                    "its length ({len} bytes) is not a whole number of its {peb}-byte PEBs: \
                     the image is cut short"
                ));
            }
            return Ok(kind);
        }
    }
    // Say what PEB size the image was made for, if its second header shows it.
    let seen = (1..=head.len() / 512)
        .map(|k| k as u64 * 512)
        .find(|&at| head.get(at as usize..at as usize + 4) == Some(b"UBI#"));
    Err(match seen {
        Some(at) => format!(
            "its second EC header is at byte {at}, but a block of this geometry is {plain} \
             bytes ({} with OOB): pick a geometry whose blocks match the image (ubinize -p)",
            with_oob
        ),
        None => format!(
            "its length ({len} bytes) is not a whole number of this geometry's blocks \
             ({plain} bytes, or {with_oob} with OOB)"
        ),
    })
}

/// Writes the raw image `src` (of kind `kind`) onto chip `chip` of `dev`, as
/// `ubiformat -f` does (see the module's comment); `progress` hears each PEB done.
pub fn import<F: Flash, R: Read>(
    dev: &mut F,
    chip: u32,
    mut src: R,
    kind: RawKind,
    mut progress: impl FnMut(u32),
) -> Result<Imported, FlashError> {
    let g = dev.geometry();
    let (page, oob) = (g.page_size_bytes as usize, g.oob_size_bytes as usize);
    let stride = match kind {
        RawKind::Plain => page,
        RawKind::WithOob => page + oob,
    };
    let peb_bytes = stride * g.pages_per_block as usize;
    let mut good_list = Vec::new();
    for b in 0..g.blocks_per_chip {
        if !dev.is_bad(BlockAddr::new(chip, b))? {
            good_list.push(b);
        }
    }
    let skipped_bad = g.blocks_per_chip - good_list.len() as u32;
    let mut out = Imported::default();
    let mut buf = vec![0u8; peb_bytes];
    let mut ecs: Vec<u64> = Vec::new();
    let mut format: Option<EcHeader> = None;
    let mut next = good_list.iter().copied();
    let blank_oob = vec![0xFF; oob];
    let free = g.oob_free_range();
    loop {
        match read_full(&mut src, &mut buf)? {
            0 => break,
            n if n < peb_bytes => {
                return Err(FlashError::Ubi(format!(
                    "the image ends {n} bytes into PEB {}, short of a whole block",
                    out.image_pebs
                )))
            }
            _ => {}
        }
        let Some(block) = next.next() else {
            return Err(FlashError::Ubi(format!(
                "the image has more PEBs than the chip's {} good blocks",
                good_list.len()
            )));
        };
        let pages: Vec<&[u8]> = buf.chunks(stride).map(|p| &p[..page]).collect();
        let oobs: Vec<Vec<u8>> = buf
            .chunks(stride)
            .map(|p| {
                let mut o = blank_oob.clone();
                if kind == RawKind::WithOob {
                    o[free.clone()].copy_from_slice(&p[page..][free.clone()]);
                }
                o
            })
            .collect();
        if let Parsed::Valid(h) = EcHeader::decode(pages[0]) {
            ecs.push(h.ec);
            format.get_or_insert(h);
        }
        let addr = BlockAddr::new(chip, block);
        dev.erase_block(addr)?;
        let written = |i: usize| pages[i].iter().chain(&oobs[i]).any(|&b| b != 0xFF);
        match (0..pages.len()).rposition(written) {
            None => out.blank += 1,
            Some(last) => {
                for (i, data) in pages.iter().enumerate().take(last + 1) {
                    dev.program_page(addr.page(i as u32), data, &oobs[i])?;
                }
            }
        }
        out.image_pebs += 1;
        progress(out.image_pebs);
    }
    let Some(first) = format else {
        return Err(FlashError::Ubi(
            "the image holds no valid UBI EC header".into(),
        ));
    };
    if Layout::from_ec(&first, g.page_size_bytes, g.pages_per_block).is_none() {
        return Err(FlashError::Ubi(format!(
            "the image's EC headers put the VID header at byte {} and the data at byte {}, \
             which this geometry's blocks ({} pages of {} bytes) cannot hold",
            first.vid_hdr_offset, first.data_offset, g.pages_per_block, g.page_size_bytes
        )));
    }
    let mean = ecs.iter().sum::<u64>() / ecs.len().max(1) as u64;
    let empty_ec = EcHeader { ec: mean, ..first };
    let mut header = vec![0xFF; page];
    header[..super::header::HEADER_BYTES].copy_from_slice(&empty_ec.encode());
    for block in next {
        let addr = BlockAddr::new(chip, block);
        dev.erase_block(addr)?;
        dev.program_page(addr.page(0), &header, &blank_oob)?;
        out.formatted += 1;
    }
    out.skipped_bad = skipped_bad;
    Ok(out)
}

/// Reads until `buf` is full or the source ends: the bytes read.
fn read_full<R: Read>(src: &mut R, buf: &mut [u8]) -> Result<usize, FlashError> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(FlashError::Io {
                    path: "the raw image".into(),
                    source,
                })
            }
        }
    }
    Ok(n)
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    pub pebs: u32,
    pub skipped_bad: u32,
    /// Pages ECC could not correct, written as the chip holds them.
    pub uncorrectable: Vec<PageAddr>,
}

/// Writes every good block of chip `chip`, in order, to `out` (with each page's OOB if
/// `kind` says so): the image `nandwrite` would flash back, and that `ubireader` reads.
pub fn export<W: Write>(
    dev: &mut crate::FlashDevice,
    chip: u32,
    out: &mut W,
    kind: RawKind,
    mut progress: impl FnMut(u32),
) -> Result<Exported, FlashError> {
    let g = dev.geometry();
    let mut data = vec![0u8; g.page_size_bytes as usize];
    let mut oob = vec![0u8; g.oob_size_bytes as usize];
    let mut done = Exported::default();
    let io = |source| FlashError::Io {
        path: "the raw image".into(),
        source,
    };
    for block in 0..g.blocks_per_chip {
        let addr = BlockAddr::new(chip, block);
        if dev.is_bad(addr)? {
            done.skipped_bad += 1;
            continue;
        }
        for p in 0..g.pages_per_block {
            let at = PageAddr::new(chip, block, p);
            match dev.read_page(at, &mut data, &mut oob) {
                Ok(_) => {}
                Err(FlashError::PowerLost) => return Err(FlashError::PowerLost),
                Err(FlashError::ChipFailed(c)) => return Err(FlashError::ChipFailed(c)),
                Err(_) => {
                    done.uncorrectable.push(at);
                    let raw = dev.raw_page(at)?;
                    let (d, o) = raw.split_at(data.len());
                    data.copy_from_slice(d);
                    oob.copy_from_slice(o);
                }
            }
            out.write_all(&data).map_err(io)?;
            if kind == RawKind::WithOob {
                out.write_all(&oob).map_err(io)?;
            }
        }
        done.pebs += 1;
        progress(done.pebs);
    }
    Ok(done)
}
