//! MNFS (mnfs-multimedia-fs.txt): uniform write latency (Figure 6), fill throughput
//! (Figure 4), erase-on-delete time (Figure 5), mount time and RAM (Table 2).

use super::{f, is, over, rows, words, Claim, Data, Experiment, Paper};
use crate::reproduce::plot::{Figure, Series};
use crate::reproduce::verdict::{Effect, Tolerance};
use crate::reproduce::Scale;

fn uniform(s: Scale, seed: u64, profile: &str) -> Vec<String> {
    let size = match s {
        Scale::Smoke => " --device-size 16MiB --file-size 2MiB",
        Scale::Quick => " --device-size 32MiB --file-size 16MiB",
        Scale::Full => "",
    };
    words(&format!(
        "bench mnfs-uniform --profile {profile}{size} --workload-seed {seed} --json"
    ))
}

pub const UNIFORM_MNFS: Experiment = Experiment {
    id: "mnfs-uniform-mnfs",
    paper: Paper::Mnfs,
    what: "Figure 6: latency of each 32 KiB write of a large file, mnfs",
    args: |s, seed| uniform(s, seed, "mnfs"),
    expected: [0.1, 0.1, 0.4],
};

pub const UNIFORM_YAFFS: Experiment = Experiment {
    id: "mnfs-uniform-yaffs",
    paper: Paper::Mnfs,
    what: "Figure 6: latency of each 32 KiB write of a large file, yaffs",
    args: |s, seed| uniform(s, seed, "yaffs"),
    expected: [0.1, 0.1, 0.4],
};

fn small(s: Scale) -> &'static str {
    match s {
        Scale::Smoke => " --device-size 16MiB",
        Scale::Quick => " --device-size 32MiB",
        Scale::Full => "",
    }
}

pub const FILL: Experiment = Experiment {
    id: "mnfs-fill",
    paper: Paper::Mnfs,
    what: "Figure 4: filling a clean device with media files, throughput by profile",
    args: |s, seed| {
        words(&format!(
            "bench mnfs-fill{} --workload-seed {seed} --json",
            small(s)
        ))
    },
    expected: [0.1, 0.2, 0.6],
};

pub const DELETE: Experiment = Experiment {
    id: "mnfs-delete",
    paper: Paper::Mnfs,
    what: "Figure 5: time to delete a file by its size (mnfs erases on delete)",
    args: |s, seed| {
        words(&format!(
            "bench mnfs-delete{} --workload-seed {seed} --json",
            small(s)
        ))
    },
    expected: [0.6, 0.8, 2.2],
};

pub const MOUNT: Experiment = Experiment {
    id: "mnfs-mount",
    paper: Paper::Mnfs,
    what: "Table 2: mount time and RAM of a full device, by profile",
    args: |s, seed| {
        words(&format!(
            "bench mnfs-mount{} --workload-seed {seed} --json",
            small(s)
        ))
    },
    expected: [0.2, 0.3, 0.9],
};

fn one<'a>(d: &'a Data, id: &str) -> Option<&'a serde_json::Value> {
    rows(d.get(id)).into_iter().next()
}

pub fn claims(d: &Data) -> Vec<Claim> {
    let mut out = Vec::new();
    let m = one(d, "mnfs-uniform-mnfs").and_then(|r| f(r, "max_over_min"));
    out.push(
        Claim::figure(
            Paper::Mnfs,
            "Figure 6: mnfs write latency is uniform (slowest / fastest write)",
            22.0 / 21.0,
            m,
            "x",
        )
        .tolerance(
            Tolerance::RATIO,
            "a spread, judged as a ratio: 21-22 ms is the paper's",
        )
        .note("no cleaning in the write path: blocks are whole per file and erased on delete"),
    );
    let y = one(d, "mnfs-uniform-yaffs").and_then(|r| f(r, "max_over_min"));
    out.push(
        Claim::ratio(
            Paper::Mnfs,
            "Figure 6: yaffs's write latency spreads far more than mnfs's (ratio of spreads)",
            (520.0 / 47.0) / (22.0 / 21.0),
            over(y, m),
            "x",
        )
        .note(
            "ours spreads less: our yaffs's cleaning erases whole dead blocks and almost never \
             copies (424 reads against 3,546 erases over 2,048 writes), so its slowest write \
             is 37.1 ms against a fastest of 14.94 ms, the same as mnfs's; the paper's steady \
             47 against 21 ms is a YAFFS software cost simulated time lacks. Scale does not \
             drive it: 2.45x at full scale",
        ),
    );
    let fill = rows(d.get("mnfs-fill"));
    let kib = |p: &str| {
        fill.iter()
            .find(|r| is(r, "profile", p))
            .and_then(|r| f(r, "kib_per_s"))
    };
    out.push(
        Claim::ratio(
            Paper::Mnfs,
            "Figure 4: mnfs fills a clean device faster than yaffs (mnfs / yaffs KB/s)",
            1538.0 / 686.0,
            over(kib("mnfs"), kib("yaffs")),
            "x",
        )
        .note(
            "a tie: both profiles write the same pages, almost all data (56.2 of 58.2 s \
             simulated); 1.0018x at full scale. The paper blames its YAFFS's CPU cost, which \
             simulated time does not count",
        ),
    );
    let del = rows(d.get("mnfs-delete"));
    let dm: Vec<(f64, f64)> = del
        .iter()
        .filter(|r| is(r, "profile", "mnfs"))
        .filter_map(|r| Some((f(r, "file_bytes")?, f(r, "delete_sim_ms")?)))
        .collect();
    let grows = (dm.len() >= 2).then(|| dm[dm.len() - 1].1 / dm[0].1);
    out.push(
        Claim::direction(
            Paper::Mnfs,
            "Figure 5: mnfs delete time grows with file size (largest / smallest)",
            Effect::above(1.0, 0.02),
            grows,
            "x",
        )
        .note("erase on delete: a file's blocks are erased when it is deleted"),
    );
    let mount = rows(d.get("mnfs-mount"));
    let mk = |p: &str, k: &str| {
        mount
            .iter()
            .find(|r| is(r, "profile", p) && is(r, "method", "scan"))
            .and_then(|r| f(r, k))
    };
    out.push(
        Claim::ratio(
            Paper::Mnfs,
            "Table 2: mnfs mounts faster than yaffs (yaffs / mnfs scan mount time)",
            6441.0 / 185.0,
            over(mk("yaffs", "mount_sim_ms"), mk("mnfs", "mount_sim_ms")),
            "x",
        )
        .note(
            "both of ours read about one page per block (350.5 against 352.3 ms on the full \
             mnfs-128m): our yaffs has block summaries, and iBAT is not built, so mnfs mounts \
             as yaffs does. The paper's YAFFS read every page's spare area: on this chip's \
             timing that is about 4.1 s against its 6.4 s (arithmetic)",
        ),
    );
    out.push(
        Claim::ratio(
            Paper::Mnfs,
            "Table 2: mnfs needs a small share of yaffs's RAM after mount (mnfs / yaffs heap)",
            34.0 / 680.0,
            over(mk("mnfs", "heap_bytes"), mk("yaffs", "heap_bytes")),
            "x of yaffs",
        )
        .note(
            "both carry the same per-block table (about 29 B a block) and our yaffs adds only \
             compact extents (91.5 KB more); the paper's YAFFS held a per-page map",
        ),
    );
    out
}

pub fn figures(d: &Data) -> Vec<Figure> {
    let mut out = Vec::new();
    let lat = |id: &str, name: &str| Series {
        name: name.into(),
        points: one(d, id)
            .and_then(|r| r.get("latencies_ms")?.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some(((i + 1) as f64, v.as_f64()?)))
            .collect(),
    };
    if d.contains_key("mnfs-uniform-mnfs") || d.contains_key("mnfs-uniform-yaffs") {
        out.push(Figure {
            categories: Vec::new(),
            id: "mnfs-fig6-latency".into(),
            paper: "mnfs".into(),
            title: "MNFS Figure 6: latency of each 32 KiB write".into(),
            x_label: "Write (n-th 32 KiB)".into(),
            y_label: "Latency (ms)".into(),
            log_x: false,
            log_y: false,
            series: vec![
                lat("mnfs-uniform-yaffs", "yaffs"),
                lat("mnfs-uniform-mnfs", "mnfs"),
            ],
        });
    }
    // Figure 4 and Table 2: by profile.
    let profiles = ["yaffs", "mnfs", "hybrid"];
    let cats: Vec<String> = profiles.iter().map(|p| p.to_string()).collect();
    let by_profile =
        |id: &str, filter: &dyn Fn(&serde_json::Value) -> bool, k: &str, scale: f64| {
            rows(d.get(id))
                .into_iter()
                .filter(|r| filter(r))
                .filter_map(|r| {
                    let p = r.get("profile")?.as_str()?;
                    let i = profiles.iter().position(|x| *x == p)?;
                    Some((i as f64, f(r, k)? * scale))
                })
                .collect::<Vec<_>>()
        };
    if d.contains_key("mnfs-fill") {
        out.push(Figure {
            categories: cats.clone(),
            id: "mnfs-fig4-fill".into(),
            paper: "mnfs".into(),
            title: "MNFS Figure 4: filling a clean device".into(),
            x_label: "Profile".into(),
            y_label: "Throughput (KiB/s)".into(),
            log_x: false,
            log_y: false,
            series: vec![Series {
                name: "write throughput".into(),
                points: by_profile("mnfs-fill", &|_| true, "kib_per_s", 1.0),
            }],
        });
    }
    if d.contains_key("mnfs-mount") {
        let scan = |r: &serde_json::Value| is(r, "method", "scan");
        for (k, id, title, unit, scale) in [
            (
                "mount_sim_ms",
                "mnfs-table2-mount",
                "MNFS Table 2: mount time of a full device (scan)",
                "Mount time (ms)",
                1.0,
            ),
            (
                "heap_bytes",
                "mnfs-table2-ram",
                "MNFS Table 2: RAM after mount (scan)",
                "Heap (KiB)",
                1.0 / 1024.0,
            ),
        ] {
            out.push(Figure {
                categories: cats.clone(),
                id: id.into(),
                paper: "mnfs".into(),
                title: title.into(),
                x_label: "Profile".into(),
                y_label: unit.into(),
                log_x: false,
                log_y: false,
                series: vec![Series {
                    name: "ours".into(),
                    points: by_profile("mnfs-mount", &scan, k, scale),
                }],
            });
        }
    }
    let del = rows(d.get("mnfs-delete"));
    if !del.is_empty() {
        let series = |p: &str| Series {
            name: p.into(),
            points: del
                .iter()
                .filter(|r| is(r, "profile", p))
                .filter_map(|r| Some((f(r, "file_bytes")? / 1024.0, f(r, "delete_sim_ms")?)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "mnfs-fig5-delete".into(),
            paper: "mnfs".into(),
            title: "MNFS Figure 5: time to delete a file".into(),
            x_label: "File size (KiB, log)".into(),
            y_label: "Delete time (ms, log)".into(),
            log_x: true,
            log_y: true,
            series: vec![series("yaffs"), series("mnfs"), series("hybrid")],
        });
    }
    out
}
