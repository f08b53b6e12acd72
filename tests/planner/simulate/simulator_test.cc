#include "remat/simulate/simulator.h"

#include <gtest/gtest.h>

#include "remat/plan/plan.h"
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
  // Backward 2: 255 + g2(30) + 3 = 288; frees x3, a2 and x2 (its input;
  // backward 1 does not read its output) -> 230.
  // Backward 1: 230 + g1(20) = 250; frees x1, a1, g2 -> 160. Backward 0: 160.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{288, 250, 160}));
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

// A backward that creates its layer's gradients after autograd has let go of
// part of what the layer saved: its negative workspace (as the runtime's
// profiler measures it) lowers the backward's peak, attributed to a[i], and
// a[i] is gone when the backward ends, so the frees after it are no higher.
TEST(Simulator, ANegativeBackwardWorkspaceIsSavedBytesReleasedBeforeThePeak) {
  Profile p = ThreeLayers();
  p.layers[2].backward_workspace_bytes = -15;
  p.layers[2].gradient_bytes = 40;
  ASSERT_TRUE(ValidateProfile(p, "p").ok());
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Backward 2: 255 + g2(30) + gradients(40) - 15 = 310; after it a2 (20)
  // is released: 305. Held to its free, a2 would make that moment 325.
  // Backward 1: 305 - x3(5) - x2(30) + g1(20) = 290, a1 (40) released
  // after it; frees x1, g2 -> 160 + 40. Backward 0: 200.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{310, 290, 200}));
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind == OpKind::kBackward && s.ops[k].layer == 2) {
      EXPECT_EQ(r->timeline[k].live_after, 305);
      EXPECT_EQ(r->timeline[k].at_peak[MemoryCategory::kActivations], 155 - 15);
      EXPECT_EQ(r->timeline[k].at_peak[MemoryCategory::kWorkspace], 0);
      EXPECT_EQ(r->timeline[k + 1].peak, 305);  // the free after it
    }
  }
  EXPECT_EQ(r->peak_bytes, 310);
  EXPECT_EQ(r->timeline.back().live_after, 100);
  // Without an allocator model reserved is allocated, at every op.
  EXPECT_EQ(r->reserved_peak_bytes, r->peak_bytes);
  for (const TimelinePoint& t : r->timeline) EXPECT_EQ(t.reserved, t.peak) << t.op_index;
}

// An engine's buffers beside a negative workspace (ranks/model_state.cc:
// a block's backward releases 12 bytes of a2 before its peak, where an
// all-gathered unit of 10 bytes is live): the workspace's listed tensors
// are requested as themselves and a2 is released by the rest, the peak the
// same as from the net workspace (-2) alone.
TEST(Simulator, ListedWorkspaceTensorsBesideANegativeWorkspaceStayWhole) {
  Profile p = ThreeLayers();
  p.layers[2].backward_workspace_bytes = -12 + 10;
  p.layers[2].tensors.backward_workspace = {10};
  p.layers[2].gradient_bytes = 40;
  ASSERT_TRUE(ValidateProfile(p, "p").ok());
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind != OpKind::kBackward || s.ops[k].layer != 2) continue;
    // 255 + g2(30) + gradients(40) - 2.
    EXPECT_EQ(r->timeline[k].peak, 323);
    EXPECT_EQ(r->timeline[k].at_peak[MemoryCategory::kWorkspace], 10);
    EXPECT_EQ(r->timeline[k].at_peak[MemoryCategory::kActivations], 155 - 12);
    EXPECT_EQ(r->timeline[k].live_after, 305);
  }
  // Listed tensors the release cannot make room for (30 bytes on a net
  // -19, a2 20): a2 released whole and the rest of the net workspace one
  // request; the peak still the net workspace's.
  p.layers[2].backward_workspace_bytes = -20 + 1;
  p.layers[2].tensors.backward_workspace = {30};
  r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind != OpKind::kBackward || s.ops[k].layer != 2) continue;
    EXPECT_EQ(r->timeline[k].peak, 325 - 19);
    EXPECT_EQ(r->timeline[k].at_peak[MemoryCategory::kActivations], 155 - 20);
    EXPECT_EQ(r->timeline[k].at_peak[MemoryCategory::kWorkspace], 1);
  }
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
  // Recompute 1 with grad: 190 + 70 + 7 = 267 -> 260, and its x2, which
  // nothing reads, is freed: 230. Backward 1: 250. Backward 0: 160.
  EXPECT_EQ(Peaks(*r, s, OpKind::kRecompute), (std::vector<int64_t>{267}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{248, 250, 160}));
  EXPECT_EQ(r->peak_bytes, 267);
  EXPECT_DOUBLE_EQ(r->recompute_ms, 2);
  EXPECT_EQ(r->recompute_ops, 1);
  EXPECT_DOUBLE_EQ(r->step_ms, 20.5);
  EXPECT_EQ(r->at_peak[MemoryCategory::kRecomputed], 70);
}

// The backward after a recompute takes recompute_backward_workspace_bytes
// where the profile gives it (a compiled profile's checkpointed block);
// a kept layer's backward keeps backward_workspace_bytes.
TEST(Simulator, TheBackwardAfterARecomputeTakesItsOwnWorkspace) {
  Profile p = ThreeLayers();
  p.layers[1].recompute_backward_workspace_bytes = 11;
  p.layers[2].recompute_backward_workspace_bytes = 50;  // layer 2 is kept: unused
  const std::vector<LayerDecision> d = {LayerDecision::kKeep, LayerDecision::kCheckpoint,
                                        LayerDecision::kKeep};
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // As CheckpointedMiddleLayerTimelineByHand, backward 1 with 11 on top.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{248, 261, 160}));
  // Released saved bytes as a negative workspace does (down to a1's 40).
  p.layers[1].recompute_backward_workspace_bytes = -40;
  r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{248, 210, 160}));
}

// ThreeLayers with gradients created in backward: 1, 10 and 100 bytes.
Profile ThreeLayersWithGradients() {
  Profile p = ThreeLayers();
  const int64_t grads[] = {1, 10, 100};
  for (int i = 0; i < 3; ++i) p.layers[i].gradient_bytes = grads[i];
  return p;
}

int64_t GradientsAtPeak(const TimelinePoint& t) {
  return t.at_peak[MemoryCategory::kParameterGrads];
}

TEST(Simulator, GradientsAppearLayerByLayerInBackward) {
  const Profile p = ThreeLayersWithGradients();
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // No gradient during the forward: the peaks of NoCheckpointingTimelineByHand.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 237, 255}));
  // Backward 2: 255 + 100 + g2(30) + 3 = 388 -> 330 (x3, a2 and x2 freed).
  // Backward 1: 330 + 10 + g1(20) = 360 -> 270 (x1, a1 and g2 freed).
  // Backward 0: 270 + 1 = 271.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{388, 360, 271}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward, GradientsAtPeak),
            (std::vector<int64_t>{100, 110, 111}));
  EXPECT_EQ(r->peak_bytes, 388);
  EXPECT_EQ(r->at_peak[MemoryCategory::kParameterGrads], 100);
  EXPECT_EQ(r->at_peak[MemoryCategory::kModelState], 100);
  // The optimizer step reads them all, then frees them (zero_grad: None).
  const TimelinePoint& step = r->timeline.back();
  ASSERT_EQ(s.ops[step.op_index].kind, OpKind::kOptimizerStep);
  EXPECT_EQ(step.peak, 211);
  EXPECT_EQ(step.live_after, 100);
  EXPECT_GE(r->layer_bytes_at_peak[2], 100);  // its gradients count with the layer
}

TEST(Simulator, AccumulatedUpdatePeaksAtTheLaterMicroStep) {
  Profile p = ThreeLayersWithGradients();
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  p.grad_accumulation = 4;
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Micro-batch 1 peaks at 388 (above); 2..4 start with all 111 bytes:
  // backward 2 peaks at 255 + 111 + 30 + 3 = 399.
  EXPECT_EQ(r->peak_bytes, 399);
  EXPECT_EQ(r->timeline.front().live_before, 100 + 10 + 111);
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{271, 348, 366}));
  // The same as persistent buffers of 111 bytes, but freed by the step.
  Profile persistent = ThreeLayers();
  persistent.static_memory.gradient_bytes = 111;
  Result<SimulationResult> q = Simulate(persistent, s);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->peak_bytes, r->peak_bytes);
  EXPECT_EQ(r->timeline.back().live_after, 100);
  EXPECT_EQ(q->timeline.back().live_after, 211);

  // One micro-batch per update: micro-batch 1 alone.
  p.grad_accumulation = 1;
  EXPECT_EQ(Simulate(p, s)->peak_bytes, 388);
}

// Micro-batches 2..K add into existing gradients through transients of
// their own (accumulate_workspace_bytes, measured by the runtime's
// profiler); micro-batch 1, which creates them, uses backward_workspace_bytes.
TEST(Simulator, LaterMicroStepsUseTheAccumulatingBackwardWorkspace) {
  Profile p = ThreeLayersWithGradients();
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  p.layers[2].accumulate_workspace_bytes = 3 + 30;  // the new gradients as a transient
  p.grad_accumulation = 4;
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Backward 2 of micro-batches 2..4: 255 + 111 + 30 + 33 = 429.
  EXPECT_EQ(r->peak_bytes, 429);
  p.grad_accumulation = 1;  // micro-batch 1 alone: backward_workspace_bytes
  EXPECT_EQ(Simulate(p, s)->peak_bytes, 388);
  // Absent (-1): as backward_workspace_bytes.
  p.layers[2].accumulate_workspace_bytes = -1;
  p.grad_accumulation = 4;
  EXPECT_EQ(Simulate(p, s)->peak_bytes, 399);
}

TEST(Simulator, AnInputTheLayerDoesNotKeepIsReleasedAfterItsForward) {
  Profile p = ThreeLayers();
  p.layers[2].keeps_input = false;
  const Schedule s = *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(3), {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Forward 2 peaks with x2 live (255), then releases it: 225.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 237, 255}));
  int forward2 = -1;
  for (size_t k = 0; k < s.ops.size(); ++k) {
    if (s.ops[k].kind == OpKind::kForward && s.ops[k].layer == 2) forward2 = static_cast<int>(k);
  }
  ASSERT_GE(forward2, 0);
  EXPECT_EQ(r->timeline[forward2].live_after, 225);
  // Backward 2: 225 + 30 + 3 = 258 -> 230, its free of x2 releasing
  // nothing more; backward 1: 230 + 20 = 250 -> 160.
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{258, 250, 160}));
  EXPECT_EQ(r->peak_bytes, 258);
  EXPECT_EQ(r->timeline.back().live_after, 100);
}

TEST(Simulator, ACheckpointedInputIsKeptForItsRecompute) {
  Profile p = ThreeLayers();
  p.layers[2].keeps_input = false;
  // Layer 1 checkpointed: x2 comes from a forward without grad and carries
  // no graph, so layer 2 keeps it (CheckpointedMiddleLayerTimelineByHand).
  const std::vector<LayerDecision> d = {LayerDecision::kKeep, LayerDecision::kCheckpoint,
                                        LayerDecision::kKeep};
  const Schedule s = *BuildSingleLevelSchedule(p, d, {});
  Result<SimulationResult> r = Simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 197, 215}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{248, 250, 160}));

  // Layer 2 itself run again later (its input a checkpoint): its first
  // forward is not the last one that reads x2, so x2 stays.
  std::vector<bool> keeps = {true, true, false};
  Schedule again;
  again.num_layers = 3;
  again.ops = {Op::Forward(0, SaveMode::kAll), Op::Forward(1, SaveMode::kAll),
               Op::Forward(2, SaveMode::kNone), Op::Recompute(2, SaveMode::kAll)};
  EXPECT_EQ(InputReleasingOps(again, keeps), (std::vector<bool>{false, false, false, true}));
  again.ops[3] = Op::Recompute(2, SaveMode::kNone);
  EXPECT_EQ(InputReleasingOps(again, keeps), (std::vector<bool>{false, false, false, false}));
  again.ops[2] = Op::Forward(2, SaveMode::kAll);
  again.ops.pop_back();
  EXPECT_EQ(InputReleasingOps(again, keeps), (std::vector<bool>{false, false, true}));
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
  // Forward: 160, 160 + 40 (+7) = 200 (207), 225. Backward 2: 225+30+3 = 258
  // -> 200 (x3, a2, x2 freed). Backward 1: 200 + 20 + 30 (recompute
  // workspace) = 250.
  EXPECT_EQ(Peaks(*r, s, OpKind::kForward), (std::vector<int64_t>{160, 207, 225}));
  EXPECT_EQ(Peaks(*r, s, OpKind::kBackward), (std::vector<int64_t>{258, 250, 160}));
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
