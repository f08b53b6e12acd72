#!/usr/bin/env bash
# Plans every bundled input (examples, Hugging Face configs, bench models,
# profile fixtures) at several budgets, in text and JSON, with the exports,
# the Pareto table and a few multi-GPU jobs, and writes each output to its
# own file under OUT_DIR. Run it with two builds and diff the folders: a
# change meant to keep behaviour (a move, a split) shows no difference.
#
# usage: scripts/plan_outputs.sh PLANNER OUT_DIR
#   diff -r OUT_BEFORE OUT_AFTER
# Budgets are fractions of each input's own no-checkpoint peak (so every input
# is planned tight, in between and loose), plus one that fits nothing.
set -euo pipefail
planner=$1
out=$2
cd "$(dirname "$0")/.."
mkdir -p "$out"

inputs=(examples/*.json examples/hf/*.json examples/distributed/*.json
        bench/fidelity/models/*.json bench/fidelity/models/hf/*.json
        profiles/fixtures/*.json)
fractions=(0.35 0.55 0.75 0.95)

run() {  # run NAME ARGS...: stdout, stderr and exit code into OUT/NAME.*
  local name=$1; shift
  local rc=0
  "$planner" "$@" --quiet > "$out/$name.out" 2> "$out/$name.err" || rc=$?
  echo "$rc" > "$out/$name.rc"
}

peak_of() {  # the no-checkpoint peak of an input, in bytes
  "$planner" --quiet --budget 1000TB --strategy none --json "$@" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["predicted"]["peak_bytes"])'
}

count=0
for input in "${inputs[@]}"; do
  [ -f "$input" ] || continue
  base=$(echo "$input" | tr '/' '_')
  peak=$(peak_of "$input") || { run "$base.none" --budget 1000TB "$input"; continue; }
  for f in "${fractions[@]}"; do
    budget=$(python3 -c "print(int($peak * $f))")
    run "$base.$f.txt" --budget "${budget}B" "$input"
    run "$base.$f.json" --budget "${budget}B" --json "$input"
    run "$base.$f.md" --budget "${budget}B" --format md "$input"
  done
  run "$base.nofit.txt" --budget 1MB "$input"
  for s in uniform segment selective optimal-single optimal; do
    run "$base.0.55.$s.json" --budget "$(python3 -c "print(int($peak * 0.55))")B" --strategy "$s" --json "$input"
  done
  count=$((count + 1))
done

# Exports, Pareto and a few jobs over many GPUs, on the configs users bring.
for input in examples/gpt2-small.json examples/hf/llama-3-8b.config.json examples/hf/mixtral-8x7b.config.json; do
  base=$(echo "$input" | tr '/' '_')
  for engine in pytorch hf deepspeed megatron torchtitan; do
    run "$base.export-$engine" --budget 24GB --micro-batch 2 --seq-len 1024 --export "$engine" "$input"
  done
  run "$base.pareto" pareto --points 6 --json "$input"
  run "$base.fsdp8" --budget 80GB --gpus 8 --fsdp full_shard --micro-batch 1 --seq-len 4096 --json "$input"
  run "$base.zero2" --budget 40GB --gpus 4 --zero 2 --micro-batch 2 --seq-len 2048 "$input"
  run "$base.tp" --budget 80GB --gpus 8 --tp 4 --sp --micro-batch 1 --seq-len 4096 --json "$input"
  run "$base.pp" --budget 80GB --gpus 8 --pp 4 --micro-batch 1 --seq-len 4096 --grad-accumulation 8 --json "$input"
  run "$base.global" --budget 24GB --global-batch 16 --seq-len 1024 "$input"
  run "$base.device" --budget 24GB --device a100 --micro-batch 2 --seq-len 1024 "$input"
done
run analytic-profile profile --analytic -o /dev/stdout examples/gpt2-small.json
echo "plan_outputs: $count inputs, $(ls "$out" | wc -l) files in $out" >&2
