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

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_SRC_MEDIAN_H_
