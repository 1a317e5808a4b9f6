//! Where everything lives in the NVRAM, and the superblock that says so.
//!
//! ```text
//! 0       superblock (4 KiB): magic, version, flash geometry, where each region starts,
//!         the file system's id (the one its flash record holds), the file system
//!         configuration (JSON), CRC-32C over all of it but the generation word and the
//!         anchor hint. Written at mkfs, never changed after but for those two (bytes 64
//!         and 72): the NVRAM generation, which the flash's anchor log records too (see
//!         `GENERATION_OFF`), and where that log's newest entry is (`ANCHOR_HINT_OFF`).
//! 4096    redo log (1 KiB): entry count, checksum, up to 60 (offset, value) word stores,
//!         then the dying list's head, the counts of inodes (and of visible objects) and
//!         of files with fallocated chunks, the version high-water mark, the saved state's word and the
//!         object-number high-water mark.
//! 5120    block information, per flash erase block (the paper's 16 bytes per block of 32
//!         pages): a status word (erased, in use, bad, anchor), then 2 bits per page
//!         (available, valid, dirty), 32 pages to a word.
//! ...     inode hash table: BUCKETS 8-byte heads of inode chains (0 = empty).
//! ...     heap allocation bitmap (the NVRAM manager's state): a bit per heap unit, set
//!         exactly while the unit belongs to a reachable structure (see `bitmap`).
//! ...     heap, in 32-byte units, to the end of the NVRAM: inodes (two units, see
//!         below and `tree`), header records (their encoded length, rounded up to units) and file-offset structures
//!         (eight units: a chain link, the first chunk they map, and SLOTS page numbers).
//! ```
//!
//! An inode (64 bytes), its words:
//!
//! ```text
//! 0   object number (low 32 bits), hard link objects naming it (high 32)
//! 8   next inode in its hash chain (or on the dying list)
//! 16  its header record
//! 24  its first file-offset structure
//! 32  first child (directories): the inode of the newest entry linked into it
//! 40  next sibling, 48 previous sibling, in its parent directory's child list
//! 56  its attribute set's object number (low 32), subdirectories (high 32)
//! ```
//!
//! Every pointer is a byte offset into the NVRAM; 0 means "none" (offset 0 is the
//! superblock, so nothing else can be there).

use crate::error::{FsError, Result};
use crate::layout::Layout;

pub(crate) const MAGIC: [u8; 8] = *b"NKMINV\0\x04";
pub(crate) const VERSION: u32 = 4;

pub(crate) const SUPER_BYTES: u64 = 4096;
pub(crate) const LOG_OFF: u64 = SUPER_BYTES;
pub(crate) const LOG_BYTES: u64 = 1024;
/// Word stores one redo transaction may hold: (1024 - 16 - 6 * 8) / 16. A rename over a
/// hard link whose file goes with it, and that file's attribute set, is the largest
/// (about 42 stores: chains, child lists, counts, records, bits).
pub(crate) const LOG_ENTRIES: usize = 60;
/// The head of the dying list: inodes already unchained whose published pages are still
/// being marked dirty in the page states (a file too large for one transaction), linked
/// through their chain words. A writable mount finishes them first.
pub(crate) const DYING_OFF: u64 = LOG_OFF + 16 + 16 * LOG_ENTRIES as u64;
/// Inodes (high 32 bits), and of them those of objects a listing shows, not hard links or
/// attribute sets, the root included (low 32 bits): changed in the transactions that link
/// and unlink inodes, so a mount after a crash knows `statfs`'s object count, and the
/// room a clean unmount's saved state will take, without reading them.
pub(crate) const INODES_OFF: u64 = DYING_OFF + 8;
/// Inodes whose record holds fallocated chunks: changed in the transactions that publish
/// such a record or remove its inode. Their reservations count against free space from
/// the mount on, so a mount that finds any must find them (it walks, see `recover`).
pub(crate) const RESERVED_OFF: u64 = DYING_OFF + 16;
/// Record versions below it may have been given out, so a mount after a crash gives
/// none of them again: raised in steps of [`SERIAL_STEP`] before a record past it is
/// published, like [`HIGH_WATER_OFF`].
pub(crate) const SERIAL_OFF: u64 = DYING_OFF + 24;
/// Versions the mark runs ahead by: one NVRAM store per this many serials (data pages
/// take them too); a crash skips at most this many.
pub(crate) const SERIAL_STEP: u64 = 1024;
/// The log region's last word: object numbers below it may have been given out, so a
/// mount never gives them again (deleted objects leave no inode to say so). Raised in
/// steps of [`HIGH_WATER_STEP`] before an inode past it is published. Images made before
/// it existed hold 0 there (a log never filled the region's last 16 bytes).
pub(crate) const HIGH_WATER_OFF: u64 = LOG_OFF + LOG_BYTES - 8;
/// Numbers the high-water mark runs ahead by: one NVRAM store per this many creates; a
/// crash skips at most this many numbers.
pub(crate) const HIGH_WATER_STEP: u64 = 16;
pub(crate) const TABLE_OFF: u64 = LOG_OFF + LOG_BYTES;
/// Heads of the inode hash table's chains.
pub(crate) const BUCKETS: u64 = 1024;
/// The heap's allocation unit.
pub(crate) const UNIT: u64 = 32;
/// One inode (its words: the module's header).
pub(crate) const INODE_BYTES: u64 = 64;
pub(crate) const INODE_NEXT: u64 = 8;
pub(crate) const INODE_RECORD: u64 = 16;
pub(crate) const INODE_OFFSETS: u64 = 24;
pub(crate) const INODE_CHILD: u64 = 32;
pub(crate) const INODE_SIB_NEXT: u64 = 40;
pub(crate) const INODE_SIB_PREV: u64 = 48;
pub(crate) const INODE_FACTS: u64 = 56;
/// One file-offset structure: next (8), first chunk (4), owner (4), then the slots.
pub(crate) const OFFSETS_BYTES: u64 = 256;
pub(crate) const OFFSETS_HEAD: u64 = 16;
/// Page numbers in one offset structure.
pub(crate) const SLOTS: u32 = ((OFFSETS_BYTES - OFFSETS_HEAD) / 4) as u32;
/// Longest configuration the superblock holds.
const CONFIG_OFF: usize = 96;
const CONFIG_MAX: usize = SUPER_BYTES as usize - CONFIG_OFF;

/// Bytes of one block's information: its status word and 2 bits per page.
pub(crate) fn info_bytes(pages_per_block: u32) -> u64 {
    8 + 8 * u64::from(pages_per_block.div_ceil(PAGES_PER_WORD))
}

/// Page states in one word of block information.
pub(crate) const PAGES_PER_WORD: u32 = 32;

/// A page's 2 bits (the paper's "available or not, clean or dirty"). Only "valid" is
/// exact: it is changed in the same redo transaction as the page slot that publishes or
/// drops the page. "Available" also covers pages programmed but never published (their
/// block's status says it is in use, so no mount hands them out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageState {
    Available = 0,
    Valid = 1,
    Dirty = 3,
}

impl PageState {
    pub(crate) fn from_bits(b: u64) -> Option<PageState> {
        Some(match b & 3 {
            0 => PageState::Available,
            1 => PageState::Valid,
            3 => PageState::Dirty,
            _ => return None,
        })
    }
}

/// Block status words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NvBlock {
    Erased = 1,
    InUse = 2,
    Bad = 3,
    Anchor = 4,
}

impl NvBlock {
    pub(crate) fn from_word(w: u64) -> Option<NvBlock> {
        Some(match w {
            1 => NvBlock::Erased,
            2 => NvBlock::InUse,
            3 => NvBlock::Bad,
            4 => NvBlock::Anchor,
            _ => return None,
        })
    }
}

/// The regions of an NVRAM formatted for a device of `blocks` erase blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Regions {
    pub blocks: u32,
    pub pages_per_block: u32,
    pub buckets_off: u64,
    pub bitmap_off: u64,
    pub heap_off: u64,
    pub heap_end: u64,
}

impl Regions {
    pub(crate) fn new(blocks: u32, pages_per_block: u32, size: u64) -> Result<Regions> {
        let buckets_off = buckets_off(blocks, pages_per_block);
        let bitmap_off = buckets_off + 8 * BUCKETS;
        // The most heap units whose bitmap fits beside them.
        let end = size / UNIT * UNIT;
        let mut units = end.saturating_sub(bitmap_off) * 8 / (8 * UNIT + 1);
        while units > 0 && heap_start(bitmap_off, units) + units * UNIT > end {
            units -= 1;
        }
        if units < 64 {
            return Err(FsError::NoSpace);
        }
        let heap_off = heap_start(bitmap_off, units);
        Ok(Regions {
            blocks,
            pages_per_block,
            buckets_off,
            bitmap_off,
            heap_off,
            heap_end: heap_off + units * UNIT,
        })
    }

    pub(crate) fn block_word(&self, block: u32) -> u64 {
        TABLE_OFF + info_bytes(self.pages_per_block) * u64::from(block)
    }

    /// Bytes of the block information table.
    pub(crate) fn table_bytes(&self) -> u64 {
        info_bytes(self.pages_per_block) * u64::from(self.blocks)
    }

    /// The word holding page `pno`'s state, and the shift of its 2 bits in it.
    pub(crate) fn state_word(&self, pno: u32) -> (u64, u32) {
        let (b, i) = (pno / self.pages_per_block, pno % self.pages_per_block);
        let off = self.block_word(b) + 8 + 8 * u64::from(i / PAGES_PER_WORD);
        (off, 2 * (i % PAGES_PER_WORD))
    }

    pub(crate) fn bucket_word(&self, bucket: u64) -> u64 {
        self.buckets_off + 8 * bucket
    }

    /// Flash pages of the device.
    pub(crate) fn pages(&self) -> u64 {
        u64::from(self.blocks) * u64::from(self.pages_per_block)
    }

    /// The most inodes the heap can hold (a bound for walks of chains and lists).
    pub(crate) fn most_inodes(&self) -> u64 {
        (self.heap_end - self.heap_off) / INODE_BYTES
    }

    /// Heap units.
    pub(crate) fn units(&self) -> u64 {
        (self.heap_end - self.heap_off) / UNIT
    }

    /// The bitmap word holding heap unit `i`'s bit, and the bit.
    pub(crate) fn unit_bit(&self, i: u64) -> (u64, u32) {
        (self.bitmap_off + 8 * (i / 64), (i % 64) as u32)
    }

    /// Bytes of the allocation bitmap.
    pub(crate) fn bitmap_bytes(&self) -> u64 {
        bitmap_bytes(self.units())
    }

    /// The heap units `off .. off + bytes` covers (at least one).
    pub(crate) fn units_of(&self, off: u64, bytes: u64) -> std::ops::Range<u64> {
        let first = (off - self.heap_off) / UNIT;
        first..first + bytes.div_ceil(UNIT).max(1)
    }

    /// The block information table as read (`table`, from `TABLE_OFF`), decoded: each
    /// block's status word and the pages its bits call valid in blocks in use. A page
    /// with the unused state 0b10 is listed by (block, page).
    pub(crate) fn decode_table(&self, table: &[u8]) -> Table {
        let ppb = self.pages_per_block;
        let info = info_bytes(ppb) as usize;
        let mut t = Table::default();
        for b in 0..self.blocks {
            let at = info * b as usize;
            let status = get64(table, at);
            t.status.push(status);
            for i in 0..ppb {
                let word = get64(table, at + 8 + 8 * (i / PAGES_PER_WORD) as usize);
                match PageState::from_bits(word >> (2 * (i % PAGES_PER_WORD))) {
                    Some(PageState::Valid) if status == NvBlock::InUse as u64 => {
                        t.valid.push(b * ppb + i);
                    }
                    Some(_) => {}
                    None => t.bad_bits.push((b, i)),
                }
            }
        }
        t
    }

    /// Whether a redo log entry may store to `off`: a word of the tables (block
    /// information, buckets), of the heap (inodes, offset structures) or the dying list's
    /// head, never the superblock or the log itself.
    pub(crate) fn loggable(&self, off: u64) -> bool {
        off == DYING_OFF
            || off == INODES_OFF
            || off == RESERVED_OFF
            || off >= TABLE_OFF && off + 8 <= self.heap_off
            || off >= self.heap_off && off < self.heap_end
    }

    /// NVRAM bytes taken before the first heap allocation.
    pub(crate) fn fixed_bytes(&self) -> u64 {
        self.heap_off
    }
}

/// The block information table, decoded (`Regions::decode_table`).
#[derive(Default)]
pub(crate) struct Table {
    /// Each block's status word, as stored.
    pub status: Vec<u64>,
    /// Pages in blocks in use whose state is valid, in order.
    pub valid: Vec<u32>,
    /// (block, page) of every page with the unused state 0b10.
    pub bad_bits: Vec<(u32, u32)>,
}

impl Table {
    /// Block `b`'s status, if its word is one.
    pub(crate) fn block(&self, b: u32) -> Option<NvBlock> {
        NvBlock::from_word(self.status[b as usize])
    }
}

/// The largest NVRAM mkfs formats: 1 GiB. A mount reads the NVRAM manager's allocation
/// bitmap whole into RAM (a bit per 32-byte heap unit: 4 MiB at 1 GiB), and mkfs writes it
/// with the regions before it, so both grow with the NVRAM's size, not with what it holds;
/// 1 GiB holds the metadata of millions of files (see `nandkit model nvram-space`), more
/// than any device here can store.
pub const MAX_NVRAM_BYTES: u64 = 1 << 30;

/// The smallest NVRAM a device of `blocks` erase blocks of `pages_per_block` pages can be
/// formatted with (its fixed regions, a minimal heap and the room a clean unmount's saved
/// state keeps, see `room`), so mkfs can refuse a smaller one before it touches a file.
pub fn min_nvram_bytes(blocks: u32, pages_per_block: u32) -> u64 {
    let state = record_bytes(super::save::bound_bytes(0, 2) as usize);
    let units = 64 + state / UNIT;
    heap_start(buckets_off(blocks, pages_per_block) + 8 * BUCKETS, units) + units * UNIT
}

/// Bytes of the bitmap of `units` heap units.
fn bitmap_bytes(units: u64) -> u64 {
    8 * units.div_ceil(64)
}

/// Where a heap of `units` units starts, its bitmap at `bitmap_off`.
fn heap_start(bitmap_off: u64, units: u64) -> u64 {
    round_up(bitmap_off + bitmap_bytes(units), UNIT)
}

fn buckets_off(blocks: u32, pages_per_block: u32) -> u64 {
    round_up(
        TABLE_OFF + info_bytes(pages_per_block) * u64::from(blocks),
        UNIT,
    )
}

pub(crate) fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// Which chain an inode number hangs on.
pub(crate) fn bucket_of(ino: u32) -> u64 {
    (u64::from(ino).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % BUCKETS
}

/// The superblock: what the NVRAM was formatted for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Superblock {
    pub page_size: u32,
    pub oob_size: u32,
    pub pages_per_block: u32,
    pub blocks: u32,
    pub anchors: [u32; 2],
    pub nvram_size: u64,
    /// The id of the file system this NVRAM belongs to, as the flash's record has it (0:
    /// none, an NVRAM made before ids: bytes 48..64 were zero).
    pub fs_id: u128,
    pub config_json: Vec<u8>,
}

/// Where the file system id is in the superblock.
const FS_ID_OFF: usize = 48;

/// The superblock's generation word: which state of the flash this NVRAM describes. The
/// flash's anchor log records the same number (`format::anchor::GenerationEntry`), and
/// both move forward at each writable mount and clean unmount, the NVRAM first (its word
/// persisted before the flash entry is programmed). So the NVRAM's is the flash's, or one
/// ahead after a cut between the two; a lower one is an older copy of the NVRAM (its
/// metadata names data since overwritten or deleted), a higher one an older copy of the
/// flash: a mount refuses both. 48 bits of generation and 16 of check in one word, stored
/// by one 8-byte store (so a cut never tears it); 0 in images made before generations
/// (generation 0; the CRC reads the word as 0, so those images still check).
pub(crate) const GENERATION_OFF: u64 = 64;
const GENERATION_BITS: u32 = 48;

/// The superblock's anchor hint: where the flash's newest generation entry was when the
/// NVRAM's generation last moved (anchor block index, page, the block's epoch), so a mount
/// reads that entry, the page after it and the other anchor's record (3 pages) instead of
/// searching the anchor log. Only a hint: a mount proves it (`FileSystem::minv_anchors`)
/// and searches when it does not hold. 0: none (outside the CRC, like the generation).
pub(crate) const ANCHOR_HINT_OFF: u64 = 72;

/// The anchor hint word for the entry at page `page` of anchor `index` of epoch `epoch`.
pub(crate) fn anchor_hint_word(index: usize, page: u32, epoch: u64) -> u64 {
    match u16::try_from(page) {
        Ok(p) if p > 0 && index < 2 => {
            (epoch & ((1 << 40) - 1)) << 24 | (index as u64) << 16 | u64::from(p)
        }
        _ => 0,
    }
}

/// (anchor index, page, low 40 bits of the epoch) of an anchor hint word, if it has one.
pub(crate) fn anchor_hint_of(word: u64) -> Option<(usize, u32, u64)> {
    let page = (word & 0xffff) as u32;
    (page > 0).then_some(((word >> 16 & 1) as usize, page, word >> 24))
}

/// The generation word for generation `g`.
pub(crate) fn generation_word(g: u64) -> u64 {
    let g = g & ((1 << GENERATION_BITS) - 1);
    if g == 0 {
        return 0;
    }
    g | u64::from(crc32c::crc32c(&g.to_le_bytes()) & 0xffff) << GENERATION_BITS
}

/// The generation a generation word holds; `None`: the word is damaged.
pub(crate) fn generation_of(word: u64) -> Option<u64> {
    let g = word & ((1 << GENERATION_BITS) - 1);
    (generation_word(g) == word).then_some(g)
}

impl Superblock {
    pub(crate) fn for_layout(
        layout: &Layout,
        anchors: [u32; 2],
        nvram_size: u64,
        fs_id: u128,
        config: &crate::config::FsConfig,
    ) -> Result<Superblock> {
        let config_json = serde_json::to_vec(config)
            .map_err(|e| FsError::Io(format!("encoding the configuration: {e}")))?;
        if config_json.len() > CONFIG_MAX {
            return Err(FsError::Invalid(
                "the configuration does not fit the NVRAM superblock",
            ));
        }
        Ok(Superblock {
            page_size: layout.geometry.page_size_bytes,
            oob_size: layout.geometry.oob_size_bytes,
            pages_per_block: layout.pages_per_block,
            blocks: layout.blocks,
            anchors,
            nvram_size,
            fs_id,
            config_json,
        })
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; SUPER_BYTES as usize];
        b[0..8].copy_from_slice(&MAGIC);
        put32(&mut b, 8, VERSION);
        put32(&mut b, 12, self.config_json.len() as u32);
        put32(&mut b, 16, self.page_size);
        put32(&mut b, 20, self.oob_size);
        put32(&mut b, 24, self.pages_per_block);
        put32(&mut b, 28, self.blocks);
        put32(&mut b, 32, self.anchors[0]);
        put32(&mut b, 36, self.anchors[1]);
        b[40..48].copy_from_slice(&self.nvram_size.to_le_bytes());
        b[FS_ID_OFF..FS_ID_OFF + 16].copy_from_slice(&self.fs_id.to_le_bytes());
        b[CONFIG_OFF..CONFIG_OFF + self.config_json.len()].copy_from_slice(&self.config_json);
        let crc = crc32c::crc32c(&Self::covered(&b));
        put32(&mut b, 88, crc);
        b
    }

    /// The bytes the CRC covers: everything but the CRC field, the generation word read
    /// as 0 (it changes after mkfs).
    fn covered(b: &[u8]) -> Vec<u8> {
        let mut c = b[..88].to_vec();
        let g = GENERATION_OFF as usize;
        c[g..g + 16].fill(0);
        const { assert!(ANCHOR_HINT_OFF == GENERATION_OFF + 8) };
        c.extend_from_slice(&b[92..]);
        c
    }

    /// Checks and decodes a superblock; the error says what is wrong.
    pub(crate) fn decode(b: &[u8]) -> std::result::Result<Superblock, String> {
        if b.len() < SUPER_BYTES as usize {
            return Err("shorter than a superblock".into());
        }
        if b[0..8] != MAGIC {
            if b[0..6] == MAGIC[0..6] {
                return Err(format!(
                    "MiNV layout version {} (this nandkit reads {VERSION})",
                    b[7]
                ));
            }
            return Err("no nandkit MiNV superblock (magic missing)".into());
        }
        let stored = get32(b, 88);
        if crc32c::crc32c(&Self::covered(&b[..SUPER_BYTES as usize])) != stored {
            return Err("superblock checksum mismatch".into());
        }
        if get32(b, 8) != VERSION {
            return Err(format!("superblock version {}", get32(b, 8)));
        }
        let len = get32(b, 12) as usize;
        if len > CONFIG_MAX {
            return Err("superblock configuration length out of range".into());
        }
        Ok(Superblock {
            page_size: get32(b, 16),
            oob_size: get32(b, 20),
            pages_per_block: get32(b, 24),
            blocks: get32(b, 28),
            anchors: [get32(b, 32), get32(b, 36)],
            nvram_size: u64::from_le_bytes(b[40..48].try_into().expect("8 bytes")),
            fs_id: u128::from_le_bytes(b[FS_ID_OFF..FS_ID_OFF + 16].try_into().expect("16 bytes")),
            config_json: b[CONFIG_OFF..CONFIG_OFF + len].to_vec(),
        })
    }
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Our structure sizes, for the space model (`nandkit model nvram-space` without
/// `--paper-constants`): NVRAM bytes = fixed + per file (inode + record) + offset
/// structures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SpaceConstants {
    /// Superblock and redo log (with the allocation bitmap, the paper's NVRAM manager).
    pub manager: u64,
    /// Status word per flash block (and 2 bits per page, see `info_bytes`).
    pub block_status: u64,
    /// The inode hash table.
    pub inode_table: u64,
    /// One inode.
    pub inode: u64,
    /// The heap's allocation unit: records and structures are whole units.
    pub unit: u64,
    /// Page numbers per file-offset structure.
    pub offsets_per_struct: u64,
    /// One file-offset structure.
    pub offset_struct: u64,
}

/// The MiNV store's structure sizes.
pub const SPACE: SpaceConstants = SpaceConstants {
    manager: SUPER_BYTES + LOG_BYTES,
    block_status: 8,
    inode_table: 8 * BUCKETS,
    inode: INODE_BYTES,
    unit: UNIT,
    offsets_per_struct: SLOTS as u64,
    offset_struct: OFFSETS_BYTES,
};

/// NVRAM bytes of one object (inode and header record): a file with one name of
/// `name_bytes` bytes, or (`None`) the root directory, which has no name.
pub fn object_bytes(name_bytes: Option<usize>) -> u64 {
    use crate::format::record::Name;
    use crate::types::Kind;
    let kind = if name_bytes.is_some() {
        Kind::File
    } else {
        Kind::Dir
    };
    let mut r = crate::format::Record::bare(kind, 0o644, 0);
    if let Some(n) = name_bytes {
        r.names = vec![Name {
            parent: crate::types::ROOT_INO,
            name: vec![b'x'; n].into(),
        }];
    }
    INODE_BYTES + record_bytes(r.encoded_len())
}

/// The space model's constants (`nandkit_models::nvram_space`) for our structures on a
/// device of this geometry with an NVRAM of `nvram_bytes` (the allocation bitmap grows
/// with it), files named with `name_bytes` bytes. The model is exact when
/// the block information table is a whole number of heap units (a multiple of 4 blocks
/// always is).
pub fn model_constants(
    geometry: nandkit_flash::Geometry,
    nvram_bytes: u64,
    name_bytes: usize,
) -> Result<nandkit_models::NvramConstants> {
    let layout = Layout::new(geometry)?;
    let r = Regions::new(layout.blocks, layout.pages_per_block, nvram_bytes)?;
    Ok(nandkit_models::NvramConstants {
        block_size: u64::from(layout.pages_per_block) * u64::from(layout.chunk_bytes),
        alloc_unit: u64::from(layout.chunk_bytes),
        manager: SPACE.manager + (r.heap_off - r.bitmap_off),
        block_info: info_bytes(layout.pages_per_block),
        inode_table: SPACE.inode_table,
        inode: object_bytes(Some(name_bytes)),
        root_inode: object_bytes(None),
        offsets_per_struct: SPACE.offsets_per_struct,
        offset_struct: SPACE.offset_struct,
        saved_state: super::save::SAVED_STATE,
    })
}

/// NVRAM bytes a header record of `encoded_len` bytes takes.
pub fn record_bytes(encoded_len: usize) -> u64 {
    round_up(encoded_len as u64, UNIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblock_round_trips_and_refuses_damage() {
        let sb = Superblock {
            page_size: 512,
            oob_size: 16,
            pages_per_block: 32,
            blocks: 4096,
            anchors: [0, 1],
            nvram_size: 1 << 20,
            fs_id: 0xfeed_f00d_0000_0000_0000_0000_dead_beef,
            config_json: b"{\"profile\":\"minv\"}".to_vec(),
        };
        let b = sb.encode();
        assert_eq!(Superblock::decode(&b).unwrap(), sb);
        for at in [0, 9, 17, 40, 50, 63, 100] {
            let mut bad = b.clone();
            bad[at] ^= 1;
            assert!(Superblock::decode(&bad).is_err(), "flip at {at} accepted");
        }
        assert!(Superblock::decode(&b[..100]).is_err());
        // The generation word is outside the CRC: it moves after mkfs.
        let mut moved = b.clone();
        moved[GENERATION_OFF as usize..GENERATION_OFF as usize + 8]
            .copy_from_slice(&generation_word(7).to_le_bytes());
        assert_eq!(Superblock::decode(&moved).unwrap(), sb);
    }

    #[test]
    fn anchor_hints_round_trip() {
        assert_eq!(anchor_hint_of(0), None);
        let w = anchor_hint_word(1, 31, (1 << 20) + 5);
        assert_eq!(anchor_hint_of(w), Some((1, 31, (1 << 20) + 5)));
        assert_eq!(
            anchor_hint_of(anchor_hint_word(0, 65_535, u64::MAX))
                .unwrap()
                .1,
            65_535
        );
        // Page 0 holds the record, never an entry; pages past 16 bits are no hint.
        assert_eq!(anchor_hint_word(0, 0, 9), 0);
        assert_eq!(anchor_hint_word(0, 1 << 16, 9), 0);
    }

    #[test]
    fn generation_words_check_themselves() {
        assert_eq!(generation_word(0), 0);
        assert_eq!(generation_of(0), Some(0));
        for g in [1u64, 2, 77, (1 << 48) - 1] {
            let w = generation_word(g);
            assert_eq!(generation_of(w), Some(g));
            for bit in 0..64 {
                assert_ne!(generation_of(w ^ 1 << bit), Some(g), "flip {bit} of {g}");
            }
        }
    }

    #[test]
    fn the_block_table_decodes_valid_pages_of_blocks_in_use_only() {
        let r = Regions::new(2, 32, 1 << 20).unwrap();
        let mut t = vec![0u8; r.table_bytes() as usize];
        t[0..8].copy_from_slice(&(NvBlock::InUse as u64).to_le_bytes());
        let states = (PageState::Valid as u64) << (2 * 3) | 2u64 << (2 * 5);
        t[8..16].copy_from_slice(&states.to_le_bytes());
        t[16..24].copy_from_slice(&(NvBlock::Erased as u64).to_le_bytes());
        t[24..32].copy_from_slice(&(PageState::Valid as u64).to_le_bytes());
        let d = r.decode_table(&t);
        assert_eq!(d.valid, vec![3], "block 1 is erased: its bits do not count");
        assert_eq!(d.bad_bits, vec![(0, 5)]);
        assert_eq!(
            (d.block(0), d.block(1)),
            (Some(NvBlock::InUse), Some(NvBlock::Erased))
        );
        assert_eq!(r.units_of(r.heap_off + UNIT, 33), 1..3);
    }

    #[test]
    fn regions_fit_and_slots_fill_the_structure() {
        let r = Regions::new(4096, 32, 1 << 20).unwrap();
        // The paper's 16 bytes per block of 32 pages.
        assert_eq!(info_bytes(32), 16);
        assert_eq!(info_bytes(64), 24);
        assert_eq!(r.buckets_off, TABLE_OFF + 16 * 4096);
        // The smallest NVRAM mkfs accepts formats, with the saved state's room beyond
        // the minimal heap.
        let least = min_nvram_bytes(4096, 32);
        assert!(Regions::new(4096, 32, least).is_ok());
        let bare = Regions::new(4096, 32, least).unwrap();
        assert!(bare.heap_end - bare.heap_off >= 64 * UNIT);
        assert!(r.heap_off > r.bitmap_off && r.heap_off.is_multiple_of(UNIT));
        assert!(r.bitmap_bytes() <= r.heap_off - r.bitmap_off && r.heap_end <= 1 << 20);
        // As many units as fit beside their bitmap: one more would not.
        let more = heap_start(r.bitmap_off, r.units() + 1) + (r.units() + 1) * UNIT;
        assert!(more > 1 << 20);
        assert_eq!(OFFSETS_HEAD + 4 * u64::from(SLOTS), OFFSETS_BYTES);
        assert!(Regions::new(4096, 32, 4096).is_err());
        // Page states: the last page of block 1, and the log's words stay apart.
        assert_eq!(r.state_word(63), (TABLE_OFF + 16 + 8, 62));
        const { assert!(SERIAL_OFF + 8 <= super::super::save::CLEAN_OFF) };
    }
}
