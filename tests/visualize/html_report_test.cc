#include <gtest/gtest.h>

#include "remat/report/report.h"
#include "remat/io/units.h"
#include "remat/visualize.h"
#include "report_fixture.h"
#include "xml_check.h"

namespace remat {
namespace {

using testing::Count;

TEST(HtmlReport, IsOnePageWithItsChartsAndNoNetwork) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  Result<std::string> html = RenderHtmlReport(f.Data());
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_EQ(html->rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html->find("<style>"), std::string::npos);
  EXPECT_EQ(html->find("<script"), std::string::npos);
  EXPECT_EQ(html->find("<link"), std::string::npos);
  EXPECT_EQ(html->find("src="), std::string::npos);
  // The only URL is the SVG namespace name, one per chart.
  const std::vector<std::string> svgs = testing::SvgFragments(*html);
  ASSERT_EQ(svgs.size(), 3u);
  EXPECT_EQ(Count(*html, "http"), 3);
  EXPECT_EQ(Count(*html, "xmlns=\"http://www.w3.org/2000/svg\""), 3);
  for (const std::string& svg : svgs) EXPECT_EQ(testing::XmlProblem(svg), "") << svg.substr(0, 80);
  for (const char* id : {"id=\"memory-timeline\"", "id=\"layer-bars\"", "id=\"pareto\""}) {
    EXPECT_NE(html->find(id), std::string::npos) << id;
  }
}

TEST(HtmlReport, ParetoChartOnlyWithASweep) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  Result<std::string> html = RenderHtmlReport(f.Data(false, false));
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(testing::SvgFragments(*html).size(), 2u);
  EXPECT_EQ(html->find("id=\"pareto\""), std::string::npos);
}

TEST(HtmlReport, SummaryShowsTheTerminalReportsNumbers) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const std::string html = *RenderHtmlReport(f.Data());
  const std::string text = FormatPlanText(f.plans, f.profile, f.context);
  const SimulationResult& r = f.plans.chosen.predicted;
  for (const std::string& figure :
       {FormatBytes(r.peak_bytes), FormatBytes(f.plans.chosen.budget_bytes),
        FormatMillis(r.step_ms), FormatMillis(r.recompute_ms), FormatBytes(r.activation_peak_bytes),
        FormatBytes(r.at_peak[MemoryCategory::kWorkspace]),
        FormatBytes(f.plans.baseline.predicted.peak_bytes)}) {
    EXPECT_NE(text.find(figure), std::string::npos) << figure;
    EXPECT_NE(html.find(figure), std::string::npos) << figure;
  }
  for (const Plan& c : f.plans.candidates) {
    EXPECT_NE(html.find(FormatMillis(c.predicted.step_ms)), std::string::npos)
        << ToString(c.strategy);
  }
  // The terminal's plan lines, verbatim.
  for (const char* line : {"of ", " budget (", "over no checkpointing"}) {
    EXPECT_NE(html.find(line), std::string::npos) << line;
  }
}

TEST(HtmlReport, ShowsTheInputs) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.context.has_config = true;
  f.context.config.name = "tiny";
  f.context.config.layers = 8;
  f.context.config.micro_batch = 4;
  f.context.config.seq_len = 128;
  f.context.config.grad_accumulation = 8;
  f.context.config.precision = Precision::kAmpBf16;
  const std::string html = *RenderHtmlReport(f.Data());
  for (const char* s : {">precision<", ">amp_bf16<", ">micro-batch<", "4 x 128 tokens",
                        ">accumulation<", "8 micro-batches per step", ">budget<", ">input<"}) {
    EXPECT_NE(html.find(s), std::string::npos) << s;
  }
}

TEST(HtmlReport, MeasuredRunAddsAComparison) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform, 1.1);
  const std::string html = *RenderHtmlReport(f.Data(true));
  EXPECT_NE(html.find("Predicted vs measured"), std::string::npos);
  EXPECT_NE(html.find("series-measured"), std::string::npos);
  EXPECT_NE(html.find(FormatBytes(f.measured.peak_bytes)), std::string::npos);
  EXPECT_NE(html.find("+50.0%"), std::string::npos);  // step time 1.5x
}

TEST(HtmlReport, EscapesNames) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.profile.model = "<b>&model";
  f.profile.layers[1].name = "x<y";
  const std::string html = *RenderHtmlReport(f.Data());
  EXPECT_EQ(html.find("<b>&model"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;model"), std::string::npos);
  EXPECT_EQ(html.find("x<y"), std::string::npos);
  for (const std::string& svg : testing::SvgFragments(html))
    EXPECT_EQ(testing::XmlProblem(svg), "");
}

TEST(HtmlReport, SaysWhenNothingFits) {
  testing::ReportFixture f = testing::MakeReportFixture();
  PlanOptions o;  // auto, under a budget nothing reaches
  o.budget_bytes = f.profile.static_bytes();
  f.plans = *MakePlan(f.profile, o);
  ASSERT_FALSE(f.plans.chosen.fits);
  const std::string html = *RenderHtmlReport(f.Data());
  EXPECT_NE(html.find("DOES NOT FIT"), std::string::npos);
  EXPECT_NE(html.find(": nothing fits, this is the plan with the lowest peak"), std::string::npos);
  EXPECT_NE(FormatPlanText(f.plans, f.profile, f.context)
                .find(": nothing fits, this is the plan with the lowest peak"),
            std::string::npos);
}

TEST(HtmlReport, NoCheckpointingHasNoOverhead) {
  testing::ReportFixture f = testing::MakeReportFixture(Strategy::kNone);
  // A simulated step a rounding error faster than the profile's sum.
  f.plans.chosen.predicted.step_ms = BaselineStepMs(f.profile) * (1 - 1e-12);
  const std::string html = *RenderHtmlReport(f.Data());
  EXPECT_NE(html.find("+0.0% over no checkpointing"), std::string::npos);
  EXPECT_EQ(html.find("+-"), std::string::npos);
}

TEST(HtmlReport, BudgetFarAboveTheDataIsMarkedOffScale) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.plans.chosen.budget_bytes = 400 * f.plans.baseline.predicted.peak_bytes;
  const std::string html = *RenderHtmlReport(f.Data());
  // On the timeline and on the Pareto chart, and the caption says so.
  EXPECT_EQ(Count(html, "class=\"budget-off-scale\""), 2);
  EXPECT_EQ(html.find("class=\"budget\""), std::string::npos);
  EXPECT_NE(html.find("The budget, " + FormatBytes(f.plans.chosen.budget_bytes) +
                      ", is far above every value shown"),
            std::string::npos);
  EXPECT_EQ(html.find("The dashed red line is the budget"), std::string::npos);
}

TEST(CheckReportData, RejectsRunsOfAnotherSchedule) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.measured.ops.push_back({static_cast<int>(f.plans.chosen.schedule.ops.size()), 1, 0, 0, 0});
  Result<std::string> html = RenderHtmlReport(f.Data(true));
  ASSERT_FALSE(html.ok());
  EXPECT_EQ(html.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(html.status().message().find("was the run made with this plan?"), std::string::npos);
  EXPECT_FALSE(RenderChromeTrace(f.Data(true)).ok());
  EXPECT_FALSE(RenderMarkdown(f.Data(true)).ok());
}

TEST(CheckReportData, NeedsThePlanAndProfile) {
  ReportData empty;
  EXPECT_FALSE(CheckReportData(empty).ok());
  testing::ReportFixture f = testing::MakeReportFixture();
  Profile other = testing::TransformerChain(3);
  ReportData d = f.Data();
  d.profile = &other;
  EXPECT_FALSE(CheckReportData(d).ok());
}

}  // namespace
}  // namespace remat
