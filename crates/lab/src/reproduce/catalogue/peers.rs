//! A real peer on the same simulated flash: littlefs (its C code, through the block-device
//! API) against yaffs. No paper: littlefs's own stated design goals (power-loss
//! resilience, bounded RAM) are the claims, and what we found is reported beside them.

use super::{f, is, rows, words, Claim, Data, Experiment, Paper};
use crate::reproduce::plot::{Figure, Series};
use crate::reproduce::verdict::{Effect, Tolerance};
use crate::reproduce::Scale;

pub const PEERS: Experiment = Experiment {
    id: "peers-littlefs",
    paper: Paper::Peers,
    what: "littlefs and yaffs on the same flash: scripted workloads, RAM, flash work, \
           power cuts at every sampled point",
    args: |s, seed| {
        // The host budget is lifted so a row's outcome depends on simulated time only.
        let base = match s {
            Scale::Smoke => {
                "bench peers --fs littlefs,yaffs --workloads none --device-size 16MiB \
                 --small-files 50 --overwrites 10 --cut-points 3"
            }
            Scale::Quick => {
                "bench peers --fs littlefs,yaffs --workloads none --small-files 100 \
                 --overwrites 20 --cut-points 8"
            }
            Scale::Full => "bench peers --fs littlefs,yaffs",
        };
        words(&format!(
            "{base} --budget-host-s 1000000 --workload-seed {seed} --json"
        ))
    },
    expected: [3.0, 12.0, 19.0],
};

/// (cut points that mounted with fsync'd data whole, cut points) from a power-cut row.
fn cuts(outcome: &str) -> Option<(f64, f64)> {
    // "K of N cut points mount, fsync'd data whole at M[; ...]"
    let n: f64 = outcome
        .split(" of ")
        .nth(1)?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    let m: f64 = outcome
        .split("whole at ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((m, n))
}

pub fn claims(d: &Data) -> Vec<Claim> {
    let r = rows(d.get("peers-littlefs"));
    let mut out = Vec::new();
    for (fs, label) in [("littlefs", "littlefs"), ("yaffs", "yaffs")] {
        let whole = r
            .iter()
            .find(|x| is(x, "fs", fs) && is(x, "workload", "power-cut"))
            .and_then(|x| cuts(x.get("outcome")?.as_str()?))
            .map(|(m, n)| m / n * 100.0);
        out.push(
            Claim::figure(
                Paper::Peers,
                &format!("{label} keeps all fsync'd data at every power cut tried"),
                100.0,
                whole,
                "% of cuts",
            )
            .tolerance(Tolerance::Absolute(0.0), "every cut point")
            .note(
                "power cut at evenly spread flash operations of a write workload; the next \
                 mount must succeed and every fsync'd byte read back",
            ),
        );
    }
    // RAM: littlefs against yaffs on the workloads both finished.
    let heap = |fs: &str, w: &str| {
        r.iter()
            .find(|x| is(x, "fs", fs) && is(x, "workload", w) && is(x, "outcome", "ok"))
            .and_then(|x| f(x, "heap_bytes"))
    };
    let ratios: Vec<f64> = r
        .iter()
        .filter(|x| is(x, "fs", "littlefs"))
        .filter_map(|x| {
            let w = x.get("workload")?.as_str()?;
            Some(heap("littlefs", w)? / heap("yaffs", w)?)
        })
        .collect();
    let median = (!ratios.is_empty()).then(|| {
        let mut v = ratios.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    });
    out.push(
        Claim::direction(
            Paper::Peers,
            "littlefs needs less RAM than yaffs (median heap ratio over workloads)",
            Effect::below(1.0, 0.02),
            median,
            "x of yaffs",
        )
        .note(
            "littlefs's RAM is bounded by its caches; yaffs keeps an object per file and a \
             table per block",
        ),
    );
    out
}

pub fn figures(d: &Data) -> Vec<Figure> {
    let r = rows(d.get("peers-littlefs"));
    if r.is_empty() {
        return Vec::new();
    }
    let workloads: Vec<String> = r
        .iter()
        .filter(|x| is(x, "fs", "yaffs") && f(x, "heap_bytes").is_some_and(|h| h > 0.0))
        .filter_map(|x| x.get("workload")?.as_str().map(String::from))
        .collect();
    let series = |fs: &str, k: &str, scale: f64| Series {
        name: fs.into(),
        points: workloads
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                let x = r.iter().find(|x| is(x, "fs", fs) && is(x, "workload", w))?;
                Some((i as f64, f(x, k)? * scale))
            })
            .collect(),
    };
    vec![
        Figure {
            categories: workloads.clone(),
            id: "peers-heap".into(),
            paper: "peers".into(),
            title: "littlefs vs yaffs: heap after each workload".into(),
            x_label: "Workload".into(),
            y_label: "Heap (KiB, log)".into(),
            log_x: false,
            log_y: true,
            series: vec![
                series("littlefs", "heap_bytes", 1.0 / 1024.0),
                series("yaffs", "heap_bytes", 1.0 / 1024.0),
            ],
        },
        Figure {
            categories: workloads.clone(),
            id: "peers-time".into(),
            paper: "peers".into(),
            title: "littlefs vs yaffs: simulated time of each workload".into(),
            x_label: "Workload".into(),
            y_label: "Time (ms, log)".into(),
            log_x: false,
            log_y: true,
            series: vec![
                series("littlefs", "sim_ms", 1.0),
                series("yaffs", "sim_ms", 1.0),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_cut_outcomes_parse() {
        assert_eq!(
            cuts("5 of 5 cut points mount, fsync'd data whole at 5"),
            Some((5.0, 5.0))
        );
        assert_eq!(
            cuts("4 of 5 cut points mount, fsync'd data whole at 4; first failure: x"),
            Some((4.0, 5.0))
        );
        assert_eq!(cuts("ok"), None);
    }
}
