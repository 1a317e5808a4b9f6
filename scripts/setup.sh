#!/usr/bin/env bash
# Installs what nandkit needs on a fresh Debian machine. Safe to run again.
# Rust comes from rustup (already on the machine image); crates come through cargo.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# Each entry: a command, and the Debian package that provides it.
#   fusermount3      `nandkit mount` (FUSE) mounts and unmounts through it as a non-root user
#   setfattr         xattr checks in crates/cli/tests/all/fuse_mount.rs
#   setfacl          POSIX ACL checks in crates/cli/tests/all/fuse_acl.rs (also getfacl, chacl)
#   sqlite3, git     real programs the FUSE integration test runs on a mount
#   fio, bindfs      measuring the FUSE path against a pass-through file system
#   g++              builds libFuzzer for scripts/fuzz.sh (the libfuzzer-sys crate)
#   xfs_io           file operations as another user in crates/cli/tests/all/fuse_cache_view.rs
#   ubinize          (mtd-utils, with mkfs.ubifs) makes the UBI and UBIFS images the tests
#                    crates/cli/tests/all/ubi_tools.rs and ubifs_tools.rs import and read
for pair in fusermount3:fuse3 pkg-config:pkg-config setfattr:attr setfacl:acl \
            sqlite3:sqlite3 git:git fio:fio bindfs:bindfs g++:g++ xfs_io:xfsprogs \
            ubinize:mtd-utils; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
done

# Libraries, checked by package: libclang-dev lets littlefs2-sys (crates/littlefs, the
# littlefs peer) generate its bindings to the littlefs C library.
for pkg in libclang-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "setup: installing ${need_apt[*]} from Debian"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# ubi-reader (PyPI), the independent reader of UBI images the tests check ours with, in a
# virtual environment of the project's own (.tools/, ignored by git).
UBI_READER_VERSION=0.8.16
venv=.tools/ubi-reader
if ! "$venv/bin/ubireader_display_info" --help >/dev/null 2>&1; then
  echo "setup: installing ubi-reader $UBI_READER_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "ubi_reader==$UBI_READER_VERSION"
fi

command -v cargo >/dev/null 2>&1 || {
  echo "setup: cargo not found; install Rust (https://rustup.rs) and run again" >&2
  exit 1
}
cargo fetch --locked 2>/dev/null || cargo fetch
# The fuzz crate (fuzz/, not a workspace member) has its own lock file.
cargo fetch --locked --manifest-path fuzz/Cargo.toml 2>/dev/null ||
  cargo fetch --manifest-path fuzz/Cargo.toml
echo "setup: done"
