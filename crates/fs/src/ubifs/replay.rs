//! Journal replay, as UBIFS mounts: the log (from the master node's log LEB) starts with
//! the commit-start node of the last commit, then reference nodes name the buds written
//! since; every node of every bud is applied to the index in sequence-number order. A
//! node group (nodes the journal wrote as one) counts only when its last node is there,
//! so a power cut inside a group drops the whole group; a bud ends at its first empty or
//! damaged node (the cut's tail).

use super::image::{Loc, UbifsError};
use super::index::{node_bytes, Leaves};
use super::key::{Key, DATA_KEY};
use super::media::{
    self, align8, DentNode, Header, InoNode, NodeError, NodeType, RefNode, TrunNode, BLOCK_SIZE,
    IN_NODE_GROUP, LAST_OF_NODE_GROUP, LOG_LNUM, PADDING_BYTE,
};
use super::volume::LebSource;

/// What replay found.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplayStats {
    pub log_lebs: u32,
    pub buds: u32,
    pub nodes: u64,
    /// Nodes dropped because their group was cut short.
    pub dropped_in_groups: u64,
    /// Buds that ended in damage rather than empty space (a cut's torn tail).
    pub torn_tails: u32,
    /// Where the log ends: its last LEB and the end of its last node there.
    pub log_end: (u32, u32),
    /// The highest sequence number in the log.
    pub log_max_sqnum: u64,
}

/// A node of a bud, to be applied in sequence-number order.
struct Entry {
    sqnum: u64,
    loc: Loc,
    node_type: NodeType,
}

/// How a scan of a LEB from some offset ended.
pub enum ScanEnd {
    /// Empty space (or the LEB's end).
    Clean,
    /// Bytes that are neither a node nor empty.
    Damaged(u32, NodeError),
}

/// Scans the nodes of `leb` from `offs`: every good node as (header, where), then how the
/// scan ended. Padding nodes and padding bytes are stepped over.
pub fn scan_leb(leb: &[u8], lnum: u32, mut offs: usize) -> (Vec<(Header, Loc)>, ScanEnd) {
    let mut nodes = Vec::new();
    while offs + media::CH_SZ <= leb.len() {
        let rest = &leb[offs..];
        match media::check(rest) {
            Ok(h) if h.node_type == NodeType::Pad => match media::pad_span(rest) {
                Ok(span) => offs = align8(offs + span),
                Err(e) => return (nodes, ScanEnd::Damaged(offs as u32, e)),
            },
            Ok(h) => {
                nodes.push((
                    h,
                    Loc {
                        lnum,
                        offs: offs as u32,
                        len: h.len,
                    },
                ));
                offs = align8(offs + h.len as usize);
            }
            Err(NodeError::Empty) => {
                return if rest.iter().all(|&b| b == 0xFF) {
                    (nodes, ScanEnd::Clean)
                } else {
                    (nodes, ScanEnd::Damaged(offs as u32, NodeError::Empty))
                };
            }
            Err(_) if rest[0] == PADDING_BYTE => {
                let n = rest.iter().take_while(|&&b| b == PADDING_BYTE).count();
                offs = align8(offs + n);
            }
            Err(e) => return (nodes, ScanEnd::Damaged(offs as u32, e)),
        }
    }
    (nodes, ScanEnd::Clean)
}

/// The nodes of a bud that count: a node group (nodes the journal wrote as one) only when
/// its last node is there; the nodes of a group cut short are counted as dropped.
pub fn whole_groups(nodes: Vec<(Header, Loc)>, stats: &mut ReplayStats) -> Vec<(Header, Loc)> {
    let mut out = Vec::with_capacity(nodes.len());
    let mut group = Vec::new();
    for n in nodes {
        match n.0.group_type {
            IN_NODE_GROUP => group.push(n),
            LAST_OF_NODE_GROUP => {
                out.append(&mut group);
                out.push(n);
            }
            _ => {
                stats.dropped_in_groups += group.len() as u64;
                group.clear();
                out.push(n);
            }
        }
    }
    stats.dropped_in_groups += group.len() as u64;
    out
}

/// Reads the log from `log_lnum` and replays its buds into `leaves`. `log_lebs` is the log
/// area's size; `cmt_no` the master node's commit number.
pub fn replay<S: LebSource>(
    src: &mut S,
    leaves: &mut Leaves,
    log_lnum: u32,
    log_lebs: u32,
    cmt_no: u64,
) -> Result<(ReplayStats, Vec<RefNode>), UbifsError> {
    let mut stats = ReplayStats::default();
    let refs = read_log(src, log_lnum, log_lebs, cmt_no, &mut stats)?;
    let mut entries = Vec::new();
    for r in &refs {
        let leb = src.read_leb_lossy(r.lnum)?;
        let (nodes, end) = scan_leb(&leb, r.lnum, r.offs as usize);
        if matches!(end, ScanEnd::Damaged(..)) {
            stats.torn_tails += 1;
        }
        stats.buds += 1;
        for (h, loc) in whole_groups(nodes, &mut stats) {
            entries.push(Entry {
                sqnum: h.sqnum,
                loc,
                node_type: h.node_type,
            });
        }
    }
    entries.sort_by_key(|e| e.sqnum);
    for e in &entries {
        apply(src, leaves, e)?;
        stats.nodes += 1;
    }
    Ok((stats, refs))
}

/// The buds the log names since the commit `cmt_no`.
pub(crate) fn read_log<S: LebSource>(
    src: &mut S,
    log_lnum: u32,
    log_lebs: u32,
    cmt_no: u64,
    stats: &mut ReplayStats,
) -> Result<Vec<RefNode>, UbifsError> {
    let mut refs = Vec::new();
    let mut cs_sqnum = None;
    let mut lnum = log_lnum;
    for _ in 0..log_lebs {
        let leb = src.read_leb_lossy(lnum)?;
        let (nodes, _) = scan_leb(&leb, lnum, 0);
        // An empty LEB, or one an earlier log left: the log ended before it.
        match (nodes.first(), cs_sqnum) {
            (None, _) => break,
            (Some((h, _)), Some(cs)) if h.sqnum < cs => break,
            _ => {}
        }
        stats.log_lebs += 1;
        let node = |loc: Loc| &leb[loc.offs as usize..(loc.offs + loc.len) as usize];
        for (h, loc) in nodes {
            if cs_sqnum.is_none_or(|cs| h.sqnum >= cs) {
                stats.log_end = (lnum, loc.offs + loc.len);
                stats.log_max_sqnum = stats.log_max_sqnum.max(h.sqnum);
            }
            match (cs_sqnum, h.node_type) {
                (None, NodeType::Cs) => {
                    let (_, n) = media::decode_cs(node(loc))
                        .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
                    if n != cmt_no {
                        return Err(UbifsError::corrupt(
                            loc,
                            &format!("log starts with commit {n}, the master node says {cmt_no}"),
                        ));
                    }
                    cs_sqnum = Some(h.sqnum);
                }
                (None, _) => {
                    return Err(UbifsError::corrupt(loc, "log does not start with a commit"))
                }
                // Older than this commit: the rest is an earlier commit's log.
                (Some(cs), _) if h.sqnum < cs => return Ok(refs),
                (Some(_), NodeType::Ref) => {
                    let (_, r) = RefNode::decode(node(loc))
                        .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
                    if r.lnum >= src.leb_count() || r.offs as usize >= src.leb_size() {
                        return Err(UbifsError::corrupt(loc, "reference to a bud outside"));
                    }
                    refs.push(r);
                }
                (Some(_), NodeType::Cs) => return Ok(refs),
                (Some(_), _) => return Err(UbifsError::corrupt(loc, "unexpected node in log")),
            }
        }
        lnum = if lnum + 1 >= LOG_LNUM + log_lebs {
            LOG_LNUM
        } else {
            lnum + 1
        };
        if lnum == log_lnum {
            break;
        }
    }
    Ok(refs)
}

/// Applies one journal node to the index.
fn apply<S: LebSource>(src: &mut S, leaves: &mut Leaves, e: &Entry) -> Result<(), UbifsError> {
    let bytes = node_bytes(src, e.loc)?;
    let bad = |err: NodeError| UbifsError::corrupt(e.loc, &err.to_string());
    match e.node_type {
        NodeType::Ino => {
            let (_, ino) = InoNode::decode(&bytes).map_err(bad)?;
            if ino.nlink == 0 {
                // A deleted inode goes with all it had, its xattrs' inodes too.
                let mut doomed: Vec<Key> = leaves
                    .range(Key::inode_range(ino.inum))
                    .map(|(k, _)| *k)
                    .collect();
                let xents: Vec<Loc> = leaves
                    .range(Key::kind_range(ino.inum, super::key::XENT_KEY))
                    .flat_map(|(_, v)| v.iter().copied())
                    .collect();
                for loc in xents {
                    let (_, x) = DentNode::decode(&node_bytes(src, loc)?)
                        .map_err(|err| UbifsError::corrupt(loc, &err.to_string()))?;
                    if let Ok(xinum) = u32::try_from(x.inum) {
                        if xinum != ino.inum {
                            doomed.extend(leaves.range(Key::inode_range(xinum)).map(|(k, _)| *k));
                        }
                    }
                }
                for k in doomed {
                    leaves.remove(&k);
                }
            } else {
                leaves.insert(Key::ino(ino.inum), vec![e.loc]);
            }
        }
        NodeType::Data => {
            let key = media::leaf_key(&bytes).ok_or_else(|| bad(NodeError::BadLength(0)))?;
            if key.kind() != DATA_KEY {
                return Err(bad(NodeError::BadField("data node key")));
            }
            leaves.insert(key, vec![e.loc]);
        }
        NodeType::Dent | NodeType::Xent => {
            let (_, d) = DentNode::decode(&bytes).map_err(bad)?;
            // Entries sharing the key (hash collisions) are told apart by name.
            let same = leaves.remove(&d.key).unwrap_or_default();
            let mut kept = Vec::with_capacity(same.len() + 1);
            for loc in same {
                let (_, other) = DentNode::decode(&node_bytes(src, loc)?)
                    .map_err(|err| UbifsError::corrupt(loc, &err.to_string()))?;
                if other.name != d.name {
                    kept.push(loc);
                }
            }
            if d.inum != 0 {
                kept.push(e.loc);
            }
            if !kept.is_empty() {
                leaves.insert(d.key, kept);
            }
        }
        NodeType::Trun => {
            let (_, t) = TrunNode::decode(&bytes).map_err(bad)?;
            let first = t
                .new_size
                .div_ceil(BLOCK_SIZE)
                .min(u64::from(u32::MAX >> 3)) as u32;
            let gone: Vec<Key> = leaves
                .range(Key::data(t.inum, first)..=*Key::kind_range(t.inum, DATA_KEY).end())
                .map(|(k, _)| *k)
                .collect();
            for k in gone {
                leaves.remove(&k);
            }
        }
        // Anything else in a bud (an index node of a commit in progress, an orphan node)
        // is not the journal's.
        _ => {}
    }
    Ok(())
}
