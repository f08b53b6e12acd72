#include "timeline_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "remat/io/units.h"
#include "report_fixture.h"
#include "scale.h"
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

// The y coordinates of a path's points ("M10 20L30 40Z").
std::vector<double> PathYs(const std::string& d) {
  std::string numbers = d;
  for (char& c : numbers) c = (c == 'M' || c == 'L' || c == 'Z') ? ' ' : c;
  std::istringstream in(numbers);
  std::vector<double> ys;
  for (double x, y; in >> x >> y;) ys.push_back(y);
  return ys;
}

// A plan whose budget is `ratio` times its predicted peak.
Plan WithBudgetTimesPeak(const testing::ReportFixture& f, double ratio) {
  Plan plan = f.plans.chosen;
  plan.budget_bytes = static_cast<int64_t>(static_cast<double>(plan.predicted.peak_bytes) * ratio);
  return plan;
}

TEST(TimelineChart, IsWellFormedSvgWithEverySeries) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const std::string svg = TimelineChart(WithBudgetTimesPeak(f, 1.25), f.profile, nullptr);
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
  const Plan plan = WithBudgetTimesPeak(f, 1.25);
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

TEST(TimelineChart, AxisFollowsTheDataNotABudgetFarAboveIt) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const Plan plan = WithBudgetTimesPeak(f, 400);
  const std::string svg = TimelineChart(plan, f.profile, nullptr);
  EXPECT_EQ(testing::XmlProblem(svg), "");
  const std::string frame = TagWith(svg, "class=\"frame\"");
  const double top = AttrNumber(frame, "data-plot-top");
  const double bottom = AttrNumber(frame, "data-plot-bottom");
  const double peak = static_cast<double>(plan.predicted.peak_bytes);
  const double y_max = AttrNumber(frame, "data-y-max-bytes");
  EXPECT_GT(y_max, peak);
  EXPECT_LE(y_max, 2 * peak);  // nice ticks over the peak and 12% headroom
  // The series are not flat: the stack's top reaches the upper part of the plot.
  double highest = bottom;
  for (const char* c :
       {"model_state", "activations", "recomputed", "activation_grads", "workspace"}) {
    for (double y : PathYs(AttrValue(TagWith(svg, std::string("series series-") + c + "\""), "d")))
      highest = std::min(highest, y);
  }
  EXPECT_LT(highest, top + 0.4 * (bottom - top));
  // The budget is not drawn at its position but marked off scale, with its value.
  EXPECT_EQ(svg.find("class=\"budget\""), std::string::npos);
  EXPECT_EQ(svg.find("over-budget"), std::string::npos);
  const std::string mark = TagWith(svg, "class=\"budget-off-scale\"");
  EXPECT_EQ(AttrValue(mark, "data-bytes"), std::to_string(plan.budget_bytes));
  EXPECT_NE(svg.find(">budget " + FormatBytes(plan.budget_bytes) + " ↑ (off scale)</text>"),
            std::string::npos);
}

TEST(TimelineChart, BudgetWithinRangeIsALineAtItsValue) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  for (double ratio : {0.6, 1.2, kOffScaleRatio}) {
    const Plan plan = WithBudgetTimesPeak(f, ratio);
    const std::string svg = TimelineChart(plan, f.profile, nullptr);
    const std::string frame = TagWith(svg, "class=\"frame\"");
    const double top = AttrNumber(frame, "data-plot-top");
    const double bottom = AttrNumber(frame, "data-plot-bottom");
    const double y_max = AttrNumber(frame, "data-y-max-bytes");
    EXPECT_GT(y_max, static_cast<double>(plan.budget_bytes)) << ratio;
    const std::string budget = TagWith(svg, "class=\"budget\"");
    ASSERT_FALSE(budget.empty()) << ratio;
    EXPECT_NEAR(AttrNumber(budget, "y1"),
                bottom - (bottom - top) * static_cast<double>(plan.budget_bytes) / y_max, 0.01)
        << ratio;
    EXPECT_EQ(svg.find("budget-off-scale"), std::string::npos) << ratio;
  }
}

TEST(TimelineChart, MeasuredPeakCountsAsData) {
  // A run measured far above the prediction keeps a budget above the
  // prediction on scale, and stays inside the plot.
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform, 2.0);
  const Plan plan = WithBudgetTimesPeak(f, 2.5);
  const std::string svg = TimelineChart(plan, f.profile, &f.measured);
  const double y_max = AttrNumber(TagWith(svg, "class=\"frame\""), "data-y-max-bytes");
  EXPECT_GT(y_max, static_cast<double>(plan.budget_bytes));
  EXPECT_FALSE(TagWith(svg, "class=\"budget\"").empty());
  // Without the run, the same budget is off scale.
  EXPECT_NE(TimelineChart(plan, f.profile, nullptr).find("budget-off-scale"), std::string::npos);
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
