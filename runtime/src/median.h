// The median of timing samples (0 for none): what profiles and train reports
// quote, robust to the odd slow repetition.
#ifndef REMAT_RUNTIME_SRC_MEDIAN_H_
#define REMAT_RUNTIME_SRC_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace remat::runtime {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The relative spread of timing samples: their interquartile range over
// their median (quartiles interpolated linearly between order statistics,
// as numpy's default; 0 for fewer than 2 samples or a median of 0). The
// profiler reports it per layer (LayerProfile::time_spread). Interquartile
// rather than (max - min): at the default 5 repetitions it is the 2nd to
// 4th fastest, so the one repetition a busy machine slows down (or one that
// hit a warm cache) does not widen it, as the median the profile reports
// ignores them too.
inline double RelativeSpread(std::vector<double> v) {
  const double median = Median(v);
  if (v.size() < 2 || median <= 0) return 0;
  std::sort(v.begin(), v.end());
  auto quantile = [&](double q) {
    const double at = q * static_cast<double>(v.size() - 1);
    const size_t below = static_cast<size_t>(at);
    const double above = below + 1 < v.size() ? v[below + 1] : v[below];
    return v[below] + (at - static_cast<double>(below)) * (above - v[below]);
  };
  return (quantile(0.75) - quantile(0.25)) / median;
}

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_MEDIAN_H_
