//! MiNV (minvfs-nvram-metadata.txt): Table 2 (the NVRAM space model), Figure 8 (mount
//! time against utilization), Table 3 and Figures 9-10 (the synthetic create/delete
//! workload), Figure 11 (the TTFS workloads).

use super::{f, is, over, rows, words, Claim, Data, Experiment, Paper};
use crate::reproduce::plot::{Figure, Series};
use crate::reproduce::verdict::{Effect, Tolerance};
use crate::reproduce::Scale;

pub const MOUNT_DATASHEET: Experiment = Experiment {
    id: "minv-mount-datasheet",
    paper: Paper::Minv,
    what: "Figure 8's sweep of our preset: yaffs's scan on the same chip at its datasheet \
           times (15 us reads) instead of the MTD-level ones (200 us)",
    args: |s, seed| {
        let base = match s {
            Scale::Smoke => {
                "bench minv-mount -g smallblock-64m --device-size 4MiB --utilizations 0,1 \
                 --file-size 256KiB"
            }
            Scale::Quick | Scale::Full => {
                "bench minv-mount -g smallblock-64m --utilizations 0,0.5,1"
            }
        };
        words(&format!(
            "{base} --profiles yaffs,yaffs1,minv --seed {seed} --json"
        ))
    },
    expected: [0.1, 1.8, 1.8],
};

pub const MOUNT: Experiment = Experiment {
    id: "minv-mount",
    paper: Paper::Minv,
    what: "Figure 8: mount time against utilization, yaffs (scan, checkpoint), yaffs1 \
           (scan) and minv, fresh and aged layouts, on the paper's 64 MB chip",
    args: |s, seed| {
        let base = match s {
            Scale::Smoke => {
                "bench minv-mount --device-size 4MiB --utilizations 0,1 --file-size 256KiB"
            }
            Scale::Quick => "bench minv-mount --utilizations 0,0.25,0.5,0.75,1",
            Scale::Full => "bench minv-mount",
        };
        words(&format!(
            "{base} --profiles yaffs,yaffs1,minv --seed {seed} --json"
        ))
    },
    expected: [0.1, 1.4, 1.8],
};

pub const MOUNT_FILES: Experiment = Experiment {
    id: "minv-mount-files",
    paper: Paper::Minv,
    what: "Section 4.2.2 by file count: mounts after a clean unmount and after a power cut, \
           10 to 10,000 files of 256 bytes, yaffs against minv, with the heap each holds \
           after listing everything",
    args: |s, seed| {
        let files = match s {
            Scale::Smoke => "10,100",
            Scale::Quick | Scale::Full => "10,100,1000,10000",
        };
        words(&format!(
            "bench minv-mount --files {files} --profiles yaffs,minv --seed {seed} --json"
        ))
    },
    expected: [0.1, 0.5, 0.5],
};

pub const TTFS: Experiment = Experiment {
    id: "minv-ttfs",
    paper: Paper::Minv,
    what: "Figure 11: total time of the TTFS workloads (fax, phone, recorder), yaffs, \
           yaffs1 and minv",
    args: |s, seed| {
        let base = match s {
            Scale::Smoke => "bench ttfs --device-size 8MiB --profiles yaffs,yaffs1,minv",
            Scale::Quick | Scale::Full => "bench ttfs --profiles yaffs,yaffs1,minv",
        };
        words(&format!("{base} --seed {seed} --json"))
    },
    expected: [0.1, 0.7, 0.7],
};

pub const SYNTHETIC: Experiment = Experiment {
    id: "minv-synthetic",
    paper: Paper::Minv,
    what: "Table 3, Figures 9-10: files of one size created then deleted, five rounds, \
           filling 32 MB; flash operations and time, yaffs, yaffs1 and minv",
    args: |s, _| {
        words(match s {
            Scale::Smoke => {
                "bench minv-synthetic --device-size 2MiB --sizes 2KiB,128KiB --rounds 1 \
                 --profiles yaffs,yaffs1,minv --json"
            }
            Scale::Quick => {
                "bench minv-synthetic --sizes 512,8KiB,128KiB,2MiB,8MiB \
                 --profiles yaffs,yaffs1,minv --json"
            }
            Scale::Full => "bench minv-synthetic --profiles yaffs,yaffs1,minv --json",
        })
    },
    expected: [0.1, 6.0, 11.0],
};

pub const SPACE: Experiment = Experiment {
    id: "minv-space",
    paper: Paper::Minv,
    what: "Table 2: NVRAM needed by equations 1-4 with the paper's structure sizes, 32 MB \
           of flash",
    args: |_, _| words("model nvram-space --flash 32MiB --grid --paper-constants --json"),
    expected: [0.1, 0.1, 0.1],
};

pub const CAPACITY: Experiment = Experiment {
    id: "minv-capacity",
    paper: Paper::Minv,
    what: "Figure 4: NVRAM needed against flash capacity, worst, best, MP3 and photo cases \
           (the paper's structure sizes)",
    args: |_, _| words("model nvram-space --capacity-sweep --paper-constants --json"),
    expected: [0.1, 0.1, 0.1],
};

pub const MEASURED: Experiment = Experiment {
    id: "minv-space-measured",
    paper: Paper::Minv,
    what: "Figure 7: NVRAM bytes in use on real minv images, filled with files of one size, \
           against the space model with our structure sizes",
    args: |s, _| {
        words(match s {
            Scale::Smoke => "bench minv-space --sizes 4KiB,1MiB --device-size 4MiB --json",
            Scale::Quick | Scale::Full => "bench minv-space --json",
        })
    },
    expected: [0.2, 1.0, 1.0],
};

pub const MIX: Experiment = Experiment {
    id: "minv-mix",
    paper: Paper::Minv,
    what: "Figure 5: NVRAM needed for 1 GB of flash as 0.5 KB metadata files take a share \
           of it and MP3 or photo files the rest (the paper's structure sizes)",
    args: |_, _| words("model nvram-space --flash 1GiB --mix-sweep --paper-constants --json"),
    expected: [0.3, 0.3, 0.3],
};

/// Figure 5's text: 1% metadata files on 1 GB, with MP3 and with photo files (KB).
const FIGURE_5_1PC: [(&str, f64); 2] = [("mp3", 15667.0), ("photo", 16223.0)];

/// Figure 4's table at 1 GB (KB): best, MP3, photo.
const FIGURE_4_1GB: [(&str, f64); 3] = [("best", 9987.0), ("mp3", 10022.0), ("photo", 10584.0)];

/// The paper's Table 2 (KB), rows by file size 512 B x 4^k, columns by count 4^k; 0 blank.
const TABLE_2: [[u64; 9]; 9] = [
    [35, 36, 40, 53, 105, 315, 1155, 4515, 17955],
    [35, 36, 40, 53, 105, 315, 1155, 4515, 0],
    [35, 36, 40, 53, 105, 315, 1155, 0, 0],
    [36, 37, 42, 61, 140, 455, 0, 0, 0],
    [36, 40, 55, 114, 350, 0, 0, 0, 0],
    [40, 53, 107, 324, 0, 0, 0, 0, 0],
    [53, 106, 317, 0, 0, 0, 0, 0, 0],
    [105, 316, 0, 0, 0, 0, 0, 0, 0],
    [315, 0, 0, 0, 0, 0, 0, 0, 0],
];

/// The TTFS workloads and the paper's "faster by" (Figure 11, section 4.2.4).
const TTFS_PAPER: [(&str, f64); 3] = [("fax", 152.0), ("phone", 559.0), ("recorder", 600.0)];

/// How far mount times spread, (max / min - 1) in percent (None: no mount measured).
fn mount_spread(rows: &[&serde_json::Value]) -> Option<f64> {
    let t: Vec<f64> = rows.iter().filter_map(|r| f(r, "mount_sim_us")).collect();
    let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = t.iter().copied().fold(0.0, f64::max);
    (!t.is_empty()).then(|| (hi / lo - 1.0) * 100.0)
}

fn mount_rows<'a>(
    d: &'a Data,
    layout: &str,
    profile: &str,
    method: &str,
) -> Vec<&'a serde_json::Value> {
    rows(d.get("minv-mount"))
        .into_iter()
        .filter(|r| is(r, "layout", layout) && is(r, "profile", profile) && is(r, "method", method))
        .collect()
}

/// (mount at the lowest utilization, at the highest), in us.
fn ends(rows: &[&serde_json::Value]) -> Option<(f64, f64)> {
    let lo = rows.first().and_then(|r| f(r, "mount_sim_us"))?;
    let hi = rows.last().and_then(|r| f(r, "mount_sim_us"))?;
    Some((lo, hi))
}

pub fn claims(d: &Data) -> Vec<Claim> {
    let mut out = Vec::new();
    // Table 2: every cell.
    let cells = rows(d.get("minv-space"));
    let table = (!cells.is_empty()).then(|| {
        let mut exact = 0u32;
        let mut total = 0u32;
        for (i, row) in TABLE_2.iter().enumerate() {
            for (j, &want) in row.iter().enumerate() {
                let got = cells
                    .get(i * 9 + j)
                    .and_then(|c| c.get("kib"))
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                total += 1;
                exact += u32::from(got == want);
            }
        }
        f64::from(exact) / f64::from(total) * 100.0
    });
    out.push(
        Claim::figure(
            Paper::Minv,
            "Table 2: NVRAM needed, every cell (equations 1-4, paper's sizes)",
            100.0,
            table,
            "% cells",
        )
        .tolerance(
            Tolerance::Absolute(0.0),
            "closed-form equations with the paper's sizes: every cell exact",
        )
        .note("nandkit model nvram-space --grid --paper-constants, compared cell by cell"),
    );
    // Figure 4 at 1 GB.
    for (case, paper) in FIGURE_4_1GB {
        let ours = rows(d.get("minv-capacity"))
            .into_iter()
            .find(|r| is(r, "case", case) && f(r, "flash_bytes") == Some(1073741824.0))
            .and_then(|r| f(r, "kib"));
        out.push(
            Claim::figure(
                Paper::Minv,
                &format!("Figure 4: NVRAM needed for 1 GB of flash, {case} case"),
                paper,
                ours,
                "KB",
            )
            .tolerance(
                Tolerance::Absolute(1.0),
                "closed-form equations: exact but for the paper's rounding to whole KB",
            )
            .note(if case == "photo" {
                "1 KB below the paper with every reading of '330KB' we tried (337,920-byte \
                 files here): a rounding we cannot see in the text"
            } else {
                "equations 1-4 with the paper's structure sizes"
            }),
        );
    }
    // Figure 5 at 1% metadata.
    for (content, paper) in FIGURE_5_1PC {
        let ours = rows(d.get("minv-mix"))
            .into_iter()
            .find(|r| is(r, "content", content) && f(r, "metadata_percent") == Some(1.0))
            .and_then(|r| f(r, "kib"));
        out.push(
            Claim::figure(
                Paper::Minv,
                &format!(
                    "Figure 5: 1 GB, 1% of it 0.5 KB metadata files, the rest {content} files"
                ),
                paper,
                ours,
                "KB",
            )
            .tolerance(
                Tolerance::Relative(0.01),
                "the paper gives its file counts only roughly (\"approximately 20,000 \
                 metadata files along with 250 content files\")",
            )
            .note(
                "ours take exactly 1% of 1 GiB in 512-byte files and fill the rest, so the \
                 two counts differ slightly",
            ),
        );
    }
    // Figure 7: model against measured, every size.
    let m = rows(d.get("minv-space-measured"));
    let worst = (!m.is_empty()).then(|| {
        m.iter()
            .filter_map(|r| Some((f(r, "measured_bytes")? / f(r, "model_bytes")? - 1.0).abs()))
            .fold(0.0, f64::max)
            * 100.0
    });
    out.push(
        Claim::figure(
            Paper::Minv,
            "Figure 7: the space model gives the NVRAM a real image uses (worst file size)",
            0.0,
            worst,
            "% off",
        )
        .tolerance(
            Tolerance::Absolute(1.0),
            "the paper's model and experiment lines overlap on a log scale, where 1% cannot \
             be seen",
        )
        .note("ours are equal to the byte, with our structure sizes"),
    );
    // Figure 8.
    let minv = mount_rows(d, "aged", "minv", "nvram");
    let crash = mount_rows(d, "aged", "minv", "after-crash");
    for (after, rows, reads) in [
        (
            "a clean unmount",
            &minv,
            "the saved state's head; objects are read from NVRAM on first use, through the \
             index it saved",
        ),
        (
            "a power cut",
            &crash,
            "the log region's counts; objects are read from NVRAM on first use, through the \
             tree in place (hash chains, child lists)",
        ),
    ] {
        out.push(
            Claim::figure(
                Paper::Minv,
                &format!(
                    "Figure 8: minv mount time does not grow with utilization, after {after} \
                     (aged layout, (max / min - 1) over 0..100%)"
                ),
                0.0,
                mount_spread(rows),
                "% spread",
            )
            .tolerance(
                Tolerance::Absolute(10.0),
                "constant, as the paper's 67 us at every utilization: 10% covers a mount \
                 that reads a little more state for more objects",
            )
            .note(&format!(
                "ours reads the block table, the heap bitmap, three flash pages in the \
                 anchor blocks (the file system record and the NVRAM generation the flash \
                 records, which refuses an older copy of the NVRAM) and {reads}"
            )),
        );
    }
    out.push(
        Claim::figure(
            Paper::Minv,
            "Figure 8: minv mount time (aged layout, 100% utilization)",
            67.0,
            ends(&minv).map(|(_, hi)| hi),
            "us",
        )
        .note(MINV_MOUNT_NOTE),
    );
    out.extend(file_count_claims(d));
    let scan = mount_rows(d, "aged", "yaffs", "scan");
    let scan1 = mount_rows(d, "aged", "yaffs1", "scan");
    let datasheet_of = |p: &str| {
        ends(
            &rows(d.get("minv-mount-datasheet"))
                .into_iter()
                .filter(|r| {
                    is(r, "layout", "aged") && is(r, "profile", p) && is(r, "method", "scan")
                })
                .collect::<Vec<_>>(),
        )
    };
    let datasheet = datasheet_of("yaffs");
    let datasheet1 = datasheet_of("yaffs1");
    out.push(
        Claim::figure(
            Paper::Minv,
            "Figure 8: yaffs scan mount time at 100% utilization (aged layout)",
            3.0,
            ends(&scan).map(|(_, hi)| hi / 1e6),
            "s",
        )
        .beside("yaffs1", ends(&scan1).map(|(_, hi)| hi / 1e6))
        .note(&format!(
            "{YAFFS_SCAN_NOTE} yaffs1 reads the tags of every page, as the paper's YAFFS: at \
             this preset's 200 us a read that is {} s at 100%; at the datasheet's 15 us reads \
             (minv-mount-datasheet) {} s, the paper's 3 s lying between.",
            ends(&scan1).map_or("-".into(), |(_, hi)| format!("{:.1}", hi / 1e6)),
            datasheet1.map_or("-".into(), |(_, hi)| format!("{:.2}", hi / 1e6)),
        )),
    );
    out.push(
        Claim::figure(
            Paper::Minv,
            "Figure 8: yaffs scan mount time grows with utilization (the share of the 100% \
             mount that the growth from 0% makes up, aged layout)",
            1.0,
            ends(&scan).map(|(lo, hi)| (hi - lo) / hi),
            "of 100%",
        )
        .effect(Effect::around(0.0, 0.02))
        .beside("yaffs1", ends(&scan1).map(|(lo, hi)| (hi - lo) / hi))
        .note(&format!(
            "the paper: linear from near 0 s, so the growth is all of its 3 s. \
             {YAFFS_SCAN_NOTE} The preset drives the shape: at the datasheet's 15 us reads \
             (experiment minv-mount-datasheet) our scan takes {} ms at 0% and {} ms at 100%.",
            datasheet.map_or("-".into(), |(lo, _)| format!("{:.0}", lo / 1e3)),
            datasheet.map_or("-".into(), |(_, hi)| format!("{:.0}", hi / 1e3)),
        )),
    );
    out.push(
        Claim::ratio(
            Paper::Minv,
            "Figure 8: minv mounts faster than yaffs's scan at 100% utilization",
            3.0e6 / 67.0,
            match (ends(&scan), ends(&minv)) {
                (Some((_, s)), Some((_, m))) => Some(s / m),
                _ => None,
            },
            "x",
        )
        .beside(
            "yaffs1",
            match (ends(&scan1), ends(&minv)) {
                (Some((_, s)), Some((_, m))) => Some(s / m),
                _ => None,
            },
        )
        .note("the paper: slightly over 3 s against 67 us; ours: both differences above"),
    );
    // Table 3, Figures 9-10.
    let syn = rows(d.get("minv-synthetic"));
    let minv_syn: Vec<_> = syn.iter().filter(|r| is(r, "profile", "minv")).collect();
    let reads = (!minv_syn.is_empty()).then(|| {
        minv_syn
            .iter()
            .filter_map(|r| f(r, "flash_reads"))
            .sum::<f64>()
    });
    out.push(
        Claim::figure(
            Paper::Minv,
            "Table 3: minv reads nothing on flash in the create/delete workload",
            0.0,
            reads,
            "reads",
        )
        .tolerance(Tolerance::Absolute(0.0), "none is the claim")
        .note("all metadata is in NVRAM; deletes erase without reading"),
    );
    // yaffs time / minv time at each file size (and yaffs1's, beside).
    let speedups_over = |base: &str| -> Vec<f64> {
        minv_syn
            .iter()
            .filter_map(|m| {
                let size = f(m, "file_size")?;
                let y = syn
                    .iter()
                    .find(|r| is(r, "profile", base) && f(r, "file_size") == Some(size))?;
                Some(f(y, "sim_s")? / f(m, "sim_s")?)
            })
            .collect()
    };
    let speedups = speedups_over("yaffs");
    let speedups1 = speedups_over("yaffs1");
    let some = |x: f64| (!speedups.is_empty()).then_some(x);
    let some1 = |x: f64| (!speedups1.is_empty()).then_some(x);
    let least = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let most = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    out.push(
        Claim::direction(
            Paper::Minv,
            "Figure 10: minv is faster than yaffs at every file size (least yaffs / minv \
             time)",
            Effect::above(1.0, 0.0),
            some(least(&speedups)),
            "x",
        )
        .beside("yaffs1", some1(least(&speedups1)))
        .note(
            "the paper: \"MiNVFS takes shorter time than YAFFS in all cases\"; at the largest \
             files both do the same data work, so any margin counts",
        ),
    );
    out.push(
        Claim::ratio(
            Paper::Minv,
            "Figure 10: minv's largest gain over yaffs (yaffs / minv time; the paper: 156% \
             faster)",
            2.56,
            some(most(&speedups)),
            "x",
        )
        .beside("yaffs1", some1(most(&speedups1)))
        .note(SYNTHETIC_NOTE),
    );
    out.push(
        Claim::ratio(
            Paper::Minv,
            "Figure 10: minv's mean gain over yaffs across file sizes (yaffs / minv time; the \
             paper: 81% faster on average)",
            1.81,
            some(mean(&speedups)),
            "x",
        )
        .beside("yaffs1", some1(mean(&speedups1)))
        .note(SYNTHETIC_NOTE),
    );
    // Mean blocks left to erase over the file sizes from `min_size` up.
    let owed = |p: &str, min_size: f64| {
        let v: Vec<f64> = syn
            .iter()
            .filter(|r| is(r, "profile", p))
            .filter(|r| f(r, "file_size").is_some_and(|s| s >= min_size))
            .filter_map(|r| f(r, "blocks_left_to_erase"))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    out.push(
        Claim::figure(
            Paper::Minv,
            "Figure 9: minv leaves no block unerased after the deletes (mean over file sizes)",
            0.0,
            owed("minv", 0.0),
            "blocks",
        )
        .tolerance(Tolerance::Absolute(0.0), "none is the claim")
        .note("minv erases a deleted file's blocks at once"),
    );
    out.push(
        Claim::figure(
            Paper::Minv,
            "Figure 9: yaffs leaves around 2,000 blocks unerased after the deletes (mean over \
             files of 128 KB and more)",
            2000.0,
            owed("yaffs", 131072.0),
            "blocks",
        )
        .note(
            "yaffs marks a deleted file's pages invalid and leaves the blocks for its cleaner; \
             the paper's sentence is about files of 128 KB and more",
        ),
    );
    // Figure 11: the paper prints the gains as "outperforms by" percentages.
    for (w, paper) in TTFS_PAPER {
        let t = rows(d.get("minv-ttfs"));
        let time = |p: &str| {
            t.iter()
                .find(|r| is(r, "workload", w) && is(r, "profile", p))
                .and_then(|r| f(r, "sim_s"))
        };
        out.push(
            Claim::ratio(
                Paper::Minv,
                &format!(
                    "Figure 11: minv runs the {w} workload faster than yaffs (yaffs / minv \
                     time; the paper: {paper:.0}% faster)"
                ),
                1.0 + paper / 100.0,
                over(time("yaffs"), time("minv")),
                "x",
            )
            .beside("yaffs1", over(time("yaffs1"), time("minv")))
            .note(TTFS_NOTE),
        );
    }
    out.extend(energy_claims(d));
    out
}

/// Section 4.2.2's "constant" mount, by file count: after a clean unmount and after a
/// power cut (the paper's structures are always valid, so it makes no difference there).
fn file_count_claims(d: &Data) -> Vec<Claim> {
    let of = |profile: &str, method: &str| -> Vec<&serde_json::Value> {
        rows(d.get("minv-mount-files"))
            .into_iter()
            .filter(|r| is(r, "profile", profile) && is(r, "method", method))
            .collect()
    };
    let at = |v: &[&serde_json::Value], k: &str| {
        v.iter()
            .map(|r| {
                format!(
                    "{} files {}",
                    f(r, "files").unwrap_or(0.0),
                    f(r, k).map_or("-".into(), |x| format!("{x:.0}"))
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let clean = of("minv", "nvram");
    let crash = of("minv", "after-crash");
    let most = |p: &str, m: &str| {
        of(p, m)
            .iter()
            .filter_map(|r| Some((f(r, "files")?, f(r, "dram_bytes")?)))
            .fold(None, |a: Option<(f64, f64)>, x| match a {
                Some(a) if a.0 >= x.0 => Some(a),
                _ => Some(x),
            })
            .map(|(_, b)| b)
    };
    let flat = |after: &str, rows: &[&serde_json::Value], why: &str| {
        Claim::figure(
            Paper::Minv,
            &format!(
                "Section 4.2.2: minv mount time does not grow with the files stored, after \
                 {after} ((max / min - 1) over 10 to 10,000 files)"
            ),
            0.0,
            mount_spread(rows),
            "% spread",
        )
        .tolerance(
            Tolerance::Absolute(10.0),
            "constant, as the paper's 67 us: 10% covers a mount that reads a little more \
             state for more objects",
        )
        .note(&format!("mount us: {}{why}", at(rows, "mount_sim_us")))
    };
    vec![
        flat("a clean unmount", &clean, ""),
        flat(
            "a power cut",
            &crash,
            ". The paper's structures are always valid; so are ours: the manager's free \
             space (a bitmap), which pages are published (2 bits a page), the tree (each \
             directory's children, link counts, attribute sets) and the counts a mount \
             needs at once (objects, files with fallocated chunks, the version mark) are \
             exact in NVRAM through any cut, checked by fsck at every cut of the sweeps; the \
             mount reads the root, and any other object when a call first reaches it, in \
             place (a file with fallocated chunks makes it walk every inode: their \
             reservations count from the mount on)",
        ),
        Claim::direction(
            Paper::Minv,
            "Section 2: NVRAM holds the metadata YAFFS keeps in DRAM, so minv needs no more \
             DRAM than yaffs (yaffs / minv heap after listing 10,000 files)",
            // "No more": a tie (within 2%) holds too.
            Effect::above(0.98, 0.0),
            over(most("yaffs", "scan"), most("minv", "nvram")),
            "x",
        )
        .note(&format!(
            "heap after mounting and listing everything, bytes: yaffs {}, minv {}; minv \
             keeps of its NVRAM structures only where each object's inode and offset \
             structures are, and reads the rest in place; both keep the file system's own \
             objects (names, attributes, chunk maps) in DRAM",
            most("yaffs", "scan").map_or("-".into(), |x| format!("{x:.0}")),
            most("minv", "nvram").map_or("-".into(), |x| format!("{x:.0}"))
        )),
    ]
}

/// Energy, the paper's future work (sec. 5): does minv's time gain carry over to joules
/// once standby power runs through the workloads' idle time?
fn energy_claims(d: &Data) -> Vec<Claim> {
    let t = rows(d.get("minv-ttfs"));
    let of = |w: &str, p: &str, k: &str| {
        t.iter()
            .find(|r| is(r, "workload", w) && is(r, "profile", p))
            .and_then(|r| f(r, k))
    };
    let ratio = |w: &str, k: &str| over(of(w, "yaffs", k), of(w, "minv", k));
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
    ["phone"]
        .iter()
        .map(|&w| {
            Claim::direction(
                Paper::Minv,
                &format!(
                    "Section 5 (future work, energy): minv's time gain carries over to the \
                     energy of the {w} workload with its idle time (yaffs / minv joules, \
                     standby included)"
                ),
                Effect::above(1.0, 0.02),
                ratio(w, "total_j"),
                "x",
            )
            .beside(
                "yaffs1",
                over(of(w, "yaffs1", "total_j"), of(w, "minv", "total_j")),
            )
            .note(&format!(
                "the paper measures no energy. Ours: time {}, the operations' energy {} \
                 (it follows time), with standby power over the {:.0} s of idle time the \
                 workload has between requests {}: minv's NVRAM draws standby power all \
                 the while (FeRAM's low-current mode, 66 uW per MiB, typical datasheet \
                 class; bench ttfs --nvram-uw-per-mib sets it), more than the DRAM it \
                 saves ({:.0} against {:.0} KiB held at the end). See the figure \
                 minv-energy for every workload",
                x(ratio(w, "sim_s")),
                x(ratio(w, "energy_j")),
                of(w, "minv", "idle_s").unwrap_or(f64::NAN),
                x(ratio(w, "total_j")),
                of(w, "minv", "dram_bytes").unwrap_or(f64::NAN) / 1024.0,
                of(w, "yaffs", "dram_bytes").unwrap_or(f64::NAN) / 1024.0,
            ))
        })
        .collect()
}

/// Why our minv mount takes longer than the paper's 67 us.
const MINV_MOUNT_NOTE: &str = "ours reads the block information (16 bytes a block, as the \
     paper's: 64 KiB on 64 MiB), the heap's allocation bitmap (48 KiB for 12 MiB of FeRAM) and \
     the saved state's head or, after a power cut, the log region's counts (objects are read \
     from NVRAM on first use), and, on flash, the anchor blocks: the file system record, to \
     check that the NVRAM belongs to this flash, and the NVRAM generation the flash records, \
     to refuse an older copy of the NVRAM (3 reads, and a writable mount then programs one \
     anchor page: 1,431 us more than the record's one read before, at 64 MiB). Measured with --device-size before the generation: \
     1,836, 1,387 and 1,162 us at 64, 32 and 16 MiB (100% utilization), about 936 us fixed \
     (200 us the record's read, 676 us the bitmap) plus 0.22 us a block (two FeRAM words at \
     110 ns); the fixed part beside those, about 60 us, is near the paper's 67 us";

/// Why our yaffs scan starts high and ends lower than the paper's.
const YAFFS_SCAN_NOTE: &str = "our yaffs reads about one page per block whatever the \
     utilization (block summaries: 4,088 reads at 0%, 4,212 at 100%), and on this MTD-level \
     preset a read costs a flat 200 us, empty block or not, so it starts at 0.82 s; the \
     paper's YAFFS read every page's spare area.";

/// Why minv's gains on the synthetic workload differ.
const SYNTHETIC_NOTE: &str = "ours is largest at the smallest files, as the paper's, but far \
     larger there: at 512 B yaffs does 7.18 programs a file (1 data, 3 headers as the paper \
     counts, about 3 cleaning copies) against minv's 1.00, and simulated time has no per-file \
     CPU cost to dilute it; near 2% from 512 KB up. Quick runs 5 of the 9 sizes, which moves \
     the mean (over all 9, bench minv-synthetic's default: 129% faster)";

/// Why our TTFS gains are smaller.
const TTFS_NOTE: &str = "ours by less: the only extra flash work our yaffs does per synced \
     append is about one header page (measured: recorder 2.07 programs a fsync against minv's \
     1.00, phone 2.33 an event against 1.25), both pay the same read-backs of a partial last \
     page, and fax is almost all data (yaffs adds 5% programs). Not driven by size or \
     geometry: --device-size 16MiB gives 1.05/1.69/1.90, -g smallblock-64m 1.05/1.72/1.91. \
     The paper's gain at fax cannot come from flash metadata: it is software cost, which \
     simulated time lacks";

pub fn figures(d: &Data) -> Vec<Figure> {
    let mut out = Vec::new();
    let m = rows(d.get("minv-mount"));
    if !m.is_empty() {
        let series = |layout: &str, profile: &str, method: &str, name: &str| Series {
            name: name.into(),
            points: m
                .iter()
                .filter(|r| {
                    is(r, "layout", layout) && is(r, "profile", profile) && is(r, "method", method)
                })
                .filter_map(|r| Some((f(r, "utilization")? * 100.0, f(r, "mount_sim_us")? / 1e3)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "minv-fig8-mount".into(),
            paper: "minv".into(),
            title: "MiNV Figure 8: mount time against utilization".into(),
            x_label: "Utilization (%)".into(),
            y_label: "Mount time (ms, log)".into(),
            log_x: false,
            log_y: true,
            series: vec![
                series("aged", "yaffs1", "scan", "yaffs1 scan (aged)"),
                series("aged", "yaffs", "scan", "yaffs scan (aged)"),
                series("fresh", "yaffs", "scan", "yaffs scan (fresh)"),
                series("aged", "yaffs", "checkpoint", "yaffs checkpoint (aged)"),
                series("aged", "minv", "nvram", "minv (aged)"),
                series("fresh", "minv", "nvram", "minv (fresh)"),
            ],
        });
    }
    let cap = rows(d.get("minv-capacity"));
    if !cap.is_empty() {
        let series = |case: &str, name: &str| Series {
            name: name.into(),
            points: cap
                .iter()
                .filter(|r| is(r, "case", case))
                .filter_map(|r| Some((f(r, "flash_bytes")? / 1048576.0, f(r, "kib")?)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "minv-fig4-capacity".into(),
            paper: "minv".into(),
            title: "MiNV Figure 4: NVRAM needed against flash capacity".into(),
            x_label: "Flash capacity (MB, log)".into(),
            y_label: "NVRAM (KB, log)".into(),
            log_x: true,
            log_y: true,
            series: vec![
                series("worst", "worst case (0.5 KB files)"),
                series("photo", "photo case (330 KB)"),
                series("mp3", "MP3 case (4 MB)"),
                series("best", "best case (one file)"),
            ],
        });
    }
    let mix = rows(d.get("minv-mix"));
    if !mix.is_empty() {
        let series = |content: &str, name: &str| Series {
            name: name.into(),
            points: mix
                .iter()
                .filter(|r| is(r, "content", content))
                .filter_map(|r| Some((f(r, "metadata_percent")?, f(r, "kib")?)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "minv-fig5-mix".into(),
            paper: "minv".into(),
            title: "MiNV Figure 5: 1 GB of flash, metadata and content files mixed".into(),
            x_label: "Flash taken by 0.5 KB metadata files (%)".into(),
            y_label: "NVRAM (KB)".into(),
            log_x: false,
            log_y: false,
            series: vec![
                series("mp3", "4 MB MP3 content"),
                series("photo", "330 KB photo content"),
            ],
        });
    }
    let m = rows(d.get("minv-space-measured"));
    if !m.is_empty() {
        let series = |k: &str, name: &str| Series {
            name: name.into(),
            points: m
                .iter()
                .filter_map(|r| Some((f(r, "file_size")? / 1024.0, f(r, k)? / 1024.0)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "minv-fig7-model-measured".into(),
            paper: "minv".into(),
            title: "MiNV Figure 7: NVRAM needed, model and measured (32 MB of flash)".into(),
            x_label: "File size (KB, log)".into(),
            y_label: "NVRAM (KB, log)".into(),
            log_x: true,
            log_y: true,
            series: vec![
                series("model_bytes", "model"),
                series("measured_bytes", "measured (experiment)"),
            ],
        });
    }
    let syn = rows(d.get("minv-synthetic"));
    if !syn.is_empty() {
        let series = |p: &str, k: &str, scale: f64| Series {
            name: p.to_string(),
            points: syn
                .iter()
                .filter(|r| is(r, "profile", p))
                .filter_map(|r| Some((f(r, "file_size")? / 1024.0, f(r, k)? * scale)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "minv-fig9-synthetic-time".into(),
            paper: "minv".into(),
            title: "MiNV Figures 9-10: create/delete workload, total time".into(),
            x_label: "File size (KB, log)".into(),
            y_label: "Total time (s)".into(),
            log_x: true,
            log_y: false,
            series: vec![
                series("yaffs1", "sim_s", 1.0),
                series("yaffs", "sim_s", 1.0),
                series("minv", "sim_s", 1.0),
            ],
        });
        out.push(Figure {
            categories: Vec::new(),
            id: "minv-fig9-synthetic-programs".into(),
            paper: "minv".into(),
            title: "MiNV Table 3: create/delete workload, flash programs".into(),
            x_label: "File size (KB, log)".into(),
            y_label: "Flash page programs (thousands)".into(),
            log_x: true,
            log_y: false,
            series: vec![
                series("yaffs1", "flash_programs", 1e-3),
                series("yaffs", "flash_programs", 1e-3),
                series("minv", "flash_programs", 1e-3),
            ],
        });
    }
    let t = rows(d.get("minv-ttfs"));
    if !t.is_empty() {
        let series = |p: &str| Series {
            name: p.into(),
            points: TTFS_PAPER
                .iter()
                .enumerate()
                .filter_map(|(i, (w, _))| {
                    let r = t
                        .iter()
                        .find(|r| is(r, "workload", w) && is(r, "profile", p))?;
                    Some((i as f64, f(r, "sim_s")?))
                })
                .collect(),
        };
        out.push(Figure {
            categories: TTFS_PAPER.iter().map(|(w, _)| (*w).to_string()).collect(),
            id: "minv-fig11-ttfs".into(),
            paper: "minv".into(),
            title: "MiNV Figure 11: TTFS workloads, total time".into(),
            x_label: "Workload".into(),
            y_label: "Total time (s)".into(),
            log_x: false,
            log_y: false,
            series: vec![series("yaffs1"), series("yaffs"), series("minv")],
        });
        // Energy, the paper's future work: yaffs over minv for time, for the operations'
        // energy (which follows time) and for the energy with standby power over the
        // workloads' idle time (which need not).
        let ratio = |k: &'static str, name: &str| Series {
            name: name.into(),
            points: TTFS_PAPER
                .iter()
                .enumerate()
                .filter_map(|(i, (w, _))| {
                    let of = |p: &str| {
                        t.iter()
                            .find(|r| is(r, "workload", w) && is(r, "profile", p))
                            .and_then(|r| f(r, k))
                    };
                    Some((i as f64, over(of("yaffs"), of("minv"))?))
                })
                .collect(),
        };
        out.push(Figure {
            categories: TTFS_PAPER.iter().map(|(w, _)| (*w).to_string()).collect(),
            id: "minv-energy".into(),
            paper: "minv".into(),
            title: "MiNV energy (the paper's future work): yaffs / minv, time against joules"
                .into(),
            x_label: "Workload".into(),
            y_label: "yaffs / minv (above 1: minv spends less)".into(),
            log_x: false,
            log_y: true,
            series: vec![
                ratio("sim_s", "busy time"),
                ratio("energy_j", "energy of the operations"),
                ratio("total_j", "energy with standby over idle time"),
            ],
        });
    }
    out
}
