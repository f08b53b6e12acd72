#include "scale.h"

#include <gtest/gtest.h>

#include <cmath>

namespace remat::viz {
namespace {

TEST(NiceTicks, CoverTheRangeInRoundSteps) {
  for (double hi : {0.7, 3.07, 22.23, 24.9, 425.0, 1e4, 123456.0}) {
    const Ticks t = NiceTicks(0, hi, 6);
    EXPECT_LE(t.lo, 0) << hi;
    EXPECT_GE(t.hi, hi) << hi;
    EXPECT_LT(t.hi, hi + 2 * t.step) << hi;
    const double mantissa = t.step / std::pow(10.0, std::floor(std::log10(t.step)));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 ||
                std::fabs(mantissa - 2.5) < 1e-9 || std::fabs(mantissa - 5) < 1e-9)
        << hi << " step " << t.step;
    EXPECT_GE(t.values.size(), 3u) << hi;
    EXPECT_LE(t.values.size(), 13u) << hi;
  }
}

TEST(NiceTicks, DecimalsTellTicksApart) {
  const Ticks t = NiceTicks(0, 0.7, 7);
  EXPECT_EQ(t.step, 0.1);
  EXPECT_EQ(t.decimals, 1);
  EXPECT_EQ(FormatTick(t.values[3], t.decimals), "0.3");
  EXPECT_EQ(NiceTicks(0, 30, 6).decimals, 0);
  EXPECT_EQ(NiceTicks(0, 12.5, 5).decimals, 1);  // step 2.5
}

TEST(NiceTicks, DegenerateRangeStillHasAStep) {
  const Ticks t = NiceTicks(5, 5, 4);
  EXPECT_GT(t.hi, t.lo);
  EXPECT_GE(t.values.size(), 2u);
}

TEST(FormatTick, NeverWritesMinusZero) {
  EXPECT_EQ(FormatTick(-1e-12, 1), "0.0");
  EXPECT_EQ(FormatTick(2.5, 1), "2.5");
}

TEST(LinearScale, MapsAndFlips) {
  const LinearScale y{0, 10, 300, 100};
  EXPECT_DOUBLE_EQ(y(0), 300);
  EXPECT_DOUBLE_EQ(y(10), 100);
  EXPECT_DOUBLE_EQ(y(5), 200);
  EXPECT_DOUBLE_EQ((LinearScale{3, 3, 7, 9})(100), 7);
}

TEST(PickByteUnit, LargestUnitReached) {
  EXPECT_STREQ(PickByteUnit(500).name, "B");
  EXPECT_STREQ(PickByteUnit(2048).name, "KiB");
  EXPECT_STREQ(PickByteUnit(3.0 * (1 << 20)).name, "MiB");
  EXPECT_STREQ(PickByteUnit(24e9).name, "GiB");
  EXPECT_EQ(PickByteUnit(24e9).bytes, 1073741824.0);
}

TEST(OffScale, PastTheRatioOverTheData) {
  EXPECT_FALSE(OffScale(150, 100));  // kOffScaleRatio x the data is still on scale
  EXPECT_TRUE(OffScale(151, 100));
  EXPECT_FALSE(OffScale(10, 100));  // below the data: on scale
  EXPECT_FALSE(OffScale(0, 100));   // no reference
  EXPECT_FALSE(OffScale(5, 0));     // no data to squeeze
}

TEST(FitAxis, FollowsTheDataNotAReferenceFarAboveIt) {
  // 223 MiB of data, a 100 GiB budget: the axis stays near the data.
  const ValueAxis a = FitAxis(0, 223, 102400, AxisFit{});
  EXPECT_TRUE(a.reference_off_scale);
  EXPECT_EQ(a.ticks.lo, 0);
  EXPECT_GE(a.ticks.hi, 223 * 1.1);
  EXPECT_LE(a.ticks.hi, 300);
}

TEST(FitAxis, IncludesAReferenceInRange) {
  const ValueAxis above = FitAxis(0, 223, 300, AxisFit{});
  EXPECT_FALSE(above.reference_off_scale);
  EXPECT_GE(above.ticks.hi, 300);
  AxisFit from_data;
  from_data.from_zero = false;
  const ValueAxis below = FitAxis(200, 250, 120, from_data);
  EXPECT_FALSE(below.reference_off_scale);
  EXPECT_LE(below.ticks.lo, 120);
  EXPECT_GE(below.ticks.hi, 250);
  const ValueAxis none = FitAxis(200, 250, 0, from_data);
  EXPECT_FALSE(none.reference_off_scale);
  EXPECT_GT(none.ticks.lo, 150);  // not from zero
}

TEST(FitByteAxis, UnitOfTheValuesShown) {
  ByteUnit unit;
  const double mib = 1048576.0, gib = 1073741824.0;
  // An off-scale budget does not make the axis GiB.
  const ValueAxis a = FitByteAxis(0, 223 * mib, 100 * gib, AxisFit{}, &unit);
  EXPECT_STREQ(unit.name, "MiB");
  EXPECT_TRUE(a.reference_off_scale);
  EXPECT_LE(a.ticks.hi, 300);
  // One on scale does.
  const ValueAxis b = FitByteAxis(0, 1000 * mib, 1.2 * gib, AxisFit{}, &unit);
  EXPECT_STREQ(unit.name, "GiB");
  EXPECT_FALSE(b.reference_off_scale);
  EXPECT_GE(b.ticks.hi, 1.2);
}

}  // namespace
}  // namespace remat::viz
