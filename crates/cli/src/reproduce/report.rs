//! The report: `claims.json` (a row per claim), one SVG per figure, `meta.json` (what ran,
//! how) and `index.html`, which shows all of it with nothing fetched from anywhere.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use super::catalogue::{self, Claim, Data, Paper};
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
    std::fs::write(
        out.join("claims.json"),
        serde_json::to_string_pretty(&claims)? + "\n",
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

/// The claims as a terminal table (the claim last, whole).
fn summary(claims: &[Claim], out: &Path) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<6} {:<5} {:>16} {:>16}  claim",
        "paper", "holds", "paper", "ours"
    );
    for c in claims {
        let _ = writeln!(
            s,
            "{:<6} {:<5} {:>16} {:>16}  {}",
            c.paper,
            if c.holds { "yes" } else { "NO" },
            format!("{} {}", num(c.paper_value), c.unit),
            c.ours
                .map_or("-".to_string(), |o| format!("{} {}", num(o), c.unit)),
            c.claim
        );
    }
    let held = claims.iter().filter(|c| c.holds).count();
    let _ = write!(
        s,
        "{held} of {} claims hold; report: {}",
        claims.len(),
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

fn html(
    claims: &[Claim],
    figures: &[plot::Figure],
    meta: &Meta,
    failed: &[(&'static str, String)],
) -> String {
    let mut h = String::new();
    let held = claims.iter().filter(|c| c.holds).count();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>nandkit reproduce</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:72em;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}\
         td,th{{border:1px solid #bbb;padding:.3em .6em;text-align:left;vertical-align:top}}\
         th{{background:#eee}} td.n{{text-align:right;white-space:nowrap}}\
         .yes{{background:#e3f4e3}} .no{{background:#fbe3e3}}\
         figure{{display:inline-block;margin:1em 1em 1em 0}} img{{border:1px solid #ccc}}\
         code{{background:#f4f4f4;padding:0 .2em}}</style></head><body>\n\
         <h1>nandkit reproduce</h1>\n<p>nandkit {} &middot; scale <b>{}</b> &middot; \
         seed {}{} &middot; {held} of {} claims hold.</p>\n",
        esc(meta.nandkit_version),
        meta.scale,
        meta.seed,
        meta.shard
            .as_ref()
            .map_or(String::new(), |s| format!(" &middot; shard {s}")),
        claims.len()
    );
    if !failed.is_empty() {
        h.push_str("<h2>Experiments that failed</h2><ul>");
        for (id, why) in failed {
            let _ = write!(h, "<li><b>{id}</b>: {}</li>", esc(why));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<h2>Summary</h2>\n<table><tr><th>paper</th><th>claims</th><th>hold</th><th>do not hold</th></tr>\n");
    let mut papers: Vec<&str> = claims.iter().map(|c| c.paper).collect();
    papers.dedup();
    for p in papers {
        let of: Vec<&Claim> = claims.iter().filter(|c| c.paper == p).collect();
        let held = of.iter().filter(|c| c.holds).count();
        let not: Vec<String> = of
            .iter()
            .filter(|c| !c.holds)
            .map(|c| esc(&c.claim))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{p}</td><td class=\"n\">{}</td><td class=\"n\">{held}</td><td>{}</td></tr>",
            of.len(),
            not.join("<br>")
        );
    }
    h.push_str("</table>\n");
    h.push_str(
        "<h2>Claims</h2>\n<p>Each row: the paper's number, ours, whether the claim's \
         direction or ratio holds under the stated criterion, and why when it does not. A \
         claim that does not hold is shown as not holding.</p>\n<table><tr><th>paper</th>\
         <th>claim</th><th>paper</th><th>ours</th><th>criterion</th><th>holds</th>\
         <th>note</th></tr>\n",
    );
    for c in claims {
        let _ = writeln!(
            h,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td class=\"n\">{} {}</td>\
             <td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if c.holds { "yes" } else { "no" },
            c.paper,
            esc(&c.claim),
            num(c.paper_value),
            esc(c.unit),
            c.ours.map_or("no data".to_string(), |o| format!(
                "{} {}",
                num(o),
                esc(c.unit)
            )),
            esc(&c.criterion),
            if c.holds { "yes" } else { "no" },
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
    h.push_str(
        "<h2>Experiments</h2>\n<table><tr><th>paper</th><th>experiment</th>\
         <th>command</th><th>data</th></tr>\n",
    );
    for e in &meta.experiments {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            e.paper,
            esc(e.what),
            esc(&e.command),
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
