//! A UBIFS volume opened as Linux mounts it, for reading: the superblock (LEB 0), the
//! newer of the two master nodes (LEBs 1 and 2), the index from the master's root, then
//! the journal replayed on top. Lookups, directories, file bytes and xattrs come from the
//! resulting key map; every node read is CRC-checked.

use super::compress;
use super::index::{self, node_bytes, IndexStats, Leaves};
use super::key::{Key, DATA_KEY, DENT_KEY, XENT_KEY};
use super::media::{
    self, DataNode, DentNode, InoNode, MstNode, NodeType, SbNode, BLOCK_SIZE, CRYPT_FL,
    FLG_AUTHENTICATION, FLG_ENCRYPTION, MST_LNUM, ROOT_INO, SB_LNUM, XATTR_FL,
};
use super::replay::{self, ReplayStats};
use super::volume::LebSource;
use nandkit_flash::FlashError;

/// An extended attribute: name and value.
pub type Xattr = (Vec<u8>, Vec<u8>);

/// Where a node is: LEB, offset, length.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Loc {
    pub lnum: u32,
    pub offs: u32,
    pub len: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum UbifsError {
    #[error("not a UBIFS volume: {0}")]
    NotUbifs(String),
    #[error("UBIFS feature not supported: {0}")]
    Unsupported(String),
    #[error("damaged UBIFS node at LEB {lnum}:{offs}: {what}")]
    Corrupt { lnum: u32, offs: u32, what: String },
    #[error("LEB {lnum} cannot be read")]
    Unreadable { lnum: u32 },
    #[error("no space left on the UBIFS volume")]
    NoSpace,
    #[error("read-only: {0}")]
    ReadOnly(String),
    #[error("flash: {0}")]
    Flash(#[from] FlashError),
}

impl UbifsError {
    pub fn corrupt(loc: Loc, what: &str) -> UbifsError {
        UbifsError::Corrupt {
            lnum: loc.lnum,
            offs: loc.offs,
            what: what.to_string(),
        }
    }
}

/// What opening the volume did.
#[derive(Debug, Default, Clone, Copy)]
pub struct OpenStats {
    pub index: IndexStats,
    pub replay: ReplayStats,
    /// The master LEB whose node was used (1 or 2) and whether the other disagreed.
    pub master_lnum: u32,
    pub masters_differ: bool,
}

/// A directory entry as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub inum: u32,
    pub dtype: u8,
}

/// An opened UBIFS volume.
pub struct UbifsImage<S: LebSource> {
    src: S,
    pub sb: SbNode,
    pub mst: MstNode,
    leaves: Leaves,
    /// The index as the last commit left it (before the journal), for the LPT check.
    committed: index::Walked,
    /// The buds the log names.
    buds: Vec<media::RefNode>,
    pub stats: OpenStats,
}

impl<S: LebSource> UbifsImage<S> {
    pub fn open(mut src: S) -> Result<Self, UbifsError> {
        let sb = read_superblock(&mut src)?;
        let Masters {
            mst,
            lnum: master_lnum,
            differ: masters_differ,
            ..
        } = read_masters(&mut src)?;
        if mst.log_lnum < media::LOG_LNUM || mst.log_lnum >= sb.lpt_first() {
            return Err(UbifsError::NotUbifs(format!(
                "master node's log LEB {} is outside the log",
                mst.log_lnum
            )));
        }
        let root = Loc {
            lnum: mst.root_lnum,
            offs: mst.root_offs,
            len: mst.root_len,
        };
        let walked = index::walk(&mut src, root)?;
        let mut leaves = walked.leaves.clone();
        let (replay, buds) =
            replay::replay(&mut src, &mut leaves, mst.log_lnum, sb.log_lebs, mst.cmt_no)?;
        let index = walked.stats;
        Ok(UbifsImage {
            src,
            sb,
            mst,
            leaves,
            committed: walked,
            buds,
            stats: OpenStats {
                index,
                replay,
                master_lnum,
                masters_differ,
            },
        })
    }

    /// The LEB source (its counters).
    pub fn source(&self) -> &S {
        &self.src
    }

    /// Gives the LEB source back.
    pub fn into_source(self) -> S {
        self.src
    }

    pub fn source_mut(&mut self) -> &mut S {
        &mut self.src
    }

    /// The index as the last commit left it, before the journal was replayed on it.
    pub fn committed_index(&self) -> &index::Walked {
        &self.committed
    }

    /// LEBs the log names as buds (written by the journal since the last commit).
    pub fn bud_lebs(&self) -> impl Iterator<Item = u32> + '_ {
        self.buds.iter().map(|r| r.lnum)
    }

    /// Keys the index (after replay) holds, and how many nodes they point at.
    pub fn key_count(&self) -> (usize, usize) {
        (self.leaves.len(), self.leaves.values().map(Vec::len).sum())
    }

    fn node(&mut self, loc: Loc) -> Result<Vec<u8>, UbifsError> {
        node_bytes(&mut self.src, loc)
    }

    /// The inode `inum`, if the index has it.
    pub fn inode(&mut self, inum: u32) -> Result<Option<InoNode>, UbifsError> {
        let Some(&[loc]) = self.leaves.get(&Key::ino(inum)).map(Vec::as_slice) else {
            return Ok(None);
        };
        let bytes = self.node(loc)?;
        let (_, ino) =
            InoNode::decode(&bytes).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
        if ino.inum != inum {
            return Err(UbifsError::corrupt(loc, "inode filed under another key"));
        }
        Ok(Some(ino))
    }

    fn entries_of(&mut self, inum: u32, kind: u8) -> Result<Vec<DentNode>, UbifsError> {
        let locs: Vec<(Key, Loc)> = self
            .leaves
            .range(Key::kind_range(inum, kind))
            .flat_map(|(k, v)| v.iter().map(move |l| (*k, *l)))
            .collect();
        let mut out = Vec::with_capacity(locs.len());
        for (key, loc) in locs {
            let bytes = self.node(loc)?;
            let (_, d) =
                DentNode::decode(&bytes).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            let want = if kind == DENT_KEY {
                Key::dent(inum, &d.name)
            } else {
                Key::xent(inum, &d.name)
            };
            if d.key != key || want != key {
                return Err(UbifsError::corrupt(
                    loc,
                    "entry's key does not match its name",
                ));
            }
            if d.inum > u64::from(u32::MAX) {
                return Err(UbifsError::corrupt(loc, "entry names an inode past 2^32"));
            }
            out.push(d);
        }
        Ok(out)
    }

    /// A directory's entries, in hash order.
    pub fn read_dir(&mut self, dir: u32) -> Result<Vec<Entry>, UbifsError> {
        Ok(self
            .entries_of(dir, DENT_KEY)?
            .into_iter()
            .map(|d| Entry {
                name: d.name,
                inum: d.inum as u32,
                dtype: d.dtype,
            })
            .collect())
    }

    /// The inode a name in `dir` leads to.
    pub fn lookup(&mut self, dir: u32, name: &[u8]) -> Result<Option<u32>, UbifsError> {
        let key = Key::dent(dir, name);
        let locs = self.leaves.get(&key).cloned().unwrap_or_default();
        for loc in locs {
            let (_, d) = DentNode::decode(&self.node(loc)?)
                .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            if d.name == name {
                return Ok(Some(d.inum as u32));
            }
        }
        Ok(None)
    }

    /// A file's bytes: its data nodes, decompressed, holes as zeros, cut at its size.
    pub fn read_file(&mut self, ino: &InoNode) -> Result<Vec<u8>, UbifsError> {
        if ino.flags & CRYPT_FL != 0 {
            return Err(UbifsError::Unsupported(format!(
                "inode {} is encrypted",
                ino.inum
            )));
        }
        let size = usize::try_from(ino.size)
            .ok()
            .filter(|&s| s <= 1 << 40)
            .ok_or_else(|| UbifsError::Unsupported(format!("file of {} bytes", ino.size)))?;
        let mut out = vec![0u8; size];
        let blocks: Vec<(Key, Loc)> = self
            .leaves
            .range(Key::kind_range(ino.inum, DATA_KEY))
            .filter_map(|(k, v)| v.first().map(|l| (*k, *l)))
            .collect();
        for (key, loc) in blocks {
            let start = u64::from(key.low()) * BLOCK_SIZE;
            if start >= ino.size {
                // Past the end (the truncation that dropped it is not replayed yet, or the
                // node is stale): the size decides.
                continue;
            }
            let bytes = self.node(loc)?;
            let (_, d) =
                DataNode::decode(&bytes).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            if d.key != key {
                return Err(UbifsError::corrupt(
                    loc,
                    "data node filed under another key",
                ));
            }
            let plain = compress::decompress(d.compr_type, &d.data, d.size as usize)
                .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            let start = start as usize;
            let n = plain.len().min(size - start);
            out[start..start + n].copy_from_slice(&plain[..n]);
        }
        Ok(out)
    }

    /// An inode's extended attributes: (name, value), in hash order.
    pub fn xattrs(&mut self, inum: u32) -> Result<Vec<Xattr>, UbifsError> {
        let mut out = Vec::new();
        for x in self.entries_of(inum, XENT_KEY)? {
            let xino = self
                .inode(x.inum as u32)?
                .ok_or_else(|| UbifsError::Corrupt {
                    lnum: 0,
                    offs: 0,
                    what: format!("xattr of inode {inum} names missing inode {}", x.inum),
                })?;
            if xino.flags & XATTR_FL == 0 {
                return Err(UbifsError::Corrupt {
                    lnum: 0,
                    offs: 0,
                    what: format!("xattr inode {} lacks the xattr flag", x.inum),
                });
            }
            out.push((x.name, xino.data));
        }
        Ok(out)
    }

    /// The inodes holding the values of `inum`'s xattrs.
    pub fn xattr_inodes(&mut self, inum: u32) -> Result<Vec<u32>, UbifsError> {
        Ok(self
            .entries_of(inum, XENT_KEY)?
            .into_iter()
            .map(|x| x.inum as u32)
            .collect())
    }

    /// Every object reachable from the root, depth first, parents before children: its
    /// path (relative, '/'-separated; the root is empty), inode and entry type. A
    /// directory reached twice is damage (UBIFS has no directory hard links).
    pub fn walk(&mut self) -> Result<Vec<(Vec<u8>, InoNode)>, UbifsError> {
        let root = self
            .inode(ROOT_INO)?
            .ok_or_else(|| UbifsError::NotUbifs("no root directory inode".into()))?;
        let mut out = vec![(Vec::new(), root)];
        let mut seen_dirs = std::collections::BTreeSet::from([ROOT_INO]);
        let mut stack = vec![(Vec::<u8>::new(), ROOT_INO)];
        while let Some((path, dir)) = stack.pop() {
            let mut entries = self.read_dir(dir)?;
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for e in entries.into_iter().rev() {
                if e.name.contains(&b'/') || e.name == b"." || e.name == b".." {
                    return Err(UbifsError::Corrupt {
                        lnum: 0,
                        offs: 0,
                        what: format!("directory {dir} holds the name {:?}", e.name),
                    });
                }
                let ino = self.inode(e.inum)?.ok_or_else(|| UbifsError::Corrupt {
                    lnum: 0,
                    offs: 0,
                    what: format!(
                        "entry {:?} of directory {dir} names missing inode {}",
                        String::from_utf8_lossy(&e.name),
                        e.inum
                    ),
                })?;
                let mut p = path.clone();
                if !p.is_empty() {
                    p.push(b'/');
                }
                p.extend_from_slice(&e.name);
                if ino.mode & 0o170000 == 0o040000 {
                    if !seen_dirs.insert(e.inum) {
                        return Err(UbifsError::Corrupt {
                            lnum: 0,
                            offs: 0,
                            what: format!("directory inode {} reached twice", e.inum),
                        });
                    }
                    stack.push((p.clone(), e.inum));
                }
                out.push((p, ino));
            }
        }
        // Depth-first order with parents first: sort by path components.
        out.sort_by(|a, b| a.0.split(|&c| c == b'/').cmp(b.0.split(|&c| c == b'/')));
        Ok(out)
    }

    /// Nodes of every key the index holds, as (key, where): for checks.
    pub fn leaves(&self) -> impl Iterator<Item = (&Key, &Vec<Loc>)> {
        self.leaves.iter()
    }

    /// Reads and CRC-checks every leaf the index holds, and checks each is filed under its
    /// own key. Returns the count checked.
    pub fn check_leaves(&mut self) -> Result<u64, UbifsError> {
        let all: Vec<(Key, Loc)> = self
            .leaves
            .iter()
            .flat_map(|(k, v)| v.iter().map(move |l| (*k, *l)))
            .collect();
        for (key, loc) in &all {
            let bytes = self.node(*loc)?;
            let h = media::check(&bytes).map_err(|e| UbifsError::corrupt(*loc, &e.to_string()))?;
            if !matches!(
                h.node_type,
                NodeType::Ino | NodeType::Data | NodeType::Dent | NodeType::Xent
            ) || media::leaf_key(&bytes) != Some(*key)
            {
                return Err(UbifsError::corrupt(
                    *loc,
                    "index names a node of another key",
                ));
            }
        }
        Ok(all.len() as u64)
    }
}

pub(crate) fn read_superblock<S: LebSource>(src: &mut S) -> Result<SbNode, UbifsError> {
    if src.leb_size() < media::SB_NODE_SZ {
        return Err(UbifsError::NotUbifs(format!(
            "LEBs of {} bytes",
            src.leb_size()
        )));
    }
    let leb = src
        .read(SB_LNUM, 0, media::SB_NODE_SZ)?
        .ok_or(UbifsError::Unreadable { lnum: SB_LNUM })?;
    let (_, sb) =
        SbNode::decode(&leb).map_err(|e| UbifsError::NotUbifs(format!("superblock: {e}")))?;
    if sb.fmt_version < 4 || sb.fmt_version > 5 {
        return Err(UbifsError::Unsupported(format!(
            "on-flash format version {} (this reader reads 4 and 5)",
            sb.fmt_version
        )));
    }
    if sb.key_fmt != 0 || sb.key_hash != 0 {
        return Err(UbifsError::Unsupported(format!(
            "key format {} with key hash {} (this reader reads the simple format with R5)",
            sb.key_fmt, sb.key_hash
        )));
    }
    if sb.flags & (FLG_ENCRYPTION | FLG_AUTHENTICATION) != 0 {
        return Err(UbifsError::Unsupported(
            "encrypted or authenticated file system".into(),
        ));
    }
    if sb.leb_size as usize != src.leb_size() {
        return Err(UbifsError::NotUbifs(format!(
            "superblock says LEBs of {} bytes, the volume's are {}",
            sb.leb_size,
            src.leb_size()
        )));
    }
    if sb.leb_cnt > src.leb_count() || sb.main_first() >= sb.leb_cnt || sb.log_lebs < 2 {
        return Err(UbifsError::NotUbifs(format!(
            "superblock's areas ({} LEBs, main area from {}) do not fit the volume's {} LEBs",
            sb.leb_cnt,
            sb.main_first(),
            src.leb_count()
        )));
    }
    Ok(sb)
}

/// What the two master LEBs hold.
pub(crate) struct Masters {
    /// The newer of the last good master node of each LEB.
    pub mst: MstNode,
    /// The LEB it came from.
    pub lnum: u32,
    /// The two copies differ (a cut between their writes) or one is missing.
    pub differ: bool,
    /// Where each master LEB's written part ends (after its last node).
    pub ends: [usize; 2],
    /// The sequence number of the newer node.
    pub sqnum: u64,
}

/// The last good master node of each master LEB; the newer wins.
pub(crate) fn read_masters<S: LebSource>(src: &mut S) -> Result<Masters, UbifsError> {
    let mut found = Vec::new();
    let mut ends = [0usize; 2];
    for (i, lnum) in [MST_LNUM, MST_LNUM + 1].into_iter().enumerate() {
        let leb = src.read_leb_lossy(lnum)?;
        ends[i] = leb.iter().rposition(|&b| b != 0xFF).map_or(0, |p| p + 1);
        let (nodes, _) = replay::scan_leb(&leb, lnum, 0);
        let last = nodes
            .iter()
            .rev()
            .find(|(h, _)| h.node_type == NodeType::Mst)
            .and_then(|(h, loc)| {
                let b = &leb[loc.offs as usize..(loc.offs + loc.len) as usize];
                MstNode::decode(b).ok().map(|(_, m)| (h.sqnum, m, lnum))
            });
        found.extend(last);
    }
    let differ = found.len() != 2 || found[0].1 != found[1].1;
    let (sqnum, mst, lnum) = found
        .into_iter()
        .max_by_key(|(sq, _, _)| *sq)
        .ok_or_else(|| UbifsError::NotUbifs("no good master node in LEB 1 or 2".into()))?;
    Ok(Masters {
        mst,
        lnum,
        differ,
        ends,
        sqnum,
    })
}

#[cfg(test)]
mod tests {
    use super::super::key::Key;
    use super::super::media::*;
    use super::super::volume::MemVolume;
    use super::*;
    use std::rc::Rc;

    const LEB: usize = 16 * 1024;

    /// A volume laid out by hand: superblock, master nodes, a log whose commit-start node
    /// is followed by references to `buds`, an index over `indexed` leaves in LEB 8.
    struct Builder {
        lebs: Vec<Vec<u8>>,
        fill: Vec<usize>,
        sq: u64,
    }

    impl Builder {
        fn new() -> Builder {
            Builder {
                lebs: vec![vec![0xFF; LEB]; 20],
                fill: vec![0; 20],
                sq: 0,
            }
        }
        /// Appends a node (8-byte aligned), returning where it went.
        fn put(&mut self, lnum: u32, node: Vec<u8>) -> Loc {
            let at = self.fill[lnum as usize];
            self.lebs[lnum as usize][at..at + node.len()].copy_from_slice(&node);
            self.fill[lnum as usize] = align8(at + node.len());
            Loc {
                lnum,
                offs: at as u32,
                len: node.len() as u32,
            }
        }
        fn sq(&mut self) -> u64 {
            self.sq += 1;
            self.sq
        }
        fn ino(
            &mut self,
            lnum: u32,
            inum: u32,
            mode: u32,
            size: u64,
            nlink: u32,
            group: u8,
        ) -> Loc {
            let sq = self.sq();
            let n = InoNode {
                inum,
                mode,
                size,
                nlink,
                ..Default::default()
            };
            self.put(lnum, n.encode(sq, group))
        }
        fn dent(&mut self, lnum: u32, dir: u32, name: &[u8], inum: u64, group: u8) -> Loc {
            let sq = self.sq();
            let n = DentNode {
                key: Key::dent(dir, name),
                inum,
                dtype: ITYPE_REG,
                name: name.to_vec(),
            };
            self.put(lnum, n.encode(sq, group))
        }
        fn data(&mut self, lnum: u32, inum: u32, block: u32, bytes: &[u8]) -> Loc {
            let sq = self.sq();
            let n = DataNode {
                key: Key::data(inum, block),
                size: bytes.len() as u32,
                compr_type: COMPR_NONE,
                data: bytes.to_vec(),
            };
            self.put(lnum, n.encode(sq, NO_NODE_GROUP))
        }
        fn finish(mut self, indexed: &[(Key, Loc)], buds: &[(u32, u32)]) -> MemVolume {
            let sb = SbNode {
                leb_size: LEB as u32,
                leb_cnt: 20,
                max_leb_cnt: 20,
                log_lebs: 2,
                lpt_lebs: 2,
                orph_lebs: 1,
                fmt_version: 5,
                fanout: 8,
                min_io_size: 512,
                ..Default::default()
            };
            let sq = self.sq();
            self.put(SB_LNUM, sb.encode(sq));
            let idx = IdxNode {
                level: 0,
                branches: indexed
                    .iter()
                    .map(|(k, l)| Branch {
                        lnum: l.lnum,
                        offs: l.offs,
                        len: l.len,
                        key: *k,
                    })
                    .collect(),
            };
            let sq = self.sq();
            let root = self.put(9, idx.encode(sq));
            let cs_sq = self.sq();
            self.put(LOG_LNUM, encode_cs(4, cs_sq));
            for &(lnum, offs) in buds {
                let sq = self.sq();
                let r = RefNode {
                    lnum,
                    offs,
                    jhead: 1,
                };
                self.put(LOG_LNUM, r.encode(sq));
            }
            let mst = MstNode {
                cmt_no: 4,
                log_lnum: LOG_LNUM,
                root_lnum: root.lnum,
                root_offs: root.offs,
                root_len: root.len,
                leb_cnt: 20,
                ..Default::default()
            };
            for lnum in [MST_LNUM, MST_LNUM + 1] {
                let sq = self.sq();
                self.put(lnum, mst.encode(sq));
            }
            MemVolume {
                leb_size: LEB,
                lebs: self.lebs.into_iter().map(Rc::new).collect(),
            }
        }
    }

    const REG: u32 = 0o100644;
    const DIR: u32 = 0o040755;

    /// The journal since the commit is applied in sequence-number order on top of the
    /// index: a new file, an overwritten block, a truncation, a deletion (entry with inode
    /// 0, inode with nlink 0); a group cut short (its last node missing) is dropped.
    #[test]
    fn replay_applies_buds_over_the_index() {
        let mut b = Builder::new();
        // Committed state: root with "old" (inode 65, two blocks) and "gone" (inode 66).
        let r = b.ino(8, ROOT_INO, DIR, 0, 2, NO_NODE_GROUP);
        let o = b.ino(8, 65, REG, 8192, 1, NO_NODE_GROUP);
        let d0 = b.data(8, 65, 0, &[1; 4096]);
        let d1 = b.data(8, 65, 1, &[2; 4096]);
        let g = b.ino(8, 66, REG, 0, 1, NO_NODE_GROUP);
        let eo = b.dent(8, ROOT_INO, b"old", 65, NO_NODE_GROUP);
        let eg = b.dent(8, ROOT_INO, b"gone", 66, NO_NODE_GROUP);
        let mut indexed = vec![
            (Key::ino(ROOT_INO), r),
            (Key::ino(65), o),
            (Key::data(65, 0), d0),
            (Key::data(65, 1), d1),
            (Key::ino(66), g),
            (Key::dent(ROOT_INO, b"old"), eo),
            (Key::dent(ROOT_INO, b"gone"), eg),
        ];
        indexed.sort_by_key(|(k, _)| *k);
        // The journal, in bud LEB 10 from offset 0 and bud LEB 11 from 512.
        b.data(10, 65, 0, &[7; 100]);
        b.ino(10, 65, REG, 100, 1, NO_NODE_GROUP);
        let sq = b.sq();
        let t = TrunNode {
            inum: 65,
            old_size: 8192,
            new_size: 100,
        };
        b.put(10, t.encode(sq, NO_NODE_GROUP));
        b.dent(10, ROOT_INO, b"gone", 0, IN_NODE_GROUP);
        b.ino(10, 66, REG, 0, 0, LAST_OF_NODE_GROUP);
        b.fill[11] = 512;
        b.ino(11, 67, REG, 0, 1, IN_NODE_GROUP);
        b.dent(11, ROOT_INO, b"new", 67, LAST_OF_NODE_GROUP);
        b.data(11, 67, 0, b"new");
        b.ino(11, 67, REG, 3, 1, NO_NODE_GROUP);
        // A group whose last node never made it: a cut.
        b.ino(11, 68, REG, 0, 1, IN_NODE_GROUP);
        let vol = b.finish(&indexed, &[(10, 0), (11, 512)]);

        let mut img = UbifsImage::open(vol).unwrap();
        assert_eq!(img.stats.replay.buds, 2);
        assert_eq!(img.stats.replay.dropped_in_groups, 1);
        let mut names: Vec<_> = img
            .read_dir(ROOT_INO)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        names.sort();
        assert_eq!(names, [b"new".to_vec(), b"old".to_vec()]);
        let old = img.inode(65).unwrap().unwrap();
        assert_eq!(img.read_file(&old).unwrap(), vec![7; 100]);
        assert!(img.inode(66).unwrap().is_none(), "deleted inode");
        assert!(img.inode(68).unwrap().is_none(), "cut group");
        let new = img.inode(67).unwrap().unwrap();
        assert_eq!(img.read_file(&new).unwrap(), b"new");
        assert_eq!(img.lookup(ROOT_INO, b"new").unwrap(), Some(67));
        assert_eq!(img.check_leaves().unwrap(), 7);
    }

    /// A log that does not start with the master's commit is refused; a torn bud tail
    /// (garbage after the last node) ends the bud and is counted.
    #[test]
    fn log_and_bud_damage() {
        let mut b = Builder::new();
        let r = b.ino(8, ROOT_INO, DIR, 0, 2, NO_NODE_GROUP);
        b.ino(10, 70, REG, 0, 1, NO_NODE_GROUP);
        b.lebs[10][b.fill[10] + 3] = 0x12;
        let vol = b.finish(&[(Key::ino(ROOT_INO), r)], &[(10, 0)]);
        let mut img = UbifsImage::open(vol).unwrap();
        assert_eq!(img.stats.replay.torn_tails, 1);
        assert!(img.inode(70).unwrap().is_some());

        let mut b = Builder::new();
        let r = b.ino(8, ROOT_INO, DIR, 0, 2, NO_NODE_GROUP);
        let mut vol = b.finish(&[(Key::ino(ROOT_INO), r)], &[]);
        let mut log = (*vol.lebs[LOG_LNUM as usize]).clone();
        let stale = encode_cs(3, 1);
        log[..stale.len()].copy_from_slice(&stale);
        vol.lebs[LOG_LNUM as usize] = Rc::new(log);
        let err = UbifsImage::open(vol).err().unwrap().to_string();
        assert!(err.contains("log starts with commit 3"), "{err}");
    }
}
