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
            let xattrs = user_xattrs(&p);
            let owner = if as_root {
                format!(" {}:{}", m.uid(), m.gid())
            } else {
                String::new()
            };
            let nlink = if ft.is_dir() { 0 } else { m.nlink() };
            out.insert(
                rel,
                format!(
                    "{what} mode {:o} size {} nlink {nlink}{owner}{xattrs}",
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

/// A path's `user.` extended attributes, for a tree's description ("" if none).
fn user_xattrs(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 4096];
    // SAFETY: a valid path and a buffer of the length given.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return String::new();
    }
    let mut out = Vec::new();
    for name in names[..n as usize]
        .split(|&b| b == 0)
        .filter(|n| n.starts_with(b"user."))
    {
        let cn = std::ffi::CString::new(name).unwrap();
        let mut v = vec![0u8; 65536];
        // SAFETY: valid strings and a buffer of the length given.
        let len =
            unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
        assert!(len >= 0, "reading xattr of {}", p.display());
        v.truncate(len as usize);
        out.push(format!(
            "{}={:08x}/{}",
            String::from_utf8_lossy(name),
            crc32fast::hash(&v),
            v.len()
        ));
    }
    out.sort();
    if out.is_empty() {
        String::new()
    } else {
        format!(" xattrs [{}]", out.join(" "))
    }
}

/// As root, a tree's whole description; otherwise only names, types, sizes and bytes (the
/// extractions set modes, owners and xattrs beyond `user.` as root only).
fn as_user_sees(m: BTreeMap<PathBuf, String>) -> BTreeMap<PathBuf, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return m;
    }
    m.into_iter()
        .map(|(k, v)| (k, v.split(" mode ").next().unwrap().to_string()))
        .collect()
}

/// Two trees' descriptions are the same; the paths that differ, if not.
fn assert_same_tree(got: &BTreeMap<PathBuf, String>, want: &BTreeMap<PathBuf, String>, what: &str) {
    let differ: Vec<_> = got
        .keys()
        .chain(want.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| {
            format!(
                "{}: got {:?}, want {:?}",
                k.display(),
                got.get(k),
                want.get(k)
            )
        })
        .collect();
    assert!(differ.is_empty(), "{what}: the trees differ: {differ:#?}");
}

/// Sets an extended attribute on a host path (not following a symlink).
fn set_host_xattr(p: &Path, name: &[u8], value: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid strings and a buffer of the length given.
    let rc = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(
        rc,
        0,
        "setting xattr {} on {}",
        String::from_utf8_lossy(name),
        p.display()
    );
}

fn run(cmd: &mut Process) -> std::process::Output {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}{}", stdout(&o), stderr(&o));
    o
}

/// mkfs.ubifs of `src` with compressor `compr` for `geometry` (LEBs of its block less two
/// pages, 60 of them), then ubinize as a dynamic volume "rootfs" and `nandkit ubi import`
/// onto a chip of `size`: the mkfs.ubifs file and the board image, in `work`.
fn board_image(
    src: &Path,
    work: &Path,
    geometry: &str,
    size: &str,
    compr: &str,
) -> (PathBuf, PathBuf) {
    let g = preset(geometry).unwrap().geometry;
    let page = g.page_size_bytes as usize;
    let leb = page * (g.pages_per_block as usize - 2);
    let fs_img = work.join("fs.ubifs");
    run(Process::new(mkfs_ubifs())
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
    assert!(o.status.success(), "import: {}", stderr(&o));
    (fs_img, img)
}

/// mkfs.ubifs with each compressor, on two geometries: the image read directly and through
/// ubinize + `nandkit ubi import` extracts to the source tree exactly, and `check` is clean.
#[test]
fn trees_mkfs_ubifs_made_extract_exactly() {
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
        let work = dir.path().join(format!("{geometry}-{compr}"));
        std::fs::create_dir(&work).unwrap();
        let (fs_img, img) = board_image(&src, &work, geometry, size, compr);

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
    // disagrees with the main area (re-packed with a LEB's dirty space 8 bytes more than
    // its written part holds dead, CRC and all) is a problem `check` names.
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

/// `ubireader_extract_files` (with `-k` as root, to keep modes) on a raw UBI image, into
/// `out`; the directory of the image's one volume.
fn ubi_reader_extract(raw: &Path, out: &Path) -> PathBuf {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.tools/ubi-reader/bin/ubireader_extract_files");
    assert!(
        tool.exists(),
        "ubi-reader is not installed: run `bash scripts/setup.sh`"
    );
    let mut cmd = Process::new(&tool);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Modes and xattrs: ubi-reader restores them as root only.
        cmd.args(["-k", "-x"]);
    }
    run(cmd.args(["-o", out.to_str().unwrap(), raw.to_str().unwrap()]));
    // It puts each volume in a directory of its own under one per image.
    let mut root = out.to_path_buf();
    while std::fs::read_dir(&root).unwrap().count() == 1 {
        let only = std::fs::read_dir(&root)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        if !only.is_dir() {
            break;
        }
        root = only;
    }
    root
}

/// What nandkit's own UBIFS holds, written out as a directory (the writer's view: its
/// lookups, stats, reads, xattrs), for comparison with what another tool extracts.
fn materialize(
    fs: &mut nandkit_fs::ubifs::fs::UbifsFs<
        nandkit_flash::StripedFlash<nandkit_flash::FlashDevice>,
    >,
    dir: u32,
    to: &Path,
    seen: &mut BTreeMap<u32, PathBuf>,
) {
    use std::os::unix::ffi::OsStrExt;
    for e in fs.readdir(dir).unwrap() {
        let path = to.join(std::ffi::OsStr::from_bytes(&e.name));
        let st = fs.stat(e.inum).unwrap();
        if let Some(first) = seen.get(&e.inum) {
            std::fs::hard_link(first, &path).unwrap();
            continue;
        }
        match st.mode & 0o170000 {
            0o040000 => {
                std::fs::create_dir(&path).unwrap();
                materialize(fs, e.inum, &path, seen);
            }
            0o120000 => {
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&st.data), &path).unwrap()
            }
            0o010000 => {
                let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
                // SAFETY: a valid path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
            _ => {
                std::fs::write(&path, fs.read(e.inum, 0, st.size as usize).unwrap()).unwrap();
                seen.insert(e.inum, path.clone());
            }
        }
        if st.mode & 0o170000 != 0o120000 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(st.mode & 0o7777))
                .unwrap();
        }
        for name in fs.list_xattrs(e.inum).unwrap() {
            let value = fs.get_xattr(e.inum, &name).unwrap();
            set_host_xattr(&path, &name, &value);
        }
    }
}

/// Images nandkit's UBIFS wrote (a tree of files of many sizes with holes, directories,
/// symlinks, hard links, a FIFO, modes; then overwrites, renames and deletions; and the
/// image after a power cut and the recovery mount) read by ubi-reader's
/// `ubireader_extract_files` from the raw UBI image `nandkit ubi export` writes: the same
/// names, types, modes (as root), sizes, link counts and bytes as nandkit's mount shows.
#[test]
fn ubi_reader_extracts_what_nandkits_ubifs_wrote() {
    use nandkit_flash::ubi::raw::{self, RawKind};
    use nandkit_flash::ubi::UbiParams;
    use nandkit_flash::{FlashDevice, PowerCut, StripedFlash};
    use nandkit_fs::ubifs::fs::{UbifsFs, UbifsOptions};
    use nandkit_fs::ubifs::media::{Time, ROOT_INO};
    use nandkit_fs::ubifs::ops::NewInode;
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    let dir = tempfile::tempdir().unwrap();
    let t = |s| Time { sec: s, nsec: 0 };
    let chip = || {
        let mut c = preset("tiny").unwrap();
        c.ecc.rber_fresh = 0.0;
        c.ecc.rber_at_endurance = 0.0;
        c.wear.factory_bad_fraction = 0.0;
        FlashDevice::ram(c).unwrap()
    };
    let opts = UbifsOptions::default();
    type Fs = UbifsFs<StripedFlash<FlashDevice>>;
    let build = |fs: &mut Fs| -> Result<(), nandkit_fs::FsError> {
        let d = fs.mknod(ROOT_INO, b"dir", NewInode::new(0o040755), t(2))?;
        let deep = fs.mknod(d, b"deeper", NewInode::new(0o040700), t(2))?;
        for (i, len) in [0usize, 1, 4095, 4096, 4097, 70_000, 300_000]
            .iter()
            .enumerate()
        {
            let f = fs.mknod(
                if i % 2 == 0 { ROOT_INO } else { d },
                format!("size-{len}").as_bytes(),
                NewInode::new(0o100644),
                t(3),
            )?;
            fs.write(f, 0, &bytes(i as u64, *len), t(3))?;
        }
        let sparse = fs.mknod(deep, b"sparse", NewInode::new(0o100600), t(4))?;
        // Holes, with every data node before the last a whole block: ubi-reader 0.8.16
        // appends each block's bytes as they decompress, so a short block inside a file
        // (Linux writes one when a file grows past a partly written last block; Linux and
        // nandkit read its rest as zeros) would shift what follows in its extraction.
        fs.write(sparse, 200_000, &bytes(4, 704), t(4))?;
        fs.write(sparse, 500_000, &bytes(3, 9000), t(4))?;
        fs.mknod(ROOT_INO, b"link", NewInode::symlink(b"dir/size-1"), t(5))?;
        fs.mknod(
            d,
            b"long-link",
            NewInode::symlink("x".repeat(900).as_bytes()),
            t(5),
        )?;
        let shared = fs.mknod(ROOT_INO, b"shared", NewInode::new(0o100640), t(6))?;
        fs.write(shared, 0, b"three names", t(6))?;
        fs.link(shared, d, b"shared-2", t(6))?;
        fs.link(shared, deep, b"shared-3", t(6))?;
        fs.mknod(ROOT_INO, b"fifo", NewInode::new(0o010640), t(7))?;
        fs.set_xattr(shared, b"user.note", b"a value", t(7))?;
        fs.set_xattr(shared, b"user.big", &bytes(5, 3000), t(7))?;
        fs.set_xattr(d, b"user.on-a-dir", b"yes", t(7))?;
        fs.set_xattr(sparse, b"user.gone", b"soon", t(7))?;
        fs.remove_xattr(sparse, b"user.gone", t(7))?;
        for mode in [0o4755u32, 0o2711, 0o1777, 0o444, 0o000] {
            let f = fs.mknod(
                ROOT_INO,
                format!("mode-{mode:o}").as_bytes(),
                NewInode::new(0o100000 | mode),
                t(8),
            )?;
            fs.write(f, 0, b"m", t(8))?;
        }
        // Churn: overwrite, truncate, rename over, delete.
        let big = fs.lookup(ROOT_INO, b"size-300000")?.unwrap();
        fs.write(big, 100_000, &bytes(9, 50_000), t(9))?;
        fs.truncate(big, 250_001, t(9))?;
        fs.rename(ROOT_INO, b"size-0", d, b"size-1", t(10))?;
        fs.remove(d, b"size-4096", false, t(10))?;
        fs.sync()?;
        Ok(())
    };
    let ubi = || StripedFlash::format_ubi(chip(), UbiParams::default()).unwrap();
    let mut cases: Vec<(String, FlashDevice)> = Vec::new();
    {
        let mut fs = UbifsFs::format(ubi(), opts, t(1)).unwrap();
        build(&mut fs).unwrap();
        cases.push(("whole".into(), fs.unmount().unwrap().into_inner()));
    }
    // Cuts spread over the workload, each followed by the recovery mount and an unmount.
    let total = {
        let mut fs = UbifsFs::format(ubi(), opts, t(1)).unwrap();
        let base = fs.device().inner().state_ops();
        build(&mut fs).unwrap();
        fs.device().inner().state_ops() - base
    };
    let step = if std::env::var_os("NANDKIT_LONG").is_some() {
        1
    } else {
        (total / 12).max(1)
    };
    for n in (0..total).step_by(step as usize) {
        let mut fs = UbifsFs::format(ubi(), opts, t(1)).unwrap();
        fs.device_mut().inner_mut().arm_power_cut(PowerCut::AtOp(n));
        let _ = build(&mut fs);
        let mut dev = fs.into_device().into_inner();
        dev.power_cycle().unwrap();
        let s = StripedFlash::attach_ubi(dev, false).unwrap();
        let fs = UbifsFs::mount(s, opts, false).unwrap_or_else(|e| panic!("cut {n}: {e}"));
        cases.push((format!("cut{n}"), fs.unmount().unwrap().into_inner()));
    }
    for (name, mut dev) in cases {
        let raw_path = dir.path().join(format!("{name}.ubi"));
        {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&raw_path).unwrap());
            raw::export(&mut dev, 0, &mut out, RawKind::Plain, |_| {}).unwrap();
        }
        let root = ubi_reader_extract(&raw_path, &dir.path().join(format!("{name}-ubireader")));
        let ours = dir.path().join(format!("{name}-nandkit"));
        std::fs::create_dir(&ours).unwrap();
        let s = StripedFlash::attach_ubi(dev, true).unwrap();
        let mut fs = UbifsFs::mount(s, opts, true).unwrap();
        materialize(&mut fs, ROOT_INO, &ours, &mut BTreeMap::new());
        let (want, got) = (describe(&ours), describe(&root));
        // The xattrs are in the comparison (ubi-reader restores them as root only).
        assert!(
            !as_root
                || name != "whole"
                || want.values().filter(|v| v.contains("user.big=")).count() == 3,
            "{name}: {want:?}"
        );
        assert_same_tree(
            &as_user_sees(got),
            &as_user_sees(want),
            &format!("{name}: ubi-reader against nandkit"),
        );
    }
}

/// An image mkfs.ubifs made (LZO, the default), put on a board image with ubinize and
/// `nandkit ubi import`, mounted by nandkit's UBIFS on its volume: every name, type, mode,
/// size, link and byte is the source tree's; then nandkit writes, overwrites, truncates,
/// renames and deletes in it (the same done to a copy of the tree on the host), remounts:
/// the tree is the host copy's, fsck is clean, and ubi-reader extracts the same tree.
#[test]
fn mkfs_ubifs_images_mount_and_take_writes() {
    use nandkit_flash::ubi::AttachOptions;
    use nandkit_flash::{DeviceOptions, FlashDevice, StripedFlash};
    use nandkit_fs::ubifs::fs::{UbifsFs, UbifsOptions};
    use nandkit_fs::ubifs::io::LebIo;
    use nandkit_fs::ubifs::media::{Time, ROOT_INO};
    use nandkit_fs::ubifs::ops::NewInode;
    use nandkit_fs::ubifs::{check, UbifsImage};
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    make_tree(&src);
    let (_, img) = board_image(&src, dir.path(), "tiny", "8MiB", "lzo");

    let attach = |read_only: bool| {
        let dev = FlashDevice::open_image(&img, DeviceOptions::default()).unwrap();
        let opts = AttachOptions {
            volume: Some(0),
            ..AttachOptions::default()
        };
        StripedFlash::attach_ubi_with(dev, read_only, opts).unwrap()
    };
    let opts = UbifsOptions::default();
    let show = |fs: &mut UbifsFs<StripedFlash<FlashDevice>>, name: &str| {
        let out = dir.path().join(name);
        std::fs::create_dir(&out).unwrap();
        materialize(fs, ROOT_INO, &out, &mut BTreeMap::new());
        describe(&out)
    };
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    let strip = |m: BTreeMap<PathBuf, String>| -> BTreeMap<PathBuf, String> {
        // Owners are not materialized; modes only as root (mkfs.ubifs keeps the tree's).
        m.into_iter()
            .map(|(k, v)| {
                let v = v.split(" 0:0").collect::<String>();
                (
                    k,
                    if as_root {
                        v
                    } else {
                        v.split(" mode ").next().unwrap().to_string()
                    },
                )
            })
            .collect()
    };
    let mut fs = UbifsFs::mount(attach(false), opts, false).unwrap();
    assert_eq!(
        strip(show(&mut fs, "as-made")),
        strip(describe(&src)),
        "the tree mkfs.ubifs made"
    );

    // The same changes on nandkit's mount and on a copy of the tree.
    let host = dir.path().join("host");
    run(Process::new("cp").args(["-a", src.to_str().unwrap(), host.to_str().unwrap()]));
    let t = Time {
        sec: 1_800_000_000,
        nsec: 0,
    };
    let new = fs
        .mknod(ROOT_INO, b"new-file", NewInode::new(0o100644), t)
        .unwrap();
    fs.write(new, 0, &bytes(77, 50_000), t).unwrap();
    std::fs::write(host.join("new-file"), bytes(77, 50_000)).unwrap();
    let big = fs.lookup(ROOT_INO, b"size-1048576").unwrap().unwrap();
    fs.write(big, 10_000, &bytes(78, 20_000), t).unwrap();
    fs.truncate(big, 700_001, t).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(host.join("size-1048576"))
            .unwrap();
        f.write_all_at(&bytes(78, 20_000), 10_000).unwrap();
        f.set_len(700_001).unwrap();
    }
    let deep = fs.lookup(ROOT_INO, b"deep").unwrap().unwrap();
    fs.rename(ROOT_INO, b"size-4096", deep, b"moved", t)
        .unwrap();
    std::fs::rename(host.join("size-4096"), host.join("deep/moved")).unwrap();
    fs.remove(ROOT_INO, b"linked-2", false, t).unwrap();
    std::fs::remove_file(host.join("linked-2")).unwrap();
    let crowd = fs.lookup(ROOT_INO, b"crowd").unwrap().unwrap();
    for e in fs.readdir(crowd).unwrap().into_iter().take(150) {
        fs.remove(crowd, &e.name, false, t).unwrap();
        std::fs::remove_file(host.join("crowd").join(String::from_utf8(e.name).unwrap())).unwrap();
    }
    let d = fs
        .mknod(ROOT_INO, b"new-dir", NewInode::new(0o040750), t)
        .unwrap();
    fs.mknod(d, b"inner-link", NewInode::symlink(b"../new-file"), t)
        .unwrap();
    std::fs::create_dir(host.join("new-dir")).unwrap();
    std::fs::set_permissions(host.join("new-dir"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("../new-file", host.join("new-dir/inner-link")).unwrap();
    let dev = fs.unmount().unwrap();
    drop(dev);

    let mut fs = UbifsFs::mount(attach(false), opts, false).unwrap();
    assert_eq!(
        strip(show(&mut fs, "after")),
        strip(describe(&host)),
        "after nandkit's changes and a remount"
    );
    drop(fs.unmount().unwrap());
    let io = LebIo::new(attach(true)).unwrap();
    let mut image = UbifsImage::open(io).unwrap();
    let r = check::check(&mut image).unwrap();
    assert!(r.problems.is_empty(), "fsck: {:?}", r.problems);
    assert!(r.lpt_lebs_checked > 0);
    // And ubi-reader reads the board image nandkit changed as the host copy.
    let back = dir.path().join("back.ubi");
    let o = nandkit(&[
        "ubi",
        "export",
        img.to_str().unwrap(),
        back.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "export: {}", stderr(&o));
    let root = ubi_reader_extract(&back, &dir.path().join("ubireader"));
    assert_eq!(
        strip(describe(&root)),
        strip(describe(&host)),
        "ubi-reader's view of the changed image"
    );
}

/// `nandkit ubifs mkfs --root DIR` (nandkit's own mkfs.ubifs): the tree of the other tests,
/// with xattrs (a long value, on a directory), comes back from `nandkit ubifs extract` and
/// from ubi-reader's extraction of `nandkit ubi export`'s raw image, the same names, types,
/// modes, owners, sizes, links, bytes and xattrs; and `check` is clean.
#[test]
fn nandkits_mkfs_makes_images_both_readers_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    make_tree(&src);
    set_host_xattr(&src.join("size-4096"), b"user.checksum", b"0123abcd");
    set_host_xattr(&src.join("size-4096"), b"user.long", &bytes(3, 2500));
    set_host_xattr(&src.join("deep"), b"user.on-a-dir", b"yes");
    let want = describe(&src);
    assert!(want.values().any(|v| v.contains("user.long=")));
    let img = dir.path().join("made.img");
    let o = nandkit(&[
        "ubifs",
        "mkfs",
        img.to_str().unwrap(),
        "-g",
        "tiny",
        "--device-size",
        "8MiB",
        "--root",
        src.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "mkfs: {}", stderr(&o));
    let o = nandkit(&["ubifs", "check", img.to_str().unwrap()]);
    assert!(
        o.status.success() && stdout(&o).contains("clean"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let out = dir.path().join("ours");
    let o = nandkit(&[
        "ubifs",
        "extract",
        img.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "extract: {}", stderr(&o));
    assert_same_tree(
        &as_user_sees(describe(&out)),
        &as_user_sees(want.clone()),
        "nandkit ubifs extract",
    );
    let raw = dir.path().join("made.ubi");
    let o = nandkit(&[
        "ubi",
        "export",
        img.to_str().unwrap(),
        raw.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "export: {}", stderr(&o));
    let theirs = ubi_reader_extract(&raw, &dir.path().join("theirs"));
    assert_same_tree(
        &as_user_sees(describe(&theirs)),
        &as_user_sees(want),
        "ubi-reader",
    );
}
