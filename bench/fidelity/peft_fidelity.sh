#!/usr/bin/env bash
# remat's LoRA prediction against PEFT and transformers: a small Hugging Face
# LlamaForCausalLM (bench/fidelity/models/hf/llama-gqa-s.config.json, random weights)
# with peft's LoraConfig(r=8, target_modules=["q_proj", "v_proj"], lora_dropout), AdamW and
# gradient accumulation over 4 micro-batches (loss / 4, a step after the 4th),
# on CPU in fp32, without and with gradient_checkpointing_enable(). The
# measured peak is remat's CPU meter over one whole update in the same
# process (bench/fidelity/peft_reference.py); the prediction is `planner --device cpu`
# on the same config.json with the same LoRA flags: strategy none, and
# uniform every 1 (each block's input kept, the block recomputed in
# backward, as transformers' gradient checkpointing does). Target: within 5%.
#
# QLoRA (nf4: bitsandbytes' Linear4bit in every decoder layer) needs
# bitsandbytes importable by PYTHON (in the venv, or PYTHONPATH=DIR after
# `pip install --target DIR --no-deps bitsandbytes`); without it the nf4 rows
# are skipped with a line saying so.
#
# usage: bench/fidelity/peft_fidelity.sh [CONFIG.json ...]
#   default: bench/fidelity/models/hf/llama-gqa-s.config.json; env: BUILD (build),
#   PYTHON (.venv/bin/python with transformers and peft), STEPS (2), RANK (8),
#   TARGETS (q_proj,v_proj), ACCUMULATION (4), DROPOUT (0.0: PEFT's lora_dropout; each
#   adapter then keeps a dropped copy of its input and the mask, in x's dtype on CPU)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
python=${PYTHON:-.venv/bin/python}
steps=${STEPS:-2}
rank=${RANK:-8}
targets=${TARGETS:-q_proj,v_proj}
accumulation=${ACCUMULATION:-4}
dropout=${DROPOUT:-0.0}
planner=$build/bin/planner
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export REMAT_METER_LIB=${REMAT_METER_LIB:-$build/lib/libremat_cpu_meter.so}
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(bench/fidelity/models/hf/llama-gqa-s.config.json)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$python" - <<'PY'
import importlib.util, sys
missing = [m for m in ("transformers", "peft") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"peft_fidelity: {sys.executable} lacks {', '.join(missing)}; "
             "run scripts/install-deps.sh --references")
PY
quantizations=(none)
if "$python" -c 'import bitsandbytes' 2>/dev/null; then
  quantizations+=(nf4)
else
  echo "nf4: skipped, bitsandbytes is not installed in $python"
fi
versions=$("$python" -c 'import torch, transformers, peft
print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")' 2>/dev/null)
echo "remat against PEFT LoRA: $versions; CPU, fp32, AdamW, r=$rank on $targets, lora_dropout $dropout, $accumulation micro-batches per update, update $steps metered; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %-5s %-14s %16s %16s %8s\n' model base checkpointing "predicted B" "measured B" error
for config in "${configs[@]}"; do
  name=$(basename "$config" .config.json)
  for quantization in "${quantizations[@]}"; do
    for mode in none every-layer; do
      if [ "$mode" = none ]; then strategy=(--strategy none); flag=(); else
        strategy=(--strategy uniform --every 1); flag=(--checkpointing); fi
      "$planner" --budget 1TB --device cpu "${strategy[@]}" --lora-rank "$rank" \
        --lora-targets "$targets" --lora-dropout "$dropout" --quantization "$quantization" \
        --grad-accumulation "$accumulation" --json --quiet "$config" > "$work/plan.json"
      "$python" -W ignore bench/fidelity/peft_reference.py "$config" "${flag[@]}" --rank "$rank" \
        --targets "$targets" --dropout "$dropout" --accumulation "$accumulation" --steps "$steps" \
        --quantization "$quantization" > "$work/measured.json" 2> "$work/stderr" ||
        { cat "$work/stderr" >&2; exit 1; }
      python3 - "$work/plan.json" "$work/measured.json" "$name" "$quantization" "$mode" <<'PY'
import json, sys
plan, measured = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
pred, meas = plan["predicted"]["peak_bytes"], measured["peak_bytes"]
for key in ("parameters", "trainable_parameters"):
    if plan["model"][key] != measured[key]:
        print(f"{sys.argv[3]}: {key} differ: remat {plan['model'][key]:,}, "
              f"PEFT {measured[key]:,}", file=sys.stderr)
print(f"{sys.argv[3]:<16} {sys.argv[4]:<5} {sys.argv[5]:<14} {pred:16,} {meas:16,} "
      f"{(pred - meas) / meas:+8.1%}")
PY
    done
  done
done
