#include "remat/device/device_memory.h"

#include <gtest/gtest.h>

#include <cmath>

#include "remat/analytic/analytic.h"
#include "remat/simulate/simulator.h"
#include "remat/strategies/strategies.h"
#include "testing/chains.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;

TEST(RoundRequest, RoundsUpTo512Bytes) {
  const CachingAllocatorModel m;
  EXPECT_EQ(RoundRequest(0, m), 0);
  EXPECT_EQ(RoundRequest(1, m), 512);
  EXPECT_EQ(RoundRequest(512, m), 512);
  EXPECT_EQ(RoundRequest(513, m), 1024);
  EXPECT_EQ(RoundRequest(3 * kMiB + 1, m), 3 * kMiB + 512);
}

TEST(ReservedTally, SmallRequestsShareTwoMiBSegments) {
  const CachingAllocatorModel m;
  ReservedTally t(&m);
  t.Add(1);  // one 512 B block opens a 2 MiB segment
  EXPECT_EQ(t.allocated(), 1);
  EXPECT_EQ(t.reserved(), 2 * kMiB);
  t.Add(700 * kKiB);
  t.Add(700 * kKiB);  // 1400.5 KiB rounded: still one segment
  EXPECT_EQ(t.reserved(), 2 * kMiB);
  t.Add(700 * kKiB);  // 2100.5 KiB: a second segment
  EXPECT_EQ(t.reserved(), 4 * kMiB);
  t.Remove(700 * kKiB);
  EXPECT_EQ(t.reserved(), 2 * kMiB);
  EXPECT_EQ(t.allocated(), 1 + 1400 * kKiB);
}

TEST(ReservedTally, LargeRequestsGetTheirOwnRoundedSegments) {
  const CachingAllocatorModel m;
  ReservedTally t(&m);
  t.Add(kMiB);  // exactly 1 MiB is still small
  EXPECT_EQ(t.reserved(), 2 * kMiB);
  t.Add(kMiB + 1);  // large: 1 MiB + 512 B in a 2 MiB segment of its own
  EXPECT_EQ(t.reserved(), 4 * kMiB);
  t.Add(3 * kMiB);  // 4 MiB segment
  EXPECT_EQ(t.reserved(), 8 * kMiB);
  t.Add(4 * kMiB);  // already aligned
  EXPECT_EQ(t.reserved(), 12 * kMiB);
  t.Remove(kMiB + 1);
  EXPECT_EQ(t.reserved(), 10 * kMiB);
  t.Add(0);  // nothing for an empty tensor
  EXPECT_EQ(t.reserved(), 10 * kMiB);
}

TEST(ReservedTally, WithoutAModelReservedIsAllocated) {
  ReservedTally t;
  t.Add(1);
  t.Add(3 * kMiB + 7);
  EXPECT_EQ(t.reserved(), 3 * kMiB + 8);
  EXPECT_EQ(t.allocated(), 3 * kMiB + 8);
}

TEST(AccountDeviceMemory, NamesEveryTerm) {
  DeviceMemoryTerms t;
  t.cuda_context_bytes = 1000;
  t.workspace_bytes = 24;
  t.fragmentation = 0.1;
  const DeviceMemoryUse u = AccountDeviceMemory(100, 205, t);
  EXPECT_EQ(u.allocated_peak_bytes, 100);
  EXPECT_EQ(u.allocator_rounding_bytes, 105);
  EXPECT_EQ(u.fragmentation_bytes, 21);  // ceil(20.5)
  EXPECT_EQ(u.reserved_peak_bytes, 226);
  EXPECT_EQ(u.total_bytes, 1250);
  const DeviceMemoryUse none = AccountDeviceMemory(100, 100, DeviceMemoryTerms{});
  EXPECT_EQ(none.reserved_peak_bytes, 100);
  EXPECT_EQ(none.total_bytes, 100);
}

TEST(TensorBudget, LeavesTheFixedTermsAndFragmentation) {
  DeviceMemoryTerms t;
  t.cuda_context_bytes = 100;
  t.workspace_bytes = 10;
  t.fragmentation = 0.25;
  EXPECT_EQ(TensorBudget(1360, t), 1000);  // (1360 - 110) / 1.25
  EXPECT_EQ(TensorBudget(1361, t), 1000);  // rounded down
  EXPECT_EQ(TensorBudget(0, t), 0);        // no budget stays none
  EXPECT_EQ(TensorBudget(50, t), 1);       // the terms alone do not fit
  EXPECT_EQ(TensorBudget(1360, DeviceMemoryTerms{}), 1360);
}

TEST(DevicePresets, GpusHaveTermsAndTheCpuNone) {
  for (const char* gpu : {"h200", "a100", "rtx4090"}) {
    const DeviceSpec d = LookupDevice(gpu).value();
    EXPECT_GT(d.cuda_context_bytes, 100 * kMiB) << gpu;
    EXPECT_GT(d.workspace_bytes, 0) << gpu;
    EXPECT_TRUE(d.caching_allocator) << gpu;
    // The reserved peak is replayed, no preset fraction.
    const DeviceMemoryTerms t = ResolveDeviceMemory(gpu, {}).value();
    EXPECT_TRUE(t.replays_allocator()) << gpu;
    EXPECT_FALSE(t.fragmentation.has_value()) << gpu;
  }
  // Measured on an H200 (PyTorch 2.11): 2 x 32 MiB cuBLAS + 1 MiB cuBLASLt.
  EXPECT_EQ(LookupDevice("h200")->workspace_bytes, 65 * kMiB);
  EXPECT_EQ(LookupDevice("a100")->workspace_bytes, 2 * 8320 * kKiB);
  const Result<DeviceMemoryTerms> cpu = ResolveDeviceMemory("cpu", {});
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->any());
  EXPECT_FALSE(ResolveDeviceMemory("", {})->any());
  const Result<DeviceMemoryTerms> h200 = ResolveDeviceMemory("h200", {});
  ASSERT_TRUE(h200.ok());
  EXPECT_EQ(h200->source, "h200 preset");
  EXPECT_EQ(h200->cuda_context_bytes, LookupDevice("h200")->cuda_context_bytes);
}

TEST(DevicePresets, OverridesReplaceOneTermEach) {
  DeviceMemoryOverrides o;
  o.cuda_context_bytes = 0;
  const DeviceMemoryTerms t = ResolveDeviceMemory("a100", o).value();
  EXPECT_EQ(t.cuda_context_bytes, 0);
  EXPECT_EQ(t.workspace_bytes, LookupDevice("a100")->workspace_bytes);
  EXPECT_EQ(t.source, "a100 preset with flags");
  DeviceMemoryOverrides f;
  f.fragmentation = 0.1;
  const DeviceMemoryTerms flags = ResolveDeviceMemory("", f).value();
  EXPECT_EQ(flags.source, "flags");
  EXPECT_TRUE(flags.caching_allocator);
  EXPECT_EQ(flags.cuda_context_bytes, 0);
  const Result<DeviceMemoryTerms> bad = ResolveDeviceMemory("tpu", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown device 'tpu'"), std::string::npos);
}

TEST(ParseTermBytes, AcceptsSizesAndZero) {
  EXPECT_EQ(ParseTermBytes("600MiB").value(), 600 * kMiB);
  EXPECT_EQ(ParseTermBytes("0").value(), 0);
  EXPECT_EQ(ParseTermBytes("0B").value(), 0);
  EXPECT_FALSE(ParseTermBytes("600").ok());  // no unit
  EXPECT_FALSE(ParseTermBytes("-1MiB").ok());
}

TEST(ParseFraction, AcceptsPercentOrFraction) {
  EXPECT_DOUBLE_EQ(ParseFraction("5%").value(), 0.05);
  EXPECT_DOUBLE_EQ(ParseFraction("0.05").value(), 0.05);
  EXPECT_DOUBLE_EQ(ParseFraction("0").value(), 0.0);
  for (const char* bad : {"", "%", "60%", "0.6", "-1%", "nan", "5 %", "abc"}) {
    const Result<double> r = ParseFraction(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(ParseFraction("60%").status().message().find("got '60%'"), std::string::npos);
}

// Every op's reserved bytes are at least its allocated peak; without a
// model they are equal, so CPU plans are unchanged.
TEST(SimulatorReserved, NeverBelowAllocatedAndEqualWithoutAModel) {
  const CachingAllocatorModel m;
  for (const Profile& p : {testing::GptChain(4, 2), testing::TransformerChain(6, 3)}) {
    PlanOptions o;
    o.strategy = Strategy::kUniform;
    o.every = 2;
    const Plan plan = MakePlan(p, o).value().chosen;
    const SimulationResult cpu = Simulate(p, plan.schedule).value();
    const SimulationResult gpu = Simulate(p, plan.schedule, &m).value();
    EXPECT_EQ(cpu.reserved_peak_bytes, cpu.peak_bytes);
    EXPECT_EQ(gpu.peak_bytes, cpu.peak_bytes);
    EXPECT_GT(gpu.reserved_peak_bytes, gpu.peak_bytes) << p.model;
    for (size_t i = 0; i < gpu.timeline.size(); ++i) {
      EXPECT_EQ(cpu.timeline[i].reserved, cpu.timeline[i].peak) << i;
      EXPECT_GE(gpu.timeline[i].reserved, gpu.timeline[i].peak) << i;
    }
  }
}

// The rounding comes from the timeline: a chain of 1-byte tensors reserves a
// shared 2 MiB segment for its small requests, not 1 byte more.
TEST(SimulatorReserved, RoundsTheLiveRequestsOfTheTimeline) {
  const CachingAllocatorModel m;
  const Profile p = testing::UniformChain(2, 1, 3);
  PlanOptions o;
  o.strategy = Strategy::kNone;
  const Plan plan = MakePlan(p, o).value().chosen;
  const SimulationResult r = Simulate(p, plan.schedule, &m).value();
  EXPECT_EQ(r.reserved_peak_bytes, 2 * kMiB);
}

// GPT-2 small at micro-batch 16: auto's plan fills 24GB to 99.5% when the
// card's own terms are ignored; an H200's context, workspaces and allocator
// overhead push that plan over, and auto then picks one that fits.
TEST(PlanOnDevice, APlanThatFitsWithoutTermsDoesNotWithThem) {
  const Profile p = testing::GptChain(12, 16);
  PlanOptions o;
  o.budget_bytes = 24'000'000'000;
  const Plan bare = MakePlan(p, o).value().chosen;
  ASSERT_TRUE(bare.fits);
  EXPECT_EQ(bare.memory.total_bytes, bare.predicted.peak_bytes);

  const DeviceMemoryTerms h200 = ResolveDeviceMemory("h200", {}).value();
  Plan on_card = bare;
  ASSERT_TRUE(AccountPlanMemory(p, h200, o.budget_bytes, &on_card).ok());
  EXPECT_FALSE(on_card.fits);
  EXPECT_GT(on_card.memory.total_bytes, o.budget_bytes);
  EXPECT_EQ(on_card.memory.allocated_peak_bytes, bare.predicted.peak_bytes);
  EXPECT_GE(on_card.memory.reserved_peak_bytes, on_card.memory.allocated_peak_bytes);

  o.device_memory = h200;
  const PlanSet set = MakePlan(p, o).value();
  EXPECT_TRUE(set.chosen.fits);
  EXPECT_LE(set.chosen.memory.total_bytes, o.budget_bytes);
  EXPECT_LE(set.chosen.predicted.peak_bytes, TensorBudget(o.budget_bytes, h200));
  EXPECT_GT(set.chosen.predicted.step_ms, bare.predicted.step_ms);  // it recomputes more
  for (const Plan& c : set.candidates) {
    EXPECT_EQ(c.budget_bytes, o.budget_bytes);
    EXPECT_EQ(c.fits, c.memory.total_bytes <= o.budget_bytes) << ToString(c.strategy);
    // An analytic profile: its replayed reserved peak carries the margin.
    EXPECT_EQ(c.memory.replay_margin_bytes,
              static_cast<int64_t>(std::ceil(kTensorReplayMargin *
                                             static_cast<double>(c.memory.reserved_peak_bytes))))
        << ToString(c.strategy);
    EXPECT_EQ(c.memory.total_bytes, c.memory.reserved_peak_bytes + c.memory.replay_margin_bytes +
                                        h200.fixed_bytes());
  }
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Layer tensors just over 1 MiB: the allocator gives each a 2 MiB segment,
// so a plan that fills the budget with allocated bytes does not fit once
// rounded. With the allocator model on (and no other term) the tensor
// budget is the whole budget: the strategies' first plans are the bare
// ones, and solving again below the budget must find plans that fit.
TEST(PlanOnDevice, ResolvesWhenRoundingPushesAPlanOver) {
  const Profile p = testing::UniformChain(8, kMiB + 1, 3 * kMiB);
  DeviceMemoryOverrides rounding_only;
  rounding_only.fragmentation = 0;
  const DeviceMemoryTerms terms = ResolveDeviceMemory("", rounding_only).value();
  ASSERT_TRUE(terms.caching_allocator);
  PlanOptions none;
  none.strategy = Strategy::kNone;
  const int64_t none_peak = MakePlan(p, none).value().chosen.predicted.peak_bytes;
  int tried = 0;
  // From 50% of the no-checkpointing peak on, a plan fits once rounded
  // (the lowest rounded peak is 12 MiB, 46%).
  for (int pct = 50; pct <= 95; pct += 5) {
    PlanOptions o;
    o.budget_bytes = none_peak * pct / 100;
    const Plan bare = MakePlan(p, o).value().chosen;
    Plan rounded = bare;
    ASSERT_TRUE(AccountPlanMemory(p, terms, o.budget_bytes, &rounded).ok());
    if (!bare.fits || rounded.fits) continue;
    ++tried;
    o.device_memory = terms;
    const Plan on_card = MakePlan(p, o).value().chosen;
    EXPECT_GT(on_card.memory.reserved_peak_bytes, on_card.memory.allocated_peak_bytes);
    EXPECT_TRUE(on_card.fits) << pct;
    EXPECT_LE(on_card.memory.total_bytes, o.budget_bytes) << pct;
    EXPECT_GE(on_card.predicted.step_ms, bare.predicted.step_ms) << pct;
  }
  EXPECT_GE(tried, 2);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The replay margin (kTensorReplayMargin) is for what a replay of an
// analytic profile's tensors misses: a profile of per-layer figures (as a
// measured one) is replayed without it.
TEST(PlanOnDevice, OnlyAReplayOfTensorsCarriesTheMargin) {
  const Profile analytic = testing::GptChain(3, 2);
  Profile per_layer = analytic;
  for (LayerProfile& l : per_layer.layers) {
    l.tensors = LayerTensors{};
    for (SelectiveOption& o : l.selective) {
      o.saved_tensors.clear();
      o.forward_workspace_tensors.clear();
    }
  }
  PlanOptions o;
  o.strategy = Strategy::kUniform;
  o.device_memory = ResolveDeviceMemory("h200", {}).value();
  const Plan with = MakePlan(analytic, o).value().chosen;
  const Plan without = MakePlan(per_layer, o).value().chosen;
  const DeviceMemoryTerms& t = o.device_memory;
  EXPECT_EQ(with.memory.replay_margin_bytes,
            static_cast<int64_t>(std::ceil(kTensorReplayMargin *
                                           static_cast<double>(with.memory.reserved_peak_bytes))));
  EXPECT_GT(with.memory.replay_margin_bytes, 0);
  EXPECT_EQ(with.memory.total_bytes,
            with.memory.reserved_peak_bytes + with.memory.replay_margin_bytes + t.fixed_bytes());
  EXPECT_EQ(without.memory.replay_margin_bytes, 0);
  EXPECT_EQ(without.memory.total_bytes, without.memory.reserved_peak_bytes + t.fixed_bytes());
  // With the fixed terms, room for the allocated peak but not for its
  // margin too: it does not fit (the allocator at its limit frees its
  // cache, but the tensors and their margin pass the budget).
  const int64_t allocated = with.memory.allocated_peak_bytes;
  Plan at = with;
  const int64_t tight = t.fixed_bytes() + allocated +
                        static_cast<int64_t>(kTensorReplayMargin * allocated) / 2;
  ASSERT_TRUE(AccountPlanMemory(analytic, t, tight, &at).ok());
  EXPECT_FALSE(at.fits);
  Plan roomy = with;
  ASSERT_TRUE(AccountPlanMemory(analytic, t, with.memory.total_bytes, &roomy).ok());
  EXPECT_TRUE(roomy.fits);
}

}  // namespace
}  // namespace remat
