// planner --format md|json|text, --report, --trace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

TEST(ReportFlags, FormatMarkdownPrintsTheSummary) {
  const Captured c = RunCli({"--budget", "24GB", "--chunked-loss", "0", "--format", "md", kExample});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out.rfind("### remat plan for gpt2-small", 0), 0u) << c.out;
  EXPECT_NE(c.out.find("| predicted peak | 22.33 GiB of 22.35 GiB budget (99.9%)"),
            std::string::npos);
}

TEST(ReportFlags, JsonIsAnAliasOfFormatJson) {
  const Captured a = RunCli({"--budget", "24GB", "--json", kExample});
  const Captured b = RunCli({"--budget", "24GB", "--format", "json", kExample});
  EXPECT_EQ(a.code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_TRUE(nlohmann::json::accept(a.out));
}

TEST(ReportFlags, BadFormatIsRejectedAndNothingIsWritten) {
  const ScratchDir dir;
  const std::string html = dir.Path("bad.html");
  const Captured c = RunCli({"--budget", "24GB", "--format", "xml", "--report", html, kExample});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("expected text, json or md, got 'xml'"), std::string::npos) << c.err;
  EXPECT_FALSE(Exists(html));
  const Captured d = RunCli({"--budget", "24GB", "--json", "--format", "md", kExample});
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.err.find("--json is --format json"), std::string::npos) << d.err;
  const Captured e = RunCli({"--budget", "24GB", "--pareto-points", "1", "--report", html, kExample});
  EXPECT_EQ(e.code, 2);
  EXPECT_FALSE(Exists(html));
}

TEST(ReportFlags, WritesTheReportAndTheTrace) {
  const ScratchDir dir;
  const std::string html = dir.Path("ok.html"), trace = dir.Path("ok.json");
  const Captured c = RunCli({"--budget", "24GB", "--report", html, "--trace", trace, kExample});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("Without checkpointing"), std::string::npos);  // text still printed
  const std::string page = ReadAll(html);
  EXPECT_NE(page.find("id=\"memory-timeline\""), std::string::npos);
  EXPECT_NE(page.find("id=\"pareto\""), std::string::npos);
  EXPECT_NE(page.find("planner --budget 24GB --report"), std::string::npos);
  const nlohmann::json t = nlohmann::json::parse(ReadAll(trace));
  EXPECT_TRUE(t["traceEvents"].is_array());
}

TEST(ReportFlags, ParetoPointsZeroLeavesTheChartOut) {
  const ScratchDir dir;
  const std::string html = dir.Path("nopareto.html");
  const Captured c = RunCli({"--budget", "24GB", "--pareto-points", "0", "--report", html, kExample});
  EXPECT_EQ(c.code, 0) << c.err;
  const std::string page = ReadAll(html);
  EXPECT_NE(page.find("id=\"memory-timeline\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"pareto\""), std::string::npos);
}

TEST(ReportFlags, AReportIsWrittenWhenNothingFits) {
  const ScratchDir dir;
  const std::string html = dir.Path("nofit.html");
  const Captured c = RunCli({"--budget", "8GB", "--chunked-loss", "0", "--report", html, kExample});
  EXPECT_EQ(c.code, 3);
  const std::string page = ReadAll(html);
  EXPECT_NE(page.find("DOES NOT FIT"), std::string::npos);
  EXPECT_NE(page.find("NO PLAN FITS"), std::string::npos);
}

}  // namespace
}  // namespace remat::cli
