#!/usr/bin/env bash
# The llama variants' small configs (gemma2, gemma3, qwen3, phi3, mixtral,
# qwen3_moe; bench/fidelity/models/hf/*-s.config.json): the analytic plan on
# --device cpu against remat's LibTorch runtime, one AdamW step in the
# config's precision, without checkpointing and with every block
# checkpointed. Prints model, strategy, predicted and measured peak bytes
# and the error (target: within 1%; docs/model-families.md, "In the
# runtime").
#
# usage: bench/fidelity/family_fidelity.sh [CONFIG.json ...]
#   env: BUILD (build), STEPS (2: the first is warm-up)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
steps=${STEPS:-2}
planner=$build/bin/planner
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
configs=("$@")
dir=bench/fidelity/models/hf
[ ${#configs[@]} -gt 0 ] || configs=($dir/gemma2-s.config.json $dir/gemma3-s.config.json
                                     $dir/gemma3-window-s.config.json $dir/qwen3-s.config.json
                                     $dir/phi3-s.config.json $dir/mixtral-s.config.json
                                     $dir/qwen3-moe-s.config.json)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-28s %-8s %14s %14s %8s\n' model plan predicted measured error
for config in "${configs[@]}"; do
  name=$(basename "$config" .config.json)
  for strategy in none uniform; do
    flags=(--budget 1TB --device cpu --strategy "$strategy")
    [ "$strategy" = uniform ] && flags+=(--every 1)
    "$planner" "${flags[@]}" -o "$work/plan.json" "$config" > /dev/null
    "$planner" train --quiet --plan "$work/plan.json" --steps "$steps" --json "$config" \
      > "$work/run.json"
    python3 - "$work/run.json" "$name" "$strategy" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
p, m = run["predicted"]["peak_bytes"], run["measured"]["peak_bytes"]
print(f"{sys.argv[2]:<28} {sys.argv[3]:<8} {p:>14,} {m:>14,} {100 * (p - m) / m:+7.2f}%")
PY
  done
done
