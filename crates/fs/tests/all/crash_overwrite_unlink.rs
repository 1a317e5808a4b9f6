//! An fsync'd file survives a power cut in whatever comes after it, an overwrite of a
//! synced file reads back whole (old or new, if its fsync did not return; new if it did),
//! and an unlink cut short leaves the file whole or gone. Each cut point of the workload
//! in turn, on the yaffs profile; `bench peers` runs the same workload on littlefs.

use crate::common::*;
use nandkit_flash::PowerCut;
use nandkit_fs::*;

fn body(i: u64) -> Vec<u8> {
    pattern(i, 3000 + 100 * i as usize)
}

/// What may be read back from one file after the cut.
struct Expect {
    ino: Ino,
    /// Any of these contents (more than one while a change is in flight).
    any_of: Vec<Vec<u8>>,
    /// The file may be gone (its unlink was under way).
    may_be_gone: bool,
}

fn workload(fs: &mut Fs, files: &mut Vec<Expect>) -> Result<()> {
    for i in 0..8u64 {
        let ino = fs.create(ROOT_INO, format!("f{i}").as_bytes(), file())?.ino;
        fs.write(ino, 0, &body(i))?;
        fs.fsync(ino)?;
        files.push(Expect {
            ino,
            any_of: vec![body(i)],
            may_be_gone: false,
        });
    }
    let mut again = body(0);
    again[100..200].fill(0xAB);
    files[0].any_of.push(again.clone());
    fs.write(files[0].ino, 0, &again)?;
    fs.fsync(files[0].ino)?;
    files[0].any_of = vec![again];
    files[1].may_be_gone = true;
    fs.unlink(ROOT_INO, b"f1")?;
    files.remove(1);
    fs.fsync(files[1].ino)
}

#[test]
fn synced_files_survive_a_cut_at_every_op_of_overwrite_and_unlink() {
    let dev = Dev::Tiny;
    let mut fs = format(dev);
    let base = fs.device_mut().inner_mut().state_ops();
    workload(&mut fs, &mut Vec::new()).unwrap();
    let ops = fs.device_mut().inner_mut().state_ops() - base;
    for k in 0..ops {
        let mut fs = format(dev);
        fs.device_mut().inner_mut().arm_power_cut(PowerCut::AtOp(k));
        let mut files = Vec::new();
        assert!(workload(&mut fs, &mut files).is_err(), "cut {k}");
        let mut fs = crash_remount(fs);
        for f in &files {
            let ctx = format!("cut {k} of {ops}, ino {}", f.ino);
            match read_all(&mut fs, f.ino) {
                Ok(got) => assert!(f.any_of.contains(&got), "{ctx}: not one of the versions"),
                Err(e) => assert!(f.may_be_gone, "{ctx}: {e}"),
            }
        }
        assert_fsck(&mut fs, &format!("cut {k}"));
    }
}
