#include "solver/table_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace remat::solver {
namespace {

// Takes every kept table (each fits zero cells), so that a test starts
// from an empty pool whatever scope another test left open.
void Drain() {
  while (KeptTables() > 0) TakeTable(0);
}

CostTable Table(int64_t cells) {
  CostTable t;
  t.reserve(static_cast<size_t>(cells));
  return t;
}

TEST(TablePool, ATakenTableIsEmptyAndHoldsTheCells) {
  const TablePoolScope scope;
  Drain();
  CostTable t = TakeTable(1000);
  EXPECT_TRUE(t.empty());
  EXPECT_GE(t.capacity(), 1000u);
  EXPECT_EQ(KeptTables(), 0u);
}

TEST(TablePool, AGivenBackTableServesTheNextTakeThatFitsInIt) {
  const TablePoolScope scope;
  Drain();
  CostTable t = TakeTable(4096);
  t.assign(4096, 1.0f);
  const float* storage = t.data();
  GiveBackTable(std::move(t));
  EXPECT_EQ(KeptTables(), 1u);
  CostTable again = TakeTable(3000);
  EXPECT_EQ(again.data(), storage);
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(KeptTables(), 0u);
}

TEST(TablePool, TheSmallestTableThatFitsIsTaken) {
  const TablePoolScope scope;
  Drain();
  CostTable small = Table(100), mid = Table(1000), large = Table(10000);
  const float* mid_storage = mid.data();
  GiveBackTable(std::move(large));
  GiveBackTable(std::move(small));
  GiveBackTable(std::move(mid));
  EXPECT_EQ(KeptTables(), 3u);
  CostTable t = TakeTable(500);
  EXPECT_EQ(t.data(), mid_storage);
  EXPECT_EQ(KeptTables(), 2u);
  Drain();
}

TEST(TablePool, ATakeLargerThanAnyKeptDropsTheLargest) {
  const TablePoolScope scope;
  Drain();
  CostTable small = Table(100), large = Table(1000);
  const float* small_storage = small.data();
  GiveBackTable(std::move(small));
  GiveBackTable(std::move(large));
  CostTable t = TakeTable(5000);
  EXPECT_GE(t.capacity(), 5000u);
  ASSERT_EQ(KeptTables(), 1u);  // the small one
  EXPECT_EQ(TakeTable(0).data(), small_storage);
}

TEST(TablePool, KeepsTheLargestTablesUpToItsLimit) {
  const TablePoolScope scope;
  Drain();
  std::vector<const float*> storage;
  for (size_t i = 0; i < kKeptTables + 2; ++i) {
    CostTable t = Table(static_cast<int64_t>(100 * (i + 1)));
    storage.push_back(t.data());
    GiveBackTable(std::move(t));
  }
  EXPECT_EQ(KeptTables(), kKeptTables);
  // The two smallest were dropped: the smallest kept is the third.
  EXPECT_EQ(TakeTable(0).data(), storage[2]);
  Drain();
}

TEST(TablePool, AnEmptyVectorIsNotKept) {
  const TablePoolScope scope;
  Drain();
  GiveBackTable(CostTable());
  EXPECT_EQ(KeptTables(), 0u);
}

TEST(TablePool, ThreadsTakeAndGiveBackAtOnce) {
  const TablePoolScope scope;
  Drain();
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([i] {
      for (int k = 0; k < 200; ++k) {
        CostTable t = TakeTable(64 * (1 + (i + k) % 7));
        t.assign(64, static_cast<float>(k));
        EXPECT_EQ(t[63], static_cast<float>(k));
        GiveBackTable(std::move(t));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(KeptTables(), kKeptTables);
  EXPECT_GE(KeptTables(), 1u);
  Drain();
}

TEST(TablePool, ATableOfHugePagesStartsOnOne) {
  // (So that the kernel can back all of it but its tail with huge pages.)
  const CostTable large = Table(int64_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % (uintptr_t{2} << 20), 0u);
  const CostTable small = Table(100);
  EXPECT_GE(small.capacity(), 100u);
}

TEST(TablePool, WithoutAScopeNothingIsKept) {
  ASSERT_EQ(KeptTables(), 0u);  // no scope open in this process but the tests'
  GiveBackTable(Table(100));
  EXPECT_EQ(KeptTables(), 0u);
}

TEST(TablePool, ClosingTheLastScopeFreesTheKeptTables) {
  {
    const TablePoolScope outer;
    {
      const TablePoolScope inner;
      GiveBackTable(Table(100));
      EXPECT_EQ(KeptTables(), 1u);
    }
    EXPECT_EQ(KeptTables(), 1u);  // the outer scope still open
    GiveBackTable(Table(200));
    EXPECT_EQ(KeptTables(), 2u);
  }
  EXPECT_EQ(KeptTables(), 0u);
}

}  // namespace
}  // namespace remat::solver
