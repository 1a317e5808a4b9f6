//! Whole images, damaged as the input says, mounted (writable and read-only) and checked:
//! no panic, no hang, whatever the bytes. Two bases, made once: a yaffs image left as a
//! crash leaves it (a scan mount) and after a clean unmount (a checkpoint mount), and a
//! minv file system whose NVRAM is damaged instead.
//!
//! The input is a list of patches: 4 bytes of offset (little-endian, modulo the image or
//! NVRAM size), 1 byte of length (1-32), then that many bytes XORed in. Its first byte
//! picks the base. A read-only mount of each must pass `check_reads`: damage that fsck
//! does not see must not read as wrong bytes. With `NANDKIT_FUZZ_SEED=DIR` it writes the
//! seed corpora instead (see `nandkit_fuzz::seed`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nandkit_flash::{DeviceOptions, FlashDevice, StripedFlash};
use nandkit_fs::{FileSystem, MountOptions};
use nandkit_fuzz::{bases, check_reads, exercise, meta, options, patch, seed};
use nandkit_nvram::Nvram;

fuzz_target!(init: {
    // `NANDKIT_FUZZ_SEED=DIR`: write the seed corpora under DIR and stop.
    if let Some(dir) = std::env::var_os("NANDKIT_FUZZ_SEED") {
        seed(std::path::Path::new(&dir));
        std::process::exit(0);
    }
}, |data: &[u8]| {
    let Some((&pick, patches)) = data.split_first() else {
        return;
    };
    let b = bases();
    let work = b.dir.join("work.img");
    match pick % 3 {
        k @ (0 | 1) => {
            let (image, sidecar) = &b.flash[k as usize];
            let mut image = image.clone();
            patch(&mut image, patches);
            std::fs::write(&work, &image).unwrap();
            std::fs::write(meta(&work), sidecar).unwrap();
            for read_only in [true, false] {
                let Ok(dev) = FlashDevice::open_image(&work, DeviceOptions::default()) else {
                    return;
                };
                let opts = MountOptions {
                    read_only,
                    ..options()
                };
                if let Ok(mut fs) = FileSystem::mount(StripedFlash::new(dev), opts) {
                    if read_only {
                        check_reads(&mut fs);
                    }
                    exercise(fs);
                }
            }
        }
        _ => {
            let (image, sidecar, nvram) = &b.minv;
            let mut bytes = nvram.clone();
            patch(&mut bytes, patches);
            for read_only in [true, false] {
                std::fs::write(&work, image).unwrap();
                std::fs::write(meta(&work), sidecar).unwrap();
                let mut nv = Nvram::new_ram(b.nvram_config.clone()).unwrap();
                nv.write(0, &bytes).unwrap();
                nv.persist_all().unwrap();
                let dev = FlashDevice::open_image(&work, DeviceOptions::default()).unwrap();
                let opts = MountOptions {
                    read_only,
                    ..options()
                };
                if let Ok(mut fs) = FileSystem::mount_with_nvram(StripedFlash::new(dev), nv, opts)
                {
                    if read_only {
                        check_reads(&mut fs);
                    }
                    exercise(fs);
                }
            }
        }
    }
});
