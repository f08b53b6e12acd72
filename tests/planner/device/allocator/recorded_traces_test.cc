// The committed allocator traces (profiles/fixtures/alloc-traces/, written
// by scripts/make_allocator_traces.sh): each one's prediction is what the
// allocator model makes of its events now, and where PyTorch's allocator
// recorded the same events on a GPU (scripts/record_allocator_trace.py adds
// "measured"), the predicted reserved peak is within 1% of the recorded one.
// Also the trace reader's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "remat/report/alloc_trace.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CommittedTraces() {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(REMAT_SOURCE_DIR) / "profiles/fixtures/alloc-traces";
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 11 && name.substr(name.size() - 11) == ".trace.json") {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

AllocatorTraceFile ReadTrace(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  Result<AllocatorTraceFile> t = ParseAllocatorTrace(text.str(), path.filename().string());
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *std::move(t) : AllocatorTraceFile{};
}

TEST(RecordedTraces, EachPredictionIsTheModelsReplayOfItsEvents) {
  const std::vector<fs::path> traces = CommittedTraces();
  EXPECT_GE(traces.size(), 6u);
  for (const fs::path& path : traces) {
    const std::string where = path.filename().string();
    const AllocatorTraceFile t = ReadTrace(path);
    ASSERT_FALSE(t.events.empty()) << where;
    const AllocatorOptions options = ParseAllocConf(t.alloc_conf).value();
    const Result<AllocatorReplay> r = ReplayAllocations(t.events, options);
    ASSERT_TRUE(r.ok()) << where << ": " << r.status().message();
    ASSERT_FALSE(r->oom.has_value()) << where;
    // Written by scripts/make_allocator_traces.sh: rerun it after a change
    // to the model that moves these.
    EXPECT_EQ(r->stats.peak_reserved_bytes, t.predicted.reserved_peak_bytes) << where;
    EXPECT_EQ(r->stats.peak_allocated_bytes, t.predicted.allocated_peak_bytes) << where;
    EXPECT_EQ(r->reserved_timeline_bytes, t.predicted.reserved_timeline_bytes) << where;
  }
}

// Printed for every trace; asserted for those recorded on a GPU.
TEST(RecordedTraces, PredictedReservedPeakIsWithinOnePercentOfTheRecordedOne) {
  int recorded = 0;
  for (const fs::path& path : CommittedTraces()) {
    const AllocatorTraceFile t = ReadTrace(path);
    const std::string where = path.filename().string();
    if (!t.measured) {
      std::printf("  %-44s predicted reserved %15lld B; no recording from a GPU\n",
                  where.c_str(), static_cast<long long>(t.predicted.reserved_peak_bytes));
      continue;
    }
    ++recorded;
    const double error =
        static_cast<double>(t.predicted.reserved_peak_bytes - t.measured->reserved_peak_bytes) /
        static_cast<double>(t.measured->reserved_peak_bytes);
    std::printf("  %-44s predicted reserved %15lld B, recorded %15lld B on %s (%+.2f%%)\n",
                where.c_str(), static_cast<long long>(t.predicted.reserved_peak_bytes),
                static_cast<long long>(t.measured->reserved_peak_bytes),
                t.measured->device.c_str(), 100 * error);
    EXPECT_LE(std::abs(error), 0.01) << where;
    // The same requests: the allocated bytes agree exactly at their peak.
    EXPECT_EQ(t.predicted.allocated_peak_bytes, t.measured->allocated_peak_bytes) << where;
  }
  std::printf("  %d of the committed traces recorded on a GPU\n", recorded);
}

TEST(RecordedTraces, TheReaderNamesWhatIsWrong) {
  const std::string side =
      R"("predicted": {"reserved_peak_bytes": 2097152, "allocated_peak_bytes": 512,
                        "reserved_timeline_bytes": [2097152, 2097152]})";
  ASSERT_TRUE(
      ParseAllocatorTrace(R"({"events": [["a", 1, 512], ["f", 1]], )" + side + "}", "t").ok());
  struct Case {
    std::string text;
    std::string says;
  };
  const Case cases[] = {
      {"[1]", "t: expected a JSON object"},
      {"{" + side + "}", "t: field 'events': is missing"},
      {R"({"events": [["a", 1]], )" + side + "}", "t: events[0]: expected [\"a\", id, bytes >= 0]"},
      {R"({"events": [["a", 1, -4], ["f", 1]], )" + side + "}", "t: events[0]"},
      {R"({"events": [["x", 1]], )" + side + "}", "t: events[0]"},
      {R"({"events": [["a", 1, 512]], )" + side + "}",
       "t: predicted: field 'reserved_timeline_bytes': must be an array of 1 byte counts"},
      {R"({"events": [["a", 1, 512], ["f", 1]]})", "t: field 'predicted': is missing"},
      {R"({"events": 3, )" + side + "}", "t: field 'events': must be an array"},
  };
  for (const Case& c : cases) {
    const Result<AllocatorTraceFile> t = ParseAllocatorTrace(c.text, "t");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find(c.says), std::string::npos)
        << c.text << "\n  says: " << t.status().message();
  }
}

}  // namespace
}  // namespace remat
