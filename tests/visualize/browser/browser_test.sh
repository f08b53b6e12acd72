#!/usr/bin/env bash
# Browser test: the HTML report renders in headless Chromium without console
# errors (script errors, invalid SVG attributes), its DOM holds the three
# charts, and the screenshot is not blank.
#   browser_test.sh PLANNER PNG_STATS MODEL.json OUT_DIR
# Exit 0 pass, 1 fail, 77 skipped (no Chromium: CTest reports it as skipped).
set -u
planner=$1 png_stats=$2 model=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
shot="$here/../../../visualize/tools/screenshot.sh"
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$out"
rm -f "$out/report.html" "$out/report.png" "$out/chromium.log" "$out/dom.html"
"$planner" --budget 24GB --report "$out/report.html" "$model" > "$out/planner.txt" ||
  fail "planner exited $?"

"$shot" "$out/report.html" "$out/report.png" 1400x2400 2> "$out/chromium.log"
rc=$?
if [ $rc -eq 77 ]; then
  echo "SKIPPED: Chromium is not installed (apt-get install chromium); the browser test did not run"
  exit 77
fi
[ $rc -eq 0 ] || { tail -20 "$out/chromium.log"; fail "chromium exited $rc"; }
if grep -q ':CONSOLE' "$out/chromium.log"; then
  grep ':CONSOLE' "$out/chromium.log"
  fail "the page logged console messages (errors in the page or its SVG)"
fi
[ -s "$out/report.png" ] || fail "no screenshot written"
"$png_stats" --min-ink 0.05 --min-colours 24 --size 1400x2400 "$out/report.png" ||
  fail "the screenshot looks blank or broken"

SCREENSHOT_MODE=dump-dom "$shot" "$out/report.html" - 1400x2400 > "$out/dom.html" 2>> "$out/chromium.log" ||
  fail "chromium --dump-dom failed"
for id in memory-timeline layer-bars pareto; do
  grep -q "<svg[^>]*id=\"$id\"" "$out/dom.html" || fail "the loaded page has no <svg id=\"$id\">"
done
[ "$(grep -o '<svg' "$out/dom.html" | wc -l)" -eq 3 ] || fail "expected 3 svg charts in the DOM"
grep -q '<title>remat: gpt2-small' "$out/dom.html" || fail "unexpected page title"
echo "PASS: $out/report.png"
