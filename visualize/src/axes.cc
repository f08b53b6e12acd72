#include "axes.h"

#include <algorithm>

#include "palette.h"

namespace remat::viz {

LinearScale XScale(const PlotArea& area, double lo, double hi) {
  return {lo, hi, area.left, area.right()};
}

LinearScale YScale(const PlotArea& area, double lo, double hi) {
  return {lo, hi, area.bottom(), area.top};
}

void DrawYAxis(SvgWriter& svg, const PlotArea& area, const Ticks& ticks, const LinearScale& y,
               const std::string& title, double unit) {
  svg.Open("g", {{"class", "axis axis-y"}, {"font-size", 11}, {"fill", kMutedColor}});
  for (double v : ticks.values) {
    const double py = y(v);
    if (py < area.top - 0.5 || py > area.bottom() + 0.5) continue;
    svg.Empty("line", {{"x1", area.left},
                       {"x2", area.right()},
                       {"y1", py},
                       {"y2", py},
                       {"stroke", v == 0 ? "#9aa5b1" : kGridColor}});
    svg.Text(area.left - 8, py + 4, FormatTick(v / unit, ticks.decimals), {{"text-anchor", "end"}});
  }
  const double cx = area.left - 48, cy = area.top + area.height / 2;
  svg.Text(cx, cy, title,
           {{"class", "axis-label"},
            {"text-anchor", "middle"},
            {"font-size", 12},
            {"fill", kInkColor},
            {"transform", "rotate(-90 " + Num(cx) + " " + Num(cy) + ")"}});
  svg.Close();
}

void DrawXAxis(SvgWriter& svg, const PlotArea& area, const Ticks& ticks, const LinearScale& x,
               const std::string& title, double gap, double unit) {
  svg.Open("g", {{"class", "axis axis-x"}, {"font-size", 11}, {"fill", kMutedColor}});
  const double base = area.bottom() + gap;
  svg.Empty("line", {{"x1", area.left},
                     {"x2", area.right()},
                     {"y1", area.bottom()},
                     {"y2", area.bottom()},
                     {"stroke", "#9aa5b1"}});
  for (double v : ticks.values) {
    if (v < x.d0 - 1e-9 || v > x.d1 + 1e-9) continue;
    const double px = x(v);
    svg.Empty("line",
              {{"x1", px}, {"x2", px}, {"y1", base}, {"y2", base + 4}, {"stroke", "#9aa5b1"}});
    svg.Text(px, base + 16, FormatTick(v / unit, ticks.decimals), {{"text-anchor", "middle"}});
  }
  svg.Text(
      area.left + area.width / 2, base + 36, title,
      {{"class", "axis-label"}, {"text-anchor", "middle"}, {"font-size", 12}, {"fill", kInkColor}});
  svg.Close();
}

void DrawReference(SvgWriter& svg, const PlotArea& area, Axis axis, const LinearScale& scale,
                   const Reference& ref, bool off_scale) {
  if (off_scale) {
    Attrs group = {{"class", ref.cls + "-off-scale"}};
    group.insert(group.end(), ref.attrs.begin(), ref.attrs.end());
    svg.Open("g", group);
    svg.Title(ref.label + " is more than " + FormatTick(kOffScaleRatio, 1) +
              "x the largest value plotted: it is left off the axis so that the data stay "
              "readable");
    svg.Text(area.right(), area.top - 6,
             ref.label + (axis == Axis::kY ? " ↑" : " →") + " (off scale)",
             {{"text-anchor", "end"}, {"fill", ref.color}, {"font-weight", 600}});
    svg.Close();
    return;
  }
  const double at = scale(ref.value);
  const bool horizontal = axis == Axis::kY;
  Attrs line = {{"class", ref.cls}};
  line.insert(line.end(), ref.attrs.begin(), ref.attrs.end());
  line.insert(line.end(), {{"x1", horizontal ? area.left : at},
                           {"x2", horizontal ? area.right() : at},
                           {"y1", horizontal ? at : area.top},
                           {"y2", horizontal ? at : area.bottom()},
                           {"stroke", ref.color},
                           {"stroke-width", 2},
                           {"stroke-dasharray", "7 4"}});
  svg.Empty("line", line);
  const Attrs text = {{"fill", ref.color}, {"font-weight", 600}};
  if (horizontal)
    svg.Text(area.left + 6, at - 6, ref.label, text);
  else
    svg.Text(at + 5, area.top + 12, ref.label, text);
}

double TextWidth(const std::string& text, double font_px) {
  return static_cast<double>(text.size()) * font_px * 0.56;
}

double Callout::width() const {
  return std::max(TextWidth(title, 12.5), TextWidth(detail, 11.5)) + 12;
}

void DrawCallout(SvgWriter& svg, double x, double y, const Callout& callout, const char* color,
                 const std::string& cls) {
  svg.Empty("rect", {{"x", x},
                     {"y", y},
                     {"width", callout.width()},
                     {"height", 36},
                     {"rx", 4},
                     {"fill", "#ffffff"},
                     {"fill-opacity", 0.92},
                     {"stroke", color},
                     {"stroke-width", 1}});
  svg.Text(x + 6, y + 15, callout.title,
           {{"class", cls + "-label"}, {"font-weight", 700}, {"font-size", 12.5}, {"fill", color}});
  svg.Text(x + 6, y + 30, callout.detail, {{"font-size", 11.5}, {"fill", kInkColor}});
}

double DrawLegend(SvgWriter& svg, double x, double y, const std::vector<LegendItem>& items) {
  svg.Open("g", {{"class", "legend"}, {"font-size", 12}, {"fill", kInkColor}});
  for (const LegendItem& item : items) {
    const double mid = y - 4;
    switch (item.mark) {
      case LegendMark::kSwatch:
        svg.Empty("rect", {{"x", x},
                           {"y", mid - 6},
                           {"width", 14},
                           {"height", 12},
                           {"rx", 2},
                           {"fill", item.color}});
        break;
      case LegendMark::kLine:
      case LegendMark::kDashedLine: {
        Attrs a = {{"x1", x},   {"x2", x + 16},         {"y1", mid},
                   {"y2", mid}, {"stroke", item.color}, {"stroke-width", 2.5}};
        if (item.mark == LegendMark::kDashedLine) a.emplace_back("stroke-dasharray", "5 3");
        svg.Empty("line", a);
        break;
      }
      case LegendMark::kDot:
        svg.Empty("circle", {{"cx", x + 7}, {"cy", mid}, {"r", 4.5}, {"fill", item.color}});
        break;
      case LegendMark::kRing:
        svg.Empty("circle", {{"cx", x + 7},
                             {"cy", mid},
                             {"r", 5},
                             {"fill", "#ffffff"},
                             {"stroke", item.color},
                             {"stroke-width", 2}});
        break;
    }
    svg.Text(x + 21, y, item.label);
    x += 21 + TextWidth(item.label) + 18;
  }
  svg.Close();
  return x;
}

}  // namespace remat::viz
