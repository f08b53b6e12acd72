#include "solver/memory_units.h"

#include <algorithm>

namespace remat::solver {

MemoryUnits::MemoryUnits(int64_t budget_bytes, int64_t slots)
    : budget_(std::max<int64_t>(1, budget_bytes)),
      slots_(std::clamp<int64_t>(slots, 1, std::max<int64_t>(1, budget_bytes))) {}

int64_t MemoryUnits::Ceil(int64_t bytes) const {
  if (bytes <= 0) return 0;
  if (bytes > budget_) return slots_ + 1;
  if (slots_ == budget_) return bytes;
  using Wide = __int128;
  const Wide k = (static_cast<Wide>(bytes) * slots_ + budget_ - 1) / budget_;
  return static_cast<int64_t>(k);
}

}  // namespace remat::solver
