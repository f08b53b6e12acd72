#!/usr/bin/env python3
"""remat's plans for torchtitan's published Llama 3.1 runs, beside their memory.

  bench/fidelity/torchtitan_published.py [PLANNER]    (default build/bin/planner)

Reads bench/fidelity/torchtitan_runs.json (each run's layout as planner
arguments, the card it ran on, torchtitan's logged peak and whether it ran
or ran out of memory), runs

  PLANNER --json --budget CARD --device DEVICE ARGS --strategy S CONFIG

for each run and each strategy given for it, and prints a Markdown table:
the planner's allocated, reserved and device peaks (GiB), torchtitan's
published reserved peak, the reserved difference, and whether the plan
fits the card where torchtitan ran (or does not, where it ran out of
memory). Runs from the repository root; writes nothing. Exit 1 when a plan
disagrees with the published outcome (a run that ran does not fit, or an
out-of-memory run fits), 0 otherwise.
"""
import json
import os
import subprocess
import sys

GIB = 1 << 30


def plan(planner, run, strategy):
    args = [planner, "--json", "--quiet", "--budget", run["budget"], "--device", run["device"]]
    args += run["args"] + ["--strategy"] + strategy + [run["config"]]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return args, json.loads(r.stdout)


def main():
    planner = sys.argv[1] if len(sys.argv) > 1 else "build/bin/planner"
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "torchtitan_runs.json")) as f:
        runs = json.load(f)["runs"]
    print("| run | torchtitan: checkpointing | remat --strategy | allocated GiB | reserved GiB "
          "| device GiB | published reserved GiB | reserved - published | card | torchtitan | remat "
          "| agrees |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|---|---|---|")
    commands = []
    disagreements = 0
    for run in runs:
        kind, strategies = next(iter(run["strategies"].items()))
        for strategy in strategies:
            args, out = plan(planner, run, strategy)
            commands.append(" ".join(["planner"] + [a for a in args[1:] if a not in ("--json", "--quiet")]))
            p = out["predicted"]
            reserved = p["reserved_peak_bytes"] / GIB
            published = run["published_reserved_gib"]
            fits = out["fits"]
            if kind == "exact":
                agrees = fits == (run["outcome"] == "ran")
                disagreements += not agrees
                verdict = "yes" if agrees else "NO"
            else:
                verdict = "bound"
            cells = [
                run["id"], run["checkpointing"], " ".join(strategy),
                f"{p['allocated_peak_bytes'] / GIB:.2f}", f"{reserved:.2f}",
                f"{p['device_peak_bytes'] / GIB:.2f}",
                "-" if published is None else f"{published:.1f}",
                "-" if published is None else f"{reserved - published:+.2f}",
                f"{run['card']} ({run['budget']})", run["outcome"],
                "fits" if fits else "does not fit", verdict,
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
    print()
    print("Commands (from the repository root):")
    print()
    for c in commands:
        print(f"    {c}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
