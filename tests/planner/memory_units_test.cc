#include "solver/memory_units.h"

#include <gtest/gtest.h>

namespace remat::solver {
namespace {

TEST(MemoryUnits, OneByteSlotsWhenTheBudgetIsSmall) {
  const MemoryUnits u(1000, 4096);
  EXPECT_EQ(u.slots(), 1000);
  EXPECT_EQ(u.Ceil(0), 0);
  EXPECT_EQ(u.Ceil(1), 1);
  EXPECT_EQ(u.Ceil(999), 999);
  EXPECT_EQ(u.Ceil(1000), 1000);
  EXPECT_EQ(u.Ceil(1001), 1001);  // does not fit: slots + 1
}

TEST(MemoryUnits, RoundsUpSoThatFittingSlotsFitInBytes) {
  const MemoryUnits u(1'000'003, 1000);
  EXPECT_EQ(u.slots(), 1000);
  for (int64_t b : {1, 999, 1000, 1001, 1002, 123457, 999'999, 1'000'003}) {
    const int64_t k = u.Ceil(b);
    EXPECT_GE(static_cast<__int128>(k) * 1'000'003, static_cast<__int128>(b) * 1000) << b;
    EXPECT_LT(static_cast<__int128>(k - 1) * 1'000'003, static_cast<__int128>(b) * 1000) << b;
  }
  EXPECT_EQ(u.Ceil(1'000'003), 1000);
  EXPECT_EQ(u.Ceil(1'000'004), 1001);
}

TEST(MemoryUnits, ExactBytesForHugeBudgets) {
  const MemoryUnits u = MemoryUnits::Bytes(int64_t{1} << 60);
  EXPECT_EQ(u.Ceil(int64_t{1} << 50), int64_t{1} << 50);
  EXPECT_EQ(u.Ceil(7), 7);
}

}  // namespace
}  // namespace remat::solver
