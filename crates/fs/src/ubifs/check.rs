//! fsck for UBIFS: every node the index holds (CRC, key), every entry's name against its
//! key, every file's data, link and xattr counts, and the LPT against what the main area
//! holds as of the last commit (free space after the last written min. I/O unit, dirty space
//! the rest of the written part not taken by live nodes, the index flag where live index
//! nodes are).

use super::image::{Loc, UbifsError, UbifsImage};
use super::key::{Key, INO_KEY, XENT_KEY};
use super::lpt::{self, LptGeom};
use super::media::{align8, ROOT_INO};
use super::replay::scan_leb;
use super::volume::LebSource;
use std::collections::{BTreeMap, BTreeSet};

/// What a check found.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    pub nodes: u64,
    pub objects: usize,
    pub file_bytes: u64,
    /// LEBs whose LPT entry was compared.
    pub lpt_lebs_checked: u32,
    pub problems: Vec<String>,
}

pub fn check<S: LebSource>(img: &mut UbifsImage<S>) -> Result<CheckReport, UbifsError> {
    let mut r = CheckReport {
        nodes: img.check_leaves()?,
        ..Default::default()
    };
    let tree = img.walk()?;
    r.objects = tree.len();
    let mut names: BTreeMap<u32, u32> = BTreeMap::new();
    let mut subdirs: BTreeMap<u32, u32> = BTreeMap::new();
    let is_dir = |mode: u32| mode & 0o170000 == 0o040000;
    let dirs: BTreeSet<u32> = tree
        .iter()
        .filter(|(_, i)| is_dir(i.mode))
        .map(|(_, i)| i.inum)
        .collect();
    for (path, ino) in &tree {
        if !path.is_empty() {
            *names.entry(ino.inum).or_default() += 1;
        }
        if is_dir(ino.mode) {
            let subs = img
                .read_dir(ino.inum)?
                .iter()
                .filter(|e| dirs.contains(&e.inum))
                .count();
            subdirs.insert(ino.inum, subs as u32);
        } else if ino.mode & 0o170000 == 0o100000 {
            r.file_bytes += img.read_file(ino)?.len() as u64;
        }
    }
    let mut seen = BTreeSet::new();
    for (_, ino) in &tree {
        if !seen.insert(ino.inum) {
            continue;
        }
        let want = if is_dir(ino.mode) {
            2 + subdirs.get(&ino.inum).copied().unwrap_or(0)
        } else {
            names.get(&ino.inum).copied().unwrap_or(0)
        };
        if ino.nlink != want {
            r.problems.push(format!(
                "inode {}: nlink {} but {want} expected",
                ino.inum, ino.nlink
            ));
        }
        let xattrs = img.xattrs(ino.inum)?.len() as u32;
        if xattrs != ino.xattr_cnt {
            r.problems.push(format!(
                "inode {}: xattr_cnt {} but {xattrs} xattrs",
                ino.inum, ino.xattr_cnt
            ));
        }
    }
    if !seen.contains(&ROOT_INO) {
        r.problems.push("no root directory".into());
    }
    // Every inode is reached: by a name, or as the inode of a reached file's xattr.
    let mut reached = seen.clone();
    for inum in &seen {
        let xr = Key::kind_range(*inum, XENT_KEY);
        let xents: Vec<u32> = img
            .leaves()
            .filter(|(k, _)| xr.contains(k))
            .map(|(k, _)| k.inum)
            .collect();
        if !xents.is_empty() {
            for x in img.xattr_inodes(*inum)? {
                reached.insert(x);
            }
        }
    }
    let unreached: Vec<u32> = img
        .leaves()
        .filter(|(k, _)| k.kind() == INO_KEY && !reached.contains(&k.inum))
        .map(|(k, _)| k.inum)
        .collect();
    for inum in unreached {
        r.problems.push(format!(
            "inode {inum} is in the index but no name or xattr reaches it"
        ));
    }
    check_lpt(img, &mut r)?;
    Ok(r)
}

/// The LPT on flash describes the main area as the last commit left it: LEBs the journal
/// has written since (the buds) are left out.
fn check_lpt<S: LebSource>(img: &mut UbifsImage<S>, r: &mut CheckReport) -> Result<(), UbifsError> {
    let g = LptGeom::from_sb(&img.sb)?;
    let mst = img.mst.clone();
    let table = lpt::read(img.source_mut(), &g, &mst)?;
    // Live bytes per LEB: index nodes, and leaves the committed index points at.
    let mut live: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    let mut index_lebs = BTreeSet::new();
    let committed = img.committed_index();
    let mut add = |loc: &Loc| {
        live.entry(loc.lnum).or_default().insert(loc.offs);
    };
    for loc in &committed.index_nodes {
        add(loc);
        index_lebs.insert(loc.lnum);
    }
    for locs in committed.leaves.values() {
        locs.iter().for_each(&mut add);
    }
    let buds: BTreeSet<u32> = img.bud_lebs().collect();
    let align = img.sb.min_io_size.max(8) as usize;
    for lnum in g.main_first..img.sb.leb_cnt {
        if buds.contains(&lnum) {
            continue;
        }
        let props = table.props[(lnum - g.main_first) as usize];
        let leb = img.source_mut().read_leb_lossy(lnum)?;
        let (nodes, _) = scan_leb(&leb, lnum, 0);
        // The written part ends after the last thing that is not erased.
        let end = leb.iter().rposition(|&b| b != 0xFF).map_or(0, |p| p + 1);
        let written = end.div_ceil(align) * align;
        let offs_live = live.get(&lnum);
        let used: usize = nodes
            .iter()
            .filter(|(_, loc)| offs_live.is_some_and(|s| s.contains(&loc.offs)))
            .map(|(h, _)| align8(h.len as usize))
            .sum();
        // The LPT accounts for the LEB up to its written mark: the live nodes, and the rest
        // dirty. Past the mark only what a commit or garbage collection cut short left may
        // lie (nothing live; the LEB is unmapped before anything is written there again).
        let lpt_written = (g.leb_size - props.free) as usize;
        let live_end = nodes
            .iter()
            .filter(|(_, loc)| offs_live.is_some_and(|s| s.contains(&loc.offs)))
            .map(|(_, loc)| (loc.offs + loc.len) as usize)
            .max()
            .unwrap_or(0);
        r.lpt_lebs_checked += 1;
        if live_end > lpt_written || props.dirty as usize + used != lpt_written {
            r.problems.push(format!(
                "LEB {lnum}: LPT says free {} dirty {}, the LEB holds {used} live bytes up to \
                 {live_end} and is written to {written}",
                props.free, props.dirty
            ));
        }
        if index_lebs.contains(&lnum) && !props.index {
            r.problems.push(format!(
                "LEB {lnum} holds index nodes but the LPT does not mark it"
            ));
        }
    }
    Ok(())
}
