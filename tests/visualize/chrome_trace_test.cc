#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "remat/visualize.h"
#include "report_fixture.h"

namespace remat {
namespace {

nlohmann::json Trace(const ReportData& d) {
  Result<std::string> text = RenderChromeTrace(d);
  EXPECT_TRUE(text.ok()) << text.status().message();
  return nlohmann::json::parse(*text);  // throws (fails the test) if invalid
}

// Max over counter events named `name` of pid `pid` of the sum of their args.
int64_t CounterMax(const nlohmann::json& trace, const std::string& name, int pid) {
  int64_t best = -1;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "C" || e["name"] != name || e["pid"] != pid) continue;
    int64_t sum = 0;
    for (const auto& [k, v] : e["args"].items()) sum += v.get<int64_t>();
    best = std::max(best, sum);
  }
  return best;
}

TEST(ChromeTrace, OpsAreCompleteEventsAtTheSimulatedTimes) {
  const testing::ReportFixture f = testing::MakeReportFixture();
  const nlohmann::json t = Trace(f.Data());
  ASSERT_TRUE(t["traceEvents"].is_array());
  EXPECT_EQ(t["displayTimeUnit"], "ms");
  const SimulationResult& r = f.plans.chosen.predicted;
  size_t timed = 0;
  for (const TimelinePoint& pt : r.timeline) timed += pt.end_ms > pt.start_ms;
  size_t ops = 0;
  double end_us = 0;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    if (e["ph"] != "X" || e["tid"] != 1) continue;
    ++ops;
    const int op = e["args"]["op"];
    const TimelinePoint& pt = r.timeline[op];
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), pt.start_ms * 1000);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), (pt.end_ms - pt.start_ms) * 1000);
    EXPECT_EQ(e["args"]["peak_bytes"], pt.peak);
    end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_EQ(ops, timed);
  EXPECT_NEAR(end_us, r.step_ms * 1000, 1e-6);
}

TEST(ChromeTrace, CounterMaximumIsThePredictedPeak) {
  for (Strategy s : {Strategy::kUniform, Strategy::kSelective, Strategy::kNone}) {
    const testing::ReportFixture f = testing::MakeReportFixture(s);
    const nlohmann::json t = Trace(f.Data());
    const int64_t peak = f.plans.chosen.predicted.peak_bytes;
    EXPECT_EQ(CounterMax(t, "memory total", 1), peak) << ToString(s);
    EXPECT_EQ(CounterMax(t, "memory", 1), peak) << ToString(s);  // categories add up
    EXPECT_EQ(t["otherData"]["predicted_peak_bytes"], peak);
  }
}

TEST(ChromeTrace, MeasuredRunIsASecondProcess) {
  const testing::ReportFixture f = testing::MakeReportFixture(Strategy::kUniform, 1.1);
  const nlohmann::json t = Trace(f.Data(true));
  EXPECT_EQ(CounterMax(t, "memory total", 2), f.measured.peak_bytes);
  EXPECT_EQ(CounterMax(t, "memory total", 1), f.plans.chosen.predicted.peak_bytes);
  bool named = false;
  for (const auto& e : t["traceEvents"]) {
    named |= e["ph"] == "M" && e["pid"] == 2 && e["args"]["name"] == "measured: fake";
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace remat
