//! `nandkit fsck`: check an image's file system without changing it.
//!
//! The truth is a read-only mount by full scan (what a mount after a crash sees). If the
//! image also holds a checkpoint (left by a clean unmount, and what the next ordinary mount
//! will use), that is mounted too, checked the same way, and its tree compared with the
//! scan's: a checkpoint that disagrees would hand the next mount a different file system.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use nandkit_flash::{DeviceOptions, StripedDevice};
use nandkit_fs::{FileSystem, Ino, Kind, MountMethod, SpaceAccount, ROOT_INO};
use serde::Serialize;

use crate::image::{self, Access};

/// Exit status when the image could not be checked at all (as fsck(8) uses 8).
pub const EXIT_CANNOT_CHECK: u8 = 8;

#[derive(Args)]
pub struct FsckArgs {
    /// Flash image to check.
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Print a JSON report instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    nvram: crate::nvram_args::NvramArgs,
}

#[derive(Serialize)]
struct Report {
    image: PathBuf,
    clean: bool,
    problems: Vec<String>,
    /// Not problems: what the next writable mount will finish after a crash.
    notes: Vec<String>,
    pages_checked: u64,
    objects_checked: u64,
    scan_host_ms: f64,
    /// Where the used space goes, in chunks (by the scan).
    space: SpaceAccount,
    /// "agrees", "disagrees", "absent", or "nvram" (a minv file system keeps none).
    checkpoint: &'static str,
}

pub fn main(args: FsckArgs) -> ExitCode {
    match check(&args) {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(e) => {
                        eprintln!("Error: {e}");
                        return ExitCode::from(EXIT_CANNOT_CHECK);
                    }
                }
            } else {
                print_text(&report);
            }
            if report.clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("Error: {e:?}");
            ExitCode::from(EXIT_CANNOT_CHECK)
        }
    }
}

fn print_text(r: &Report) {
    let name = r.image.display();
    if r.clean {
        println!("nandkit fsck: {name} is clean");
    } else {
        let n = r.problems.len();
        println!(
            "nandkit fsck: {name} has {n} problem{}:",
            if n == 1 { "" } else { "s" }
        );
        for p in &r.problems {
            println!("  - {p}");
        }
    }
    for n in &r.notes {
        println!("  note: {n}");
    }
    println!(
        "  scanned in {:.1} ms (host); {} pages and {} objects checked",
        r.scan_host_ms, r.pages_checked, r.objects_checked
    );
    let s = &r.space;
    println!(
        "  space: {} chunks used = {} data + {} metadata + {} reserved by fallocate",
        s.used, s.data, s.metadata, s.reserved
    );
    println!(
        "  checkpoint: {}",
        match r.checkpoint {
            "agrees" => "present, agrees with the scan",
            "disagrees" => "present, DISAGREES with the scan (see above)",
            "nvram" => "none: the metadata is in NVRAM (checked against flash above)",
            _ => "none (the last unmount was not clean, or the profile keeps none)",
        }
    );
}

fn check(args: &FsckArgs) -> anyhow::Result<Report> {
    let img = &args.image;
    image::require_exists(img)?;
    let _lock = image::lock(img, Access::Read)?;

    let start = Instant::now();
    let mut dev = image::open_device(img, DeviceOptions::default())?;
    if let Some(nvram) = args.nvram.nvram.as_deref() {
        // A minv file system: its metadata is the NVRAM's, nothing to scan on flash.
        let mut fs = image::mount_read_only_with(img, dev, false, Some(nvram))?;
        let scan_host_ms = start.elapsed().as_secs_f64() * 1e3;
        let fsck = fs.fsck();
        return Ok(Report {
            image: img.clone(),
            clean: fsck.problems.is_empty(),
            problems: fsck.problems,
            notes: fsck.notes,
            pages_checked: fsck.pages_checked,
            objects_checked: fsck.objects_checked,
            scan_host_ms,
            space: fsck.space,
            checkpoint: "nvram",
        });
    }
    let mut failed = dev.failed_chips();
    let mut scanned = image::mount_read_only(img, dev, true)?;
    let scan_host_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut fsck = scanned.fsck();
    // An array with parity that lost a chip: its data is whole, its redundancy is not.
    let parity = scanned.device().parity_report();
    if let Some(p) = parity {
        for (chip, why) in scanned.device().excluded_chips() {
            failed.push((
                chip,
                format!("it is not a complete member of the array: {why}"),
            ));
        }
        for chip in p.dead_chips {
            if !failed.iter().any(|(c, _)| *c == chip) {
                failed.push((chip, "its operations fail".into()));
            }
        }
        for (chip, why) in failed {
            fsck.notes.push(format!(
                "the array is degraded: chip {chip} has failed ({why}); its pages were \
                 checked as rebuilt from parity (`nandkit rebuild {} --chip {chip}` restores \
                 redundancy)",
                img.display()
            ));
        }
    }
    let mut problems = fsck.problems.clone();
    // The UBI of every chip (if the image has them): headers against the attached maps.
    problems.extend(
        scanned
            .device_mut()
            .ubi_check()
            .with_context(|| format!("checking UBI on {}", img.display()))?,
    );

    let dev = image::open_device(img, DeviceOptions::default())?;
    let checkpoint = match image::mount_read_only(img, dev, false) {
        Ok(mut cp) if cp.mount_method() == MountMethod::Checkpoint => {
            let before = problems.len();
            problems.extend(
                cp.fsck()
                    .problems
                    .into_iter()
                    .map(|p| format!("checkpoint mount: {p}")),
            );
            problems.extend(compare_trees(&mut scanned, &mut cp));
            if problems.len() > before {
                "disagrees"
            } else {
                "agrees"
            }
        }
        Ok(_) => "absent",
        Err(e) => {
            problems.push(format!(
                "the ordinary mount fails although a scan works: {e:#}"
            ));
            "disagrees"
        }
    };
    Ok(Report {
        image: img.clone(),
        clean: problems.is_empty(),
        problems,
        notes: fsck.notes.clone(),
        pages_checked: fsck.pages_checked,
        objects_checked: fsck.objects_checked,
        scan_host_ms,
        space: fsck.space.clone(),
        checkpoint,
    })
}

/// What a user can see of one object through the file system API.
#[derive(PartialEq, Debug)]
struct Seen {
    kind: Kind,
    perm: u32,
    uid: u32,
    gid: u32,
    nlink: u32,
    size: u64,
    rdev: u64,
    mtime: nandkit_fs::Time,
    target: Vec<u8>,
    xattrs: Vec<Vec<u8>>,
}

impl Seen {
    /// "field scan X, checkpoint Y" for each field that differs.
    fn differences(&self, cp: &Seen) -> String {
        let mut out = Vec::new();
        let mut field = |name: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{name} scan {a}, checkpoint {b}"));
            }
        };
        field("kind", format!("{:?}", self.kind), format!("{:?}", cp.kind));
        field("mode", format!("{:o}", self.perm), format!("{:o}", cp.perm));
        field("uid", self.uid.to_string(), cp.uid.to_string());
        field("gid", self.gid.to_string(), cp.gid.to_string());
        field("nlink", self.nlink.to_string(), cp.nlink.to_string());
        field("size", self.size.to_string(), cp.size.to_string());
        field("rdev", self.rdev.to_string(), cp.rdev.to_string());
        field(
            "mtime",
            format!("{:?}", self.mtime),
            format!("{:?}", cp.mtime),
        );
        let text = |v: &[u8]| String::from_utf8_lossy(v).into_owned();
        field("symlink target", text(&self.target), text(&cp.target));
        let names = |v: &[Vec<u8>]| v.iter().map(|n| text(n)).collect::<Vec<_>>().join(",");
        field("xattrs", names(&self.xattrs), names(&cp.xattrs));
        out.join("; ")
    }
}

/// Every path of the tree with what stat, readlink and listxattr say about it.
fn tree(fs: &mut FileSystem<StripedDevice>) -> Result<BTreeMap<String, Seen>, String> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(String, Ino)> = vec![(String::new(), ROOT_INO)];
    while let Some((path, ino)) = stack.pop() {
        let a = fs.getattr(ino).map_err(|e| format!("stat {path}/: {e}"))?;
        let target = if a.kind == Kind::Symlink {
            fs.readlink(ino)
                .map_err(|e| format!("readlink {path}: {e}"))?
        } else {
            Vec::new()
        };
        let mut xattrs = fs
            .listxattr(ino)
            .map_err(|e| format!("listxattr {path}: {e}"))?;
        xattrs.sort();
        if a.kind == Kind::Dir {
            for e in fs
                .readdir(ino)
                .map_err(|e| format!("readdir {path}/: {e}"))?
            {
                stack.push((
                    format!("{path}/{}", String::from_utf8_lossy(&e.name)),
                    e.ino,
                ));
            }
        }
        let seen = Seen {
            kind: a.kind,
            perm: a.perm,
            uid: a.uid,
            gid: a.gid,
            nlink: a.nlink,
            size: a.size,
            rdev: a.rdev,
            mtime: a.mtime,
            target,
            xattrs,
        };
        out.insert(if path.is_empty() { "/".into() } else { path }, seen);
    }
    Ok(out)
}

/// Differences between the scan's tree and the checkpoint's (at most 20 listed).
fn compare_trees(
    scan: &mut FileSystem<StripedDevice>,
    cp: &mut FileSystem<StripedDevice>,
) -> Vec<String> {
    let (a, b) = match (tree(scan), tree(cp)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) => return vec![format!("walking the scanned tree: {e}")],
        (_, Err(e)) => return vec![format!("walking the checkpoint's tree: {e}")],
    };
    let mut diffs = Vec::new();
    for (path, s) in &a {
        match b.get(path) {
            None => diffs.push(format!("checkpoint lacks {path}")),
            Some(c) if c != s => diffs.push(format!(
                "checkpoint differs at {path}: {}",
                s.differences(c)
            )),
            _ => {}
        }
    }
    for path in b.keys().filter(|p| !a.contains_key(*p)) {
        diffs.push(format!("checkpoint has {path}, which the scan does not"));
    }
    if diffs.len() > 20 {
        let more = diffs.len() - 20;
        diffs.truncate(20);
        diffs.push(format!("... and {more} more differences"));
    }
    diffs
}
