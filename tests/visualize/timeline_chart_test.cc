#include "timeline_chart.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "remat/units.h"
#include "report_fixture.h"
#include "xml_check.h"

namespace remat::viz {
namespace {

using testing::AttrValue;
using testing::TagWith;

double AttrNumber(const std::string& tag, const std::string& name) {
  const std::string v = AttrValue(tag, name);
  EXPECT_FALSE(v.empty()) << name << " missing in " << tag;
  return std::atof(v.c_str());
}

TEST(TimelineChart, IsWellFormedSvgWithEverySeries) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const std::string svg = TimelineChart(f.plans.chosen, f.profile, nullptr);
  EXPECT_EQ(testing::XmlProblem(svg), "");
  for (const char* c :
       {"model_state", "activations", "recomputed", "activation_grads", "workspace"}) {
    const std::string path = TagWith(svg, std::string("series series-") + c + "\"");
    ASSERT_FALSE(path.empty()) << c;
    EXPECT_FALSE(AttrValue(path, "d").empty()) << c;
  }
  for (const char* label :
       {"model state", "activations kept", "recomputed", "activation grads", "workspace", "budget",
        "predicted peak", "forward", "backward", "recompute"}) {
    EXPECT_NE(svg.find(std::string(">") + label + "</text>"), std::string::npos) << label;
  }
  EXPECT_EQ(svg.find("series-measured"), std::string::npos);
}

TEST(TimelineChart, LabelsTheAxesWithUnits) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const std::string svg = TimelineChart(f.plans.chosen, f.profile, nullptr);
  // The chain's peak is a few KiB: the memory axis is labelled in KiB.
  EXPECT_NE(svg.find(">memory (KiB)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time in step (ms)</text>"), std::string::npos);
}

TEST(TimelineChart, BudgetLineAndPeakMarkerSitAtTheirValues) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const Plan& plan = f.plans.chosen;
  const std::string svg = TimelineChart(plan, f.profile, nullptr);
  const std::string frame = TagWith(svg, "class=\"frame\"");
  const double top = AttrNumber(frame, "data-plot-top");
  const double bottom = AttrNumber(frame, "data-plot-bottom");
  const double y_max = AttrNumber(frame, "data-y-max-bytes");
  ASSERT_GT(y_max, static_cast<double>(plan.predicted.peak_bytes));
  auto y_of = [&](int64_t bytes) {
    return bottom - (bottom - top) * static_cast<double>(bytes) / y_max;
  };

  const std::string budget = TagWith(svg, "class=\"budget\"");
  EXPECT_EQ(AttrValue(budget, "data-bytes"), std::to_string(plan.budget_bytes));
  EXPECT_NEAR(AttrNumber(budget, "y1"), y_of(plan.budget_bytes), 0.01);

  const std::string peak = TagWith(svg, "class=\"peak-marker\"");
  EXPECT_EQ(AttrValue(peak, "data-bytes"), std::to_string(plan.predicted.peak_bytes));
  EXPECT_NEAR(AttrNumber(peak, "cy"), y_of(plan.predicted.peak_bytes), 0.01);
  EXPECT_NE(svg.find(">peak " + FormatBytes(plan.predicted.peak_bytes) + "</text>"),
            std::string::npos);
  const Op& op = plan.schedule.ops[plan.predicted.peak_op];
  EXPECT_NE(svg.find(">op " + std::to_string(plan.predicted.peak_op) + ": " + DescribeOp(op)),
            std::string::npos);
}

TEST(TimelineChart, PeakMarkerIsAtThePeakOpsTime) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kSegment);
  const Plan& plan = f.plans.chosen;
  const std::string svg = TimelineChart(plan, f.profile, nullptr);
  const TimelinePoint& pt = plan.predicted.timeline[plan.predicted.peak_op];
  const std::string frame = TagWith(svg, "class=\"frame\"");
  // The plot spans x in [72, 1076] over [0, step_ms].
  const double expected = 72 + 1004 * (pt.start_ms + pt.end_ms) / 2 / plan.predicted.step_ms;
  EXPECT_NEAR(AttrNumber(TagWith(svg, "class=\"peak-marker\""), "cx"), expected, 0.01);
}

TEST(TimelineChart, MeasuredRunIsOverlaidWithTheErrorAtThePeak) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform, 1.1);
  const std::string svg = TimelineChart(f.plans.chosen, f.profile, &f.measured);
  EXPECT_EQ(testing::XmlProblem(svg), "");
  EXPECT_FALSE(AttrValue(TagWith(svg, "class=\"series-measured\""), "d").empty());
  const std::string marker = TagWith(svg, "class=\"measured-peak\"");
  EXPECT_EQ(AttrValue(marker, "data-bytes"), std::to_string(f.measured.peak_bytes));
  EXPECT_NE(svg.find("error at the peak +10.0%"), std::string::npos);
  EXPECT_NE(svg.find(">measured (runtime)</text>"), std::string::npos);
}

TEST(TimelineChart, NoBudgetNoBudgetLine) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.plans.chosen.budget_bytes = 0;
  const std::string svg = TimelineChart(f.plans.chosen, f.profile, nullptr);
  EXPECT_EQ(svg.find("class=\"budget\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"peak-marker\""), std::string::npos);
}

}  // namespace
}  // namespace remat::viz
