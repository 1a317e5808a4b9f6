//! Reads through `&FileSystem` (`read_shared`): several threads read at once and get the
//! bytes an exclusive read gets; what a shared read cannot change itself (access times, a
//! block's scrub flag) waits for the next exclusive call.

use crate::common::*;
use nandkit_flash::{BlockAddr, PageAddr};
use nandkit_fs::*;

/// Files of different sizes and contents: (ino, bytes).
fn files(fs: &mut Fs, chunk: usize) -> Vec<(Ino, Vec<u8>)> {
    let sizes = [
        1,
        chunk - 1,
        chunk,
        3 * chunk + 17,
        9 * chunk,
        20 * chunk + 5,
    ];
    let mut out = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let name = format!("f{i}");
        let ino = fs.create(ROOT_INO, name.as_bytes(), file()).unwrap().ino;
        let data = pattern(i as u64 + 1, size);
        assert_eq!(fs.write(ino, 0, &data).unwrap(), size);
        out.push((ino, data));
    }
    // One file keeps a partial chunk in its write cache: a shared read must see it.
    let (ino, data) = out.last_mut().unwrap();
    let tail = pattern(99, 300);
    fs.write(*ino, data.len() as u64, &tail).unwrap();
    data.extend_from_slice(&tail);
    out
}

/// Reads `[offset, offset + len)` of a file through the shared path.
fn shared(fs: &Fs, ino: Ino, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xA5; len];
    let n = fs.read_shared(ino, offset, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn threads_read_together_and_see_what_an_exclusive_read_sees() {
    for dev in [Dev::Tiny, Dev::Small, Dev::Array] {
        let mut fs = format(dev);
        let files = files(&mut fs, dev.chunk());
        let fs = &fs;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let files = &files;
                s.spawn(move || {
                    // Each thread walks the files in its own order and record size.
                    let record = [1, 700, dev.chunk(), 5 * dev.chunk()][t as usize];
                    for k in 0..files.len() {
                        let (ino, want) = &files[(k + t as usize) % files.len()];
                        let mut got = Vec::new();
                        while got.len() < want.len() + 1 {
                            let part = shared(fs, *ino, got.len() as u64, record);
                            if part.is_empty() {
                                break;
                            }
                            got.extend_from_slice(&part);
                        }
                        assert_bytes(&got, want, &format!("{} thread {t} ino {ino}", dev.name()));
                    }
                });
            }
        });
    }
}

#[test]
fn a_shared_read_leaves_the_access_time_to_its_caller() {
    let dev = Dev::Tiny;
    let flash = format(dev).unmount().unwrap();
    let mut fs = FileSystem::mount(
        flash,
        MountOptions {
            atime: AtimePolicy::Relatime,
            ..opts()
        },
    )
    .unwrap();
    let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    fs.write(ino, 0, b"hello").unwrap();
    let before = fs.getattr(ino).unwrap().atime;
    assert_eq!(shared(&fs, ino, 0, 5), b"hello");
    assert_eq!(
        fs.getattr(ino).unwrap().atime,
        before,
        "a shared read moved atime"
    );
    assert!(
        fs.atime_due(ino),
        "written since last read: relatime wants a new atime"
    );
    fs.access(ino).unwrap();
    let after = fs.getattr(ino).unwrap().atime;
    assert!(after > before);
    assert!(!fs.atime_due(ino), "relatime: read since the last change");
}

#[test]
fn a_scrub_asked_for_by_a_shared_read_is_flagged_by_the_next_exclusive_call() {
    let dev = Dev::Tiny;
    let mut fs = format(dev);
    let ino = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
    let data = pattern(7, 4 * dev.chunk());
    fs.write(ino, 0, &data).unwrap();
    fs.fsync(ino).unwrap();
    // Correctable errors on every programmed page, at the scrub threshold.
    let bits = fs.device().config().ecc.scrub_threshold_bits;
    let g = dev.config().geometry;
    for b in 0..g.blocks_per_chip {
        let written = fs
            .device_mut()
            .block_info(BlockAddr::new(0, b))
            .unwrap()
            .write_ptr;
        for p in 0..written.min(g.pages_per_block) {
            fs.device_mut()
                .inject_bit_errors(PageAddr::new(0, b, p), 0, bits)
                .unwrap();
        }
    }
    let flagged = |fs: &Fs| fs.block_table().iter().filter(|b| b.scrub()).count();
    assert_eq!(flagged(&fs), 0);
    assert_bytes(&shared(&fs, ino, 0, data.len()), &data, "corrected read");
    assert_eq!(
        flagged(&fs),
        0,
        "a shared reader does not touch the block table"
    );
    fs.read(ino, 0, &mut [0u8; 1]).unwrap();
    assert!(
        flagged(&fs) > 0,
        "the exclusive call after it flags the block"
    );
}
