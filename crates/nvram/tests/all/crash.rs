//! What survives a power failure: persisted words always; unpersisted words kept, dropped or
//! torn per 8-byte word, as the seed decides; an aligned 8-byte store never torn.

use nandkit_nvram::{preset, CrashReport, Nvram, NvramError, PowerCut};
use proptest::prelude::*;

const SIZE: u64 = 1024;
const WORDS: u64 = SIZE / 8;

fn device() -> Nvram {
    Nvram::new_ram(preset("feram").unwrap().with_size_bytes(SIZE).unwrap()).unwrap()
}

fn contents(nv: &mut Nvram) -> Vec<u8> {
    let mut all = vec![0; SIZE as usize];
    nv.read(0, &mut all).unwrap();
    all
}

/// How a word came back, given its persisted (`old`) and current (`new`) contents, which
/// differ in every byte.
#[derive(Debug, PartialEq)]
enum Fate {
    Kept,
    Dropped,
    Torn,
}

fn fate(got: &[u8], old: &[u8], new: &[u8]) -> Fate {
    assert!(
        got.iter()
            .zip(old)
            .zip(new)
            .all(|((g, o), n)| g == o || g == n),
        "{got:?} mixes something other than {old:?} and {new:?}"
    );
    if got == new {
        Fate::Kept
    } else if got == old {
        Fate::Dropped
    } else {
        Fate::Torn
    }
}

#[test]
fn persisted_bytes_survive_every_crash() {
    for seed in 0..64 {
        let mut nv = device();
        nv.write(0, &[0x11; 512]).unwrap();
        nv.persist(0, 512).unwrap();
        nv.write(512, &[0x22; 512]).unwrap(); // volatile
        nv.write(100, &[0x33; 4]).unwrap(); // volatile, over persisted bytes
        nv.crash(seed);
        let after = contents(&mut nv);
        assert!(after[..96].iter().all(|&b| b == 0x11), "seed {seed}");
        assert!(after[104..512].iter().all(|&b| b == 0x11), "seed {seed}");
        assert!(after[100..104].iter().all(|&b| b == 0x11 || b == 0x33));
        assert!(after[512..].iter().all(|&b| b == 0x00 || b == 0x22));
    }
}

#[test]
fn byte_stores_are_kept_dropped_or_torn_per_word() {
    let mut nv = device();
    nv.write(0, &[0xAA; SIZE as usize]).unwrap();
    nv.persist_all().unwrap();
    nv.write(0, &[0x55; SIZE as usize]).unwrap();
    assert_eq!(nv.unpersisted_words(), WORDS as usize);
    let report = nv.crash(7);
    assert_eq!(report.kept + report.dropped + report.torn, WORDS);
    assert_eq!(nv.unpersisted_words(), 0);

    let after = contents(&mut nv);
    let mut seen = CrashReport::default();
    for word in after.chunks(8) {
        match fate(word, &[0xAA; 8], &[0x55; 8]) {
            Fate::Kept => seen.kept += 1,
            Fate::Dropped => seen.dropped += 1,
            Fate::Torn => seen.torn += 1,
        }
    }
    // A torn word may by chance take all its bytes from one side (1 in 128).
    assert!(
        seen.torn <= report.torn && seen.kept >= report.kept,
        "{seen:?} {report:?}"
    );
    assert!(
        seen.kept > 0 && seen.dropped > 0 && seen.torn > 0,
        "{seen:?}"
    );
}

#[test]
fn persist_covers_whole_words_and_no_more() {
    for seed in 0..32 {
        let mut nv = device();
        nv.write(0, &[9; 24]).unwrap();
        nv.persist(10, 1).unwrap(); // word 1 only
        assert_eq!(nv.unpersisted_words(), 2);
        nv.crash(seed);
        let after = contents(&mut nv);
        assert_eq!(&after[8..16], &[9; 8], "seed {seed}");
    }
}

#[test]
fn persist_words_makes_the_words_named_durable_in_one_persist_point() {
    for seed in 0..32 {
        let mut nv = device();
        for w in 0..4 {
            nv.write_u64(8 * 16 * w, 7 + w).unwrap();
        }
        let before = nv.persist_count();
        nv.persist_words(&[0, 8 * 32]).unwrap();
        assert_eq!(nv.persist_count(), before + 1);
        assert_eq!(nv.unpersisted_words(), 2, "words 16 and 48 stay volatile");
        nv.crash(seed);
        assert_eq!(nv.read_u64(0).unwrap(), 7, "seed {seed}");
        assert_eq!(nv.read_u64(8 * 32).unwrap(), 9, "seed {seed}");
    }
    // A cut there makes none of them durable.
    let mut nv = device();
    nv.write_u64(0, 5).unwrap();
    nv.cut_at_persist(0);
    assert!(matches!(nv.persist_words(&[0]), Err(NvramError::PowerLost)));
    assert_eq!(nv.unpersisted_words(), 1);
}

#[test]
fn an_aligned_8_byte_store_is_never_torn() {
    let old = 0x0101_0101_0101_0101u64;
    let new = 0xFEFE_FEFE_FEFE_FEFEu64;
    let (mut kept, mut dropped) = (0, 0);
    for seed in 0..16 {
        let mut nv = device();
        for w in 0..WORDS {
            nv.write_u64(w * 8, old).unwrap();
        }
        nv.persist_all().unwrap();
        for w in 0..WORDS {
            nv.write_u64(w * 8, new).unwrap();
        }
        let report = nv.crash(seed);
        assert_eq!(report.torn, 0);
        for w in 0..WORDS {
            match nv.read_u64(w * 8).unwrap() {
                v if v == new => kept += 1,
                v if v == old => dropped += 1,
                v => panic!("seed {seed}: word {w} torn: {v:#x}"),
            }
        }
    }
    assert!(kept > 0 && dropped > 0);
}

#[test]
fn a_word_with_an_8_byte_store_stays_atomic_under_later_byte_stores() {
    for seed in 0..64 {
        let mut nv = device();
        nv.write_u64(0, u64::MAX).unwrap();
        nv.write(3, &[0x42]).unwrap();
        nv.crash(seed);
        let mut current = u64::MAX.to_le_bytes();
        current[3] = 0x42;
        let got = nv.read_u64(0).unwrap();
        assert!(got == 0 || got == u64::from_le_bytes(current), "{got:#x}");
    }
}

fn crashed_with(seed: u64) -> (Vec<u8>, CrashReport) {
    let mut nv = device();
    for i in 0..SIZE {
        nv.write(i, &[i as u8 | 0x80]).unwrap();
    }
    let report = nv.crash(seed);
    (contents(&mut nv), report)
}

#[test]
fn same_seed_same_crash_different_seeds_differ() {
    assert_eq!(crashed_with(3), crashed_with(3));
    assert_ne!(crashed_with(3).0, crashed_with(4).0);
}

#[test]
fn a_cut_persist_does_not_take_effect_and_the_device_stays_dead() {
    for seed in 0..16 {
        let mut nv = device();
        nv.persist(0, 0).unwrap();
        nv.cut_at_persist(2); // counting from now: persists 0 and 1 run, 2 is cut
        for i in 0..5u64 {
            nv.write_u64(i * 8, i + 1).unwrap();
            let r = nv.persist(i * 8, 8);
            assert_eq!(r.is_ok(), i < 2, "persist {i}: {r:?}");
            if r.is_err() {
                break;
            }
        }
        assert!(nv.power_lost());
        assert_eq!(nv.persist_count(), 4);
        let dead = |r: Result<(), NvramError>| matches!(r, Err(NvramError::PowerLost));
        assert!(dead(nv.write(100, &[1])));
        assert!(dead(nv.write_u64(104, 1)));
        assert!(dead(nv.read(0, &mut [0])));
        assert!(matches!(nv.read_u64(0), Err(NvramError::PowerLost)));
        assert!(dead(nv.persist(0, 8)));
        assert!(dead(nv.persist_all()));
        assert_eq!(
            nv.persist_count(),
            4,
            "a dead device reaches no persist points"
        );

        nv.crash(seed);
        assert!(!nv.power_lost());
        assert_eq!(nv.read_u64(0).unwrap(), 1);
        assert_eq!(nv.read_u64(8).unwrap(), 2);
        assert!(
            matches!(nv.read_u64(16).unwrap(), 0 | 3),
            "the cut persist's word"
        );
        assert_eq!(nv.read_u64(24).unwrap(), 0);
        nv.write_u64(24, 7).unwrap();
        nv.persist(24, 8).unwrap();
        assert_eq!(nv.read_u64(24).unwrap(), 7, "power is back");
    }
}

#[test]
fn a_random_cut_is_seeded_and_falls_within_its_window() {
    let cut_at = |seed| {
        let mut nv = device();
        nv.arm_power_cut(PowerCut::Random { seed, within: 50 });
        (0..50).position(|_| nv.persist(0, 8).is_err()).unwrap()
    };
    assert_eq!(cut_at(11), cut_at(11));
}

/// The crash test every user of this crate writes: a tiny log that appends a record and then
/// publishes it by bumping a committed count (an 8-byte store), persisting each step. Cut
/// power at every persist point in turn: every published record must read back.
#[test]
fn a_log_survives_a_cut_at_every_persist_point() {
    const RECORD: u64 = 24;
    fn run(nv: &mut Nvram, records: u64) -> Result<(), NvramError> {
        for r in 0..records {
            let at = 8 + r * RECORD;
            nv.write(at, &[r as u8 + 1; RECORD as usize])?;
            nv.persist(at, RECORD)?;
            nv.write_u64(0, r + 1)?;
            nv.persist(0, 8)?;
        }
        Ok(())
    }
    let mut probe = device();
    run(&mut probe, 10).unwrap();
    let points = probe.persist_count();
    assert_eq!(points, 20);
    for k in 0..points {
        for seed in 0..4 {
            let mut nv = device();
            nv.cut_at_persist(k);
            assert!(run(&mut nv, 10).is_err(), "cut {k}");
            nv.crash(seed);
            let committed = nv.read_u64(0).unwrap();
            // Cut at an even point: a record's persist, so k / 2 were published. At an odd
            // point: the count's own persist, whose 8-byte store may or may not survive.
            let may = if k % 2 == 0 {
                k / 2..=k / 2
            } else {
                k / 2..=k / 2 + 1
            };
            assert!(
                may.contains(&committed),
                "cut {k} seed {seed}: count {committed}"
            );
            for r in 0..committed {
                let mut rec = [0u8; RECORD as usize];
                nv.read(8 + r * RECORD, &mut rec).unwrap();
                assert_eq!(rec, [r as u8 + 1; RECORD as usize], "cut {k} seed {seed}");
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    WriteU64 { word: u64, value: u64 },
    Persist { offset: u64, len: u64 },
}

const SMALL: u64 = 64;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..SMALL, prop::collection::vec(any::<u8>(), 1..20)).prop_map(|(offset, mut data)| {
            data.truncate((SMALL - offset) as usize);
            Op::Write { offset, data }
        }),
        (0..SMALL / 8, any::<u64>()).prop_map(|(word, value)| Op::WriteU64 { word, value }),
        (0..SMALL, 0..24u64).prop_map(|(offset, len)| Op::Persist {
            offset,
            len: len.min(SMALL - offset)
        }),
    ]
}

/// What the crash may give each byte and word, kept alongside the device.
struct Model {
    persisted: Vec<u8>,
    /// Per byte: values stored since its word was last persisted.
    since: Vec<Vec<u8>>,
    /// Per word: took an aligned 8-byte store since it was last persisted.
    atomic: Vec<bool>,
    current: Vec<u8>,
}

impl Model {
    fn new() -> Self {
        Model {
            persisted: vec![0; SMALL as usize],
            since: vec![Vec::new(); SMALL as usize],
            atomic: vec![false; (SMALL / 8) as usize],
            current: vec![0; SMALL as usize],
        }
    }

    fn store(&mut self, offset: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let at = offset as usize + i;
            self.current[at] = b;
            self.since[at].push(b);
        }
    }

    fn persist(&mut self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        for word in offset / 8..=(offset + len - 1) / 8 {
            let bytes = (word * 8) as usize..(word * 8 + 8) as usize;
            self.persisted[bytes.clone()].copy_from_slice(&self.current[bytes.clone()]);
            bytes.for_each(|i| self.since[i].clear());
            self.atomic[word as usize] = false;
        }
    }
}

proptest! {
    #[test]
    fn a_crash_leaves_persisted_or_later_stored_values_and_untorn_8_byte_stores(
        ops in prop::collection::vec(op(), 0..40),
        seed in any::<u64>(),
    ) {
        let mut nv = Nvram::new_ram(preset("pram").unwrap().with_size_bytes(SMALL).unwrap()).unwrap();
        let mut model = Model::new();
        for op in &ops {
            match op {
                Op::Write { offset, data } => {
                    nv.write(*offset, data).unwrap();
                    model.store(*offset, data);
                }
                Op::WriteU64 { word, value } => {
                    nv.write_u64(word * 8, *value).unwrap();
                    model.store(word * 8, &value.to_le_bytes());
                    model.atomic[*word as usize] = true;
                }
                Op::Persist { offset, len } => {
                    nv.persist(*offset, *len).unwrap();
                    model.persist(*offset, *len);
                }
            }
        }
        nv.crash(seed);
        let mut after = vec![0u8; SMALL as usize];
        nv.read(0, &mut after).unwrap();
        for (i, &b) in after.iter().enumerate() {
            prop_assert!(
                b == model.persisted[i] || model.since[i].contains(&b),
                "byte {}: {} is neither persisted {} nor stored since {:?}",
                i, b, model.persisted[i], model.since[i]
            );
        }
        for (w, &atomic) in model.atomic.iter().enumerate() {
            let bytes = w * 8..w * 8 + 8;
            if atomic {
                prop_assert!(
                    after[bytes.clone()] == model.persisted[bytes.clone()]
                        || after[bytes.clone()] == model.current[bytes.clone()],
                    "word {} with an 8-byte store came back torn", w
                );
            }
        }
    }
}
