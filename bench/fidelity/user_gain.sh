#!/usr/bin/env bash
# What a user gains, measured on the runtime: at budgets between
# the checkpoint-every-layer peak and the no-checkpointing peak of a bench
# model, the measured step time of remat's plan (the auto strategy at the
# budget) against checkpointing every layer (what transformers'
# gradient_checkpointing_enable() does) and against sqrt(N) segments, each
# trained under the same --memory-limit (a plan that overruns it fails
# like a GPU OOM, exit 4).
#
# One measured profile; per budget the three plans; then ROUNDS rounds, each
# training every plan STEPS steps in turn (interleaved, so a load change on
# this shared machine hits all three alike); a plan's time is its fastest
# step over the rounds (steps 2..). The ratios are printed from one run.
#
# usage: bench/fidelity/user_gain.sh [MODEL.json]   (default bench/fidelity/models/cpu-gain.json)
# env: BUILD (build), ROUNDS (3), STEPS (4), FRACTIONS ("0.25 0.5 0.75":
#      where the budgets lie between the every-layer and the none peak)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
planner=$build/bin/planner
model=${1:-bench/fidelity/models/cpu-gain.json}
rounds=${ROUNDS:-3}
steps=${STEPS:-4}
fractions=(${FRACTIONS:-0.25 0.5 0.75})
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

peak() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' "$1"; }
layers=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layers"])' "$model")
sqrt_n=$(python3 -c "import math; print(max(1, round(math.sqrt($layers))))")

"$planner" profile --repeats 5 --statistic min -o "$work/profile.json" "$model" > /dev/null
"$planner" --strategy none -o "$work/none.json" "$work/profile.json" > /dev/null
"$planner" --strategy uniform --every 1 -o "$work/every.json" "$work/profile.json" > /dev/null
none_peak=$(peak "$work/none.json")
every_peak=$(peak "$work/every.json")

echo "remat's plan against checkpointing every layer and sqrt(N) segments, measured: $model" \
  "($layers blocks, sqrt(N) = $sqrt_n segments); $("$planner" --version | head -1);" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "peaks from the measured profile: every layer $every_peak B, none $none_peak B;" \
  "$rounds rounds x $steps steps, fastest step of steps 2.. per plan"

budgets=()
for f in "${fractions[@]}"; do
  b=$(python3 -c "print(int($every_peak + $f * ($none_peak - $every_peak)))")
  budgets+=("$b")
  "$planner" --budget "${b}B" -o "$work/remat-$b.json" "$work/profile.json" > /dev/null
  cp "$work/every.json" "$work/every-$b.json"
  # sqrt(N) segments fits or not; trained either way (a miss exits 4).
  "$planner" --strategy segment --segments "$sqrt_n" -o "$work/sqrt-$b.json" \
    "$work/profile.json" > /dev/null
done

for r in $(seq 1 "$rounds"); do
  for b in "${budgets[@]}"; do
    for plan in remat every sqrt; do
      out="$work/$plan-$b-r$r"
      set +e
      "$planner" train --plan "$work/$plan-$b.json" --steps "$steps" --memory-limit "${b}B" \
        --json "$model" > "$out.json" 2> "$out.err"
      echo $? > "$out.rc"
      set -e
    done
  done
done

python3 - "$work" "$rounds" "${budgets[@]}" <<'PY'
import json, sys
work, rounds, budgets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def result(plan, b):
    times, peak, rc = [], 0, 0
    for r in range(1, rounds + 1):
        base = f"{work}/{plan}-{b}-r{r}"
        rc = max(rc, int(open(base + ".rc").read()))
        if rc:
            continue
        run = json.load(open(base + ".json"))
        times += [s["step_ms"] for s in run["steps"][1:]]
        peak = max(peak, run["measured"]["peak_bytes"])
    return (min(times) if times and not rc else None), peak, rc
print(f"{'budget B':>13} {'plan':<40} {'pred peak B':>13} {'meas peak B':>13} {'step ms':>9} {'vs every layer':>15} {'vs sqrt(N)':>11}")
for b in budgets:
    rows = {plan: result(plan, b) for plan in ("remat", "every", "sqrt")}
    for plan, label in (("remat", "remat (auto)"), ("every", "every layer"), ("sqrt", "sqrt(N) segments")):
        p = json.load(open(f"{work}/{plan}-{b}.json"))
        ms, peak, rc = rows[plan]
        desc = f"{label}: {p['strategy']}" + (f" {p['parameter']}" if p.get("parameter") else "")
        pred = p["predicted"]["peak_bytes"]
        if ms is None:
            fits = "over budget, exit %d" % rc
            print(f"{int(b):>13,} {desc[:40]:<40} {pred:>13,} {'':>13} {fits:>9}")
            continue
        ratios = []
        for other in ("every", "sqrt"):
            o = rows[other][0]
            ratios.append(f"{ms / o:.3f}" if o and plan == "remat" else "")
        print(f"{int(b):>13,} {desc[:40]:<40} {pred:>13,} {peak:>13,} {ms:>9.1f} {ratios[0]:>15} {ratios[1]:>11}")
PY
