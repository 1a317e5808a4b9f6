//! littlefs on the simulated chip: it formats, mounts and round-trips files; the chip's
//! NAND rules reach it as errors; after a power cut it mounts and keeps what was synced.

use nandkit_flash::{preset, FlashDevice, PowerCut};
use nandkit_littlefs::{without_bad_blocks, BlockDevice, Littlefs};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn device() -> FlashDevice {
    let mut config = without_bad_blocks(preset("tiny").unwrap());
    config.ecc.rber_fresh = 0.0;
    config.ecc.rber_at_endurance = 0.0;
    FlashDevice::ram(config).unwrap()
}

fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..len).map(|_| rng.gen()).collect()
}

fn read_all(fs: &mut Littlefs<FlashDevice>, path: &str) -> Vec<u8> {
    let size = fs.size(path).unwrap() as usize;
    let mut buf = vec![0u8; size];
    assert_eq!(fs.read(path, 0, &mut buf).unwrap(), size);
    fs.sync(path).unwrap();
    buf
}

#[test]
fn formats_mounts_and_round_trips_files() {
    let mut fs = Littlefs::format(device()).map_err(|(e, _)| e).unwrap();
    fs.mkdir("/d").unwrap();
    let mut files = Vec::new();
    for i in 0..12u64 {
        let path = format!("/d/f{i}");
        let body = data(i, (i as usize * 7919) % 300_000 + 1);
        fs.create(&path).unwrap();
        fs.write(&path, 0, &body).unwrap();
        fs.sync(&path).unwrap();
        files.push((path, body));
    }
    // An overwrite in the middle and a truncate.
    let (p, body) = &mut files[3];
    fs.write(p, 100, b"overwritten").unwrap();
    body[100..111].copy_from_slice(b"overwritten");
    fs.sync(p).unwrap();
    let (p, body) = &mut files[5];
    fs.truncate(p, 10).unwrap();
    body.truncate(10);
    fs.sync(p).unwrap();
    fs.remove("/d/f0").unwrap();
    files.remove(0);
    let programs = fs.device().stats().total().programs;
    assert!(programs > 0);
    assert!(fs.ram_bytes() > 0 && fs.blocks_in_use().unwrap() > 2);

    let dev = fs.unmount().map_err(|(e, _)| e).unwrap();
    let mut fs = Littlefs::mount(dev).map_err(|(e, _)| e).unwrap();
    for (path, body) in &files {
        assert_eq!(&read_all(&mut fs, path), body, "{path}");
    }
    assert!(fs.size("/d/f0").is_err(), "a removed file came back");
    assert!(fs.violations().is_empty(), "{:?}", fs.violations());
    let err = fs.create("/d/f1").unwrap_err();
    assert_eq!(err.code, -17, "{err}");
}

#[test]
fn a_nand_rule_violation_is_an_error_and_recorded() {
    let mut bd = BlockDevice::new(device());
    let page = vec![0x5Au8; bd.page_size() as usize];
    assert_eq!(bd.erase(3), 0);
    assert_eq!(bd.prog(3, 0, &page), 0);
    // The same page again, without an erase.
    assert_eq!(bd.prog(3, 0, &page), -5);
    // A page past the next programmable one.
    assert_eq!(bd.prog(3, 4 * bd.page_size(), &page), -5);
    assert_eq!(bd.violations.len(), 2, "{:?}", bd.violations);
    assert!(
        bd.violations[0].contains("not erased"),
        "{:?}",
        bd.violations
    );
    // Not whole pages, or off the device: refused before the chip sees them.
    assert_eq!(bd.prog(3, 1, &page), -22);
    assert_eq!(bd.erase(bd.block_count()), -22);
    let mut back = vec![0u8; bd.page_size() as usize];
    assert_eq!(bd.read(3, 0, &mut back), 0);
    assert_eq!(back, page);
}

#[test]
fn a_power_cut_mid_write_keeps_what_was_synced() {
    // Count the operations of the workload, then cut at a spread of them.
    let run = |fs: &mut Littlefs<FlashDevice>| -> Result<(), nandkit_littlefs::LfsError> {
        for i in 0..6u64 {
            let path = format!("/f{i}");
            fs.create(&path)?;
            fs.write(&path, 0, &data(i, 5000))?;
            fs.sync(&path)?;
        }
        Ok(())
    };
    let fs = Littlefs::format(device()).map_err(|(e, _)| e).unwrap();
    let dev = fs.unmount().map_err(|(e, _)| e).unwrap();
    let base = dev.state_ops();
    let mut fs = Littlefs::mount(dev).map_err(|(e, _)| e).unwrap();
    run(&mut fs).unwrap();
    let mut dev = fs.unmount().map_err(|(e, _)| e).unwrap();
    let ops = dev.state_ops() - base;
    assert!(ops > 10);
    for k in (0..ops).step_by((ops / 12).max(1) as usize) {
        let fs = Littlefs::format(device()).map_err(|(e, _)| e).unwrap();
        dev = fs.unmount().map_err(|(e, _)| e).unwrap();
        dev.arm_power_cut(PowerCut::AtOp(k));
        let mut fs = Littlefs::mount(dev).map_err(|(e, _)| e).unwrap();
        let mut synced = 0;
        for i in 0..6u64 {
            let path = format!("/f{i}");
            let step = fs
                .create(&path)
                .and_then(|_| fs.write(&path, 0, &data(i, 5000)))
                .and_then(|_| fs.sync(&path));
            if step.is_err() {
                break;
            }
            synced += 1;
        }
        let mut dev = fs.into_device();
        assert!(dev.power_lost(), "cut {k} of {ops} never happened");
        dev.power_cycle().unwrap();
        let mut fs = Littlefs::mount(dev)
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("cut at op {k}: {e}"));
        for i in 0..synced {
            let path = format!("/f{i}");
            assert_eq!(read_all(&mut fs, &path), data(i, 5000), "cut {k}: {path}");
        }
    }
}

/// Reading many files keeps at most a few clean handles (each costs a page of RAM); a
/// handle with unsynced writes stays open until its sync, and its data with it.
#[test]
fn reading_many_files_keeps_few_handles_open() {
    let mut fs = Littlefs::format(device()).map_err(|(e, _)| e).unwrap();
    for i in 0..40u64 {
        let path = format!("/f{i}");
        fs.create(&path).unwrap();
        fs.write(&path, 0, &data(i, 500)).unwrap();
        fs.sync(&path).unwrap();
    }
    fs.create("/pending").unwrap();
    fs.write("/pending", 0, b"not yet synced").unwrap();
    let idle = fs.ram_bytes();
    for i in 0..40u64 {
        let mut buf = vec![0u8; 500];
        assert_eq!(fs.read(&format!("/f{i}"), 0, &mut buf).unwrap(), 500);
        assert_eq!(buf, data(i, 500));
    }
    let page = 2048;
    assert!(
        fs.ram_bytes() <= idle + 16 * (page + 1024),
        "{} bytes after reading 40 files (idle {idle})",
        fs.ram_bytes()
    );
    fs.sync("/pending").unwrap();
    let dev = fs.unmount().map_err(|(e, _)| e).unwrap();
    let mut fs = Littlefs::mount(dev).map_err(|(e, _)| e).unwrap();
    assert_eq!(read_all(&mut fs, "/pending"), b"not yet synced");
}
