//! The page-mapped log (YAFFS): a dense vector with the page of every chunk. Writes go out
//! of place to whatever page the allocator picks; the old page becomes invalid.

use super::ChunkMap;
use crate::object::{LOST_PAGE, NO_PAGE};

#[derive(Default)]
pub struct PageMap {
    pages: Vec<u32>,
}

fn is_page(p: u32) -> bool {
    p != NO_PAGE && p != LOST_PAGE
}

impl ChunkMap for PageMap {
    fn get(&self, chunk: u32) -> u32 {
        self.pages.get(chunk as usize).copied().unwrap_or(NO_PAGE)
    }

    fn set(&mut self, chunk: u32, pno: u32) -> u32 {
        let i = chunk as usize;
        if self.pages.len() <= i {
            if pno == NO_PAGE {
                return NO_PAGE;
            }
            self.pages.resize(i + 1, NO_PAGE);
        }
        std::mem::replace(&mut self.pages[i], pno)
    }

    fn truncate(&mut self, keep: u32) -> Vec<u32> {
        let keep = (keep as usize).min(self.pages.len());
        let dropped = self.pages.drain(keep..).filter(|&p| is_page(p)).collect();
        self.pages.shrink_to_fit();
        dropped
    }

    fn entries(&self) -> Vec<(u32, u32)> {
        self.pages
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != NO_PAGE)
            .map(|(i, &p)| (i as u32, p))
            .collect()
    }

    fn mapped(&self) -> u64 {
        self.pages.iter().filter(|&&p| is_page(p)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_set_truncate() {
        let mut m = PageMap::default();
        assert_eq!(m.get(5), NO_PAGE);
        assert_eq!(m.set(3, 10), NO_PAGE);
        assert_eq!(m.set(3, 11), 10);
        m.set(7, LOST_PAGE);
        assert_eq!(m.mapped(), 1);
        assert_eq!(m.entries(), vec![(3, 11), (7, LOST_PAGE)]);
        assert_eq!(m.truncate(4), Vec::<u32>::new());
        assert_eq!(m.truncate(0), vec![11]);
        assert_eq!(m.get(3), NO_PAGE);
    }
}
