#!/usr/bin/env python3
"""Whether two planner binaries answer every planning command the same.

  bench/speed/same_output.py OLD_PLANNER NEW_PLANNER
  FILTER=REGEX bench/speed/same_output.py ...   (only the commands whose name matches)

Runs each command with OLD, then with NEW, from the repository root, and
compares stdout, stderr, the exit code and the HTML a --report writes, byte
for byte; stderr without its progress lines ("planner: pareto sweep 12/148
(8%) ..., 3s left", "planner: ... done: 148/148 in 1s"), which follow the
clock. The commands: every command of grid.py's grid (the plans, the
--global-batch, --export, pareto, --report and no-fit commands), each plan
and no-fit command again with --json and with --report, and every
examples/*.json at budgets of 2, 6, 12, 24 and 80 GB, as text and --json.
Prints one line per command that differs (and what differs) and a count;
exits 1 if any differs. Writes only to a temporary directory.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grid  # noqa: E402  (bench/speed/grid.py)


def commands(tmp):
    """(name, args) of every command compared."""
    report = os.path.join(tmp, "report.html")
    out = []
    for name, args in grid.grid(tmp):
        out.append((name, args))
        if name.startswith(("plan ", "no-fit ")):
            out.append((name + " --json", args[:-1] + ["--json", args[-1]]))
            out.append((name + " --report", args[:-1] + ["--report", report, args[-1]]))
    for model in sorted(glob.glob("examples/*.json")):
        for budget in ("2GB", "6GB", "12GB", "24GB", "80GB"):
            out.append((f"{model} {budget}", ["--budget", budget, model]))
            out.append((f"{model} {budget} --json", ["--budget", budget, "--json", model]))
    return out


# The progress lines on stderr: when they print and what they say follow the clock.
PROGRESS = re.compile(rb"^planner: .*(\d+/\d+ \(\d+%\).*|done: \d+/\d+ in \S+)$")


def without_progress(stderr):
    return b"\n".join(line for line in stderr.split(b"\n") if not PROGRESS.match(line))


def run(planner, args, report):
    """stdout, stderr, exit code and the report's bytes (None: none written)."""
    if os.path.exists(report):
        os.remove(report)
    r = subprocess.run([planner] + args, capture_output=True)
    written = None
    if os.path.exists(report):
        with open(report, "rb") as f:
            written = f.read()
    return r.stdout, without_progress(r.stderr), r.returncode, written


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: bench/speed/same_output.py OLD_PLANNER NEW_PLANNER")
    old, new = sys.argv[1], sys.argv[2]
    keep = re.compile(os.environ.get("FILTER", ""))
    differ = 0
    compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.html")
        for name, args in commands(tmp):
            if not keep.search(name):
                continue
            a = run(old, args, report)
            b = run(new, args, report)
            compared += 1
            what = [part for part, x, y in zip(("stdout", "stderr", "exit code", "report"), a, b)
                    if x != y]
            if what:
                differ += 1
                print(f"DIFFERS {name}: {', '.join(what)}", flush=True)
    print(f"{compared} commands compared, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
