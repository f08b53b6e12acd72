// The overlapped host link in the simulator (HostLink::overlapped): each
// direction a serial queue beside the compute clock, an offload's device
// bytes held until its copy ends, a reader waiting for its prefetch. The
// timelines below are worked out by hand.
#include <gtest/gtest.h>

#include "remat/plan/plan.h"
#include "remat/simulate/simulator.h"

namespace remat {
namespace {

// Four equal layers (x = 100 bytes, 400 more kept with grad), forward 1 ms,
// backward 2 ms, every layer checkpointed. The compute clock:
//   F0 0-1  F1 1-2  F2 2-3  F3 3-4  R3 4-5  B3 5-7  R2 7-8  B2 8-10
//   R1 10-11  B1 11-13  R0 13-14  B0 14-16: a 16 ms step.
Profile FourLayers(double copy_ms_per_100_bytes) {
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
  // CopyMs(100) = 100 / (gb_per_s * 1e6).
  p.host_link = HostLink{"test", 100 / (copy_ms_per_100_bytes * 1e6), 0, true};
  return p;
}

Schedule Offloaded(const Profile& p, const std::vector<int>& xs, int lead) {
  const Schedule base =
      *BuildSingleLevelSchedule(p, std::vector<LayerDecision>(4, LayerDecision::kCheckpoint), {});
  return *InsertOffloads(base, xs, lead);
}

// The timeline point of the compute op `kind` of `layer`.
const TimelinePoint& At(const SimulationResult& r, const Schedule& s, OpKind kind, int layer) {
  for (const TimelinePoint& pt : r.timeline) {
    const Op& op = s.ops[pt.op_index];
    if (op.kind == kind && op.layer == layer) return pt;
  }
  ADD_FAILURE() << "no such op";
  return r.timeline.front();
}

TEST(OffloadLink, ACopyHiddenBehindComputeCostsNothing) {
  const Profile p = FourLayers(0.5);
  const Schedule base = Offloaded(p, {}, 0);
  const Schedule s = Offloaded(p, {1, 2}, 1);
  const SimulationResult b = *Simulate(p, base);
  const SimulationResult r = *Simulate(p, s);
  EXPECT_DOUBLE_EQ(b.step_ms, 16);
  // x1 leaves 2-2.5, x2 3-3.5; x2 comes back before B3 (5-5.5), x1 before
  // B2 (8-8.5): every reader finds its tensor there.
  EXPECT_DOUBLE_EQ(r.transfer_ms, 0);
  EXPECT_DOUBLE_EQ(r.step_ms, 16);
  EXPECT_NEAR(r.link_busy_ms, 2.0, 1e-9);
  EXPECT_EQ(r.offloaded_bytes, 200);
  EXPECT_EQ(r.host_peak_bytes, 200);
  // x1's device bytes are released at F3 (the first op starting after
  // 2.5 ms: F2 starts at 2), x2's at R3; x2 is back for R2, both for R1.
  EXPECT_EQ(At(r, s, OpKind::kForward, 2).live_before,
            At(b, base, OpKind::kForward, 2).live_before);
  EXPECT_EQ(At(r, s, OpKind::kForward, 3).live_before,
            At(b, base, OpKind::kForward, 3).live_before - 100);
  EXPECT_EQ(At(r, s, OpKind::kRecompute, 3).live_before,
            At(b, base, OpKind::kRecompute, 3).live_before - 200);
  EXPECT_EQ(At(r, s, OpKind::kRecompute, 2).live_before,
            At(b, base, OpKind::kRecompute, 2).live_before - 100);
  EXPECT_EQ(At(r, s, OpKind::kRecompute, 1).live_before,
            At(b, base, OpKind::kRecompute, 1).live_before);
  EXPECT_EQ(r.timeline.back().live_after, 1000);
}

TEST(OffloadLink, ASlowLinkStallsTheReaderByTheDifference) {
  // 2.5 ms a copy. x1 leaves 2-4.5; its prefetch, issued before B2 at 8,
  // ends at 10.5, so R1 (due at 10) waits 0.5 ms: 2.5 ms of copy less the
  // 2 ms of B2 it hides behind.
  const Profile p = FourLayers(2.5);
  const Schedule s = Offloaded(p, {1}, 1);
  const SimulationResult r = *Simulate(p, s);
  EXPECT_NEAR(r.transfer_ms, 0.5, 1e-9);
  EXPECT_NEAR(r.step_ms, 16.5, 1e-9);
  EXPECT_NEAR(r.link_busy_ms, 5, 1e-9);
  EXPECT_NEAR(At(r, s, OpKind::kRecompute, 1).start_ms, 10.5, 1e-9);
  EXPECT_NEAR(At(r, s, OpKind::kBackward, 0).end_ms, 16.5, 1e-9);
  // Issued right before its reader (lead 0), nothing hides it: 2.5 ms.
  const Schedule late = Offloaded(p, {1}, 0);
  EXPECT_NEAR(Simulate(p, late)->transfer_ms, 2.5, 1e-9);
}

TEST(OffloadLink, OnlyTheTensorsReadersWaitForItsPrefetch) {
  // 2.5 ms a copy: x1 comes back 8-10.5, beside B2 (8-10), which does not
  // read it and starts on time; R1 reads it and waits for its end. With
  // the queue idle again, B1 and R0 start as their inputs are there.
  const Profile p = FourLayers(2.5);
  const Schedule s = Offloaded(p, {1}, 1);
  const SimulationResult r = *Simulate(p, s);
  EXPECT_NEAR(At(r, s, OpKind::kBackward, 2).start_ms, 8, 1e-9);
  EXPECT_NEAR(At(r, s, OpKind::kRecompute, 1).start_ms, 10.5, 1e-9);
  EXPECT_NEAR(At(r, s, OpKind::kBackward, 1).start_ms, 11.5, 1e-9);
  EXPECT_NEAR(At(r, s, OpKind::kRecompute, 0).start_ms, 13.5, 1e-9);
}

TEST(OffloadLink, TwoOffloadsQueue) {
  // 4 ms a copy. x1 leaves 2-6; x2, issued at 3, waits for the queue:
  // 6-10. Its prefetch (before R2, at 7) waits for it: 10-14, so R2 starts
  // at 14 (7 ms stall; 4 ms if the copies did not queue). Then B2 15-17,
  // x1 back 17-21, R1 at 21 (4 ms more): the step ends at 27.
  const Profile p = FourLayers(4);
  const Schedule base = Offloaded(p, {}, 0);
  const Schedule s = Offloaded(p, {1, 2}, 0);
  const SimulationResult b = *Simulate(p, base);
  const SimulationResult r = *Simulate(p, s);
  EXPECT_NEAR(At(r, s, OpKind::kRecompute, 2).start_ms, 14, 1e-9);
  EXPECT_NEAR(At(r, s, OpKind::kRecompute, 1).start_ms, 21, 1e-9);
  EXPECT_NEAR(r.transfer_ms, 11, 1e-9);
  EXPECT_NEAR(r.step_ms, 27, 1e-9);
  EXPECT_NEAR(r.link_busy_ms, 16, 1e-9);
  EXPECT_EQ(r.host_peak_bytes, 200);
  // At B3 (5 ms) x1's copy is still running: its device bytes are held.
  EXPECT_EQ(At(r, s, OpKind::kBackward, 3).live_before,
            At(b, base, OpKind::kBackward, 3).live_before);
  // The in-line link puts every copy on the clock: 4 copies of 4 ms.
  Profile inline_link = p;
  inline_link.host_link.overlapped = false;
  EXPECT_NEAR(Simulate(inline_link, s)->transfer_ms, 16, 1e-9);
}

}  // namespace
}  // namespace remat
