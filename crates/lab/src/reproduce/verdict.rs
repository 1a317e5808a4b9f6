//! How close we came: the verdict on one claim, from the paper's number, ours, the
//! claim's tolerance and the effect the paper reports.
//!
//! - `matches`: ours is on the paper's side of "no effect" and within the tolerance;
//! - `same direction`: on the paper's side, beyond noise, but outside the tolerance;
//! - `differs`: no effect where the paper has one, the opposite one, or no data.
//!
//! A claim whose effect is on the other side of its null (1 for a ratio, the baseline for
//! a difference) from the paper's is `differs` whatever the tolerance says: a tolerance
//! never turns a reversed effect into a match.

use serde::Serialize;

/// The three verdicts, as `claims.json` and the page spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    #[serde(rename = "matches")]
    Matches,
    #[serde(rename = "same direction")]
    SameDirection,
    #[serde(rename = "differs")]
    Differs,
}

impl Verdict {
    pub const ALL: [Verdict; 3] = [Verdict::Matches, Verdict::SameDirection, Verdict::Differs];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::SameDirection => "same direction",
            Verdict::Differs => "differs",
        }
    }

    /// What the verdict means, for the page's legend.
    pub fn meaning(self) -> &'static str {
        match self {
            Verdict::Matches => {
                "ours is within the claim's tolerance of the paper's value, on the same side \
                 of no effect (a claim the paper states only as a direction matches when the \
                 direction holds beyond noise)"
            }
            Verdict::SameDirection => {
                "the effect the paper reports is there (same side, beyond noise) but ours is \
                 outside the tolerance; the note says why"
            }
            Verdict::Differs => {
                "no effect where the paper has one, the opposite effect, or no data; the note \
                 names the mechanism"
            }
        }
    }
}

/// How close to the paper's value ours must be to match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// ours / paper within [lo, hi]: the default for ratios is 0.8x-1.25x.
    Ratio { lo: f64, hi: f64 },
    /// |ours / paper - 1| at most this: the default for absolute figures is 10%.
    Relative(f64),
    /// |ours - paper| at most this, in the claim's unit (for a paper value of 0, or a
    /// figure already in percent).
    Absolute(f64),
    /// The paper prints no number, only a direction: the direction is the whole claim.
    DirectionOnly,
}

impl Tolerance {
    /// The default for a ratio between two measurements.
    pub const RATIO: Tolerance = Tolerance::Ratio { lo: 0.8, hi: 1.25 };
    /// The default for an absolute figure.
    pub const FIGURE: Tolerance = Tolerance::Relative(0.10);

    fn within(self, paper: f64, ours: f64) -> bool {
        match self {
            Tolerance::Ratio { lo, hi } => {
                paper != 0.0 && {
                    let r = ours / paper;
                    (lo..=hi).contains(&r)
                }
            }
            Tolerance::Relative(frac) => (ours - paper).abs() <= frac * paper.abs(),
            Tolerance::Absolute(abs) => (ours - paper).abs() <= abs,
            Tolerance::DirectionOnly => true,
        }
    }

    /// The rule, in words, with the claim's unit.
    pub fn rule(self, unit: &str) -> String {
        match self {
            Tolerance::Ratio { lo, hi } => {
                format!("ours / paper within {lo:.2}x-{hi:.2}x")
            }
            Tolerance::Relative(frac) => {
                format!("within {}% of the paper's value", trim(frac * 100.0))
            }
            Tolerance::Absolute(abs) => format!("within {} {unit} of the paper's value", trim(abs)),
            Tolerance::DirectionOnly => {
                "direction only: the paper prints no number for this".to_string()
            }
        }
    }
}

/// Which side of its null an effect lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Above,
    Below,
    /// Within noise of the null: no effect.
    None,
}

/// The effect a claim is about: "no effect" is `null` (1 for a ratio, 0 for a
/// difference), and values within `noise` of it (in the claim's unit) are no effect.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Effect {
    pub null: f64,
    pub noise: f64,
    /// The paper's side; taken from the paper's value unless the paper states only a
    /// direction (then its value is the threshold and the side is given).
    pub paper_side: Option<Side>,
}

impl Effect {
    /// A ratio: no effect is 1, and 0.98-1.02 is a tie.
    pub const RATIO: Effect = Effect {
        null: 1.0,
        noise: 0.02,
        paper_side: None,
    };

    /// An effect on the paper's side of `null` (from its value), ties within `noise`.
    pub fn around(null: f64, noise: f64) -> Effect {
        Effect {
            null,
            noise,
            paper_side: None,
        }
    }

    /// For a claim stated only as a direction: above `null` by more than `noise`.
    pub fn above(null: f64, noise: f64) -> Effect {
        Effect {
            paper_side: Some(Side::Above),
            ..Effect::around(null, noise)
        }
    }

    /// For a claim stated only as a direction: below `null` by more than `noise`.
    pub fn below(null: f64, noise: f64) -> Effect {
        Effect {
            paper_side: Some(Side::Below),
            ..Effect::around(null, noise)
        }
    }

    /// For a claim that there is no effect: within `noise` of `null`.
    pub fn none(null: f64, noise: f64) -> Effect {
        Effect {
            paper_side: Some(Side::None),
            ..Effect::around(null, noise)
        }
    }

    pub fn side(&self, x: f64) -> Side {
        if x > self.null + self.noise {
            Side::Above
        } else if x < self.null - self.noise {
            Side::Below
        } else {
            Side::None
        }
    }

    /// The rule, in words.
    pub fn rule(&self, paper: f64, unit: &str) -> String {
        let side = self.paper_side.unwrap_or_else(|| self.side(paper));
        let (lo, hi) = (self.null - self.noise, self.null + self.noise);
        match side {
            Side::Above => format!(
                "above {} {unit} (no effect: {} to {})",
                trim(hi),
                trim(lo),
                trim(hi)
            ),
            Side::Below => format!(
                "below {} {unit} (no effect: {} to {})",
                trim(lo),
                trim(lo),
                trim(hi)
            ),
            Side::None => format!("no effect: between {} and {} {unit}", trim(lo), trim(hi)),
        }
    }
}

/// The verdict on `ours` against `paper` (None: the experiment has no data).
pub fn judge(
    paper: f64,
    ours: Option<f64>,
    tolerance: Tolerance,
    effect: Option<Effect>,
) -> Verdict {
    let Some(ours) = ours.filter(|x| !x.is_nan()) else {
        return Verdict::Differs;
    };
    if let Some(e) = effect {
        let paper_side = e.paper_side.unwrap_or_else(|| e.side(paper));
        if e.side(ours) != paper_side {
            return Verdict::Differs;
        }
        if tolerance.within(paper, ours) {
            Verdict::Matches
        } else {
            Verdict::SameDirection
        }
    } else if tolerance.within(paper, ours) {
        Verdict::Matches
    } else {
        Verdict::Differs
    }
}

/// A number without float noise or trailing zeros (for rules).
fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(paper: f64, ours: f64) -> Verdict {
        judge(paper, Some(ours), Tolerance::RATIO, Some(Effect::RATIO))
    }

    #[test]
    fn a_ratio_is_judged_by_tolerance_and_side() {
        // The three cases: 0.5x against 2x is the opposite effect; 1.9x is close;
        // 5x is the paper's effect, much larger.
        assert_eq!(ratio(2.0, 0.5), Verdict::Differs);
        assert_eq!(ratio(2.0, 1.9), Verdict::Matches);
        assert_eq!(ratio(2.0, 5.0), Verdict::SameDirection);
        // A tie is no effect.
        assert_eq!(ratio(2.24, 1.0011), Verdict::Differs);
        // The tolerance's edges.
        assert_eq!(ratio(2.0, 1.6), Verdict::Matches);
        assert_eq!(ratio(2.0, 2.5), Verdict::Matches);
        assert_eq!(ratio(2.0, 1.59), Verdict::SameDirection);
        assert_eq!(ratio(2.0, 2.51), Verdict::SameDirection);
        // Below 1 alike: a 17% slower mount against ours 39% faster.
        assert_eq!(ratio(1.17, 0.61), Verdict::Differs);
        assert_eq!(ratio(0.37, 0.12), Verdict::SameDirection);
        assert_eq!(ratio(0.284, 0.29), Verdict::Matches);
    }

    #[test]
    fn a_tolerance_never_matches_across_the_null() {
        // 1.05 against 0.97 is within 0.8-1.25 of each other, but on either side of 1.
        assert_eq!(ratio(1.05, 0.97), Verdict::Differs);
        assert_eq!(ratio(0.97, 1.05), Verdict::Differs);
    }

    #[test]
    fn a_figure_without_an_effect_matches_or_differs() {
        let t = Tolerance::FIGURE;
        assert_eq!(judge(100.0, Some(109.0), t, None), Verdict::Matches);
        assert_eq!(judge(100.0, Some(91.0), t, None), Verdict::Matches);
        assert_eq!(judge(100.0, Some(111.0), t, None), Verdict::Differs);
        assert_eq!(
            judge(0.0, Some(0.0), Tolerance::Absolute(0.0), None),
            Verdict::Matches
        );
        assert_eq!(
            judge(0.0, Some(1.0), Tolerance::Absolute(0.0), None),
            Verdict::Differs
        );
        assert_eq!(judge(100.0, None, t, None), Verdict::Differs);
        assert_eq!(judge(100.0, Some(f64::NAN), t, None), Verdict::Differs);
    }

    #[test]
    fn a_direction_only_claim_matches_when_the_direction_holds() {
        let e = Effect::above(1.0, 0.02);
        let d = |x| judge(1.0, Some(x), Tolerance::DirectionOnly, Some(e));
        assert_eq!(d(388.0), Verdict::Matches);
        assert_eq!(d(1.01), Verdict::Differs, "within noise");
        assert_eq!(d(0.5), Verdict::Differs);
    }

    #[test]
    fn rules_are_printed_in_words() {
        assert_eq!(
            Tolerance::RATIO.rule("x"),
            "ours / paper within 0.80x-1.25x"
        );
        assert_eq!(
            Tolerance::FIGURE.rule("KB"),
            "within 10% of the paper's value"
        );
        assert_eq!(
            Effect::RATIO.rule(2.0, "x"),
            "above 1.02 x (no effect: 0.98 to 1.02)"
        );
    }

    /// The noise band is `noise` in the claim's unit either side of the null, whatever the
    /// null is: at a null of 0 (a difference) it is as wide as at a null of 1 (a ratio), not
    /// a fraction of the null (which would vanish at 0). Its edges are no effect; anything
    /// past them is an effect. Dyadic values, so the edges are exact in floating point.
    #[test]
    fn the_noise_band_is_absolute_and_its_edges_are_no_effect() {
        for null in [0.0, 1.0, -2.0, 100.0] {
            let e = Effect::around(null, 0.25);
            let tiny = 1.0 / 1024.0;
            assert_eq!(e.side(null), Side::None, "null {null}");
            assert_eq!(e.side(null + 0.25), Side::None, "upper edge, null {null}");
            assert_eq!(e.side(null - 0.25), Side::None, "lower edge, null {null}");
            assert_eq!(e.side(null + 0.125), Side::None, "inside, null {null}");
            assert_eq!(
                e.side(null + 0.25 + tiny),
                Side::Above,
                "past the upper edge"
            );
            assert_eq!(
                e.side(null - 0.25 - tiny),
                Side::Below,
                "past the lower edge"
            );
        }
        // A null of 0 with no noise: only 0 itself is no effect.
        let e = Effect::around(0.0, 0.0);
        assert_eq!(e.side(0.0), Side::None);
        assert_eq!(e.side(1e-9), Side::Above);
        assert_eq!(e.side(-1e-9), Side::Below);
    }

    /// Verdicts for a claim about a difference (null 0) and one about a ratio (null 1), at
    /// and past each edge of the band: within noise of the null is "no effect", which
    /// differs from a paper that has one and matches a paper that has none.
    #[test]
    fn verdicts_at_nulls_of_0_and_1_and_each_band_edge() {
        let t = Tolerance::Absolute(100.0);
        for null in [0.0, 1.0] {
            let e = Effect::around(null, 0.5);
            let v = |paper: f64, ours: f64| judge(paper, Some(ours), t, Some(e));
            let tiny = 1.0 / 1024.0;
            // The paper reports an effect above the null.
            assert_eq!(
                v(null + 8.0, null + 0.5),
                Verdict::Differs,
                "null {null}: edge"
            );
            assert_eq!(
                v(null + 8.0, null + 0.5 + tiny),
                Verdict::Matches,
                "null {null}"
            );
            assert_eq!(
                v(null + 8.0, null + 0.25),
                Verdict::Differs,
                "null {null}: inside"
            );
            assert_eq!(
                v(null + 8.0, null - 0.5 - tiny),
                Verdict::Differs,
                "opposite"
            );
            // The paper reports an effect below it.
            assert_eq!(
                v(null - 8.0, null - 0.5),
                Verdict::Differs,
                "null {null}: edge"
            );
            assert_eq!(
                v(null - 8.0, null - 0.5 - tiny),
                Verdict::Matches,
                "null {null}"
            );
            // Past the edge, far outside the tolerance: the effect, not the figure.
            let far = judge(
                null + 8.0,
                Some(null + 500.0),
                Tolerance::Absolute(1.0),
                Some(e),
            );
            assert_eq!(far, Verdict::SameDirection, "null {null}");
            // The paper's own value within the band: its claim is "no effect".
            assert_eq!(v(null + 0.5, null - 0.5), Verdict::Matches, "null {null}");
            assert_eq!(v(null, null + 0.5 + tiny), Verdict::Differs, "null {null}");
            // Direction-only claims, at and past the edge.
            let above = Effect::above(null, 0.5);
            let d = |x| judge(null, Some(x), Tolerance::DirectionOnly, Some(above));
            assert_eq!(d(null + 0.5), Verdict::Differs, "null {null}: on the edge");
            assert_eq!(d(null + 0.5 + tiny), Verdict::Matches, "null {null}");
            let below = Effect::below(null, 0.5);
            let d = |x| judge(null, Some(x), Tolerance::DirectionOnly, Some(below));
            assert_eq!(d(null - 0.5), Verdict::Differs, "null {null}: on the edge");
            assert_eq!(d(null - 0.5 - tiny), Verdict::Matches, "null {null}");
            let none = Effect::none(null, 0.5);
            let d = |x| judge(null, Some(x), Tolerance::DirectionOnly, Some(none));
            assert_eq!(d(null + 0.5), Verdict::Matches, "null {null}: on the edge");
            assert_eq!(d(null - 0.5), Verdict::Matches, "null {null}: on the edge");
            assert_eq!(d(null + 0.5 + tiny), Verdict::Differs, "null {null}");
        }
        // The rule prints the same band.
        assert_eq!(
            Effect::around(0.0, 0.5).rule(8.0, "s"),
            "above 0.5 s (no effect: -0.5 to 0.5)"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            // Deterministic: the same cases every run, and no regression files.
            rng_seed: proptest::test_runner::RngSeed::Fixed(62),
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// For any null, band and value (multiples of 1/8, so every sum is exact): the side
        /// is Above exactly past null + noise, Below exactly past null - noise, else None;
        /// and moving the null and the value together never changes it.
        #[test]
        fn the_side_is_the_distance_from_the_null_against_the_noise(
            null8 in -64i32..64,
            noise8 in 0i32..32,
            d8 in -64i32..64,
            shift8 in -64i32..64,
        ) {
            let (null, noise, d) = (f64::from(null8) / 8.0, f64::from(noise8) / 8.0, f64::from(d8) / 8.0);
            let want = if d8 > noise8 {
                Side::Above
            } else if d8 < -noise8 {
                Side::Below
            } else {
                Side::None
            };
            proptest::prop_assert_eq!(Effect::around(null, noise).side(null + d), want);
            let moved = null + f64::from(shift8) / 8.0;
            proptest::prop_assert_eq!(Effect::around(moved, noise).side(moved + d), want);
        }
    }
}
