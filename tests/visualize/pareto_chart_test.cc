#include "pareto_chart.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "report_fixture.h"
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

}  // namespace
}  // namespace remat::viz
