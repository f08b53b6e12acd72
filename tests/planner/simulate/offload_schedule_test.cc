// Activation offload as schedule ops: kOffload / kPrefetch of a checkpoint,
// their validation, JSON, placement (InsertOffloads) and what the simulator
// makes of them over an in-line link.
#include <gtest/gtest.h>

#include "remat/plan/plan.h"
#include "remat/simulate/simulator.h"

namespace remat {
namespace {

// Four equal layers: x = 100 bytes between layers, each keeps 400 more.
Profile FourLayers() {
  Profile p;
  p.model = "four";
  p.static_memory.parameter_bytes = 1000;
  for (int i = 0; i < 4; ++i) {
    LayerProfile l;
    l.name = "block" + std::to_string(i);
    l.kind = "block";
    l.input_bytes = 100;
    l.output_bytes = 100;
    l.activation_bytes = 500;
    l.forward_ms = 1;
    l.backward_ms = 2;
    p.layers.push_back(l);
  }
  // 1e-3 GB/s: 1 byte per microsecond, so 100 bytes take 0.1 ms (+ 0.01 ms latency).
  p.host_link = HostLink{"test", 1e-3, 10, false};
  return p;
}

// Every layer checkpointed: x1..x3 are kept without grad until their recompute.
Schedule EveryLayer(const Profile& p) {
  return *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(4, LayerDecision::kCheckpoint),
                                   {});
}

int IndexOf(const Schedule& s, OpKind kind, int x) {
  for (size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].kind == kind && s.ops[i].tensor.index == x) return static_cast<int>(i);
  }
  return -1;
}

TEST(OffloadSchedule, InsertOffloadsPlacesCopiesAroundTheCheckpointsLifetime) {
  const Profile p = FourLayers();
  const Schedule base = EveryLayer(p);
  Result<Schedule> s = InsertOffloads(base, {1, 2}, 0);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(ValidateSchedule(*s, p).ok()) << ValidateSchedule(*s, p).message();
  ASSERT_EQ(s->ops.size(), base.ops.size() + 4);
  // x2 leaves after forward 2 (its first reader) and comes back right
  // before recompute 2.
  const int out = IndexOf(*s, OpKind::kOffload, 2);
  const int in = IndexOf(*s, OpKind::kPrefetch, 2);
  ASSERT_GT(out, 0);
  ASSERT_GT(in, out);
  EXPECT_EQ(s->ops[out - 1].kind, OpKind::kForward);
  EXPECT_EQ(s->ops[out - 1].layer, 2);
  EXPECT_EQ(s->ops[in + 1].kind, OpKind::kRecompute);
  EXPECT_EQ(s->ops[in + 1].layer, 2);
  // A lead of one compute op issues it before the backward of layer 3.
  Result<Schedule> early = InsertOffloads(base, {2}, 1);
  ASSERT_TRUE(early.ok()) << early.status().message();
  const int in_early = IndexOf(*early, OpKind::kPrefetch, 2);
  EXPECT_EQ(early->ops[in_early + 1].kind, OpKind::kBackward);
  EXPECT_EQ(early->ops[in_early + 1].layer, 3);
  EXPECT_TRUE(ValidateSchedule(*early, p).ok());
}

TEST(OffloadSchedule, SimulatedPeakDropsByTheOffloadedBytes) {
  const Profile p = FourLayers();
  const Schedule base = EveryLayer(p);
  const Schedule offloaded = *InsertOffloads(base, {1, 2, 3}, 0);
  const SimulationResult before = *Simulate(p, base);
  const SimulationResult after = *Simulate(p, offloaded);
  // Without offload the peak is backward 3 (2000: model 1000, x0..x3, the
  // loss x4, a3, g3). Offloaded, backward 3 holds x0, x3 (prefetched), x4,
  // a3, g3: 1800, 200 fewer; backward 2 holds x0, x2 (prefetched), a2, g3,
  // g2 (x3 went after backward 3): 1800 too, x1 still on the host; and
  // backward 1, with x1 back, 1800.
  auto backward_peak = [](const SimulationResult& r, const Schedule& s, int layer) {
    for (const TimelinePoint& pt : r.timeline) {
      const Op& op = s.ops[pt.op_index];
      if (op.kind == OpKind::kBackward && op.layer == layer) return pt.peak;
    }
    return int64_t{-1};
  };
  EXPECT_EQ(backward_peak(before, base, 3), 2000);
  EXPECT_EQ(backward_peak(after, offloaded, 3), 1800);
  EXPECT_EQ(backward_peak(after, offloaded, 2), 1800);
  EXPECT_EQ(backward_peak(after, offloaded, 1), 1800);
  EXPECT_EQ(before.peak_bytes, 2000);
  EXPECT_EQ(after.peak_bytes, 1800);
  EXPECT_EQ(after.offloaded_bytes, 300);
  EXPECT_EQ(after.host_peak_bytes, 300);
  EXPECT_EQ(before.host_peak_bytes, 0);
  // Six copies of 100 bytes at 0.11 ms each, in line.
  EXPECT_NEAR(after.transfer_ms, 0.66, 1e-9);
  EXPECT_NEAR(after.step_ms - before.step_ms, 0.66, 1e-9);
  EXPECT_EQ(after.timeline.back().live_after, 1000);
}

TEST(OffloadSchedule, ValidationRefusesWhatCannotRun) {
  Profile p = FourLayers();
  const Schedule base = EveryLayer(p);
  Schedule s = *InsertOffloads(base, {2}, 0);
  // Reading x2 while it is on the host.
  Schedule no_prefetch = s;
  no_prefetch.ops.erase(no_prefetch.ops.begin() + IndexOf(s, OpKind::kPrefetch, 2));
  Status st = ValidateSchedule(no_prefetch, p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("on the host"), std::string::npos) << st.message();
  // No link in the profile.
  Profile no_link = p;
  no_link.host_link = HostLink{};
  st = ValidateSchedule(s, no_link);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--host-link"), std::string::npos) << st.message();
  // x2 written with grad (layer 1 kept) holds a graph: not a checkpoint.
  const Schedule keep = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(4), {});
  EXPECT_FALSE(InsertOffloads(keep, {2}, 0).ok());
  Schedule forced = keep;
  forced.ops.insert(forced.ops.begin() + 2, Op::Offload({TensorKind::kX, 2}));
  st = ValidateSchedule(forced, p);
  ASSERT_FALSE(st.ok()) << DescribeOp(forced.ops[2]);
  // The batch and the loss's output never move.
  EXPECT_FALSE(InsertOffloads(base, {0}, 0).ok());
  EXPECT_FALSE(InsertOffloads(base, {4}, 0).ok());
}

TEST(OffloadSchedule, JsonRoundTrip) {
  const Profile p = FourLayers();
  const Schedule s = *InsertOffloads(EveryLayer(p), {1, 3}, 1);
  const std::string json = ScheduleToJson(s);
  EXPECT_NE(json.find("{\"op\":\"offload\",\"tensor\":\"x1\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"op\":\"prefetch\",\"tensor\":\"x3\"}"), std::string::npos) << json;
  Result<Schedule> back = ParseScheduleJson(json, 4, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ScheduleToJson(*back), json);
  EXPECT_EQ(DescribeOp(Op::Prefetch({TensorKind::kX, 3})), "prefetch x3");
}

TEST(OffloadSchedule, ProfileJsonKeepsTheLink) {
  const Profile p = FourLayers();
  Result<Profile> back = ParseProfile(ProfileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->host_link.name, "test");
  EXPECT_DOUBLE_EQ(back->host_link.gb_per_s, 1e-3);
  EXPECT_DOUBLE_EQ(back->host_link.latency_us, 10);
  EXPECT_FALSE(back->host_link.overlapped);
  std::string bad = ProfileToJson(p);
  bad.replace(bad.find("\"gb_per_s\""), 10, "\"gbps\"");
  Result<Profile> r = ParseProfile(bad, "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("host_link"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace remat
