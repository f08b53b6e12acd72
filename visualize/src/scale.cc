#include "scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace remat::viz {

double LinearScale::operator()(double v) const {
  if (d1 == d0) return r0;
  return r0 + (v - d0) * (r1 - r0) / (d1 - d0);
}

Ticks NiceTicks(double lo, double hi, int target) {
  target = std::max(1, target);
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  const double raw = (hi - lo) / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (magnitude * m >= raw) {
      step = magnitude * m;
      break;
    }
  }
  Ticks t;
  t.step = step;
  t.lo = std::floor(lo / step + 1e-9) * step;
  t.hi = std::ceil(hi / step - 1e-9) * step;
  t.decimals = 0;
  while (t.decimals < 9) {
    const double scaled = step * std::pow(10.0, t.decimals);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * scaled) break;
    ++t.decimals;
  }
  const int n = static_cast<int>(std::lround((t.hi - t.lo) / step));
  for (int i = 0; i <= n; ++i) t.values.push_back(t.lo + i * step);
  return t;
}

bool OffScale(double reference, double data_max) {
  return reference > 0 && data_max > 0 && reference > kOffScaleRatio * data_max;
}

ValueAxis FitAxis(double lo, double hi, double reference, const AxisFit& fit) {
  ValueAxis axis;
  hi = std::max(hi, lo);
  if (reference > 0) {
    axis.reference_off_scale = OffScale(reference, hi);
    if (!axis.reference_off_scale) {
      lo = std::min(lo, reference);
      hi = std::max(hi, reference);
    }
  }
  if (fit.from_zero) lo = 0;
  const double pad = std::max((hi - lo) * fit.headroom, hi * 0.01);
  axis.ticks = NiceTicks(fit.from_zero ? 0 : std::max(0.0, lo - pad), hi + pad, fit.target_steps);
  return axis;
}

std::string FormatTick(double v, int decimals) {
  decimals = std::clamp(decimals, 0, 9);
  if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0;  // no "-0"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

ByteUnit PickByteUnit(double max_bytes) {
  static const ByteUnit kUnits[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}};
  for (const ByteUnit& u : kUnits) {
    if (max_bytes >= u.bytes) return u;
  }
  return ByteUnit{};
}

ValueAxis FitByteAxis(double lo_bytes, double hi_bytes, double reference_bytes, const AxisFit& fit,
                      ByteUnit* unit) {
  const double shown =
      OffScale(reference_bytes, hi_bytes) ? hi_bytes : std::max(hi_bytes, reference_bytes);
  *unit = PickByteUnit(shown);
  return FitAxis(lo_bytes / unit->bytes, hi_bytes / unit->bytes, reference_bytes / unit->bytes,
                 fit);
}

}  // namespace remat::viz
