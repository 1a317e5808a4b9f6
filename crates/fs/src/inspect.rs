//! What a raw page says, for tools (`nandkit dump`): its tags decoded and its contents
//! checked, without mounting anything.

use serde::Serialize;

use crate::format::record::Record;
use crate::format::special::Special;
use crate::format::tags::{self, SpecialKind, TagRead, Tags};
use crate::layout::Layout;

/// One page as a tool shows it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PageView {
    /// data, header, summary, checkpoint, anchor, erased, or garbage (torn or corrupt tags).
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub obj: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_bytes: Option<u32>,
    /// Data: write serial (only its low bits in the small tag layout). Header: its version.
    /// Summary: the block's first serial. Checkpoint: its id. Anchor: the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    /// Header: the directory of its name (large layout tags, or the record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// Header: the file size it records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Do the contents pass the checks the format has for them (data CRC, record or
    /// frame CRC)? `None` where there is none to make (small-layout data: the chip's ECC
    /// checks it on a real read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_ok: Option<bool>,
}

/// Decodes a page from its raw data and OOB bytes.
pub fn page_view(layout: &Layout, data: &[u8], oob: &[u8]) -> PageView {
    let mut v = PageView::default();
    match layout.decode_tags(oob) {
        TagRead::Erased => v.kind = "erased".into(),
        TagRead::Garbage => v.kind = "garbage".into(),
        TagRead::Valid(Tags::Data(d)) => {
            v.kind = "data".into();
            v.obj = Some(d.obj);
            v.chunk = Some(d.chunk);
            v.n_bytes = d.n_bytes.or_else(|| tags::inband_len(data));
            v.serial = Some(d.serial.full().unwrap_or(u64::from(d.serial.low())));
            v.check_ok = d.data_crc.map(|c| {
                v.n_bytes
                    .and_then(|n| data.get(..n as usize))
                    .is_some_and(|bytes| crate::format::crc(bytes) == c)
            });
        }
        TagRead::Valid(Tags::Header(h)) => {
            v.kind = "header".into();
            v.obj = Some(h.obj);
            let rec = Record::decode(data);
            v.check_ok = Some(rec.is_some());
            v.serial = rec.as_ref().map(|r| r.version).or(h.version.full());
            let facts = rec.as_ref().map(|r| r.facts(h.obj)).or(h.facts);
            v.parent = facts.map(|f| f.parent);
            v.size = facts.map(|f| f.size);
        }
        TagRead::Valid(Tags::Special(s)) => {
            v.kind = match s.kind {
                SpecialKind::Summary => "summary",
                SpecialKind::Checkpoint => "checkpoint",
                SpecialKind::Anchor => "anchor",
            }
            .into();
            let frame = Special::decode(data);
            v.check_ok = Some(frame.is_some());
            if let Some(f) = frame {
                v.serial = Some(f.id);
                v.chunk = Some(f.index);
                v.n_bytes = Some(f.payload.len() as u32);
            }
        }
    }
    v
}
