#include "solver/multilevel_sweep.h"

namespace remat::solver {

MultiLevelSweep::MultiLevelSweep(const Profile& profile, int64_t max_activation_budget,
                                 int64_t slots, int64_t align_bytes, const DpOptions& options) {
  for (Rounding rounding : {Rounding::kDown, Rounding::kUp}) {
    Table& t = rounding == Rounding::kDown ? down_ : up_;
    t.terms = std::make_unique<ChainTerms>(
        profile, MemoryUnits(max_activation_budget, slots, rounding, align_bytes));
    t.dp = std::make_unique<MultiLevelDp>(*t.terms, options);
    t.solved = t.dp->Solve(nullptr).has_value();
  }
}

}  // namespace remat::solver
