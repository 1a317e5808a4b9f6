//! Garbage collection, choosing by the LEB properties: the idle data LEB with the most
//! space no live node takes gives up its live nodes to the GC head (each keeps its sequence
//! number; the TNC is pointed at the copy), and is unmapped at the next commit, once no
//! index on flash can point into it. Index LEBs are reclaimed by the commit: the live
//! index nodes of a mostly dead index LEB are marked dirty, so the commit writes them
//! elsewhere and the LEB empties.

use super::fs::{UbifsFs, GC_HEAD};
use super::image::{Loc, UbifsError};
use super::key::{DENT_KEY, XENT_KEY};
use super::media::{self, IdxNode, NodeType};
use super::replay::scan_leb;
use super::space::Use;
use super::volume::LebSource;
use nandkit_flash::Flash;

impl<D: Flash> UbifsFs<D> {
    /// Collects one LEB; whether one was worth it (it gains at least a min. I/O unit).
    pub(super) fn gc_once(&mut self) -> Result<bool, UbifsError> {
        let Some(victim) = self.space.gc_victim(self.io.min_io() as u32) else {
            return Ok(false);
        };
        self.stats.gc_runs += 1;
        let leb = self
            .io
            .read_leb(victim)?
            .ok_or(UbifsError::Unreadable { lnum: victim })?;
        let (nodes, _) = scan_leb(&leb, victim, 0);
        let mut moved = 0u64;
        for (h, loc) in nodes {
            if !matches!(
                h.node_type,
                NodeType::Ino | NodeType::Data | NodeType::Dent | NodeType::Xent
            ) {
                continue;
            }
            let bytes = leb[loc.offs as usize..(loc.offs + loc.len) as usize].to_vec();
            let Some(key) = media::leaf_key(&bytes) else {
                continue;
            };
            if !self.tnc_lookup(key)?.contains(&loc) {
                continue;
            }
            let new = self.jwrite(GC_HEAD, std::slice::from_ref(&bytes))?[0];
            if matches!(key.kind(), DENT_KEY | XENT_KEY) {
                let (mut s, tnc) = self.store();
                tnc.remove_loc(&mut s, key, loc)?;
                tnc.add(&mut s, key, new)?;
            } else {
                let (mut s, tnc) = self.store();
                tnc.replace(&mut s, key, new)?;
            }
            moved += 1;
        }
        // The copies must be on flash before the LEB may go at the commit.
        self.sync()?;
        self.stats.gc_nodes_moved += moved;
        self.space.get_mut(victim).used_as = Use::Freeable;
        Ok(true)
    }

    /// Index LEBs no live index node is left in (emptied at the next commit).
    pub(super) fn reclaimable_index_lebs(&self) -> usize {
        let leb = self.io.leb_size() as u32;
        self.space
            .lps
            .iter()
            .filter(|lp| lp.is_dead_index(leb))
            .count()
    }

    /// Before a commit: index LEBs more than half dead have their live index nodes marked
    /// dirty, so this commit moves them and the LEB empties.
    pub(super) fn dirty_sparse_index_lebs(&mut self) -> Result<(), UbifsError> {
        let leb_size = self.io.leb_size() as u32;
        let sparse: Vec<u32> = (0..self.space.lps.len() as u32)
            .map(|i| self.space.main_first + i)
            .filter(|&l| {
                let lp = self.space.get(l).expect("main LEB");
                lp.index
                    && lp.used_as == Use::Idle
                    && lp.dirty + lp.free < leb_size
                    && lp.dirty > leb_size / 2
            })
            .collect();
        for lnum in sparse {
            let leb = self
                .io
                .read_leb(lnum)?
                .ok_or(UbifsError::Unreadable { lnum })?;
            let (nodes, _) = scan_leb(&leb, lnum, 0);
            for (h, loc) in nodes {
                if h.node_type != NodeType::Idx {
                    continue;
                }
                let b = &leb[loc.offs as usize..(loc.offs + loc.len) as usize];
                let Ok((_, idx)) = IdxNode::decode(b) else {
                    continue;
                };
                let key = idx.branches[0].key;
                let (mut s, tnc) = self.store();
                tnc.dirty_index_node(&mut s, Loc { ..loc }, idx.level, key)?;
            }
        }
        Ok(())
    }
}
