#include "html_style.h"

namespace remat::viz {

const char kReportCss[] = R"css(
:root { --ink: #1f2933; --muted: #616e7c; --line: #e4e7eb; --bg: #f3f5f8; --card: #ffffff;
        --ok: #2f855a; --bad: #c53030; --accent: #4e79a7; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 24px 40px; }
header { margin-bottom: 18px; }
.eyebrow { text-transform: uppercase; letter-spacing: .08em; font-size: 11px; color: var(--muted);
           font-weight: 600; }
h1 { font-size: 26px; margin: 2px 0 4px; display: flex; align-items: center; gap: 12px; }
h2 { font-size: 16px; margin: 0 0 2px; }
.lead { margin: 0; color: var(--muted); font-size: 15px; }
.lead strong { color: var(--ink); }
.verdict { font-size: 12px; font-weight: 700; letter-spacing: .05em; padding: 3px 10px;
           border-radius: 999px; color: #fff; background: var(--ok); }
.verdict.bad { background: var(--bad); }
.verdict.none { background: var(--muted); }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 10px; }
.chip { background: #e9eef4; border-radius: 6px; padding: 2px 8px; font-size: 12.5px; }
.chip b { font-weight: 600; color: var(--muted); margin-right: 4px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(200px, 1fr)); gap: 12px;
         margin-bottom: 14px; }
.card { background: var(--card); border-radius: 10px; padding: 12px 16px;
        box-shadow: 0 1px 2px rgba(31,41,51,.08), 0 0 0 1px rgba(31,41,51,.04); }
.card .label { font-size: 12px; color: var(--muted); font-weight: 600; }
.card .value { font-size: 24px; font-weight: 700; margin: 2px 0; font-variant-numeric: tabular-nums; }
.card .sub { font-size: 12.5px; color: var(--muted); }
.meter { position: relative; height: 8px; border-radius: 4px; background: #e9eef4; margin-top: 8px;
         overflow: hidden; }
.meter span { position: absolute; left: 0; top: 0; bottom: 0; background: var(--ok); border-radius: 4px; }
.meter.bad span { background: var(--bad); }
section.panel { background: var(--card); border-radius: 10px; padding: 16px 18px 12px;
                margin-bottom: 14px;
                box-shadow: 0 1px 2px rgba(31,41,51,.08), 0 0 0 1px rgba(31,41,51,.04); }
.caption { margin: 0 0 8px; color: var(--muted); font-size: 13px; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; }
.grid2 > section.panel { margin-bottom: 0; }
.grid2 { margin-bottom: 14px; }
@media (max-width: 900px) { .grid2 { grid-template-columns: 1fr; } }
svg { width: 100%; height: auto; display: block; }
table { border-collapse: collapse; width: 100%; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
tr.chosen td { background: #eef4fb; font-weight: 600; }
tr.total td { font-weight: 700; border-bottom: none; }
td.key { color: var(--muted); white-space: nowrap; width: 1%; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
.share { display: inline-block; height: 8px; border-radius: 2px; vertical-align: 0; min-width: 1px; }
.yes { color: var(--ok); font-weight: 600; }
.no { color: var(--bad); font-weight: 600; }
.note { background: #fff5f5; border-left: 4px solid var(--bad); padding: 8px 12px; border-radius: 6px;
        margin: 0 0 14px; }
footer { color: var(--muted); font-size: 12px; margin-top: 18px; }
footer code { background: #e9eef4; padding: 1px 5px; border-radius: 4px; }
)css";

}  // namespace remat::viz
