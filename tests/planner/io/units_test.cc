#include "remat/io/units.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace remat {
namespace {

TEST(ParseBytes, DecimalAndBinaryUnits) {
  EXPECT_EQ(*ParseBytes("24GB"), 24'000'000'000);
  EXPECT_EQ(*ParseBytes("24GiB"), int64_t{24} << 30);
  EXPECT_EQ(*ParseBytes("80GiB"), int64_t{80} << 30);
  EXPECT_EQ(*ParseBytes("512MB"), 512'000'000);
  EXPECT_EQ(*ParseBytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("2TB"), 2'000'000'000'000);
  EXPECT_EQ(*ParseBytes("1TiB"), int64_t{1} << 40);
  EXPECT_EQ(*ParseBytes("100B"), 100);
  EXPECT_EQ(*ParseBytes("4KiB"), 4096);
  EXPECT_EQ(*ParseBytes("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(*ParseBytes("24gb"), 24'000'000'000);
  EXPECT_EQ(*ParseBytes(" 24 GB "), 24'000'000'000);
}

TEST(ParseBytes, RejectsWithAMessage) {
  for (const char* bad : {"24XB", "24", "", "GB", "-1GB", "0GB", "1.2.3GB", "nanGB", "infGB",
                          "1e3GB", "99999999999TiB", "24 G B"}) {
    Result<int64_t> r = ParseBytes(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput) << bad;
    EXPECT_FALSE(r.status().message().empty());
  }
  EXPECT_NE(ParseBytes("24XB").status().message().find("unknown unit 'XB'"), std::string::npos);
  EXPECT_NE(ParseBytes("24").status().message().find("no unit"), std::string::npos);
}

TEST(FormatBytes, BinaryUnits) {
  EXPECT_EQ(FormatBytes(312), "312 B");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(24'000'000'000), "22.35 GiB");
  EXPECT_EQ(FormatCount(2'868'903'936), "2,868,903,936");
  EXPECT_EQ(FormatCount(12), "12");
}

// FormatBytes and FormatMillis as printf writes them: the reference the
// formatting is held to, character for character.
std::string PrintfBytes(int64_t bytes) {
  const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const bool negative = bytes < 0;
  double v = std::fabs(static_cast<double>(bytes));
  int unit = 0;
  while (v >= 1024.0 && unit < 6) {
    v /= 1024.0;
    ++unit;
  }
  char buf[64];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%s%lld B", negative ? "-" : "", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%s%.2f %s", negative ? "-" : "", v, names[unit]);
  }
  return buf;
}

std::string PrintfMillis(double ms) {
  char buf[400];
  if (std::fabs(ms) >= 1000.0) {
    std::snprintf(buf, sizeof buf, "%.2f s", ms / 1000.0);
  } else if (std::fabs(ms) >= 10.0) {
    std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  }
  return buf;
}

TEST(FormatBytes, AsPrintfWritesIt) {
  std::vector<int64_t> values = {0, 1, -1, 1023, 1024, -1024, 1025,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
  // Every power of two and its neighbours, and the values whose third
  // decimal is a tie (x.xx5 of a unit) and beside it.
  for (int k = 0; k < 63; ++k) {
    const int64_t p = int64_t{1} << k;
    for (int64_t d : {int64_t{-1}, int64_t{0}, int64_t{1}}) values.push_back(p + d);
  }
  for (int64_t unit : {int64_t{1} << 10, int64_t{1} << 20, int64_t{1} << 30, int64_t{1} << 40}) {
    for (int64_t m = 0; m < 20000; ++m) {
      const int64_t tie = (unit * (2 * m + 1)) / 200;
      for (int64_t d : {int64_t{-1}, int64_t{0}, int64_t{1}}) values.push_back(tie + d);
    }
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const int shift = static_cast<int>(rng() % 64);
    int64_t v = static_cast<int64_t>(rng() >> shift);
    if (rng() % 4 == 0) v = -v;
    values.push_back(v);
  }
  for (int64_t v : values) ASSERT_EQ(FormatBytes(v), PrintfBytes(v)) << v;
}

TEST(FormatMillis, AsPrintfWritesIt) {
  std::vector<double> values = {0.0,
                                -0.0,
                                0.0004999,
                                -0.0004,
                                0.0005,
                                0.0015,
                                0.125,
                                9.9995,
                                9.99949,
                                10.0,
                                99.95,
                                999.95,
                                1000.0,
                                -1000.0,
                                1e300,
                                -1e300,
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::denorm_min(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN(),
                                -std::numeric_limits<double>::quiet_NaN()};
  // The ties of each precision (exact in binary: multiples of 1/1024 and
  // 1/8 around the rounding points) and their neighbours.
  for (int m = -40000; m <= 40000; ++m) {
    for (double x : {m / 1024.0, m / 8.0, m * 0.0005, m * 0.05, m * 5.0}) {
      values.push_back(x);
      values.push_back(std::nextafter(x, 1e308));
      values.push_back(std::nextafter(x, -1e308));
    }
  }
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> exponent(-8.0, 9.0);
  for (int i = 0; i < 200000; ++i) {
    const double v = std::pow(10.0, exponent(rng));
    values.push_back(rng() % 4 == 0 ? -v : v);
  }
  for (double v : values) ASSERT_EQ(FormatMillis(v), PrintfMillis(v)) << v;
}

}  // namespace
}  // namespace remat
