#include "layer_rows.h"

#include <gtest/gtest.h>

#include "report_fixture.h"

namespace remat::viz {
namespace {

TEST(LayerRows, WithoutCheckpointingEveryLayerKeepsItsActivations) {
  const Profile p = testing::TransformerChain(6);
  PlanOptions o;
  o.strategy = Strategy::kNone;
  const PlanSet plans = *MakePlan(p, o);
  const std::vector<LayerRow> rows = LayerRows(plans.chosen, p);
  ASSERT_EQ(rows.size(), p.layers.size());
  for (const LayerRow& r : rows) {
    EXPECT_EQ(r.decision, LayerDecision::kKeep);
    EXPECT_EQ(r.kept_bytes, p.layers[r.index].activation_bytes) << r.name;
    EXPECT_EQ(r.recomputed_bytes, 0) << r.name;
    EXPECT_EQ(r.recompute_ms, 0) << r.name;
    EXPECT_EQ(r.forward_ms, p.layers[r.index].forward_ms);
    EXPECT_EQ(r.backward_ms, p.layers[r.index].backward_ms);
  }
}

TEST(LayerRows, TimesAddUpToTheSimulatedStep) {
  for (Strategy s : {Strategy::kUniform, Strategy::kSegment, Strategy::kSelective}) {
    const testing::ReportFixture f = testing::MakeReportFixture(s);
    const SimulationResult& r = f.plans.chosen.predicted;
    double fwd = 0, bwd = 0, rec = 0;
    bool recomputes = false;
    for (const LayerRow& row : LayerRows(f.plans.chosen, f.profile)) {
      fwd += row.forward_ms;
      bwd += row.backward_ms;
      rec += row.recompute_ms;
      recomputes |= row.recomputed_bytes > 0;
      EXPECT_EQ(row.at_peak_bytes, r.layer_bytes_at_peak[row.index]);
    }
    EXPECT_NEAR(fwd, r.forward_ms, 1e-9) << ToString(s);
    EXPECT_NEAR(bwd, r.backward_ms, 1e-9) << ToString(s);
    EXPECT_NEAR(rec, r.recompute_ms, 1e-9) << ToString(s);
    EXPECT_GT(r.recompute_ms, 0) << ToString(s);
    EXPECT_TRUE(recomputes) << ToString(s);
  }
}

TEST(LayerRows, CheckpointedLayersKeepLessThanTheirActivations) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform);
  for (const LayerRow& row : LayerRows(f.plans.chosen, f.profile)) {
    if (row.decision == LayerDecision::kCheckpoint || row.decision == LayerDecision::kRecompute) {
      EXPECT_LT(row.kept_bytes, f.profile.layers[row.index].activation_bytes) << row.name;
      EXPECT_GE(row.recomputed_bytes, f.profile.layers[row.index].output_bytes) << row.name;
    }
  }
}

}  // namespace
}  // namespace remat::viz
