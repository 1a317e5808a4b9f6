//! YAFFS's sequential allocation: every page, whatever it is, goes to the one write
//! frontier. Hot and cold data share blocks, which is what MODA improves on.

use super::{Allocator, WriteHint};

pub struct Sequential;

impl Allocator for Sequential {
    fn name(&self) -> &'static str {
        "sequential"
    }

    fn streams(&self) -> usize {
        1
    }

    fn stream_for(&mut self, _hint: &WriteHint) -> usize {
        0
    }
}
