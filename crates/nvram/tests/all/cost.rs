//! Simulated time and energy add up exactly for a known sequence of accesses.

use nandkit_nvram::{preset, Nvram, NvramError, NvramStats};

#[test]
fn feram_time_and_energy_add_up() {
    let config = preset("feram").unwrap().with_size_bytes(1024).unwrap();
    let (word_ns, pj) = (110, 2_700);
    assert_eq!(config.timing.read_ns_per_word, word_ns);
    assert_eq!(config.timing.write_ns_per_word, word_ns);
    assert_eq!(config.timing.persist_ns, word_ns);
    assert_eq!(config.energy.read_pj_per_byte, pj);
    assert_eq!(config.energy.write_pj_per_byte, pj);
    let mut nv = Nvram::new_ram(config).unwrap();

    nv.write(3, &[1; 10]).unwrap(); // bytes 3..13: words 0 and 1
    nv.write_u64(16, 5).unwrap(); // word 2
    assert_eq!(nv.take_elapsed_ns(), 3 * word_ns);
    assert_eq!(nv.take_elapsed_ns(), 0, "taking resets");

    nv.persist(0, 24).unwrap(); // three volatile words
    let mut buf = [0u8; 8];
    nv.read(0, &mut buf).unwrap(); // word 0
    nv.read_u64(16).unwrap(); // word 2
    nv.persist(0, 0).unwrap(); // a bare fence
    assert_eq!(nv.take_elapsed_ns(), 4 * word_ns);

    assert_eq!(
        nv.stats(),
        NvramStats {
            bytes_read: 16,
            bytes_written: 18,
            persists: 2,
            persisted_bytes: 24,
            sim_time_ns: 7 * word_ns,
            energy_pj: 34 * pj,
        }
    );
    assert!((nv.stats().energy_j() - 34.0 * 2.7e-9).abs() < 1e-15);
}

#[test]
fn pram_writes_cost_more_than_reads() {
    let mut nv = Nvram::new_ram(preset("pram").unwrap().with_size_bytes(64).unwrap()).unwrap();
    nv.write(6, &[0; 4]).unwrap(); // two words
    assert_eq!(nv.take_elapsed_ns(), 2 * 1_000);
    nv.read(0, &mut [0; 16]).unwrap();
    assert_eq!(nv.take_elapsed_ns(), 2 * 100);
    assert_eq!(nv.stats().energy_pj, 4 * 22_500 + 16 * 1_350);
}

#[test]
fn refused_operations_cost_nothing() {
    let mut nv = Nvram::new_ram(preset("feram").unwrap().with_size_bytes(64).unwrap()).unwrap();
    assert!(nv.read(60, &mut [0; 8]).is_err());
    nv.cut_at_persist(0);
    assert!(matches!(nv.persist(0, 8), Err(NvramError::PowerLost)));
    assert!(nv.write(0, &[1]).is_err());
    assert_eq!(nv.take_elapsed_ns(), 0);
    assert_eq!(nv.stats(), NvramStats::default());
    assert_eq!(nv.persist_count(), 1, "the cut persist was a persist point");
}
