//! UBIFS images that mtd-utils' mkfs.ubifs made, read by nandkit: every name, mode, size,
//! link, symlink target and byte of the source tree comes back out of `nandkit ubifs
//! extract`, through `ubinize` and `nandkit ubi import` as a board's image would come, and
//! from mkfs.ubifs's own output file. Damaged images give errors, never a panic.
//! `scripts/setup.sh` installs mtd-utils.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use crate::common::*;
use nandkit_flash::preset;

fn mkfs_ubifs() -> &'static str {
    let found = Process::new("mkfs.ubifs").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "mkfs.ubifs (mtd-utils) is not installed: run `bash scripts/setup.sh`"
    );
    "mkfs.ubifs"
}

/// Bytes that compress in parts and not in others.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            if (i / 3000) % 2 == 0 {
                (i % 251) as u8
            } else {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            }
        })
        .collect()
}

/// A tree with files of many sizes (empty, one byte, around a block, several blocks, 1
/// MiB), holes, nested and crowded directories, short and long symlinks, hard links, a
/// FIFO, and a file per mode bit.
fn make_tree(root: &Path) {
    let w = |p: &str, b: &[u8]| std::fs::write(root.join(p), b).unwrap();
    std::fs::create_dir_all(root.join("deep/er/and/deeper")).unwrap();
    std::fs::create_dir_all(root.join("crowd")).unwrap();
    for (i, len) in [0, 1, 4095, 4096, 4097, 12_288, 100_000, 1 << 20]
        .iter()
        .enumerate()
    {
        w(&format!("size-{len}"), &bytes(i as u64, *len));
    }
    w("deep/er/and/deeper/leaf.txt", b"at the bottom\n");
    // Bytes above 0x7f: the R5 hash reads names as signed chars.
    w("naïve-ümlaut-ß", b"non-ASCII name\n");
    for i in 0..300 {
        w(
            &format!("crowd/entry-{i:03}-{}", "x".repeat(i % 40)),
            &bytes(i as u64, i * 7),
        );
    }
    // Holes: at the start, in the middle (whole blocks), and to the end.
    let sparse = std::fs::File::create(root.join("sparse")).unwrap();
    sparse.set_len(1 << 20).unwrap();
    use std::os::unix::fs::FileExt;
    sparse.write_all_at(b"middle", 300_000).unwrap();
    sparse.write_all_at(&bytes(9, 10_000), 600_000).unwrap();
    std::os::unix::fs::symlink("size-1", root.join("link-short")).unwrap();
    std::os::unix::fs::symlink("l".repeat(1000), root.join("link-long")).unwrap();
    std::os::unix::fs::symlink("deep/er", root.join("link-dir")).unwrap();
    w("linked", b"three names\n");
    std::fs::hard_link(root.join("linked"), root.join("linked-2")).unwrap();
    std::fs::hard_link(root.join("linked"), root.join("deep/linked-3")).unwrap();
    let fifo = std::ffi::CString::new(root.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) }, 0);
    for mode in [
        0o4755, 0o2755, 0o1777, 0o777, 0o700, 0o644, 0o600, 0o444, 0o111, 0o000,
    ] {
        let p = root.join(format!("mode-{mode:04o}"));
        std::fs::write(&p, format!("{mode:o}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::create_dir(root.join("sticky-dir")).unwrap();
    std::fs::set_permissions(
        root.join("sticky-dir"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
}

/// Everything of a tree a reader must keep: per path, its type and mode bits, size, link
/// count, owner (when root), symlink target or bytes, and which other paths share its inode.
fn describe(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let ft = m.file_type();
            let what = if ft.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if ft.is_symlink() {
                format!("symlink -> {}", std::fs::read_link(&p).unwrap().display())
            } else if ft.is_fifo() {
                "fifo".to_string()
            } else {
                inodes.entry(m.ino()).or_default().push(rel.clone());
                let data = std::fs::read(&p).unwrap();
                format!(
                    "file {:016x}",
                    crc32fast::hash(&data) as u64 | ((data.len() as u64) << 32)
                )
            };
            let owner = if as_root {
                format!(" {}:{}", m.uid(), m.gid())
            } else {
                String::new()
            };
            let nlink = if ft.is_dir() { 0 } else { m.nlink() };
            out.insert(
                rel,
                format!(
                    "{what} mode {:o} size {} nlink {nlink}{owner}",
                    m.mode(),
                    if ft.is_dir() { 0 } else { m.len() }
                ),
            );
        }
    }
    for names in inodes.values() {
        for n in names {
            let mut others: Vec<_> = names
                .iter()
                .filter(|o| *o != n)
                .map(|o| o.display().to_string())
                .collect();
            others.sort();
            out.get_mut(n)
                .unwrap()
                .push_str(&format!(" shared with {others:?}"));
        }
    }
    out
}

fn run(cmd: &mut Process) -> std::process::Output {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}{}", stdout(&o), stderr(&o));
    o
}

/// mkfs.ubifs with each compressor, on two geometries: the image read directly and through
/// ubinize + `nandkit ubi import` extracts to the source tree exactly, and `check` is clean.
#[test]
fn trees_mkfs_ubifs_made_extract_exactly() {
    let mkfs = mkfs_ubifs();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    make_tree(&src);
    let want = describe(&src);
    for (geometry, size, compr) in [
        ("tiny", "8MiB", "none"),
        ("tiny", "8MiB", "lzo"),
        ("tlc-1g", "32MiB", "zlib"),
        ("tlc-1g", "32MiB", "zstd"),
    ] {
        let what = format!("{geometry} {compr}");
        let g = preset(geometry).unwrap().geometry;
        let page = g.page_size_bytes as usize;
        let leb = page * (g.pages_per_block as usize - 2);
        let work = dir.path().join(format!("{geometry}-{compr}"));
        std::fs::create_dir(&work).unwrap();
        let fs_img = work.join("fs.ubifs");
        run(Process::new(mkfs)
            .args([
                "-x",
                compr,
                "-m",
                &page.to_string(),
                "-e",
                &leb.to_string(),
                "-c",
                "60",
            ])
            .args(["-r", src.to_str().unwrap(), "-o", fs_img.to_str().unwrap()]));
        let cfg = work.join("ubi.cfg");
        std::fs::write(
            &cfg,
            format!(
                "[rootfs]\nmode=ubi\nimage={}\nvol_id=0\nvol_type=dynamic\nvol_size={}\nvol_name=rootfs\n",
                fs_img.display(),
                60 * leb
            ),
        )
        .unwrap();
        let raw_img = work.join("fs.ubi");
        run(Process::new("ubinize")
            .args([
                "-o",
                raw_img.to_str().unwrap(),
                "-p",
                &(page * g.pages_per_block as usize).to_string(),
            ])
            .args(["-m", &page.to_string(), "-s", &page.to_string()])
            .arg(&cfg));
        let img = work.join("board.img");
        let o = nandkit(&[
            "ubi",
            "import",
            raw_img.to_str().unwrap(),
            img.to_str().unwrap(),
            "-g",
            geometry,
            "--device-size",
            size,
        ]);
        assert!(o.status.success(), "{what}: import: {}", stderr(&o));

        for source in [&img, &fs_img] {
            let out = work.join(format!(
                "out-{}",
                source.file_name().unwrap().to_str().unwrap()
            ));
            let o = nandkit(&[
                "ubifs",
                "extract",
                source.to_str().unwrap(),
                out.to_str().unwrap(),
            ]);
            assert!(
                o.status.success(),
                "{what}: extract {}: {}",
                source.display(),
                stderr(&o)
            );
            let got = describe(&out);
            for (path, w) in &want {
                assert_eq!(
                    got.get(path),
                    Some(w),
                    "{what}: {} from {}",
                    path.display(),
                    source.display()
                );
            }
            assert_eq!(
                got.len(),
                want.len(),
                "{what}: extra names from {}",
                source.display()
            );
            let o = nandkit(&["ubifs", "check", source.to_str().unwrap()]);
            assert!(
                o.status.success() && stdout(&o).contains("clean"),
                "{what}: check: {}{}",
                stdout(&o),
                stderr(&o)
            );
        }
        let o = nandkit(&["ubifs", "ls", img.to_str().unwrap()]);
        assert!(
            stdout(&o).contains("/deep/er/and/deeper/leaf.txt"),
            "{what}: {}",
            stdout(&o)
        );
        assert!(stdout(&o).contains(&format!("/link-long -> {}", "l".repeat(1000))));
    }
}

/// Damage in a mkfs.ubifs image: a flipped byte in any node the index reaches is reported
/// with its LEB and offset, a missing superblock or master node says so, and nothing
/// panics whatever byte is changed.
#[test]
fn damaged_ubifs_images_give_errors_not_panics() {
    let mkfs = mkfs_ubifs();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("a"), bytes(1, 20_000)).unwrap();
    std::fs::create_dir(src.join("d")).unwrap();
    std::fs::write(src.join("d/b"), b"bee").unwrap();
    let img = dir.path().join("fs.ubifs");
    let leb = 2048 * 62;
    run(Process::new(mkfs)
        .args([
            "-x",
            "none",
            "-m",
            "2048",
            "-e",
            &leb.to_string(),
            "-c",
            "40",
        ])
        .args(["-r", src.to_str().unwrap(), "-o", img.to_str().unwrap()]));
    let good = std::fs::read(&img).unwrap();
    let o = nandkit(&["ubifs", "check", img.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));

    // Every node's header in the main area, flipped: the check names a damaged node.
    let mut offsets = Vec::new();
    for lnum in 0..good.len() / leb {
        let mut offs = 0;
        while offs + 24 <= leb {
            let at = lnum * leb + offs;
            if u32::from_le_bytes(good[at..at + 4].try_into().unwrap()) != 0x0610_1831 {
                break;
            }
            let len = u32::from_le_bytes(good[at + 16..at + 20].try_into().unwrap()) as usize;
            if good[at + 20] != 5 {
                offsets.push((lnum, offs, good[at + 20], len));
            }
            offs = (offs + len + 7) & !7;
        }
    }
    assert!(offsets.len() > 8, "{offsets:?}");
    let bad = dir.path().join("bad.ubifs");
    for &(lnum, offs, node_type, len) in &offsets {
        let mut b = good.clone();
        b[lnum * leb + offs + len - 1] ^= 0x40;
        std::fs::write(&bad, &b).unwrap();
        let o = nandkit(&["ubifs", "check", bad.to_str().unwrap()]);
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        match (lnum, node_type) {
            // The superblock.
            (0, 6) => assert!(err.contains("not a UBIFS volume"), "{err}"),
            // One master copy damaged: the other stands.
            (1 | 2, 7) => assert!(o.status.success(), "LEB {lnum}: {err}"),
            // The empty log's commit-start node (an empty journal replays nothing either
            // way), or the node mkfs.ubifs leaves after the superblock: not read. Every
            // node of the main area is.
            _ if o.status.success() => assert!(
                node_type == 10 || lnum == 0,
                "type {node_type} at {lnum}:{offs} damaged, yet check passed"
            ),
            _ => assert!(
                err.contains(&format!("LEB {lnum}:{offs}")) || err.contains("damaged"),
                "type {node_type} at {lnum}:{offs}: {err}"
            ),
        }
    }
    // The LPT: a flipped bit in its first pnode fails that node's CRC; a pnode that
    // disagrees with the main area (re-packed with a LEB's dirty space off by 8 bytes,
    // CRC and all) is a problem `check` names.
    {
        use nandkit_fs::ubifs::lpt::{self, LptGeom};
        use nandkit_fs::ubifs::media::SbNode;
        let (_, sb) = SbNode::decode(&good).unwrap();
        let g = LptGeom::from_sb(&sb).unwrap();
        let at = g.lpt_first as usize * leb;
        let mut b = good.clone();
        b[at + 3] ^= 0x10;
        std::fs::write(&bad, &b).unwrap();
        let o = nandkit(&["ubifs", "check", bad.to_str().unwrap()]);
        assert!(
            !o.status.success() && stderr(&o).contains("LPT node CRC mismatch"),
            "{}",
            stderr(&o)
        );
        let mut props = lpt::unpack_pnode(&g, &good[at..]).unwrap();
        props[0].dirty += 8;
        props[0].free -= 8;
        let mut b = good.clone();
        b[at..at + g.pnode_sz].copy_from_slice(&lpt::pack_pnode(&g, 0, &props));
        std::fs::write(&bad, &b).unwrap();
        let o = nandkit(&["ubifs", "check", bad.to_str().unwrap()]);
        assert!(
            !o.status.success()
                && stdout(&o).contains(&format!("LEB {}: LPT says free", g.main_first)),
            "{}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    // Both master copies gone.
    let mut b = good.clone();
    b[leb..3 * leb].fill(0xFF);
    std::fs::write(&bad, &b).unwrap();
    let o = nandkit(&["ubifs", "check", bad.to_str().unwrap()]);
    assert!(
        !o.status.success() && stderr(&o).contains("no good master node"),
        "{}",
        stderr(&o)
    );
    // Cut anywhere: errors, never panics.
    for cut in [30, 4096, leb + 100, 4 * leb, good.len() - 1] {
        std::fs::write(&bad, &good[..cut.min(good.len())]).unwrap();
        let o = nandkit(&["ubifs", "check", bad.to_str().unwrap()]);
        assert!(
            !stderr(&o).contains("panicked"),
            "cut {cut}: {}",
            stderr(&o)
        );
    }
}

/// The LPT (LEB properties, bit-packed in Linux's layout) of mkfs.ubifs images: read from
/// the master node's root, it describes the main area as it is (`check` compares every
/// LEB), and laid out again by nandkit from those properties it comes out byte for byte as
/// mkfs.ubifs wrote it, with the same root, head and ltab positions: small and big models,
/// 15 KiB to 248 KiB LEBs.
#[test]
fn lpt_is_laid_out_byte_for_byte_as_mkfs_ubifs_lays_it() {
    use nandkit_fs::ubifs::lpt::{self, LptGeom};
    use nandkit_fs::ubifs::media::{MstNode, SbNode, FLG_BIGLPT};
    use nandkit_fs::ubifs::MemVolume;
    let mkfs = mkfs_ubifs();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for i in 0..40 {
        std::fs::write(src.join(format!("f{i}")), bytes(i, 5_000 * i as usize)).unwrap();
    }
    let mut models = Vec::new();
    for (page, leb, max) in [
        (2048, 126_976, 60),
        (4096, 4096 * 62, 60),
        (2048, 126_976, 60_000),
        (512, 15_360, 8_000),
    ] {
        let img = dir.path().join(format!("fs-{page}-{max}.ubifs"));
        run(Process::new(mkfs)
            .args([
                "-x",
                "none",
                "-m",
                &page.to_string(),
                "-e",
                &leb.to_string(),
                "-c",
                &max.to_string(),
            ])
            .args(["-r", src.to_str().unwrap(), "-o", img.to_str().unwrap()]));
        let bytes = std::fs::read(&img).unwrap();
        let (_, sb) = SbNode::decode(&bytes).unwrap();
        let mut vol = MemVolume::from_image(&bytes, leb, sb.leb_cnt);
        let mst_leb = &bytes[leb..2 * leb];
        let (_, mst) = MstNode::decode(mst_leb).unwrap();
        let g = LptGeom::from_sb(&sb).unwrap();
        models.push(g.big);
        let table = lpt::read(&mut vol, &g, &mst).unwrap();
        let (lebs, heads) = lpt::create(&g, &table.props);
        let what = format!(
            "page {page}, LEB {leb}, max {max} (big model: {})",
            sb.flags & FLG_BIGLPT != 0
        );
        assert_eq!(
            (
                heads.lpt_lnum,
                heads.lpt_offs,
                heads.nhead_lnum,
                heads.nhead_offs,
                heads.ltab_lnum,
                heads.ltab_offs
            ),
            (
                mst.lpt_lnum,
                mst.lpt_offs,
                mst.nhead_lnum,
                mst.nhead_offs,
                mst.ltab_lnum,
                mst.ltab_offs
            ),
            "{what}"
        );
        if g.big {
            assert_eq!(
                (heads.lsave_lnum, heads.lsave_offs),
                (mst.lsave_lnum, mst.lsave_offs),
                "{what}"
            );
        }
        for (i, ours) in lebs.iter().enumerate() {
            let at = (g.lpt_first as usize + i) * leb;
            let theirs = &bytes[at..at + leb];
            let first_diff = ours.iter().zip(theirs).position(|(a, b)| a != b);
            assert_eq!(
                first_diff,
                None,
                "{what}: LPT LEB {} differs (heads {heads:?}): ours {:02x?}, mkfs.ubifs's {:02x?}",
                g.lpt_first as usize + i,
                &ours[first_diff.unwrap_or(0).saturating_sub(4)..][..24],
                &theirs[first_diff.unwrap_or(0).saturating_sub(4)..][..24],
            );
        }
        let o = nandkit(&["ubifs", "check", img.to_str().unwrap()]);
        assert!(
            o.status.success() && stdout(&o).contains("clean"),
            "{what}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
    assert_eq!(
        models,
        [false, false, true, true],
        "both LPT models covered"
    );
}
