// Planning against the card with the caching allocator replayed: a plan
// judged to fit keeps its replayed reserved peak plus the fixed terms within
// the budget, over budgets and strategies.
#include <gtest/gtest.h>

#include "remat/device/device_memory.h"
#include "remat/plan/plan.h"
#include "remat/strategies/strategies.h"
#include "strategies/heuristic_search.h"
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
        const std::string where =
            std::string(c.device) + " " + ToString(s) + " at " + std::to_string(pct) + "%";
        ASSERT_TRUE(plan.memory.replay.has_value()) << where;
        EXPECT_EQ(plan.memory.total_bytes, plan.memory.reserved_peak_bytes +
                                               plan.memory.replay_margin_bytes +
                                               terms.fixed_bytes())
            << where;
        EXPECT_GT(plan.memory.replay_margin_bytes, 0) << where;  // an analytic profile
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

namespace remat {
namespace {

// The retries lower the tensor budget by a plan's excess over the card,
// which can overshoot; the bisection after them finds a faster setting that
// still fits. Oracle: every setting of the selective family (the first m
// blocks selective, m = 0..12: more blocks, less memory, more time), each
// replayed on the card; where the strategy finds a fitting plan it is as
// fast as the fastest of those that fit. (The solver screens by allocated
// bytes: where the setting with the lowest allocated peak is not the one
// with the lowest reserved peak, it can miss a setting that fits on the
// card: docs/device-memory.md, "Planning".)
TEST(PlanOnDeviceBudget, SelectiveFindsItsFastestFittingSetting) {
  const Profile p = testing::GptChain(12, 16);
  const DeviceMemoryTerms h200 = ResolveDeviceMemory("h200", {}).value();
  const strategies::HeuristicFamily family(p, Strategy::kSelective);
  int checked = 0;
  for (int64_t gb = 18; gb <= 36; gb += 2) {
    const int64_t budget = gb * 1'000'000'000;
    double fastest = -1;
    for (int m = family.first_parameter(); m <= family.last_parameter(); ++m) {
      const strategies::HeuristicCandidate c = family.Candidate(m);
      Plan plan = strategies::EvaluateDecisions(p, Strategy::kSelective, c.parameter, c.decisions,
                                                c.selective_option, 0)
                      .value();
      ASSERT_TRUE(AccountPlanMemory(p, h200, budget, &plan).ok());
      if (plan.fits && (fastest < 0 || plan.predicted.step_ms < fastest)) {
        fastest = plan.predicted.step_ms;
      }
    }
    PlanOptions o;
    o.strategy = Strategy::kSelective;
    o.budget_bytes = budget;
    o.device_memory = h200;
    const Plan chosen = MakePlan(p, o).value().chosen;
    if (fastest < 0) EXPECT_FALSE(chosen.fits) << gb << " GB";
    if (fastest < 0 || !chosen.fits) continue;
    ++checked;
    EXPECT_LE(chosen.predicted.step_ms, fastest * (1 + 1e-9)) << gb << " GB: " << chosen.parameter;
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Fitting is monotone in the budget: for each strategy, once a plan fits the
// card at a budget it fits at every larger one (the least-memory plan of the
// strategy decides when the retries overshoot), and a fitting plan's device
// total is within its budget. Budgets from 30% to 130% of the
// no-checkpointing device total in 4% steps, on two GPT shapes.
TEST(PlanOnDeviceBudget, AFitFoundAtABudgetIsFoundAtEveryLargerOne) {
  const DeviceMemoryTerms h200 = ResolveDeviceMemory("h200", {}).value();
  for (const Profile& p : {testing::GptChain(6, 4), testing::GptChain(12, 16)}) {
    PlanOptions none;
    none.strategy = Strategy::kNone;
    none.device_memory = h200;
    const int64_t none_total = MakePlan(p, none).value().chosen.memory.total_bytes;
    for (Strategy s :
         {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective, Strategy::kOptimalSingle}) {
      int64_t first_fit = -1;
      for (int pct = 30; pct <= 130; pct += 4) {
        PlanOptions o;
        o.strategy = s;
        o.budget_bytes = none_total * pct / 100;
        o.device_memory = h200;
        const Plan plan = MakePlan(p, o).value().chosen;
        const std::string where = p.model + " " + ToString(s) + " at " + std::to_string(pct) + "%";
        if (plan.fits) {
          EXPECT_LE(plan.memory.total_bytes, o.budget_bytes) << where;
          if (first_fit < 0) first_fit = pct;
        } else {
          EXPECT_LT(first_fit, 0) << where << " does not fit, but " << first_fit << "% did";
        }
      }
      EXPECT_GE(first_fit, 0) << p.model << " " << ToString(s);
    }
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// With a host link, optimal-single weighs offloading, and its least-memory
// plan offloads: a plan that fits the card at a budget is then found at
// every larger one (the least-memory plan without offload holds more than
// the budgets here). GPT-2 XL's shape at micro-batch 32 on an H200 over
// PCIe 5.0, budgets from 36 to 50 GiB.
TEST(PlanOnDeviceBudget, OffloadingPlansFitAtEveryBudgetAboveTheFirstFit) {
  ModelConfig c = testing::Gpt2Shape(48);
  c.name = "gpt2-xl-shape";
  c.hidden = 1600;
  c.heads = 25;
  c.ffn_hidden = 6400;
  c.micro_batch = 32;
  c.precision = Precision::kAmpBf16;
  AnalyticOptions a;
  a.device = LookupDevice("h200").value();
  Profile p = AnalyticProfile(c, a).value();
  p.host_link = LookupHostLink("pcie5").value();
  const DeviceMemoryTerms h200 = ResolveDeviceMemory("h200", {}).value();
  for (Strategy s : {Strategy::kOptimalSingle, Strategy::kOffload}) {
    int first_fit = -1;
    for (int gib = 36; gib <= 50; ++gib) {
      PlanOptions o;
      o.strategy = s;
      o.budget_bytes = int64_t{gib} << 30;
      o.device_memory = h200;
      const Plan plan = MakePlan(p, o).value().chosen;
      const std::string where = std::string(ToString(s)) + " at " + std::to_string(gib) + " GiB";
      if (plan.fits) {
        EXPECT_LE(plan.memory.total_bytes, o.budget_bytes) << where;
        if (first_fit < 0) first_fit = gib;
      } else {
        EXPECT_LT(first_fit, 0) << where << " does not fit, but " << first_fit << " GiB did";
      }
    }
    EXPECT_GE(first_fit, 0) << ToString(s);
    // Below what recomputation alone reaches on the card (45.6 GiB).
    EXPECT_LE(first_fit, 44) << ToString(s);
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// With a host budget the least-memory plan stays within it: optimal-single
// falls back to recomputation where offloading every checkpoint would put
// more on the host than --host-budget allows.
TEST(PlanOnDeviceBudget, TheLeastMemoryPlanKeepsTheHostBudget) {
  Profile p = testing::GptChain(12, 16);
  p.host_link = LookupHostLink("pcie5").value();
  PlanOptions o;
  o.strategy = Strategy::kOptimalSingle;
  o.budget_bytes = 1;
  const Plan unbounded = MakePlan(p, o).value().chosen;
  ASSERT_GT(unbounded.predicted.host_peak_bytes, 0);  // it offloads
  p.host_link.budget_bytes = unbounded.predicted.host_peak_bytes / 4;
  const Plan bounded = MakePlan(p, o).value().chosen;
  EXPECT_LE(bounded.predicted.host_peak_bytes, p.host_link.budget_bytes);
  EXPECT_GE(bounded.predicted.peak_bytes, unbounded.predicted.peak_bytes);
}

}  // namespace
}  // namespace remat
