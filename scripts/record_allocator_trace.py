#!/usr/bin/env python3
"""Replays a planner allocator trace on a CUDA device and records what
PyTorch's caching allocator did (docs/device-memory.md, "The trace format").

usage: record_allocator_trace.py TRACE.json [OUT.json] [--history PICKLE]

Reads the trace `planner --alloc-trace` wrote, sets PYTORCH_CUDA_ALLOC_CONF
to its alloc_conf before CUDA starts, allocates and frees the same byte
sizes in the same order (torch.empty(..., dtype=torch.uint8) / del), and
writes the trace back (to OUT, default TRACE.json) with a "measured" object:
the reserved and allocated bytes after each event, the peaks, the segments
at the end (torch.cuda.memory._snapshot()), and num_alloc_retries. With
--history, the allocator's own event history
(torch.cuda.memory._record_memory_history) is dumped to PICKLE for
pytorch.org/memory_viz. Exits 2 on a bad trace, 3 without a CUDA device.
"""
import json
import os
import sys


def fail(code, message):
    print(f"record_allocator_trace: {message}", file=sys.stderr)
    sys.exit(code)


def main(argv):
    args = [a for a in argv[1:]]
    history = None
    if "--history" in args:
        i = args.index("--history")
        if i + 1 >= len(args):
            fail(2, "--history needs a file name")
        history = args[i + 1]
        del args[i:i + 2]
    if not args or len(args) > 2:
        fail(2, "usage: record_allocator_trace.py TRACE.json [OUT.json] [--history PICKLE]")
    src, dst = args[0], args[1] if len(args) == 2 else args[0]
    try:
        with open(src) as f:
            trace = json.load(f)
        events = trace["events"]
        conf = trace.get("alloc_conf", "")
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(2, f"{src}: not a planner allocator trace ({e})")
    if conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
    import torch  # after the environment is set: the allocator reads it once

    if not torch.cuda.is_available():
        fail(3, "no CUDA device")
    torch.cuda.init()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base_reserved = torch.cuda.memory_reserved()
    base_allocated = torch.cuda.memory_allocated()
    if history:
        torch.cuda.memory._record_memory_history(max_entries=len(events) + 1000)
    live = {}
    reserved, allocated = [], []
    for n, e in enumerate(events):
        if e[0] == "a":
            live[e[1]] = torch.empty(int(e[2]), dtype=torch.uint8, device="cuda")
        elif e[0] == "f":
            if e[1] not in live:
                fail(2, f"{src}: event {n} frees id {e[1]}, which is not live")
            del live[e[1]]
        else:
            fail(2, f"{src}: event {n}: expected 'a' or 'f', got {e[0]!r}")
        reserved.append(torch.cuda.memory_reserved() - base_reserved)
        allocated.append(torch.cuda.memory_allocated() - base_allocated)
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    segments = []
    for s in torch.cuda.memory._snapshot()["segments"]:
        segments.append({
            "total_bytes": s["total_size"],
            "small_pool": s["segment_type"] == "small",
            "expandable": bool(s.get("is_expandable", False)),
            "blocks": [[b["size"], b["state"] == "active_allocated"] for b in s["blocks"]],
        })
    trace["measured"] = {
        "reserved_peak_bytes": stats["reserved_bytes.all.peak"] - base_reserved,
        "allocated_peak_bytes": stats["allocated_bytes.all.peak"] - base_allocated,
        "reserved_timeline_bytes": reserved,
        "allocated_timeline_bytes": allocated,
        "segments": segments,
        "num_alloc_retries": stats.get("num_alloc_retries", 0),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }
    if history:
        torch.cuda.memory._dump_snapshot(history)
        torch.cuda.memory._record_memory_history(enabled=None)
    tmp = dst + ".tmp"
    with open(tmp, "w") as f:
        json.dump(trace, f)
        f.write("\n")
    os.replace(tmp, dst)
    p, m = trace.get("predicted", {}), trace["measured"]
    if "reserved_peak_bytes" in p:
        err = (p["reserved_peak_bytes"] - m["reserved_peak_bytes"]) / max(1, m["reserved_peak_bytes"])
        print(f"reserved peak: predicted {p['reserved_peak_bytes']:,} measured "
              f"{m['reserved_peak_bytes']:,} ({err:+.2%})")


if __name__ == "__main__":
    main(sys.argv)
