#!/usr/bin/env bash
# remat's plans run by remat's runtime against PyTorch's own answers, side by
# side in one run, one table: the same model (shapes and ops), the same
# meter (remat's CPU allocator, in PyTorch through python/remat_measure).
#
# remat's plans: none, uniform (every round(sqrt(N))), selective (every
# block), optimal at a budget halfway between the none and uniform peaks,
# each run by `planner train --json`. Against each:
#   torch eager / torch.utils.checkpoint(use_reentrant=False) on the plan's
#     checkpoint set (a selective block: its attention core checkpointed);
#   for the selective plan, a selective-checkpoint policy
#     (create_selective_checkpoint_contexts: attention core ops recomputed,
#     the rest saved);
#   torch.compile (inductor, CPU) with activation_memory_budget: every
#     budget in BUDGETS compiled once (cold cache), and for each plan the
#     budget whose measured peak is nearest remat's.
# Rounds alternate the order of the runs, so all see the same machine (a
# shared CPU's speed drifts by the minute). Step times: median and fastest of
# steps 2.. of every run, pooled over rounds; peaks: the highest. Compile
# time (the first call of a compiled run, cold cache) is listed apart: it is
# not step time.
#
# usage: bench/fidelity/overhead_vs_pytorch.sh [MODEL.json]
#   default bench/fidelity/models/cpu-s.json; env: BUILD (build), ROUNDS (3), STEPS (4
#   per run, the first is warm-up), CLOCK (thread; or wall), BUDGETS
#   ("1.0 0.5 0.1"), PYTHON (.venv/bin/python: the PyTorch the runtime
#   was built against), REMAT_METER_LIB ($BUILD/lib/libremat_cpu_meter.so),
#   TORCHINDUCTOR_CACHE_DIR (default: a fresh one, so compiles are cold),
#   DROPOUT (functional: F.dropout, the runtime's at::dropout; native:
#   torch.native_dropout's 1-byte mask in PyTorch's runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-bench/fidelity/models/cpu-s.json}
build=${BUILD:-build}
rounds=${ROUNDS:-3}
steps=${STEPS:-4}
clock=${CLOCK:-thread}
budgets=${BUDGETS:-1.0 0.5 0.1}
dropout=${DROPOUT:-functional}
python=${PYTHON:-.venv/bin/python}
planner=$build/bin/planner
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export REMAT_METER_LIB=${REMAT_METER_LIB:-$build/lib/libremat_cpu_meter.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A cold cache unless told: compile time is then a first compile's.
cache="cold cache"
[ -n "${TORCHINDUCTOR_CACHE_DIR:-}" ] && cache="cache $TORCHINDUCTOR_CACHE_DIR"
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$work/inductor}
started=$(date +%s)

json() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"; }

plans=(none uniform selective optimal)
"$planner" --strategy none -o "$work/none.json" "$model" > /dev/null
"$planner" --strategy uniform -o "$work/uniform.json" "$model" > /dev/null
"$planner" --strategy selective -o "$work/selective.json" "$model" > /dev/null
budget=$(( ($(json "$work/none.json" predicted.peak_bytes) + $(json "$work/uniform.json" predicted.peak_bytes)) / 2 ))
"$planner" --strategy optimal --budget "${budget}B" -o "$work/optimal.json" "$model" > /dev/null
echo "model $model; $steps steps per run, $rounds rounds, clock $clock; PyTorch's dropout $dropout; $("$planner" --version | head -1);" \
  "pytorch $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) (CPU);" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"

# run KIND PLAN ROUND [BUDGET]: one process, its JSON in $work.
run() {
  local kind=$1 plan=$2 r=$3 out
  case $kind in
    remat)
      out=$work/remat-$plan-$r.json
      "$planner" train --clock "$clock" --plan "$work/$plan.json" --steps "$steps" --json "$model" \
        > "$out.tmp" 2> "$out.err" || { cat "$out.err" >&2; return 1; }
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["measured"]
json.dump({"peak_bytes": m["peak_bytes"], "steps": d["steps"]}, open(sys.argv[2], "w"))' \
        "$out.tmp" "$out" ;;
    checkpoint|sac)
      "$python" -W "ignore:Failed to initialize NumPy" bench/fidelity/pytorch_reference.py \
        --mode "$kind" --dropout "$dropout" \
        --model "$model" --plan "$work/$plan.json" --steps "$steps" --clock "$clock" \
        > "$work/$kind-$plan-$r.json" ;;
    compile)
      "$python" -W "ignore:Failed to initialize NumPy" bench/fidelity/pytorch_reference.py \
        --mode compile --dropout "$dropout" \
        --budget "$4" --model "$model" --steps "$steps" --clock "$clock" \
        > "$work/compile-$4-$r.json" 2> "$work/compile-$4-$r.err" ||
        { cat "$work/compile-$4-$r.err" >&2; return 1; } ;;
  esac
}

# One round: every remat plan and its PyTorch counterparts, in order or
# reversed (odd/even rounds); compile at the chosen budgets from round 2 on.
round() {
  local r=$1 jobs=()
  for p in "${plans[@]}"; do jobs+=("remat $p" "checkpoint $p"); done
  jobs+=("sac selective")
  if [ "$r" -gt 1 ]; then for b in $chosen; do jobs+=("compile - $b"); done; fi
  if [ $((r % 2)) -eq 0 ]; then
    local rev=(); for ((i = ${#jobs[@]} - 1; i >= 0; i--)); do rev+=("${jobs[i]}"); done
    jobs=("${rev[@]}")
  fi
  for j in "${jobs[@]}"; do
    set -- $j
    run "$1" "$2" "$r" "${3:-}"
  done
  echo "round $r done ($(( $(date +%s) - started )) s, load average $(cut -d' ' -f1 /proc/loadavg))"
}

round 1
# The budget search: each budget compiled once (its round-1 run).
for b in $budgets; do
  run compile - 1 "$b"
  echo "torch.compile activation_memory_budget $b: peak $(json "$work/compile-$b-1.json" peak_bytes) B," \
    "compile $(printf '%.0f' "$(json "$work/compile-$b-1.json" compile_s)") s"
done
chosen=$(python3 - "$work" "$budgets" "${plans[@]}" <<'PY'
import json, sys
work, budgets, plans = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
peak = {b: json.load(open(f"{work}/compile-{b}-1.json"))["peak_bytes"] for b in budgets}
near = {min(budgets, key=lambda b: abs(peak[b] - json.load(open(f"{work}/remat-{p}-1.json"))["peak_bytes"]))
        for p in plans}
print(" ".join(b for b in budgets if b in near))
PY
)
for r in $(seq 2 "$rounds"); do round "$r"; done

python3 - "$work" "$cache" "$budgets" "${plans[@]}" <<'PY'
import glob, json, statistics, sys
work, cache, budgets, plans = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]

def pooled(pattern):
    files = glob.glob(f"{work}/{pattern}-*.json")
    runs = [json.load(open(f)) for f in sorted(files, key=lambda f: int(f.rsplit("-", 1)[1][:-5]))]
    later = [s["step_ms"] for run in runs for s in run["steps"][1:]]
    return {"peak": max(r["peak_bytes"] for r in runs), "median": statistics.median(later),
            "fastest": min(later), "runs": len(runs), "runs_data": runs}

def parameter(p):
    plan = json.load(open(f"{work}/{p}.json"))
    return f"{p} ({plan['parameter']})" if plan["parameter"] not in ("", "-") else p

compiled = {b: pooled(f"compile-{b}") for b in budgets}
print()
print("ratios: this row / remat's row of the same plan (below 1: PyTorch lower or faster)")
print(f"{'plan':<36} {'run by':<44} {'peak B':>13} {'MiB':>8} {'median ms':>10} {'fastest ms':>11}"
      f" {'peak/remat':>10} {'med/remat':>9} {'fast/remat':>10}")
wins = []
for p in plans:
    ours = pooled(f"remat-{p}")
    near = min(budgets, key=lambda b: abs(compiled[b]["peak"] - ours["peak"]))
    rows = [("remat runtime (planner train)", ours),
            ("torch eager, no checkpoint" if p == "none" else
             "torch.utils.checkpoint, non-reentrant", pooled(f"checkpoint-{p}"))]
    if p == "selective":
        rows.append(("torch selective policy (SAC)", pooled("sac-selective")))
    rows.append((f"torch.compile, activation_memory_budget {near}", compiled[near]))
    for i, (name, r) in enumerate(rows):
        ratios = ("" if i == 0 else f"{r['peak'] / ours['peak']:10.3f} {r['median'] / ours['median']:9.3f}"
                  f" {r['fastest'] / ours['fastest']:10.3f}")
        print(f"{parameter(p) if i == 0 else '':<36} {name:<44} {r['peak']:13,} {r['peak'] / 2**20:8.2f}"
              f" {r['median']:10.1f} {r['fastest']:11.1f} {ratios}")
        if i > 0:
            if r["peak"] < ours["peak"]:
                wins.append(f"{p}: {name} peak {100 * (1 - r['peak'] / ours['peak']):.1f}% lower")
            if r["fastest"] < ours["fastest"]:
                wins.append(f"{p}: {name} fastest step {100 * (1 - r['fastest'] / ours['fastest']):.1f}% faster")
print()
print(f"torch.compile budget search (each budget compiled once, {cache}; compile = wall time of "
      "the first call, not a step):")
for b in budgets:
    c = compiled[b]
    cs = [r["compile_s"] for r in c["runs_data"]]
    print(f"  activation_memory_budget {b:<5} peak {c['peak']:13,} B {c['peak'] / 2**20:8.2f} MiB, "
          f"median {c['median']:.1f} ms, fastest {c['fastest']:.1f} ms, compile {cs[0]:.0f} s"
          + (f" (reruns, warm cache: {', '.join(f'{x:.0f}' for x in cs[1:])} s)" if len(cs) > 1 else ""))
print()
print("where PyTorch wins:", "; ".join(wins) if wins else "nowhere (peak and fastest step)")
PY
echo "total $(( $(date +%s) - started )) s; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
