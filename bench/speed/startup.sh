#!/usr/bin/env bash
# Whole-process time of the planner's commands, in one run: `true` (the cost
# of starting any process here), `planner --version` and planning the bundled
# GPT-2 for 24 GB. Prints the median and the fastest of RUNS runs of each
# (after WARMUP untimed runs), with hyperfine when it is installed
# (scripts/install-deps.sh installs it), else with a loop over date +%s%N.
#
# usage: bench/speed/startup.sh [BUILD_DIR]     (default build)
#   env: RUNS (20), WARMUP (3)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
runs=${RUNS:-20}
warmup=${WARMUP:-3}
planner=$build/bin/planner
[ -x "$planner" ] || { echo "startup: no $planner (build it first)" >&2; exit 2; }

commands=(
  "true"
  "$planner --version"
  "$planner --budget 24GB examples/gpt2-small.json"
)

# Prints "median_ms min_ms" of a command.
time_loop() {
  local i t0 t1
  for ((i = 0; i < warmup; ++i)); do $1 > /dev/null; done
  for ((i = 0; i < runs; ++i)); do
    t0=$(date +%s%N)
    $1 > /dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000))
  done | sort -n | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.1f %.1f\n", m / 1000, v[1] / 1000 }'
}

time_hyperfine() {
  local json
  json=$(mktemp)
  hyperfine -N --style none --warmup "$warmup" --runs "$runs" --export-json "$json" "$1" \
    > /dev/null 2>&1
  # hyperfine's JSON: results[0].median and .min in seconds.
  tr -d ' \n' < "$json" | sed -E 's/.*"median":([0-9.eE+-]+).*"min":([0-9.eE+-]+).*/\1 \2/' |
    awk '{ printf "%.1f %.1f\n", $1 * 1000, $2 * 1000 }'
  rm -f "$json"
}

tool=loop
command -v hyperfine > /dev/null && tool=hyperfine
echo "startup: $runs runs of each after $warmup warm-up runs ($tool); $("$planner" --version | head -1); load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-60s %10s %10s\n' command "median ms" "min ms"
for c in "${commands[@]}"; do
  read -r median fastest < <("time_$tool" "$c")
  printf '%-60s %10s %10s\n' "$c" "$median" "$fastest"
done
