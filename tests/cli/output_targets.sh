#!/usr/bin/env bash
# The real `planner` binary and where its outputs go: standard output on a
# full disk exits 5 with one line; -o through a link replaces the target and
# keeps the link; -o into a FIFO reaches its reader and keeps the FIFO; -o to
# a link to /dev/full exits 5 and leaves both alone. Everything is made in a
# scratch folder; nothing in /dev is renamed or created.
#   tests/cli/output_targets.sh PLANNER MODEL.json
set -uo pipefail
planner=${1:?usage: output_targets.sh PLANNER MODEL.json}
model=${2:?usage: output_targets.sh PLANNER MODEL.json}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1. Standard output on /dev/full.
if [ -w /dev/full ]; then
  "$planner" --budget 24GB --json "$model" > /dev/full 2> "$scratch/err"
  code=$?
  [ "$code" -eq 5 ] || fail "stdout on /dev/full: exit $code, expected 5"
  expected="planner: error: writing standard output: No space left on device"
  [ "$(cat "$scratch/err")" = "$expected" ] ||
    fail "stdout on /dev/full: stderr was: $(cat "$scratch/err")"
  "$planner" --help > /dev/full 2> /dev/null
  code=$?
  [ "$code" -eq 5 ] || fail "--help on /dev/full: exit $code, expected 5"
  # -o FILE with the report on /dev/full: the file is written, the exit is 5.
  "$planner" --budget 24GB -o "$scratch/plan.json" "$model" > /dev/full 2> /dev/null
  code=$?
  [ "$code" -eq 5 ] || fail "report on /dev/full with -o: exit $code, expected 5"
  [ -s "$scratch/plan.json" ] || fail "-o plan.json was not written"
  # -o - is standard output too.
  "$planner" --budget 24GB -o - "$model" > /dev/full 2> "$scratch/err"
  code=$?
  [ "$code" -eq 5 ] || fail "-o - on /dev/full: exit $code, expected 5"
  [ "$(wc -l < "$scratch/err")" -eq 1 ] ||
    fail "-o - on /dev/full: stderr was: $(cat "$scratch/err")"
  # A link to /dev/full.
  ln -s /dev/full "$scratch/full.json"
  "$planner" --budget 24GB -o "$scratch/full.json" "$model" > /dev/null 2> "$scratch/err"
  code=$?
  [ "$code" -eq 5 ] || fail "-o link to /dev/full: exit $code, expected 5"
  grep -q -- "-> /dev/full: write failed: No space left on device" "$scratch/err" ||
    fail "-o link to /dev/full: stderr was: $(cat "$scratch/err")"
  [ -L "$scratch/full.json" ] && [ "$(readlink "$scratch/full.json")" = /dev/full ] ||
    fail "the link to /dev/full was replaced"
  [ -c /dev/full ] || fail "/dev/full is no longer a character device"
else
  echo "skipped the /dev/full checks: no writable /dev/full"
fi

# 2. Standard output that works: exit 0, valid output.
"$planner" --budget 24GB --json "$model" > "$scratch/stdout.json" || fail "stdout to a file failed"
grep -q '"fits"' "$scratch/stdout.json" || fail "stdout to a file: no plan JSON"

# 3. -o through a relative link: the target is replaced, the link stays.
mkdir "$scratch/plans"
echo old > "$scratch/plans/plan.json"
ln -s plans/plan.json "$scratch/link.json"
"$planner" --budget 24GB -o "$scratch/link.json" "$model" > /dev/null || fail "-o link failed"
[ -L "$scratch/link.json" ] || fail "-o link: the link was replaced by a file"
grep -q '"fits"' "$scratch/plans/plan.json" || fail "-o link: the target was not written"

# 4. -o into a FIFO: the reader gets the plan, the FIFO stays a FIFO.
mkfifo "$scratch/plan.fifo"
timeout 60 cat "$scratch/plan.fifo" > "$scratch/from_fifo" &
reader=$!
timeout 60 "$planner" --budget 24GB -o "$scratch/plan.fifo" "$model" > /dev/null ||
  fail "-o fifo failed"
wait "$reader" || fail "the FIFO's reader failed"
[ -p "$scratch/plan.fifo" ] || fail "-o fifo: the FIFO was replaced"
grep -q '"fits"' "$scratch/from_fifo" || fail "-o fifo: the reader got no plan"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all output targets behave"
