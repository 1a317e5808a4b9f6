//! The journal: nodes appended to a head's bud through its write buffer; a new bud is an
//! empty LEB named by a reference node in the log, written before any node of it can be
//! relied on. A full journal (`max_bud_bytes`) or a full log runs a commit first.

use super::fs::{append_aligned, close_head, flush_full_pages, sync_head, Head, UbifsFs, GC_HEAD};
use super::image::{Loc, UbifsError};
use super::media::{self, RefNode, LOG_LNUM};
use super::space::Use;
use super::volume::LebSource;
use nandkit_flash::Flash;

/// Empty LEBs a journal head leaves for garbage collection and the index.
const RESERVED_EMPTY: u32 = 3;

impl<D: Flash> UbifsFs<D> {
    pub(super) fn check_writable(&self) -> Result<(), UbifsError> {
        if self.read_only {
            return Err(UbifsError::ReadOnly("mounted read-only".into()));
        }
        Ok(())
    }

    /// Appends `nodes` (sealed, with their sequence numbers and group types) to head `h`,
    /// side by side in one bud; where they went. Nothing is durable until the head syncs.
    pub(super) fn jwrite(&mut self, h: usize, nodes: &[Vec<u8>]) -> Result<Vec<Loc>, UbifsError> {
        self.check_writable()?;
        let need: usize = nodes.iter().map(|n| media::align8(n.len())).sum();
        let leb = self.io.leb_size();
        if need > leb {
            return Err(UbifsError::ReadOnly(format!(
                "a group of {need} bytes does not fit a LEB of {leb}"
            )));
        }
        if h != GC_HEAD && self.bud_bytes + need as u64 > self.sb.max_bud_bytes {
            self.commit()?;
        }
        let fits = |hd: &Head| hd.lnum.is_some() && hd.offs + hd.wbuf.len() + need <= leb;
        if !fits(&self.heads[h]) {
            close_head(&mut self.io, &mut self.space, &mut self.heads[h])?;
            let lnum = self.take_empty(h)?;
            self.io.unmap(lnum)?;
            self.space.get_mut(lnum).used_as = Use::Head;
            self.heads[h] = Head {
                lnum: Some(lnum),
                ..Default::default()
            };
            self.log_ref(lnum, 0, h as u32)?;
        }
        let head = &mut self.heads[h];
        let lnum = head.lnum.expect("a head with a bud");
        let mut locs = Vec::with_capacity(nodes.len());
        for n in nodes {
            locs.push(Loc {
                lnum,
                offs: (head.offs + head.wbuf.len()) as u32,
                len: n.len() as u32,
            });
            append_aligned(&mut head.wbuf, n);
        }
        flush_full_pages(&mut self.io, &mut self.space, lnum, head)?;
        self.bud_bytes += need as u64;
        self.stats.journal_bytes += need as u64;
        Ok(locs)
    }

    /// Makes everything journaled so far durable (every head's write buffer programmed).
    pub fn sync(&mut self) -> Result<(), UbifsError> {
        if self.read_only {
            return Ok(());
        }
        for h in 0..self.heads.len() {
            if sync_head(&mut self.io, &mut self.space, &mut self.heads[h])? {
                self.stats.wbuf_syncs += 1;
            }
        }
        Ok(())
    }

    /// An empty LEB for head `h`, after garbage collection and a commit if need be. Heads
    /// other than GC's leave `RESERVED_EMPTY` LEBs.
    fn take_empty(&mut self, h: usize) -> Result<u32, UbifsError> {
        for _ in 0..16 {
            let reserve = if h == GC_HEAD { 0 } else { RESERVED_EMPTY };
            if self.space.empty_lebs() > reserve {
                if let Some(l) = self.space.pick_empty() {
                    return Ok(l);
                }
            }
            // LEBs garbage collection emptied come back at a commit.
            let freeable = self.space.lps.iter().any(|lp| lp.used_as == Use::Freeable);
            if freeable || self.reclaimable_index_lebs() > 0 {
                self.commit()?;
                if self.space.empty_lebs() > reserve {
                    continue;
                }
            }
            if h != GC_HEAD && self.gc_once()? {
                continue;
            }
            break;
        }
        Err(UbifsError::NoSpace)
    }

    /// Appends a reference node for a new bud to the log, on flash at once (one min. I/O
    /// unit each, as Linux writes them). A full log runs a commit, which starts a new one.
    fn log_ref(&mut self, lnum: u32, offs: u32, jhead: u32) -> Result<(), UbifsError> {
        let page = self.io.min_io();
        if self.log_offs + page > self.io.leb_size() {
            let next = self.next_log_lnum(self.log_lnum);
            if next == self.mst.log_lnum {
                // The log is full: a commit starts a new one (and writes a reference for
                // every head that has a bud, this one included).
                return self.commit();
            }
            self.io.unmap(next)?;
            self.log_lnum = next;
            self.log_offs = 0;
        }
        let sq = self.next_sqnum();
        let node = RefNode { lnum, offs, jhead }.encode(sq);
        let mut unit = node;
        let gap = page - unit.len();
        unit.extend_from_slice(&media::pad_node(gap));
        self.io
            .program(self.log_lnum, (self.log_offs / page) as u32, &unit)?;
        self.log_offs += page;
        Ok(())
    }

    pub(super) fn next_log_lnum(&self, lnum: u32) -> u32 {
        if lnum + 1 >= LOG_LNUM + self.sb.log_lebs {
            LOG_LNUM
        } else {
            lnum + 1
        }
    }
}
