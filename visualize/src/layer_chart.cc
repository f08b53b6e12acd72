#include "layer_chart.h"

#include <algorithm>

#include "axes.h"
#include "palette.h"
#include "remat/io/units.h"
#include "svg.h"

namespace remat::viz {
namespace {

constexpr double kWidth = 1100;
constexpr double kRowHeight = 22;
constexpr double kFirstRow = 58;
constexpr double kBarHeight = 13;

struct Segment {
  const char* cls;
  const char* color;
  double value;
};

// Stacked horizontal segments from x.r0, then a value label after them.
void DrawBar(SvgWriter& svg, const LinearScale& x, double y, const std::vector<Segment>& parts,
             const std::string& label) {
  double at = 0;
  for (const Segment& s : parts) {
    if (s.value <= 0) continue;
    const double x0 = x(at), x1 = x(at + s.value);
    svg.Empty("rect", {{"class", s.cls},
                       {"x", x0},
                       {"y", y},
                       {"width", std::max(0.75, x1 - x0)},
                       {"height", kBarHeight},
                       {"fill", s.color}});
    at += s.value;
  }
  svg.Text(x(at) + 5, y + 10.5, label, {{"font-size", 11}, {"fill", kMutedColor}});
}

std::string RowTooltip(const LayerRow& r) {
  std::string s = std::to_string(r.index) + " " + r.name + ": " + ToString(r.decision);
  if (!r.option.empty()) s += " (" + r.option + ")";
  s += "\nkept for backward " + FormatBytes(r.kept_bytes) + ", recomputed " +
       FormatBytes(r.recomputed_bytes) + ", live at the peak " + FormatBytes(r.at_peak_bytes);
  s += "\nforward " + FormatMillis(r.forward_ms) + ", backward " + FormatMillis(r.backward_ms) +
       ", recompute " + FormatMillis(r.recompute_ms);
  return s;
}

// A vertical grid with tick labels above the rows.
void DrawTopAxis(SvgWriter& svg, const LinearScale& x, const Ticks& t, double bottom) {
  svg.Open("g", {{"class", "axis"}, {"font-size", 10.5}, {"fill", kMutedColor}});
  for (double v : t.values) {
    if (v > x.d1 + 1e-9) continue;
    svg.Empty("line", {{"x1", x(v)},
                       {"x2", x(v)},
                       {"y1", kFirstRow - 4},
                       {"y2", bottom},
                       {"stroke", v == 0 ? "#9aa5b1" : kGridColor}});
    svg.Text(x(v), kFirstRow - 9, FormatTick(v, t.decimals), {{"text-anchor", "middle"}});
  }
  svg.Close();
}

}  // namespace

std::string LayerChart(const std::vector<LayerRow>& rows) {
  const double bottom = kFirstRow + kRowHeight * static_cast<double>(rows.size());
  const double height = bottom + 12;
  double max_bytes = 1, max_ms = 1e-9;
  for (const LayerRow& r : rows) {
    max_bytes = std::max(max_bytes, static_cast<double>(r.kept_bytes + r.recomputed_bytes));
    max_ms = std::max(max_ms, r.forward_ms + r.backward_ms + r.recompute_ms);
  }
  const ByteUnit unit = PickByteUnit(max_bytes);
  const Ticks bt = NiceTicks(0, max_bytes / unit.bytes, 4);
  const Ticks tt = NiceTicks(0, max_ms, 4);
  // Room after each panel for the value label.
  const LinearScale bx{0, bt.hi, 262, 590};
  const LinearScale tx{0, tt.hi, 718, 1040};

  SvgWriter svg(kWidth, height, "layer-bars", "per-layer memory and time");
  svg.Open("g", {{"font-size", 12}, {"fill", kInkColor}});
  svg.Text(8, 18, "layer", {{"font-weight", 600}});
  svg.Text(150, 18, "decision", {{"font-weight", 600}});
  svg.Text(bx.r0, 18, std::string("activation memory (") + unit.name + ")",
           {{"font-weight", 600}, {"class", "axis-label"}});
  svg.Text(tx.r0, 18, "time per layer (ms)", {{"font-weight", 600}, {"class", "axis-label"}});
  svg.Close();
  DrawLegend(svg, bx.r0, 36,
             {{"kept for backward", CategoryColor(MemoryCategory::kActivations)},
              {"recomputed", CategoryColor(MemoryCategory::kRecomputed)}});
  DrawLegend(svg, tx.r0, 36,
             {{"forward", PhaseColor(OpKind::kForward)},
              {"backward", PhaseColor(OpKind::kBackward)},
              {"recompute", PhaseColor(OpKind::kRecompute)}});
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i % 2 == 1) {
      svg.Empty("rect", {{"x", 0},
                         {"y", kFirstRow + kRowHeight * static_cast<double>(i)},
                         {"width", kWidth},
                         {"height", kRowHeight},
                         {"fill", "#f5f7fa"}});
    }
  }
  DrawTopAxis(svg, bx, bt, bottom);
  DrawTopAxis(svg, tx, tt, bottom);

  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerRow& r = rows[i];
    const double y = kFirstRow + kRowHeight * static_cast<double>(i);
    const double bar_y = y + (kRowHeight - kBarHeight) / 2;
    svg.Open(
        "g",
        {{"class", "layer-row"}, {"data-layer", r.index}, {"data-decision", ToString(r.decision)}});
    svg.Title(RowTooltip(r));
    svg.Text(30, y + 15, std::to_string(r.index),
             {{"text-anchor", "end"}, {"fill", kMutedColor}, {"font-size", 11}});
    svg.Text(38, y + 15, r.name.size() > 16 ? r.name.substr(0, 15) + "…" : r.name);
    svg.Empty("rect", {{"class", "decision"},
                       {"x", 150},
                       {"y", bar_y - 1},
                       {"width", 84},
                       {"height", kBarHeight + 2},
                       {"rx", 7.5},
                       {"fill", DecisionColor(r.decision)}});
    svg.Text(192, y + 15, ToString(r.decision),
             {{"text-anchor", "middle"},
              {"font-size", 10.5},
              {"fill", "#ffffff"},
              {"font-weight", 600}});
    DrawBar(svg, {bx.d0 * unit.bytes, bx.d1 * unit.bytes, bx.r0, bx.r1}, bar_y,
            {{"bar-kept", CategoryColor(MemoryCategory::kActivations),
              static_cast<double>(r.kept_bytes)},
             {"bar-recomputed", CategoryColor(MemoryCategory::kRecomputed),
              static_cast<double>(r.recomputed_bytes)}},
            r.recomputed_bytes > 0
                ? FormatBytes(r.kept_bytes) + " + " + FormatBytes(r.recomputed_bytes)
                : FormatBytes(r.kept_bytes));
    DrawBar(svg, tx, bar_y,
            {{"bar-forward", PhaseColor(OpKind::kForward), r.forward_ms},
             {"bar-backward", PhaseColor(OpKind::kBackward), r.backward_ms},
             {"bar-recompute", PhaseColor(OpKind::kRecompute), r.recompute_ms}},
            FormatMillis(r.forward_ms + r.backward_ms + r.recompute_ms));
    svg.Close();
  }
  return svg.Finish();
}

}  // namespace remat::viz
