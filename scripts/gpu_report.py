#!/usr/bin/env python3
"""Markdown report of a scripts/gpu_run.sh output folder: predicted vs
measured peak and step time for every plan it trained on the GPU, and the
device memory besides tensors (CUDA context, workspaces, the caching
allocator's measured reserved peak against its replay), written as a preset to
OUT_DIR/profiles/h200-device.json in the units of
planner/src/device/devices.cc.

usage: gpu_report.py OUT_DIR > OUT_DIR/report.md
(OUT_DIR: env.txt, device.json, fidelity.txt, plans/*.json,
runs/*.json|.rc|.err, refs/*.json, hf-runs/*.json, log.txt; each optional)
"""
import glob
import json
import os
import sys


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def device_memory(out):
    """The device terms section; writes profiles/<device>-device.json."""
    print("## Device memory besides tensors\n")
    measured = load(os.path.join(out, "device.json"))
    if measured is None:
        print("CUDA context and workspaces: not measured (see the log).\n")
    else:
        print(f"CUDA context: {measured['cuda_context_bytes']:,} B "
              f"({mib(measured['cuda_context_bytes'])}; {mib(measured['context_at_init_bytes'])} "
              f"right after init, before cuBLAS), workspaces: {measured['workspace_bytes']:,} B "
              f"({mib(measured['workspace_bytes'])}), on {measured['device']}, torch "
              f"{measured['torch']}, CUDA {measured['cuda']}.\n")
    # The measured reserved peak against the predicted one (the caching
    # allocator replayed over the plan's steps). cuBLAS's workspaces come from
    # the caching allocator (measured as allocated bytes), so the measured
    # reserved peak holds them: they are a term of their own in the planner
    # and are taken out here.
    workspaces = max(0, measured["workspace_bytes"]) if measured else 0
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
        name = os.path.basename(path)[:-5]
        run, plan = load(path), load(os.path.join(out, "plans", name + ".json"))
        if run is None or plan is None or "reserved_peak_bytes" not in plan["predicted"]:
            continue
        m = run.get("measured", {})
        if not m.get("reserved_peak_bytes"):
            continue
        replayed = plan["predicted"]["reserved_peak_bytes"]
        rows.append((name, plan["predicted"]["peak_bytes"], replayed, m["peak_bytes"],
                     m["reserved_peak_bytes"],
                     (m["reserved_peak_bytes"] - workspaces - replayed) / replayed))
    if rows:
        print("| run | predicted allocated | predicted reserved (replayed) | measured allocated "
              "| measured reserved | reserved - workspaces against predicted |")
        print("|---|---|---|---|---|---|")
        for name, pa, pr, ma, mr, frag in rows:
            print(f"| {name} | {gib(pa)} | {gib(pr)} | {gib(ma)} | {gib(mr)} | {100 * frag:+.2f}% |")
        print()
    if measured is None and not rows:
        return
    name = os.environ.get("DEVICE_NAME", "h200")
    preset = {
        "name": name,
        "source": "scripts/gpu_run.sh (" + (measured["device"] if measured else "?") + ")",
        "cuda_context_bytes": measured["cuda_context_bytes"] if measured else None,
        "workspace_bytes": max(0, measured["workspace_bytes"]) if measured else None,
        "caching_allocator": True,
        "measured": measured,
        "runs": [dict(zip(["run", "predicted_allocated_bytes", "predicted_reserved_bytes",
                           "measured_allocated_bytes", "measured_reserved_bytes",
                           "reserved_above_predicted"], r)) for r in rows],
    }
    os.makedirs(os.path.join(out, "profiles"), exist_ok=True)
    target = os.path.join(out, "profiles", name + "-device.json")
    with open(target, "w") as f:
        json.dump(preset, f, indent=1)
        f.write("\n")
    print(f"Preset for planner/src/device/devices.cc, written to `{target}`:\n")
    print("```\n" + json.dumps({k: preset[k] for k in
                                ("name", "cuda_context_bytes", "workspace_bytes",
                                 "caching_allocator")}) + "\n```\n")


def references(out):
    """Code no one here wrote (refs/: bench/fidelity/hf_reference.py --device cuda)
    beside remat's runtime (hf-runs/) and its analytic plan on the same
    config.json; the plan's allocated peak plus its workspace term, as the
    cuBLAS workspaces live in the caching allocator."""
    refs = sorted(glob.glob(os.path.join(out, "refs", "*.json")))
    rows = []
    for path in refs:
        ref = load(path)
        if not ref or "peak_bytes" not in ref:
            continue
        name = os.path.basename(path)[:-len(".json")]
        run = load(os.path.join(out, "hf-runs", name + ".json")) or {}
        plan = load(os.path.join(out, "hf-runs", name + ".plan.json")) or {}
        pred = None
        if plan:
            pred = (plan["predicted"].get("allocated_peak_bytes", plan["predicted"]["peak_bytes"])
                    + plan.get("device_memory", {}).get("workspace_bytes", 0))
        rows.append((name, ref, run.get("measured", {}).get("peak_bytes"), pred))
    if not rows:
        return
    print("## Against transformers / sentence-transformers on CUDA\n")
    print("Reference: bench/fidelity/hf_reference.py --device cuda "
          "(torch.cuda.max_memory_allocated over the third step); remat runtime: `planner train --runtime-device cuda` on the same "
          "config.json; predicted: the analytic plan (`--device h200`), allocated peak plus the "
          "workspace term.\n")
    print("| job | precision | reference allocated | remat runtime | runtime error "
          "| predicted | prediction error | reference reserved |")
    print("|---|---|---|---|---|---|---|---|")
    for name, ref, ours, pred in rows:
        meas = ref["peak_bytes"]
        def err(x):
            return f"{(x - meas) / meas:+.1%}" if x else "-"
        print(f"| {name} | {ref.get('precision', '?')} | {meas:,} | {ours or 0:,} | {err(ours)} "
              f"| {pred or 0:,} | {err(pred)} | {ref.get('reserved_peak_bytes', 0):,} |")
    print()


def main():
    out = sys.argv[1]
    print("# remat on the GPU: predicted vs measured\n")
    env = os.path.join(out, "env.txt")
    if os.path.exists(env):
        print("```\n" + open(env).read().strip() + "\n```\n")
    fidelity = os.path.join(out, "fidelity.txt")
    if os.path.exists(fidelity):
        print("## Fidelity matrix on CUDA (bench/fidelity/fidelity.sh, DEVICE=cuda)\n")
        print("```\n" + open(fidelity).read().strip() + "\n```\n")
    references(out)
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
    print()
    device_memory(out)
    log = os.path.join(out, "log.txt")
    if os.path.exists(log):
        print("\n## log\n\n```\n" + open(log).read().strip() + "\n```")


if __name__ == "__main__":
    main()
