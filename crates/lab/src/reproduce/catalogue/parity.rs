//! An extension beside MA's claims: parity across the chips of an array (MA's conclusion
//! names redundancy across chips as what an array still lacks). No paper measured it, so
//! the claims are the parity issue's goal and what the layout predicts: a stripe of P
//! pages carries P-1 of data, so sequential O_SYNC writes keep (P-1)/P of the throughput.

use super::{f, rows, words, Claim, Data, Experiment, Paper};
use crate::reproduce::plot::{Figure, Series};
use crate::reproduce::verdict::Effect;
use crate::reproduce::Scale;

pub const PARITY: Experiment = Experiment {
    id: "parity-array",
    paper: Paper::Parity,
    what: "parity across 4 and 8 TLC chips: 16 MB O_SYNC writes and 4 KiB O_SYNC random \
           overwrites with parity and without, write amplification, a full chip's rebuild",
    args: |s, seed| {
        let size = match s {
            Scale::Smoke => " --device-size 64MiB --seq-size 4MiB --rand-file 1MiB",
            Scale::Quick => "",
            Scale::Full => " --device-size 1GiB",
        };
        words(&format!(
            "bench parity --chips 4,8{size} --seed {seed} --json"
        ))
    },
    expected: [0.5, 1.5, 6.0],
};

/// A field of the row for `chips` chips (nested fields joined by '.').
fn at(d: &Data, chips: f64, path: &str) -> Option<f64> {
    let r = rows(d.get("parity-array"))
        .into_iter()
        .find(|r| f(r, "chips") == Some(chips))?;
    let mut v = r;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        if parts.peek().is_none() {
            return f(v, p);
        }
        v = v.get(p)?;
    }
    None
}

pub fn claims(d: &Data) -> Vec<Claim> {
    let mut out = vec![Claim::direction(
        Paper::Parity,
        "Extension (the parity issue's goal, not a paper's): 4 chips with parity keep at \
         least 70% of 4 chips' 16 MB O_SYNC write throughput without parity",
        Effect::above(0.7, 0.0),
        at(d, 4.0, "seq_write.ratio"),
        "x of no parity",
    )
    .note(
        "a stripe is one page on every chip, 3 of data and their XOR: the file system's page \
         is 3 chip pages, every stripe is written whole in one batch, so no parity is ever \
         read back or rewritten",
    )];
    for chips in [4.0, 8.0] {
        out.push(
            Claim::figure(
                Paper::Parity,
                &format!(
                    "Layout: {chips} chips with parity write 16 MB at (P-1)/P of the speed \
                     without (one program in P is parity)"
                ),
                (chips - 1.0) / chips,
                at(d, chips, "seq_write.ratio"),
                "x of no parity",
            )
            .note(
                "what the layout predicts, not a paper's number: the file system's own pages \
                 (headers, summaries) are stripes too, which moves the ratio a little",
            ),
        );
    }
    out.push(
        Claim::ratio(
            Paper::Parity,
            "Cost of padding: a 4 KiB O_SYNC write programs a whole stripe, so on 4 chips its \
             write amplification is P = 4 times that without parity",
            4.0,
            super::over(
                at(d, 4.0, "rand_write_4k.parity_wa"),
                at(d, 4.0, "rand_write_4k.plain_wa"),
            ),
            "x of no parity",
        )
        .note(
            "the price of whole stripes only (no read-modify-write, no write hole): small \
             synchronous writes pad, a data page and its header each becoming P chip \
             programs; their throughput stays close (bench parity: 88% on 4 chips), as the \
             pieces program on different chips at once",
        ),
    );
    out
}

pub fn figures(d: &Data) -> Vec<Figure> {
    let r = rows(d.get("parity-array"));
    if r.is_empty() {
        return Vec::new();
    }
    let cats = vec![
        "16 MB seq, 4 chips".to_string(),
        "16 MB seq, 8 chips".to_string(),
        "4 KiB rand, 4 chips".to_string(),
        "4 KiB rand, 8 chips".to_string(),
    ];
    let series = |name: &str, field: &str| Series {
        name: name.into(),
        points: [
            (4.0, "seq_write"),
            (8.0, "seq_write"),
            (4.0, "rand_write_4k"),
            (8.0, "rand_write_4k"),
        ]
        .iter()
        .enumerate()
        .filter_map(|(i, (chips, w))| Some((i as f64, at(d, *chips, &format!("{w}.{field}"))?)))
        .collect(),
    };
    vec![Figure {
        categories: cats,
        id: "parity-throughput".into(),
        paper: "parity".into(),
        title: "Parity across chips: O_SYNC write throughput (TLC)".into(),
        x_label: "Workload".into(),
        y_label: "Throughput (MB/s, simulated)".into(),
        log_x: false,
        log_y: true,
        series: vec![
            series("no parity", "plain_mb_per_s"),
            series("parity", "parity_mb_per_s"),
        ],
    }]
}
