//! The in-RAM block table: state, sequence number and page validity of every erase block.
//! Invariant per block: valid + invalid + free pages = pages per block, where pages below
//! `next_page` are valid or invalid and pages from `next_page` on are free.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BlockState {
    /// Erased (or found all-erased at mount), ready to be opened.
    Empty,
    /// The open block of a write stream.
    Active,
    /// Written as far as it will be; cleaning may reclaim it.
    Full,
    /// Holds a checkpoint.
    Checkpoint,
    /// Bad: never used again.
    Bad,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Block {
    pub state: BlockState,
    /// Sequence number given when the block was opened (0: never opened / unknown).
    pub seq: u32,
    /// Pages programmed (or spoiled) so far.
    pub next_page: u32,
    /// Pages holding live data or metadata.
    pub valid: u32,
    /// A program failed here: move its valid pages out and retire it.
    pub retire: bool,
    /// ECC asked for a scrub: move its valid pages out and erase it.
    pub scrub: bool,
}

impl Block {
    pub fn invalid(&self) -> u32 {
        self.next_page - self.valid
    }
}

pub struct BlockTable {
    pub blocks: Vec<Block>,
    /// One bit per page: set when the page is valid.
    valid_bits: Vec<u64>,
    /// Per block: objects whose header pages (any version) sit in it, for tombstone
    /// lifetimes (see `crate::fs`'s tombstone handling).
    pub header_objs: Vec<Vec<u32>>,
    pub pages_per_block: u32,
    pub empty: u32,
}

impl BlockTable {
    pub fn new(blocks: u32, pages_per_block: u32) -> Self {
        let pages = blocks as usize * pages_per_block as usize;
        Self {
            blocks: vec![
                Block {
                    state: BlockState::Empty,
                    seq: 0,
                    next_page: 0,
                    valid: 0,
                    retire: false,
                    scrub: false,
                };
                blocks as usize
            ],
            valid_bits: vec![0; pages.div_ceil(64)],
            header_objs: vec![Vec::new(); blocks as usize],
            pages_per_block,
            empty: blocks,
        }
    }

    pub fn is_valid(&self, pno: u32) -> bool {
        self.valid_bits[pno as usize / 64] & (1 << (pno % 64)) != 0
    }

    pub fn set_valid(&mut self, pno: u32) {
        debug_assert!(!self.is_valid(pno), "page {pno} already valid");
        self.valid_bits[pno as usize / 64] |= 1 << (pno % 64);
        self.blocks[(pno / self.pages_per_block) as usize].valid += 1;
    }

    pub fn invalidate(&mut self, pno: u32) {
        if self.is_valid(pno) {
            self.valid_bits[pno as usize / 64] &= !(1 << (pno % 64));
            self.blocks[(pno / self.pages_per_block) as usize].valid -= 1;
        }
    }

    pub fn set_state(&mut self, block: u32, state: BlockState) {
        let b = &mut self.blocks[block as usize];
        if b.state == BlockState::Empty {
            self.empty -= 1;
        }
        if state == BlockState::Empty {
            self.empty += 1;
        }
        b.state = state;
    }

    /// Valid pages of a block, in page order.
    pub fn valid_pages(&self, block: u32) -> Vec<u32> {
        let first = block * self.pages_per_block;
        (first..first + self.blocks[block as usize].next_page)
            .filter(|&p| self.is_valid(p))
            .collect()
    }

    /// Blocks cleaning may reclaim: full, holding at least one invalid page or unwritten
    /// pages it will never be written to (a block a mount found part-written), or flagged.
    pub fn is_candidate(&self, block: u32) -> bool {
        let b = &self.blocks[block as usize];
        b.state == BlockState::Full
            && (b.invalid() > 0 || b.next_page < self.pages_per_block || b.retire || b.scrub)
    }

    pub fn good_blocks(&self) -> u32 {
        self.blocks
            .iter()
            .filter(|b| b.state != BlockState::Bad)
            .count() as u32
    }

    pub fn valid_total(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.valid)).sum()
    }

    /// MODA's parameters over the whole device: utilisation u (valid / all pages),
    /// invalidity i (invalid / all pages) and uniformity p (fraction of blocks that do not
    /// hold both valid and invalid pages). Bad blocks are left out.
    pub fn uip(&self) -> (f64, f64, f64) {
        let mut pages = 0u64;
        let (mut valid, mut invalid, mut blocks, mut uniform) = (0u64, 0u64, 0u64, 0u64);
        for b in &self.blocks {
            if b.state == BlockState::Bad {
                continue;
            }
            blocks += 1;
            pages += u64::from(self.pages_per_block);
            valid += u64::from(b.valid);
            invalid += u64::from(b.invalid());
            if b.valid == 0 || b.invalid() == 0 {
                uniform += 1;
            }
        }
        if pages == 0 {
            return (0.0, 0.0, 1.0);
        }
        (
            valid as f64 / pages as f64,
            invalid as f64 / pages as f64,
            uniform as f64 / blocks as f64,
        )
    }
}

impl BlockTable {
    /// The raw validity bitmap (for checkpoints).
    pub fn valid_words(&self) -> &[u64] {
        &self.valid_bits
    }

    /// Restores the bitmap from a checkpoint and recounts every block's valid pages.
    /// Returns false if the bitmap does not fit this table.
    pub fn restore_valid_words(&mut self, words: Vec<u64>) -> bool {
        if words.len() != self.valid_bits.len() {
            return false;
        }
        self.valid_bits = words;
        let ppb = self.pages_per_block;
        for b in 0..self.blocks.len() as u32 {
            let valid = (b * ppb..(b + 1) * ppb)
                .filter(|&p| self.is_valid(p))
                .count() as u32;
            self.blocks[b as usize].valid = valid;
        }
        true
    }
}
