//! What `reproduce` runs and judges: per paper, its experiments (a `nandkit` command at
//! three scales), its claims (the paper's number against ours, with the criterion that
//! decides) and its figures. One file per paper.

mod ma;
mod minv;
mod mnfs;
mod moda;
mod peers;

use std::collections::BTreeMap;

use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;

use super::plot::Figure;
use super::Scale;

/// The papers (and the peer comparison) reproduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Paper {
    Ma,
    Minv,
    Moda,
    Mnfs,
    Peers,
    All,
}

impl Paper {
    pub fn name(self) -> &'static str {
        match self {
            Paper::Ma => "ma",
            Paper::Minv => "minv",
            Paper::Moda => "moda",
            Paper::Mnfs => "mnfs",
            Paper::Peers => "peers",
            Paper::All => "all",
        }
    }

    pub fn each() -> [Paper; 5] {
        [
            Paper::Ma,
            Paper::Moda,
            Paper::Minv,
            Paper::Mnfs,
            Paper::Peers,
        ]
    }
}

/// One experiment: a `nandkit` command printing JSON.
pub struct Experiment {
    pub id: &'static str,
    pub paper: Paper,
    /// What it measures (the paper's table or figure).
    pub what: &'static str,
    /// Its arguments after `nandkit`, at `scale` with `seed` (`--json` included).
    args: fn(Scale, u64) -> Vec<String>,
    /// About how long it takes, host seconds on a 2-core machine (release build, measured
    /// one at a time): smoke, quick, full. Shown before a run starts.
    expected: [f64; 3],
}

impl Experiment {
    pub fn args(&self, scale: Scale, seed: u64) -> Vec<String> {
        (self.args)(scale, seed)
    }

    pub fn expected_s(&self, scale: Scale) -> f64 {
        self.expected[scale as usize]
    }
}

/// Splits a command line written as one string.
pub(crate) fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// Every experiment, in the order they are listed (and sharded).
pub static EXPERIMENTS: &[Experiment] = &[
    ma::IOZONE,
    ma::IOZONE_MLC,
    ma::IOZONE_SLC,
    ma::IOZONE_RANDOM,
    ma::IOZONE_REWRITE,
    ma::MOUNT_P1,
    ma::MOUNT_P4,
    ma::TRACE_MOVIE,
    ma::TRACE_CAMERA,
    ma::TRACE_ANGRYBIRD,
    ma::TRACE_GOOGLEMAP,
    ma::TRACE_WEB,
    moda::MODEL,
    moda::SURFACE,
    moda::BY_U,
    moda::BY_I,
    moda::BY_P,
    moda::TABLE,
    moda::UTILIZATION,
    moda::REPEAT,
    minv::MOUNT,
    minv::TTFS,
    minv::SYNTHETIC,
    minv::SPACE,
    minv::CAPACITY,
    minv::MIX,
    minv::MEASURED,
    mnfs::UNIFORM_MNFS,
    mnfs::UNIFORM_YAFFS,
    mnfs::FILL,
    mnfs::DELETE,
    mnfs::MOUNT,
    peers::PEERS,
];

/// The kept output of each experiment that ran, by id.
pub type Data = BTreeMap<&'static str, Value>;

/// One claim of a paper, judged.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    pub paper: &'static str,
    pub claim: String,
    pub paper_value: f64,
    /// None when its experiment has not run (or failed).
    pub ours: Option<f64>,
    pub unit: &'static str,
    pub holds: bool,
    /// What decides `holds` (direction, ratio, tolerance).
    pub criterion: String,
    /// Where ours comes from, and our explanation when the claim does not hold.
    pub note: String,
}

impl Claim {
    /// A claim judged by `holds(ours)`; not holding without data. (Each argument is a
    /// column of the row, in the order the report shows them.)
    #[allow(clippy::too_many_arguments)]
    pub fn judge(
        paper: Paper,
        claim: &str,
        paper_value: f64,
        ours: Option<f64>,
        unit: &'static str,
        criterion: &str,
        holds: impl Fn(f64) -> bool,
        note: &str,
    ) -> Claim {
        Claim {
            paper: paper.name(),
            claim: claim.into(),
            paper_value,
            ours,
            unit,
            holds: ours.is_some_and(holds),
            criterion: criterion.into(),
            note: note.into(),
        }
    }
}

impl Claim {
    /// For a claim the paper states without a number (a direction, a trend):
    /// `paper_value` is the criterion's threshold, and the note says so.
    pub fn threshold_only(mut self) -> Claim {
        self.note
            .push_str(" (The paper gives no number here: its value is the criterion's threshold.)");
        self
    }
}

pub fn claims(p: Paper, d: &Data) -> Vec<Claim> {
    match p {
        Paper::Ma => ma::claims(d),
        Paper::Minv => minv::claims(d),
        Paper::Moda => moda::claims(d),
        Paper::Mnfs => mnfs::claims(d),
        Paper::Peers => peers::claims(d),
        Paper::All => Vec::new(),
    }
}

pub fn figures(p: Paper, d: &Data) -> Vec<Figure> {
    match p {
        Paper::Ma => ma::figures(d),
        Paper::Minv => minv::figures(d),
        Paper::Moda => moda::figures(d),
        Paper::Mnfs => mnfs::figures(d),
        Paper::Peers => peers::figures(d),
        Paper::All => Vec::new(),
    }
}

/// The rows of a bench's JSON (an array, or one object).
pub fn rows(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(o @ Value::Object(_)) => vec![o],
        _ => Vec::new(),
    }
}

/// A number field of a row.
pub fn f(r: &Value, k: &str) -> Option<f64> {
    r.get(k).and_then(Value::as_f64)
}

/// Whether a row's string field is `v`.
pub fn is(r: &Value, k: &str, v: &str) -> bool {
    r.get(k).and_then(Value::as_str) == Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiment_ids_are_unique_and_every_scale_has_json() {
        let mut ids: Vec<&str> = EXPERIMENTS.iter().map(|e| e.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), EXPERIMENTS.len());
        for e in EXPERIMENTS {
            for s in [Scale::Smoke, Scale::Quick, Scale::Full] {
                let a = e.args(s, 7);
                assert!(a.iter().any(|x| x == "--json"), "{}: {a:?}", e.id);
            }
        }
    }

    #[test]
    fn without_data_every_claim_is_listed_and_none_holds() {
        let d = Data::new();
        for p in Paper::each() {
            for c in claims(p, &d) {
                assert!(c.ours.is_none() && !c.holds, "{c:?}");
            }
        }
    }
}
