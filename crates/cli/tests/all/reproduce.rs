//! `nandkit reproduce` at smoke scale (seconds): the report is whole (every claim row has
//! a value, every figure it references exists), the same seed gives byte-identical JSON,
//! a rerun resumes, and sharded runs merge into the same claims.

use std::path::Path;

use crate::common::{nandkit, stderr};
use serde_json::Value;

fn run(args: &[&str]) -> String {
    let out = nandkit(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stderr(&out)
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every data file of a report, by name.
fn data(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                read(&p),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_smoke_run_writes_a_whole_report_the_same_each_time() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let a_s = a.to_str().unwrap();
    run(&["reproduce", "all", "--smoke", "--quiet", "--out", a_s]);
    let claims: Value = serde_json::from_slice(&read(&a.join("claims.json"))).unwrap();
    let rows = claims.as_array().expect("an array of claims");
    assert!(rows.len() >= 30, "{} claims", rows.len());
    let mut papers: Vec<&str> = rows.iter().filter_map(|r| r["paper"].as_str()).collect();
    papers.dedup();
    assert_eq!(papers, ["ma", "parity", "moda", "minv", "mnfs", "peers"]);
    for r in rows {
        for k in ["paper", "claim"] {
            assert!(r[k].is_string(), "{k}: {r}");
        }
        assert!(r["paper_value"].is_number(), "{r}");
        assert!(r["ours"].is_number(), "no value: {r}");
        let verdict = r["verdict"].as_str().unwrap_or_default();
        assert!(
            ["matches", "same direction", "differs"].contains(&verdict),
            "{r}"
        );
        assert!(
            !r["tolerance"].as_str().unwrap_or_default().is_empty(),
            "{r}"
        );
        assert!(!r["note"].as_str().unwrap_or_default().is_empty(), "{r}");
    }
    // The page shows every claim and every figure it points at exists.
    let html = String::from_utf8(read(&a.join("index.html"))).unwrap();
    let svgs: Vec<&str> = html
        .split("src=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert!(svgs.len() >= 8, "{svgs:?}");
    for s in &svgs {
        let svg = String::from_utf8(read(&a.join(s))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{s}");
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "fetches nothing"
    );
    for v in ["matches", "same direction", "differs"] {
        assert!(html.contains(&format!("<td>{v}</td>")), "legend lacks {v}");
    }
    assert!(
        html.contains("this scale changes"),
        "smoke names what it changes"
    );
    for r in rows {
        let claim = r["claim"]
            .as_str()
            .unwrap()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;");
        assert!(html.contains(&claim), "{claim} not shown");
    }

    // A rerun keeps what is there.
    let again = run(&["reproduce", "all", "--smoke", "--quiet", "--out", a_s]);
    assert!(again.contains("kept from an earlier run"), "{again}");

    // Two shards run every experiment again from nothing; merged, they give the same
    // JSON byte for byte (same seed, same data) and the same claims.
    let s1 = tmp.path().join("s1");
    let s2 = tmp.path().join("s2");
    let m = tmp.path().join("m");
    for (dir, shard) in [(&s1, "1/2"), (&s2, "2/2")] {
        run(&[
            "reproduce",
            "all",
            "--smoke",
            "--quiet",
            "--shard",
            shard,
            "--out",
            dir.to_str().unwrap(),
        ]);
    }
    assert!(data(&s1).len() < data(&a).len() && !data(&s2).is_empty());
    run(&[
        "reproduce",
        "merge",
        s1.to_str().unwrap(),
        s2.to_str().unwrap(),
        "--scale",
        "smoke",
        "--out",
        m.to_str().unwrap(),
    ]);
    assert_eq!(data(&m), data(&a), "same seed, same JSON");
    assert_eq!(read(&m.join("claims.json")), read(&a.join("claims.json")));
}

#[test]
fn bad_flags_are_refused_clearly() {
    for (args, want) in [
        (vec!["reproduce", "--shard", "3/2"], "1 <= I <= N"),
        (vec!["reproduce", "--shard", "x"], "expected I/N"),
        (vec!["reproduce", "nosuchpaper"], "invalid value"),
    ] {
        let out = nandkit(&args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}
