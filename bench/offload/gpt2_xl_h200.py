#!/usr/bin/env python3
"""GPT-2 XL on the H200 preset with and without offload: the tables of
docs/offload.md ("GPT-2 XL on the H200 preset"), from the planner.

usage: bench/offload/gpt2_xl_h200.py [PLANNER]   (from the repository root;
default build/bin/planner). Prints Markdown: the strategies at micro-batch
32 over budgets (pcie5 and without a link), the in-line cpu link, the
budget floors and the lowest budgets that fit (bisected to 0.01 GiB) at
micro-batch 8, 32 and 64, and `auto`'s plan at budgets between. Plans the
plain loss (--chunked-loss 0: the tables compare recomputation and
offload). About two minutes on one core.
"""
import json
import subprocess
import sys

PLANNER = sys.argv[1] if len(sys.argv) > 1 else "build/bin/planner"
MODEL = "examples/gpt2-xl.json"


def plan(*args):
    out = subprocess.run([PLANNER, "--format", "json", "--device", "h200", "--chunked-loss", "0",
                          *args, MODEL], capture_output=True, text=True)
    if out.returncode not in (0, 3):
        sys.exit(f"planner {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def cell(d, with_host=True):
    p = d["predicted"]
    what = f"{d['strategy']}: {d['parameter']}" if d["strategy"] else d["parameter"]
    if not d["fits"]:
        return f"does not fit ({what}: {gib(p['device_peak_bytes'])} on the card)"
    host = p.get("host_peak_bytes", 0)
    extra = f"; {gib(host)} host" if with_host and host > 0 else ""
    return f"{p['step_ms']:.1f} ms ({what}{extra}; {gib(p['device_peak_bytes'])})"


def fits(args, budget):
    return plan("--budget", f"{budget:.3f}GiB", *args)["fits"]


def lowest_fitting(args, hi):
    lo = 1.0
    if not fits(args, hi):
        return None
    while hi - lo > 0.01:
        mid = (lo + hi) / 2
        if fits(args, mid):
            hi = mid
        else:
            lo = mid
    return hi


def main():
    print("## Strategies at micro-batch 32 (S: --strategy; pcie5 unless 'no link')\n")
    print("| budget | optimal-single, no link | optimal-single | offload | optimal |")
    print("|---|---|---|---|---|")
    for b in (36, 38, 40, 42, 45, 50, 55, 60):
        row = [cell(plan("--budget", f"{b}GiB", "--micro-batch", "32", "--strategy",
                         "optimal-single", "--host-link", "none"))]
        for s in ("optimal-single", "offload", "optimal"):
            row.append(cell(plan("--budget", f"{b}GiB", "--micro-batch", "32", "--strategy", s)))
        print(f"| {b} GiB | " + " | ".join(row) + " |")
    print("\n## The in-line cpu link at micro-batch 32\n")
    print("| budget | optimal-single (cpu) | offload (cpu) |")
    print("|---|---|---|")
    for b in (40, 42, 45, 50):
        row = [cell(plan("--budget", f"{b}GiB", "--micro-batch", "32", "--strategy", s,
                         "--host-link", "cpu")) for s in ("optimal-single", "offload")]
        print(f"| {b} GiB | " + " | ".join(row) + " |")
    print("\n## Floors (--budget 1B) and the lowest budget that fits (auto, bisected)\n")
    print("| micro-batch | link | smallest device peak (replayed without a cap) | lowest budget "
          "that fits | its plan |")
    print("|---|---|---|---|---|")
    for mb in ("8", "32", "64"):
        for link in ("none", "pcie5", "nvlink-c2c"):
            args = ["--micro-batch", mb, "--host-link", link]
            floor = plan("--budget", "1B", *args)
            least = floor["predicted"]["device_peak_bytes"]
            at = lowest_fitting(args, least / 2**30 + 1)
            best = cell(plan("--budget", f"{at:.3f}GiB", *args)) if at else "-"
            print(f"| {mb} | {link} | {gib(least)} ({floor['strategy']}: {floor['parameter']}) | "
                  f"{at:.2f} GiB | {best} |" if at else f"| {mb} | {link} | {gib(least)} | - | - |")
    print("\n## auto's plan at budgets between\n")
    print("| mb | budget | no link | pcie5 | nvlink-c2c |")
    print("|---|---|---|---|---|")
    for mb, budgets in (("32", (40, 42, 45, 50, 55, 60)), ("64", (62, 66, 70, 80, 90))):
        for b in budgets:
            row = [cell(plan("--budget", f"{b}GiB", "--micro-batch", mb, "--host-link", link))
                   for link in ("none", "pcie5", "nvlink-c2c")]
            print(f"| {mb} | {b} GiB | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
