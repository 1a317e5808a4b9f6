//! Where a file's offset structures are: structure k (mapping chunks k * SLOTS onward) at
//! an NVRAM offset, in k order. This index is all the store keeps of a file's offsets in
//! DRAM; the page numbers themselves are read from the structures in NVRAM when needed
//! (the paper's File_Offset structures, used in place). Most files have one or two
//! structures, so the index is a plain sorted slice, exactly sized (a structure is added
//! once per SLOTS chunks, so rebuilding it then costs little).

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Offsets(Box<[(u32, u64)]>);

impl Offsets {
    fn find(&self, k: u32) -> Result<usize, usize> {
        self.0.binary_search_by_key(&k, |e| e.0)
    }

    pub(crate) fn get(&self, k: u32) -> Option<u64> {
        self.find(k).ok().map(|i| self.0[i].1)
    }

    pub(crate) fn contains(&self, k: u32) -> bool {
        self.find(k).is_ok()
    }

    /// The structure after `k`'s place in the chain (its link's target).
    pub(crate) fn next_after(&self, k: u32) -> Option<u64> {
        let i = match self.find(k) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        self.0.get(i).map(|e| e.1)
    }

    /// The structure before `k`'s place in the chain (whose link points at it).
    pub(crate) fn before(&self, k: u32) -> Option<u64> {
        let i = match self.find(k) {
            Ok(i) | Err(i) => i,
        };
        i.checked_sub(1).map(|i| self.0[i].1)
    }

    pub(crate) fn insert(&mut self, k: u32, off: u64) {
        match self.find(k) {
            Ok(i) => self.0[i].1 = off,
            Err(i) => {
                let mut v = Vec::with_capacity(self.0.len() + 1);
                v.extend_from_slice(&self.0[..i]);
                v.push((k, off));
                v.extend_from_slice(&self.0[i..]);
                self.0 = v.into_boxed_slice();
            }
        }
    }

    /// Takes out every structure from `k` on.
    pub(crate) fn split_off(&mut self, k: u32) -> Vec<(u32, u64)> {
        let i = match self.find(k) {
            Ok(i) | Err(i) => i,
        };
        let tail = self.0[i..].to_vec();
        self.0 = self.0[..i].into();
        tail
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.0.iter().copied()
    }

    /// Structures from `k` on.
    pub(crate) fn from(&self, k: u32) -> impl Iterator<Item = (u32, u64)> + '_ {
        let i = match self.find(k) {
            Ok(i) | Err(i) => i,
        };
        self.0[i..].iter().copied()
    }

    pub(crate) fn first(&self) -> Option<u64> {
        self.0.first().map(|e| e.1)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.0 = Box::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_k_order_and_finds_neighbours() {
        let mut o = Offsets::default();
        o.insert(4, 400);
        o.insert(0, 100);
        o.insert(2, 200);
        assert_eq!(o.iter().collect::<Vec<_>>(), [(0, 100), (2, 200), (4, 400)]);
        assert_eq!(o.get(2), Some(200));
        assert_eq!(o.get(3), None);
        assert!(o.contains(4) && !o.contains(1));
        // Around a missing k: the structures either side.
        assert_eq!((o.before(3), o.next_after(3)), (Some(200), Some(400)));
        // Around a present one: its neighbours, not itself.
        assert_eq!((o.before(2), o.next_after(2)), (Some(100), Some(400)));
        assert_eq!((o.before(0), o.next_after(4)), (None, None));
        assert_eq!(o.from(1).collect::<Vec<_>>(), [(2, 200), (4, 400)]);
        assert_eq!(o.split_off(2), vec![(2, 200), (4, 400)]);
        assert_eq!(o.first(), Some(100));
        o.clear();
        assert!(o.is_empty());
    }
}
