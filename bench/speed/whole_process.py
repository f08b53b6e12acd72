#!/usr/bin/env python3
"""Whole-process time of `planner --strategy optimal`, two binaries, alternately.

  bench/speed/whole_process.py BEFORE_PLANNER AFTER_PLANNER SOLVER_BENCH [RUNS [LAYERS...]]

Writes the benchmark's spread_persistent chains (solver_bench
--write_profile=spread_persistent:L:PATH, default L = 64 256 1024; FAMILY=spread:
the same chains with gradients created in backward) to a
temporary directory, takes the budget docs/solver-measurements.md uses (the model state
plus 40% of the way from the lowest activation peak to keeping everything,
as solver_bench prints them), and runs

  PLANNER --budget B --strategy optimal --slots 1000 [--exact-times] PROFILE

RUNS times (default 5) on each binary, alternating before / after so that a
pair sees the same machine load. Prints a markdown table of the wall and CPU
(user + system, all threads) milliseconds, median and (in parentheses) the
least of the runs, and whether both binaries printed the same plan (the
text report, byte for byte). --exact-times is left out at 1024 layers when
the before binary would need its exact DP (27 s) unless ALL_EXACT=1; NO_EXACT=1
leaves it out everywhere.
"""
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def write_profile(bench, layers, path):
    family = os.environ.get("FAMILY", "spread_persistent")
    out = subprocess.run([bench, f"--write_profile={family}:{layers}:{path}"],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"lowest (\d+), keeping everything (\d+) bytes; static (\d+) bytes", out)
    lowest, keep_all, static = (int(g) for g in m.groups())
    return static + lowest + (keep_all - lowest) * 4 // 10


def timed(planner, args):
    """Wall and CPU (user + system) milliseconds of one run, and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run([planner] + args, capture_output=True, text=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{planner} {' '.join(args)} failed: {r.stderr}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu, r.stdout


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    before, after, bench = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    sizes = [int(v) for v in sys.argv[5:]] or [64, 256, 1024]
    print("| L | times | budget (B) | before: wall / CPU ms | after: wall / CPU ms | "
          "CPU speed-up | same plan |")
    print("|---:|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for layers in sizes:
            path = os.path.join(tmp, f"spread{layers}.json")
            budget = write_profile(bench, layers, path)
            for exact in (False, True):
                if exact and os.environ.get("NO_EXACT"):
                    continue
                if exact and layers >= 1024 and not os.environ.get("ALL_EXACT"):
                    continue
                args = ["--budget", f"{budget}B", "--strategy", "optimal", "--slots", "1000"]
                args += ["--exact-times"] if exact else []
                args.append(path)
                samples = {before: [], after: []}
                plans = {}
                for _ in range(runs):
                    for planner in (before, after):
                        wall, user, out = timed(planner, args)
                        samples[planner].append((wall, user))
                        plans[planner] = out
                cells = []
                for planner in (before, after):
                    walls = [w for w, _ in samples[planner]]
                    cpus = [c for _, c in samples[planner]]
                    cells.append((statistics.median(walls), min(walls), statistics.median(cpus),
                                  min(cpus)))
                speedup = cells[0][2] / cells[1][2] if cells[1][2] > 0 else float("inf")
                same = "yes" if plans[before] == plans[after] else "NO"
                text = [f"{w:.1f} ({wmin:.1f}) / {c:.1f} ({cmin:.1f})" for w, wmin, c, cmin in cells]
                print(f"| {layers} | {'exact' if exact else 'pooled'} | {budget:,} | "
                      f"{text[0]} | {text[1]} | {speedup:.2f}x | {same} |", flush=True)


if __name__ == "__main__":
    main()
