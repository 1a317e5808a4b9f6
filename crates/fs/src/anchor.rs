//! The anchor blocks: the first two good blocks of the device hold the file system record
//! (one copy in page 0 of each, so a mount survives the loss of either) and, after it, a
//! log of checkpoint pointers, one appended at each clean unmount. A mount reads the two
//! record copies, finds the newest pointer with a binary search over the current anchor
//! block, and goes straight to the checkpoint: a dozen reads instead of a sweep of every
//! block.

use nandkit_flash::{Flash, FlashError};

use crate::blocks::BlockState;
use crate::config::FsConfig;
use crate::error::{FsError, Result};
use crate::format::anchor::{CheckpointPointer, FsRecord, GenerationEntry};
use crate::format::special::Special;
use crate::format::tags::{PageKind, SpecialKind, SpecialTags, TagRead, Tags};
use crate::fs::FileSystem;

/// Epochs start high so a repaired copy can take one below the current anchor's.
const FIRST_EPOCH: u64 = 1 << 20;

/// The anchor blocks as the mounted file system knows them.
#[derive(Clone, Debug, Default)]
pub struct Anchors {
    pub blocks: [u32; 2],
    /// Epoch of each block's page 0 (0: missing or unreadable).
    pub epochs: [u64; 2],
    /// Which of the two is current (the higher epoch).
    pub current: usize,
    /// Next free page of the current anchor block.
    pub next_page: u32,
    pub record: Option<FsRecord>,
    /// The file system's id (see `FsRecord::fs_id`; 0: none), written into every copy
    /// of the record.
    pub fs_id: u128,
}

impl<F: Flash> FileSystem<F> {
    fn fs_record(&self) -> FsRecord {
        let g = self.layout.geometry;
        FsRecord {
            anchors: self.anchors.blocks,
            page_size: g.page_size_bytes,
            oob_size: g.oob_size_bytes,
            pages_per_block: g.pages_per_block,
            blocks: self.layout.blocks,
            config_json: serde_json::to_vec(&self.config).expect("config serialises"),
            fs_id: self.anchors.fs_id,
        }
    }

    /// mkfs: the first two good (erased) blocks become the anchors, each with a copy of the
    /// file system record, which carries the new file system's id `fs_id`.
    pub(crate) fn write_anchors_at_format(&mut self, fs_id: u128) -> Result<()> {
        let mut chosen = Vec::new();
        for b in 0..self.layout.blocks {
            if self.blocks.get(b).state == BlockState::Empty {
                chosen.push(b);
                if chosen.len() == 2 {
                    break;
                }
            }
        }
        let [a, b] = chosen[..] else {
            return Err(FsError::NoSpace);
        };
        self.anchors = Anchors {
            blocks: [a, b],
            epochs: [FIRST_EPOCH + 1, FIRST_EPOCH],
            current: 0,
            next_page: 1,
            record: None,
            fs_id,
        };
        let record = self.fs_record();
        if Special::capacity(self.layout.chunk_bytes as usize) < record.encode().len() {
            return Err(FsError::Invalid(
                "page too small for the file system record",
            ));
        }
        for (i, &blk) in [a, b].iter().enumerate() {
            self.blocks.set_state(blk, BlockState::Anchor);
            self.program_anchor_page(blk, 0, self.anchors.epochs[i], 0, record.encode())?;
        }
        self.anchors.record = Some(record);
        Ok(())
    }

    fn program_anchor_page(
        &mut self,
        block: u32,
        page: u32,
        epoch: u64,
        index: u32,
        payload: Vec<u8>,
    ) -> Result<()> {
        let special = Special {
            kind: SpecialKind::Anchor,
            id: epoch,
            index,
            payload,
        };
        let tags = Tags::Special(SpecialTags {
            kind: SpecialKind::Anchor,
        });
        let (buf, oob) = self.layout.encode_page(&tags, &special.encode());
        let addr = self.layout.block_addr(block).page(page);
        self.settle()?;
        let r = self.dev.get_mut().program_page(addr, &buf, &oob);
        self.stats.anchor_pages_written += 1;
        r.map_err(|e| self.fail(e))
    }

    /// Reads an anchor page: its frame, if it is a good anchor page.
    fn read_anchor_page(&mut self, block: u32, page: u32) -> Result<Option<Special>> {
        let pno = self.layout.pno(block, page);
        let (data, oob, ok) = self.read_full(pno)?;
        if !ok {
            return Ok(None);
        }
        match self.layout.decode_tags(&oob) {
            TagRead::Valid(Tags::Special(s)) if s.kind == SpecialKind::Anchor => {}
            _ => return Ok(None),
        }
        Ok(Special::decode(&data).filter(|s| s.kind == SpecialKind::Anchor))
    }

    /// Finds the anchors and the file system record: page 0 of block 0 first, else the
    /// first good block whose page 0 holds a record. Sets the configuration.
    pub(crate) fn find_anchors(&mut self) -> Result<()> {
        let mut found: Option<(u32, Special, FsRecord)> = None;
        for b in 0..self.layout.blocks {
            if self.dev.get_mut().is_bad(self.layout.block_addr(b))? {
                continue;
            }
            // Block 0 is read in full; elsewhere the tags say first whether to bother.
            if b > 0 {
                match self.read_tags(self.layout.pno(b, 0))? {
                    TagRead::Valid(t) if t.kind() == PageKind::Special(SpecialKind::Anchor) => {}
                    _ => continue,
                }
            }
            if let Some(s) = self.read_anchor_page(b, 0)? {
                if s.index == 0 {
                    match FsRecord::decode_any_version(&s.payload) {
                        Some((crate::format::FORMAT_VERSION, r)) => {
                            found = Some((b, s, r));
                            break;
                        }
                        Some((old, _)) => {
                            return Err(FsError::OldFormat {
                                found: old,
                                supported: crate::format::FORMAT_VERSION,
                            })
                        }
                        None => {}
                    }
                }
            }
            if b == 0 {
                self.refuse_other_formats()?;
            }
        }
        let Some((first, first_page, record)) = found else {
            return Err(FsError::NotFormatted(
                "no file system record found (run mkfs)".into(),
            ));
        };
        let g = self.layout.geometry;
        if record.page_size != g.page_size_bytes
            || record.oob_size != g.oob_size_bytes
            || record.pages_per_block != g.pages_per_block
            || record.blocks != self.layout.blocks
        {
            return Err(FsError::NotFormatted(format!(
                "the file system was made for {} blocks of {} pages of {}+{} bytes; this \
                 device has {} blocks of {} pages of {}+{}",
                record.blocks,
                record.pages_per_block,
                record.page_size,
                record.oob_size,
                self.layout.blocks,
                g.pages_per_block,
                g.page_size_bytes,
                g.oob_size_bytes
            )));
        }
        if record.anchors.iter().any(|&a| a >= self.layout.blocks) {
            return Err(FsError::NotFormatted(
                "file system record is damaged".into(),
            ));
        }
        let config: FsConfig = serde_json::from_slice(&record.config_json)
            .map_err(|e| FsError::NotFormatted(format!("file system record unreadable: {e}")))?;
        self.set_config(config);
        let mut epochs = [0u64; 2];
        for (i, &blk) in record.anchors.iter().enumerate() {
            let page0 = if blk == first {
                Some(first_page.clone())
            } else if self.dev.get_mut().is_bad(self.layout.block_addr(blk))? {
                None
            } else {
                self.read_anchor_page(blk, 0)?
            };
            epochs[i] = page0
                .filter(|s| s.index == 0 && FsRecord::decode(&s.payload).is_some())
                .map_or(0, |s| s.id);
            self.blocks.set_state(blk, BlockState::Anchor);
        }
        let current = usize::from(epochs[1] > epochs[0]);
        self.anchors = Anchors {
            blocks: record.anchors,
            epochs,
            current,
            next_page: 1,
            fs_id: record.fs_id,
            record: Some(record),
        };
        self.anchors.next_page = self.anchor_write_point()?;
        Ok(())
    }

    /// The anchors as a `minv` mount reads them (it reads nothing else on flash): the file
    /// system record (page 0 of `blocks[0]`, else of `blocks[1]`; `None`: neither copy is
    /// there), each block's epoch and where the current one is written up to, and the
    /// newest NVRAM generation the anchor log records (0: none, an image made before
    /// generations). The reads are a fixed few, whatever the file system holds: two
    /// record copies, a binary search for the write point, the last entries.
    ///
    /// `hint` (anchor index, page, low 40 bits of its epoch: where the newest entry was
    /// when the NVRAM last moved its generation) spares the search when it holds: the
    /// entry is there, the page after it is erased and the other anchor's epoch is lower,
    /// which makes it the newest (entries are appended in page order, to the anchor of the
    /// highest epoch only). A hint that does not hold (a cut before it was stored, damage,
    /// an older copy of the NVRAM) costs the search, whose answer is the same.
    pub(crate) fn minv_anchors(
        &mut self,
        blocks: [u32; 2],
        hint: Option<(usize, u32, u64)>,
    ) -> Result<(Option<FsRecord>, u64)> {
        if let Some((i, page, epoch)) = hint {
            if let Some(found) = self.minv_anchors_hinted(blocks, i, page, epoch)? {
                return Ok(found);
            }
        }
        let mut record = None;
        let mut epochs = [0u64; 2];
        for (i, &blk) in blocks.iter().enumerate() {
            if blk >= self.layout.blocks
                || self.dev.get_mut().is_bad(self.layout.block_addr(blk))?
            {
                continue;
            }
            if let Some(s) = self.read_anchor_page(blk, 0)? {
                if let Some(r) = FsRecord::decode(&s.payload).filter(|_| s.index == 0) {
                    epochs[i] = s.id;
                    record.get_or_insert(r);
                }
            }
        }
        let current = usize::from(epochs[1] > epochs[0]);
        self.anchors.blocks = blocks;
        self.anchors.epochs = epochs;
        self.anchors.current = current;
        self.anchors.record = record.clone();
        self.anchors.next_page = self.write_point_of(current)?;
        // Entries go to the current block; right after it took over (a cut before its
        // first entry), the newest is still in the other.
        let mut generation = self.newest_generation(current, self.anchors.next_page)?;
        if generation.is_none() && epochs[1 - current] != 0 {
            let end = self.write_point_of(1 - current)?;
            generation = self.newest_generation(1 - current, end)?;
        }
        Ok((record, generation.unwrap_or(0)))
    }

    /// `minv_anchors` by its hint; `None`: the hint does not hold.
    fn minv_anchors_hinted(
        &mut self,
        blocks: [u32; 2],
        i: usize,
        page: u32,
        epoch40: u64,
    ) -> Result<Option<(Option<FsRecord>, u64)>> {
        let ppb = self.layout.pages_per_block;
        if i > 1 || page == 0 || page >= ppb || blocks.iter().any(|&b| b >= self.layout.blocks) {
            return Ok(None);
        }
        let (blk, other) = (blocks[i], blocks[1 - i]);
        if self.dev.get_mut().is_bad(self.layout.block_addr(blk))? {
            return Ok(None);
        }
        let entry = self.read_anchor_page(blk, page)?.and_then(|s| {
            let g = GenerationEntry::decode(&s.payload)?;
            (s.index == page && s.id & ((1 << 40) - 1) == epoch40).then_some((s.id, g))
        });
        let Some((epoch, g)) = entry else {
            return Ok(None);
        };
        if page + 1 < ppb
            && !matches!(
                self.read_tags(self.layout.pno(blk, page + 1))?,
                TagRead::Erased
            )
        {
            return Ok(None);
        }
        let mut record = None;
        let mut other_epoch = 0;
        if !self.dev.get_mut().is_bad(self.layout.block_addr(other))? {
            if let Some(s) = self.read_anchor_page(other, 0)? {
                if let Some(r) = FsRecord::decode(&s.payload).filter(|_| s.index == 0) {
                    other_epoch = s.id;
                    record = Some(r);
                }
            }
        }
        if other_epoch >= epoch {
            return Ok(None);
        }
        if record.is_none() {
            record = self
                .read_anchor_page(blk, 0)?
                .filter(|s| s.index == 0 && s.id == epoch)
                .and_then(|s| FsRecord::decode(&s.payload));
            if record.is_none() {
                return Ok(None);
            }
        }
        let mut epochs = [0u64; 2];
        epochs[i] = epoch;
        epochs[1 - i] = other_epoch;
        self.anchors.blocks = blocks;
        self.anchors.epochs = epochs;
        self.anchors.current = i;
        self.anchors.next_page = page + 1;
        self.anchors.record = record.clone();
        Ok(Some((record, g.generation)))
    }

    /// Where the newest generation entry is, as `minv_anchors`'s hint takes it: (anchor
    /// index, page, epoch) of the entry appended last, if the last append took.
    pub(crate) fn last_anchor_entry(&self) -> (usize, u32, u64) {
        let c = self.anchors.current;
        (
            c,
            self.anchors.next_page.saturating_sub(1),
            self.anchors.epochs[c],
        )
    }

    /// The newest generation entry of anchor block `i` below page `end` (torn or damaged
    /// pages, which a cut while appending leaves, are passed over).
    fn newest_generation(&mut self, i: usize, end: u32) -> Result<Option<u64>> {
        let (blk, epoch) = (self.anchors.blocks[i], self.anchors.epochs[i]);
        if epoch == 0 {
            return Ok(None);
        }
        for page in (1..end.min(self.layout.pages_per_block)).rev() {
            if let Some(s) = self.read_anchor_page(blk, page)? {
                if s.id == epoch && s.index == page {
                    if let Some(g) = GenerationEntry::decode(&s.payload) {
                        return Ok(Some(g.generation));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Appends a `minv` NVRAM generation to the anchor log (as a checkpoint pointer is
    /// appended). `Ok(false)`: the anchors cannot take it (a block went bad).
    pub(crate) fn append_generation(&mut self, generation: u64) -> Result<bool> {
        self.append_anchor_entry(GenerationEntry { generation }.encode())
    }

    /// Refuses an image of another format with a clear message.
    fn refuse_other_formats(&mut self) -> Result<()> {
        let (data, oob, _) = self.read_full(0)?;
        if crate::format::legacy::is_v1_page(&data, &oob) {
            return Err(FsError::OldFormat {
                found: 1,
                supported: crate::format::FORMAT_VERSION,
            });
        }
        Ok(())
    }

    /// The first free page of the current anchor block (a binary search over OOB reads:
    /// pages are programmed in order, so "programmed" holds for a prefix).
    fn anchor_write_point(&mut self) -> Result<u32> {
        self.write_point_of(self.anchors.current)
    }

    /// The first free page of anchor block `i` (its page count if it has no record).
    fn write_point_of(&mut self, i: usize) -> Result<u32> {
        let blk = self.anchors.blocks[i];
        if self.anchors.epochs[i] == 0 {
            return Ok(self.layout.pages_per_block);
        }
        let (mut lo, mut hi) = (1u32, self.layout.pages_per_block);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.read_tags(self.layout.pno(blk, mid))? {
                TagRead::Erased => hi = mid,
                _ => lo = mid + 1,
            }
        }
        Ok(lo)
    }

    /// The newest checkpoint pointer in the current anchor block (the last good entry).
    pub(crate) fn latest_checkpoint_pointer(&mut self) -> Result<Option<CheckpointPointer>> {
        let cur = self.anchors.current;
        if self.anchors.epochs[cur] == 0 {
            return Ok(None);
        }
        let blk = self.anchors.blocks[cur];
        let epoch = self.anchors.epochs[cur];
        let mut page = self.anchors.next_page;
        // Only the last entry can be torn; the one before it is then the newest.
        for _ in 0..2 {
            if page <= 1 {
                return Ok(None);
            }
            page -= 1;
            if let Some(s) = self.read_anchor_page(blk, page)? {
                if s.id == epoch && s.index == page {
                    return Ok(CheckpointPointer::decode(&s.payload));
                }
            }
        }
        Ok(None)
    }

    /// Appends a checkpoint pointer to the current anchor block; when it is full, the other
    /// block is erased and takes over with the next epoch (the record copy in the old one
    /// stays until then). `Ok(false)`: the anchors cannot take it (a block went bad).
    pub(crate) fn append_checkpoint_pointer(&mut self, p: &CheckpointPointer) -> Result<bool> {
        self.append_anchor_entry(p.encode())
    }

    /// Appends an entry (a checkpoint pointer, a generation) to the anchor log.
    fn append_anchor_entry(&mut self, payload: Vec<u8>) -> Result<bool> {
        let ppb = self.layout.pages_per_block;
        let record = self.fs_record();
        if self.anchors.next_page >= ppb || self.anchors.epochs[self.anchors.current] == 0 {
            let other = 1 - self.anchors.current;
            let blk = self.anchors.blocks[other];
            let epoch = self
                .anchors
                .epochs
                .iter()
                .max()
                .copied()
                .unwrap_or(FIRST_EPOCH)
                + 1;
            self.settle()?;
            match self.dev.get_mut().erase_block(self.layout.block_addr(blk)) {
                Ok(()) => {}
                Err(FlashError::PowerLost) => return Err(self.fail(FlashError::PowerLost)),
                Err(_) => return Ok(false),
            }
            self.anchors.epochs[other] = 0;
            if !media_ok(self.program_anchor_page(blk, 0, epoch, 0, record.encode()))? {
                return Ok(false);
            }
            self.anchors.epochs[other] = epoch;
            self.anchors.current = other;
            self.anchors.next_page = 1;
        }
        let cur = self.anchors.current;
        let (blk, epoch, page) = (
            self.anchors.blocks[cur],
            self.anchors.epochs[cur],
            self.anchors.next_page,
        );
        // Whatever happens to the page, it is used.
        self.anchors.next_page += 1;
        media_ok(self.program_anchor_page(blk, page, epoch, page, payload))
    }

    /// A writable mount restores a record copy that is missing or damaged (a power cut
    /// while an anchor block was being renewed, or damage): erase that anchor block and
    /// write the record again, one epoch below the current one.
    pub(crate) fn repair_anchors(&mut self) -> Result<()> {
        for i in 0..2 {
            if self.anchors.epochs[i] != 0 || self.anchors.epochs[1 - i] == 0 {
                continue;
            }
            let blk = self.anchors.blocks[i];
            if self.dev.get_mut().is_bad(self.layout.block_addr(blk))? {
                continue;
            }
            self.settle()?;
            match self.dev.get_mut().erase_block(self.layout.block_addr(blk)) {
                Ok(()) => {}
                Err(FlashError::PowerLost) => return Err(self.fail(FlashError::PowerLost)),
                Err(_) => continue,
            }
            let epoch = self.anchors.epochs[1 - i] - 1;
            let record = self.fs_record();
            if media_ok(self.program_anchor_page(blk, 0, epoch, 0, record.encode()))? {
                self.anchors.epochs[i] = epoch;
            }
        }
        Ok(())
    }
}

/// A program result where a media failure (a worn-out anchor block) is a plain "no".
fn media_ok(r: Result<()>) -> Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(FsError::Flash(e)) if !matches!(e, FlashError::PowerLost) => Ok(false),
        Err(e) => Err(e),
    }
}
