// Planning against the card with the caching allocator replayed: a plan
// judged to fit keeps its replayed reserved peak plus the fixed terms within
// the budget, over budgets and strategies.
#include <gtest/gtest.h>

#include "remat/device_memory.h"
#include "remat/plan.h"
#include "remat/strategies.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

struct Case {
  const char* device;
  const char* alloc_conf;
};

// For each budget from 30% to 130% of the no-checkpointing device peak and
// each strategy: a fitting plan's device total is within the budget, and
// the same schedule replayed under a driver limit of the budget less the
// fixed terms never runs out of memory (what the card would see).
TEST(PlanOnDeviceBudget, AFittingPlanNeverExceedsTheBudget) {
  const Profile p = testing::GptChain(6, 4);
  for (const Case c : {Case{"h200", ""}, Case{"a100", "expandable_segments:True"},
                       Case{"rtx4090", "max_split_size_mb:64"}}) {
    const DeviceMemoryTerms terms = ResolveDeviceMemory(c.device, {}, c.alloc_conf).value();
    ASSERT_TRUE(terms.replays_allocator());
    PlanOptions none;
    none.strategy = Strategy::kNone;
    none.device_memory = terms;
    const int64_t none_total = MakePlan(p, none).value().chosen.memory.total_bytes;
    int fitting = 0;
    for (int pct = 30; pct <= 130; pct += 10) {
      for (Strategy s : {Strategy::kAuto, Strategy::kUniform, Strategy::kSegment,
                         Strategy::kSelective, Strategy::kOptimalSingle, Strategy::kOptimal}) {
        PlanOptions o;
        o.strategy = s;
        o.budget_bytes = none_total * pct / 100;
        o.device_memory = terms;
        const Result<PlanSet> set = MakePlan(p, o);
        ASSERT_TRUE(set.ok()) << set.status().message();
        const Plan& plan = set->chosen;
        const std::string where = std::string(c.device) + " " + ToString(s) + " at " +
                                  std::to_string(pct) + "%";
        ASSERT_TRUE(plan.memory.replay.has_value()) << where;
        EXPECT_EQ(plan.memory.total_bytes,
                  plan.memory.reserved_peak_bytes + terms.fixed_bytes())
            << where;
        EXPECT_GE(plan.memory.reserved_peak_bytes, plan.memory.allocated_peak_bytes) << where;
        if (!plan.fits) continue;
        ++fitting;
        EXPECT_LE(plan.memory.total_bytes, o.budget_bytes) << where;
        AllocatorLimit card;
        card.driver_bytes = o.budget_bytes - terms.fixed_bytes();
        const TrainingStepReplay r =
            ReplayTrainingSteps(p, plan.schedule, terms.alloc_conf, card).value();
        EXPECT_FALSE(r.summary.out_of_memory) << where;
        EXPECT_LE(r.reserved_peak_bytes + terms.fixed_bytes(), o.budget_bytes) << where;
      }
    }
    EXPECT_GT(fitting, 10) << c.device;
  }
}

}  // namespace
}  // namespace remat
