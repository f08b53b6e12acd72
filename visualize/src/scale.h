// Mapping data to chart coordinates: linear scales, "nice" ticks (1, 2, 5 x
// 10^k) and the byte unit an axis is labelled in.
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

// A tick value with `decimals` decimals ("0", "2.5").
std::string FormatTick(double v, int decimals);

// The unit a byte axis is labelled in: the largest binary unit that `max_bytes`
// reaches (B, KiB, MiB, GiB, TiB), so labels read "22.4" on a "GiB" axis.
struct ByteUnit {
  const char* name = "B";
  double bytes = 1;  // bytes per unit
};
ByteUnit PickByteUnit(double max_bytes);

}  // namespace remat::viz

#endif  // REMAT_VISUALIZE_SCALE_H_
