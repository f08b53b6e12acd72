// The per-layer decision "checkpoint, offloaded" (LayerDecision::kOffload)
// and the offload strategy built on it.
#include <gtest/gtest.h>

#include <algorithm>

#include "remat/plan/plan.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

// An embedding, six equal blocks and a head: x = 100 bytes, 900 more kept.
Profile Chain(bool overlapped) {
  Profile p;
  p.model = "chain";
  p.static_memory.parameter_bytes = 1000;
  for (int i = 0; i < 8; ++i) {
    LayerProfile l;
    l.name = i == 0 ? "embedding" : i == 7 ? "head" : "block" + std::to_string(i - 1);
    l.kind = i == 0 || i == 7 ? l.name : "block";
    l.input_bytes = 100;
    l.output_bytes = 100;
    l.activation_bytes = 1000;
    l.forward_ms = 1;
    l.backward_ms = 2;
    p.layers.push_back(l);
  }
  p.host_link = HostLink{"test", 1e-3, 0, overlapped};  // 0.1 ms per 100 bytes
  return p;
}

TEST(OffloadDecision, BuildsOffloadsAndReadsThemBack) {
  const Profile p = Chain(true);
  std::vector<LayerDecision> d(8, LayerDecision::kCheckpoint);
  d[0] = LayerDecision::kKeep;
  d[7] = LayerDecision::kKeep;
  d[3] = d[5] = LayerDecision::kOffload;
  Result<Schedule> s = BuildSingleLevelSchedule(p, d, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto count = [&](OpKind k) {
    return std::count_if(s->ops.begin(), s->ops.end(), [&](const Op& op) { return op.kind == k; });
  };
  EXPECT_EQ(count(OpKind::kOffload), 2);
  EXPECT_EQ(count(OpKind::kPrefetch), 2);
  std::vector<LayerDecision> back;
  std::vector<int> options;
  SummarizeDecisions(*s, &back, &options);
  EXPECT_EQ(back, d);
  // x1's writer (the embedding) runs with grad: x1 is no checkpoint.
  d[1] = LayerDecision::kOffload;
  Result<Schedule> bad = BuildSingleLevelSchedule(p, d, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 1 ('block0') is marked offload"), std::string::npos)
      << bad.status().message();
  d[1] = LayerDecision::kCheckpoint;
  d[0] = LayerDecision::kOffload;
  EXPECT_FALSE(BuildSingleLevelSchedule(p, d, {}).ok());
}

TEST(OffloadStrategy, LowersTheFloorBelowCheckpointingEveryBlock) {
  const Profile p = Chain(true);
  PlanOptions o;
  o.strategy = Strategy::kUniform;
  o.every = 1;
  const Plan every = MakePlan(p, o)->chosen;
  o.strategy = Strategy::kOffload;
  o.every = 0;
  const Plan off = MakePlan(p, o)->chosen;
  // Blocks 1..5's checkpoints move (block0's input is the embedding's
  // output, written with grad).
  EXPECT_EQ(std::count(off.decisions.begin(), off.decisions.end(), LayerDecision::kOffload), 5);
  EXPECT_EQ(off.predicted.offloaded_bytes, 500);
  EXPECT_LT(off.predicted.peak_bytes, every.predicted.peak_bytes);
  // Fast copies over an overlapped link hide behind the backwards.
  EXPECT_DOUBLE_EQ(off.predicted.transfer_ms, 0);
  EXPECT_DOUBLE_EQ(off.predicted.step_ms, every.predicted.step_ms);
  // In line they cost their copy time.
  const Profile in_line = Chain(false);
  const Plan slow = MakePlan(in_line, o)->chosen;
  EXPECT_NEAR(slow.predicted.transfer_ms, 10 * 0.1, 1e-9);
}

TEST(OffloadStrategy, WithABudgetIsTheFastestThatFitsAndHonoursTheHostBudget) {
  Profile p = Chain(true);
  PlanOptions o;
  o.strategy = Strategy::kOffload;
  const Plan floor = MakePlan(p, o)->chosen;
  o.budget_bytes = floor.predicted.peak_bytes;
  const Plan at_floor = MakePlan(p, o)->chosen;
  EXPECT_TRUE(at_floor.fits);
  EXPECT_LE(at_floor.predicted.step_ms, floor.predicted.step_ms);
  // Room for two checkpoints on the host: no plan holds more there.
  p.host_link.budget_bytes = 200;
  o.budget_bytes = 1'000'000;
  const Plan capped = MakePlan(p, o)->chosen;
  EXPECT_TRUE(capped.fits);
  EXPECT_LE(capped.predicted.host_peak_bytes, 200);
  o.budget_bytes = 0;
  const Plan capped_floor = MakePlan(p, o)->chosen;
  EXPECT_EQ(capped_floor.predicted.host_peak_bytes, 200);
  EXPECT_GT(capped_floor.predicted.peak_bytes, floor.predicted.peak_bytes);
}

TEST(OffloadStrategy, AutoWeighsItOnlyWithALink) {
  Profile p = Chain(true);
  EXPECT_TRUE(AppliesTo(Strategy::kOffload, p));
  PlanOptions o;
  o.budget_bytes = 1'000'000;
  auto has_offload = [](const PlanSet& s) {
    return std::any_of(s.candidates.begin(), s.candidates.end(),
                       [](const Plan& c) { return c.strategy == Strategy::kOffload; });
  };
  EXPECT_TRUE(has_offload(*MakePlan(p, o)));
  p.host_link = HostLink{};
  EXPECT_FALSE(AppliesTo(Strategy::kOffload, p));
  EXPECT_FALSE(has_offload(*MakePlan(p, o)));
  o.strategy = Strategy::kOffload;
  EXPECT_FALSE(MakePlan(p, o).ok());
}

}  // namespace
}  // namespace remat
