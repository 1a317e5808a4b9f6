//! fsck's look at the NVRAM: walked afresh, it must say what the store believes, agree
//! with the file system's RAM state, and never publish a page another chunk now owns.

use std::collections::{BTreeSet, HashMap};

use nandkit_flash::Flash;

use super::layout::{get64, NvBlock, DYING_OFF, INODES_OFF, RESERVED_OFF, SERIAL_OFF, TABLE_OFF};
use super::recover::{walk, Reader};
use super::Minv;
use crate::blocks::BlockState;
use crate::fs::FileSystem;
use crate::meta::StoreCheck;
use crate::object::LOST_PAGE;
use crate::rebuild::has_data;
use crate::types::Ino;

pub(super) fn check<F: Flash>(m: &mut Minv, fs: &mut FileSystem<F>) -> StoreCheck {
    let mut notes = Vec::new();
    if fs.anchors.fs_id == 0 {
        // A mount checks the two carry the same id; images made before ids carry none.
        notes.push(
            "the NVRAM and the flash image carry no file system id (made before ids): \
             nothing can check that this NVRAM image belongs to this flash image"
                .into(),
        );
    }
    let problems = check_problems(m, fs, &mut notes);
    StoreCheck { problems, notes }
}

fn check_problems<F: Flash>(
    m: &mut Minv,
    fs: &mut FileSystem<F>,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut p = Vec::new();
    let regions = m.regions;
    let dead = m.dead.clone();
    let pages = u64::from(fs.layout.blocks) * u64::from(fs.layout.pages_per_block);
    let mut r = Reader {
        nv: &mut m.nv,
        patch: HashMap::new(),
    };
    // A committed transaction still in the log is a crash's normal leftover: a writable
    // mount applies it before anything else, a read-only one reads through it. So the
    // NVRAM is checked as the read-only mount sees it, and only a writable mount that
    // left one behind has a problem.
    match super::redo::read(r.nv, |o| regions.loggable(o)) {
        Ok(None) => {}
        Ok(Some(entries)) if fs.read_only => {
            notes.push(format!(
                "NVRAM: a committed transaction of {} stores, from before the crash, \
                 will be applied by the next writable mount (checked as applied)",
                entries.len()
            ));
            r.patch = entries.into_iter().collect();
        }
        Ok(Some(_)) => p.push("NVRAM: a redo transaction is left unapplied".into()),
        Err(e) => p.push(format!("NVRAM: the redo log is damaged: {e}")),
    }
    let high_water = r
        .read(super::layout::HIGH_WATER_OFF, 8)
        .map(|b| get64(&b, 0))
        .unwrap_or(0);
    let table = r.read(TABLE_OFF, regions.table_bytes());
    let dying = super::pages::dying_list(&mut r, &regions, fs.layout.chunk_bytes, pages);
    let bitmap = r.read(regions.bitmap_off, regions.bitmap_bytes());
    let found = walk(&mut r, &regions, fs.layout.chunk_bytes, pages, true);
    let found = match found {
        Ok(f) => f,
        Err(e) => {
            p.push(format!("NVRAM: {e}"));
            return p;
        }
    };
    p.extend(super::tree::check(&mut r, &found));
    p.extend(counts(&mut r, &found, fs.next_serial));
    // The NVRAM says what the store believes.
    if found.inodes.len() != m.inodes.len() {
        p.push(format!(
            "NVRAM holds {} inodes, the store believes {}",
            found.inodes.len(),
            m.inodes.len()
        ));
    }
    for (ino, (n, _, _)) in &found.inodes {
        match m.inodes.get(ino) {
            None => p.push(format!(
                "NVRAM has an inode for object {ino} the store forgot"
            )),
            Some(mine) => {
                // The store keeps where the structures are (all of them, once read); the
                // pages they hold it reads in place.
                let blocks_differ = mine.loaded && mine.blocks != n.blocks;
                if mine.at != n.at
                    || blocks_differ
                    || mine.place != n.place
                    || mine.reserved != n.reserved
                {
                    p.push(format!(
                        "object {ino}: NVRAM inode differs from the store's view"
                    ));
                }
            }
        }
    }
    let used: u64 = found.extents.iter().map(|e| e.1).sum();
    if used != m.heap.in_use_bytes() {
        p.push(format!(
            "NVRAM heap: {used} bytes reachable, the manager counts {}",
            m.heap.in_use_bytes()
        ));
    }
    // Page states: valid exactly where a slot publishes a page (or an inode still on the
    // dying list does), in blocks in use.
    let table = table.map(|t| regions.decode_table(&t));
    match (&table, dying) {
        (Ok(table), Ok(dying)) => {
            // The bitmap: exactly the units of reachable structures. An inode on the dying
            // list (a removal or a link cut short) may have its units and pages either way:
            // a writable mount finishes it.
            let words = regions.bitmap_bytes() as usize / 8;
            let (mut want, mut either) = (vec![0u64; words], vec![0u64; words]);
            let dying_extents = dying.iter().flat_map(|d| d.extents.iter());
            for (map, extents) in [
                (&mut want, found.extents.clone()),
                (
                    &mut either,
                    dying_extents.map(|e| (e.off, e.bytes)).collect(),
                ),
            ] {
                for (off, bytes) in extents {
                    for i in regions.units_of(off, bytes) {
                        map[(i / 64) as usize] |= 1 << (i % 64);
                    }
                }
            }
            if let Ok(bitmap) = &bitmap {
                let differ = (0..words)
                    .filter(|&w| get64(bitmap, 8 * w) & !either[w] != want[w])
                    .count();
                if differ > 0 {
                    p.push(format!(
                        "NVRAM: the heap bitmap differs from the reachable structures in \
                         {differ} words"
                    ));
                }
            }
            let dying: BTreeSet<u32> = dying.into_iter().flat_map(|d| d.pages).collect();
            // Like a transaction in the log: a writable mount finishes the list first.
            let head = r.read(DYING_OFF, 8).map(|b| get64(&b, 0)).unwrap_or(0);
            if head != 0 && !fs.read_only {
                p.push("NVRAM: a writable mount left an inode on the dying list".into());
            } else if head != 0 {
                notes.push(
                    "NVRAM: an inode a crash left on the dying list (a removal, or a new \
                     file's link, cut short) is finished by the next writable mount"
                        .into(),
                );
            }
            let mut published = BTreeSet::new();
            for (_, _, slots) in found.inodes.values() {
                published.extend(slots.iter().map(|&(_, p)| p).filter(|&p| p != LOST_PAGE));
            }
            let in_use = |p: u32| table.block(fs.layout.block_of(p)) == Some(NvBlock::InUse);
            published.retain(|&p| in_use(p) && !dying.contains(&p));
            for &(b, i) in &table.bad_bits {
                p.push(format!("block {b}, page {i}: page state bits 0b10"));
            }
            let mut valid: BTreeSet<u32> = table.valid.iter().copied().collect();
            valid.retain(|p| !dying.contains(p));
            for pno in valid.symmetric_difference(&published).take(10) {
                let said = if valid.contains(pno) {
                    "valid"
                } else {
                    "not valid"
                };
                p.push(format!(
                    "page {pno}: the page states say {said}, the offset structures disagree"
                ));
            }
        }
        (_, Err(e)) => p.push(format!("NVRAM: the dying list: {e}")),
        (Err(_), _) => {}
    }
    // Block status against RAM.
    if let Ok(table) = table {
        for b in 0..fs.layout.blocks {
            let word = table.block(b);
            let ram = fs.blocks.get(b).state;
            let ok = match ram {
                BlockState::Empty => matches!(word, Some(NvBlock::Erased | NvBlock::InUse)),
                BlockState::Bad => word == Some(NvBlock::Bad),
                BlockState::Anchor => word == Some(NvBlock::Anchor),
                _ => word == Some(NvBlock::InUse),
            };
            if !ok {
                p.push(format!("block {b}: {ram:?} in RAM, NVRAM status {word:?}"));
            }
        }
    }
    // Objects against their inodes, and published pages against their owners.
    let mut owner: HashMap<u32, (Ino, u32)> = HashMap::new();
    for (&ino, o) in &fs.objects {
        if has_data(o.kind) {
            for (c, pno) in o.chunks.entries() {
                if pno != LOST_PAGE {
                    owner.insert(pno, (ino, c));
                }
            }
        }
    }
    let mut inos: Vec<Ino> = fs.objects.keys().copied().collect();
    inos.sort_unstable();
    for ino in inos {
        let o = &fs.objects[&ino];
        let settled = !o.is_dirty() && !fs.caches.contains_key(&ino);
        match found.inodes.get(&ino) {
            None if settled && !fs.hollow.contains(&ino) => {
                p.push(format!("object {ino} has no inode in NVRAM"));
            }
            None => {}
            Some((_, rec, _)) if settled && (rec.kind != o.kind || rec.size != o.size) => {
                p.push(format!(
                    "object {ino}: NVRAM record says {:?} of {} bytes, RAM {:?} of {}",
                    rec.kind, rec.size, o.kind, o.size
                ));
            }
            Some(_) => {}
        }
    }
    for (ino, (_, rec, slots)) in &found.inodes {
        // Images made before the mark existed hold 0 there.
        if high_water != 0 && u64::from(*ino) >= high_water {
            p.push(format!(
                "NVRAM: object {ino} is at or past the object number high-water mark {high_water}"
            ));
        }
        // Every change of the tree is one transaction, and a removal takes the objects
        // that cannot outlive it with it (`tree`): no crash leaves an attribute set
        // without its owner, or an object without a name, in the NVRAM.
        let left = dead.contains(ino) || fs.unnamed_left.contains(ino);
        if left && !fs.objects.contains_key(ino) {
            p.push(format!(
                "NVRAM: object {ino} ({:?}, names {:?}) is left without a name or an owner \
                 (a removal left it behind)",
                rec.kind,
                rec.names.iter().map(|n| n.parent).collect::<Vec<_>>()
            ));
        } else if !fs.objects.contains_key(ino) {
            p.push(format!(
                "NVRAM has an inode for object {ino}, which does not exist"
            ));
        }
        for &(c, pno) in slots {
            if pno == LOST_PAGE {
                continue;
            }
            let b = fs.layout.block_of(pno);
            if fs.blocks.get(b).state == BlockState::Empty {
                p.push(format!(
                    "object {ino}: chunk {c} is published at page {pno}, in erased block {b}"
                ));
            }
            if let Some(&who) = owner.get(&pno) {
                if who != (*ino, c) {
                    p.push(format!(
                        "object {ino}: chunk {c} is published at page {pno}, which holds {who:?}"
                    ));
                }
            }
        }
    }
    p
}

/// The log region's counts (`layout`) against the walked inodes: a mount after a crash
/// takes them as they are. And the next version to give is past every record's.
fn counts(r: &mut Reader, found: &super::recover::Found2, next_serial: u64) -> Vec<String> {
    let mut p = Vec::new();
    let word = |r: &mut Reader, off| r.read(off, 8).map(|b| get64(&b, 0)).unwrap_or(0);
    let inodes = word(r, INODES_OFF);
    let reserved = word(r, RESERVED_OFF);
    let serial = word(r, SERIAL_OFF);
    let all = found.inodes.len() as u64;
    let visible = found
        .inodes
        .values()
        .filter(|(n, _, _)| n.place.kind.is_visible())
        .count() as u64;
    let holding = found.inodes.values().filter(|(n, _, _)| n.reserved).count() as u64;
    if (inodes >> 32, inodes & 0xffff_ffff) != (all, visible) {
        p.push(format!(
            "NVRAM: the counts say {} inodes, {} visible; the walk found {all}, {visible}",
            inodes >> 32,
            inodes & 0xffff_ffff
        ));
    }
    if reserved != holding {
        p.push(format!(
            "NVRAM: the count of files with fallocated chunks says {reserved}, the walk \
             found {holding}"
        ));
    }
    let newest = found.inodes.values().map(|(_, rec, _)| rec.version).max();
    if let Some(v) = newest.filter(|&v| v >= serial) {
        p.push(format!(
            "NVRAM: a record has version {v}, not below the version mark {serial}"
        ));
    }
    if let Some(v) = newest.filter(|&v| v >= next_serial) {
        p.push(format!(
            "NVRAM: a record has version {v}, and the file system gives {next_serial} next"
        ));
    }
    p
}
