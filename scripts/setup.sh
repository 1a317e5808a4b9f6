#!/usr/bin/env bash
# Installs what nandkit needs on a fresh Debian machine. Safe to run again.
# Rust comes from rustup (already on the machine image); crates come through cargo.
set -euo pipefail

need_apt=()
# fuse3 (fusermount3) is for `nandkit mount`, which arrives with the FUSE issue; installing
# it now keeps set-up one command for every later feature.
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "setup: installing ${need_apt[*]} from Debian"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

command -v cargo >/dev/null 2>&1 || {
  echo "setup: cargo not found; install Rust (https://rustup.rs) and run again" >&2
  exit 1
}
cargo fetch --locked 2>/dev/null || cargo fetch
echo "setup: done"
