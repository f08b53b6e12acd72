#!/usr/bin/env bash
# Writes the allocator traces that a GPU run records
# (profiles/fixtures/alloc-traces/NAME.trace.json): each the replayed
# allocation sequence of one plan with the allocator model's prediction
# (`planner --alloc-trace`; docs/device-memory.md, "The trace format").
# scripts/gpu_run.sh replays each on the GPU with
# scripts/record_allocator_trace.py, which adds what PyTorch's caching
# allocator did ("measured"); the recorded files replace these, and
# tests/planner/device/allocator/recorded_traces_test.cc compares both sides.
# Rerun after a change to the analytic model or the simulator (the test
# fails when a committed prediction differs from the model's replay). From the
# repository root: scripts/make_allocator_traces.sh [PLANNER]
set -euo pipefail
cd "$(dirname "$0")/.."
planner=${1:-build/bin/planner}
out=profiles/fixtures/alloc-traces
mkdir -p "$out"
trace() {  # name, then the planner's arguments
  local name=$1
  shift
  "$planner" --device h200 "$@" --alloc-trace "$out/$name.trace.json" > /dev/null
  echo "$out/$name.trace.json"
}
# The README's plan, under PyTorch's defaults and two settings users set.
trace gpt2-small-24gb --budget 24GB examples/gpt2-small.json
trace gpt2-small-24gb-expandable --budget 24GB --alloc-conf expandable_segments:True \
  examples/gpt2-small.json
trace gpt2-small-16gb-split64 --budget 16GB --alloc-conf max_split_size_mb:64 \
  examples/gpt2-small.json
# The H200 budget sweep's jobs (profiles/results/gpu-h200-report.md), planned
# from the analytic model: without checkpointing and at 45% of its peak.
trace h200-gpt2-none --strategy none bench/fidelity/models/h200-gpt2.json
trace h200-gpt2-medium-none --strategy none bench/fidelity/models/h200-gpt2-medium.json
trace h200-gpt2-medium-b45 --budget 11.57GiB --strategy optimal-single \
  bench/fidelity/models/h200-gpt2-medium.json
