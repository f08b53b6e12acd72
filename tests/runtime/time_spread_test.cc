// The profiler's per-layer time spread (median.h RelativeSpread,
// LayerProfile::time_spread).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "median.h"
#include "memory_meter.h"
#include "profiler.h"
#include "tiny_model.h"

namespace remat::runtime {
namespace {

TEST(RelativeSpread, InterquartileRangeOverMedian) {
  EXPECT_EQ(RelativeSpread({}), 0);
  EXPECT_EQ(RelativeSpread({3.0}), 0);
  EXPECT_EQ(RelativeSpread({0.0, 0.0, 0.0}), 0);
  // Two samples: quartiles a quarter of the way in from each end.
  EXPECT_DOUBLE_EQ(RelativeSpread({1.0, 3.0}), 1.0 / 2.0);
  // Five: the 2nd and 4th fastest; the outliers at both ends do not count.
  EXPECT_DOUBLE_EQ(RelativeSpread({10.0, 0.1, 1.0, 1.1, 0.9}), (1.1 - 0.9) / 1.0);
  // Four: Q1 = 1 + 0.75 * (2 - 1), Q3 = 3 + 0.25 * (4 - 3), median 2.5.
  EXPECT_DOUBLE_EQ(RelativeSpread({4.0, 1.0, 3.0, 2.0}), (3.25 - 1.75) / 2.5);
}

Profile Measure(int repeats) {
  MeasureOptions o;
  o.warmup = 0;
  o.repeats = repeats;
  Result<Profile> p = MeasureProfile(testing::TinyGpt(), o, Timing{}, CpuMeter());
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : Profile{};
}

TEST(ProfilerTimeSpread, EveryLayerCarriesItsSpread) {
  const Profile once = Measure(1);
  for (const LayerProfile& l : once.layers) EXPECT_EQ(l.time_spread, 0) << l.name;
  const Profile p = Measure(4);
  ASSERT_GT(p.num_layers(), 0);
  double widest = 0;
  for (const LayerProfile& l : p.layers) {
    EXPECT_TRUE(std::isfinite(l.time_spread) && l.time_spread >= 0) << l.name;
    widest = std::max(widest, l.time_spread);
  }
  // Four wall-clock repetitions of a whole chain never agree to the tick.
  EXPECT_GT(widest, 0);
  // It travels with the profile.
  Result<Profile> back = ParseProfile(ProfileToJson(p), "measured.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (int i = 0; i < p.num_layers(); ++i) {
    EXPECT_DOUBLE_EQ(back->layers[i].time_spread, p.layers[i].time_spread);
  }
}

}  // namespace
}  // namespace remat::runtime
