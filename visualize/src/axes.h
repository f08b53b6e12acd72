// Chart furniture: the plot area, axes with grid lines and titles, legends.
#ifndef REMAT_VISUALIZE_AXES_H_
#define REMAT_VISUALIZE_AXES_H_

#include <string>
#include <vector>

#include "palette.h"
#include "scale.h"
#include "svg.h"

namespace remat::viz {

// The rectangle data is drawn in, in SVG pixels.
struct PlotArea {
  double left = 0, top = 0, width = 0, height = 0;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// Scales from a tick set onto the area: x left to right, y bottom to top.
LinearScale XScale(const PlotArea& area, double lo, double hi);
LinearScale YScale(const PlotArea& area, double lo, double hi);

// Horizontal grid lines at the ticks, their labels left of the area, and
// `title` (with its unit, "memory (GiB)") rotated along the axis.
void DrawYAxis(SvgWriter& svg, const PlotArea& area, const Ticks& ticks, const LinearScale& y,
               const std::string& title, double unit = 1);
// Tick marks and labels `gap` pixels below the area, `title` under them.
// Ticks outside [x.d0, x.d1] are skipped. Labels show value / unit.
void DrawXAxis(SvgWriter& svg, const PlotArea& area, const Ticks& ticks, const LinearScale& x,
               const std::string& title, double gap = 0, double unit = 1);

// A value marked across a plot, such as the budget.
struct Reference {
  double value = 0;   // in the axis' units
  std::string label;  // "budget 22.35 GiB"
  std::string cls;    // the line's class ("budget")
  Attrs attrs;        // more attributes of the line or the off-scale mark ("data-bytes")
  const char* color = kBudgetColor;
};
enum class Axis { kX, kY };
// Draws `ref` on the plot's `axis`, mapped by `scale`. On scale: a dashed
// <line class="<cls>"> across the plot at the value (horizontal on the y
// axis, vertical on the x axis) with the label beside it. With `off_scale`
// (ValueAxis::reference_off_scale): no line, but <g class="<cls>-off-scale">
// at the top edge of the plot, right-aligned, with the value and an arrow
// towards it ("budget 100 GiB ↑ (off scale)"; → on the x axis).
void DrawReference(SvgWriter& svg, const PlotArea& area, Axis axis, const LinearScale& scale,
                   const Reference& ref, bool off_scale);

enum class LegendMark { kSwatch, kLine, kDashedLine, kDot, kRing };
struct LegendItem {
  std::string label;
  std::string color;
  LegendMark mark = LegendMark::kSwatch;
};
// One row of legend entries starting at (x, y), the y of the text baseline.
// Returns the x after the last entry.
double DrawLegend(SvgWriter& svg, double x, double y, const std::vector<LegendItem>& items);

// A boxed note of two lines: a bold title in `color` over a detail line.
struct Callout {
  std::string title;
  std::string detail;
  double width() const;  // of the box, in pixels
};
// Draws `callout` with its box's top-left corner at (x, y); 36 px high. The
// title text gets class "<cls>-label".
void DrawCallout(SvgWriter& svg, double x, double y, const Callout& callout, const char* color,
                 const std::string& cls);

// A rough width of `text` at `font_px` for layout (no font metrics here).
double TextWidth(const std::string& text, double font_px = 12);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_AXES_H_
