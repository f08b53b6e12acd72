#include "remat/io/units.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace remat
