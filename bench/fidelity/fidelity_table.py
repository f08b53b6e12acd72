#!/usr/bin/env python3
"""The README's fidelity-matrix table from bench/fidelity/fidelity.sh's output.

  bench/fidelity/fidelity_table.py profiles/results/fidelity-matrix-cpu.txt

One row per model/attention/dtype: the measured peak of the none plan, the
worst peak error over the plans from measured profiles (and how many plans),
the worst over the plans from the analytic profile, and the analytic error
of each strategy (none / uniform / segment / selective / optimal; "-" where
the cell has no such plan). Errors are (measured - predicted) / predicted as
fidelity.sh prints them; "worst" is the largest in magnitude, shown without
its sign.
"""
import re
import sys

STRATEGIES = ["none", "uniform", "segment", "selective", "optimal"]


def parse(path):
    """{(model, attention, dtype): {source: {strategy: (error %, measured peak)}}}."""
    cells = {}
    for line in open(path):
        fields = re.split(r"\s{2,}", line.strip())
        if len(fields) < 9 or fields[0].count("/") != 3:
            continue
        model, attention, dtype, source = fields[0].split("/")
        strategy = fields[1].split(" ")[0]
        error = float(fields[4].rstrip("%"))
        measured = int(fields[3].replace(",", ""))
        cells.setdefault((model, attention, dtype), {}).setdefault(source, {})[strategy] = (
            error, measured)
    return cells


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    cells = parse(sys.argv[1])
    if not cells:
        raise SystemExit(f"{sys.argv[1]}: no fidelity rows (cell  strategy  predicted  measured  error ...)")
    print("| model | attention | dtype | none: measured peak | from measured profiles: worst error "
          "(strategies) | from analytic profiles: worst error | analytic none / uniform / segment / "
          "selective / optimal |")
    print("|---|---|---|---:|---:|---:|---|")
    for (model, attention, dtype), sources in cells.items():
        measured = sources.get("measured", {})
        analytic = sources.get("analytic", {})
        none = (measured or analytic).get("none")
        none_peak = f"{none[1]:,}" if none else "-"
        worst_m = (f"{max(abs(e) for e, _ in measured.values()):.2f}% ({len(measured)})"
                   if measured else "-")
        worst_a = f"{max(abs(e) for e, _ in analytic.values()):.2f}%" if analytic else "-"
        each = " / ".join(f"{analytic[s][0]:+.2f}%" if s in analytic else "-" for s in STRATEGIES)
        print(f"| {model} | {attention} | {dtype} | {none_peak} | {worst_m} | {worst_a} | {each} |")


if __name__ == "__main__":
    main()
