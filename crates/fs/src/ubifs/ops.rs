//! The file operations, journaled as Linux's UBIFS journals them: a namespace change is
//! one node group in the base head (the entries, the inodes they change), file data goes
//! to the data head block by block (4 KiB data nodes) with the inode after it, a truncation
//! is a truncation node and the inode (and the cut last block), a deletion an entry naming
//! inode 0 and the inode with no links. The TNC follows each write; `sync` makes them
//! durable. Inodes are addressed by number (as a FUSE low-level file system addresses them).

use super::fs::{UbifsFs, BASE_HEAD, DATA_HEAD};
use super::image::{Entry, UbifsError};
use super::key::{Key, DATA_KEY, DENT_KEY, XENT_KEY};
use super::media::{
    self, DataNode, DentNode, InoNode, Time, TrunNode, BLOCK_SIZE, COMPR_NONE, IN_NODE_GROUP,
    LAST_OF_NODE_GROUP, MAX_NLEN, NO_NODE_GROUP, XATTR_FL,
};
use crate::error::FsError;
use nandkit_flash::Flash;

impl From<UbifsError> for FsError {
    fn from(e: UbifsError) -> FsError {
        match e {
            UbifsError::NoSpace => FsError::NoSpace,
            UbifsError::Flash(f) => FsError::Flash(f),
            UbifsError::ReadOnly(_) => FsError::ReadOnly,
            other => FsError::Io(other.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, FsError>;

/// The size a directory entry adds to its directory (Linux's `CALC_DENT_SIZE`).
fn dent_size(name: &[u8]) -> u64 {
    media::align8(media::DENT_NODE_SZ + name.len() + 1) as u64
}

fn itype(mode: u32) -> u8 {
    match mode & 0o170000 {
        0o040000 => media::ITYPE_DIR,
        0o120000 => media::ITYPE_LNK,
        0o060000 => media::ITYPE_BLK,
        0o020000 => media::ITYPE_CHR,
        0o010000 => media::ITYPE_FIFO,
        0o140000 => media::ITYPE_SOCK,
        _ => media::ITYPE_REG,
    }
}

fn is_dir(ino: &InoNode) -> bool {
    ino.mode & 0o170000 == 0o040000
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".."
    {
        return Err(FsError::Invalid("bad name"));
    }
    if name.len() > MAX_NLEN {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

/// Group types for a group of `n` nodes.
fn group(i: usize, n: usize) -> u8 {
    match (n, i + 1 == n) {
        (1, _) => NO_NODE_GROUP,
        (_, true) => LAST_OF_NODE_GROUP,
        _ => IN_NODE_GROUP,
    }
}

/// What a new inode is: its type and permission bits, owner, and inline data (a symlink's
/// target, a device's number).
#[derive(Clone, Copy, Debug)]
pub struct NewInode<'a> {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub data: &'a [u8],
}

impl NewInode<'static> {
    /// Of `mode`, owned by root, with no inline data.
    pub fn new(mode: u32) -> Self {
        NewInode {
            mode,
            uid: 0,
            gid: 0,
            data: &[],
        }
    }
}

impl<'a> NewInode<'a> {
    /// A symlink to `target`.
    pub fn symlink(target: &'a [u8]) -> Self {
        NewInode {
            mode: 0o120777,
            uid: 0,
            gid: 0,
            data: target,
        }
    }
}

/// Attributes to change (`None`: kept).
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub atime: Option<Time>,
    pub mtime: Option<Time>,
}

/// A change to journal as one group: inodes and entries.
enum Change {
    Ino(InoNode),
    Dent(DentNode),
}

impl<D: Flash> UbifsFs<D> {
    /// Journals `changes` as one group in the base head and applies them to the TNC.
    fn journal_group(&mut self, changes: Vec<Change>) -> Result<()> {
        let n = changes.len();
        let mut nodes = Vec::with_capacity(n);
        for (i, c) in changes.iter().enumerate() {
            let sq = self.next_sqnum();
            nodes.push(match c {
                Change::Ino(ino) => ino.encode(sq, group(i, n)),
                Change::Dent(d) => d.encode(sq, group(i, n)),
            });
        }
        let locs = self.jwrite(BASE_HEAD, &nodes)?;
        for (c, loc) in changes.into_iter().zip(locs) {
            match c {
                Change::Ino(ino) if ino.nlink == 0 => {
                    // Gone: its data, entries and xattrs with it.
                    self.tnc_remove_inode(ino.inum)?;
                    self.space
                        .add_dirt(loc.lnum, media::align8(loc.len as usize) as u32);
                }
                Change::Ino(ino) => self.tnc_replace(Key::ino(ino.inum), loc)?,
                Change::Dent(d) => {
                    self.remove_entry_named(d.key, &d.name)?;
                    if d.inum == 0 {
                        self.space
                            .add_dirt(loc.lnum, media::align8(loc.len as usize) as u32);
                    } else {
                        self.tnc_add(d.key, loc)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn get(&mut self, inum: u32) -> Result<InoNode> {
        self.inode(inum)?.ok_or(FsError::NotFound)
    }

    fn get_dir(&mut self, inum: u32) -> Result<InoNode> {
        let d = self.get(inum)?;
        if !is_dir(&d) {
            return Err(FsError::NotDir);
        }
        Ok(d)
    }

    /// The entry `name` of directory `dir`: its node.
    fn find_entry(&mut self, dir: u32, name: &[u8], kind: u8) -> Result<Option<DentNode>> {
        let key = Key::new(dir, kind, super::key::r5_hash(name));
        for loc in self.tnc_lookup(key)? {
            let b = self.read_node(loc)?;
            let (_, d) =
                DentNode::decode(&b).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            if d.name == name {
                return Ok(Some(d));
            }
        }
        Ok(None)
    }

    pub fn lookup(&mut self, dir: u32, name: &[u8]) -> Result<Option<u32>> {
        self.get_dir(dir)?;
        Ok(self.find_entry(dir, name, DENT_KEY)?.map(|d| d.inum as u32))
    }

    pub fn stat(&mut self, inum: u32) -> Result<InoNode> {
        self.get(inum)
    }

    pub fn readdir(&mut self, dir: u32) -> Result<Vec<Entry>> {
        self.get_dir(dir)?;
        let mut out = Vec::new();
        let r = Key::kind_range(dir, DENT_KEY);
        for (_, loc) in self.tnc_range(*r.start(), *r.end())? {
            let b = self.read_node(loc)?;
            let (_, d) =
                DentNode::decode(&b).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            out.push(Entry {
                name: d.name,
                inum: d.inum as u32,
                dtype: d.dtype,
            });
        }
        Ok(out)
    }

    fn new_inum(&mut self) -> Result<u32> {
        if self.highest_inum >= u64::from(u32::MAX) {
            return Err(FsError::NoObjectNumbers(self.highest_inum));
        }
        self.highest_inum += 1;
        Ok(self.highest_inum as u32)
    }

    /// Makes `name` in `dir`: a file, directory, symlink, FIFO, socket or device, as `new`
    /// says; its inode number.
    pub fn mknod(&mut self, dir: u32, name: &[u8], new: NewInode<'_>, now: Time) -> Result<u32> {
        let NewInode {
            mode,
            uid,
            gid,
            data,
        } = new;
        check_name(name)?;
        if data.len() > media::MAX_INO_DATA {
            return Err(FsError::NameTooLong);
        }
        let mut parent = self.get_dir(dir)?;
        if self.find_entry(dir, name, DENT_KEY)?.is_some() {
            return Err(FsError::Exists);
        }
        let inum = self.new_inum()?;
        let dir_kind = mode & 0o170000 == 0o040000;
        let ino = InoNode {
            inum,
            creat_sqnum: self.sqnum + 1,
            size: if dir_kind {
                media::INO_NODE_SZ as u64
            } else {
                data.len() as u64
            },
            atime: now,
            ctime: now,
            mtime: now,
            nlink: if dir_kind { 2 } else { 1 },
            uid,
            gid,
            mode,
            data: data.to_vec(),
            ..Default::default()
        };
        parent.size += dent_size(name);
        parent.mtime = now;
        parent.ctime = now;
        if dir_kind {
            parent.nlink += 1;
        }
        let dent = DentNode {
            key: Key::dent(dir, name),
            inum: u64::from(inum),
            dtype: itype(mode),
            name: name.to_vec(),
        };
        self.journal_group(vec![
            Change::Dent(dent),
            Change::Ino(ino),
            Change::Ino(parent),
        ])?;
        Ok(inum)
    }

    /// A new hard link `name` in `dir` to `inum`.
    pub fn link(&mut self, inum: u32, dir: u32, name: &[u8], now: Time) -> Result<()> {
        check_name(name)?;
        let mut ino = self.get(inum)?;
        if is_dir(&ino) {
            return Err(FsError::NotPermitted);
        }
        let mut parent = self.get_dir(dir)?;
        if self.find_entry(dir, name, DENT_KEY)?.is_some() {
            return Err(FsError::Exists);
        }
        if ino.nlink >= 65_000 {
            return Err(FsError::TooManyLinks);
        }
        ino.nlink += 1;
        ino.ctime = now;
        parent.size += dent_size(name);
        parent.mtime = now;
        parent.ctime = now;
        let dent = DentNode {
            key: Key::dent(dir, name),
            inum: u64::from(inum),
            dtype: itype(ino.mode),
            name: name.to_vec(),
        };
        self.journal_group(vec![
            Change::Dent(dent),
            Change::Ino(ino),
            Change::Ino(parent),
        ])
    }

    /// Removes `name` from `dir` (`rmdir`: it must be an empty directory; otherwise it must
    /// not be a directory).
    pub fn remove(&mut self, dir: u32, name: &[u8], rmdir: bool, now: Time) -> Result<()> {
        let mut parent = self.get_dir(dir)?;
        let d = self
            .find_entry(dir, name, DENT_KEY)?
            .ok_or(FsError::NotFound)?;
        let mut ino = self.get(d.inum as u32)?;
        match (rmdir, is_dir(&ino)) {
            (true, false) => return Err(FsError::NotDir),
            (false, true) => return Err(FsError::IsDir),
            (true, true) => {
                let r = Key::kind_range(ino.inum, DENT_KEY);
                if !self.tnc_range(*r.start(), *r.end())?.is_empty() {
                    return Err(FsError::NotEmpty);
                }
                ino.nlink = 0;
                parent.nlink -= 1;
            }
            (false, false) => ino.nlink -= 1,
        }
        ino.ctime = now;
        parent.size -= dent_size(name);
        parent.mtime = now;
        parent.ctime = now;
        let gone = DentNode { inum: 0, ..d };
        self.journal_group(vec![
            Change::Dent(gone),
            Change::Ino(ino),
            Change::Ino(parent),
        ])
    }

    /// Renames `name` in `dir` to `new_name` in `new_dir`, replacing what is there (a file
    /// by a file, an empty directory by a directory).
    pub fn rename(
        &mut self,
        dir: u32,
        name: &[u8],
        new_dir: u32,
        new_name: &[u8],
        now: Time,
    ) -> Result<()> {
        check_name(new_name)?;
        let d = self
            .find_entry(dir, name, DENT_KEY)?
            .ok_or(FsError::NotFound)?;
        if dir == new_dir && name == new_name {
            return Ok(());
        }
        let moving = self.get(d.inum as u32)?;
        // A directory may not move into itself or below.
        if is_dir(&moving) {
            let mut at = new_dir;
            while at != media::ROOT_INO {
                if at == moving.inum {
                    return Err(FsError::Invalid("a directory cannot move below itself"));
                }
                at = self.parent_of(at)?;
            }
        }
        let mut changes = Vec::new();
        let mut old_parent = self.get_dir(dir)?;
        let mut victim = None;
        if let Some(t) = self.find_entry(new_dir, new_name, DENT_KEY)? {
            if t.inum == d.inum {
                return Ok(());
            }
            let mut v = self.get(t.inum as u32)?;
            match (is_dir(&moving), is_dir(&v)) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) => {
                    let r = Key::kind_range(v.inum, DENT_KEY);
                    if !self.tnc_range(*r.start(), *r.end())?.is_empty() {
                        return Err(FsError::NotEmpty);
                    }
                    v.nlink = 0;
                }
                (false, false) => v.nlink -= 1,
            }
            v.ctime = now;
            victim = Some(v);
        }
        old_parent.size -= dent_size(name);
        old_parent.mtime = now;
        old_parent.ctime = now;
        let new_dent = DentNode {
            key: Key::dent(new_dir, new_name),
            inum: d.inum,
            dtype: d.dtype,
            name: new_name.to_vec(),
        };
        changes.push(Change::Dent(new_dent));
        changes.push(Change::Dent(DentNode { inum: 0, ..d }));
        let mut moved = moving;
        moved.ctime = now;
        if new_dir == dir {
            if victim.is_none() {
                old_parent.size += dent_size(new_name);
            } else {
                old_parent.size += dent_size(new_name);
                old_parent.size -= dent_size(new_name);
                if victim.as_ref().is_some_and(is_dir) {
                    old_parent.nlink -= 1;
                }
            }
            changes.push(Change::Ino(old_parent));
        } else {
            let mut new_parent = self.get_dir(new_dir)?;
            if victim.is_none() {
                new_parent.size += dent_size(new_name);
            }
            if is_dir(&moved) {
                old_parent.nlink -= 1;
                if victim.is_none() {
                    new_parent.nlink += 1;
                }
            } else if victim.as_ref().is_some_and(is_dir) {
                new_parent.nlink -= 1;
            }
            new_parent.mtime = now;
            new_parent.ctime = now;
            changes.push(Change::Ino(old_parent));
            changes.push(Change::Ino(new_parent));
        }
        changes.push(Change::Ino(moved));
        if let Some(v) = victim {
            changes.push(Change::Ino(v));
        }
        self.journal_group(changes)
    }

    /// The parent of directory `dir` (found by a walk from the root: UBIFS keeps no ".."
    /// entries).
    fn parent_of(&mut self, dir: u32) -> Result<u32> {
        let mut stack = vec![media::ROOT_INO];
        while let Some(d) = stack.pop() {
            for e in self.readdir(d)? {
                if e.inum == dir {
                    return Ok(d);
                }
                if e.dtype == media::ITYPE_DIR {
                    stack.push(e.inum);
                }
            }
        }
        Err(FsError::NotFound)
    }

    /// Writes `data` at `offset` of file `inum`: a data node per block it touches (the old
    /// bytes of partly written blocks kept), then the inode with its new size and times.
    pub fn write(&mut self, inum: u32, offset: u64, data: &[u8], now: Time) -> Result<()> {
        let mut ino = self.get(inum)?;
        if ino.mode & 0o170000 != 0o100000 {
            return Err(FsError::Invalid("not a regular file"));
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(FsError::TooBig)?;
        if end > (u64::from(super::key::Key::kind_range(0, DATA_KEY).end().low()) + 1) * BLOCK_SIZE
        {
            return Err(FsError::TooBig);
        }
        let mut at = offset;
        while at < end {
            let block = at / BLOCK_SIZE;
            let start = block * BLOCK_SIZE;
            let stop = (start + BLOCK_SIZE).min(end.max(ino.size.min(start + BLOCK_SIZE)));
            let mut buf = self.read_block(inum, block as u32, ino.size)?;
            let want = (stop - start) as usize;
            buf.resize(want.max(buf.len()), 0);
            let from = (at - start) as usize;
            let n = ((end - at) as usize).min(BLOCK_SIZE as usize - from);
            buf[from..from + n]
                .copy_from_slice(&data[(at - offset) as usize..(at - offset) as usize + n]);
            let key = Key::data(inum, block as u32);
            let sq = self.next_sqnum();
            let node = DataNode {
                key,
                size: buf.len() as u32,
                compr_type: COMPR_NONE,
                data: buf,
            }
            .encode(sq, NO_NODE_GROUP);
            let loc = self.jwrite(DATA_HEAD, &[node])?[0];
            self.tnc_replace(key, loc)?;
            at += n as u64;
        }
        ino.size = ino.size.max(end);
        ino.mtime = now;
        ino.ctime = now;
        self.journal_group(vec![Change::Ino(ino)])
    }

    /// The bytes of one block of a file as stored (shorter than a block at the end of the
    /// file, empty for a hole), cut at `size`.
    fn read_block(&mut self, inum: u32, block: u32, size: u64) -> Result<Vec<u8>> {
        let start = u64::from(block) * BLOCK_SIZE;
        if start >= size {
            return Ok(Vec::new());
        }
        let Some(&loc) = self.tnc_lookup(Key::data(inum, block))?.first() else {
            return Ok(vec![0; (size - start).min(BLOCK_SIZE) as usize]);
        };
        let b = self.read_node(loc)?;
        let (_, d) = DataNode::decode(&b).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
        let mut plain = super::compress::decompress(d.compr_type, &d.data, d.size as usize)
            .map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
        let valid = (size - start).min(BLOCK_SIZE) as usize;
        plain.resize(valid, 0);
        Ok(plain)
    }

    /// Up to `len` bytes of file `inum` from `offset`.
    pub fn read(&mut self, inum: u32, offset: u64, len: usize) -> Result<Vec<u8>> {
        let ino = self.get(inum)?;
        if is_dir(&ino) {
            return Err(FsError::IsDir);
        }
        let end = (offset + len as u64).min(ino.size);
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut at = offset;
        while at < end {
            let block = at / BLOCK_SIZE;
            let b = self.read_block(inum, block as u32, ino.size)?;
            let from = (at - block * BLOCK_SIZE) as usize;
            let n = ((end - at) as usize).min(BLOCK_SIZE as usize - from);
            let mut part = vec![0u8; n];
            let have = b.len().saturating_sub(from).min(n);
            part[..have].copy_from_slice(&b[from..from + have]);
            out.extend_from_slice(&part);
            at += n as u64;
        }
        Ok(out)
    }

    /// Sets a file's size: blocks past it go (a truncation node), a cut last block is
    /// written again, shorter.
    pub fn truncate(&mut self, inum: u32, size: u64, now: Time) -> Result<()> {
        let mut ino = self.get(inum)?;
        if ino.mode & 0o170000 != 0o100000 {
            return Err(FsError::Invalid("not a regular file"));
        }
        if size < ino.size {
            // One group, as Linux's `ubifs_jnl_truncate` writes it: the inode, the
            // truncation, and the cut last block, so a cut never leaves the new size with the
            // old last block (whose bytes past the size a later extension would show).
            let mut nodes = Vec::with_capacity(3);
            ino.size = size;
            ino.mtime = now;
            ino.ctime = now;
            let old_size = self.get(inum)?.size;
            let mut cut_block = None;
            if !size.is_multiple_of(BLOCK_SIZE) {
                let block = (size / BLOCK_SIZE) as u32;
                if !self.tnc_lookup(Key::data(inum, block))?.is_empty() {
                    let mut keep = self.read_block(inum, block, old_size)?;
                    keep.truncate((size % BLOCK_SIZE) as usize);
                    cut_block = Some(DataNode {
                        key: Key::data(inum, block),
                        size: keep.len() as u32,
                        compr_type: COMPR_NONE,
                        data: keep,
                    });
                }
            }
            let n = if cut_block.is_some() { 3 } else { 2 };
            let sq = self.next_sqnum();
            nodes.push(ino.encode(sq, group(0, n)));
            let sq = self.next_sqnum();
            let trun = TrunNode {
                inum,
                old_size,
                new_size: size,
            };
            nodes.push(trun.encode(sq, group(1, n)));
            if let Some(d) = &cut_block {
                let sq = self.next_sqnum();
                nodes.push(d.encode(sq, group(2, n)));
            }
            let locs = self.jwrite(BASE_HEAD, &nodes)?;
            self.tnc_replace(Key::ino(inum), locs[0])?;
            let first = size.div_ceil(BLOCK_SIZE) as u32;
            let r = Key::kind_range(inum, DATA_KEY);
            self.tnc_remove_range(Key::data(inum, first), *r.end())?;
            self.space
                .add_dirt(locs[1].lnum, media::align8(locs[1].len as usize) as u32);
            if let Some(d) = cut_block {
                self.tnc_replace(d.key, locs[2])?;
            }
            return Ok(());
        }
        ino.size = size;
        ino.mtime = now;
        ino.ctime = now;
        self.journal_group(vec![Change::Ino(ino)])
    }

    /// Changes an inode's attributes (those given).
    pub fn setattr(&mut self, inum: u32, attr: SetAttr, now: Time) -> Result<InoNode> {
        let SetAttr {
            mode,
            uid,
            gid,
            atime,
            mtime,
        } = attr;
        let mut ino = self.get(inum)?;
        if let Some(m) = mode {
            ino.mode = (ino.mode & 0o170000) | (m & 0o7777);
        }
        if let Some(u) = uid {
            ino.uid = u;
        }
        if let Some(g) = gid {
            ino.gid = g;
        }
        if let Some(t) = atime {
            ino.atime = t;
        }
        if let Some(t) = mtime {
            ino.mtime = t;
        }
        ino.ctime = now;
        self.journal_group(vec![Change::Ino(ino.clone())])?;
        Ok(ino)
    }

    /// Sets extended attribute `name` of `inum`: an xattr inode holding the value, an
    /// xattr entry naming it, and the host's counts, in one group.
    pub fn set_xattr(&mut self, inum: u32, name: &[u8], value: &[u8], now: Time) -> Result<()> {
        if name.is_empty() || name.len() > MAX_NLEN {
            return Err(FsError::NameTooLong);
        }
        if value.len() > media::MAX_INO_DATA {
            return Err(FsError::ValueTooBig);
        }
        let mut host = self.get(inum)?;
        let mut changes = Vec::new();
        let old = self.find_entry(inum, name, XENT_KEY)?;
        let xinum = match &old {
            Some(x) => {
                let old_x = self.get(x.inum as u32)?;
                host.xattr_size -= media::align8(media::INO_NODE_SZ + old_x.data.len()) as u32;
                x.inum as u32
            }
            None => {
                let x = self.new_inum()?;
                host.xattr_cnt += 1;
                host.xattr_size += dent_size(name) as u32;
                host.xattr_names += name.len() as u32;
                changes.push(Change::Dent(DentNode {
                    key: Key::xent(inum, name),
                    inum: u64::from(x),
                    dtype: media::ITYPE_REG,
                    name: name.to_vec(),
                }));
                x
            }
        };
        host.xattr_size += media::align8(media::INO_NODE_SZ + value.len()) as u32;
        host.ctime = now;
        let xino = InoNode {
            inum: xinum,
            creat_sqnum: self.sqnum + 1,
            size: value.len() as u64,
            atime: now,
            ctime: now,
            mtime: now,
            nlink: 1,
            mode: 0o100644,
            flags: XATTR_FL,
            data: value.to_vec(),
            ..Default::default()
        };
        changes.push(Change::Ino(xino));
        changes.push(Change::Ino(host));
        self.journal_group(changes)
    }

    pub fn get_xattr(&mut self, inum: u32, name: &[u8]) -> Result<Vec<u8>> {
        self.get(inum)?;
        let x = self
            .find_entry(inum, name, XENT_KEY)?
            .ok_or(FsError::NoData)?;
        Ok(self.get(x.inum as u32)?.data)
    }

    pub fn list_xattrs(&mut self, inum: u32) -> Result<Vec<Vec<u8>>> {
        self.get(inum)?;
        let r = Key::kind_range(inum, XENT_KEY);
        let mut out = Vec::new();
        for (_, loc) in self.tnc_range(*r.start(), *r.end())? {
            let b = self.read_node(loc)?;
            let (_, d) =
                DentNode::decode(&b).map_err(|e| UbifsError::corrupt(loc, &e.to_string()))?;
            out.push(d.name);
        }
        Ok(out)
    }

    pub fn remove_xattr(&mut self, inum: u32, name: &[u8], now: Time) -> Result<()> {
        let mut host = self.get(inum)?;
        let x = self
            .find_entry(inum, name, XENT_KEY)?
            .ok_or(FsError::NoData)?;
        let mut xino = self.get(x.inum as u32)?;
        host.xattr_cnt -= 1;
        host.xattr_size -=
            dent_size(name) as u32 + media::align8(media::INO_NODE_SZ + xino.data.len()) as u32;
        host.xattr_names -= name.len() as u32;
        host.ctime = now;
        xino.nlink = 0;
        self.journal_group(vec![
            Change::Dent(DentNode { inum: 0, ..x }),
            Change::Ino(xino),
            Change::Ino(host),
        ])
    }
}
