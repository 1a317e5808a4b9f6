//! The commit: the journal's changes become the index. In order, each step leaving flash
//! mountable if power is cut after it: sync every head; write the TNC's dirty znodes at the
//! index head (children first, into free space the old index does not use); write the whole
//! LPT into the LPT LEB the current one is not in; start a new log (its commit-start node
//! and a reference for every head still writing, in a log LEB the current log does not
//! use); then the master node, to LEB 1 and then LEB 2 — the moment the new index is the
//! one a mount finds. Only then are the LEBs garbage collection emptied unmapped.
//!
//! Linux writes only the LPT's dirty nodes into its LPT area (with its own garbage
//! collection); this commit rewrites the whole LPT (small model only), which costs one LPT's
//! size per commit.

use super::fs::{sync_head, UbifsFs};
use super::image::UbifsError;
use super::lpt::{self, LptGeom};
use super::media::{self, encode_cs, RefNode, MST_LNUM, MST_NODE_SZ, MST_NO_ORPHS};
use super::space::Use;
use super::volume::LebSource;
use nandkit_flash::Flash;

impl<D: Flash> UbifsFs<D> {
    pub fn commit(&mut self) -> Result<(), UbifsError> {
        self.check_writable()?;
        self.sync()?;
        self.dirty_sparse_index_lebs()?;
        // The index.
        let (mut s, tnc) = self.store();
        let c = tnc.commit(&mut s)?;
        let (written, written_bytes) = (s.written, s.written_bytes);
        sync_head(&mut self.io, &mut self.space, &mut self.ihead)?;
        let mut index_size = self.mst.index_size as i64 + written_bytes as i64;
        for loc in &c.obsolete {
            self.space
                .add_dirt(loc.lnum, media::align8(loc.len as usize) as u32);
            index_size -= media::align8(loc.len as usize) as i64;
        }
        self.stats.index_nodes_written += written;
        // LEBs emptied by this commit are empty in the LPT it writes.
        let leb = self.io.leb_size() as u32;
        let freed: Vec<u32> = (0..self.space.lps.len() as u32)
            .map(|i| self.space.main_first + i)
            .filter(|&l| {
                let lp = self.space.get(l).expect("main LEB");
                lp.used_as == Use::Freeable || lp.is_dead_index(leb)
            })
            .collect();
        let mut props = self.space.props();
        for &l in &freed {
            props[(l - self.space.main_first) as usize] = lpt::LebProps {
                free: leb,
                dirty: 0,
                index: false,
            };
        }
        let heads = self.write_lpt(&props)?;
        // A new log.
        let log = self.next_log_lnum(self.log_lnum);
        self.io.unmap(log)?;
        let cmt_no = self.mst.cmt_no + 1;
        let sq = self.next_sqnum();
        let mut unit = Vec::new();
        super::fs::append_aligned(&mut unit, &encode_cs(cmt_no, sq));
        for (h, head) in self.heads.iter().enumerate() {
            if let Some(lnum) = head.lnum {
                self.sqnum += 1;
                let r = RefNode {
                    lnum,
                    offs: head.offs as u32,
                    jhead: h as u32,
                };
                super::fs::append_aligned(&mut unit, &r.encode(self.sqnum));
            }
        }
        let page = self.io.min_io();
        let padded = unit.len().div_ceil(page) * page;
        pad_to(&mut unit, padded);
        self.io.program(log, 0, &unit)?;
        self.log_lnum = log;
        self.log_offs = padded;
        // The master node.
        let (free, dirty, used) = self.space.totals();
        let mut mst = self.mst.clone();
        mst.highest_inum = self.highest_inum;
        mst.cmt_no = cmt_no;
        mst.flags = MST_NO_ORPHS;
        mst.log_lnum = log;
        mst.root_lnum = c.root.lnum;
        mst.root_offs = c.root.offs;
        mst.root_len = c.root.len;
        mst.gc_lnum = self.space.pick_empty().unwrap_or(self.space.main_first);
        mst.ihead_lnum = self.ihead.lnum.unwrap_or(c.root.lnum);
        mst.ihead_offs = self.ihead.offs as u32;
        mst.index_size = index_size.max(0) as u64;
        mst.total_free = free;
        mst.total_dirty = dirty;
        mst.total_used = used;
        mst.total_dead = 0;
        mst.total_dark = 0;
        mst.lpt_lnum = heads.lpt_lnum;
        mst.lpt_offs = heads.lpt_offs;
        mst.nhead_lnum = heads.nhead_lnum;
        mst.nhead_offs = heads.nhead_offs;
        mst.ltab_lnum = heads.ltab_lnum;
        mst.ltab_offs = heads.ltab_offs;
        mst.lsave_lnum = heads.lsave_lnum;
        mst.lsave_offs = heads.lsave_offs;
        mst.lscan_lnum = self.space.main_first;
        mst.empty_lebs = self.space.empty_lebs();
        mst.idx_lebs = self.space.lps.iter().filter(|lp| lp.index).count() as u32;
        mst.leb_cnt = self.sb.leb_cnt;
        self.write_master(&mst)?;
        self.mst = mst;
        // Now the old index and the emptied LEBs are nobody's.
        for l in freed {
            self.io.unmap(l)?;
            *self.space.get_mut(l) = super::space::Lp {
                free: leb,
                ..Default::default()
            };
        }
        self.bud_bytes = 0;
        self.stats.commits += 1;
        self.tnc.shrink(self.opts.tnc_max_znodes);
        Ok(())
    }

    /// Writes the whole LPT into the LPT LEB the current root is not in; where its parts
    /// went.
    fn write_lpt(&mut self, props: &[lpt::LebProps]) -> Result<lpt::LptHeads, UbifsError> {
        let g = LptGeom::from_sb(&self.sb)?;
        let leb = self.io.leb_size() as u32;
        let target = if self.mst.lpt_lnum == g.lpt_first {
            g.lpt_first + 1
        } else {
            g.lpt_first
        };
        // The other LPT LEBs hold an old LPT (all dirty) or nothing.
        let ltab: Vec<(u32, u32)> = (0..g.lpt_lebs)
            .map(|i| {
                if g.lpt_first + i == self.mst.lpt_lnum {
                    (leb - self.mst.nhead_offs, self.mst.nhead_offs)
                } else {
                    (leb, 0)
                }
            })
            .collect();
        let (lebs, heads) = lpt::create_at(&g, props, target, ltab);
        if lebs.len() != 1 {
            return Err(UbifsError::Unsupported(
                "the LPT outgrew a LEB (Linux's big model): not written by nandkit yet".into(),
            ));
        }
        self.io.unmap(target)?;
        self.io
            .program(target, 0, &lebs[0][..heads.nhead_offs as usize])?;
        Ok(heads)
    }

    /// Writes the master node to both master LEBs, LEB 1 first.
    fn write_master(&mut self, mst: &media::MstNode) -> Result<(), UbifsError> {
        let page = self.io.min_io();
        let alsz = MST_NODE_SZ.div_ceil(page) * page;
        let sq = self.next_sqnum();
        let mut unit = mst.encode(sq);
        pad_to(&mut unit, alsz);
        for i in 0..2 {
            let lnum = MST_LNUM + i as u32;
            if self.mst_offs[i] + alsz > self.io.leb_size() {
                self.io.unmap(lnum)?;
                self.mst_offs[i] = 0;
            }
            self.io
                .program(lnum, (self.mst_offs[i] / page) as u32, &unit)?;
            self.mst_offs[i] += alsz;
        }
        Ok(())
    }
}

/// Pads a unit of nodes to `len` with a padding node (or padding bytes when the gap is
/// too small for one).
pub(super) fn pad_to(unit: &mut Vec<u8>, len: usize) {
    let gap = len - unit.len();
    if gap >= media::PAD_NODE_SZ {
        unit.extend_from_slice(&media::pad_node(gap));
    } else {
        unit.resize(len, media::PADDING_BYTE);
    }
}
