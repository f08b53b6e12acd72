"""bench/compile/pareto.py's HTML page: step time against peak memory for
compile's budgets and remat's plans, one self-contained page (inline CSS
and SVG, no script) with the planner's report stylesheet
(visualize/src/html_style.cc, read from the source tree) and its chart
conventions (visualize/src/axes.cc, pareto_chart.cc: axes, legend, one
<g class="point"> with a <title> per point)."""
import html
import math
import os

import pareto_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STYLE_SOURCE = os.path.join(ROOT, "visualize", "src", "html_style.cc")
COLORS = {"compile": "#e15759", "remat": "#4e79a7"}  # the palette's red and accent blue
INK, MUTED, GRID = "#1f2933", "#616e7c", "#e4e7eb"
WIDTH, HEIGHT = 1100, 420
LEFT, TOP, PLOT_W, PLOT_H = 72, 50, 1100 - 72 - 28, 300
MIB = 1024 * 1024


def report_css():
    """The planner's report stylesheet, as visualize/src/html_style.cc holds it."""
    with open(STYLE_SOURCE) as f:
        source = f.read()
    start = source.index('R"css(') + len('R"css(')
    return source[start:source.index(')css"', start)]


def ticks(lo, hi, target=6):
    """Round tick values (1, 2 or 5 x 10^k apart) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    values = []
    v = first
    while v < hi + step * 0.999:
        values.append(round(v, 10))
        v += step
    return values, max(0, -math.floor(math.log10(step)))


def _attrs(**kw):
    return " ".join(f'{k.rstrip("_").replace("_", "-")}="{html.escape(str(v))}"'
                    for k, v in kw.items())


def svg_chart(points):
    peaks = [p["peak_bytes"] / MIB for p in points]
    times = [p["step_s"] * 1e3 for p in points]
    xs, xd = ticks(min(peaks) - 0.04 * (max(peaks) - min(peaks)),
                   max(peaks) + 0.04 * (max(peaks) - min(peaks)), 8)
    ys, yd = ticks(min(times) - 0.06 * (max(times) - min(times)),
                   max(times) + 0.06 * (max(times) - min(times)), 5)

    def X(mib):
        return LEFT + (mib - xs[0]) / (xs[-1] - xs[0]) * PLOT_W

    def Y(ms):
        return TOP + PLOT_H - (ms - ys[0]) / (ys[-1] - ys[0]) * PLOT_H

    out = [f'<svg id="pareto" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
           f'aria-label="step time against peak memory, compile\'s budgets and remat\'s plans" '
           f'xmlns="http://www.w3.org/2000/svg">']
    # Legend, as DrawLegend draws it: a dot and a label per series.
    x = LEFT
    for series, label in (("compile", "torch.compile at activation_memory_budget (label)"),
                          ("remat", "remat plan, applied, compiled")):
        out.append(f'<circle {_attrs(cx=x + 5, cy=16, r=4.5, fill=COLORS[series])}/>')
        out.append(f'<text {_attrs(x=x + 14, y=20, font_size=12, fill=INK)}>'
                   f'{html.escape(label)}</text>')
        x += 30 + 6.5 * len(label)
    # Axes: grid lines and labels as DrawYAxis / DrawXAxis.
    out.append(f'<g {_attrs(class_="axis axis-y", font_size=11, fill=MUTED)}>')
    for v in ys:
        y = Y(v)
        out.append(f'<line {_attrs(x1=LEFT, x2=LEFT + PLOT_W, y1=f"{y:.1f}", y2=f"{y:.1f}", stroke=GRID)}/>')
        out.append(f'<text {_attrs(x=LEFT - 8, y=f"{y + 4:.1f}", text_anchor="end")}>{v:.{yd}f}</text>')
    cy = TOP + PLOT_H / 2
    out.append(f'<text {_attrs(class_="axis-label", x=LEFT - 48, y=cy, text_anchor="middle", font_size=12, fill=INK, transform=f"rotate(-90 {LEFT - 48} {cy})")}>'
               'median step time (ms)</text></g>')
    base = TOP + PLOT_H
    out.append(f'<g {_attrs(class_="axis axis-x", font_size=11, fill=MUTED)}>')
    out.append(f'<line {_attrs(x1=LEFT, x2=LEFT + PLOT_W, y1=base, y2=base, stroke="#9aa5b1")}/>')
    for v in xs:
        px = X(v)
        out.append(f'<line {_attrs(x1=f"{px:.1f}", x2=f"{px:.1f}", y1=base, y2=base + 4, stroke="#9aa5b1")}/>')
        out.append(f'<text {_attrs(x=f"{px:.1f}", y=base + 16, text_anchor="middle")}>{v:.{xd}f}</text>')
    out.append(f'<text {_attrs(class_="axis-label", x=LEFT + PLOT_W / 2, y=base + 36, text_anchor="middle", font_size=12, fill=INK)}>'
               'metered peak of a step (MiB)</text></g>')
    # Compile's points joined in budget order; remat's frontier (the fastest
    # plan at or below each peak) joined left to right.
    compiled = sorted((p for p in points if p["series"] == "compile"), key=lambda p: p["budget"])
    planned = sorted((p for p in points if p["series"] == "remat"), key=lambda p: p["peak_bytes"])
    front, best = [], math.inf
    for p in planned:
        if p["step_s"] < best:
            front.append(p)
            best = p["step_s"]
    for series, line in (("compile", compiled), ("remat", front)):
        d = " ".join(f'{"M" if i == 0 else "L"}{X(p["peak_bytes"] / MIB):.1f},{Y(p["step_s"] * 1e3):.1f}'
                     for i, p in enumerate(line))
        out.append(f'<path {_attrs(class_=f"series series-{series}", d=d, fill="none", stroke=COLORS[series], stroke_width=2, stroke_opacity=0.6)}/>')
    out.append('<g class="points">')
    for p in compiled + planned:
        px, py = X(p["peak_bytes"] / MIB), Y(p["step_s"] * 1e3)
        tip = (f'{p["name"]}\npeak {p["peak_bytes"]:,} B, median step {p["step_s"] * 1e3:.2f} ms, '
               f'first step (compile) {p["first_step_s"]:.1f} s')
        out.append(f'<g {_attrs(class_="point", data_series=p["series"])}><title>{html.escape(tip)}</title>')
        out.append(f'<circle {_attrs(cx=f"{px:.1f}", cy=f"{py:.1f}", r=4.5, fill=COLORS[p["series"]], stroke="#ffffff", stroke_width=1)}/>')
        if p["series"] == "compile":
            out.append(f'<text {_attrs(x=f"{px:.1f}", y=f"{py - 8:.1f}", text_anchor="middle", font_size=10, fill=COLORS["compile"])}>'
                       f'{p["budget"]:.1f}</text>')
        out.append('</g>')
    out.append('</g></svg>')
    return "\n".join(out)


def table_html(points):
    head = ("<tr><th class=num>compile budget</th><th class=num>compile peak</th>"
            "<th class=num>compile step</th><th>remat's fastest plan at or below</th>"
            "<th class=num>its peak</th><th class=num>its step</th>"
            "<th class=num>remat / compile</th></tr>")
    body = []
    for row in pareto_table.rows(points):
        c, r = row["compile"], row["remat"]
        cells = [f'{c["budget"]:.1f}', f'{c["peak_bytes"]:,} B', f'{c["step_s"] * 1e3:.2f} ms']
        if r is None:
            tail = '<td class=no colspan=4>no remat plan reaches this peak</td>'
        else:
            cls = "yes" if row["ratio"] <= 1 else "no"
            tail = (f'<td>{html.escape(r["name"])}</td><td class=num>{r["peak_bytes"]:,} B</td>'
                    f'<td class=num>{r["step_s"] * 1e3:.2f} ms</td>'
                    f'<td class="num {cls}">{row["ratio"]:.3f}</td>')
        body.append("<tr>" + "".join(f"<td class=num>{v}</td>" for v in cells) + tail + "</tr>")
    return f"<table>{head}{''.join(body)}</table>"


def html_page(points, setup, command):
    breaks = pareto_table.monotone_breaks(points)
    monotone = ('<span class=yes>monotone</span> in its budget' if not breaks else
                f'<span class=no>not monotone</span> in its budget ({len(breaks)} pair(s) of '
                'budgets where the lower one peaks higher)')
    chips = "".join(f'<span class=chip><b>{html.escape(k)}</b>{html.escape(str(v))}</span>'
                    for k, v in setup.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>remat against torch.compile's activation_memory_budget</title>
<style>{report_css()}</style></head>
<body><main>
<header><div class=eyebrow>remat · compiled training</div>
<h1>remat's plans against compile's memory budget</h1>
<p class=lead>Metered peak and median step time of one training step, the plain model compiled at
each <code>activation_memory_budget</code> and remat's plans applied then compiled. Compile's peak is
{monotone}.</p>
<div class=chips>{chips}</div></header>
<section class=panel><h2>Step time against peak</h2>
<p class=caption>Red: compile, labelled with its budget, joined in budget order. Blue: remat's plans,
the line through the fastest plan at or below each peak. Hover a point for its figures.</p>
{svg_chart(points)}</section>
<section class=panel><h2>At each of compile's peaks</h2>
<p class=caption>remat's fastest plan whose measured peak is at or below compile's, and the ratio of
their median step times, measured in one run.</p>
{table_html(points)}</section>
<footer>Made by <code>{html.escape(command)}</code></footer>
</main></body></html>
"""

