//! The UBIFS that writes: state shared by the journal, the commit, garbage collection, the
//! mount and the file operations (each in its own file, as `impl UbifsFs` blocks).
//!
//! Everything goes to flash as nodes in Linux's format. A change is journaled (nodes
//! appended to a journal head's bud, named by a reference node in the log) and applied to
//! the TNC; a commit writes the TNC's dirty znodes (the new index), the LPT, a new log start
//! and the master node, which is the moment the new index becomes the mounted one.

use super::image::{Loc, UbifsError};
use super::index::node_bytes;
use super::io::{IoStats, LebIo};
use super::key::Key;
use super::media::{self, IdxNode, InoNode, MstNode, SbNode};
use super::space::{Space, Use};
use super::tnc::{IndexStore, Tnc, TncStats};
use super::volume::LebSource;
use nandkit_flash::Flash;

/// Journal heads, as Linux numbers them.
pub const GC_HEAD: usize = 0;
pub const BASE_HEAD: usize = 1;
pub const DATA_HEAD: usize = 2;

/// Choices made at mkfs (the ones Linux's mkfs.ubifs offers) and at mount.
#[derive(Clone, Copy, Debug)]
pub struct UbifsOptions {
    /// Branches per index node (mkfs.ubifs's default 8).
    pub fanout: u32,
    /// Most znodes the TNC keeps in RAM after a commit (clean ones beyond it are dropped).
    pub tnc_max_znodes: usize,
    /// Seed of the volume's UUID.
    pub seed: u64,
}

impl Default for UbifsOptions {
    fn default() -> Self {
        UbifsOptions {
            fanout: 8,
            tnc_max_znodes: 4096,
            seed: 1,
        }
    }
}

/// A journal head: the bud it writes into, how far that is programmed, and the bytes
/// waiting for the rest of their min. I/O unit (the write buffer).
#[derive(Clone, Debug, Default)]
pub struct Head {
    pub lnum: Option<u32>,
    /// Bytes of the LEB programmed (a multiple of the min. I/O unit).
    pub offs: usize,
    pub wbuf: Vec<u8>,
}

/// Counters of what UBIFS did.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct UbifsStats {
    pub commits: u64,
    pub index_nodes_written: u64,
    pub gc_runs: u64,
    pub gc_nodes_moved: u64,
    pub journal_bytes: u64,
    pub wbuf_syncs: u64,
    /// Mount: LEBs of the log read, buds replayed, nodes replayed.
    pub mount_log_lebs: u32,
    pub mount_buds: u32,
    pub mount_nodes_replayed: u64,
    /// Files whose size the mount raised to the data the journal holds for them.
    pub mount_sizes_recovered: u64,
    /// Simulated time of each step of the last mount (the MA paper's Figure 6 steps).
    pub mount_steps_ns: MountSteps,
}

/// A mount's steps as the MA paper's Figure 6 names them (reading the superblock, reading
/// the master node, replaying the journal), with the LPT and the recovery commit apart.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct MountSteps {
    pub superblock: u64,
    /// The master node (and, when the volume grew, the superblock's rewrite).
    pub master: u64,
    pub lpt: u64,
    pub replay: u64,
    /// The commit a mount that replayed a journal makes.
    pub recovery_commit: u64,
}

pub struct UbifsFs<D: Flash> {
    pub(super) io: LebIo<D>,
    pub(super) sb: SbNode,
    pub(super) mst: MstNode,
    /// Next offset in each master LEB.
    pub(super) mst_offs: [usize; 2],
    pub(super) tnc: Tnc,
    pub(super) space: Space,
    pub(super) heads: [Head; 3],
    /// The index head: LEB, programmed bytes, buffered bytes.
    pub(super) ihead: Head,
    /// The log: the LEB written now and its next offset.
    pub(super) log_lnum: u32,
    pub(super) log_offs: usize,
    pub(super) sqnum: u64,
    pub(super) highest_inum: u64,
    /// Journal bytes since the last commit.
    pub(super) bud_bytes: u64,
    pub(super) opts: UbifsOptions,
    pub(super) read_only: bool,
    pub stats: UbifsStats,
}

/// The TNC's view of flash: index nodes read through the LEB I/O, written at the index head.
pub(super) struct Store<'a, D: Flash> {
    pub io: &'a mut LebIo<D>,
    pub ihead: &'a mut Head,
    pub space: &'a mut Space,
    pub sqnum: &'a mut u64,
    pub written: u64,
    pub written_bytes: u64,
}

impl<D: Flash> IndexStore for Store<'_, D> {
    fn read_idx(&mut self, loc: Loc) -> Result<IdxNode, UbifsError> {
        let b = read_through(self.io, std::iter::once(&*self.ihead), loc)?;
        Ok(IdxNode::decode(&b)
            .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?
            .1)
    }

    fn write_idx(&mut self, node: &IdxNode) -> Result<Loc, UbifsError> {
        *self.sqnum += 1;
        let bytes = node.encode(*self.sqnum);
        let leb = self.io.leb_size();
        let need = media::align8(bytes.len());
        if self.ihead.lnum.is_none() || self.ihead.offs + self.ihead.wbuf.len() + need > leb {
            close_head(self.io, self.space, self.ihead)?;
            let lnum = self.space.pick_empty().ok_or(UbifsError::NoSpace)?;
            // It may hold what an interrupted commit left.
            self.io.unmap(lnum)?;
            let lp = self.space.get_mut(lnum);
            lp.index = true;
            lp.used_as = Use::IndexHead;
            *self.ihead = Head {
                lnum: Some(lnum),
                ..Default::default()
            };
        }
        let lnum = self.ihead.lnum.expect("an index head");
        let offs = self.ihead.offs + self.ihead.wbuf.len();
        append_aligned(&mut self.ihead.wbuf, &bytes);
        flush_full_pages(self.io, self.space, lnum, self.ihead)?;
        self.written += 1;
        self.written_bytes += need as u64;
        Ok(Loc {
            lnum,
            offs: offs as u32,
            len: bytes.len() as u32,
        })
    }
}

/// The bytes of the node at `loc`: from flash, and from the write buffer of the head
/// writing that LEB for the part not programmed yet (a node may straddle the two).
fn read_through<'a, D: Flash>(
    io: &mut LebIo<D>,
    mut heads: impl Iterator<Item = &'a Head>,
    loc: Loc,
) -> Result<Vec<u8>, UbifsError> {
    let end = loc.offs as usize + loc.len as usize;
    let Some(head) = heads.find(|h| h.lnum == Some(loc.lnum) && end > h.offs) else {
        return node_bytes(io, loc);
    };
    let split = head.offs.max(loc.offs as usize);
    let tail = head
        .wbuf
        .get(split - head.offs..end - head.offs)
        .ok_or_else(|| UbifsError::corrupt(loc, "past the end of the write buffer"))?
        .to_vec();
    if split == loc.offs as usize {
        return Ok(tail);
    }
    let flashed = Loc {
        len: (split - loc.offs as usize) as u32,
        ..loc
    };
    let mut bytes = node_bytes(io, flashed)?;
    bytes.extend_from_slice(&tail);
    Ok(bytes)
}

/// Appends a node and the zeros that align the next one to 8 bytes.
pub(super) fn append_aligned(wbuf: &mut Vec<u8>, node: &[u8]) {
    wbuf.extend_from_slice(node);
    wbuf.resize(media::align8(wbuf.len()), 0);
}

/// Programs the whole min. I/O units a head's write buffer holds.
pub(super) fn flush_full_pages<D: Flash>(
    io: &mut LebIo<D>,
    space: &mut Space,
    lnum: u32,
    head: &mut Head,
) -> Result<(), UbifsError> {
    let page = io.min_io();
    let whole = head.wbuf.len() / page * page;
    if whole == 0 {
        return Ok(());
    }
    io.program(lnum, (head.offs / page) as u32, &head.wbuf[..whole])?;
    head.wbuf.drain(..whole);
    head.offs += whole;
    space.get_mut(lnum).free = (io.leb_size() - head.offs) as u32;
    Ok(())
}

/// Pads a head's write buffer to its min. I/O unit (a padding node, or padding bytes when
/// the gap is too small for one) and programs it: what was buffered is on flash.
pub(super) fn sync_head<D: Flash>(
    io: &mut LebIo<D>,
    space: &mut Space,
    head: &mut Head,
) -> Result<bool, UbifsError> {
    let Some(lnum) = head.lnum else {
        return Ok(false);
    };
    if head.wbuf.is_empty() {
        return Ok(false);
    }
    let page = io.min_io();
    let gap = head.wbuf.len().div_ceil(page) * page - head.wbuf.len();
    if gap >= media::PAD_NODE_SZ {
        let pad = media::pad_node(gap);
        head.wbuf.extend_from_slice(&pad);
    } else {
        head.wbuf.resize(head.wbuf.len() + gap, media::PADDING_BYTE);
    }
    flush_full_pages(io, space, lnum, head)?;
    space.add_dirt(lnum, gap as u32);
    Ok(true)
}

/// Syncs a head and lets its LEB go. Its unwritten rest stays free in the LPT (Linux would
/// give it to a head again; here garbage collection takes such a LEB whole).
pub(super) fn close_head<D: Flash>(
    io: &mut LebIo<D>,
    space: &mut Space,
    head: &mut Head,
) -> Result<(), UbifsError> {
    sync_head(io, space, head)?;
    if let Some(lnum) = head.lnum.take() {
        space.get_mut(lnum).used_as = Use::Idle;
    }
    *head = Head::default();
    Ok(())
}

impl<D: Flash> UbifsFs<D> {
    pub(super) fn store(&mut self) -> (Store<'_, D>, &mut Tnc) {
        (
            Store {
                io: &mut self.io,
                ihead: &mut self.ihead,
                space: &mut self.space,
                sqnum: &mut self.sqnum,
                written: 0,
                written_bytes: 0,
            },
            &mut self.tnc,
        )
    }

    pub(super) fn next_sqnum(&mut self) -> u64 {
        self.sqnum += 1;
        self.sqnum
    }

    /// The bytes of the node at `loc`, its part not programmed yet from a write buffer.
    pub(super) fn read_node(&mut self, loc: Loc) -> Result<Vec<u8>, UbifsError> {
        let heads = self.heads.iter().chain(std::iter::once(&self.ihead));
        read_through(&mut self.io, heads, loc)
    }

    /// Every leaf of `key`.
    pub(super) fn tnc_lookup(&mut self, key: Key) -> Result<Vec<Loc>, UbifsError> {
        let (mut s, tnc) = self.store();
        let found = tnc.lookup(&mut s, key)?;
        self.bound_tnc();
        Ok(found)
    }

    pub(super) fn tnc_range(&mut self, from: Key, to: Key) -> Result<Vec<(Key, Loc)>, UbifsError> {
        let (mut s, tnc) = self.store();
        let found = tnc.range(&mut s, from, to)?;
        self.bound_tnc();
        Ok(found)
    }

    /// Lookups load znodes; past the bound, clean ones not on a path to a dirty one go
    /// again (UBIFS's shrinker; dirty znodes stay until the commit writes them).
    fn bound_tnc(&mut self) {
        if self.tnc.znodes() > self.opts.tnc_max_znodes {
            self.tnc.shrink(self.opts.tnc_max_znodes);
        }
    }

    /// Makes `loc` the node of `key`; what it replaced is dirty space.
    pub(super) fn tnc_replace(&mut self, key: Key, loc: Loc) -> Result<(), UbifsError> {
        let (mut s, tnc) = self.store();
        for old in tnc.replace(&mut s, key, loc)? {
            self.space
                .add_dirt(old.lnum, media::align8(old.len as usize) as u32);
        }
        Ok(())
    }

    pub(super) fn tnc_add(&mut self, key: Key, loc: Loc) -> Result<(), UbifsError> {
        let (mut s, tnc) = self.store();
        tnc.add(&mut s, key, loc)
    }

    pub(super) fn tnc_remove_loc(&mut self, key: Key, loc: Loc) -> Result<(), UbifsError> {
        let (mut s, tnc) = self.store();
        if tnc.remove_loc(&mut s, key, loc)? {
            self.space
                .add_dirt(loc.lnum, media::align8(loc.len as usize) as u32);
        }
        Ok(())
    }

    pub(super) fn tnc_remove_range(&mut self, from: Key, to: Key) -> Result<(), UbifsError> {
        let (mut s, tnc) = self.store();
        for (_, old) in tnc.remove_range(&mut s, from, to)? {
            self.space
                .add_dirt(old.lnum, media::align8(old.len as usize) as u32);
        }
        Ok(())
    }

    /// Removes an inode from the TNC with all it has: data, entries, and the inodes of its
    /// extended attributes (as Linux's `ubifs_tnc_remove_ino`).
    pub(super) fn tnc_remove_inode(&mut self, inum: u32) -> Result<(), UbifsError> {
        use super::key::XENT_KEY;
        let xr = Key::kind_range(inum, XENT_KEY);
        for (_, loc) in self.tnc_range(*xr.start(), *xr.end())? {
            let b = self.read_node(loc)?;
            let (_, x) = media::DentNode::decode(&b)
                .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            if let Ok(xinum) = u32::try_from(x.inum) {
                if xinum != inum {
                    let r = Key::inode_range(xinum);
                    self.tnc_remove_range(r.start, Key::new(xinum, XENT_KEY, u32::MAX))?;
                }
            }
        }
        let r = Key::inode_range(inum);
        self.tnc_remove_range(r.start, *xr.end())
    }

    /// The inode `inum`, if it exists.
    pub fn inode(&mut self, inum: u32) -> Result<Option<InoNode>, UbifsError> {
        let Some(&loc) = self.tnc_lookup(Key::ino(inum))?.first() else {
            return Ok(None);
        };
        let b = self.read_node(loc)?;
        let (_, ino) = InoNode::decode(&b).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
        if ino.inum != inum {
            return Err(UbifsError::corrupt(loc, "inode filed under another key"));
        }
        Ok(Some(ino))
    }

    pub fn tnc_stats(&self) -> TncStats {
        self.tnc.stats()
    }

    pub fn io_stats(&self) -> IoStats {
        self.io.stats
    }

    pub fn superblock(&self) -> &SbNode {
        &self.sb
    }

    pub fn master(&self) -> &MstNode {
        &self.mst
    }

    /// The device, for its counters and clock.
    pub fn device(&self) -> &D {
        &self.io.dev
    }

    pub fn device_mut(&mut self) -> &mut D {
        &mut self.io.dev
    }

    /// Gives the device back (after `unmount`, or to cut power in a test).
    pub fn into_device(self) -> D {
        self.io.dev
    }
}
