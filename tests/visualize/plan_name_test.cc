// Every renderer names a plan with its setting (Plan::parameter).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "palette.h"
#include "remat/visualize.h"
#include "report_fixture.h"

namespace remat {
namespace {

// The chosen plan alone, as `planner train --plan` rebuilds its PlanSet from
// a plan file (not chosen by auto, itself the only candidate).
testing::ReportFixture FromPlanFile(const std::string& parameter) {
  testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform);
  f.plans.chosen.parameter = parameter;
  f.plans.auto_selected = false;
  f.plans.candidates = {f.plans.chosen};
  return f;
}

TEST(PlanName, IsTheStrategyAndItsSetting) {
  EXPECT_EQ(viz::PlanName(Strategy::kUniform, "every 2"), "uniform (every 2)");
  EXPECT_EQ(viz::PlanName(Strategy::kNone, ""), "none");
}

TEST(PlanName, HtmlTitleHeaderAndStrategyTableShowTheSetting) {
  const testing::ReportFixture f = FromPlanFile("every 2");
  const std::string html = *RenderHtmlReport(f.Data());
  EXPECT_NE(html.find("<title>remat: " + f.profile.model + " (uniform (every 2), "),
            std::string::npos);
  EXPECT_NE(html.find("Plan: <strong>uniform (every 2)</strong>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"chosen\"><td class=\"nowrap\">uniform (chosen)</td>"
                      "<td class=\"nowrap\">every 2</td>"),
            std::string::npos);
  EXPECT_EQ(html.find("<td class=\"nowrap\">-</td>"), std::string::npos);
  EXPECT_NE(html.find(">chosen: uniform (every 2)</text>"), std::string::npos);  // Pareto chart
}

TEST(PlanName, EveryCandidatesSettingIsInTheTable) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kAuto);
  const std::string html = *RenderHtmlReport(f.Data());
  for (const Plan& c : f.plans.candidates) {
    const std::string cell =
        "<td class=\"nowrap\">" + (c.parameter.empty() ? "-" : c.parameter) + "</td>";
    EXPECT_NE(html.find(cell), std::string::npos) << ToString(c.strategy);
  }
}

TEST(PlanName, MarkdownShowsTheSetting) {
  const testing::ReportFixture f = FromPlanFile("every 2");
  const std::string md = *RenderMarkdown(f.Data());
  EXPECT_EQ(md.rfind("### remat plan for " + f.profile.model + ": uniform (every 2), ", 0), 0u)
      << md;
  EXPECT_NE(md.find("| **uniform** (chosen) | every 2 |"), std::string::npos) << md;
}

TEST(PlanName, TraceNamesThePlanWithItsSetting) {
  const testing::ReportFixture f = FromPlanFile("every 2");
  const nlohmann::json t = nlohmann::json::parse(*RenderChromeTrace(f.Data()));
  EXPECT_EQ(t["otherData"]["plan"], "uniform (every 2)");
  EXPECT_EQ(t["otherData"]["parameter"], "every 2");
  bool named = false;
  for (const auto& e : t["traceEvents"]) {
    named |= e["ph"] == "M" && e["pid"] == 1 && e["name"] == "process_name" &&
             e["args"]["name"] == "predicted: " + f.profile.model + ", uniform (every 2)";
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace remat
