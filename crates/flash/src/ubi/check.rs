//! fsck for the UBI layer: every chip's headers against the map attach built from them.

use super::chip_map::{vol_id, PebState};
use super::header::{EcHeader, Parsed, VidHeader};
use super::Ubi;
use crate::command::{Command, Reply};
use crate::device::Flash;
use crate::error::FlashError;
use crate::geometry::PageAddr;

/// Problems: headers that disagree with the volume's shape or with the map, a chip past its
/// bad-block reserve, a chip with no free PEB.
pub(super) fn check<F: Flash>(ubi: &Ubi, dev: &mut F) -> Result<Vec<String>, FlashError> {
    let mut problems = Vec::new();
    for m in &ubi.maps {
        let chip = m.chip;
        if ubi.is_dead(chip) {
            // Reported as the array's state (degraded), not as a fault of its maps.
            continue;
        }
        let mut reads = Vec::new();
        let mut pebs = Vec::new();
        for (peb, p) in m.pebs.iter().enumerate() {
            if matches!(p.state, PebState::Used { .. } | PebState::Free) {
                for page in [0, ubi.layout.vid_page()] {
                    reads.push(Command::Read {
                        addr: PageAddr {
                            chip,
                            block: peb as u32,
                            page,
                        },
                    });
                }
                pebs.push(peb as u32);
            }
        }
        let done = dev.submit(reads);
        for (peb, pair) in pebs.iter().zip(done.chunks(2)) {
            let page = |i: usize| match &pair[i].result {
                Ok(Reply::Read { data, .. }) => Ok(data.clone()),
                Err(FlashError::PowerLost) => Err(FlashError::PowerLost),
                Err(_) | Ok(_) => Ok(Vec::new()),
            };
            let (ec, vid) = (page(0)?, page(1)?);
            let vid = ubi.layout.vid_bytes(&vid);
            let state = m.pebs[*peb as usize].state;
            match EcHeader::decode(&ec) {
                Parsed::Valid(h) => {
                    if h.vid_hdr_offset != ubi.layout.vid_hdr_offset
                        || h.data_offset != ubi.layout.data_offset
                        || h.image_seq != ubi.image_seq
                    {
                        problems.push(format!(
                            "UBI chip {chip} PEB {peb}: its EC header describes another format \
                             (VID header at {}, data at {}, image {:#x})",
                            h.vid_hdr_offset, h.data_offset, h.image_seq
                        ));
                    }
                    if h.ec.min(u64::from(u32::MAX)) as u32 != m.pebs[*peb as usize].ec {
                        problems.push(format!(
                            "UBI chip {chip} PEB {peb}: EC header says {} erases, the map {}",
                            h.ec, m.pebs[*peb as usize].ec
                        ));
                    }
                }
                _ => problems.push(format!(
                    "UBI chip {chip} PEB {peb}: {} with no valid EC header",
                    if state == PebState::Free {
                        "free"
                    } else {
                        "in use"
                    }
                )),
            }
            match (state, VidHeader::decode(vid)) {
                (PebState::Used { vol, leb }, Parsed::Valid(v))
                    if v.vol_id == vol_id(vol) && v.lnum == leb => {}
                (PebState::Used { vol, leb }, _) => problems.push(format!(
                    "UBI chip {chip} PEB {peb}: mapped to LEB {leb} of volume {} without a \
                     VID header saying so",
                    vol_id(vol)
                )),
                (PebState::Free, Parsed::Empty) => {}
                (PebState::Free, _) => problems.push(format!(
                    "UBI chip {chip} PEB {peb}: free, but its VID page is written"
                )),
                _ => {}
            }
        }
        for (leb, &peb) in m.eba.iter().enumerate() {
            if let Some(p) = m.pebs.get(peb as usize) {
                let holds = match p.state {
                    PebState::Used { vol, leb: l } => {
                        Some(vol_id(vol)) == m.fs_vol && l == leb as u32
                    }
                    _ => false,
                };
                if !holds {
                    problems.push(format!(
                        "UBI chip {chip}: LEB {leb} maps to PEB {peb}, which is not its holder"
                    ));
                }
            }
        }
        for lnum in 0..super::vtbl::LAYOUT_VOLUME_EBS {
            if !super::attach::lnum_table_ok(dev, ubi, chip, lnum)? {
                problems.push(format!(
                    "UBI chip {chip}: copy {lnum} of the volume table is missing or damaged"
                ));
            }
        }
        let bad = m.bad();
        if bad > m.bad_limit {
            problems.push(format!(
                "UBI chip {chip}: {bad} bad blocks, past its reserve of {}",
                m.bad_limit
            ));
        }
        if m.free.is_empty() {
            problems.push(format!("UBI chip {chip}: no free eraseblock left"));
        }
    }
    Ok(problems)
}
