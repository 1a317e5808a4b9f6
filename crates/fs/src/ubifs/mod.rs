//! UBIFS, the file system of the MA paper and Linux's on raw NAND, in Linux's own on-flash
//! format (`ubifs-media.h`). DESIGN.md says why it is a second file system beside the
//! YAFFS-style one rather than an axis of it: data and metadata are nodes in a journal,
//! found through a B+ tree index on flash, with LEB properties deciding garbage collection.
//!
//! What is here reads a UBIFS volume the way Linux mounts one (superblock, master node,
//! index, journal replay) and answers lookups, directories, file bytes and xattrs; `nandkit
//! ubifs ls|extract|check` use it on images mkfs.ubifs made or a board wrote.
//!
//! - `media`: the nodes, byte for byte, with their CRC;
//! - `key`: keys and the R5 name hash;
//! - `volume`: LEBs of a UBI volume (or of a mkfs.ubifs image in memory);
//! - `index`: the walk of the on-flash index;
//! - `replay`: the log and its buds, applied in sequence-number order;
//! - `image`: the opened volume;
//! - `compress`: none, LZO, zlib and zstd data nodes;
//! - `lpt`: the LEB properties tree, bit-packed as Linux packs it;
//! - `check`: fsck (index, names, data, links, the LPT against the main area).

pub mod check;
pub mod commit;
pub mod compress;
pub mod fs;
pub mod gc;
pub mod image;
pub mod index;
pub mod io;
pub mod journal;
pub mod key;
pub mod lpt;
pub mod media;
pub mod mount;
pub mod ops;
pub mod replay;
pub mod space;
pub mod tnc;
pub mod volume;

pub use image::{Entry, Loc, UbifsError, UbifsImage};
pub use volume::{LebSource, MemVolume, UbiVolume};
