// Mapping data to chart coordinates: linear scales, "nice" ticks (1, 2, 5 x
// 10^k), value axes fitted to their data, and the byte unit an axis is
// labelled in.
#ifndef REMAT_VISUALIZE_SCALE_H_
#define REMAT_VISUALIZE_SCALE_H_

#include <string>
#include <vector>

namespace remat::viz {

// Maps [d0, d1] (data) linearly onto [r0, r1] (pixels). A degenerate domain
// maps everything to r0.
struct LinearScale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  double operator()(double v) const;
};

struct Ticks {
  double lo = 0, hi = 1;  // the domain, widened to multiples of `step`
  double step = 1;
  int decimals = 0;            // enough to tell neighbouring ticks apart
  std::vector<double> values;  // lo, lo + step, ..., hi
};

// About `target` (>= 1) steps covering [lo, hi]; hi <= lo gives one step above lo.
Ticks NiceTicks(double lo, double hi, int target);

// A reference value drawn across a plot (the budget) may widen the axis up
// to this many times the largest data value. Further out it would squeeze
// the data into a flat line at the bottom of the plot, so it is left off
// the axis and marked "off scale" at the plot's edge instead.
inline constexpr double kOffScaleRatio = 1.5;

// True if `reference` (> 0) lies past kOffScaleRatio x `data_max` (> 0).
// A reference at or below the data is never off scale.
bool OffScale(double reference, double data_max);

// How FitAxis pads the data.
struct AxisFit {
  bool from_zero = true;  // the axis starts at 0; otherwise just below the data (never below 0)
  // Room beyond the data on each side, as a fraction of its span (hi - lo,
  // or hi from zero); at least 1% of hi.
  double headroom = 0.1;
  int target_steps = 6;  // about this many tick steps (NiceTicks)
};

// A value axis that follows its data, not a reference far above it.
struct ValueAxis {
  Ticks ticks;                       // the axis' domain [ticks.lo, ticks.hi] and its ticks
  bool reference_off_scale = false;  // the reference was left out (OffScale)
};

// The axis for data spanning [lo, hi] (axis units, 0 <= lo <= hi) and a
// `reference` to show on it (<= 0: none). The reference widens the axis to
// include it unless OffScale(reference, hi); then the axis covers the data
// only and reference_off_scale is set. Padding per `fit`, then rounded out to
// nice ticks.
ValueAxis FitAxis(double lo, double hi, double reference, const AxisFit& fit);

// A tick value with `decimals` decimals ("0", "2.5").
std::string FormatTick(double v, int decimals);

// The unit a byte axis is labelled in: the largest binary unit that `max_bytes`
// reaches (B, KiB, MiB, GiB, TiB), so labels read "22.4" on a "GiB" axis.
struct ByteUnit {
  const char* name = "B";
  double bytes = 1;  // bytes per unit
};
ByteUnit PickByteUnit(double max_bytes);

// FitAxis for data in bytes: sets `*unit` to PickByteUnit of the largest
// value the axis shows (the data, and the reference when on scale) and fits
// the axis in that unit (ticks in units, not bytes).
ValueAxis FitByteAxis(double lo_bytes, double hi_bytes, double reference_bytes, const AxisFit& fit,
                      ByteUnit* unit);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_SCALE_H_
