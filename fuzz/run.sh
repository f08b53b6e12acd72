#!/usr/bin/env bash
# Runs every fuzz target for a bounded time and prints its figures.
#
#   fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET] [WORK_DIR]
#
# BUILD_DIR is configured with CXX=clang++ -DREMAT_FUZZ=ON (see docs/fuzzing.md).
# WORK_DIR (default BUILD_DIR/fuzz/work) keeps each target's growing corpus,
# its log and any crash input (crash-*, timeout-*, leak-*). Targets run
# FUZZ_JOBS at a time (default 2); FUZZ_TARGETS="cli units" picks some.
# Exit status 1 if any target failed.
set -euo pipefail

build=$(realpath "${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS] [WORK_DIR]}")
seconds=${2:-30}
work=$(realpath -m "${3:-$build/fuzz/work}")
jobs=${FUZZ_JOBS:-2}
here=$(cd "$(dirname "$0")" && pwd)
read -r -a targets <<< "${FUZZ_TARGETS:-model_config hf_config profile plan_json schedule units cli}"

mkdir -p "$work"
"$build/bin/fuzz/remat_fuzz_seeds" "$work/seeds" "$here/../examples"

run_one() {
  local t=$1 dict=$here/json.dict
  case $t in cli|units) dict=$here/cli.dict ;; esac
  local corpus=$work/corpus/$t regressions=()
  mkdir -p "$corpus" "$work/artifacts"
  [ -d "$here/regressions/$t" ] && regressions=("$here/regressions/$t")
  # -timeout: an input slower than 10 s is reported as a hang.
  "$build/bin/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -dict="$dict" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$t-" \
    "$corpus" "$work/seeds/$t" "${regressions[@]}" > "$work/$t.log" 2>&1
}
export -f run_one
export build seconds work here

status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' || status=1

printf '%-14s %12s %10s %8s %8s %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
  log=$work/$t.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  result=ok
  if grep -qE '^==[0-9]+==ERROR|SUMMARY: (Address|UndefinedBehavior)Sanitizer|fuzz check failed|ALARM: working on the last Unit|deadly signal|libFuzzer: out-of-memory' "$log"; then
    result="FAILED (see $log)"
    status=1
  fi
  printf '%-14s %12s %10s %8s %8s %s\n' "$t" "$execs" "$rate" "$cov" "$ft" "$result"
done
exit $status
