//! The checkpoint always has room: a device filled to ENOSPC, with data or with objects,
//! still unmounts with a checkpoint, and the next mount uses it. And images of the previous
//! on-flash format are refused with a clear error.

use crate::common::*;
use nandkit_flash::{FlashDevice, PageAddr};
use nandkit_fs::*;

/// Writes a file until the device says ENOSPC.
fn fill_with_data(fs: &mut Fs) -> u64 {
    let f = fs.create(ROOT_INO, b"fill", file()).unwrap().ino;
    let chunk = pattern(3, 16 * fs.chunk_bytes() as usize);
    let mut size = 0u64;
    loop {
        match fs.write(f, size, &chunk) {
            Ok(n) if n == chunk.len() => size += n as u64,
            Ok(n) => {
                size += n as u64;
                break;
            }
            Err(e) => {
                assert_eq!(e.errno(), 28, "{e}");
                break;
            }
        }
    }
    fs.sync().unwrap();
    size
}

#[test]
fn a_full_device_still_gets_its_checkpoint() {
    for dev in Dev::ALL {
        // Full of one file's data.
        let mut fs = format(dev);
        let size = fill_with_data(&mut fs);
        assert!(size > 0);
        let free = fs.statfs().free_chunks;
        assert!(free < 40, "{}: {free} chunks still free", dev.name());
        let (flash, written) = fs.unmount_reporting().unwrap();
        assert!(
            written,
            "{}: no checkpoint on a device full of data",
            dev.name()
        );
        let mut fs = mount(flash).unwrap();
        assert_eq!(fs.mount_method(), MountMethod::Checkpoint, "{}", dev.name());
        assert_fsck(&mut fs, "full of data, checkpoint mount");
        let f = fs.resolve("/fill").unwrap();
        assert_eq!(fs.getattr(f).unwrap().size, size);

        // Full of empty objects.
        let mut fs = format(dev);
        let mut made = 0u32;
        loop {
            match fs.create(ROOT_INO, format!("o{made}").as_bytes(), file()) {
                Ok(_) => made += 1,
                Err(e) => {
                    assert_eq!(e.errno(), 28, "{e}");
                    break;
                }
            }
        }
        assert!(made > 100, "{}: only {made} objects", dev.name());
        let (flash, written) = fs.unmount_reporting().unwrap();
        assert!(
            written,
            "{}: no checkpoint on a device full of objects",
            dev.name()
        );
        let mut fs = mount(flash).unwrap();
        assert_eq!(fs.mount_method(), MountMethod::Checkpoint, "{}", dev.name());
        assert_eq!(fs.statfs().objects, u64::from(made));
        assert_fsck(&mut fs, "full of objects, checkpoint mount");
    }
}

/// What version 1 wrote as the first page of a file system: its record's header tags (40
/// bytes: kind 2, format version 1, ..., CRC32C of the first 36 bytes).
fn v1_tags() -> [u8; 40] {
    let mut t = [0u8; 40];
    t[0] = 2;
    t[1] = 1;
    t[12..16].copy_from_slice(&100u32.to_le_bytes());
    let c = crc32c::crc32c(&t[..36]);
    t[36..].copy_from_slice(&c.to_le_bytes());
    t
}

#[test]
fn a_version_1_image_is_refused_by_name() {
    for dev in Dev::ALL {
        // Version 1 images come from a simulator that stored no ECC bytes (their sidecar
        // says so, and they open that way).
        let mut config = dev.config();
        config.geometry.oob_ecc_bytes = 0;
        config.ecc.check_bytes = 0;
        let g = config.geometry;
        let mut flash = FlashDevice::ram(config).unwrap();
        let mut data = vec![0xFFu8; g.page_size_bytes as usize];
        let mut oob = vec![0xFFu8; g.oob_size_bytes as usize];
        if g.oob_size_bytes >= 42 {
            oob[2..42].copy_from_slice(&v1_tags());
        } else {
            let at = data.len() - 40;
            data[at..].copy_from_slice(&v1_tags());
        }
        nandkit_flash::Flash::program_page(&mut flash, PageAddr::new(0, 0, 0), &data, &oob)
            .unwrap();
        let e = match mount(flash) {
            Ok(_) => panic!("{}: a version 1 image mounted", dev.name()),
            Err(e) => e,
        };
        let msg = e.to_string();
        assert!(
            matches!(
                e,
                FsError::OldFormat {
                    found: 1,
                    supported: 3
                }
            ) && msg.contains("version 1")
                && msg.contains("version 3"),
            "{}: {msg}",
            dev.name()
        );
        assert_eq!(e.errno(), 22);
    }
}

/// A version 2 image (whose file system record says so) is refused by name too: format 3
/// keeps hard links, attribute sets and long symlink targets in objects of their own,
/// which a version 2 reader would not know.
#[test]
fn a_version_2_image_is_refused_by_name() {
    use nandkit_flash::{BlockAddr, Flash};
    use nandkit_fs::format::special::Special;
    use nandkit_fs::format::tags::{SpecialKind, SpecialTags, Tags};
    use nandkit_fs::layout::Layout;
    for dev in Dev::ALL {
        let fs = format(dev);
        let anchors = fs.anchor_blocks();
        let mut src = fs.unmount().unwrap();
        let config = src.config().clone();
        let g = config.geometry;
        let layout = Layout::new(g).unwrap();
        let mut dst = FlashDevice::ram(config).unwrap();
        let page = g.page_size_bytes as usize;
        for block in 0..g.blocks_per_chip {
            let baddr = BlockAddr::new(0, block);
            if src.is_bad(baddr).unwrap() {
                if !dst.is_bad(baddr).unwrap() {
                    dst.mark_bad(baddr).unwrap();
                }
                continue;
            }
            for p in 0..g.pages_per_block {
                let addr = PageAddr::new(0, block, p);
                let raw = src.raw_page(addr).unwrap();
                if raw.iter().all(|&b| b == 0xFF) {
                    break;
                }
                let (mut data, mut oob) = (raw[..page].to_vec(), raw[page..].to_vec());
                if p == 0 && anchors.contains(&block) {
                    // The same record, saying version 2.
                    let mut s = Special::decode(&data).expect("an anchor page");
                    assert_eq!(s.payload[0], 3, "{}: records say version 3", dev.name());
                    s.payload[0] = 2;
                    let tags = Tags::Special(SpecialTags {
                        kind: SpecialKind::Anchor,
                    });
                    (data, oob) = layout.encode_page(&tags, &s.encode());
                }
                dst.program_page(addr, &data, &oob)
                    .unwrap_or_else(|e| panic!("{}: block {block} page {p}: {e}", dev.name()));
            }
        }
        let e = match mount(dst) {
            Ok(_) => panic!("{}: a version 2 image mounted", dev.name()),
            Err(e) => e,
        };
        assert!(
            matches!(
                e,
                FsError::OldFormat {
                    found: 2,
                    supported: 3
                }
            ),
            "{}: {e}",
            dev.name()
        );
    }
}
