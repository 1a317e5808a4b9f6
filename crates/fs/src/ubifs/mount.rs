//! mkfs and mount. mkfs writes the superblock, an empty log, the root directory's inode
//! through the journal, and commits (index, LPT, log, master). A mount reads what Linux's
//! does and nothing that grows with the files: the superblock, the newer master node, the
//! LPT (one small node per 4 LEBs), the log, and the buds it names, replayed into the TNC in
//! sequence-number order; the index itself is read only as lookups need it. A mount that
//! replayed a journal (an unclean unmount, a cut) commits at once, as Linux's recovery does,
//! so the next journal starts from a clean log.

use super::fs::{Head, MountSteps, UbifsFs, UbifsOptions, UbifsStats, BASE_HEAD};
use super::image::{read_masters, read_superblock, Loc, UbifsError};
use super::io::LebIo;
use super::key::{Key, DATA_KEY, DENT_KEY, XENT_KEY};
use super::lpt::{self, LptGeom};
use super::media::{
    self, align8, encode_cs, DentNode, InoNode, MstNode, NodeType, SbNode, TrunNode, BLOCK_SIZE,
    LOG_LNUM, NO_NODE_GROUP, ROOT_INO, SB_LNUM,
};
use super::replay::{read_log, scan_leb, whole_groups, ReplayStats, ScanEnd};
use super::space::Space;
use super::tnc::Tnc;
use super::volume::LebSource;
use nandkit_flash::Flash;

/// Linux's minimum: superblock, 2 master, 2 log, 2 LPT, 1 orphan, 9 main LEBs.
pub const MIN_LEB_CNT: u32 = 17;

impl<D: Flash> UbifsFs<D> {
    /// Makes a UBIFS on every LEB of the device (an empty root directory).
    pub fn format(dev: D, opts: UbifsOptions, now: media::Time) -> Result<Self, UbifsError> {
        let io = LebIo::new(dev)?;
        let leb_size = io.leb_size() as u32;
        let min_io = io.min_io() as u32;
        let leb_cnt = io.lebs();
        if leb_size < 15 * 1024 {
            return Err(UbifsError::Unsupported(format!(
                "LEBs of {leb_size} bytes: UBIFS needs at least 15 KiB"
            )));
        }
        if leb_cnt < MIN_LEB_CNT {
            return Err(UbifsError::Unsupported(format!(
                "{leb_cnt} LEBs: UBIFS needs at least {MIN_LEB_CNT}"
            )));
        }
        if !(3..=64).contains(&opts.fanout) {
            return Err(UbifsError::Unsupported(format!("fanout {}", opts.fanout)));
        }
        // mkfs.ubifs's defaults: a journal of about 1/8 of the main area (4 LEBs to 8 MiB),
        // a log to name its buds plus 2, one orphan LEB, an LPT area 4 times the LPT.
        let orph_lebs = 1;
        let rough_main = leb_cnt - 1 - 2 - 2 - 2 - orph_lebs;
        let max_bud_bytes = (u64::from(rough_main / 8) * u64::from(leb_size))
            .min(8 << 20)
            .max(4 * u64::from(leb_size));
        let buds = max_bud_bytes.div_ceil(u64::from(leb_size));
        let align = |x: u64| x.div_ceil(u64::from(min_io)) * u64::from(min_io);
        let log_size = align(media::REF_NODE_SZ as u64) * buds
            + align((media::CS_NODE_SZ + media::REF_NODE_SZ * 5) as u64);
        let log_lebs = log_size.div_ceil(u64::from(leb_size)) as u32 + 1 + 2;
        let mut sb = SbNode {
            key_hash: 0,
            key_fmt: 0,
            flags: 0,
            min_io_size: min_io,
            leb_size,
            leb_cnt,
            max_leb_cnt: leb_cnt,
            max_bud_bytes,
            log_lebs,
            lpt_lebs: 2,
            orph_lebs,
            jhead_cnt: 1,
            fanout: opts.fanout,
            lsave_cnt: 256,
            fmt_version: 4,
            default_compr: media::COMPR_NONE,
            time_gran: 1,
            uuid: uuid_from(opts.seed),
            ..Default::default()
        };
        let g = LptGeom::from_sb(&sb)?;
        let lpt_sz =
            g.pnode_cnt as usize * g.pnode_sz + g.nnode_cnt as usize * g.nnode_sz + g.ltab_sz;
        if lpt_sz + g.pnode_sz.max(g.nnode_sz) > leb_size as usize {
            return Err(UbifsError::Unsupported(format!(
                "{leb_cnt} LEBs of {leb_size} bytes need Linux's big LPT model, which nandkit \
                 does not write yet"
            )));
        }
        sb.lpt_lebs = (2 * lpt_sz as u32 * 4).div_ceil(leb_size).max(2);
        if sb.main_first() + 9 > leb_cnt {
            return Err(UbifsError::Unsupported(
                "too few LEBs for a main area".into(),
            ));
        }
        let main_lebs = leb_cnt - sb.main_first();
        let mut fs = UbifsFs {
            io,
            mst: MstNode {
                log_lnum: LOG_LNUM,
                leb_cnt,
                ..Default::default()
            },
            mst_offs: [0, 0],
            tnc: Tnc::new_empty(opts.fanout as usize),
            space: Space::empty(sb.main_first(), main_lebs, leb_size),
            heads: Default::default(),
            ihead: Head::default(),
            log_lnum: LOG_LNUM,
            log_offs: 0,
            sqnum: 0,
            highest_inum: u64::from(media::ROOT_INO),
            bud_bytes: 0,
            opts,
            read_only: false,
            stats: UbifsStats::default(),
            sb,
        };
        for lnum in 0..leb_cnt {
            fs.io.unmap(lnum)?;
        }
        let sq = fs.next_sqnum();
        let mut unit = fs.sb.encode(sq);
        let page = min_io as usize;
        super::commit::pad_to(&mut unit, media::SB_NODE_SZ.div_ceil(page) * page);
        fs.io.program(SB_LNUM, 0, &unit)?;
        // The log of commit 0: its commit-start node.
        let sq = fs.next_sqnum();
        let mut unit = Vec::new();
        super::fs::append_aligned(&mut unit, &encode_cs(0, sq));
        super::commit::pad_to(&mut unit, page);
        fs.io.program(LOG_LNUM, 0, &unit)?;
        fs.log_offs = page;
        let root = InoNode {
            inum: ROOT_INO,
            creat_sqnum: fs.sqnum,
            size: media::INO_NODE_SZ as u64,
            atime: now,
            ctime: now,
            mtime: now,
            nlink: 2,
            mode: 0o040755,
            ..Default::default()
        };
        let sq = fs.next_sqnum();
        let loc = fs.jwrite(BASE_HEAD, &[root.encode(sq, NO_NODE_GROUP)])?[0];
        fs.tnc_replace(Key::ino(ROOT_INO), loc)?;
        fs.commit()?;
        Ok(fs)
    }

    /// Mounts the UBIFS on the device (read-only: nothing is written, not even recovery).
    pub fn mount(dev: D, opts: UbifsOptions, read_only: bool) -> Result<Self, UbifsError> {
        let mut io = LebIo::new(dev)?;
        let t0 = io.dev.now_ns();
        let mut sb = read_superblock(&mut io)?;
        if sb.flags & media::FLG_BIGLPT != 0 {
            return Err(UbifsError::Unsupported(
                "Linux's big LPT model is read by `nandkit ubifs`, not mounted yet".into(),
            ));
        }
        if !(3..=64).contains(&sb.fanout) {
            return Err(UbifsError::NotUbifs(format!("fanout {}", sb.fanout)));
        }
        let t_sb = io.dev.now_ns();
        let masters = read_masters(&mut io)?;
        let (mst, masters_differ) = (masters.mst, masters.differ);
        let page = io.min_io();
        let mst_offs = masters.ends.map(|e| e.div_ceil(page) * page);
        // A volume larger than the superblock counts (mkfs.ubifs counts only the LEBs its
        // image fills) grows to the volume, up to `max_leb_cnt`, as Linux's mount grows it:
        // the superblock is rewritten by an atomic LEB change.
        let grow_to = io.lebs().min(sb.max_leb_cnt);
        let grown = !read_only && grow_to > sb.leb_cnt;
        if grown {
            sb.leb_cnt = grow_to;
            let mut unit = sb.encode(masters.sqnum);
            super::commit::pad_to(&mut unit, media::SB_NODE_SZ.div_ceil(page) * page);
            io.change(SB_LNUM, &unit)?;
        }
        let t_mst = io.dev.now_ns();
        let g = LptGeom::from_sb(&sb)?;
        let table = lpt::read(&mut io, &g, &mst)?;
        let t_lpt = io.dev.now_ns();
        let main_lebs = sb.leb_cnt - sb.main_first();
        let space = Space::from_lpt(
            sb.main_first(),
            sb.leb_size,
            &table.props[..main_lebs as usize],
        );
        let root = Loc {
            lnum: mst.root_lnum,
            offs: mst.root_offs,
            len: mst.root_len,
        };
        let mut fs = UbifsFs {
            io,
            tnc: Tnc::from_root(root, sb.fanout as usize),
            space,
            heads: Default::default(),
            ihead: Head {
                lnum: None,
                ..Default::default()
            },
            log_lnum: mst.log_lnum,
            log_offs: 0,
            sqnum: 0,
            highest_inum: mst.highest_inum,
            bud_bytes: 0,
            opts,
            read_only,
            stats: UbifsStats::default(),
            mst_offs,
            mst,
            sb,
        };
        // Sequence numbers go on from the highest on flash: the master's (written last by
        // a commit), then the log's and the buds' as replay reads them.
        fs.sqnum = masters.sqnum;
        let replayed = fs.replay_journal()?;
        let t_replay = fs.io.dev.now_ns();
        if !read_only && (grown || replayed.nodes > 0 || replayed.torn_tails > 0 || masters_differ)
        {
            fs.commit()?;
        }
        fs.stats.mount_steps_ns = MountSteps {
            superblock: t_sb - t0,
            master: t_mst - t_sb,
            lpt: t_lpt - t_mst,
            replay: t_replay - t_lpt,
            recovery_commit: fs.io.dev.now_ns() - t_replay,
        };
        Ok(fs)
    }

    /// Reads the log and replays its buds into the TNC; sets the log's end.
    fn replay_journal(&mut self) -> Result<ReplayStats, UbifsError> {
        let mut stats = ReplayStats::default();
        let refs = read_log(
            &mut self.io,
            self.mst.log_lnum,
            self.sb.log_lebs,
            self.mst.cmt_no,
            &mut stats,
        )?;
        // The log goes on after its last node (in a new min. I/O unit).
        let page = self.io.min_io();
        (self.log_lnum, self.log_offs) = (
            stats.log_end.0,
            (stats.log_end.1 as usize).div_ceil(page) * page,
        );
        self.sqnum = self.sqnum.max(stats.log_max_sqnum);

        let mut entries: Vec<(u64, NodeType, Loc)> = Vec::new();
        // Each bud read once; replay takes its nodes from these bytes.
        let mut buds: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
        for r in &refs {
            if self.space.get(r.lnum).is_none() {
                return Err(UbifsError::Corrupt {
                    lnum: r.lnum,
                    offs: r.offs,
                    what: "log names a bud outside the main area".into(),
                });
            }
            let leb = match buds.get(&r.lnum) {
                Some(b) => b.clone(),
                None => {
                    let b = self.io.read_leb_lossy(r.lnum)?;
                    buds.insert(r.lnum, b.clone());
                    b
                }
            };
            let (nodes, end) = scan_leb(&leb, r.lnum, r.offs as usize);
            stats.buds += 1;
            if matches!(end, ScanEnd::Damaged(..)) {
                stats.torn_tails += 1;
            }
            let before = entries.len();
            // Sequence numbers go on from the highest on flash, a dropped node's included.
            for (h, _) in &nodes {
                self.sqnum = self.sqnum.max(h.sqnum);
            }
            for (h, loc) in whole_groups(nodes, &mut stats) {
                entries.push((h.sqnum, h.node_type, loc));
            }
            // Nodes of a group cut short are dead from the start.
            let live_bytes: u32 = entries[before..]
                .iter()
                .map(|(_, _, loc)| align8(loc.len as usize) as u32)
                .sum();
            // The bud as written: nothing after its last programmed unit will be written
            // again (a new head takes an empty LEB); what is not a node is dirty.
            let written = leb
                .iter()
                .rposition(|&b| b != 0xFF)
                .map_or(0, |p| (p + 1).div_ceil(page) * page);
            let since = written.saturating_sub(r.offs as usize) as u32;
            let lp = self.space.get_mut(r.lnum);
            lp.free = (leb.len() - written.max(leb.len() - lp.free as usize)) as u32;
            lp.dirty += since.saturating_sub(live_bytes);
        }
        entries.sort_by_key(|e| e.0);
        // How far each file's data reaches by the journal (Linux's `ubifs_recover_size`):
        // data written before a cut whose inode (with the new size) never made it.
        let mut data_end: std::collections::BTreeMap<u32, u64> = Default::default();
        for (_, node_type, loc) in entries {
            let leb = &buds[&loc.lnum];
            let bytes = leb[loc.offs as usize..(loc.offs + loc.len) as usize].to_vec();
            if let Some((inum, end)) = self.replay_node(node_type, loc, &bytes)? {
                if node_type == NodeType::Trun {
                    data_end.insert(inum, end);
                } else {
                    let e = data_end.entry(inum).or_default();
                    *e = (*e).max(end);
                }
            }
            stats.nodes += 1;
        }
        if !self.read_only {
            for (inum, end) in data_end {
                let Some(mut ino) = self.inode(inum)? else {
                    continue;
                };
                if end > ino.size && ino.mode & 0o170000 == 0o100000 {
                    ino.size = end;
                    let sq = self.next_sqnum();
                    let loc = self.jwrite(BASE_HEAD, &[ino.encode(sq, NO_NODE_GROUP)])?[0];
                    self.tnc_replace(Key::ino(inum), loc)?;
                    self.stats.mount_sizes_recovered += 1;
                }
            }
        }
        self.stats.mount_log_lebs = stats.log_lebs;
        self.stats.mount_buds = stats.buds;
        self.stats.mount_nodes_replayed = stats.nodes;
        Ok(stats)
    }

    /// Applies one journal node to the TNC (with the space it makes dead). For a data node,
    /// its file and where its data ends; for a truncation, its file and new size.
    fn replay_node(
        &mut self,
        node_type: NodeType,
        loc: Loc,
        bytes: &[u8],
    ) -> Result<Option<(u32, u64)>, UbifsError> {
        let bad = |e: media::NodeError| UbifsError::corrupt(loc, &e.to_string());
        match node_type {
            NodeType::Ino => {
                let (_, ino) = InoNode::decode(bytes).map_err(bad)?;
                self.highest_inum = self.highest_inum.max(u64::from(ino.inum));
                if ino.nlink == 0 {
                    self.tnc_remove_inode(ino.inum)?;
                    self.space
                        .add_dirt(loc.lnum, align8(loc.len as usize) as u32);
                } else {
                    self.tnc_replace(Key::ino(ino.inum), loc)?;
                }
            }
            NodeType::Data => {
                let key =
                    media::leaf_key(bytes).ok_or_else(|| bad(media::NodeError::BadLength(0)))?;
                if key.kind() != DATA_KEY {
                    return Err(bad(media::NodeError::BadField("data node key")));
                }
                self.tnc_replace(key, loc)?;
                let size = u64::from(u32::from_le_bytes(bytes[40..44].try_into().expect("4")));
                return Ok(Some((key.inum, u64::from(key.low()) * BLOCK_SIZE + size)));
            }
            NodeType::Dent | NodeType::Xent => {
                let (_, d) = DentNode::decode(bytes).map_err(bad)?;
                self.remove_entry_named(d.key, &d.name)?;
                if d.inum == 0 {
                    self.space
                        .add_dirt(loc.lnum, align8(loc.len as usize) as u32);
                } else {
                    self.tnc_add(d.key, loc)?;
                }
            }
            NodeType::Trun => {
                let (_, t) = TrunNode::decode(bytes).map_err(bad)?;
                let first = t
                    .new_size
                    .div_ceil(BLOCK_SIZE)
                    .min(u64::from(u32::MAX >> 3)) as u32;
                let r = Key::kind_range(t.inum, DATA_KEY);
                self.tnc_remove_range(Key::data(t.inum, first), *r.end())?;
                self.space
                    .add_dirt(loc.lnum, align8(loc.len as usize) as u32);
                return Ok(Some((t.inum, t.new_size)));
            }
            _ => {}
        }
        Ok(None)
    }

    /// Removes the entry of `key` whose name is `name`, if there is one.
    pub(super) fn remove_entry_named(
        &mut self,
        key: Key,
        name: &[u8],
    ) -> Result<Option<Loc>, UbifsError> {
        debug_assert!(matches!(key.kind(), DENT_KEY | XENT_KEY));
        for loc in self.tnc_lookup(key)? {
            let b = self.read_node(loc)?;
            let (_, d) =
                DentNode::decode(&b).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            if d.name == name {
                self.tnc_remove_loc(key, loc)?;
                return Ok(Some(loc));
            }
        }
        Ok(None)
    }

    /// Commits and gives the device back: the next mount replays nothing.
    pub fn unmount(mut self) -> Result<D, UbifsError> {
        if !self.read_only {
            // Heads closed first: the new log names no bud, so the next mount replays none.
            for h in 0..self.heads.len() {
                super::fs::close_head(&mut self.io, &mut self.space, &mut self.heads[h])?;
            }
            self.commit()?;
        }
        Ok(self.io.dev)
    }
}

/// A version-4 UUID drawn from the seed (the volume's identity; nothing depends on it).
fn uuid_from(seed: u64) -> [u8; 16] {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut u = [0u8; 16];
    for b in &mut u {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    u[6] = (u[6] & 0x0F) | 0x40;
    u[8] = (u[8] & 0x3F) | 0x80;
    u
}
