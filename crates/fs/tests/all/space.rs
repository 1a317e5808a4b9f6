//! Space accounting: what statfs counts as used is what the files hold (their pages and
//! the holes fallocate reserved for them, as st_blocks shows) plus the metadata's pages,
//! through fallocate, punch, zero range, truncate, unlink and rename over a file, and
//! after a clean and a crash remount. fsck checks the same sum.

use nandkit_fs::*;

use crate::common::*;

/// Profiles whose files can punch and zero ranges (yaffs1 and mnfs refuse both), with
/// their metadata on flash and in NVRAM.
const PROFILES: &[&str] = &["yaffs", "minv", "page-hotcold"];

fn config(profile: &str, dev: Dev) -> FsConfig {
    FsConfig::profile(profile, dev.blocks()).expect("profile")
}

/// statfs's used chunks against the sum of st_blocks over `files` and fsck's metadata
/// pages; fsck clean.
fn assert_space_adds_up(fs: &mut Fs, files: &[Ino], ctx: &str) {
    let r = fs.fsck();
    assert!(r.is_clean(), "{ctx}: fsck: {:#?}", r.problems);
    let held: u64 = files.iter().map(|&f| fs.getattr(f).unwrap().blocks).sum();
    let used = fs.statfs().used_chunks;
    assert_eq!(
        used,
        held + r.space.metadata,
        "{ctx}: statfs counts {used} chunks used, the files' st_blocks sum to {held}, metadata {}",
        r.space.metadata
    );
}

#[test]
fn fallocate_reserves_only_the_ranges_asked() {
    for &profile in PROFILES {
        for dev in Dev::ALL {
            let ctx = format!("{profile} {dev:?}");
            let mut fs = format_with(dev, config(profile, dev));
            let c = dev.chunk() as u64;
            let f = fs.create(ROOT_INO, b"f", file()).unwrap().ino;
            let used0 = fs.statfs().used_chunks;
            let free = fs.statfs().free_chunks;
            // Two ranges far apart: the gap between them is not reserved.
            let (a, far) = (free / 4, free / 2);
            fs.fallocate(f, 0, a * c, false).unwrap();
            fs.fallocate(f, far * c, c, true).unwrap();
            let used = fs.statfs().used_chunks - used0;
            assert!(
                (a + 1..=a + 3).contains(&used),
                "{ctx}: {a} + 1 chunks reserved took {used}"
            );
            assert_eq!(fs.getattr(f).unwrap().blocks, a + 1, "{ctx}: st_blocks");
            // A third range in the gap, bigger than what is left if the gap were held.
            fs.fallocate(f, (a + 2) * c, (far - a - 4) * c, true)
                .unwrap();
            assert_space_adds_up(&mut fs, &[f], &ctx);
            // A punch in the middle of a range gives its whole chunks back.
            let before = fs.getattr(f).unwrap().blocks;
            fs.punch_hole(f, 10 * c + 1, 20 * c).unwrap();
            assert_eq!(fs.getattr(f).unwrap().blocks, before - 19, "{ctx}: punch");
            assert_space_adds_up(&mut fs, &[f], &ctx);
            let blocks = fs.getattr(f).unwrap().blocks;
            let mut fs = clean_remount(fs);
            assert_eq!(
                fs.getattr(f).unwrap().blocks,
                blocks,
                "{ctx}: clean remount"
            );
            assert_space_adds_up(&mut fs, &[f], &format!("{ctx} clean remount"));
            let mut fs = crash_remount(fs);
            assert_eq!(
                fs.getattr(f).unwrap().blocks,
                blocks,
                "{ctx}: crash remount"
            );
            assert_space_adds_up(&mut fs, &[f], &format!("{ctx} crash remount"));
            // Unlink gives everything back.
            fs.unlink(ROOT_INO, b"f").unwrap();
            assert_eq!(fs.statfs().used_chunks, used0, "{ctx}: after unlink");
        }
    }
}

/// A tiny seeded generator (no crate needed for this).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// An fsstress-like mix over a few files; the sum is checked after every phase of 25
/// operations and after remounts.
#[test]
fn statfs_is_what_the_files_hold_through_a_mix() {
    for &profile in PROFILES {
        for dev in Dev::ALL {
            for seed in 1..=3u64 {
                mix(profile, dev, seed);
            }
        }
    }
}

fn mix(profile: &str, dev: Dev, seed: u64) {
    let mut fs = format_with(dev, config(profile, dev));
    let c = dev.chunk() as u64;
    let span = 96 * c; // files stay within 96 chunks: the device never fills
    let names: Vec<Vec<u8>> = (0..6).map(|i| format!("f{i}").into_bytes()).collect();
    let mut live: Vec<Option<Ino>> = vec![None; names.len()];
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for phase in 0..8 {
        for _ in 0..25 {
            let i = rng.below(names.len() as u64) as usize;
            let Some(f) = live[i] else {
                live[i] = Some(fs.create(ROOT_INO, &names[i], file()).unwrap().ino);
                continue;
            };
            let off = rng.below(span);
            let len = 1 + rng.below(span / 2);
            let keep = rng.below(2) == 0;
            let r = match rng.below(8) {
                0 => fs.fallocate(f, off, len, keep),
                1 => fs.punch_hole(f, off, len),
                2 => fs.zero_range(f, off, len, keep),
                3 => fs
                    .setattr(
                        f,
                        SetAttr {
                            size: Some(rng.below(span)),
                            ..SetAttr::default()
                        },
                    )
                    .map(|_| ()),
                4 => fs.write(f, off, &pattern(off, len as usize)).map(|_| ()),
                5 => fs.fsync(f),
                6 => {
                    fs.unlink(ROOT_INO, &names[i]).unwrap();
                    live[i] = None;
                    Ok(())
                }
                _ => {
                    // Rename over another name (deleting the file that held it).
                    let j = rng.below(names.len() as u64) as usize;
                    if j != i {
                        fs.rename(
                            ROOT_INO,
                            &names[i],
                            ROOT_INO,
                            &names[j],
                            RenameMode::Replace,
                        )
                        .unwrap();
                        live[j] = live[i].take();
                    }
                    Ok(())
                }
            };
            if let Err(e) = r {
                panic!("{profile} {dev:?} seed {seed}: {e}");
            }
        }
        fs.sync().unwrap();
        let files: Vec<Ino> = live.iter().flatten().copied().collect();
        let ctx = format!("{profile} {dev:?} seed {seed} phase {phase}");
        assert_space_adds_up(&mut fs, &files, &ctx);
        if phase % 3 == 2 {
            fs = clean_remount(fs);
            assert_space_adds_up(&mut fs, &files, &format!("{ctx} clean remount"));
        }
        if phase % 4 == 3 {
            fs = crash_remount(fs);
            assert_space_adds_up(&mut fs, &files, &format!("{ctx} crash remount"));
        }
    }
}
