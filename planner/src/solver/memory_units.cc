#include "solver/memory_units.h"

#include <algorithm>

namespace remat::solver {

MemoryUnits::MemoryUnits(int64_t budget_bytes, int64_t slots, Rounding rounding,
                         int64_t align_bytes)
    : budget_(std::max<int64_t>(1, budget_bytes)), rounding_(rounding) {
  slots = std::clamp<int64_t>(slots, 1, budget_);
  // Default: u = B / slots.
  num_ = budget_;
  den_ = slots;
  // Aligned: u = align / k with k the least making u <= B / slots.
  if (align_bytes > 0 && static_cast<__int128>(align_bytes) * slots >= budget_) {
    const int64_t k = static_cast<int64_t>(
        (static_cast<__int128>(align_bytes) * slots + budget_ - 1) / budget_);
    num_ = align_bytes;
    den_ = k;
  }
  slots_ = static_cast<int64_t>(static_cast<__int128>(budget_) * den_ / num_);
}

int64_t MemoryUnits::SlotsWithin(int64_t bytes) const {
  if (bytes <= 0) return 0;
  const __int128 k = static_cast<__int128>(std::min(bytes, budget_)) * den_ / num_;
  return static_cast<int64_t>(std::min<__int128>(k, slots_));
}

int64_t MemoryUnits::SlotsWide(int64_t bytes) const {
  const __int128 scaled = static_cast<__int128>(bytes) * den_;
  const __int128 k = rounding_ == Rounding::kUp ? (scaled + num_ - 1) / num_ : scaled / num_;
  return static_cast<int64_t>(std::min<__int128>(k, slots_ + 1));
}

}  // namespace remat::solver
