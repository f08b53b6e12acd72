#!/usr/bin/env python3
"""Whole-process time of planning commands over real configs and layouts.

  bench/speed/grid.py [PLANNER [RUNS]]      (default build/bin/planner, 3 runs)
  FILTER=REGEX bench/speed/grid.py ...      (only the commands whose name matches)
  DEVICE=NAME bench/speed/grid.py ...       (the --device preset, default h100)

Runs each command of the grid below RUNS times, one after the other, from
the repository root: Llama 3.1 8B, 70B and 405B and Mixtral 8x7B
(examples/hf/*.config.json, bf16 mixed precision, seq 8192) on 8 to 512
GPUs with DDP, ZeRO 1 and 3, FSDP2 full and hybrid shard, tensor (and
sequence) and pipeline parallelism; for each the plan (auto), and on some
--global-batch, --export torchtitan, pareto, --report and a budget nothing
fits (the no-fit advice). Prints the machine's load (uptime) before and
after, then a Markdown table per command: median and slowest wall ms,
median CPU ms (user + system, all threads) and the exit code, and the
grid's median and slowest. The target is 50 ms wall per command on an idle
2-core machine; on a loaded machine the CPU column is the steadier one.
Writes only to a temporary directory.
"""
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HF = "examples/hf"
MIXED = ["--precision", "mixed_bf16", "--seq-len", "8192"]
DEVICE = os.environ.get("DEVICE", "h100")


def grid(tmp):
    """(name, args) of every command."""
    l8, l70, l405 = (f"{HF}/llama-3.1-{s}.config.json" for s in ("8b", "70b", "405b"))
    mixtral = f"{HF}/mixtral-8x7b.config.json"
    layouts = [
        ("8b fsdp8", l8, ["--gpus", "8", "--fsdp", "full_shard", "--micro-batch", "2"]),
        ("8b ddp8", l8, ["--gpus", "8", "--micro-batch", "1"]),
        ("8b zero1x64", l8, ["--gpus", "64", "--zero", "1", "--micro-batch", "2"]),
        ("8b tp2sp fsdp", l8, ["--gpus", "16", "--fsdp", "full_shard", "--tp", "2", "--sp",
                               "--micro-batch", "2"]),
        ("70b fsdp64", l70, ["--gpus", "64", "--fsdp", "full_shard", "--micro-batch", "1"]),
        ("70b fsdp8", l70, ["--gpus", "8", "--fsdp", "full_shard", "--micro-batch", "1"]),
        ("70b hsdp64", l70, ["--gpus", "64", "--fsdp", "hybrid_shard", "--micro-batch", "1"]),
        ("70b zero3x64", l70, ["--gpus", "64", "--zero", "3", "--micro-batch", "1"]),
        ("70b tp8sp fsdp256", l70, ["--gpus", "256", "--fsdp", "full_shard", "--tp", "8", "--sp",
                                    "--micro-batch", "2"]),
        ("70b pp4 tp8", l70, ["--gpus", "64", "--fsdp", "full_shard", "--tp", "8", "--sp",
                              "--pp", "4", "--micro-batch", "1", "--grad-accumulation", "8"]),
        ("405b tp8sp fsdp128", l405, ["--gpus", "128", "--fsdp", "full_shard", "--tp", "8",
                                      "--sp", "--micro-batch", "2"]),
        ("405b fsdp128", l405, ["--gpus", "128", "--fsdp", "full_shard", "--micro-batch", "2"]),
        ("405b pp8 tp8 fsdp512", l405, ["--gpus", "512", "--fsdp", "full_shard", "--tp", "8",
                                        "--sp", "--pp", "8", "--micro-batch", "1",
                                        "--grad-accumulation", "32"]),
        ("mixtral fsdp64", mixtral, ["--gpus", "64", "--fsdp", "full_shard",
                                     "--micro-batch", "1"]),
    ]
    out = []
    for name, config, layout in layouts:
        base = ["--budget", "80GB", "--device", DEVICE] + MIXED + layout
        out.append((f"plan {name}", base + [config]))
    extra = {
        "8b fsdp8": l8, "70b fsdp64": l70, "405b tp8sp fsdp128": l405,
    }
    for name, config in extra.items():
        layout = next(l for n, _, l in layouts if n == name)
        base = ["--budget", "80GB", "--device", DEVICE] + MIXED + layout
        no_batch = [a for i, a in enumerate(base)
                    if a != "--micro-batch" and (i == 0 or base[i - 1] != "--micro-batch")]
        out.append((f"global-batch {name}", no_batch + ["--global-batch", "1024", config]))
        out.append((f"export {name}", base + ["--export", "torchtitan", config]))
        out.append((f"report {name}", base + ["--report", os.path.join(tmp, "r.html"), config]))
        out.append((f"pareto {name}", ["pareto"] + [a for a in base if a not in ("--budget", "80GB")]
                    + [config]))
        out.append((f"no-fit {name}", ["--budget", "8GB"] + base[2:] + [config]))
    return out


def timed(planner, args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run([planner] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu, r.returncode, r.stderr


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main():
    planner = sys.argv[1] if len(sys.argv) > 1 else "build/bin/planner"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    keep = re.compile(os.environ.get("FILTER", ""))
    print(f"load before: {uptime()}")
    print()
    print("| command | median wall ms | slowest wall ms | median CPU ms | exit |")
    print("|---|---:|---:|---:|---:|")
    medians, slowest = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in grid(tmp):
            if not keep.search(name):
                continue
            walls, cpus, codes = [], [], set()
            for _ in range(runs):
                wall, cpu, code, err = timed(planner, args)
                if code not in (0, 3):
                    raise SystemExit(f"{name}: planner {' '.join(args)}: exit {code}: {err}")
                walls.append(wall)
                cpus.append(cpu)
                codes.add(code)
            medians.append(statistics.median(walls))
            slowest.append(max(walls))
            print(f"| {name} | {statistics.median(walls):.0f} | {max(walls):.0f} | "
                  f"{statistics.median(cpus):.0f} | {','.join(map(str, sorted(codes)))} |",
                  flush=True)
    print()
    if medians:
        print(f"grid: median of medians {statistics.median(medians):.0f} ms, slowest "
              f"{max(slowest):.0f} ms wall over {len(medians)} commands x {runs} runs")
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
