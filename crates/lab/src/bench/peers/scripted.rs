//! The operations users ask about first, in order on one device (format, small files, a
//! large file, small overwrites in it, a remount, deleting everything), then two that each
//! take a fresh device (filling it with files; random overwrites of a file that fills most
//! of it).

use std::time::Instant;

use nandkit_flash::DeviceConfig;
use nandkit_workloads::{Target, TargetError};
use rand::Rng;

use super::peer::{Budgeted, Peer};
use super::{budgeted, outcome, rng, Limits, PeersArgs, Row, Span};
use crate::bench::noise;

const SMALL: usize = 1024;
const CHUNK: usize = 64 << 10;
const RECORD: usize = 4096;
const SKIPPED: &str = "skipped: an earlier step stopped";

pub fn run_all(
    config: &DeviceConfig,
    fs: &str,
    args: &PeersArgs,
    limits: &Limits,
) -> anyhow::Result<Vec<Row>> {
    let device_bytes = config.geometry.total_bytes();
    let small = noise(SMALL, limits.seed);
    let chunk = noise(CHUNK, limits.seed + 1);
    let record = noise(RECORD, limits.seed + 2);
    let large = (device_bytes / 4 / CHUNK as u64).max(1) * CHUNK as u64;
    let mut rows = Vec::new();

    let host = Instant::now();
    let (mut peer, heap_before) = Peer::format(config, fs, &limits.nvram)?;
    rows.push(Span::from_zero(host, heap_before).row(&mut peer, fs, "format+mount", "ok".into()));

    let mut made = 0u64;
    let step =
        |peer: &mut Peer,
         heap_before: crate::compare::design::HeapBase,
         name: &str,
         rows: &mut Vec<Row>,
         f: &mut dyn FnMut(&mut Budgeted, &mut u64) -> Result<(), TargetError>| {
            let span = Span::start(peer, heap_before);
            let mut b = budgeted(peer, limits);
            let mut ops = 0;
            let r = f(&mut b, &mut ops);
            let over = b.over;
            let ok = r.is_ok();
            rows.push(span.row(peer, fs, name, outcome(r, ops, over)));
            ok
        };

    let go = step(
        &mut peer,
        heap_before,
        "small-files",
        &mut rows,
        &mut |b, ops| {
            b.mkdir("/small")?;
            for i in 0..args.small_files {
                let p = format!("/small/f{i:05}");
                b.create(&p)?;
                b.write(&p, 0, &small)?;
                b.fsync(&p)?;
                made += 1;
                *ops += 1;
            }
            Ok(())
        },
    );
    let go = go
        && step(
            &mut peer,
            heap_before,
            "large-file",
            &mut rows,
            &mut |b, ops| {
                b.create("/large")?;
                for k in 0..large / CHUNK as u64 {
                    b.write("/large", k * CHUNK as u64, &chunk)?;
                    *ops += 1;
                }
                b.fsync("/large")
            },
        );
    let go = go
        && step(
            &mut peer,
            heap_before,
            "small-overwrite",
            &mut rows,
            &mut |b, ops| {
                let mut r = rng(limits.seed);
                for _ in 0..100 {
                    let at = r.gen_range(0..large / RECORD as u64) * RECORD as u64;
                    b.write("/large", at, &record)?;
                    b.fsync("/large")?;
                    *ops += 1;
                }
                Ok(())
            },
        );
    if go {
        let span = Span::start(&mut peer, heap_before);
        match peer.remount() {
            Ok(mut p) => {
                rows.push(span.row(&mut p, fs, "remount", "ok".into()));
                step(&mut p, heap_before, "delete", &mut rows, &mut |b, ops| {
                    for i in 0..made {
                        b.unlink(&format!("/small/f{i:05}"))?;
                        *ops += 1;
                    }
                    b.unlink("/large")
                });
            }
            Err(e) => {
                rows.push(Row::empty(fs, "remount", format!("error: {e:#}")));
                rows.push(Row::empty(fs, "delete", SKIPPED.into()));
            }
        }
    } else {
        drop(peer);
    }
    // Steps an earlier one cut short did not run: their rows say so.
    for name in [
        "small-files",
        "large-file",
        "small-overwrite",
        "remount",
        "delete",
    ] {
        if !rows.iter().any(|r| r.workload == name) {
            rows.push(Row::empty(fs, name, SKIPPED.into()));
        }
    }

    // Files of 64 KiB until the device says it is full.
    let (mut peer, heap_before) = Peer::format(config, fs, &limits.nvram)?;
    step(&mut peer, heap_before, "fill", &mut rows, &mut |b, ops| {
        b.mkdir("/fill")?;
        for i in 0.. {
            let p = format!("/fill/f{i:05}");
            b.create(&p)?;
            b.write(&p, 0, &chunk)?;
            b.fsync(&p)?;
            *ops += 1;
        }
        Ok(())
    });
    drop(peer);

    // A file of three quarters of the device (not measured), then 4 KiB overwrites at
    // random, fsync every 32.
    let (mut peer, heap_before) = Peer::format(config, fs, &limits.nvram)?;
    let big = (device_bytes * 3 / 4 / CHUNK as u64).max(1) * CHUNK as u64;
    let setup = (|| -> Result<(), TargetError> {
        let t = peer.target();
        t.create("/big")?;
        for k in 0..big / CHUNK as u64 {
            t.write("/big", k * CHUNK as u64, &chunk)?;
        }
        t.fsync("/big")
    })();
    match setup {
        Ok(()) => {
            step(
                &mut peer,
                heap_before,
                "random-overwrite",
                &mut rows,
                &mut |b, ops| {
                    let mut r = rng(limits.seed + 3);
                    for i in 0..args.overwrites {
                        let at = r.gen_range(0..big / RECORD as u64) * RECORD as u64;
                        b.write("/big", at, &record)?;
                        if i % 32 == 31 {
                            b.fsync("/big")?;
                        }
                        *ops += 1;
                    }
                    b.fsync("/big")
                },
            );
        }
        Err(e) => {
            let span = Span::start(&mut peer, heap_before);
            rows.push(span.row(
                &mut peer,
                fs,
                "random-overwrite",
                format!("setup failed writing 3/4 of the device: {e}"),
            ));
        }
    }
    const ORDER: [&str; 8] = [
        "format+mount",
        "small-files",
        "large-file",
        "small-overwrite",
        "remount",
        "delete",
        "fill",
        "random-overwrite",
    ];
    rows.sort_by_key(|r| ORDER.iter().position(|&n| n == r.workload));
    Ok(rows)
}
