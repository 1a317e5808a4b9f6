//! Every decoder of bytes read from flash, fed arbitrary bytes: none may panic or hang,
//! and what one accepts must encode back to bytes it decodes the same way (a decoder that
//! accepts something its encoder cannot write would let damage through as data).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandkit_flash::ubi::header::{EcHeader, Layout, Parsed, VidHeader};
use nandkit_flash::ubi::{raw, vtbl};
use nandkit_fs::format::anchor::{CheckpointPointer, FsRecord};
use nandkit_fs::format::checkpoint::CheckpointImage;
use nandkit_fs::format::record::{decode_xattrs, encode_xattrs, Record};
use nandkit_fs::format::special::Special;
use nandkit_fs::format::summary::Summary;
use nandkit_fs::format::tags::{TagLayout, TagRead, Tags};
use nandkit_fs::ubifs::{media, MemVolume, UbifsImage};

fuzz_target!(|data: &[u8]| {
    for (layout, page) in [(TagLayout::Large, 2048), (TagLayout::Small, 512)] {
        if let TagRead::Valid(t) = Tags::decode(data, layout, page) {
            let again = t.encode(layout, page);
            assert_eq!(Tags::decode(&again, layout, page), TagRead::Valid(t));
        }
    }
    if let Some(r) = Record::decode(data) {
        assert_eq!(Record::decode(&r.encode()), Some(r));
    }
    if let Some(s) = Special::decode(data) {
        for page in [512usize, 2048, 4096] {
            let _ = Summary::from_special(&s, page as u32, page);
        }
    }
    if let Some(x) = decode_xattrs(data) {
        assert_eq!(decode_xattrs(&encode_xattrs(&x)), Some(x));
    }
    if let Some(r) = FsRecord::decode(data) {
        assert_eq!(FsRecord::decode(&r.encode()), Some(r));
    }
    let _ = FsRecord::decode_any_version(data);
    if let Some(p) = CheckpointPointer::decode(data) {
        assert_eq!(CheckpointPointer::decode(&p.encode()), Some(p));
    }
    for (page, ppb) in [(2048u32, 64u32), (512, 32)] {
        let _ = CheckpointImage::decode(data, page, ppb);
    }
    // UBI, in Linux's format: both headers, a volume table, a raw image's first bytes.
    if let Parsed::Valid(h) = EcHeader::decode(data) {
        assert_eq!(EcHeader::decode(&h.encode()), Parsed::Valid(h));
        let _ = Layout::from_ec(&h, 2048, 64);
    }
    if let Parsed::Valid(h) = VidHeader::decode(data) {
        assert_eq!(VidHeader::decode(&h.encode()), Parsed::Valid(h));
    }
    for leb in [126_976u32, 15_360] {
        let slots = vtbl::slots(leb);
        if let Ok(v) = vtbl::decode(data, slots, leb) {
            assert_eq!(vtbl::decode(&vtbl::encode(&v, slots), slots, leb), Ok(v));
        }
    }
    let _ = raw::detect(data, data.len() as u64, 512, 16, 32);
    // UBIFS nodes, in Linux's format: what decodes encodes back to the same node.
    if let Ok((h, n)) = media::InoNode::decode(data) {
        let again = n.encode(h.sqnum, h.group_type);
        assert_eq!(media::InoNode::decode(&again).map(|x| x.1), Ok(n));
    }
    if let Ok((h, n)) = media::DataNode::decode(data) {
        let again = n.encode(h.sqnum, h.group_type);
        assert_eq!(media::DataNode::decode(&again).map(|x| x.1), Ok(n));
    }
    if let Ok((h, n)) = media::DentNode::decode(data) {
        let again = n.encode(h.sqnum, h.group_type);
        assert_eq!(media::DentNode::decode(&again).map(|x| x.1), Ok(n));
    }
    if let Ok((h, n)) = media::IdxNode::decode(data) {
        assert_eq!(media::IdxNode::decode(&n.encode(h.sqnum)).map(|x| x.1), Ok(n));
    }
    if let Ok((h, n)) = media::OrphNode::decode(data) {
        assert_eq!(media::OrphNode::decode(&n.encode(h.sqnum)).map(|x| x.1), Ok(n));
    }
    let _ = media::SbNode::decode(data);
    let _ = media::MstNode::decode(data);
    let _ = media::TrunNode::decode(data);
    // A whole volume of small LEBs: opening it (superblock, master, index, log replay)
    // and walking it answers or errs, never panics.
    if let Ok(mut img) = UbifsImage::open(MemVolume::from_image(data, 15 * 1024, 12)) {
        let _ = img.walk();
        let _ = img.check_leaves();
    }
});
