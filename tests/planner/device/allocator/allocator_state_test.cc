// FreeBlocks (device/allocator/allocator_state.h) against a std::set in
// PyTorch's order (by size, then address) over random inserts and erases
// (by block, through the bucket it was inserted in, and by position): the
// same blocks in the same order both ways, the same best fit for every
// size, with sizes coming and going (emptied buckets reused).
#include "device/allocator/allocator_state.h"

#include <gtest/gtest.h>

#include <deque>
#include <iterator>
#include <random>
#include <set>
#include <vector>

namespace remat::allocator_internal {
namespace {

struct BySizeThenAddr {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->addr < b->addr;
  }
};

void ExpectSame(const FreeBlocks& blocks, const std::set<Block*, BySizeThenAddr>& ref) {
  ASSERT_EQ(blocks.size(), ref.size());
  std::vector<Block*> forward(blocks.begin(), blocks.end());
  EXPECT_EQ(forward, std::vector<Block*>(ref.begin(), ref.end()));
  std::vector<Block*> backward(blocks.rbegin(), blocks.rend());
  EXPECT_EQ(backward, std::vector<Block*>(ref.rbegin(), ref.rend()));
}

TEST(FreeBlocks, OrderAndBestFitMatchASortedSet) {
  std::mt19937 rng(7);
  // Few sizes, so buckets empty and fill again; addresses unique.
  std::uniform_int_distribution<int> size_of(1, 9), pick(0, 99);
  std::deque<Block> arena;
  std::vector<Block*> all;
  for (int k = 0; k < 100; ++k) {
    arena.push_back(Block{});
    arena.back().addr = 4096 * k;
    arena.back().size = 512 * size_of(rng);
    all.push_back(&arena.back());
  }
  FreeBlocks blocks;
  std::set<Block*, BySizeThenAddr> ref;
  for (int step = 0; step < 4000; ++step) {
    Block* b = all[pick(rng)];
    if (step % 7 == 0 && !ref.empty()) {
      // Erase by position: the k-th block in order, any bucket, any slot.
      const size_t k = static_cast<size_t>(pick(rng)) % ref.size();
      auto it = blocks.begin();
      auto want = ref.begin();
      std::advance(it, k);
      std::advance(want, k);
      ASSERT_EQ(*it, *want);
      Block* erased = *want;
      blocks.erase(it);
      ref.erase(want);
      EXPECT_FALSE(erased->cached);
    } else if (b->cached) {
      blocks.erase(b);
      ref.erase(b);
    } else {
      if (step % 3 == 0) b->size = 512 * size_of(rng);  // a block merged or split since
      blocks.insert(b);
      ref.insert(b);
    }
    ASSERT_EQ(b->cached, ref.count(b) == 1);
    if (step % 50 == 0) ExpectSame(blocks, ref);
    for (int s = 0; s <= 10; ++s) {
      Block probe;
      probe.size = 512 * s;
      probe.addr = -1;
      const auto want = ref.lower_bound(&probe);
      const auto got = blocks.lower_bound(512 * s);
      if (want == ref.end()) {
        EXPECT_TRUE(got == blocks.end()) << s;
      } else {
        ASSERT_TRUE(got != blocks.end()) << s;
        EXPECT_EQ(*got, *want) << s;
      }
    }
  }
  ExpectSame(blocks, ref);
}

}  // namespace
}  // namespace remat::allocator_internal
