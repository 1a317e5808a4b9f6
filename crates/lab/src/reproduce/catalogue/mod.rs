//! What `reproduce` runs and judges: per paper, its experiments (a `nandkit` command at
//! three scales), its claims (the paper's number against ours, with the criterion that
//! decides) and its figures. One file per paper.

mod ma;
mod minv;
mod mnfs;
mod moda;
mod parity;
mod peers;

use std::collections::BTreeMap;

use clap::ValueEnum;
use serde::Serialize;
use serde_json::Value;

use super::plot::Figure;
use super::verdict::{self, Effect, Tolerance, Verdict};
use super::Scale;

/// The papers (and the peer comparison) reproduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Paper {
    Ma,
    Minv,
    Moda,
    Mnfs,
    Peers,
    /// An extension beside MA: parity across the chips (no paper; the goal).
    Parity,
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
            Paper::Parity => "parity",
            Paper::All => "all",
        }
    }

    pub fn each() -> [Paper; 6] {
        [
            Paper::Ma,
            Paper::Parity,
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
    ma::IOZONE_SW,
    ma::IOZONE_SLC_SW,
    ma::MOUNT_P1_SW,
    ma::MOUNT_P4_SW,
    ma::BOARD_WRITE,
    ma::BOARD_READ,
    ma::TRACE_MOVIE,
    ma::TRACE_CAMERA,
    ma::TRACE_ANGRYBIRD,
    ma::TRACE_GOOGLEMAP,
    ma::TRACE_WEB,
    parity::PARITY,
    moda::MODEL,
    moda::MODEL_CAMERA,
    moda::MODEL_PHONE,
    moda::MODEL_RECORDER,
    moda::MODEL_FAX_MODA,
    moda::MODEL_POSTMARK,
    moda::MODEL_ANDREW,
    moda::SURFACE,
    moda::BY_U,
    moda::BY_I,
    moda::BY_P,
    moda::TABLE,
    moda::TABLE_YAFFS1,
    moda::SEARCH_READS,
    moda::UNFITTED,
    moda::ABLATION,
    moda::ANDREW_980,
    moda::UTILIZATION,
    moda::REPEAT,
    minv::MOUNT,
    minv::MOUNT_FILES,
    minv::MOUNT_DATASHEET,
    minv::TTFS,
    minv::SYNTHETIC,
    minv::SPACE,
    minv::CAPACITY,
    minv::MIX,
    minv::MEASURED,
    mnfs::UNIFORM_MNFS,
    mnfs::UNIFORM_YAFFS1,
    mnfs::UNIFORM_YAFFS,
    mnfs::FILL,
    mnfs::DELETE,
    mnfs::MOUNT,
    peers::PEERS,
];

/// The kept output of each experiment that ran, by id.
pub type Data = BTreeMap<&'static str, Value>;

/// One claim of a paper: the paper's number, ours, and what decides the verdict.
#[derive(Clone, Debug)]
pub struct Claim {
    pub paper: &'static str,
    pub claim: String,
    pub paper_value: f64,
    /// None when its experiment has not run (or failed).
    pub ours: Option<f64>,
    pub unit: &'static str,
    /// How close ours must be to match.
    pub tolerance: Tolerance,
    /// Why the claim sets its own tolerance (empty: the default for its kind).
    pub tolerance_why: String,
    /// The effect the paper reports (None: a figure with no "no effect" value).
    pub effect: Option<Effect>,
    /// Where ours comes from, and the mechanism behind any difference.
    pub note: String,
    /// The same claim measured against the other YAFFS: the modern `yaffs` beside a claim
    /// judged against `yaffs1` (the YAFFS the paper measured), or `yaffs1` beside one
    /// judged against `yaffs`. Judged by the same rules; it does not count in the totals.
    pub beside: Option<Beside>,
}

/// A claim's value against the other YAFFS baseline.
#[derive(Clone, Copy, Debug)]
pub struct Beside {
    pub baseline: &'static str,
    pub ours: Option<f64>,
}

/// `Beside` as `claims.json` has it.
#[derive(Serialize)]
pub struct BesideRow {
    pub baseline: &'static str,
    pub ours: Option<f64>,
    pub verdict: Verdict,
}

/// A claim as `claims.json` has it.
#[derive(Serialize)]
pub struct Row<'a> {
    pub paper: &'a str,
    pub claim: &'a str,
    pub paper_value: f64,
    pub ours: Option<f64>,
    pub unit: &'a str,
    pub verdict: Verdict,
    /// The rule for `matches`.
    pub tolerance: String,
    /// The rule for `same direction` (None: a figure with no direction).
    pub direction: Option<String>,
    pub note: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beside: Option<BesideRow>,
}

impl Claim {
    /// A ratio of two measurements: no effect is 1 (0.98-1.02 a tie), and ours matches
    /// within 0.8x-1.25x of the paper's ratio.
    pub fn ratio(
        paper: Paper,
        claim: &str,
        paper_value: f64,
        ours: Option<f64>,
        unit: &'static str,
    ) -> Claim {
        Claim {
            tolerance: Tolerance::RATIO,
            effect: Some(Effect::RATIO),
            ..Claim::figure(paper, claim, paper_value, ours, unit)
        }
    }

    /// An absolute figure (a size, a time): matches within 10% of the paper's, else
    /// differs; `effect` gives it a direction.
    pub fn figure(
        paper: Paper,
        claim: &str,
        paper_value: f64,
        ours: Option<f64>,
        unit: &'static str,
    ) -> Claim {
        Claim {
            paper: paper.name(),
            claim: claim.into(),
            paper_value,
            ours,
            unit,
            tolerance: Tolerance::FIGURE,
            tolerance_why: String::new(),
            effect: None,
            note: String::new(),
            beside: None,
        }
    }

    /// A claim the paper states only as a direction (no number): `paper_value` is the
    /// effect's threshold, and ours matches when it lies on the stated side beyond noise.
    pub fn direction(
        paper: Paper,
        claim: &str,
        effect: Effect,
        ours: Option<f64>,
        unit: &'static str,
    ) -> Claim {
        debug_assert!(
            effect.paper_side.is_some(),
            "{claim}: a direction needs its side"
        );
        Claim {
            tolerance: Tolerance::DirectionOnly,
            effect: Some(effect),
            ..Claim::figure(paper, claim, effect.null, ours, unit)
        }
    }

    /// Sets the claim's own tolerance, with the reason.
    pub fn tolerance(mut self, t: Tolerance, why: &str) -> Claim {
        self.tolerance = t;
        self.tolerance_why = why.into();
        self
    }

    /// Gives the claim the effect the paper reports (the paper's side from its value).
    pub fn effect(mut self, e: Effect) -> Claim {
        self.effect = Some(e);
        self
    }

    pub fn note(mut self, note: &str) -> Claim {
        self.note = note.into();
        self
    }

    /// The same claim against the other YAFFS baseline (see [`Claim::beside`]).
    pub fn beside(mut self, baseline: &'static str, ours: Option<f64>) -> Claim {
        self.beside = Some(Beside { baseline, ours });
        self
    }

    pub fn verdict(&self) -> Verdict {
        verdict::judge(self.paper_value, self.ours, self.tolerance, self.effect)
    }

    /// The verdict the claim gets against the other baseline, by the same rules.
    pub fn beside_verdict(&self) -> Option<(Beside, Verdict)> {
        let b = self.beside?;
        Some((
            b,
            verdict::judge(self.paper_value, b.ours, self.tolerance, self.effect),
        ))
    }

    pub fn row(&self) -> Row<'_> {
        let mut tolerance = self.tolerance.rule(self.unit);
        if !self.tolerance_why.is_empty() {
            tolerance = format!("{tolerance} ({})", self.tolerance_why);
        }
        Row {
            paper: self.paper,
            claim: &self.claim,
            paper_value: self.paper_value,
            ours: self.ours,
            unit: self.unit,
            verdict: self.verdict(),
            tolerance,
            direction: self.effect.map(|e| e.rule(self.paper_value, self.unit)),
            note: &self.note,
            beside: self.beside_verdict().map(|(b, verdict)| BesideRow {
                baseline: b.baseline,
                ours: b.ours,
                verdict,
            }),
        }
    }
}

pub fn claims(p: Paper, d: &Data) -> Vec<Claim> {
    match p {
        Paper::Ma => ma::claims(d),
        Paper::Minv => minv::claims(d),
        Paper::Moda => moda::claims(d),
        Paper::Mnfs => mnfs::claims(d),
        Paper::Peers => peers::claims(d),
        Paper::Parity => parity::claims(d),
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
        Paper::Parity => parity::figures(d),
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

/// The ratio of two measurements, when both are there.
pub fn over(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
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

    /// The value against the other YAFFS is judged by the claim's own rules and kept out
    /// of the claim's verdict.
    #[test]
    fn a_beside_value_is_judged_by_the_same_rules() {
        let c =
            Claim::ratio(Paper::Mnfs, "planted", 2.0, Some(1.9), "x").beside("yaffs", Some(0.5));
        assert_eq!(c.verdict(), Verdict::Matches);
        let (b, v) = c.beside_verdict().expect("a beside value");
        assert_eq!((b.baseline, v), ("yaffs", Verdict::Differs));
        let row = serde_json::to_value(c.row()).unwrap();
        assert_eq!(row["verdict"], "matches");
        assert_eq!(row["beside"]["baseline"], "yaffs");
        assert_eq!(row["beside"]["verdict"], "differs");
        let plain = Claim::ratio(Paper::Mnfs, "planted", 2.0, Some(1.9), "x");
        assert!(serde_json::to_value(plain.row())
            .unwrap()
            .get("beside")
            .is_none());
    }

    #[test]
    fn a_planted_ratio_claim_gets_the_verdict_its_distance_says() {
        let planted = |ours| Claim::ratio(Paper::Ma, "planted", 2.0, Some(ours), "x").verdict();
        assert_eq!(planted(0.5), Verdict::Differs);
        assert_eq!(planted(1.9), Verdict::Matches);
        assert_eq!(planted(5.0), Verdict::SameDirection);
        let c = Claim::ratio(Paper::Ma, "planted", 2.0, Some(5.0), "x");
        assert_eq!(
            serde_json::to_value(c.row()).unwrap()["verdict"],
            "same direction"
        );
    }

    #[test]
    fn every_claim_has_a_note_and_a_paper_value() {
        let d = Data::new();
        for p in Paper::each() {
            for c in claims(p, &d) {
                assert!(!c.note.is_empty(), "{c:?}");
                assert!(c.paper_value.is_finite(), "{c:?}");
            }
        }
    }

    #[test]
    fn without_data_every_claim_is_listed_and_differs() {
        let d = Data::new();
        for p in Paper::each() {
            for c in claims(p, &d) {
                assert!(c.ours.is_none(), "{c:?}");
                assert_eq!(c.verdict(), Verdict::Differs, "{c:?}");
            }
        }
    }
}
