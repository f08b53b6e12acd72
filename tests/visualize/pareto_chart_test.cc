#include "pareto_chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "remat/io/units.h"
#include "report_fixture.h"
#include "scale.h"
#include "xml_check.h"

namespace remat::viz {
namespace {

TEST(ParetoChart, DrawsEachFrontierTheChosenPlanAndTheBudget) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const std::string svg = ParetoChart(f.pareto, f.plans.chosen);
  EXPECT_EQ(testing::XmlProblem(svg), "");
  int points = 0;
  for (Strategy s : f.pareto.strategies) {
    const std::vector<ParetoPoint> front = Frontier(f.pareto, s);
    if (front.empty()) continue;
    points += static_cast<int>(front.size());
    EXPECT_NE(svg.find(std::string("frontier frontier-") + ToString(s) + "\""), std::string::npos)
        << ToString(s);
  }
  // Every frontier point is drawn, coinciding ones as rings of one point.
  int drawn = 0;
  for (size_t at = svg.find("data-strategies=\""); at != std::string::npos;
       at = svg.find("data-strategies=\"", at + 1)) {
    const size_t start = at + 17;
    const std::string names = svg.substr(start, svg.find('"', start) - start);
    drawn += 1 + testing::Count(names, " ");
  }
  EXPECT_EQ(drawn, points);
  EXPECT_FALSE(testing::TagWith(svg, "class=\"chosen\"").empty());
  EXPECT_FALSE(testing::TagWith(svg, "class=\"budget\"").empty());
  EXPECT_FALSE(testing::TagWith(svg, "class=\"baseline\"").empty());
  EXPECT_NE(svg.find(">step time (ms)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">peak memory (KiB)</text>"), std::string::npos);
}

double AttrNumber(const std::string& tag, const std::string& name) {
  const std::string v = testing::AttrValue(tag, name);
  EXPECT_FALSE(v.empty()) << name << " missing in " << tag;
  return std::atof(v.c_str());
}

// The largest peak the chart plots: frontier points and the chosen plan.
double LargestPeak(const testing::ReportFixture& f) {
  double peak = static_cast<double>(f.plans.chosen.predicted.peak_bytes);
  for (Strategy s : f.pareto.strategies) {
    for (const ParetoPoint& p : Frontier(f.pareto, s))
      peak = std::max(peak, static_cast<double>(p.peak_bytes));
  }
  return peak;
}

// The memory axis: pixel x of a byte count.
struct XAxis {
  double left, right, lo, hi;
  explicit XAxis(const std::string& svg) {
    const std::string frame = testing::TagWith(svg, "class=\"frame\"");
    left = AttrNumber(frame, "data-plot-left");
    right = AttrNumber(frame, "data-plot-right");
    lo = AttrNumber(frame, "data-x-min-bytes");
    hi = AttrNumber(frame, "data-x-max-bytes");
  }
  double operator()(double bytes) const { return left + (right - left) * (bytes - lo) / (hi - lo); }
};

TEST(ParetoChart, AxisFollowsTheDataNotABudgetFarAboveIt) {
  testing::ReportFixture f = testing::MakeReportFixture();
  const double largest = LargestPeak(f);
  f.plans.chosen.budget_bytes = static_cast<int64_t>(400 * largest);
  const std::string svg = ParetoChart(f.pareto, f.plans.chosen);
  EXPECT_EQ(testing::XmlProblem(svg), "");
  const XAxis x(svg);
  EXPECT_GE(x.hi, largest);
  EXPECT_LE(x.hi, 1.5 * largest);
  // The points spread over the plot rather than crowding its left edge.
  const std::string points = svg.substr(svg.find("class=\"points\""));
  double min_cx = x.right, max_cx = x.left;
  for (size_t at = points.find("<circle cx=\""); at != std::string::npos;
       at = points.find("<circle cx=\"", at + 1)) {
    const double cx = std::atof(points.c_str() + at + 12);
    min_cx = std::min(min_cx, cx);
    max_cx = std::max(max_cx, cx);
  }
  EXPECT_GT(max_cx - min_cx, 0.5 * (x.right - x.left));
  EXPECT_EQ(svg.find("class=\"budget\""), std::string::npos);
  const std::string mark = testing::TagWith(svg, "class=\"budget-off-scale\"");
  EXPECT_EQ(testing::AttrValue(mark, "data-bytes"), std::to_string(f.plans.chosen.budget_bytes));
  EXPECT_NE(
      svg.find(">budget " + FormatBytes(f.plans.chosen.budget_bytes) + " → (off scale)</text>"),
      std::string::npos);
}

TEST(ParetoChart, BudgetWithinRangeIsALineAtItsValue) {
  testing::ReportFixture f = testing::MakeReportFixture();
  const double largest = LargestPeak(f);
  for (double ratio : {0.7, 1.2, kOffScaleRatio}) {
    f.plans.chosen.budget_bytes = static_cast<int64_t>(ratio * largest);
    const std::string svg = ParetoChart(f.pareto, f.plans.chosen);
    const XAxis x(svg);
    const std::string budget = testing::TagWith(svg, "class=\"budget\"");
    ASSERT_FALSE(budget.empty()) << ratio;
    EXPECT_EQ(testing::AttrValue(budget, "data-bytes"),
              std::to_string(f.plans.chosen.budget_bytes));
    EXPECT_NEAR(AttrNumber(budget, "x1"), x(static_cast<double>(f.plans.chosen.budget_bytes)), 0.01)
        << ratio;
    EXPECT_LE(x.lo, static_cast<double>(f.plans.chosen.budget_bytes)) << ratio;
    EXPECT_GE(x.hi, static_cast<double>(f.plans.chosen.budget_bytes)) << ratio;
    EXPECT_EQ(svg.find("budget-off-scale"), std::string::npos) << ratio;
  }
}

TEST(ParetoChart, ChosenPlanIsNamedWithItsSetting) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform);
  ASSERT_FALSE(f.plans.chosen.parameter.empty());
  const std::string svg = ParetoChart(f.pareto, f.plans.chosen);
  EXPECT_NE(svg.find(">chosen: uniform (" + f.plans.chosen.parameter + ")</text>"),
            std::string::npos);
}

}  // namespace
}  // namespace remat::viz
