// Memory slots: the discretization of a byte budget the optimal solvers use.
//
// A budget of B bytes is split into M slots of u bytes each (u a rational
// number, M = floor(B / u)). Rounding kUp: a byte quantity c occupies
// ceil(c / u) slots. Because every check the solvers make is "slots(sum of
// tensors live at a moment) <= slots left", and slots left are only ever
// reduced by slots(...) of what is held, a schedule the solver accepts never
// exceeds B bytes: discretization only makes the solver conservative.
// Rounding kDown (floor) makes it optimistic instead: every schedule that
// fits in B bytes passes, so the optimum in slots is a lower bound on the
// optimum in bytes (a relaxation), and when the schedule it finds simulates
// within B it is the optimum in bytes.
//
// Rounding costs up to one slot per tensor held. With `align_bytes`, u is
// chosen to divide align_bytes (u = align_bytes / k, the largest such u not
// above B / slots), so that a tensor of that size, held many times over, is
// counted exactly. When B <= the requested slot count a slot is one byte
// and the arithmetic is exact.
#ifndef REMAT_SRC_SOLVER_MEMORY_UNITS_H_
#define REMAT_SRC_SOLVER_MEMORY_UNITS_H_

#include <cstdint>

namespace remat::solver {

enum class Rounding { kUp, kDown };

class MemoryUnits {
 public:
  // Requires budget_bytes >= 1 and slots >= 1. align_bytes: 0, or a size to
  // count exactly (ignored when smaller than B / slots).
  MemoryUnits(int64_t budget_bytes, int64_t slots, Rounding rounding = Rounding::kUp,
              int64_t align_bytes = 0);

  // Exact byte arithmetic (one slot = one byte) for budgets up to
  // `limit_bytes`: used to find the lowest reachable peak.
  static MemoryUnits Bytes(int64_t limit_bytes) { return MemoryUnits(limit_bytes, limit_bytes); }

  int64_t slots() const { return slots_; }
  int64_t budget_bytes() const { return budget_; }
  double slot_bytes() const { return static_cast<double>(num_) / static_cast<double>(den_); }
  Rounding rounding() const { return rounding_; }

  // The most slots that fit in `bytes` (>= 0): floor(bytes / slot size),
  // whatever the rounding, at most slots(). A budget of `bytes` gets that
  // many slots of this size: kDown checks in them pass every schedule that
  // fits in `bytes`, kUp checks pass only such schedules (multilevel_sweep.h).
  int64_t SlotsWithin(int64_t bytes) const;

  // Slots that `bytes` (>= 0) occupy under the rounding, saturated at
  // slots() + 1 (does not fit in the whole budget). Inline: the solvers'
  // terms call it for every interval and keep mode.
  int64_t Slots(int64_t bytes) const {
    if (bytes <= 0) return 0;
    if (bytes > budget_) return slots_ + 1;
    if (num_ == den_) return bytes;
    // In 64 bits where the product fits (every realistic size: bytes * slots
    // below 2^63), else in 128 (SlotsWide): the same quotient, without the
    // slow 128-bit division.
    int64_t product;
    if (__builtin_mul_overflow(bytes, den_, &product)) return SlotsWide(bytes);
    const int64_t k = product / num_ + (rounding_ == Rounding::kUp && product % num_ != 0 ? 1 : 0);
    return k < slots_ + 1 ? k : slots_ + 1;
  }

 private:
  // Slots(bytes) where bytes * den_ overflows 64 bits.
  int64_t SlotsWide(int64_t bytes) const;

  int64_t budget_;
  int64_t num_, den_;  // bytes per slot = num_ / den_
  int64_t slots_;
  Rounding rounding_;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_MEMORY_UNITS_H_
