//! Both backends store and return bytes alike; file images reopen as written and refuse to
//! open as anything else.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use nandkit_nvram::backend::file::HEADER_BYTES;
use nandkit_nvram::{preset, Nvram, NvramConfig, NvramError};

const SIZE: u64 = 256;

fn small(name: &str) -> NvramConfig {
    preset(name).unwrap().with_size_bytes(SIZE).unwrap()
}

/// A RAM device and a file device of the same configuration.
fn both(dir: &Path) -> Vec<(&'static str, Nvram)> {
    vec![
        ("ram", Nvram::new_ram(small("feram")).unwrap()),
        (
            "file",
            Nvram::create_file(&dir.join("rt.nvram"), small("feram"), false).unwrap(),
        ),
    ]
}

#[test]
fn round_trips_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    for (name, mut nv) in both(dir.path()) {
        assert_eq!(nv.size_bytes(), SIZE, "{name}");
        let mut buf = [0xAAu8; 11];
        nv.read(5, &mut buf).unwrap();
        assert_eq!(buf, [0; 11], "{name}: a new device reads as zeros");

        nv.write(5, b"hello world").unwrap();
        nv.read(5, &mut buf).unwrap();
        assert_eq!(
            &buf, b"hello world",
            "{name}: unpersisted stores are readable"
        );

        nv.write_u64(16, 0x0102_0304_0506_0708).unwrap();
        assert_eq!(nv.read_u64(16).unwrap(), 0x0102_0304_0506_0708, "{name}");
        let mut le = [0u8; 8];
        nv.read(16, &mut le).unwrap();
        assert_eq!(
            le,
            0x0102_0304_0506_0708u64.to_le_bytes(),
            "{name}: little-endian"
        );

        nv.write(SIZE - 1, &[7]).unwrap();
        nv.read(SIZE, &mut []).unwrap();
        nv.persist(0, SIZE).unwrap();
        nv.persist_all().unwrap();
        assert_eq!(nv.unpersisted_words(), 0, "{name}");
    }
}

#[test]
fn out_of_range_and_misaligned_accesses_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (name, mut nv) in both(dir.path()) {
        let oob = |r: Result<(), NvramError>| matches!(r, Err(NvramError::OutOfRange { .. }));
        assert!(oob(nv.read(SIZE, &mut [0])), "{name}");
        assert!(oob(nv.read(SIZE - 4, &mut [0; 8])), "{name}");
        assert!(
            oob(nv.write(u64::MAX, &[1, 2])),
            "{name}: offset + len overflows"
        );
        assert!(oob(nv.write_u64(SIZE, 1)), "{name}");
        assert!(oob(nv.persist(8, SIZE)), "{name}");
        assert!(oob(nv.persist(u64::MAX, 2)), "{name}");
        assert!(matches!(
            nv.read_u64(3),
            Err(NvramError::Misaligned { offset: 3 })
        ));
        assert!(matches!(
            nv.write_u64(12, 1),
            Err(NvramError::Misaligned { offset: 12 })
        ));
        // Refused calls change nothing, count nothing.
        assert_eq!(nv.persist_count(), 0, "{name}");
        assert_eq!(nv.unpersisted_words(), 0, "{name}");
        assert_eq!(nv.stats(), Default::default(), "{name}");
    }
}

#[test]
fn a_reopened_image_holds_the_persisted_bytes_and_its_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img.nvram");
    let config = small("pram");
    {
        let mut nv = Nvram::create_file(&path, config.clone(), false).unwrap();
        nv.write(40, b"metadata").unwrap();
        nv.write_u64(8, 42).unwrap();
        nv.persist_all().unwrap();
    }
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        HEADER_BYTES + SIZE,
        "header plus exactly the NVRAM bytes"
    );
    let mut nv = Nvram::open_file(&path).unwrap();
    assert_eq!(nv.config(), &config);
    assert_eq!(nv.read_u64(8).unwrap(), 42);
    let mut buf = [0u8; 8];
    nv.read(40, &mut buf).unwrap();
    assert_eq!(&buf, b"metadata");
    assert_eq!(
        nv.unpersisted_words(),
        0,
        "what the file holds counts as persisted"
    );
}

#[test]
fn create_refuses_an_existing_file_unless_told_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img.nvram");
    let mut nv = Nvram::create_file(&path, small("feram"), false).unwrap();
    nv.write_u64(0, 9).unwrap();
    nv.persist_all().unwrap();
    drop(nv);
    assert!(matches!(
        Nvram::create_file(&path, small("feram"), false),
        Err(NvramError::Io { .. })
    ));
    let mut nv = Nvram::create_file(&path, small("feram"), true).unwrap();
    assert_eq!(
        nv.read_u64(0).unwrap(),
        0,
        "overwritten image starts zeroed"
    );
}

fn open_err(path: &Path) -> NvramError {
    match Nvram::open_file(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e,
    }
}

#[test]
fn foreign_empty_and_missing_files_are_not_images() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign");
    std::fs::write(&foreign, vec![b'x'; 8192]).unwrap();
    assert!(matches!(open_err(&foreign), NvramError::NotAnImage { .. }));
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(open_err(&empty), NvramError::NotAnImage { .. }));
    let err = open_err(&dir.path().join("missing"));
    assert!(matches!(err, NvramError::Io { .. }));
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn truncated_images_say_how_long_they_should_be() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img.nvram");
    drop(Nvram::create_file(&path, small("feram"), false).unwrap());
    let file = OpenOptions::new().write(true).open(&path).unwrap();

    file.set_len(HEADER_BYTES + SIZE - 1).unwrap();
    match open_err(&path) {
        NvramError::Truncated {
            expected, actual, ..
        } => assert_eq!(
            (expected, actual),
            (HEADER_BYTES + SIZE, HEADER_BYTES + SIZE - 1)
        ),
        other => panic!("{other}"),
    }

    file.set_len(100).unwrap();
    match open_err(&path) {
        NvramError::Truncated {
            expected, actual, ..
        } => assert_eq!((expected, actual), (HEADER_BYTES, 100)),
        other => panic!("{other}"),
    }
}

#[test]
fn damaged_headers_and_overlong_files_are_bad_headers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img.nvram");
    drop(Nvram::create_file(&path, small("feram"), false).unwrap());

    let mut longer = OpenOptions::new().append(true).open(&path).unwrap();
    longer.write_all(&[0; 8]).unwrap();
    let err = open_err(&path);
    assert!(matches!(err, NvramError::BadHeader { .. }), "{err}");
    assert!(err.to_string().contains("longer"), "{err}");

    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate((HEADER_BYTES + SIZE) as usize);
    bytes[17] ^= 0x40; // size_bytes: a header that lies about the size fails its CRC
    std::fs::write(&path, &bytes).unwrap();
    let err = open_err(&path);
    assert!(matches!(err, NvramError::BadHeader { .. }), "{err}");
    assert!(err.to_string().contains("CRC"), "{err}");
}

#[test]
fn invalid_configurations_are_refused() {
    let bad_size = |n| preset("feram").unwrap().with_size_bytes(n);
    assert!(matches!(bad_size(0), Err(NvramError::InvalidConfig(_))));
    assert!(matches!(bad_size(12), Err(NvramError::InvalidConfig(_))));
    let mut long_name = small("feram");
    long_name.name = "n".repeat(33);
    assert!(matches!(
        Nvram::new_ram(long_name),
        Err(NvramError::InvalidConfig(_))
    ));
    assert!(matches!(
        preset("mram"),
        Err(NvramError::UnknownPreset { .. })
    ));
}
