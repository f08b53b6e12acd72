// A cost row: the least recompute time (ms) of one interval as a function of
// the slots it gets, stored for m in [lo, hi] only. Below lo nothing fits;
// above hi the cost stays at its value for hi. Rows are non-increasing in m.
// The min-plus kernels below update a row from shifted rows, 8 floats at a
// time.
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

// Inlined always: each kernel is compiled for the vector unit of the row
// filler that calls it (REMAT_VECTOR_CLONES).
#define REMAT_LANES_INLINE inline __attribute__((always_inline))

// For i < n: out[i] = min(out[i], CAND1(i)). With GCC, 8 cells at a time
// (CAND8(i): the candidates of cells i .. i + 7), the last 8 cells of the
// run overlapping the ones before: a cell updated twice with the same
// candidate is as once (min is idempotent), so a run of 8 or more needs no
// scalar tail, with the same float operations per cell as one pass.
#if defined(__GNUC__) && !defined(__clang__)
#define REMAT_LANES8 1
// (Lanes8 never crosses a call: every function taking or returning it is
// inlined, so GCC's note on its ABI, -Wpsabi, is turned off.)
typedef float Lanes8 __attribute__((vector_size(32)));
REMAT_LANES_INLINE Lanes8 Load8(const float* p) {
  Lanes8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
REMAT_LANES_INLINE void Store8(float* p, Lanes8 v) { __builtin_memcpy(p, &v, sizeof v); }
REMAT_LANES_INLINE Lanes8 Broadcast8(float x) { return Lanes8{x, x, x, x, x, x, x, x}; }
// Lane by lane std::min(o, x): x where x < o, else o.
REMAT_LANES_INLINE Lanes8 Min8(Lanes8 o, Lanes8 x) { return x < o ? x : o; }
#define REMAT_MIN_EACH(out, n, CAND8, CAND1)                                           \
  do {                                                                                 \
    if ((n) < 8) {                                                                     \
      for (int i = 0; i < (n); ++i) (out)[i] = std::min((out)[i], CAND1(i));           \
    } else {                                                                           \
      int i = 0;                                                                       \
      for (; i + 8 <= (n); i += 8) Store8((out) + i, Min8(Load8((out) + i), CAND8(i))); \
      if (i < (n)) Store8((out) + (n) - 8, Min8(Load8((out) + (n) - 8), CAND8((n) - 8))); \
    }                                                                                  \
  } while (0)
#define REMAT_LANES8_OF(x) const Lanes8 x##8 = Broadcast8(x)
#else
#define REMAT_MIN_EACH(out, n, CAND8, CAND1) \
  for (int i = 0; i < (n); ++i) (out)[i] = std::min((out)[i], CAND1(i))
#define REMAT_LANES8_OF(x) static_cast<void>(0)
#endif

// out[i] = min(out[i], add + a[i]), i < n.
REMAT_LANES_INLINE void MinAdd1(float* __restrict out, const float* __restrict a, float add,
                                int n) {
  REMAT_LANES8_OF(add);
#define REMAT_CAND8(i) (add8 + Load8(a + (i)))
#define REMAT_CAND1(i) (add + a[i])
  REMAT_MIN_EACH(out, n, REMAT_CAND8, REMAT_CAND1);
#undef REMAT_CAND8
#undef REMAT_CAND1
}

// out[i] = min(out[i], (add + a[i]) + b[i]), i < n.
REMAT_LANES_INLINE void MinAdd2(float* __restrict out, const float* __restrict a,
                                const float* __restrict b, float add, int n) {
  REMAT_LANES8_OF(add);
#define REMAT_CAND8(i) ((add8 + Load8(a + (i))) + Load8(b + (i)))
#define REMAT_CAND1(i) ((add + a[i]) + b[i])
  REMAT_MIN_EACH(out, n, REMAT_CAND8, REMAT_CAND1);
#undef REMAT_CAND8
#undef REMAT_CAND1
}

// out[i] = min(out[i], (add + a[i]) + then), i < n.
REMAT_LANES_INLINE void MinAddThen(float* __restrict out, const float* __restrict a, float add,
                                   float then, int n) {
  REMAT_LANES8_OF(add);
  REMAT_LANES8_OF(then);
#define REMAT_CAND8(i) ((add8 + Load8(a + (i))) + then8)
#define REMAT_CAND1(i) ((add + a[i]) + then)
  REMAT_MIN_EACH(out, n, REMAT_CAND8, REMAT_CAND1);
#undef REMAT_CAND8
#undef REMAT_CAND1
}

// out[i] = min(out[i], v), i < n.
REMAT_LANES_INLINE void MinConst(float* __restrict out, float v, int n) {
  REMAT_LANES8_OF(v);
#define REMAT_CAND8(i) (v8)
#define REMAT_CAND1(i) (v)
  REMAT_MIN_EACH(out, n, REMAT_CAND8, REMAT_CAND1);
#undef REMAT_CAND8
#undef REMAT_CAND1
}

// For m in [begin, end): out[m - out_lo] = min(out[m - out_lo], add + a.At(m - shift)).
// Requires begin - shift >= a.lo.
REMAT_LANES_INLINE void MinShifted(float* out, int out_lo, int begin, int end, const CostRow& a, int shift,
                       float add) {
  const int split = std::clamp(a.hi + shift + 1, begin, end);
  if (split > begin) MinAdd1(out + (begin - out_lo), a.cost + (begin - shift - a.lo), add, split - begin);
  if (end > split) MinConst(out + (split - out_lo), add + a.last(), end - split);
}

// MinShifted into cells holding kNoFit, without reading them: out[m -
// out_lo] = min(kNoFit, add + a.At(m - shift)), the same floats.
REMAT_LANES_INLINE void AssignShifted(float* __restrict out, int out_lo, int begin, int end,
                                      const CostRow& a, int shift, float add) {
  const int split = std::clamp(a.hi + shift + 1, begin, end);
  float* o = out + (begin - out_lo);
  const float* in = a.cost + (begin - shift - a.lo);
  for (int i = 0; i < split - begin; ++i) o[i] = std::min(kNoFit, add + in[i]);
  const float rest = std::min(kNoFit, add + a.last());
  for (int m = split; m < end; ++m) out[m - out_lo] = rest;
}

// For m in [begin, end): out[m - out_lo] = min(.., add + a.At(m - shift) + b.At(m)).
// Requires begin - shift >= a.lo and begin >= b.lo.
REMAT_LANES_INLINE void MinShifted2(float* out, int out_lo, int begin, int end, const CostRow& a, int shift,
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
