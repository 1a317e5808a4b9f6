#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of what nandkit reads from flash and NVRAM.
#
#   scripts/fuzz.sh                 # every target for 60 s each
#   scripts/fuzz.sh decoders 3600   # one target for an hour
#   scripts/fuzz.sh --short         # what CI runs: 5 s per target
#
# Targets (fuzz/fuzz_targets): `decoders` (tags, records, summaries, checkpoint, anchor
# entries, attribute sets, UBI's headers and volume table, UBIFS's nodes and volumes: no panic, and what decodes
# re-encodes to the same), `image`
# (whole images and minv NVRAM damaged by the input, mounted, walked, written, fsck'd),
# `ubi` (raw UBI images damaged by the input, imported, attached read-only and writable,
# every LEB read).
# The corpus grows in fuzz/corpus/TARGET (seeded from real images the first time); a
# crash is written to fuzz/artifacts/TARGET and the run fails.
#
# Built with the stable toolchain: coverage comes from LLVM's SanitizerCoverage pass
# (rustc's -C passes, as cargo-fuzz passes it), libFuzzer from the libfuzzer-sys crate
# (a C++ compiler builds it: g++ from build-essential, see scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs=60
targets=(decoders image ubi)
case "${1:-}" in
  --short) secs=5 ;;
  "") ;;
  *) targets=("$1"); secs="${2:-60}" ;;
esac

export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares"
# An explicit target keeps the instrumentation out of build scripts.
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --quiet --bins --target "$host"
bin="${CARGO_TARGET_DIR:-target}/$host/release"
if [ ! -d corpus/decoders ] || [ ! -d corpus/image ]; then
  NANDKIT_FUZZ_SEED=corpus "$bin/image" 2>/dev/null
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "fuzz: $t for ${secs} s (corpus fuzz/corpus/$t)"
  status=0
  "$bin/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="artifacts/$t/" -print_final_stats=1 "corpus/$t" >"$log" 2>&1 || status=$?
  grep -E "^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+== ERROR|SUMMARY|INFO: seed corpus)" "$log" || true
  if [ "$status" -ne 0 ] || ls "artifacts/$t"/crash-* "artifacts/$t"/timeout-* "artifacts/$t"/oom-* >/dev/null 2>&1; then
    echo "fuzz: $t failed (exit status $status):" artifacts/$t/*
    tail -n 40 "$log"
    exit 1
  fi
done
