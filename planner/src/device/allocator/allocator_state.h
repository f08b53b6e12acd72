// The state behind CudaAllocatorModel (remat/device/caching_allocator.h): blocks,
// the two pools and the operations PyTorch's DeviceCachingAllocator performs
// on them. Each .cc beside this header holds one part of the mechanism:
//   malloc_free.cc  the request path: best fit, split, free and merge
//   segments.cc     obtaining memory: cudaMalloc'd and expandable segments
//   release.cc      giving memory back: oversize, all cached, garbage collection
//   caching_allocator.cc  the blocks' arena, the public class, stats and snapshot
#ifndef REMAT_ALLOCATOR_ALLOCATOR_STATE_H_
#define REMAT_ALLOCATOR_ALLOCATOR_STATE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "remat/device/caching_allocator.h"

namespace remat::allocator_internal {

struct Block;
struct BlockPool;

// A contiguous range of one segment: allocated, cached free, or (expandable
// segments only) not mapped to memory. prev/next link the blocks of a segment
// in address order.
struct Block {
  int64_t addr = 0;  // model address
  int64_t size = 0;
  BlockPool* pool = nullptr;
  bool allocated = false;
  bool mapped = true;
  bool cached = false;              // in its pool's `blocks`
  bool retired = false;             // merged away or released: its arena slot is spare
  int64_t expandable_segment = -1;  // index of its expandable segment; -1 = cudaMalloc'd
  Block* prev = nullptr;
  Block* next = nullptr;
  int64_t requested = 0;      // the request it serves (allocated blocks)
  int64_t gc_count_base = 0;  // pool's free-block lookups when it was cached
  uint32_t bucket = 0;        // its FreeBlocks bucket while cached

  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool expandable() const { return expandable_segment >= 0; }
};

struct ByAddr {
  bool operator()(const Block* a, const Block* b) const { return a->addr < b->addr; }
};

// A pool's cached free mapped blocks in PyTorch's order (BlockComparatorSize:
// by size, then address), iterated as Block*: the sizes in a sorted list,
// each with its blocks' addresses in a sorted vector. A pool holds few
// distinct sizes (a training step's tensors repeat), so an insert, erase or
// best-fit search reads a few cache lines and moves a few entries. A
// bucket keeps its addresses from the highest to the lowest, so the best
// fit (its lowest address) is taken from the back, moving none. The
// buckets stay in place in an arena (an emptied one is reused for the next
// new size); the sorted list holds their indices, so a size that comes or
// goes moves 4-byte indices, not buckets.
class FreeBlocks {
  struct Slot {
    int64_t addr;
    Block* block;
  };
  struct Bucket {
    int64_t size;
    std::vector<Slot> slots;  // by address, highest first
  };

 public:
  class iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Block*;
    using difference_type = std::ptrdiff_t;
    using pointer = Block* const*;
    using reference = Block*;
    iterator() = default;
    iterator(const FreeBlocks* f, size_t i, size_t j) : f_(f), i_(i), j_(j) {}
    Block* operator*() const {
      const auto& slots = f_->At(i_).slots;
      return slots[slots.size() - 1 - j_].block;
    }
    iterator& operator++() {
      if (++j_ == f_->At(i_).slots.size()) {
        ++i_;
        j_ = 0;
      }
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++*this;
      return old;
    }
    iterator& operator--() {
      if (j_ == 0) {
        --i_;
        j_ = f_->At(i_).slots.size() - 1;
      } else {
        --j_;
      }
      return *this;
    }
    iterator operator--(int) {
      iterator old = *this;
      --*this;
      return old;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_ && j_ == o.j_; }
    bool operator!=(const iterator& o) const { return !(*this == o); }

   private:
    friend class FreeBlocks;
    const FreeBlocks* f_ = nullptr;
    size_t i_ = 0;  // position in the sorted list
    size_t j_ = 0;
  };
  using reverse_iterator = std::reverse_iterator<iterator>;

  void insert(Block* b) {
    const size_t pos = FindBucket(b->size);
    if (pos == order_.size() || At(pos).size != b->size) {
      uint32_t index;
      if (!spare_.empty()) {
        index = spare_.back();
        spare_.pop_back();
        arena_[index].size = b->size;
      } else {
        index = static_cast<uint32_t>(arena_.size());
        arena_.push_back(Bucket{b->size, {}});
      }
      order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(pos), index);
    }
    const uint32_t index = order_[pos];
    auto& slots = arena_[index].slots;
    auto at = std::lower_bound(slots.begin(), slots.end(), b->addr,
                               [](const Slot& s, int64_t addr) { return s.addr > addr; });
    if (at != slots.end() && at->addr == b->addr) return;
    slots.insert(at, Slot{b->addr, b});
    b->cached = true;
    b->bucket = index;
    ++count_;
  }
  // Removes `b` if it is cached here: its bucket is the one it was inserted
  // in (a cached block's size does not change), so only an emptied bucket
  // is searched for in the sorted list.
  void erase(Block* b) {
    if (!b->cached) return;
    auto& slots = arena_[b->bucket].slots;
    auto at = std::lower_bound(slots.begin(), slots.end(), b->addr,
                               [](const Slot& s, int64_t addr) { return s.addr > addr; });
    const size_t pos = slots.size() == 1 ? FindBucket(b->size) : 0;  // read when emptied
    Remove(pos, b->bucket, at);
  }
  // Removes the block at `it`, found where it stands.
  void erase(iterator it) {
    const uint32_t index = order_[it.i_];
    auto& slots = arena_[index].slots;
    Remove(it.i_, index, slots.end() - 1 - static_cast<std::ptrdiff_t>(it.j_));
  }
  // The first block of at least `size` bytes (the lowest address among equals).
  iterator lower_bound(int64_t size) const { return iterator(this, FindBucket(size), 0); }
  iterator begin() const { return iterator(this, 0, 0); }
  iterator end() const { return iterator(this, order_.size(), 0); }
  reverse_iterator rbegin() const { return reverse_iterator(end()); }
  reverse_iterator rend() const { return reverse_iterator(begin()); }
  size_t size() const { return count_; }

 private:
  // Removes the slot `at` of bucket `index`, which stands at position `pos`
  // of the sorted list when `at` is its only slot.
  void Remove(size_t pos, uint32_t index, std::vector<Slot>::iterator at) {
    auto& slots = arena_[index].slots;
    at->block->cached = false;
    slots.erase(at);
    if (slots.empty()) {
      spare_.push_back(index);
      order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(pos));
    }
    --count_;
  }
  // The bucket at position `i` of the sorted list.
  const Bucket& At(size_t i) const { return arena_[order_[i]]; }
  // The position of the first bucket of at least `size` bytes.
  size_t FindBucket(int64_t size) const {
    size_t lo = 0, hi = order_.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (arena_[order_[mid]].size < size) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  std::vector<Bucket> arena_;     // every bucket made; the empty ones are spare
  std::vector<uint32_t> order_;   // the non-empty buckets by size
  std::vector<uint32_t> spare_;   // emptied buckets (their storage kept), to reuse
  size_t count_ = 0;
};

struct BlockPool {
  explicit BlockPool(bool small) : is_small(small) {}
  const bool is_small;
  FreeBlocks blocks;                  // cached free mapped blocks
  std::set<Block*, ByAddr> unmapped;  // unmapped ranges of expandable segments
  int64_t free_block_lookups = 0;     // get_free_blocks_call_count (GC ages)

  void Insert(Block* b) {
    b->gc_count_base = free_block_lookups;
    blocks.insert(b);
  }
  int64_t Age(const Block* b) const { return free_block_lookups - b->gc_count_base; }
};

// The live allocations by id: ids below kDenseIds (the replayed events
// number their tensors from 0) in a vector, any other in a hash map.
class LiveBlocks {
 public:
  // The block of allocation `id`: nullptr if it is not live, `empty()` for
  // an empty allocation.
  Block* Find(int64_t id) const {
    if (Dense(id)) {
      return static_cast<size_t>(id) < dense_.size() ? dense_[static_cast<size_t>(id)] : nullptr;
    }
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : it->second;
  }
  void Set(int64_t id, Block* b) {
    if (!Dense(id)) {
      sparse_[id] = b;
      return;
    }
    const auto i = static_cast<size_t>(id);
    if (i >= dense_.size()) dense_.resize(std::max(i + 1, 2 * dense_.size()), nullptr);
    dense_[i] = b;
  }
  void Erase(int64_t id) {
    if (Dense(id)) {
      dense_[static_cast<size_t>(id)] = nullptr;
    } else {
      sparse_.erase(id);
    }
  }
  Block* empty() { return &empty_; }

 private:
  static constexpr int64_t kDenseIds = int64_t{1} << 20;
  static bool Dense(int64_t id) { return id >= 0 && id < kDenseIds; }
  std::vector<Block*> dense_;
  std::unordered_map<int64_t, Block*> sparse_;
  Block empty_;  // requested 0
};

struct AllocatorState {
  AllocatorState(const AllocatorOptions& options, const AllocatorLimit& limit);

  AllocatorOptions options;
  AllocatorLimit limit;
  BlockPool small_pool{true};
  BlockPool large_pool{false};
  std::deque<Block> arena;    // every block made (retired ones are spare)
  std::vector<Block*> spare;  // retired blocks of the arena, to reuse
  LiveBlocks live;
  AllocatorStats stats;
  int64_t next_addr = 0;
  int64_t expandable_segments_created = 0;

  // Blocks, from the arena.
  Block* NewBlock(int64_t addr, int64_t size, BlockPool* pool);
  // A new free block [addr, addr + size) of `like`'s pool and segment, linked
  // between `prev` and `next` (either may be null).
  Block* Splice(const Block& like, int64_t addr, int64_t size, Block* prev, Block* next);
  void DeleteBlock(Block* b);

  // malloc_free.cc
  // The whole request path; OutOfMemory sets *oom.
  Status Malloc(int64_t id, int64_t size, AllocatorOom* oom);
  Status Free(int64_t id);
  bool GetFreeBlock(BlockPool& pool, int64_t size, Block** out);
  bool ShouldSplit(const Block& block, int64_t size) const;
  Block* TakeBlock(Block* block, int64_t size, bool split);
  void CacheFreedBlock(Block* block);
  // Merges src into dst if src is a free block of the same mapping; returns
  // the bytes merged (0: none).
  int64_t TryMerge(Block* dst, Block* src, BlockPool& pool);

  // segments.cc
  bool AllocBlock(BlockPool& pool, int64_t size, int64_t segment_size, bool retry, Block** out);
  // Whether the driver hands out `bytes` more; counts a refusal.
  bool DriverHas(int64_t bytes);
  Block* FindExpandableBlock(BlockPool& pool, int64_t size);
  bool MapBlock(Block* to_map, int64_t size);
  Block* TryAllocateExpandable(BlockPool& pool, int64_t size);
  int64_t PageBytes(const BlockPool& pool) const;

  // release.cc
  bool ReleaseAvailableCachedBlocks(BlockPool& pool, int64_t size);
  void ReleaseCachedBlocks();
  void ReleaseBlocks(BlockPool& pool);
  void ReleaseBlock(Block* block);  // cudaFree of a whole cached segment
  void UnmapBlock(Block* block);
  void GarbageCollect();
  bool GcActive() const {
    return limit.fraction_cap_bytes > 0 && options.garbage_collection_threshold > 0;
  }

  void AddReserved(int64_t bytes);
  void AddAllocated(int64_t block_bytes, int64_t requested_bytes);
};

}  // namespace remat::allocator_internal

#endif  // REMAT_ALLOCATOR_ALLOCATOR_STATE_H_
