#!/usr/bin/env python3
"""Markdown report of a scripts/gpu_run.sh output folder: predicted vs
measured peak and step time for every plan it trained on the GPU.

usage: gpu_report.py OUT_DIR > OUT_DIR/report.md
(OUT_DIR: env.txt, fidelity.txt, runs/*.json|.rc|.err, log.txt; each optional)
"""
import glob
import json
import os
import sys


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def main():
    out = sys.argv[1]
    print("# remat on the GPU: predicted vs measured\n")
    env = os.path.join(out, "env.txt")
    if os.path.exists(env):
        print("```\n" + open(env).read().strip() + "\n```\n")
    fidelity = os.path.join(out, "fidelity.txt")
    if os.path.exists(fidelity):
        print("## Fidelity matrix on CUDA (bench/fidelity.sh, DEVICE=cuda)\n")
        print("```\n" + open(fidelity).read().strip() + "\n```\n")
    print("## Budget sweep (auto plan at 80/60/45% of the none peak) and the memory limit\n")
    print("Measured peak: CUDA caching allocator `allocated` bytes (as "
          "torch.cuda.max_memory_allocated); reserved: its `reserved` peak. Times: "
          "median of steps 2-5, device synchronized around every op.\n")
    print("| run | strategy | budget | predicted peak | measured peak | error | reserved peak "
          "| predicted ms | measured ms | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
        name = os.path.basename(path)[:-5]
        rc = open(path[:-5] + ".rc").read().strip() if os.path.exists(path[:-5] + ".rc") else "?"
        if rc != "0":
            err = open(path[:-5] + ".err").read().strip().splitlines()
            print(f"| {name} | exit {rc} | | | | | | | | {err[-1] if err else ''} |")
            continue
        r = json.load(open(path))
        p, m = r["predicted"], r["measured"]
        budget = r["plan"]["budget_bytes"]
        err = 100.0 * (m["peak_bytes"] - p["peak_bytes"]) / p["peak_bytes"]
        print(f"| {name} | {r['plan']['strategy']} | {gib(budget) if budget else '-'} "
              f"| {gib(p['peak_bytes'])} | {gib(m['peak_bytes'])} | {err:+.2f}% "
              f"| {gib(m['reserved_peak_bytes'])} | {p['step_ms']:.1f} | {m['step_ms']:.1f} "
              f"| {m['step_ms'] / p['step_ms']:.3f} |")
    log = os.path.join(out, "log.txt")
    if os.path.exists(log):
        print("\n## log\n\n```\n" + open(log).read().strip() + "\n```")


if __name__ == "__main__":
    main()
