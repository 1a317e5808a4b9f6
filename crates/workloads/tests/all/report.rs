//! Table 1 of the MODA paper next to what the workloads leave on the nandkit file system,
//! printed: `cargo test -p nandkit-workloads --release -- --ignored --nocapture`.

use std::time::Instant;

/// (workload, Table 1's u, i, p for YAFFS).
const PAPER: [(&str, f64, f64, f64); 9] = [
    ("camera", 0.3, 0.002, 0.98),
    ("movie", 0.99, 0.0001, 0.99),
    ("phone", 0.05, 0.32, 0.62),
    ("recorder", 0.005, 0.16, 0.83),
    ("fax", 0.86, 0.0087, 0.73),
    ("postmark", 0.08, 0.0107, 0.90),
    ("andrew", 0.09, 0.0008, 0.90),
    // Sec. 6.3.3 gives only p for this one (and nothing for camera+phone).
    ("movie+recorder+postmark", f64::NAN, f64::NAN, 0.73),
    ("camera+phone", f64::NAN, f64::NAN, f64::NAN),
];

#[test]
#[ignore = "prints a report; run it in release"]
fn table_one_report() {
    println!(
        "{:<24} {:>7} {:>7} {:>5}   {:>7} {:>7} {:>5}  {:>9}",
        "64 MiB, yaffs", "u", "i", "p", "paper u", "i", "p", "wall"
    );
    for (name, pu, pi, pp) in PAPER {
        let start = Instant::now();
        let (_, (u, i, p)) = crate::common::run_on_fs(name, 1, 64 << 20);
        let wall = start.elapsed();
        println!(
            "{name:<24} {u:>7.4} {i:>7.4} {p:>5.2}   {pu:>7.4} {pi:>7.4} {pp:>5.2}  {wall:>9.2?}"
        );
    }
}
