#include "solver/memory_units.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>

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

// Slots computes in 64 bits where bytes * slots fits and in 128 bits
// otherwise; both give the quotient of the 128-bit formula (unaligned units:
// u = budget / slots), on budgets up to 2^62 and bytes on both sides of the
// 64-bit product's limit.
TEST(MemoryUnits, SlotsEqualThe128BitQuotient) {
  std::mt19937_64 rng(7);
  int wide = 0;
  for (int i = 0; i < 20000; ++i) {
    const int64_t budget = static_cast<int64_t>(rng() >> (2 + rng() % 60)) + 1;
    const int64_t slots = static_cast<int64_t>(rng() % 100000) + 2;
    const int64_t bytes = static_cast<int64_t>(rng() % static_cast<uint64_t>(budget)) + 1;
    for (const Rounding r : {Rounding::kUp, Rounding::kDown}) {
      const MemoryUnits u(budget, slots, r);
      if (u.slots() == budget) continue;  // one-byte slots: bytes themselves
      const __int128 scaled = static_cast<__int128>(bytes) * std::min(slots, budget);
      const __int128 k = r == Rounding::kUp ? (scaled + budget - 1) / budget : scaled / budget;
      if (scaled > std::numeric_limits<int64_t>::max()) ++wide;
      ASSERT_EQ(u.Slots(bytes), static_cast<int64_t>(std::min<__int128>(k, u.slots() + 1)))
          << bytes << " of " << budget << " in " << slots;
    }
  }
  EXPECT_GT(wide, 1000);  // the 128-bit path was taken too
}

}  // namespace
}  // namespace remat::solver
