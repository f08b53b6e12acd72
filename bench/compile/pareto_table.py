"""The side-by-side table of bench/compile/pareto.py, from measured points.

A point is a dict with "series" ("compile" or "remat"), "name", "peak_bytes"
and "step_s" (the median step time); a compile point also has "budget"
(torch._functorch.config.activation_memory_budget). Pure Python: no torch."""


def rows(points):
    """For each compile point (budget descending): remat's fastest point
    whose peak is at or below the compile point's (None when no remat point
    reaches it) and the time ratio remat / compile."""
    compiled = sorted((p for p in points if p["series"] == "compile"), key=lambda p: -p["budget"])
    planned = [p for p in points if p["series"] == "remat"]
    out = []
    for c in compiled:
        within = [r for r in planned if r["peak_bytes"] <= c["peak_bytes"]]
        best = min(within, key=lambda r: (r["step_s"], r["peak_bytes"])) if within else None
        out.append(dict(compile=c, remat=best,
                        ratio=best["step_s"] / c["step_s"] if best else None))
    return out


def monotone_breaks(points):
    """The pairs of compile points (lower budget, higher budget) whose lower
    budget peaks above the higher one's: empty when compile's peak is
    monotone (non-decreasing) in its budget."""
    compiled = sorted((p for p in points if p["series"] == "compile"), key=lambda p: p["budget"])
    return [(lo, hi) for i, lo in enumerate(compiled) for hi in compiled[i + 1:]
            if lo["peak_bytes"] > hi["peak_bytes"]]


def markdown(points):
    """The table as Markdown, then one line on monotonicity."""
    lines = ["| compile budget | compile peak | compile step | remat's fastest plan at or below "
             "| its peak | its step | remat / compile time |",
             "|---:|---:|---:|---|---:|---:|---:|"]
    for row in rows(points):
        c, r = row["compile"], row["remat"]
        head = f"| {c['budget']:.1f} | {c['peak_bytes']:,} B | {c['step_s'] * 1e3:.2f} ms"
        if r is None:
            lines.append(head + " | (none reaches it) | | | |")
        else:
            lines.append(head + f" | {r['name']} | {r['peak_bytes']:,} B | "
                         f"{r['step_s'] * 1e3:.2f} ms | {row['ratio']:.3f} |")
    breaks = monotone_breaks(points)
    if not breaks:
        lines.append("\ncompile's peak is monotone in its budget (a lower budget never peaks higher).")
    else:
        shown = ", ".join(f"{lo['budget']:.1f} ({lo['peak_bytes']:,} B) above "
                          f"{hi['budget']:.1f} ({hi['peak_bytes']:,} B)" for lo, hi in breaks)
        lines.append(f"\ncompile's peak is not monotone in its budget: {len(breaks)} pair(s) of "
                     f"budgets where the lower peaks higher: {shown}.")
    return "\n".join(lines)
