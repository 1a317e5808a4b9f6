//! The report: `claims.json` (a row per claim), one SVG per figure, `meta.json` (what ran,
//! how) and `index.html`, which shows all of it with nothing fetched from anywhere.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use super::catalogue::{self, Claim, Data, Paper};
use super::verdict::Verdict;
use super::{plot, runner, Scale};

#[derive(Serialize)]
struct Meta<'a> {
    nandkit_version: &'a str,
    scale: &'a str,
    seed: u64,
    shard: Option<String>,
    experiments: Vec<ExperimentMeta>,
}

#[derive(Serialize)]
struct ExperimentMeta {
    id: &'static str,
    paper: &'static str,
    what: &'static str,
    command: String,
    /// What this scale changes from the full one (its flags that differ).
    changes: String,
    data: Option<String>,
}

/// Loads what the experiments of `scale` left in `out`.
fn load(out: &Path, scale: Scale) -> Data {
    let mut d = BTreeMap::new();
    for e in catalogue::EXPERIMENTS {
        let p = runner::data_path(out, e, scale);
        if let Some(v) = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            d.insert(e.id, v);
        }
    }
    d
}

/// Writes the report for what is in `out`; returns the summary table for the terminal.
pub fn write(
    out: &Path,
    paper: Paper,
    scale: Scale,
    seed: u64,
    shard: Option<(usize, usize)>,
    failed: &[(&'static str, String)],
) -> anyhow::Result<String> {
    let data = load(out, scale);
    let papers: Vec<Paper> = Paper::each()
        .into_iter()
        .filter(|&p| paper == Paper::All || p == paper)
        .collect();
    let mut claims: Vec<Claim> = Vec::new();
    let mut figures = Vec::new();
    for &p in &papers {
        claims.extend(catalogue::claims(p, &data));
        figures.extend(catalogue::figures(p, &data));
    }
    let rows: Vec<catalogue::Row> = claims.iter().map(Claim::row).collect();
    std::fs::write(
        out.join("claims.json"),
        serde_json::to_string_pretty(&rows)? + "\n",
    )
    .context("writing claims.json")?;
    for f in &figures {
        let svg = plot::svg(f).with_context(|| format!("drawing {}", f.id))?;
        std::fs::write(out.join(format!("{}.svg", f.id)), svg)
            .with_context(|| format!("writing {}.svg", f.id))?;
    }
    let meta = Meta {
        nandkit_version: env!("CARGO_PKG_VERSION"),
        scale: scale.name(),
        seed,
        shard: shard.map(|(i, n)| format!("{i}/{n}")),
        experiments: catalogue::EXPERIMENTS
            .iter()
            .filter(|e| papers.contains(&e.paper))
            .map(|e| ExperimentMeta {
                id: e.id,
                paper: e.paper.name(),
                what: e.what,
                command: format!("nandkit {}", e.args(scale, seed).join(" ")),
                changes: scale_changes(&e.args(scale, seed), &e.args(Scale::Full, seed)),
                data: data
                    .contains_key(e.id)
                    .then(|| format!("data/{}.{}.json", e.id, scale.name())),
            })
            .collect(),
    };
    std::fs::write(
        out.join("meta.json"),
        serde_json::to_string_pretty(&meta)? + "\n",
    )
    .context("writing meta.json")?;
    std::fs::write(
        out.join("index.html"),
        html(&claims, &figures, &meta, failed),
    )
    .context("writing index.html")?;
    Ok(summary(&claims, out))
}

/// The flags of `args` (a flag, then its value unless the next word is a flag).
fn flags(args: &[String]) -> Vec<(&str, &str)> {
    let mut v = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a.starts_with("--") || (a.starts_with('-') && a.len() == 2) {
            let value = args
                .get(i + 1)
                .filter(|n| !n.starts_with('-'))
                .map_or("", String::as_str);
            v.push((a.as_str(), value));
        }
    }
    v
}

/// What a reduced scale's command changes from the full scale's, flag by flag.
fn scale_changes(args: &[String], full: &[String]) -> String {
    let (a, f) = (flags(args), flags(full));
    let flag = |k: &str, v: &str| {
        if v.is_empty() {
            k.to_string()
        } else {
            format!("{k} {v}")
        }
    };
    let mut out = Vec::new();
    for (k, v) in &a {
        match f.iter().find(|(fk, _)| fk == k) {
            Some((_, fv)) if fv == v => {}
            Some((_, fv)) => out.push(format!("{} (full: {fv})", flag(k, v))),
            None => out.push(format!("{} (full: the bench's default)", flag(k, v))),
        }
    }
    for (k, v) in &f {
        if !a.iter().any(|(ak, _)| ak == k) {
            out.push(format!("no {k} (full: {})", flag(k, v)));
        }
    }
    if out.is_empty() {
        "nothing: the full run".to_string()
    } else {
        out.join("; ")
    }
}

/// How many claims got each verdict, in `Verdict::ALL`'s order.
fn counts<'a>(claims: impl IntoIterator<Item = &'a Claim>) -> [usize; 3] {
    let mut n = [0; 3];
    for c in claims {
        n[Verdict::ALL
            .iter()
            .position(|&v| v == c.verdict())
            .expect("a verdict")] += 1;
    }
    n
}

/// "12 match, 30 same direction, 11 differ".
fn counted(n: [usize; 3]) -> String {
    format!("{} match, {} same direction, {} differ", n[0], n[1], n[2])
}

/// The papers of `claims`, in their order.
fn papers_of(claims: &[Claim]) -> Vec<&'static str> {
    let mut papers: Vec<&str> = claims.iter().map(|c| c.paper).collect();
    papers.dedup();
    papers
}

/// The claims as a terminal table (the claim last, whole), then the counts per paper.
fn summary(claims: &[Claim], out: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<6} {:<14} {:>16} {:>16}  claim",
        "paper", "verdict", "paper", "ours"
    );
    for c in claims {
        let _ = writeln!(
            s,
            "{:<6} {:<14} {:>16} {:>16}  {}",
            c.paper,
            c.verdict().name(),
            format!("{} {}", num(c.paper_value), c.unit),
            c.ours
                .map_or("-".to_string(), |o| format!("{} {}", num(o), c.unit)),
            c.claim
        );
        if let Some((b, v)) = c.beside_verdict() {
            let _ = writeln!(
                s,
                "{:<6} {:<14} {:>16} {:>16}  (the same against {})",
                "",
                v.name(),
                "",
                b.ours
                    .map_or("-".to_string(), |o| format!("{} {}", num(o), c.unit)),
                b.baseline
            );
        }
    }
    for p in papers_of(claims) {
        let of = claims.iter().filter(|c| c.paper == p);
        let n = of.clone().count();
        let _ = writeln!(s, "{p:<6} {n:>2} claims: {}", counted(counts(of)));
    }
    let _ = write!(
        s,
        "{} claims: {}; the rules and every difference's reason: {}",
        claims.len(),
        counted(counts(claims)),
        out.join("index.html").display()
    );
    s
}

/// A number as a person writes it: few digits, no float noise.
pub fn num(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.1 {
        format!("{x:.2}")
    } else if x.abs() >= 0.0001 {
        format!("{x:.4}")
    } else {
        format!("{x:.2e}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The CSS class of a verdict's row.
fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Matches => "match",
        Verdict::SameDirection => "dir",
        Verdict::Differs => "differs",
    }
}

fn html(
    claims: &[Claim],
    figures: &[plot::Figure],
    meta: &Meta,
    failed: &[(&'static str, String)],
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>nandkit reproduce</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:72em;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #bbb;padding:.3em .6em;text-align:left;vertical-align:top}}\
         th{{background:#eee}} td.n{{text-align:right;white-space:nowrap}}\
         .match{{background:#e3f4e3}} .dir{{background:#fdf3d8}} .differs{{background:#fbe3e3}}\
         figure{{display:inline-block;margin:1em 1em 1em 0}} img{{border:1px solid #ccc}}\
         code{{background:#f4f4f4;padding:0 .2em}}</style></head><body>\n\
         <h1>nandkit reproduce</h1>\n<p>nandkit {} &middot; scale <b>{}</b> &middot; \
         seed {}{} &middot; {} claims: {}.</p>\n",
        esc(meta.nandkit_version),
        meta.scale,
        meta.seed,
        meta.shard
            .as_ref()
            .map_or(String::new(), |s| format!(" &middot; shard {s}")),
        claims.len(),
        counted(counts(claims))
    );
    if meta.scale == Scale::Quick.name() {
        h.push_str(
            "<p>Reduced scale: the Experiments table below shows, for each experiment, \
             what this scale changes from the full one. Every random write sees at least 8 \
             records per file and every trace is replayed whole.</p>\n",
        );
    } else if meta.scale == Scale::Smoke.name() {
        h.push_str(
            "<p>Smoke scale checks that the report is whole, not the claims: its devices \
             and traces are too small for the verdicts to mean anything.</p>\n",
        );
    }
    if !failed.is_empty() {
        h.push_str("<h2>Experiments that failed</h2><ul>");
        for (id, why) in failed {
            let _ = write!(h, "<li><b>{id}</b>: {}</li>", esc(why));
        }
        h.push_str("</ul>\n");
    }
    h.push_str(
        "<h2>Summary</h2>\n<table><tr><th>paper</th><th>claims</th><th>matches</th>\
         <th>same direction</th><th>differs</th></tr>\n",
    );
    for p in papers_of(claims) {
        let of: Vec<&Claim> = claims.iter().filter(|c| c.paper == p).collect();
        let n = counts(of.iter().copied());
        let names = |v: Verdict| {
            of.iter()
                .filter(|c| c.verdict() == v)
                .map(|c| esc(&c.claim))
                .collect::<Vec<_>>()
                .join("<br>")
        };
        let _ = writeln!(
            h,
            "<tr><td>{p}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"dir\"><b>{}</b><br>{}</td><td class=\"differs\"><b>{}</b><br>{}</td></tr>",
            of.len(),
            n[0],
            n[1],
            names(Verdict::SameDirection),
            n[2],
            names(Verdict::Differs)
        );
    }
    h.push_str(
        "</table>\n<h2>Claims</h2>\n<p>Each row: the paper's number (as the paper \
         prints it, or a ratio of two numbers it prints), ours, the verdict and the rules \
         that decide it, and a note naming the mechanism behind any difference.</p>\n\
         <table class=\"legend\"><tr><th>verdict</th><th>means</th></tr>\n",
    );
    for v in Verdict::ALL {
        let _ = writeln!(
            h,
            "<tr class=\"{}\"><td>{}</td><td>{}</td></tr>",
            class(v),
            v.name(),
            esc(v.meaning())
        );
    }
    h.push_str(
        "</table>\n<table><tr><th>paper</th><th>claim</th><th>paper</th><th>ours</th>\
         <th>verdict</th><th>against the other YAFFS</th><th>matches if</th>\
         <th>same direction if</th><th>note</th></tr>\n",
    );
    for c in claims {
        let r = c.row();
        let _ = writeln!(
            h,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td class=\"n\">{} {}</td>\
             <td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            class(r.verdict),
            c.paper,
            esc(&c.claim),
            num(c.paper_value),
            esc(c.unit),
            c.ours.map_or("no data".to_string(), |o| format!(
                "{} {}",
                num(o),
                esc(c.unit)
            )),
            r.verdict.name(),
            r.beside.as_ref().map_or(String::new(), |b| format!(
                "{}: {} ({})",
                b.baseline,
                b.ours.map_or("no data".to_string(), |o| format!(
                    "{} {}",
                    num(o),
                    esc(c.unit)
                )),
                b.verdict.name()
            )),
            esc(&r.tolerance),
            r.direction
                .as_deref()
                .map_or("(no direction: a figure)".to_string(), esc),
            esc(&c.note)
        );
    }
    h.push_str("</table>\n<h2>Figures</h2>\n");
    for f in figures {
        let _ = writeln!(
            h,
            "<figure><img src=\"{id}.svg\" width=\"760\" height=\"460\" alt=\"{t}\">\
             <figcaption>{t} ({p}; <a href=\"{id}.svg\">{id}.svg</a>)</figcaption></figure>",
            id = f.id,
            t = esc(&f.title),
            p = f.paper
        );
    }
    let reduced = meta.scale != Scale::Full.name();
    let _ = writeln!(
        h,
        "<h2>Experiments</h2>\n<table><tr><th>paper</th><th>experiment</th>\
         <th>command</th>{}<th>data</th></tr>",
        if reduced {
            "<th>this scale changes</th>"
        } else {
            ""
        }
    );
    for e in &meta.experiments {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td>{}<td>{}</td></tr>",
            e.paper,
            esc(e.what),
            esc(&e.command),
            if reduced {
                format!("<td>{}</td>", esc(&e.changes))
            } else {
                String::new()
            },
            e.data.as_ref().map_or("not run".to_string(), |d| format!(
                "<a href=\"{d}\">{d}</a>"
            ))
        );
    }
    h.push_str(
        "</table>\n<p>Device geometry, profile and every parameter are in each command \
         above and in <a href=\"meta.json\">meta.json</a>; the claims are in \
         <a href=\"claims.json\">claims.json</a>.</p>\n</body></html>\n",
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn scale_changes_name_every_flag_that_differs() {
        let full = w("bench iozone -g tlc-1g --mode rand-write --sweep --json");
        let quick =
            w("bench iozone -g tlc-1g --device-size 256MiB --mode rand-write --sweep --json");
        assert_eq!(
            scale_changes(&quick, &full),
            "--device-size 256MiB (full: the bench's default)"
        );
        assert_eq!(scale_changes(&full, &full), "nothing: the full run");
        let q = w("bench x --sizes 1,2 --quick --json");
        let f = w("bench x --sizes 1,2,3 --json");
        assert_eq!(
            scale_changes(&q, &f),
            "--sizes 1,2 (full: 1,2,3); --quick (full: the bench's default)"
        );
    }
}
