// Back-tracking a cost table (solver/back_track.h): the least slot count at
// a row's cost, and the choice among an interval's keeps and splits, ties
// going to the first candidate as in the fill.
#include "solver/back_track.h"

#include <gtest/gtest.h>

#include <vector>

#include "testing/chains.h"

namespace remat::solver {
namespace {

TEST(BackTrack, LeastSlotsAtSameCostIsTheFirstSlotCountOfThatCost) {
  const float cost[] = {9, 5, 5, 5, 2};  // slot counts 3..7
  const CostRow row{3, 7, cost};
  EXPECT_EQ(LeastSlotsAtSameCost(row, 3), 3);
  EXPECT_EQ(LeastSlotsAtSameCost(row, 6), 4);
  EXPECT_EQ(LeastSlotsAtSameCost(row, 7), 7);
  EXPECT_EQ(LeastSlotsAtSameCost(row, 100), 7);  // above hi: hi's cost
}

// Three identical layers (x = 10 bytes), counted in bytes: a keep of layer 0
// leaves its slots to the row of (1, 3); a split's cost is the callback's.
class ChooseIntervalTest : public ::testing::Test {
 protected:
  ChooseIntervalTest() : profile_(testing::UniformChain(3)), terms_(profile_, Units()) {}
  static MemoryUnits Units() { return MemoryUnits::Bytes(1000); }

  // The row of (1, 3) from slot count 0 on, every cost `c`.
  CostRow AfterKeep(float c) {
    after_.assign(1001, c);
    return CostRow{0, 1000, after_.data()};
  }

  Profile profile_;
  ChainTerms terms_;
  std::vector<float> after_;
};

TEST_F(ChooseIntervalTest, AKeepWinsATieWithASplit) {
  const CostRow after = AfterKeep(4);
  const IntervalChoice c = ChooseInterval(terms_, 0, 3, 1000, after, [](int, float* cost) {
    *cost = 4;
    return true;
  });
  EXPECT_EQ(c.split, 0);
  EXPECT_EQ(c.mode, 0);
}

TEST_F(ChooseIntervalTest, TheCheapestSplitWinsAndTheFirstOfEqualOnes) {
  const CostRow after = AfterKeep(4);
  std::vector<int> offered;
  const IntervalChoice c = ChooseInterval(terms_, 0, 3, 1000, after, [&](int sp, float* cost) {
    offered.push_back(sp);
    *cost = 3;
    return true;
  });
  EXPECT_EQ(offered, (std::vector<int>{1, 2}));
  EXPECT_EQ(c.split, 1);
}

TEST_F(ChooseIntervalTest, ASplitThatDoesNotFitIsSkipped) {
  const CostRow after = AfterKeep(4);
  const IntervalChoice c = ChooseInterval(terms_, 0, 3, 1000, after, [](int sp, float* cost) {
    *cost = 1;
    return sp == 2;
  });
  EXPECT_EQ(c.split, 2);
}

TEST_F(ChooseIntervalTest, NoSplitIsOfferedWhereTheSweepDoesNotFit) {
  const CostRow after = AfterKeep(4);
  const int64_t m = terms_.SweepNeed(0, 3, terms_.sweep(0, 3).front().bytes) - 1;
  std::vector<int> offered;
  ChooseInterval(terms_, 0, 3, m, after, [&](int sp, float* cost) {
    offered.push_back(sp);
    *cost = 0;
    return true;
  });
  EXPECT_TRUE(offered.empty());
}

TEST_F(ChooseIntervalTest, AKeepWhoseSuffixDoesNotFitIsSkipped) {
  const CostRow empty;  // (1, 3) fits in no slot count
  const IntervalChoice c = ChooseInterval(terms_, 0, 3, 1000, empty, [](int sp, float* cost) {
    *cost = 100;
    return sp == 2;
  });
  EXPECT_EQ(c.split, 2);
}

}  // namespace
}  // namespace remat::solver
