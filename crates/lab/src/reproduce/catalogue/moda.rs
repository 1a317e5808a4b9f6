//! MODA (moda-uniformity-allocation.txt): the cleaning cost model (equation 2) and
//! Table 1 (seven workloads, YAFFS's sequential allocation against MODA), Figure 7
//! (cleaning time by initial utilization), Figure 9 (DAC beside them).

use super::{f, is, over, rows, words, Claim, Data, Experiment, Paper};
use crate::reproduce::plot::{Figure, Series};
use crate::reproduce::verdict::{Effect, Tolerance};
use crate::reproduce::Scale;

pub const MODEL: Experiment = Experiment {
    id: "moda-model-fax",
    paper: Paper::Moda,
    what: "Equation 2: the cleaning cost model on Table 1's Fax/YAFFS state",
    args: |_, _| {
        words(
            "model cleaning-cost --blocks 3706 --pages-per-block 32 --u 0.86 --i 0.0087 \
             --p 0.73 --read-us 200 --write-us 1030 --erase-us 1740 --json",
        )
    },
    expected: [0.1, 0.1, 0.1],
};

/// Equation 2 with B = 3706 (back-solved from Table 1's Fax/YAFFS row) and the MTD-level
/// times, on another row's u, i, p: the model judged on rows it was not fitted to.
macro_rules! model_row {
    ($name:ident, $id:literal, $what:literal, $u:literal, $i:literal, $p:literal) => {
        pub const $name: Experiment = Experiment {
            id: $id,
            paper: Paper::Moda,
            what: $what,
            args: |_, _| {
                words(concat!(
                    "model cleaning-cost --blocks 3706 --pages-per-block 32 --u ",
                    $u,
                    " --i ",
                    $i,
                    " --p ",
                    $p,
                    " --read-us 200 --write-us 1030 --erase-us 1740 --json"
                ))
            },
            expected: [0.1, 0.1, 0.1],
        };
    };
}

model_row!(
    MODEL_CAMERA,
    "moda-model-camera",
    "Equation 2 on Table 1's Camera/YAFFS state",
    "0.3",
    "0.002",
    "0.98"
);
model_row!(
    MODEL_PHONE,
    "moda-model-phone",
    "Equation 2 on Table 1's Phone/YAFFS state",
    "0.05",
    "0.32",
    "0.62"
);
model_row!(
    MODEL_RECORDER,
    "moda-model-recorder",
    "Equation 2 on Table 1's Recorder/YAFFS state",
    "0.005",
    "0.16",
    "0.83"
);
model_row!(
    MODEL_FAX_MODA,
    "moda-model-fax-moda",
    "Equation 2 on Table 1's Fax/MODA state",
    "0.86",
    "0.0087",
    "0.97"
);
model_row!(
    MODEL_POSTMARK,
    "moda-model-postmark",
    "Equation 2 on Table 1's PostMark/YAFFS state",
    "0.08",
    "0.0107",
    "0.90"
);
model_row!(
    MODEL_ANDREW,
    "moda-model-andrew",
    "Equation 2 on Table 1's Andrew/YAFFS state",
    "0.09",
    "0.0008",
    "0.90"
);

/// The rows above: (experiment, workload and scheme, the paper's estimated seconds, what
/// we found where ours differs).
// Fax/MODA's estimate is 3.14 s in Table 1, not an approximation of pi.
#[allow(clippy::approx_constant)]
const MODEL_ROWS: [(&str, &str, f64, &str); 6] = [
    ("moda-model-camera", "Camera under YAFFS", 2.83, ""),
    ("moda-model-phone", "Phone under YAFFS", 11.18, ""),
    ("moda-model-recorder", "Recorder under YAFFS", 2.81, ""),
    (
        "moda-model-fax-moda",
        "Fax under MODA",
        3.14,
        ". No p that prints as 0.97 gives the paper's figure (measured: p 0.965 gives 5.33 \
         s, 0.975 3.83 s; 0.98 gives 3.07 s)",
    ),
    ("moda-model-postmark", "PostMark under YAFFS", 13.17, ""),
    (
        "moda-model-andrew",
        "Andrew under YAFFS",
        13.16,
        ". Within the printed rounding of p and i (0.895-0.905, 0.00075-0.00085) the model \
         gives 14.35-15.87 s (measured), not the paper's 13.16",
    ),
];

/// Equation 2 on the paper's small-block 64 MB chip (4,096 blocks of 32 pages; read,
/// write and erase 15, 200 and 2,000 us), sweeping `sweep` from `u i p`.
fn surface(sweep: &str, u: f64, i: f64, p: f64) -> Vec<String> {
    words(&format!(
        "model cleaning-cost --blocks 4096 --pages-per-block 32 --u {u} --i {i} --p {p} \
         --read-us 15 --write-us 200 --erase-us 2000 --sweep {sweep} --json"
    ))
}

pub const SURFACE: Experiment = Experiment {
    id: "moda-model-surface",
    paper: Paper::Moda,
    what: "Figure 3: equation 2 over utilization and uniformity, invalidity 0.1",
    args: |_, _| surface("u,p", 0.5, 0.1, 0.5),
    expected: [0.1, 0.1, 0.1],
};

pub const BY_U: Experiment = Experiment {
    id: "moda-model-by-u",
    paper: Paper::Moda,
    what: "Figure 4(a): equation 2 against utilization, i = p = 0.5",
    args: |_, _| surface("u", 0.5, 0.5, 0.5),
    expected: [0.1, 0.1, 0.1],
};

pub const BY_I: Experiment = Experiment {
    id: "moda-model-by-i",
    paper: Paper::Moda,
    what: "Figure 4(b): equation 2 against invalidity, u = p = 0.5",
    args: |_, _| surface("i", 0.5, 0.5, 0.5),
    expected: [0.1, 0.1, 0.1],
};

pub const BY_P: Experiment = Experiment {
    id: "moda-model-by-p",
    paper: Paper::Moda,
    what: "Figure 4(c): equation 2 against uniformity, u = i = 0.5",
    args: |_, _| surface("p", 0.5, 0.5, 0.5),
    expected: [0.1, 0.1, 0.1],
};

/// (parameter value, seconds) of a one-parameter sweep.
fn sweep(d: &Data, id: &str, param: &str) -> Vec<(f64, f64)> {
    rows(d.get(id))
        .into_iter()
        .filter_map(|r| Some((f(r.get("inputs")?, param)?, f(r, "seconds")?)))
        .collect()
}

fn range(v: &[(f64, f64)]) -> Option<f64> {
    let lo = v.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = v.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    (!v.is_empty()).then_some(hi - lo)
}

pub const TABLE: Experiment = Experiment {
    id: "moda-table",
    paper: Paper::Moda,
    what: "Table 1 and Figure 9: seven workloads under sequential (YAFFS), MODA, DAC and \
           page-level hot/cold allocation; u, i, p, estimated and measured cleaning",
    // Every scale runs all seven workloads: each is a claim (2 s in all).
    args: |_, seed| {
        words(&format!(
            "bench moda-table --policies sequential,moda,dac,page-hotcold \
             --workload-seed {seed} --json"
        ))
    },
    expected: [2.0, 2.0, 2.0],
};

pub const TABLE_YAFFS1: Experiment = Experiment {
    id: "moda-table-yaffs1",
    paper: Paper::Moda,
    what: "Table 1 on yaffs1, the YAFFS of 2007 the paper modified (no summaries, stale \
           pages marked deleted): the same workloads and policies",
    args: |_, seed| {
        words(&format!(
            "bench moda-table --profile yaffs1 --policies sequential,moda,dac,page-hotcold \
             --workload-seed {seed} --json"
        ))
    },
    expected: [2.0, 2.0, 2.0],
};

pub const SEARCH_READS: Experiment = Experiment {
    id: "moda-search-reads",
    paper: Paper::Moda,
    what: "Section 6.3.2's account of YAFFS modelled: no block status in RAM, so every \
           victim search reads the tags of each block it passes (yaffs1, --search-reads)",
    args: |s, seed| {
        let size = if s == Scale::Smoke {
            " --device-size 16MiB"
        } else {
            ""
        };
        words(&format!(
            "bench moda-table --profile yaffs1 --search-reads --policies sequential,moda \
             --workloads fax,camera{size} --workload-seed {seed} --json"
        ))
    },
    expected: [0.5, 2.0, 2.0],
};

/// Table 1, Fax under MODA: measured and estimated cleaning seconds.
const FAX_MODA_MEASURED_S: f64 = 23.19;
#[allow(clippy::approx_constant)] // the paper's 3.14 s, not pi
const FAX_MODA_ESTIMATED_S: f64 = 3.14;

/// Section 6.3.2 blames the gap between measured and estimated cleaning on YAFFS reading
/// flash to find victims. Modelled as it says (every search reads the blocks it passes),
/// does the gap come out as the paper's?
fn search_read_claims(d: &Data) -> Vec<Claim> {
    let c = |w: &str, p: &str, k: &str| cell_of(d, "moda-search-reads", w, p, k);
    let plain_run = cell_of(d, "moda-table-yaffs1", "camera", "sequential", "run_s");
    vec![
        Claim::ratio(
            Paper::Moda,
            "Section 6.3.2: YAFFS reading flash to find victims makes Fax's measured \
             cleaning under MODA exceed the model's estimate (measured / estimated)",
            FAX_MODA_MEASURED_S / FAX_MODA_ESTIMATED_S,
            over(c("fax", "moda", "clean_s"), c("fax", "moda", "est_clean_s")),
            "x",
        )
        .note(&format!(
            "modelled as the paper words it: a search keeps no valid counts in RAM, so every \
             block it passes costs an OOB read of each programmed page (bench moda-table \
             --search-reads; {} reads while cleaning Fax under MODA). The YAFFS sources of \
             the time keep each block's pages-in-use count in RAM (yaffs_FindDirtiestBlock), \
             and this account over-predicts: the paper's gap is about one read of every \
             valid page per full cleaning (see the Table 1 claims), far fewer reads than \
             200-block windows read at every search",
            c("fax", "moda", "search_reads").map_or("-".into(), |x| format!("{x:.0}"))
        )),
        Claim::figure(
            Paper::Moda,
            "Table 1: Camera's benchmark running time under YAFFS, with every victim \
             search reading the blocks it passes",
            38.0,
            c("camera", "sequential", "run_s"),
            "s",
        )
        .note(&format!(
            "YAFFS searches for a victim each time it opens a block (normal mode, 200-block \
             windows); reading flash there costs the run far more than the paper measured \
             (without the reads, ours runs {}): the paper's account cannot hold for the \
             searches of the write path",
            plain_run.map_or("-".into(), |x| format!("{x:.1} s"))
        )),
    ]
}

pub const UNFITTED: Experiment = Experiment {
    id: "moda-unfitted",
    paper: Paper::Moda,
    what: "Table 1's workloads with their lengths not fitted to its u: each runs until its \
           data fill half the capacity (PostMark, fitted to nothing, as it is)",
    args: |s, seed| {
        // Phone and Recorder write a record at a time: half the capacity is most of this
        // experiment's time.
        let smaller = if s == Scale::Smoke {
            " --device-size 8MiB --workloads camera,fax,postmark,andrew"
        } else {
            ""
        };
        words(&format!(
            "bench moda-table --fill 0.5 --policies sequential,moda{smaller} \
             --workload-seed {seed} --json"
        ))
    },
    expected: [0.2, 9.0, 9.0],
};

/// YAFFS's cleaning time over MODA's for each workload of experiment `id`, in Table 1's
/// order (1 where neither cleaned).
fn gains_in(d: &Data, id: &str) -> Vec<(String, f64)> {
    let mut names: Vec<String> = rows(d.get(id))
        .iter()
        .filter_map(|r| Some(r.get("workload")?.as_str()?.to_string()))
        .collect();
    names.dedup();
    names
        .into_iter()
        .filter_map(|w| {
            let g = yaffs_over_moda_in(d, id, &w, "clean_s")?;
            Some((w, g))
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The abstract's typical gain, on workloads whose lengths were not fitted to Table 1.
fn unfitted_claims(d: &Data) -> Vec<Claim> {
    let unfitted = gains_in(d, "moda-unfitted");
    let fitted = gains_in(d, "moda-table");
    let list = |g: &[(String, f64)]| {
        g.iter()
            .map(|(w, x)| match x {
                x if *x >= 1e5 => format!("{w} (nothing left to clean under MODA)"),
                x => format!("{w} {x:.2}x"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![Claim::direction(
        Paper::Moda,
        "Abstract: MODA typically improves cleaning time over sequential allocation, with \
         the workloads' lengths not fitted to Table 1 (median YAFFS / MODA of the seven)",
        Effect::above(1.0, 0.02),
        median(unfitted.iter().map(|g| g.1).collect()),
        "x",
    )
    .note(&format!(
        "Our workloads are fitted to Table 1: each one's length to its u, Phone's event \
         mix, Recorder's records and Fax's file sizes to its i / u (bench moda-table \
         --json gives each row's `fitted`); nothing is fitted to p or to cleaning. Run to \
         half the capacity instead (bench moda-table --fill 0.5): {}; as fitted: {}. \
         The paper's 20-30% is 1.25-1.43x",
        list(&unfitted),
        list(&fitted)
    ))]
}

pub const ANDREW_980: Experiment = Experiment {
    id: "moda-andrew-980",
    paper: Paper::Moda,
    what: "Table 1's sweep of our Andrew: 14 interleaved copies (980 files, about the \
           paper's count) under sequential allocation and MODA",
    args: |s, seed| {
        let copies = if s == Scale::Smoke { 2 } else { 14 };
        let w = vec!["andrew"; copies].join("+");
        words(&format!(
            "bench moda-table --policies sequential,moda --workloads {w} \
             --workload-seed {seed} --json"
        ))
    },
    expected: [0.2, 1.0, 1.0],
};

pub const UTILIZATION: Experiment = Experiment {
    id: "moda-utilization",
    paper: Paper::Moda,
    what: "Figure 7: cleaning time by initial utilization, sequential and MODA",
    args: |s, seed| {
        let base = match s {
            Scale::Smoke => "bench moda-utilization --utilizations 0,0.5",
            Scale::Quick => "bench moda-utilization --utilizations 0,0.3,0.6,0.8",
            Scale::Full => "bench moda-utilization",
        };
        words(&format!("{base} --workload-seed {seed} --json"))
    },
    expected: [0.3, 0.6, 1.4],
};

pub const REPEAT: Experiment = Experiment {
    id: "moda-repeat",
    paper: Paper::Moda,
    what: "Figure 8: PostMark run again and again, no cleaning, cleaning between runs, or \
           in idle time; sequential and MODA",
    args: |s, seed| {
        let base = match s {
            Scale::Smoke => "bench moda-repeat --max-runs 4",
            Scale::Quick | Scale::Full => "bench moda-repeat",
        };
        words(&format!("{base} --workload-seed {seed} --json"))
    },
    expected: [0.5, 2.7, 2.7],
};

/// One workload of Table 1, as printed: YAFFS then MODA.
struct Table1Row {
    workload: &'static str,
    /// Equation 2's estimated cleaning time (s).
    estimated_s: [f64; 2],
    /// The measured cleaning time (s).
    measured_s: [f64; 2],
    /// Uniformity p after the run.
    p: [f64; 2],
}

const fn row(
    workload: &'static str,
    estimated_s: [f64; 2],
    measured_s: [f64; 2],
    p: [f64; 2],
) -> Table1Row {
    Table1Row {
        workload,
        estimated_s,
        measured_s,
        p,
    }
}

/// Table 1 (fax's MODA estimate is the paper's 3.14 s, not pi).
#[allow(clippy::approx_constant)]
const TABLE_1: [Table1Row; 7] = [
    row("camera", [2.83, 0.42], [9.60, 7.56], [0.98, 0.99]),
    row("movie", [0.41, 0.04], [24.56, 24.54], [0.99, 0.99]),
    row("phone", [11.18, 10.24], [12.08, 10.80], [0.62, 0.72]),
    row("recorder", [2.81, 1.95], [2.00, 1.76], [0.83, 0.90]),
    row("fax", [40.74, 3.14], [60.99, 23.19], [0.73, 0.97]),
    row("postmark", [13.17, 9.17], [16.18, 11.39], [0.90, 0.93]),
    row("andrew", [13.16, 2.40], [16.32, 3.64], [0.90, 0.98]),
];

fn cell(d: &Data, workload: &str, policy: &str, k: &str) -> Option<f64> {
    cell_of(d, "moda-table", workload, policy, k)
}

/// `cell` from experiment `id` (moda-table on yaffs, moda-table-yaffs1 on yaffs1).
fn cell_of(d: &Data, id: &str, workload: &str, policy: &str, k: &str) -> Option<f64> {
    rows(d.get(id))
        .into_iter()
        .find(|r| is(r, "workload", workload) && is(r, "policy", policy))
        .and_then(|r| f(r, k))
}

/// YAFFS's (sequential allocation's) `k` over MODA's on `w`: 1 when neither cleaned, and
/// capped at 10^6 when only MODA cleaned nothing (JSON has no infinity).
fn yaffs_over_moda(d: &Data, w: &str, k: &str) -> Option<f64> {
    yaffs_over_moda_in(d, "moda-table", w, k)
}

/// `yaffs_over_moda` from experiment `id`.
fn yaffs_over_moda_in(d: &Data, id: &str, w: &str, k: &str) -> Option<f64> {
    let (s, m) = (
        cell_of(d, id, w, "sequential", k)?,
        cell_of(d, id, w, "moda", k)?,
    );
    Some(if m > 0.0 {
        s / m
    } else if s > 0.0 {
        1e6
    } else {
        1.0
    })
}

/// Why our measured cleaning-time ratios differ from Table 1's.
const MEASURED_NOTE: &str = "The paper's measured cleaning times include a cost the same for \
     both policies, YAFFS reading flash to find victims (section 6.3.2): taking each row's copy \
     and erase cost out of its time leaves about one read of every valid page. Ours is copies \
     and erases only; adding that read to ours gives fax 2.21x (paper 2.63x), andrew 1.98x, \
     postmark 1.30x, camera 1.09x (measured from the same runs).";

const ANDREW_NOTE: &str = " Our Andrew has 70 files, fitted to the paper's printed i = 0.0008; \
     its counts imply about 1,000: experiment moda-andrew-980 runs 14 interleaved copies \
     (980 files), where the ratio falls and YAFFS's copies land on the paper's.";

const MOVIE_NOTE: &str = " On movie our MODA cleans nothing (a 10^6 ratio stands for \
     infinity) where sequential allocation copies a few pages: the paper's two 24.5 s are its \
     shared search cost alone.";

const CAMERA_NOTE: &str = " Our camera runs end with i = 0.04-0.15 (the paper's 0.002): \
     blocks of invalid pages only, which both policies erase, so the ratio moves with the \
     seed (2.41x at seed 1, 1.56x at seed 8).";

pub fn claims(d: &Data) -> Vec<Claim> {
    let mut out = Vec::new();
    // Fax/YAFFS is where B = 3706 came from (back-solved from its 40.74 s): a calibration,
    // not a claim. The model is judged on the other rows, with B fixed.
    let calibrated = rows(d.get("moda-model-fax"))
        .first()
        .and_then(|r| f(r, "seconds"));
    for (id, row, paper, found) in MODEL_ROWS {
        let ours = rows(d.get(id)).first().and_then(|r| f(r, "seconds"));
        out.push(
            Claim::figure(
                Paper::Moda,
                &format!("Equation 2: cleaning time estimated for Table 1's {row}"),
                paper,
                ours,
                "s",
            )
            .note(&format!(
                "nandkit model cleaning-cost with the row's u, i, p as Table 1 prints them \
                 (two or three digits) and the MTD-level times; B = 3706 blocks is a \
                 calibration, back-solved from the Fax/YAFFS row (40.74 s; ours there {}), \
                 so that row is not judged{found}",
                calibrated.map_or("-".to_string(), |x| format!("{x:.2} s"))
            )),
        );
    }
    // Figures 3 and 4: the model's shape.
    let s = rows(d.get("moda-model-surface"));
    let at = |u: f64, p: f64| {
        s.iter()
            .find(|r| {
                let i = r.get("inputs");
                i.and_then(|i| f(i, "u"))
                    .is_some_and(|x| (x - u).abs() < 1e-9)
                    && i.and_then(|i| f(i, "p"))
                        .is_some_and(|x| (x - p).abs() < 1e-9)
            })
            .and_then(|r| f(r, "seconds"))
    };
    out.push(
        Claim::direction(
            Paper::Moda,
            "Figure 3: cleaning cost is highest at high utilization and low uniformity \
             (u 0.9, p 0 over u 0.9, p 1)",
            Effect::above(1.0, 0.02),
            match (at(0.9, 0.0), at(0.9, 1.0)) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            },
            "x",
        )
        .note("equation 2: copies grow with (1 - p) u / (u + i), erases with (1 - p)"),
    );
    let (ru, ri, rp) = (
        range(&sweep(d, "moda-model-by-u", "u")),
        range(&sweep(d, "moda-model-by-i", "i")),
        range(&sweep(d, "moda-model-by-p", "p")),
    );
    out.push(
        Claim::direction(
            Paper::Moda,
            "Figure 4: utilization and uniformity move the cost more than invalidity (the \
             smaller of their ranges over invalidity's)",
            Effect::above(1.0, 0.02),
            match (ru, ri, rp) {
                (Some(u), Some(i), Some(p)) if i > 0.0 => Some(u.min(p) / i),
                _ => None,
            },
            "x",
        )
        .note("each swept from the point u = i = p = 0.5 (u + i at most 1)"),
    );
    for t in &TABLE_1 {
        let (w, est, measured) = (t.workload, t.estimated_s, t.measured_s);
        let andrew_980 = match w {
            "andrew" => {
                let r = rows(d.get("moda-andrew-980"));
                let c =
                    |p: &str, k: &str| r.iter().find(|x| is(x, "policy", p)).and_then(|x| f(x, k));
                format!(
                    "{ANDREW_NOTE} Measured there: {} (YAFFS / MODA), YAFFS {} copies \
                     (paper 10,060).",
                    over(c("sequential", "clean_s"), c("moda", "clean_s"))
                        .map_or("-".into(), |x| format!("{x:.1}x")),
                    c("sequential", "copies").map_or("-".into(), |x| format!("{x:.0}"))
                )
            }
            _ => String::new(),
        };
        let why = match w {
            "andrew" => andrew_980.as_str(),
            "camera" => CAMERA_NOTE,
            "movie" => MOVIE_NOTE,
            _ => "",
        };
        out.push(
            Claim::ratio(
                Paper::Moda,
                &format!("Table 1: MODA cuts {w}'s measured cleaning time (YAFFS / MODA)"),
                measured[0] / measured[1],
                yaffs_over_moda(d, w, "clean_s"),
                "x",
            )
            .beside(
                "yaffs1",
                yaffs_over_moda_in(d, "moda-table-yaffs1", w, "clean_s"),
            )
            .note(&format!(
                "{MEASURED_NOTE} The paper's model estimate, which has no such cost, gives \
                 {:.2}x (next claim).{}",
                est[0] / est[1],
                why
            )),
        );
        out.push(
            Claim::ratio(
                Paper::Moda,
                &format!("Table 1: equation 2's estimate for {w} (YAFFS / MODA)"),
                est[0] / est[1],
                yaffs_over_moda(d, w, "est_clean_s"),
                "x",
            )
            .beside(
                "yaffs1",
                yaffs_over_moda_in(d, "moda-table-yaffs1", w, "est_clean_s"),
            )
            .note(&format!(
                "equation 2 with the MTD-level times depends only on the u, i, p each policy \
                 left: the paper's p {:.2} / {:.2} (YAFFS / MODA), ours {} / {}; where they \
                 differ, so does the estimate.{why}",
                t.p[0],
                t.p[1],
                cell(d, w, "sequential", "p").map_or("-".into(), |x| format!("{x:.3}")),
                cell(d, w, "moda", "p").map_or("-".into(), |x| format!("{x:.3}")),
            )),
        );
    }
    // Uniformity: MODA's p against sequential's, workload by workload.
    let workloads: Vec<String> = rows(d.get("moda-table"))
        .into_iter()
        .filter(|r| is(r, "policy", "moda"))
        .filter_map(|r| r.get("workload")?.as_str().map(String::from))
        .collect();
    let margins_in = |id: &str| -> Vec<f64> {
        workloads
            .iter()
            .filter_map(|w| {
                Some(cell_of(d, id, w, "moda", "p")? - cell_of(d, id, w, "sequential", "p")?)
            })
            .collect()
    };
    let margins = margins_in("moda-table");
    let margins1 = margins_in("moda-table-yaffs1");
    let paper_margins: Vec<f64> = TABLE_1.iter().map(|t| t.p[1] - t.p[0]).collect();
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    out.push(
        Claim::figure(
            Paper::Moda,
            "Table 1: MODA raises uniformity p (MODA's p minus YAFFS's, mean over the \
             workloads)",
            mean(&paper_margins).expect("seven workloads"),
            mean(&margins),
            "p",
        )
        .effect(Effect::around(0.0, 0.005))
        .beside("yaffs1", mean(&margins1))
        .note(
            "the paper: +0.24 on fax, +0.10 on phone, +0.00 on movie (p to two digits). Ours \
             is smaller where our workloads have fewer, larger files (each file leaves one \
             stale header among its data under sequential allocation): andrew +0.0147 with 70 \
             files, +0.0873 with 980 (measured)",
        ),
    );
    out.push(
        Claim::direction(
            Paper::Moda,
            "Table 1: MODA lowers uniformity on no workload (least of MODA's p minus YAFFS's)",
            Effect::above(-0.005, 0.0),
            (!margins.is_empty()).then(|| margins.iter().copied().fold(f64::INFINITY, f64::min)),
            "p",
        )
        .note(
            "the paper's least margin is +0.00 (movie); -0.005 is half the last digit it \
             prints, so a smaller drop could not show in its table",
        ),
    );
    // Figure 9: DAC between YAFFS and MODA.
    let between = (!workloads.is_empty()).then(|| {
        let ok = workloads.iter().filter(|w| {
            match (
                cell(d, w, "moda", "clean_s"),
                cell(d, w, "dac", "clean_s"),
                cell(d, w, "sequential", "clean_s"),
            ) {
                (Some(m), Some(x), Some(s)) => m <= x && x <= s,
                _ => false,
            }
        });
        ok.count() as f64
    });
    out.push(
        Claim::figure(
            Paper::Moda,
            "Figure 9: DAC's cleaning time lies between MODA's and YAFFS's (workloads where so)",
            TABLE_1.len() as f64,
            between,
            "workloads",
        )
        .tolerance(
            Tolerance::Absolute(0.0),
            "the paper's claim is every workload",
        )
        .note(
            "ours: 4-5 of 7 over seeds 1-8; our DAC puts new pages where sequential allocation \
             would, so on recorder, fax, postmark and andrew it ends within 5% of YAFFS, \
             recorder and fax always a little above it (fax +4.4% copies at every seed and \
             size), postmark and andrew either side with the seed. The paper prints no DAC \
             numbers",
        ),
    );
    // Table 1: run time unchanged by classification. The paper's worst is Camera's 38 s
    // against 37 s.
    let worst = (!workloads.is_empty()).then(|| {
        workloads
            .iter()
            .filter_map(|w| {
                Some(
                    (cell(d, w, "moda", "run_s")? / cell(d, w, "sequential", "run_s")? - 1.0).abs()
                        * 100.0,
                )
            })
            .fold(0.0, f64::max)
    });
    out.push(
        Claim::figure(
            Paper::Moda,
            "Table 1: MODA's classification costs no running time (worst workload, % apart)",
            (38.0 / 37.0 - 1.0) * 100.0,
            worst,
            "% apart",
        )
        .tolerance(
            Tolerance::Absolute(2.7),
            "no cost is the claim: anything from 0 to twice the paper's own 2.7% (38 s \
             against 37 s, whole seconds) is as close as the paper can tell",
        )
        .note("the paper: 38/37, 481/481, 90/90 s and so on"),
    );
    // Beyond the paper (its future work): page-level classes for Phone and Recorder.
    let page =
        |w: &str| Some(cell(d, w, "page-hotcold", "clean_s")? / cell(d, w, "moda", "clean_s")?);
    out.push(
        Claim::direction(
            Paper::Moda,
            "Future work, built: page-level hot/cold cleans less than MODA on phone \
             (page-hotcold / MODA)",
            Effect::below(1.0, 0.02),
            page("phone"),
            "x",
        )
        .note("the paper suggests page-level classes for workloads that rewrite parts of files"),
    );
    // Figure 8: repeated PostMark.
    let rep = rows(d.get("moda-repeat"));
    let max_run = |p: &str, mode: &str| {
        rep.iter()
            .filter(|r| is(r, "policy", p) && is(r, "mode", mode))
            .filter_map(|r| f(r, "run_s"))
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
    };
    out.push(
        Claim::direction(
            Paper::Moda,
            "Figure 8: without cleaning, MODA's slowest run is faster than YAFFS's \
             (MODA / YAFFS)",
            Effect::below(1.0, 0.02),
            over(max_run("moda", "none"), max_run("sequential", "none")),
            "x",
        )
        .note(
            "the paper: YAFFS's run time jumps past u = 0.87 while MODA's rises only slightly; \
             ours both rise from u = 0.58 on (PostMark leaves invalid pages every run), MODA \
             less",
        ),
    );
    let gap = |p: &str| {
        let v: Vec<f64> = rep
            .iter()
            .filter(|r| is(r, "policy", p) && is(r, "mode", "between") && is(r, "outcome", "ok"))
            .filter_map(|r| f(r, "gap_clean_s"))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>())
    };
    out.push(
        Claim::direction(
            Paper::Moda,
            "Figure 8: cleaning between runs costs MODA less than YAFFS (MODA / YAFFS)",
            Effect::below(1.0, 0.02),
            match (gap("moda"), gap("sequential")) {
                (Some(m), Some(s)) if s > 0.0 => Some(m / s),
                _ => None,
            },
            "x",
        )
        .note(
            "periodic cleaning keeps every run fast under both; MODA has fewer mixed blocks to \
             clean",
        ),
    );
    // Figure 7: the gap grows with initial utilization.
    let u = rows(d.get("moda-utilization"));
    let gap = |u0: f64| -> Option<f64> {
        let c = |p: &str| {
            u.iter()
                .find(|r| is(r, "policy", p) && f(r, "u0") == Some(u0))
                .and_then(|r| f(r, "clean_s"))
        };
        Some(c("sequential")? - c("moda")?)
    };
    // Runs that ended early (the device full, at u0 = 0.9) are not comparable.
    let finished = |u0: f64| {
        u.iter()
            .filter(|r| f(r, "u0") == Some(u0))
            .all(|r| is(r, "outcome", "ok"))
    };
    let u0s: Vec<f64> = u
        .iter()
        .filter(|r| is(r, "policy", "moda"))
        .filter_map(|r| f(r, "u0"))
        .filter(|&u0| finished(u0))
        .collect();
    let growth = match (u0s.first(), u0s.last()) {
        (Some(&a), Some(&b)) if a < b => match (gap(a), gap(b)) {
            (Some(ga), Some(gb)) => Some(gb - ga),
            _ => None,
        },
        _ => None,
    };
    out.push(
        Claim::direction(
            Paper::Moda,
            "Figure 7: YAFFS's extra cleaning over MODA grows with initial utilization (the \
             gap at the highest finished u0 minus the gap at the lowest)",
            Effect::above(0.0, 0.1),
            growth,
            "s more",
        )
        .note(
            "ours grows in one step then stays flat: the extra utilization is whole valid \
             blocks, which neither policy copies. No effect: under 0.1 s, about ten block \
             cleanings on this chip",
        ),
    );
    out.extend(ablation_claims(d));
    out.extend(search_read_claims(d));
    out.extend(unfitted_claims(d));
    out
}

pub const ABLATION: Experiment = Experiment {
    id: "moda-ablation",
    paper: Paper::Moda,
    what: "MODA in parts: sequential, its first level alone (system data apart from user \
           data, moda-split), then the full policy (the multi-queue classifier too), on \
           Table 1's seven workloads",
    args: |_, seed| {
        words(&format!(
            "bench moda-table --ablation --workload-seed {seed} --json"
        ))
    },
    expected: [1.5, 1.5, 1.5],
};

/// What each of MODA's two levels gives: the paper credits both (section 5), and the
/// classifier is its contribution over earlier hot/cold work.
fn ablation_claims(d: &Data) -> Vec<Claim> {
    let parts: Vec<&serde_json::Value> = d
        .get("moda-ablation")
        .and_then(|v| v.get("ablation"))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let of = |w: &str, k: &str| {
        parts
            .iter()
            .find(|r| is(r, "workload", w))
            .and_then(|r| f(r, k))
    };
    let shares: Vec<String> = parts
        .iter()
        .filter_map(|r| {
            let w = r.get("workload")?.as_str()?;
            let c = f(r, "classifier_share")?;
            Some(format!("{w} {:.0}%", c * 100.0))
        })
        .collect();
    vec![Claim::direction(
        Paper::Moda,
        "Section 5: MODA's second level, the multi-queue classifier, cuts Fax's cleaning \
         time beyond its first level alone (system/user split over full MODA)",
        Effect::above(1.0, 0.02),
        over(of("fax", "split_clean_s"), of("fax", "moda_clean_s")),
        "x",
    )
    .note(&format!(
        "measured by running MODA in parts (bench moda-table --ablation): the classifier's \
         own share of MODA's cleaning-time gain over sequential allocation, per workload \
         where MODA gains: {}; the rest is the split of headers from data. The paper \
         prints no such split",
        if shares.is_empty() {
            "none".to_string()
        } else {
            shares.join(", ")
        }
    ))]
}

pub fn figures(d: &Data) -> Vec<Figure> {
    let mut out = Vec::new();
    let u = rows(d.get("moda-utilization"));
    if !u.is_empty() {
        let series = |p: &str, name: &str| Series {
            name: name.into(),
            points: u
                .iter()
                .filter(|r| is(r, "policy", p))
                .filter_map(|r| Some((f(r, "u0")? * 100.0, f(r, "clean_s")?)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "moda-fig7-utilization".into(),
            paper: "moda".into(),
            title: "MODA Figure 7: cleaning time by initial utilization".into(),
            x_label: "Initial utilization (%)".into(),
            y_label: "Cleaning time (s)".into(),
            log_x: false,
            log_y: false,
            series: vec![
                series("sequential", "YAFFS (sequential)"),
                series("moda", "MODA"),
            ],
        });
    }
    // Figure 3 as lines of constant uniformity, and Figure 4.
    let s = rows(d.get("moda-model-surface"));
    if !s.is_empty() {
        let line = |p: f64| Series {
            name: format!("p = {p}"),
            points: s
                .iter()
                .filter(|r| {
                    r.get("inputs")
                        .and_then(|i| f(i, "p"))
                        .is_some_and(|x| (x - p).abs() < 1e-9)
                })
                .filter_map(|r| Some((f(r.get("inputs")?, "u")?, f(r, "seconds")?)))
                .collect(),
        };
        out.push(Figure {
            categories: Vec::new(),
            id: "moda-fig3-model".into(),
            paper: "moda".into(),
            title: "MODA Figure 3: cleaning cost (equation 2), i = 0.1".into(),
            x_label: "Utilization u".into(),
            y_label: "Cleaning cost (s)".into(),
            log_x: false,
            log_y: false,
            series: [0.0, 0.25, 0.5, 0.75, 1.0].into_iter().map(line).collect(),
        });
    }
    if ["moda-model-by-u", "moda-model-by-i", "moda-model-by-p"]
        .iter()
        .any(|k| d.contains_key(k))
    {
        out.push(Figure {
            categories: Vec::new(),
            id: "moda-fig4-model".into(),
            paper: "moda".into(),
            title: "MODA Figure 4: cost as one parameter moves from 0.5".into(),
            x_label: "Parameter value".into(),
            y_label: "Cleaning cost (s)".into(),
            log_x: false,
            log_y: false,
            series: vec![
                Series {
                    name: "(a) utilization".into(),
                    points: sweep(d, "moda-model-by-u", "u"),
                },
                Series {
                    name: "(b) invalidity".into(),
                    points: sweep(d, "moda-model-by-i", "i"),
                },
                Series {
                    name: "(c) uniformity".into(),
                    points: sweep(d, "moda-model-by-p", "p"),
                },
            ],
        });
    }
    // Figure 8 (a-d): each run's time against the utilization before it.
    let rep = rows(d.get("moda-repeat"));
    for (p, label) in [("sequential", "YAFFS"), ("moda", "MODA")] {
        let series = |mode: &str, name: &str| Series {
            name: name.into(),
            points: rep
                .iter()
                .filter(|r| is(r, "policy", p) && is(r, "mode", mode) && is(r, "outcome", "ok"))
                .filter_map(|r| Some((f(r, "u_before")? * 100.0, f(r, "run_s")?)))
                .collect(),
        };
        if !rep.is_empty() {
            out.push(Figure {
                categories: Vec::new(),
                id: format!("moda-fig8-repeat-{p}"),
                paper: "moda".into(),
                title: format!("MODA Figure 8: PostMark again and again, {label}"),
                x_label: "Utilization before the run (%)".into(),
                y_label: "Execution time (s)".into(),
                log_x: false,
                log_y: false,
                series: vec![
                    series("none", "no cleaning"),
                    series("between", "cleaning between runs"),
                    series("idle", "cleaning in idle time"),
                ],
            });
        }
    }
    let t = rows(d.get("moda-table"));
    if !t.is_empty() {
        let workloads: Vec<String> = t
            .iter()
            .filter(|r| is(r, "policy", "moda"))
            .filter_map(|r| r.get("workload")?.as_str().map(String::from))
            .collect();
        let series = |p: &str, name: &str| Series {
            name: name.into(),
            points: workloads
                .iter()
                .enumerate()
                .filter_map(|(i, w)| Some((i as f64, cell(d, w, p, "clean_s")?)))
                .collect(),
        };
        out.push(Figure {
            categories: workloads.clone(),
            id: "moda-fig9-cleaning".into(),
            paper: "moda".into(),
            title: "MODA Table 1 / Figure 9: measured cleaning time".into(),
            x_label: "Workload".into(),
            y_label: "Cleaning time (s)".into(),
            log_x: false,
            log_y: false,
            series: vec![
                series("sequential", "YAFFS (sequential)"),
                series("moda", "MODA"),
                series("dac", "DAC"),
                series("page-hotcold", "page hot/cold"),
            ],
        });
    }
    out
}
