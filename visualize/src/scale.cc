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

}  // namespace remat::viz
