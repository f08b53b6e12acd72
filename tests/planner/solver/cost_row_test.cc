// The min-plus kernels of cost rows, 8 cells at a time with the last 8 of a
// run overlapping the ones before, give cell for cell the floats of one
// pass cell by cell (min(out, candidate) with the candidate's additions in
// the same order), touch no cell outside the run, on runs of every length
// around the vector width, compiled both for the baseline and for the
// widest vector unit (as the row fillers are).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "solver/cost_row.h"

namespace remat::solver {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Kernel { kAdd1, kAdd2, kAddThen, kConst };

REMAT_LANES_INLINE void ApplyInline(Kernel k, float* out, const float* a, const float* b,
                                    float add, float then, int n) {
  switch (k) {
    case Kernel::kAdd1: MinAdd1(out, a, add, n); break;
    case Kernel::kAdd2: MinAdd2(out, a, b, add, n); break;
    case Kernel::kAddThen: MinAddThen(out, a, add, then, n); break;
    case Kernel::kConst: MinConst(out, add, n); break;
  }
}

// The kernels compiled for the baseline, and for the widest vector unit
// where the row fillers are.
void Apply(Kernel k, float* out, const float* a, const float* b, float add, float then, int n) {
  ApplyInline(k, out, a, b, add, then, n);
}
REMAT_VECTOR_CLONES
void ApplyWide(Kernel k, float* out, const float* a, const float* b, float add, float then, int n) {
  ApplyInline(k, out, a, b, add, then, n);
}

float Candidate(Kernel k, const float* a, const float* b, float add, float then, int i) {
  switch (k) {
    case Kernel::kAdd1: return add + a[i];
    case Kernel::kAdd2: return (add + a[i]) + b[i];
    case Kernel::kAddThen: return (add + a[i]) + then;
    case Kernel::kConst: return add;
  }
  return 0;
}

TEST(CostRowKernels, EqualOnePassCellByCell) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(0, 100);
  // Values on a coarse grid too, so that candidates tie with the row.
  std::uniform_int_distribution<int> grid(0, 8), pick(0, 5);
  auto draw = [&] {
    const int p = pick(rng);
    return p == 0 ? kInf : p == 1 ? static_cast<float>(grid(rng)) : value(rng);
  };
  int runs = 0;
  for (Kernel k : {Kernel::kAdd1, Kernel::kAdd2, Kernel::kAddThen, Kernel::kConst}) {
    for (int n = 0; n <= 41; ++n) {
      for (int offset = 0; offset < 3; ++offset) {
        for (bool wide : {false, true}) {
          constexpr int kGuard = 9;
          std::vector<float> out(offset + n + kGuard), a(offset + n + kGuard),
              b(offset + n + kGuard);
          for (size_t i = 0; i < out.size(); ++i) out[i] = draw(), a[i] = draw(), b[i] = draw();
          const float add = pick(rng) == 0 ? 0.0f : static_cast<float>(grid(rng));
          const float then = value(rng);
          std::vector<float> expected = out;
          for (int i = 0; i < n; ++i) {
            expected[offset + i] = std::min(
                expected[offset + i],
                Candidate(k, a.data() + offset, b.data() + offset, add, then, i));
          }
          (wide ? ApplyWide : Apply)(k, out.data() + offset, a.data() + offset,
                                     b.data() + offset, add, then, n);
          ++runs;
          EXPECT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)), 0)
              << "kernel " << static_cast<int>(k) << " n " << n << " offset " << offset
              << (wide ? " wide" : "");
        }
      }
    }
  }
  EXPECT_EQ(runs, 4 * 42 * 3 * 2);
}

}  // namespace
}  // namespace remat::solver
