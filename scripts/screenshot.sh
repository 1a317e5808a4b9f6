#!/usr/bin/env bash
# Screenshots a report page (nandkit compare's index.html) in headless Chromium, as the
# README's picture was made:
#   scripts/screenshot.sh compare-report/index.html docs/compare-camera.png [WIDTHxHEIGHT]
# Installs Debian's chromium if it is missing (not needed by the build or the tests).
set -euo pipefail
page=${1:?usage: scripts/screenshot.sh PAGE.html OUT.png [WIDTHxHEIGHT]}
out=${2:?usage: scripts/screenshot.sh PAGE.html OUT.png [WIDTHxHEIGHT]}
size=${3:-1500x1700}
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "screenshot: installing chromium from Debian"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# No network here: the background-networking flags keep Chromium from trying.
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="${size/x/,}" \
  --screenshot="$(realpath -m "$out")" "file://$(realpath "$page")" 2>/dev/null
echo "screenshot: $out"
