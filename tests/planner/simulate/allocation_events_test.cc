// AllocationEvents: the simulator's requests as allocator events, replayed
// through the caching-allocator model.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "remat/device/caching_allocator.h"
#include "remat/schedule/decisions.h"
#include "remat/simulate/simulator.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// simulator_test.cc's three hand-sized layers, in MiB:
//   x0=10 -> [L0: keeps 50, x1=20] -> [L1: keeps 70, x2=30, fwd ws 7]
//         -> [L2: keeps 25, x3=5, bwd ws 3];  model state 100.
Profile ThreeLayersMiB() {
  Profile p;
  p.model = "three";
  p.static_memory.parameter_bytes = 100 * kMiB;
  const int64_t in[] = {10, 20, 30}, out[] = {20, 30, 5}, act[] = {50, 70, 25};
  for (int i = 0; i < 3; ++i) {
    LayerProfile l;
    l.name = "l" + std::to_string(i);
    l.input_bytes = in[i] * kMiB;
    l.output_bytes = out[i] * kMiB;
    l.activation_bytes = act[i] * kMiB;
    l.forward_ms = 1;
    l.backward_ms = 2;
    p.layers.push_back(l);
  }
  p.layers[1].forward_workspace_bytes = 7 * kMiB;
  p.layers[2].backward_workspace_bytes = 3 * kMiB;
  return p;
}

// The bytes live after each event, from the events alone; and what is live
// at the end, by id.
struct Live {
  std::vector<int64_t> timeline;
  std::map<int64_t, int64_t> at_end;
};
Live LiveBytes(const std::vector<AllocEvent>& events) {
  Live live;
  int64_t total = 0;
  for (const AllocEvent& e : events) {
    if (e.kind == AllocEvent::Kind::kAlloc) {
      EXPECT_EQ(live.at_end.count(e.id), 0u) << "id " << e.id << " allocated twice";
      live.at_end[e.id] = e.size_bytes;
      total += e.size_bytes;
    } else {
      EXPECT_EQ(live.at_end.count(e.id), 1u) << "id " << e.id << " freed but not live";
      total -= live.at_end[e.id];
      live.at_end.erase(e.id);
    }
    live.timeline.push_back(total);
  }
  return live;
}

// The events hold what the simulator holds: their live bytes peak where the
// simulator's peak is (288 MiB at layer 2's backward, its workspace
// included), and only the model state is left at the end.
TEST(AllocationEvents, LiveBytesFollowTheSimulator) {
  const Profile p = ThreeLayersMiB();
  for (const auto& decisions :
       {std::vector<LayerDecision>(3, LayerDecision::kKeep),
        std::vector<LayerDecision>{LayerDecision::kKeep, LayerDecision::kCheckpoint,
                                   LayerDecision::kRecompute}}) {
    const Schedule s = *BuildSingleLevelSchedule(p, decisions, {});
    const auto events = AllocationEvents(p, s);
    ASSERT_TRUE(events.ok()) << events.status().message();
    const auto sim = Simulate(p, s);
    ASSERT_TRUE(sim.ok());
    const Live live = LiveBytes(*events);
    EXPECT_EQ(*std::max_element(live.timeline.begin(), live.timeline.end()), sim->peak_bytes);
    ASSERT_EQ(live.at_end.size(), 1u);
    EXPECT_EQ(live.at_end.begin()->second, 100 * kMiB);
  }
  const Schedule keep = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  EXPECT_EQ(Simulate(p, keep)->peak_bytes, 288 * kMiB);
}

// Replayed through the allocator: every id pairs up, and the reserved peak
// is at least the allocated peak, itself at least the simulator's.
TEST(AllocationEvents, ReplayThroughTheAllocatorModel) {
  const Profile p = ThreeLayersMiB();
  const Schedule s = *BuildSingleLevelSchedule(
      p, {LayerDecision::kKeep, LayerDecision::kCheckpoint, LayerDecision::kRecompute}, {});
  const auto events = AllocationEvents(p, s);
  ASSERT_TRUE(events.ok());
  const auto sim = Simulate(p, s);
  ASSERT_TRUE(sim.ok());
  for (bool expandable : {false, true}) {
    AllocatorOptions o;
    o.expandable_segments = expandable;
    const auto r = ReplayAllocations(*events, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FALSE(r->oom.has_value());
    EXPECT_GE(r->stats.peak_allocated_bytes, sim->peak_bytes);
    EXPECT_GE(r->stats.peak_reserved_bytes, r->stats.peak_allocated_bytes);
    EXPECT_EQ(r->reserved_timeline_bytes.size(), events->size());
  }
  // Under a driver limit below the simulator's peak the replay runs out.
  AllocatorLimit limit;
  limit.driver_bytes = sim->peak_bytes - kMiB;
  const auto r = ReplayAllocations(*events, AllocatorOptions{}, limit);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->oom.has_value());
}

// An analytic profile knows its layers' tensors (LayerTensors): the events
// allocate them one by one, many more requests than one per layer, and their
// live bytes peak where the per-layer requests' do, at the simulator's peak
// over both kinds of micro-step of an accumulating update, and end with the
// same bytes live, for plans keeping, checkpointing, recomputing and
// selecting.
TEST(AllocationEvents, TensorByTensorKeepsTheSimulatorsTotals) {
  Profile p = testing::GptChain(3, 2);
  p.grad_accumulation = 2;
  Profile whole = p;
  whole.optimizer_workspace_tensors.clear();
  for (LayerProfile& l : whole.layers) {
    l.tensors = LayerTensors{};
    for (SelectiveOption& o : l.selective) {
      o.saved_tensors.clear();
      o.forward_workspace_tensors.clear();
    }
  }
  const std::vector<int> blocks = BlockLayers(p);
  std::vector<LayerDecision> mixed(p.num_layers(), LayerDecision::kKeep);
  mixed[blocks[0]] = LayerDecision::kCheckpoint;
  mixed[blocks[1]] = LayerDecision::kRecompute;
  std::vector<LayerDecision> selective(p.num_layers(), LayerDecision::kKeep);
  std::vector<int> options(p.num_layers(), -1);
  for (int b : blocks) {
    selective[b] = LayerDecision::kSelective;
    options[b] = 2;  // attention_core+mlp_activation
  }
  const std::vector<std::pair<std::vector<LayerDecision>, std::vector<int>>> plans = {
      {std::vector<LayerDecision>(p.num_layers(), LayerDecision::kKeep), {}},
      {mixed, {}},
      {selective, options}};
  for (const auto& [decisions, opts] : plans) {
    const Schedule s = *BuildSingleLevelSchedule(p, decisions, opts);
    int64_t peak = 0;
    for (bool later : {false, true}) {
      const auto events = AllocationEvents(p, s, later);
      const auto per_layer = AllocationEvents(whole, s, later);
      ASSERT_TRUE(events.ok()) << events.status().message();
      ASSERT_TRUE(per_layer.ok());
      EXPECT_GT(events->size(), 2 * per_layer->size());
      const Live live = LiveBytes(*events);
      const Live layer_live = LiveBytes(*per_layer);
      const int64_t step_peak = *std::max_element(live.timeline.begin(), live.timeline.end());
      EXPECT_EQ(step_peak,
                *std::max_element(layer_live.timeline.begin(), layer_live.timeline.end()));
      EXPECT_EQ(live.timeline.back(), layer_live.timeline.back());
      peak = std::max(peak, step_peak);
    }
    EXPECT_EQ(peak, Simulate(p, s).value().peak_bytes);
  }
}

TEST(AllocationEvents, AScheduleForAnotherModelIsAnError) {
  const Profile p = ThreeLayersMiB();
  Profile two = p;
  two.layers.pop_back();
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  const auto events = AllocationEvents(two, s);
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace remat
