//! The report of `compare`: the table on the terminal, and the HTML page (the table with
//! each column's best value marked, the latency CDF and the wear histogram as SVG).

use std::fmt::Write as _;

use super::measure::Row;
use super::Report;
use crate::reproduce::plot::{svg, Figure, Series};

#[derive(Clone, Copy, PartialEq)]
enum Better {
    Higher,
    Lower,
}

/// A numeric column of the table.
struct Column {
    head: &'static str,
    /// What it is, for the page's legend.
    about: &'static str,
    better: Better,
    value: fn(&Row) -> Option<f64>,
    digits: usize,
}

/// Years to the first worn block, infinite when the replay erased nothing.
fn life(r: &Row) -> Option<f64> {
    match r.years_first_block {
        Some(y) => Some(y),
        None if r.ok() && r.blocks_erased == 0 => Some(f64::INFINITY),
        None => None,
    }
}

/// The life column's index in [`COLUMNS`].
const LIFE: usize = 7;

const COLUMNS: &[Column] = &[
    Column {
        head: "MB/s",
        about: "bytes read and written over the time the chip spent serving requests",
        better: Better::Higher,
        value: |r| r.busy_mb_per_s,
        digits: 2,
    },
    Column {
        head: "p50 ms",
        about: "median request latency (issue to completion)",
        better: Better::Lower,
        value: |r| r.p50_ms,
        digits: 2,
    },
    Column {
        head: "p99 ms",
        about: "99th percentile request latency",
        better: Better::Lower,
        value: |r| r.p99_ms,
        digits: 2,
    },
    Column {
        head: "max ms",
        about: "longest request latency",
        better: Better::Lower,
        value: |r| r.max_ms,
        digits: 1,
    },
    Column {
        head: "resp ms",
        about:
            "mean response time: arrival to completion, queueing behind earlier requests included",
        better: Better::Lower,
        value: |r| r.mean_response_ms,
        digits: 1,
    },
    Column {
        head: "WA",
        about: "write amplification: pages programmed per page of data written",
        better: Better::Lower,
        value: |r| r.write_amplification,
        digits: 2,
    },
    Column {
        head: "erases/day",
        about: "block erases a day at the trace's rate",
        better: Better::Lower,
        value: |r| r.erases_per_day.or(r.ok().then_some(0.0)),
        digits: 0,
    },
    Column {
        head: "life y",
        about: "years until the most-erased block reaches the rated endurance",
        better: Better::Higher,
        value: life,
        digits: 2,
    },
    Column {
        head: "even y",
        about: "years until the average block reaches it, were wear spread evenly",
        better: Better::Higher,
        value: |r| match r.years_levelled {
            Some(y) => Some(y),
            None => life(r),
        },
        digits: 2,
    },
    Column {
        head: "spread",
        about: "wear spread: the most-erased block's erases over the mean's",
        better: Better::Lower,
        value: |r| r.wear_spread,
        digits: 2,
    },
    Column {
        head: "RAM KiB",
        about: "heap the file system holds after a clean remount",
        better: Better::Lower,
        value: |r| r.ok().then(|| r.ram_after_mount_bytes as f64 / 1024.0),
        digits: 0,
    },
    Column {
        head: "peak KiB",
        about: "most heap held during the replay",
        better: Better::Lower,
        value: |r| r.ok().then(|| r.ram_peak_bytes as f64 / 1024.0),
        digits: 0,
    },
    Column {
        head: "mount ms",
        about: "simulated mount time after a clean unmount",
        better: Better::Lower,
        value: |r| r.mount_clean_ms,
        digits: 1,
    },
    Column {
        head: "cut mount ms",
        about: "longest simulated mount time after a power cut",
        better: Better::Lower,
        value: |r| r.power_cut.mount_max_ms,
        digits: 1,
    },
];

/// A value as the table shows it: `digits` decimals, or three significant digits
/// below 1 (a life of 0.031 years is not 0.03), none from 1000 up.
fn show(v: Option<f64>, digits: usize) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.is_infinite() => "never".into(),
        Some(x) if x >= 1000.0 => format!("{x:.0}"),
        Some(x) if x > 0.0 && x < 1.0 && digits > 0 => {
            let d = (2 - x.log10().floor() as i32).max(digits as i32) as usize;
            format!("{x:.d$}")
        }
        Some(x) => format!("{x:.digits$}"),
    }
}

/// Whether `v` is the column's best as the table shows them: values that print the same
/// are a tie (lives of 0.0317 years that differ in the fifth digit are one).
fn is_best(c: &Column, v: Option<f64>, best: Option<f64>) -> bool {
    v.is_some() && show(v, c.digits) == show(best, c.digits)
}

/// The best value of each column among the designs that ran.
fn bests(rows: &[Row]) -> Vec<Option<f64>> {
    COLUMNS
        .iter()
        .map(|c| {
            let vals = rows.iter().filter(|r| r.ok()).filter_map(|r| (c.value)(r));
            match c.better {
                Better::Higher => vals.reduce(f64::max),
                Better::Lower => vals.reduce(f64::min),
            }
        })
        .collect()
}

/// The power-cut result in a few words.
fn cut_result(r: &Row) -> String {
    let s = &r.power_cut;
    if !r.ok() {
        "-".into()
    } else if s.cuts == 0 {
        "not run".into()
    } else if s.passed() {
        format!("ok {}/{}", s.cuts, s.cuts)
    } else if s.mounted < s.cuts {
        format!("no mount {}/{}", s.cuts - s.mounted, s.cuts)
    } else if s.data_kept < s.cuts {
        format!("data lost {}/{}", s.cuts - s.data_kept, s.cuts)
    } else {
        format!("fsck {}/{}", s.cuts - s.fsck_clean, s.cuts)
    }
}

pub fn print_table(report: &Report) {
    println!("{}", heading(report));
    let best = bests(&report.rows);
    print!("{:<13}", "design");
    for c in COLUMNS {
        print!(" {:>w$}", c.head, w = c.head.len().max(8));
    }
    println!("  {:<12}", "power cut");
    for r in &report.rows {
        print!("{:<13}", r.design);
        if !r.ok() {
            println!(" {}", r.status);
            continue;
        }
        for (c, b) in COLUMNS.iter().zip(&best) {
            let v = (c.value)(r);
            let mark = if is_best(c, v, *b) { "*" } else { "" };
            let text = format!("{}{mark}", show(v, c.digits));
            print!(" {:>w$}", text, w = c.head.len().max(8));
        }
        println!("  {:<12}", cut_result(r));
    }
    println!("* best of the column");
    for line in verdicts(report) {
        println!("{line}");
    }
}

fn heading(report: &Report) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    format!(
        "workload {}: {} requests over {:.1} s, {:.1} MiB read, {:.1} MiB written\n\
         chip     {} x{}, {} MiB, {} B pages, rated {} erases a block; queue depth {}, {} power cuts a design",
        report.workload,
        report.requests,
        report.trace_span_s,
        mib(report.bytes_read),
        mib(report.bytes_written),
        report.geometry,
        report.chips,
        report.device_bytes >> 20,
        report.page_bytes,
        report.endurance_cycles,
        report.queue_depth,
        report.cuts
    )
}

/// What the table says, in sentences: the best design on each count, the ones that
/// wear out before `--years-of`, the ones that lost data at a power cut.
fn verdicts(report: &Report) -> Vec<String> {
    let ok: Vec<&Row> = report.rows.iter().filter(|r| r.ok()).collect();
    let mut out = Vec::new();
    let best_by = |what: &str, c: usize| -> Option<String> {
        let col = &COLUMNS[c];
        let b = bests(&report.rows)[c]?;
        let names: Vec<&str> = ok
            .iter()
            .filter(|r| is_best(col, (col.value)(r), Some(b)))
            .map(|r| r.design.as_str())
            .collect();
        Some(format!(
            "{what}: {} ({})",
            names.join(", "),
            show(Some(b), col.digits)
        ))
    };
    out.extend(best_by("lowest p99 latency, ms", 2));
    out.extend(best_by("longest life, years", LIFE));
    out.extend(best_by("least RAM after mount, KiB", LIFE + 3));
    if ok
        .iter()
        .any(|r| r.wear_histogram.len() <= 3 && r.blocks_erased > 0)
    {
        out.push(
            "the replay erased no block more than twice in some designs: their life to the \
             first worn block is coarse (one more erase halves it); the even-wear life ranks \
             them by all their erases"
                .into(),
        );
    }
    let short: Vec<String> = ok
        .iter()
        .filter(|r| life(r).is_some_and(|y| y < report.years_of))
        .map(|r| format!("{} ({})", r.design, show(life(r), 2)))
        .collect();
    out.push(if short.is_empty() {
        format!("every design lasts {} years at this rate", report.years_of)
    } else {
        format!(
            "worn out before {} years: {}",
            report.years_of,
            short.join(", ")
        )
    });
    let unsafe_: Vec<&str> = ok
        .iter()
        .filter(|r| r.power_cut.cuts > 0 && !r.power_cut.passed())
        .map(|r| r.design.as_str())
        .collect();
    if report.cuts > 0 {
        out.push(if unsafe_.is_empty() {
            "every design kept its acknowledged data at every cut, fsck clean".into()
        } else {
            format!("failed the power-cut sweep: {}", unsafe_.join(", "))
        });
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The HTML page: one file, plots inline.
pub fn html(report: &Report) -> anyhow::Result<String> {
    let ok: Vec<&Row> = report.rows.iter().filter(|r| r.ok()).collect();
    let cdf = Figure {
        id: "latency".into(),
        paper: String::new(),
        title: "Request latency CDF (issue to completion)".into(),
        x_label: "latency (ms, log)".into(),
        y_label: "fraction of requests".into(),
        log_x: true,
        log_y: false,
        series: ok
            .iter()
            .map(|r| Series {
                name: r.design.clone(),
                points: r.latency_cdf.clone(),
            })
            .collect(),
        categories: Vec::new(),
    };
    let wear = Figure {
        id: "wear".into(),
        paper: String::new(),
        title: "Wear: blocks by erases during the replay".into(),
        x_label: "erases of a block".into(),
        y_label: "blocks (log)".into(),
        log_x: false,
        log_y: true,
        series: ok
            .iter()
            .map(|r| Series {
                name: r.design.clone(),
                points: r
                    .wear_histogram
                    .iter()
                    .filter(|p| p.1 > 0)
                    .map(|&(e, n)| (e as f64, n as f64))
                    .collect(),
            })
            .collect(),
        categories: Vec::new(),
    };
    let best = bests(&report.rows);
    let mut h = String::new();
    h.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <title>nandkit compare</title>\n<style>\n\
         body{font-family:sans-serif;margin:24px;color:#222;max-width:1500px}\n\
         table{border-collapse:collapse;font-size:14px}\n\
         th,td{padding:4px 8px;border-bottom:1px solid #ddd;text-align:right}\n\
         th{background:#f3f3f3;position:sticky;top:0}\n\
         td.name,th.name{text-align:left}\n\
         td.best{background:#d9f2d9;font-weight:bold}\n\
         td.short{color:#b00}\n td.bad{background:#f8d7d7}\n\
         .muted{color:#777} .plots{display:flex;flex-wrap:wrap;gap:16px}\n\
         ul{line-height:1.5}\n</style></head><body>\n",
    );
    let _ = writeln!(h, "<h1>Which design for this workload on this chip</h1>");
    for line in heading(report).lines() {
        let _ = writeln!(h, "<div>{}</div>", escape(line));
    }
    h.push_str("<h2>Verdict</h2>\n<ul>\n");
    for v in verdicts(report) {
        let _ = writeln!(h, "<li>{}</li>", escape(&v));
    }
    h.push_str("</ul>\n<h2>Designs</h2>\n<table>\n<tr><th class=\"name\">design</th>");
    for c in COLUMNS {
        let _ = write!(
            h,
            "<th title=\"{}\">{}</th>",
            escape(c.about),
            escape(c.head)
        );
    }
    h.push_str("<th>power cut</th><th class=\"name\">what it is</th></tr>\n");
    for r in &report.rows {
        let _ = write!(h, "<tr><td class=\"name\">{}</td>", escape(&r.design));
        if !r.ok() {
            let _ = writeln!(
                h,
                "<td class=\"name muted\" colspan=\"{}\">{}</td><td class=\"name\">{}</td></tr>",
                COLUMNS.len() + 1,
                escape(&r.status),
                escape(&r.what)
            );
            continue;
        }
        for (i, (c, b)) in COLUMNS.iter().zip(&best).enumerate() {
            let v = (c.value)(r);
            let mut class = if is_best(c, v, *b) { "best" } else { "" };
            if i == LIFE && v.is_some_and(|y| y < report.years_of) {
                class = "short";
            }
            let _ = write!(h, "<td class=\"{class}\">{}</td>", show(v, c.digits));
        }
        let cut = cut_result(r);
        let class = if r.power_cut.cuts > 0 && !r.power_cut.passed() {
            "bad"
        } else {
            ""
        };
        let _ = writeln!(
            h,
            "<td class=\"{class}\" title=\"{}\">{}</td><td class=\"name muted\">{}</td></tr>",
            escape(&r.power_cut.problems.join("; ")),
            escape(&cut),
            escape(&r.what)
        );
    }
    h.push_str("</table>\n<p class=\"muted\">Green: the best value of the column. Red life: ");
    let _ = writeln!(
        h,
        "wears out before {} years. Hover a heading for its meaning.</p>",
        report.years_of
    );
    h.push_str("<div class=\"plots\">\n");
    h.push_str(&svg(&cdf)?);
    h.push_str(&svg(&wear)?);
    h.push_str("\n</div>\n<h2>Columns</h2>\n<ul>\n");
    for c in COLUMNS {
        let _ = writeln!(h, "<li><b>{}</b>: {}</li>", escape(c.head), escape(c.about));
    }
    h.push_str(
        "<li><b>power cut</b>: the replay cut at evenly spread flash operations, each on a \
         fresh device; ok when every cut mounted, every acknowledged file read back and fsck \
         was clean</li>\n</ul>\n<p class=\"muted\">Made by nandkit compare; the numbers are \
         in compare.json beside this page.</p>\n</body></html>\n",
    );
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_keep_three_significant_digits() {
        assert_eq!(show(Some(0.0312), 2), "0.0312");
        assert_eq!(show(Some(0.5), 2), "0.500");
        assert_eq!(show(Some(2.5), 2), "2.50");
        assert_eq!(show(Some(12345.6), 2), "12346");
        assert_eq!(show(Some(f64::INFINITY), 2), "never");
        assert_eq!(show(None, 2), "-");
        assert_eq!(COLUMNS[LIFE].head, "life y");
        assert_eq!(COLUMNS[LIFE + 3].head, "RAM KiB");
    }

    #[test]
    fn the_best_of_a_column_is_its_direction_s_extreme() {
        let row = |name: &str, p99: f64, life: Option<f64>| Row {
            design: name.into(),
            status: "ok".into(),
            p99_ms: Some(p99),
            years_first_block: life,
            blocks_erased: u64::from(life.is_some()),
            ..Row::default()
        };
        let rows = vec![
            row("a", 5.0, Some(2.0)),
            row("b", 3.0, None),
            row("c", 4.0, Some(9.0)),
        ];
        let best = bests(&rows);
        assert_eq!(best[2], Some(3.0));
        // No block erased: no end of life in sight, the longest.
        assert_eq!(best[LIFE], Some(f64::INFINITY));
    }
}
