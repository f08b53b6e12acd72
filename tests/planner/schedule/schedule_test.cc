#include "remat/schedule/schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "remat/plan/plan.h"
#include "remat/schedule/decisions.h"
#include "testing/chains.h"

namespace remat {
namespace {

int CountFrees(const Schedule& s) {
  int n = 0;
  for (const Op& op : s.ops) n += op.kind == OpKind::kFree;
  return n;
}

TEST(ChainGraph, ReadsAndWritesFollowTheAutogradGraph) {
  const ChainGraph g(4);
  const std::vector<TensorRef> b1 = g.Reads(Op::Backward(1));
  EXPECT_EQ(b1.size(), 3u);  // x1 (input), a1, g2: not its output x2
  auto has = [](const std::vector<TensorRef>& v, TensorKind k, int i) {
    for (const TensorRef& t : v) {
      if (t.kind == k && t.index == i) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(b1, TensorKind::kX, 1));
  EXPECT_FALSE(has(b1, TensorKind::kX, 2));
  EXPECT_TRUE(has(g.Reads(Op::Backward(3)), TensorKind::kX, 4));  // but the loss's
  EXPECT_TRUE(has(b1, TensorKind::kA, 1));
  EXPECT_TRUE(has(b1, TensorKind::kG, 2));
  EXPECT_TRUE(has(g.Writes(Op::Backward(1)), TensorKind::kG, 1));
  EXPECT_TRUE(g.Writes(Op::Backward(0)).empty());     // no gradient into the batch
  EXPECT_FALSE(has(g.Reads(Op::Backward(3)), TensorKind::kG, 4));  // the loss seed is implicit
  EXPECT_EQ(g.Writes(Op::Forward(2, SaveMode::kNone)).size(), 1u);   // only x3
  EXPECT_EQ(g.Writes(Op::Forward(2, SaveMode::kAll)).size(), 2u);    // x3 and a2
  EXPECT_TRUE(g.Reads(Op::Free({TensorKind::kX, 1})).empty());
}

TEST(AddFrees, FreesEachAllocationOnceAfterItsLastRead) {
  const Profile p = testing::UniformChain(5);
  std::vector<LayerDecision> d(5, LayerDecision::kKeep);
  d[1] = LayerDecision::kCheckpoint;
  d[2] = LayerDecision::kRecompute;
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  ASSERT_TRUE(ValidateSchedule(s, p).ok());
  // Allocations: x0, 5 forwards' outputs, 3 forwards' a, 2 recomputes' x and a, 4 gradients.
  EXPECT_EQ(CountFrees(s), 1 + 5 + 3 + 4 + 4);
  // x2, written by the no-grad forward of layer 1, is freed right after layer 2 reads it.
  for (size_t i = 0; i + 1 < s.ops.size(); ++i) {
    if (s.ops[i].kind == OpKind::kForward && s.ops[i].layer == 2) {
      EXPECT_EQ(s.ops[i + 1].kind, OpKind::kFree);
      EXPECT_EQ(TensorName(s.ops[i + 1].tensor), "x2");
    }
  }
}

TEST(Schedule, JsonRoundTrip) {
  const Profile p = testing::TransformerChain(4);
  std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
  d[1] = LayerDecision::kCheckpoint;
  d[2] = LayerDecision::kRecompute;
  d[3] = LayerDecision::kSelective;
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  Result<Schedule> back = ParseScheduleJson(ScheduleToJson(s), p.num_layers(), "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->ops.size(), s.ops.size());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    EXPECT_EQ(DescribeOp(back->ops[i]), DescribeOp(s.ops[i])) << i;
  }
}

TEST(Schedule, BadJsonNamesTheOp) {
  Result<Schedule> r = ParseScheduleJson(R"([{"op":"forward","layer":0,"save":"all"},
                                             {"op":"jump","layer":1}])", 3, "plan.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("plan.json: schedule[1]"), std::string::npos);
  EXPECT_NE(r.status().message().find("jump"), std::string::npos);
  EXPECT_FALSE(ParseScheduleJson(R"([{"op":"backward","layer":7}])", 3, "p").ok());
  EXPECT_FALSE(ParseScheduleJson(R"([{"op":"free","tensor":"y3"}])", 3, "p").ok());
  EXPECT_FALSE(ParseScheduleJson(R"({"op":"free"})", 3, "p").ok());
}

TEST(Schedule, TensorNames) {
  EXPECT_EQ(TensorName({TensorKind::kG, 12}), "g12");
  EXPECT_EQ(ParseTensorName("a3")->index, 3);
  EXPECT_EQ(ParseTensorName("a3")->kind, TensorKind::kA);
  EXPECT_FALSE(ParseTensorName("a").ok());
  EXPECT_FALSE(ParseTensorName("x-1").ok());
  EXPECT_FALSE(ParseTensorName("x99999999999").ok());
}

// `schedule` with the copies of `places` inserted as InsertOffloads
// documents them: before each op position, the offloads placed there, then
// the prefetches, each in the order of `places`.
Schedule InsertedOneByOne(const Schedule& schedule, const std::vector<OffloadPlace>& places) {
  Schedule out;
  out.num_layers = schedule.num_layers;
  for (size_t p = 0; p <= schedule.ops.size(); ++p) {
    for (const OffloadPlace& c : places) {
      if (c.out == static_cast<int>(p)) out.ops.push_back(Op::Offload({TensorKind::kX, c.x}));
    }
    for (const OffloadPlace& c : places) {
      if (c.in == static_cast<int>(p)) out.ops.push_back(Op::Prefetch({TensorKind::kX, c.x}));
    }
    if (p < schedule.ops.size()) out.ops.push_back(schedule.ops[p]);
  }
  return out;
}

void ExpectSameOps(const Schedule& a, const Schedule& b, const std::string& what) {
  ASSERT_EQ(a.num_layers, b.num_layers) << what;
  ASSERT_EQ(a.ops.size(), b.ops.size()) << what;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(DescribeOp(a.ops[i]), DescribeOp(b.ops[i])) << what << ", op " << i;
  }
}

// AddFrees keeps its working arrays per thread between calls: a schedule's
// frees do not depend on the longer or shorter chains placed before it on
// the same thread (each compared with the frees a fresh thread places).
TEST(AddFrees, TheFreesDoNotDependOnTheSchedulesBeforeOnTheThread) {
  auto compute_ops = [](const Schedule& s) {
    std::vector<Op> ops;
    for (const Op& op : s.ops) {
      if (op.kind != OpKind::kFree) ops.push_back(op);
    }
    return ops;
  };
  std::vector<LayerDecision> small_d(4, LayerDecision::kKeep);
  small_d[1] = LayerDecision::kCheckpoint;
  small_d[2] = LayerDecision::kRecompute;
  std::vector<LayerDecision> big_d(12, LayerDecision::kCheckpoint);
  big_d[11] = LayerDecision::kKeep;
  const Profile small_p = testing::UniformChain(4), big_p = testing::UniformChain(12);
  const Schedule small = *BuildSingleLevelSchedule(small_p, small_d, {});
  const Schedule big = *BuildSingleLevelSchedule(big_p, big_d, {});
  const std::vector<Op> small_ops = compute_ops(small), big_ops = compute_ops(big);
  Schedule small_fresh, big_fresh;
  std::thread([&] { small_fresh = AddFrees(small_ops, 4); }).join();
  std::thread([&] { big_fresh = AddFrees(big_ops, 12); }).join();
  for (int round = 0; round < 2; ++round) {
    const Schedule b = AddFrees(big_ops, 12);
    const Schedule s = AddFrees(small_ops, 4);
    ExpectSameOps(s, small_fresh, "small after big");
    ExpectSameOps(b, big_fresh, "big");
    ExpectSameOps(AddFrees(big_ops, 12), big_fresh, "big after small");
  }
  ExpectSameOps(small_fresh, small, "small");
  ExpectSameOps(big_fresh, big, "big");
  EXPECT_TRUE(ValidateSchedule(small_fresh, small_p).ok());
  EXPECT_TRUE(ValidateSchedule(big_fresh, big_p).ok());
  // Allocations of the small chain: x0, 4 outputs, the a of layers 0 and 3,
  // the recomputes of layers 1 and 2 (x and a each), 3 gradients.
  EXPECT_EQ(CountFrees(small_fresh), 1 + 4 + 2 + 4 + 3);
}

// WithOffloads of the first j places is InsertOffloads of the first j
// checkpoints, for every j: each checkpoint's place does not depend on the
// others (the offload strategy places them once for all j).
TEST(WithOffloads, APrefixOfThePlacesIsInsertOffloadsOfThatPrefix) {
  Profile p = testing::TransformerChain(12, 3);
  p.host_link = HostLink{"test", 1, 0, true};
  const int L = p.num_layers();
  for (int every : {1, 2, 3}) {
    std::vector<LayerDecision> d(L, LayerDecision::kKeep);
    std::vector<int> xs;
    for (int i = 1; i + 1 < L; ++i) {
      d[i] = (i - 1) % every == 0 ? LayerDecision::kCheckpoint : LayerDecision::kRecompute;
      if (d[i] == LayerDecision::kCheckpoint && i >= 2) xs.push_back(i);
    }
    const Schedule kept = *BuildSingleLevelSchedule(p, d, {});
    for (int lead : {0, 1, 2}) {
      Result<std::vector<OffloadPlace>> places = PlaceOffloads(kept, xs, lead);
      ASSERT_TRUE(places.ok()) << places.status().message();
      ASSERT_EQ(places->size(), xs.size());
      for (size_t j = 0; j <= xs.size(); ++j) {
        const std::string what = "every " + std::to_string(every) + ", lead " +
                                 std::to_string(lead) + ", first " + std::to_string(j);
        const std::vector<int> prefix(xs.begin(), xs.begin() + static_cast<long>(j));
        Result<Schedule> inserted = InsertOffloads(kept, prefix, lead);
        ASSERT_TRUE(inserted.ok()) << what << ": " << inserted.status().message();
        const Schedule with = WithOffloads(kept, *places, j);
        ExpectSameOps(with, *inserted, what);
        ExpectSameOps(with,
                      InsertedOneByOne(kept, std::vector<OffloadPlace>(
                                                 places->begin(),
                                                 places->begin() + static_cast<long>(j))),
                      what);
        EXPECT_TRUE(ValidateSchedule(with, p).ok()) << what;
      }
    }
  }
  // A layer that runs with grad has no checkpoint to place.
  EXPECT_FALSE(PlaceOffloads(*BuildSingleLevelSchedule(
                                 p, std::vector<LayerDecision>(L, LayerDecision::kKeep), {}),
                             {2}, 1)
                   .ok());
}

}  // namespace
}  // namespace remat
