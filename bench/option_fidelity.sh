#!/usr/bin/env bash
# Fidelity of one selective option on the CPU runtime: the optimal plan at
# the highest budget, in 1% steps below the no-checkpoint peak (99% down to
# 50%), that puts a block under OPTION, run STEPS steps by `planner train`;
# prints predicted vs measured peak. The profile is measured first
# (`planner profile --repeats 3 --statistic min`) or analytic (--device cpu).
#
# usage: bench/option_fidelity.sh MODEL.json OPTION [measured|analytic]
#   OPTION: a selective option's name (norm_output, mlp_activation,
#   attention_core+mlp_activation+norm_output, ...)
#   env: BUILD (build), STEPS (3)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
model=$1 option=$2 source=${3:-measured}
planner=${BUILD:-build}/bin/planner
steps=${STEPS:-3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$source" = measured ]; then
  "$planner" profile --runtime-device cpu --clock thread --repeats 3 --statistic min \
    -o "$work/profile.json" "$model" > /dev/null
  input=$work/profile.json
  flags=()
else
  input=$model
  flags=(--device cpu)
fi
"$planner" --strategy none "${flags[@]}" -o "$work/none.json" "$input" > /dev/null
none_peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' \
  "$work/none.json")
# blocks PLAN OPTION: "1 norm_output, 3 keep" when a block is under OPTION; fails otherwise.
blocks() { python3 - "$@" <<'PY'
import collections, json, sys
plan, option = json.load(open(sys.argv[1])), sys.argv[2]
count = collections.Counter(l.get("selective_option", l["decision"])
                            for l in plan["layers"] if l["kind"] == "block")
if option not in count:
    sys.exit(1)
print(", ".join(f"{n} {name}" for name, n in count.most_common()))
PY
}
for pct in $(seq 99 -1 50); do
  budget=$((none_peak * pct / 100))
  "$planner" --strategy optimal --budget "${budget}B" "${flags[@]}" -o "$work/plan.json" \
    "$input" > /dev/null 2>&1 || continue
  what=$(blocks "$work/plan.json" "$option") || continue
  "$planner" train --runtime-device cpu --clock thread --plan "$work/plan.json" --steps "$steps" \
    --json "$model" > "$work/run.json"
  python3 - "$work/run.json" "$model" "$source" "$option" "$pct" "$what" <<'PY'
import json, os, sys
run, model, source, option, pct, what = sys.argv[1:]
r = json.load(open(run))
pp, mp = r["predicted"]["peak_bytes"], r["measured"]["peak_bytes"]
name = os.path.basename(model).removesuffix(".json")
print(f"| {name} | {source} | {option} | {pct}% | {what} | {pp:,} | {mp:,} | "
      f"{100.0 * (mp - pp) / pp:+.2f}% |")
PY
  exit 0
done
echo "$model ($source): no optimal plan from 99% to 50% of ${none_peak} B puts a block under $option"
exit 1
