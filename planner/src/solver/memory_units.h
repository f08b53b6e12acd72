// Memory slots: the discretization of a byte budget the optimal solvers use.
//
// A budget of B bytes is split into M slots of B / M bytes each (a real
// number). A byte quantity c occupies Ceil(c) slots, the smallest k with
// k * B / M >= c. Because every check the solvers make is "Ceil(sum of
// tensors live at a moment) <= slots left", and slots left are only ever
// reduced by Ceil(...) of what is held, a schedule the solver accepts never
// exceeds B bytes: discretization only makes the solver conservative. When
// B <= the requested slot count the slot is one byte and the arithmetic is
// exact.
#ifndef REMAT_SRC_SOLVER_MEMORY_UNITS_H_
#define REMAT_SRC_SOLVER_MEMORY_UNITS_H_

#include <cstdint>

namespace remat::solver {

class MemoryUnits {
 public:
  // Requires budget_bytes >= 1 and slots >= 1. The slot count is
  // min(slots, budget_bytes).
  MemoryUnits(int64_t budget_bytes, int64_t slots);

  // Exact byte arithmetic (one slot = one byte) for budgets up to
  // `limit_bytes`: used to find the lowest reachable peak.
  static MemoryUnits Bytes(int64_t limit_bytes) { return MemoryUnits(limit_bytes, limit_bytes); }

  int64_t slots() const { return slots_; }
  int64_t budget_bytes() const { return budget_; }
  double slot_bytes() const { return static_cast<double>(budget_) / static_cast<double>(slots_); }

  // Slots needed to hold `bytes` (>= 0), saturated at slots() + 1 (does not
  // fit in the whole budget).
  int64_t Ceil(int64_t bytes) const;

 private:
  int64_t budget_;
  int64_t slots_;
};

}  // namespace remat::solver

#endif  // REMAT_SRC_SOLVER_MEMORY_UNITS_H_
