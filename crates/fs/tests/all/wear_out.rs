//! Blocks that wear out. With a rated endurance of a few cycles, an overwrite-heavy
//! workload drives blocks past their limits, and programs and erases into them fail. The
//! file system must retire them (their live data moved out, the block never used again),
//! keep every fsync'd byte, stay fsck-clean across clean and crash remounts, and once too
//! few good blocks remain answer with a clean error, never a panic. On every profile.

use std::collections::BTreeMap;

use crate::common::*;
use nandkit_flash::FlashDevice;
use nandkit_fs::*;

/// Rated program/erase cycles: each block fails somewhere between 6 and 9 erases.
const ENDURANCE: u32 = 6;

fn worn_format(dev: Dev, profile: &str) -> Fs {
    let mut config = dev.config();
    config.wear.endurance_cycles = ENDURANCE;
    config.wear.endurance_spread = 0.5;
    let fs_config = FsConfig::profile(profile, dev.blocks()).expect("profile");
    format_device(FlashDevice::ram(config).expect("ram device"), fs_config)
}

/// What every file must read back as: its contents at its last successful fsync.
type Synced = BTreeMap<Ino, Vec<u8>>;

/// A write whose fsync failed: each of its chunks may read old or new.
struct Failed {
    ino: Ino,
    off: usize,
    bytes: Vec<u8>,
}

fn verify(fs: &mut Fs, synced: &Synced, failed: Option<&Failed>, chunk: usize, ctx: &str) {
    for (&ino, want) in synced {
        let got = read_all(fs, ino).unwrap_or_else(|e| panic!("{ctx}: read of {ino}: {e}"));
        match failed.filter(|f| f.ino == ino) {
            None => assert_bytes(&got, want, &format!("{ctx}: file {ino}")),
            Some(f) => {
                let end = f.off + f.bytes.len();
                assert!(
                    got.len() == want.len() || got.len() == end.max(want.len()),
                    "{ctx}: file {ino} is {} bytes",
                    got.len()
                );
                for (k, piece) in got.chunks(chunk).enumerate() {
                    let at = k * chunk;
                    let old = want.get(at..(at + piece.len()).min(want.len()));
                    let new = (at >= f.off && at < end).then(|| {
                        &f.bytes[at - f.off..(at - f.off + piece.len()).min(f.bytes.len())]
                    });
                    assert!(
                        old == Some(piece) || new == Some(piece),
                        "{ctx}: file {ino} chunk {k} is neither its old nor its new data"
                    );
                }
            }
        }
    }
    assert_fsck(fs, ctx);
}

fn remount(fs: Fs, crash: bool, ctx: &str) -> Fs {
    let (mut flash, nv) = if crash {
        fs.into_parts()
    } else {
        fs.unmount_parts()
            .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"))
    };
    if crash {
        flash.power_cycle().unwrap();
    }
    let nv = nv.map(|mut n| {
        if crash {
            n.crash(ctx.len() as u64);
        }
        n
    });
    mount_parts(flash, nv).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"))
}

/// Overwrites ranges of five files with an fsync after each, remounting now and then,
/// until a call fails; returns the blocks retired on the way.
fn wear_out(dev: Dev, profile: &str) -> u64 {
    let c = dev.chunk();
    let mut fs = worn_format(dev, profile);
    let mut synced = Synced::new();
    for i in 0..5u64 {
        let ino = fs
            .create(ROOT_INO, format!("f{i}").as_bytes(), file())
            .unwrap()
            .ino;
        let data = pattern(i, 6 * c + 100);
        fs.write(ino, 0, &data).unwrap();
        fs.fsync(ino).unwrap();
        synced.insert(ino, data);
    }
    let inos: Vec<Ino> = synced.keys().copied().collect();
    let mut retired = 0;
    let mut stopped = None;
    let mut failed = None;
    for round in 0..20_000u64 {
        let ino = inos[(round % 5) as usize];
        let len = c * (1 + (round % 3) as usize);
        let off = (round * 7 % 5) as usize * c;
        let bytes = pattern(round + 100, len);
        let result = fs
            .write(ino, off as u64, &bytes)
            .and_then(|n| fs.fsync(ino).map(|_| n));
        match result {
            Ok(n) => {
                // A write may be short when room runs out part-way (as POSIX allows):
                // what it reports written is what must read back.
                assert!(
                    n > 0 && n <= len,
                    "{profile}: round {round}: wrote {n} of {len}"
                );
                let file = synced.get_mut(&ino).expect("listed");
                if file.len() < off + n {
                    file.resize(off + n, 0);
                }
                file[off..off + n].copy_from_slice(&bytes[..n]);
            }
            Err(e) => {
                // Out of good blocks: a clean error, and the file as at its last fsync or
                // with this write (which may have reached flash before the fsync failed).
                let errno = e.errno();
                assert!(
                    errno == 28 || errno == 5,
                    "{profile} on {}: round {round}: {e}",
                    dev.name()
                );
                stopped = Some((round, e.to_string()));
                failed = Some(Failed { ino, off, bytes });
                break;
            }
        }
        if round % 700 == 699 {
            retired += fs.stats().blocks_retired;
            let ctx = format!("{profile} on {} round {round}", dev.name());
            fs = remount(fs, round % 1400 == 1399, &ctx);
            verify(&mut fs, &synced, None, c, &ctx);
        }
    }
    retired += fs.stats().blocks_retired;
    let ctx = format!(
        "{profile} on {} after the workload ({stopped:?})",
        dev.name()
    );
    let mut fs = remount(fs, true, &ctx);
    verify(&mut fs, &synced, failed.as_ref(), c, &ctx);
    // A clean unmount too, unless the device has no good block left for the header a
    // crash-remount repair still owes (then ENOSPC, and the next mount redoes it).
    match fs.unmount_parts() {
        Ok((flash, nv)) => {
            let mut fs = mount_parts(flash, nv).unwrap_or_else(|e| panic!("{ctx}: mount: {e}"));
            verify(&mut fs, &synced, failed.as_ref(), c, &ctx);
        }
        Err(e) => assert_eq!(e.errno(), 28, "{ctx}: unmount: {e}"),
    }
    retired
}

#[test]
fn worn_out_blocks_are_retired_and_lose_nothing() {
    for &profile in PROFILES {
        for dev in [Dev::Tiny, Dev::Small, Dev::Array] {
            if profile == "yaffs1" && dev != Dev::Small {
                continue; // small-page chips only, as YAFFS1
            }
            let retired = wear_out(dev, profile);
            println!("{profile} on {}: {retired} blocks retired", dev.name());
            assert!(retired > 0, "{profile} on {}: nothing wore out", dev.name());
        }
    }
}
