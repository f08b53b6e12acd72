// A planned transformer chain and the ReportData around it, for the
// visualize tests; and a fake measured run.
#ifndef REMAT_TESTS_VISUALIZE_REPORT_FIXTURE_H_
#define REMAT_TESTS_VISUALIZE_REPORT_FIXTURE_H_

#include <gtest/gtest.h>

#include <string>

#include "remat/planning/pareto.h"
#include "remat/strategies/strategies.h"
#include "remat/visualize.h"
#include "testing/chains.h"

namespace remat::testing {

struct ReportFixture {
  Profile profile;
  PlanSet plans;
  ReportContext context;
  ParetoCurve pareto;
  TrainResult measured;

  ReportData Data(bool with_measured = false, bool with_pareto = true) const {
    ReportData d;
    d.plans = &plans;
    d.profile = &profile;
    d.context = &context;
    d.pareto = with_pareto ? &pareto : nullptr;
    d.measured = with_measured ? &measured : nullptr;
    d.command = "planner --budget 5KB test.json";
    return d;
  }
};

// An 8-block chain planned with `strategy` under a budget at 60% of the
// peak without checkpointing (so plans recompute). The fake measured run
// reports every op's memory `measured_scale` times the prediction.
inline ReportFixture MakeReportFixture(Strategy strategy = Strategy::kUniform,
                                       double measured_scale = 1.1) {
  ReportFixture f;
  f.profile = TransformerChain(8);
  f.context.input_path = "test.json";
  f.context.input_kind = "profile";
  PlanOptions none;
  none.strategy = Strategy::kNone;
  const int64_t none_peak = MakePlan(f.profile, none)->chosen.predicted.peak_bytes;
  PlanOptions o;
  o.strategy = strategy;
  o.budget_bytes = none_peak * 6 / 10;
  Result<PlanSet> plans = MakePlan(f.profile, o);
  EXPECT_TRUE(plans.ok()) << plans.status().message();
  f.plans = *plans;
  ParetoOptions po;
  po.points = 5;
  Result<ParetoCurve> curve = ParetoSweep(f.profile, po);
  EXPECT_TRUE(curve.ok()) << curve.status().message();
  f.pareto = *curve;
  const SimulationResult& r = f.plans.chosen.predicted;
  f.measured.device = "fake";
  for (const TimelinePoint& pt : r.timeline) {
    OpSample s;
    s.op_index = pt.op_index;
    s.ms = (pt.end_ms - pt.start_ms) * 1.5;
    s.live_before = static_cast<int64_t>(static_cast<double>(pt.live_before) * measured_scale);
    s.peak = static_cast<int64_t>(static_cast<double>(pt.peak) * measured_scale);
    s.live_after = static_cast<int64_t>(static_cast<double>(pt.live_after) * measured_scale);
    f.measured.ops.push_back(s);
    f.measured.peak_bytes = std::max(f.measured.peak_bytes, s.peak);
  }
  f.measured.step_ms = r.step_ms * 1.5;
  f.measured.recompute_ms = r.recompute_ms * 1.5;
  return f;
}

}  // namespace remat::testing

#endif  // REMAT_TESTS_VISUALIZE_REPORT_FIXTURE_H_
