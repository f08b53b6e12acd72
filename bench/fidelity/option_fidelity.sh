#!/usr/bin/env bash
# Fidelity of one selective option on the CPU runtime: the optimal plan at
# the highest budget, in 1% steps below the no-checkpoint peak, that puts a
# block under the option, run STEPS steps by `planner train`, predicted vs
# measured peak (the cells of docs/solver-measurements.md, "Selective options
# on the CPU runtime").
#
# usage: bench/fidelity/option_fidelity.sh MODEL.json SOURCE OPTION...
#   SOURCE: measured (profile the model first: `planner profile --repeats 3
#   --statistic min`) or analytic (`--device cpu`); OPTION: an option's name
#   as plans write it (e.g. dropout_mask); one cell per option.
#   env: BUILD (build), STEPS (3), LOW (50: the lowest budget, in % of the
#   no-checkpoint peak), KEEP (a directory to keep the files in), CHEAP
#   (measured only: an option whose recompute time is set to 0.01 ms in the
#   measured profile, bytes untouched, so that the solver picks it where the
#   measured time never pays: its bytes' cell)
set -euo pipefail
cd "$(dirname "$0")/../.."
planner=${BUILD:-build}/bin/planner
model=$1 source=$2
shift 2
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
shown=$source  # the profile column
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
if [ "$source" = measured ]; then
  "$planner" profile --runtime-device cpu --repeats 3 --statistic min -o "$work/profile.json" \
    "$model" 2> /dev/null
  input=$work/profile.json flags=()
  if [ -n "${CHEAP:-}" ]; then
    shown="measured*"
    python3 - "$input" "$CHEAP" <<'PY'
import json, sys
path, option = sys.argv[1:]
p = json.load(open(path))
for l in p["layers"]:
    for o in l.get("selective", []):
        if o["name"] == option: o["extra_recompute_ms"] = 0.01
json.dump(p, open(path, "w"), indent=1)
PY
  fi
else
  input=$model flags=(--device cpu)
fi
"$planner" --strategy none "${flags[@]}" -o "$work/none.json" "$input" > /dev/null
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' \
  "$work/none.json")
# blocks PLAN: how the plan runs its blocks ("1 dropout_mask, 3 keep"), and
# whether OPTION is among them (exit status).
blocks() { python3 - "$@" <<'PY'
import collections, json, sys
plan, option = json.load(open(sys.argv[1])), sys.argv[2]
count = collections.Counter()
for l in plan["layers"]:
    if l.get("kind") != "block": continue
    count[l.get("selective_option") or l.get("decision", "?")] += 1
print(", ".join(f"{n} {k}" for k, n in count.most_common()))
sys.exit(0 if option in count else 1)
PY
}
printf '%-12s %-9s %-24s %7s %14s %14s %8s  %s\n' model profile option budget \
  "predicted peak" "measured peak" error blocks
for option in "$@"; do
  found=0
  for pct in $(seq 99 -1 "${LOW:-50}"); do
    budget=$((peak * pct / 100))
    plan=$work/$option-$pct.json
    "$planner" --strategy optimal --budget "${budget}B" "${flags[@]}" -o "$plan" "$input" \
      > /dev/null 2>&1 || continue
    how=$(blocks "$plan" "$option") || continue
    "$planner" train --runtime-device cpu --plan "$plan" --steps "${STEPS:-3}" --json "$model" \
      > "$work/$option-$pct-run.json"
    python3 - "$work/$option-$pct-run.json" "$model" "$shown" "$option" "$pct" "$how" <<'PY'
import json, os, sys
run, model, source, option, pct, how = sys.argv[1:]
r = json.load(open(run))
pp, mp = r["predicted"]["peak_bytes"], r["measured"]["peak_bytes"]
print(f"{os.path.basename(model)[:-5]:12s} {source:9s} {option:24s} {pct + '%':>7s} "
      f"{pp:14,d} {mp:14,d} {100.0 * (mp - pp) / pp:+7.2f}%  {how}")
PY
    found=1
    break
  done
  [ "$found" = 1 ] || echo "$(basename "$model" .json) $source $option: no optimal plan from 99% to" \
    "${LOW:-50}% puts a block under it"
done
