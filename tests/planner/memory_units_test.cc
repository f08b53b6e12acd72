#include "solver/memory_units.h"

#include <gtest/gtest.h>

namespace remat::solver {
namespace {

TEST(MemoryUnits, OneByteSlotsWhenTheBudgetIsSmall) {
  const MemoryUnits u(1000, 4096);
  EXPECT_EQ(u.slots(), 1000);
  EXPECT_EQ(u.Slots(0), 0);
  EXPECT_EQ(u.Slots(1), 1);
  EXPECT_EQ(u.Slots(999), 999);
  EXPECT_EQ(u.Slots(1000), 1000);
  EXPECT_EQ(u.Slots(1001), 1001);  // does not fit: slots + 1
}

TEST(MemoryUnits, RoundsUpSoThatFittingSlotsFitInBytes) {
  const MemoryUnits u(1'000'003, 1000);
  EXPECT_EQ(u.slots(), 1000);
  for (int64_t b : {1, 999, 1000, 1001, 1002, 123457, 999'999, 1'000'003}) {
    const int64_t k = u.Slots(b);
    EXPECT_GE(static_cast<__int128>(k) * 1'000'003, static_cast<__int128>(b) * 1000) << b;
    EXPECT_LT(static_cast<__int128>(k - 1) * 1'000'003, static_cast<__int128>(b) * 1000) << b;
  }
  EXPECT_EQ(u.Slots(1'000'003), 1000);
  EXPECT_EQ(u.Slots(1'000'004), 1001);
}

TEST(MemoryUnits, RoundsDownForTheRelaxation) {
  const MemoryUnits u(1'000'003, 1000, Rounding::kDown);
  for (int64_t b : {1, 999, 1000, 1001, 1002, 123457, 999'999, 1'000'003}) {
    const int64_t k = u.Slots(b);
    EXPECT_LE(static_cast<__int128>(k) * 1'000'003, static_cast<__int128>(b) * 1000) << b;
    EXPECT_GT(static_cast<__int128>(k + 1) * 1'000'003, static_cast<__int128>(b) * 1000) << b;
  }
  EXPECT_EQ(u.Slots(1'000'003), 1000);
  EXPECT_EQ(u.Slots(1'000'004), 1001);  // more than the budget never fits
}

TEST(MemoryUnits, ExactBytesForHugeBudgets) {
  const MemoryUnits u = MemoryUnits::Bytes(int64_t{1} << 60);
  EXPECT_EQ(u.Slots(int64_t{1} << 50), int64_t{1} << 50);
  EXPECT_EQ(u.Slots(7), 7);
}

}  // namespace
}  // namespace remat::solver
