// A cost row: the least recompute time (ms) of one interval as a function of
// the slots it gets, stored for m in [lo, hi] only. Below lo nothing fits;
// above hi the cost stays at its value for hi. Rows are non-increasing in m.
// The min-plus kernels below update a row from shifted rows; they are plain
// loops over contiguous floats so that the compiler vectorizes them.
#ifndef REMAT_SRC_SOLVER_COST_ROW_H_
#define REMAT_SRC_SOLVER_COST_ROW_H_

#include <algorithm>
#include <cstdint>
#include <limits>

// Marks the function that fills one row: it is compiled three times
// (AVX-512F, AVX2 and baseline x86-64) and dispatched once per call, so the
// kernels inlined into it use the widest vector unit the machine has. None
// of these targets has FMA, so no product and sum is fused: each clone
// rounds as the baseline does, and the same rows come out. Not under ThreadSanitizer:
// it would instrument the clones' resolver, which the loader runs before
// the sanitizer starts.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_THREAD__)
#define REMAT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define REMAT_VECTOR_CLONES
#endif

namespace remat::solver {

inline constexpr float kNoFit = std::numeric_limits<float>::infinity();

struct CostRow {
  int lo = 1;
  int hi = 0;  // lo > hi: the interval fits in no slot count
  const float* cost = nullptr;

  bool empty() const { return lo > hi; }
  float last() const { return cost[hi - lo]; }
  // Requires m >= lo.
  float At(int64_t m) const { return cost[std::min<int64_t>(m, hi) - lo]; }
};

// out[i] = min(out[i], add + a[i]), i < n.
inline void MinAdd1(float* __restrict out, const float* __restrict a, float add, int n) {
  for (int i = 0; i < n; ++i) out[i] = std::min(out[i], add + a[i]);
}

// out[i] = min(out[i], (add + a[i]) + b[i]), i < n.
inline void MinAdd2(float* __restrict out, const float* __restrict a, const float* __restrict b,
                    float add, int n) {
  for (int i = 0; i < n; ++i) out[i] = std::min(out[i], (add + a[i]) + b[i]);
}

// out[i] = min(out[i], (add + a[i]) + then), i < n.
inline void MinAddThen(float* __restrict out, const float* __restrict a, float add, float then,
                       int n) {
  for (int i = 0; i < n; ++i) out[i] = std::min(out[i], (add + a[i]) + then);
}

inline void MinConst(float* __restrict out, float v, int n) {
  for (int i = 0; i < n; ++i) out[i] = std::min(out[i], v);
}

// For m in [begin, end): out[m - out_lo] = min(out[m - out_lo], add + a.At(m - shift)).
// Requires begin - shift >= a.lo.
inline void MinShifted(float* out, int out_lo, int begin, int end, const CostRow& a, int shift,
                       float add) {
  const int split = std::clamp(a.hi + shift + 1, begin, end);
  if (split > begin) MinAdd1(out + (begin - out_lo), a.cost + (begin - shift - a.lo), add, split - begin);
  if (end > split) MinConst(out + (split - out_lo), add + a.last(), end - split);
}

// For m in [begin, end): out[m - out_lo] = min(.., add + a.At(m - shift) + b.At(m)).
// Requires begin - shift >= a.lo and begin >= b.lo.
inline void MinShifted2(float* out, int out_lo, int begin, int end, const CostRow& a, int shift,
                        const CostRow& b, float add) {
  int m = begin;
  while (m < end) {
    const bool a_in = m <= a.hi + shift, b_in = m <= b.hi;
    int e = end;
    if (a_in) e = std::min(e, a.hi + shift + 1);
    if (b_in) e = std::min(e, b.hi + 1);
    float* o = out + (m - out_lo);
    if (a_in && b_in) {
      MinAdd2(o, a.cost + (m - shift - a.lo), b.cost + (m - b.lo), add, e - m);
    } else if (a_in) {
      MinAddThen(o, a.cost + (m - shift - a.lo), add, b.last(), e - m);
    } else if (b_in) {
      MinAdd1(o, b.cost + (m - b.lo), add + a.last(), e - m);
    } else {
      MinConst(o, (add + a.last()) + b.last(), e - m);
    }
    m = e;
  }
}

// First index i in [from, n) with row[i] <= v for a non-increasing row; n if none.
inline int FirstAtMost(const float* row, int from, int n, float v) {
  return static_cast<int>(std::partition_point(row + from, row + n, [v](float c) { return c > v; }) -
                          row);
}
inline int64_t FirstAtMost(const double* row, int64_t from, int64_t n, double v) {
  return std::partition_point(row + from, row + n, [v](double c) { return c > v; }) - row;
}

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_COST_ROW_H_
