#include <gtest/gtest.h>

#include "remat/io/units.h"
#include "remat/visualize.h"
#include "report_fixture.h"
#include "xml_check.h"

namespace remat {
namespace {

TEST(Markdown, ContainsTheSummaryNumbers) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  Result<std::string> md = RenderMarkdown(f.Data());
  ASSERT_TRUE(md.ok()) << md.status().message();
  const Plan& plan = f.plans.chosen;
  const SimulationResult& r = plan.predicted;
  EXPECT_EQ(md->rfind("### remat plan for " + f.profile.model, 0), 0u);
  for (const std::string& s :
       {FormatBytes(r.peak_bytes) + " of " + FormatBytes(plan.budget_bytes) + " budget",
        "| step time | " + FormatMillis(r.step_ms) + " (recompute " + FormatMillis(r.recompute_ms),
        "| **total** | **" + FormatBytes(r.peak_bytes) + "** |",
        "| workspace | " + FormatBytes(r.at_peak[MemoryCategory::kWorkspace]) + " |",
        "| budget | " + FormatBytes(plan.budget_bytes), std::string("**FITS**")}) {
    EXPECT_NE(md->find(s), std::string::npos) << s << "\n" << *md;
  }
  for (const Plan& c : f.plans.candidates) {
    EXPECT_NE(md->find("| " + FormatBytes(c.predicted.peak_bytes) + " | " +
                       FormatMillis(c.predicted.step_ms) + " |"),
              std::string::npos)
        << ToString(c.strategy);
  }
  // One table row per layer in the collapsed section, after its header row.
  const size_t layers =
      md->find("<summary>Layers (" + std::to_string(f.profile.num_layers()) + ")");
  ASSERT_NE(layers, std::string::npos);
  const std::string section = md->substr(layers, md->find("</details>", layers) - layers);
  EXPECT_EQ(testing::Count(section, "\n| "), f.profile.num_layers() + 1);
  EXPECT_EQ(md->find("Predicted vs measured"), std::string::npos);
}

TEST(Markdown, MeasuredRunAddsItsErrors) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform, 1.1);
  const std::string md = *RenderMarkdown(f.Data(true));
  EXPECT_NE(md.find("**Predicted vs measured** (fake)"), std::string::npos);
  EXPECT_NE(md.find("| peak memory | " + FormatBytes(f.plans.chosen.predicted.peak_bytes) + " | " +
                    FormatBytes(f.measured.peak_bytes) + " | +10.0% |"),
            std::string::npos)
      << md;
}

TEST(Markdown, PipesInNamesDoNotBreakTables) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.profile.layers[2].name = "a|b";
  const std::string md = *RenderMarkdown(f.Data());
  EXPECT_NE(md.find("a\\|b"), std::string::npos);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// The step's buffers (StaticMemory::buffer_bytes) are a row of their own
// in the memory at the peak and named beside the model state, so that the
// rows add up to the peak as in the text report.
TEST(Markdown, TheStepsBuffersAreARowOfTheirOwn) {
  testing::ReportFixture f = testing::MakeReportFixture();
  f.profile.static_memory.buffer_bytes = int64_t{1} << 20;
  PlanOptions o;
  o.strategy = Strategy::kUniform;
  f.plans = MakePlan(f.profile, o).value();
  Result<std::string> md = RenderMarkdown(f.Data());
  ASSERT_TRUE(md.ok()) << md.status().message();
  EXPECT_NE(md->find("| buffers | 1.00 MiB |"), std::string::npos) << *md;
  EXPECT_NE(md->find(" + buffers 1.00 MiB)"), std::string::npos) << *md;
}

}  // namespace
}  // namespace remat
