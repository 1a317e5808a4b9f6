//! The crash tests' loop on a peer: a small-file workload with power cut at each of its
//! flash operations in turn; after each cut the device powers up as the cut left it and is
//! mounted. Counted: cut points at which it mounts, and at which every file fsync'd before
//! the cut reads back whole.
//!
//! The device is `tiny` (8 MiB) without bit errors, so the outcome of every cut point is
//! exact; littlefs's has no factory bad blocks (nor does `tiny`'s).

use nandkit_flash::preset;
use nandkit_workloads::TargetError;

use super::peer::Peer;
use super::Row;
use crate::bench::noise;

const FILES: u64 = 8;

fn body(i: u64) -> Vec<u8> {
    noise(3000 + 100 * i as usize, i)
}

/// What may be read back from one file after the cut.
struct Expect {
    path: String,
    /// Any of these contents (more than one while a change is in flight).
    any_of: Vec<Vec<u8>>,
    /// The file may be gone (its unlink was under way).
    may_be_gone: bool,
}

/// The workload: files created, written and fsync'd one by one, then one overwritten and
/// one deleted. `files` says, when it stops, what each synced file may read back as: a
/// change whose fsync (or unlink) did not return may or may not have happened, whole.
fn workload(peer: &mut Peer, files: &mut Vec<Expect>) -> Result<(), TargetError> {
    let t = peer.target();
    for i in 0..FILES {
        let path = format!("/f{i}");
        t.create(&path)?;
        t.write(&path, 0, &body(i))?;
        t.fsync(&path)?;
        files.push(Expect {
            path,
            any_of: vec![body(i)],
            may_be_gone: false,
        });
    }
    let mut again = body(0);
    again[100..200].fill(0xAB);
    files[0].any_of.push(again.clone());
    t.write("/f0", 0, &again)?;
    t.fsync("/f0")?;
    files[0].any_of = vec![again];
    files[1].may_be_gone = true;
    t.unlink("/f1")?;
    files.remove(1);
    t.fsync("/f2")
}

/// The loop on `fs`. For littlefs, `lfs_uncorrectable` is the code an uncorrectable read
/// (a page a cut tore) returns to it: LFS_ERR_CORRUPT, which it reads past as a bad commit,
/// or LFS_ERR_IO, which it passes up.
pub fn run(
    fs: &str,
    cut_points: u64,
    lfs_uncorrectable: i32,
    nvram: &crate::bench::BenchNvramArgs,
    quiet: bool,
) -> anyhow::Result<Row> {
    let mut config = preset("tiny")?;
    config.ecc.rber_fresh = 0.0;
    config.ecc.rber_at_endurance = 0.0;
    // The whole run, uncut, to count its operations.
    let (mut peer, _) = Peer::format(&config, fs, nvram)?;
    let base = peer.state_ops();
    workload(&mut peer, &mut Vec::new()).map_err(|e| anyhow::anyhow!("uncut run: {e}"))?;
    let ops = peer.state_ops() - base;
    let points = ops.min(cut_points);
    let host = std::time::Instant::now();
    let (mut mounted, mut intact) = (0u64, 0u64);
    let mut first_failure = None;
    for k in 0..points {
        let (mut peer, _) = Peer::format(&config, fs, nvram)?;
        peer.arm_power_cut(k);
        let mut files = Vec::new();
        let _ = workload(&mut peer, &mut files);
        if !peer.power_lost() {
            continue;
        }
        let mut peer = match peer.crash_and_mount(lfs_uncorrectable) {
            Ok(p) => p,
            Err(e) => {
                first_failure.get_or_insert(format!("cut {k}: mount failed: {e:#}"));
                continue;
            }
        };
        mounted += 1;
        let mut bad = Vec::new();
        for f in &files {
            match read_back(&mut peer, &f.path) {
                Some(got) if f.any_of.contains(&got) => {}
                None if f.may_be_gone => {}
                Some(got) => bad.push(format!(
                    "{} ({} bytes, not a version of it)",
                    f.path,
                    got.len()
                )),
                None => bad.push(format!("{} (gone)", f.path)),
            }
        }
        if bad.is_empty() {
            intact += 1;
        } else {
            first_failure.get_or_insert(format!(
                "cut {k}: fsync'd but not whole: {}",
                bad.join(", ")
            ));
        }
    }
    if !quiet {
        eprintln!("bench peers: power cuts on {fs}: {points} cut points");
    }
    let workload = if fs == "littlefs" && lfs_uncorrectable == nandkit_littlefs::LFS_ERR_IO {
        "power-cut (ecc eio)"
    } else {
        "power-cut"
    };
    let outcome = format!(
        "{mounted} of {points} cut points mount, fsync'd data whole at {intact}{}",
        first_failure
            .map(|f| format!("; first failure: {f}"))
            .unwrap_or_default()
    );
    Ok(Row {
        host_ms: host.elapsed().as_secs_f64() * 1e3,
        ..Row::empty(fs, workload, outcome)
    })
}

/// The file's bytes, read through the peer; None if it does not exist or cannot be read.
fn read_back(peer: &mut Peer, path: &str) -> Option<Vec<u8>> {
    match peer {
        Peer::Littlefs(l) => {
            let size = l.size(path).ok()? as usize;
            let mut buf = vec![0u8; size];
            let n = l.read(path, 0, &mut buf).ok()?;
            buf.truncate(n);
            l.sync(path).ok()?;
            Some(buf)
        }
        Peer::Nandkit(fs) => {
            let ino = fs.resolve(path).ok()?;
            let size = fs.getattr(ino).ok()?.size as usize;
            let mut buf = vec![0u8; size];
            let n = fs.read(ino, 0, &mut buf).ok()?;
            buf.truncate(n);
            Some(buf)
        }
    }
}
