#include "remat/simulator.h"

#include <gtest/gtest.h>

#include "remat/plan.h"
#include "testing/timeline.h"

namespace remat {
namespace {

// Three layers, hand-sized so every timeline value can be checked by hand:
//   x0=10 -> [L0: keeps 50, x1=20] -> [L1: keeps 70, x2=30, fwd ws 7]
//         -> [L2: keeps 25, x3=5, bwd ws 3];  model state 100.
Profile ThreeLayers() {
  Profile p;
  p.model = "three";
  p.static_memory.parameter_bytes = 100;
  p.optimizer_ms = 0.5;
  const int64_t in[] = {10, 20, 30}, out[] = {20, 30, 5}, act[] = {50, 70, 25};
  for (int i = 0; i < 3; ++i) {
    LayerProfile l;
    l.name = "l" + std::to_string(i);
    l.input_bytes = in[i];
    l.output_bytes = out[i];
    l.activation_bytes = act[i];
    l.forward_ms = 1 + i;
    l.backward_ms = 2 * (1 + i);
    p.layers.push_back(l);
  }
  p.layers[1].forward_workspace_bytes = 7;
  p.layers[2].backward_workspace_bytes = 3;
  return p;
}

using testing::Peaks;

TEST(Simulator, NoCheckpointingTimelineByHand) {
  const Profile p = ThreeLayers();
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Forward: 110 + 50 = 160; + 70 (+7 transient) = 230 (237); + 25 = 255.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 237, 255}));
  // Backward 2: 255 + g2(30) + 3 = 288; frees x3, a2 -> 260.
  // Backward 1: 260 + g1(20) = 280; frees x2, a1, g2 -> 180. Backward 0: 180.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{288, 280, 180}));
  EXPECT_EQ(r->peak_bytes, 288);
  EXPECT_EQ(s.ops[r->peak_op].kind, OpKind::kBackward);
  EXPECT_EQ(s.ops[r->peak_op].layer, 2);
  EXPECT_EQ(r->static_bytes, 100);
  EXPECT_EQ(r->activation_peak_bytes, 188);
  EXPECT_EQ(r->timeline.back().live_after, 100);  // everything freed at the end
  EXPECT_DOUBLE_EQ(r->forward_ms, 6);
  EXPECT_DOUBLE_EQ(r->backward_ms, 12);
  EXPECT_DOUBLE_EQ(r->recompute_ms, 0);
  EXPECT_DOUBLE_EQ(r->step_ms, 18.5);
  // Composition of the peak: model state 100, activations 155, grads 30, workspace 3.
  EXPECT_EQ(r->at_peak[MemoryCategory::kModelState], 100);
  EXPECT_EQ(r->at_peak[MemoryCategory::kActivations], 155);
  EXPECT_EQ(r->at_peak[MemoryCategory::kGradients], 30);
  EXPECT_EQ(r->at_peak[MemoryCategory::kWorkspace], 3);
  EXPECT_EQ(r->at_peak.total(), r->peak_bytes);
}

TEST(Simulator, CheckpointedMiddleLayerTimelineByHand) {
  const Profile p = ThreeLayers();
  const std::vector<LayerDecision> d = {LayerDecision::kKeep, LayerDecision::kCheckpoint,
                                        LayerDecision::kKeep};
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Forward: 160; layer 1 without grad keeps only x2: 190 (197); layer 2: 215.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 197, 215}));
  // Backward 2: 215 + 30 + 3 = 248, then x3, a2 and the old x2 are freed: 190.
  // Recompute 1 with grad: 190 + 70 + 7 = 267 -> 260. Backward 1: 280. Backward 0: 180.
  EXPECT_EQ(Peaks(*r, s, OpKind::kRecompute), (std::vector<int64_t>{267}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{248, 280, 180}));
  EXPECT_EQ(r->peak_bytes, 280);
  EXPECT_DOUBLE_EQ(r->recompute_ms, 2);
  EXPECT_EQ(r->recompute_ops, 1);
  EXPECT_DOUBLE_EQ(r->step_ms, 20.5);
  EXPECT_EQ(r->at_peak[MemoryCategory::kRecomputed], 70);
}

TEST(Simulator, SelectiveOptionKeepsLessAndPaysInBackward) {
  Profile p = ThreeLayers();
  SelectiveOption o;
  o.name = "core";
  o.activation_bytes = 40;  // keeps 40 instead of 70 (output 30 included)
  o.extra_recompute_ms = 0.25;
  o.recompute_workspace_bytes = 30;
  p.layers[1].selective.push_back(o);
  const std::vector<LayerDecision> d = {LayerDecision::kKeep, LayerDecision::kSelective,
                                        LayerDecision::kKeep};
  const Schedule s = *BuildSingleLevelSchedule(p, d, {0, 0, 0});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Forward: 160, 160 + 40 (+7) = 200 (207), 225. Backward 2: 225+30+3 = 258 -> 230.
  // Backward 1: 230 + 20 + 30 (recompute workspace) = 280.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 207, 225}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{258, 280, 180}));
  EXPECT_DOUBLE_EQ(r->recompute_ms, 0.25);

  // The option's own forward workspace (its dropped tensors are transient).
  p.layers[1].selective[0].forward_workspace_bytes = 50;
  Result<SimulationResult> own = Simulate(p, s);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(Peaks(*own, s, OpKind::kForward), (std::vector<int64_t>{160, 250, 225}));
}

TEST(Simulator, RejectsSchedulesThatCannotRun) {
  const Profile p = ThreeLayers();
  Schedule s;
  s.num_layers = 3;
  s.ops = {Op::Forward(0, SaveMode::kAll), Op::Backward(2)};
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x2"), std::string::npos) << r.status().message();

  s.ops = {Op::Forward(0, SaveMode::kAll), Op::Free({TensorKind::kA, 0}),
           Op::Free({TensorKind::kA, 0})};
  EXPECT_FALSE(Simulate(p, s).ok());

  s.ops = {Op::Forward(0, SaveMode::kAll), Op::Forward(0, SaveMode::kAll)};
  EXPECT_FALSE(Simulate(p, s).ok());  // a second forward must be a recompute

  s.ops = {Op::Forward(1, SaveMode::kSelective, 0)};
  EXPECT_FALSE(Simulate(p, s).ok());  // layer 1 has no selective option
}

}  // namespace
}  // namespace remat
