#!/usr/bin/env bash
# Renders an HTML file to a PNG with headless Chromium.
#   visualize/tools/screenshot.sh PAGE.html OUT.png [WIDTHxHEIGHT]
# Chromium's log (console messages included) goes to standard error.
# Exit codes: Chromium's, or 77 when no Chromium is installed
# (apt-get install chromium; or set CHROMIUM=/path/to/chrome).
set -u
page=${1:?usage: screenshot.sh PAGE.html OUT.png [WIDTHxHEIGHT]}
png=${2:?usage: screenshot.sh PAGE.html OUT.png [WIDTHxHEIGHT]}
size=${3:-1400x2400}
mode=${SCREENSHOT_MODE:-screenshot}  # "dump-dom" prints the loaded DOM instead

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
  for b in chromium chromium-browser google-chrome; do
    if command -v "$b" > /dev/null 2>&1; then browser=$(command -v "$b"); break; fi
  done
fi
if [ -z "$browser" ]; then
  echo "screenshot.sh: no Chromium found (apt-get install chromium, or set CHROMIUM)" >&2
  exit 77
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
url="file://$(realpath "$page")"
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --hide-scrollbars --force-device-scale-factor=1 --user-data-dir="$profile"
       --enable-logging=stderr --v=0 --window-size="${size/x/,}")
if [ "$mode" = dump-dom ]; then
  timeout 120 "$browser" "${flags[@]}" --dump-dom "$url"
else
  timeout 120 "$browser" "${flags[@]}" --screenshot="$(realpath -m "$png")" "$url"
fi
