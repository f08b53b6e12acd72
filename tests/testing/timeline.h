// Reading a simulated timeline in tests.
#ifndef REMAT_TESTS_TESTING_TIMELINE_H_
#define REMAT_TESTS_TESTING_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "remat/schedule/schedule.h"
#include "remat/simulate/simulator.h"

namespace remat::testing {

// `value` of every timeline point of an op of `kind` (default: its peak),
// in schedule order.
inline std::vector<int64_t> Peaks(const SimulationResult& r, const Schedule& s, OpKind kind,
                                  int64_t (*value)(const TimelinePoint&) = nullptr) {
  std::vector<int64_t> v;
  for (const TimelinePoint& t : r.timeline) {
    if (s.ops[t.op_index].kind == kind) v.push_back(value ? value(t) : t.peak);
  }
  return v;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_TESTING_TIMELINE_H_
