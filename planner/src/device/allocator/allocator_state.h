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
#include <limits>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "device/allocator/node_store.h"
#include "remat/device/caching_allocator.h"

namespace remat::allocator_internal {

struct Block;
struct BlockPool;

// A cached free block in its pool, under PyTorch's pool order
// (BlockComparatorSize): by size, then address. The key is held beside the
// block so a search reads no block.
struct PoolEntry {
  int64_t size = 0;
  int64_t addr = 0;
  Block* block = nullptr;
};
struct BySizeThenAddr {
  bool operator()(const PoolEntry& a, const PoolEntry& b) const {
    if (a.size != b.size) return a.size < b.size;
    return a.addr < b.addr;
  }
};
using PoolEntries = std::set<PoolEntry, BySizeThenAddr, NodeAllocator<PoolEntry>>;

// A contiguous range of one segment: allocated, cached free, or (expandable
// segments only) not mapped to memory. prev/next link the blocks of a segment
// in address order.
struct Block {
  int64_t addr = 0;  // model address
  int64_t size = 0;
  BlockPool* pool = nullptr;
  bool allocated = false;
  bool mapped = true;
  bool cached = false;              // in its pool's `blocks` (at `entry`)
  bool retired = false;             // merged away or released: its arena slot is spare
  int64_t expandable_segment = -1;  // index of its expandable segment; -1 = cudaMalloc'd
  Block* prev = nullptr;
  Block* next = nullptr;
  int64_t requested = 0;      // the request it serves (allocated blocks)
  int64_t gc_count_base = 0;  // pool's free-block lookups when it was cached
  PoolEntries::const_iterator entry;

  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool expandable() const { return expandable_segment >= 0; }
};

struct ByAddr {
  bool operator()(const Block* a, const Block* b) const { return a->addr < b->addr; }
};

// A pool's cached free mapped blocks in PyTorch's order, iterated as
// Block*. A block knows its own entry: erasing it searches nothing.
class FreeBlocks {
 public:
  class iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Block*;
    using difference_type = std::ptrdiff_t;
    using pointer = Block* const*;
    using reference = Block*;
    iterator() = default;
    explicit iterator(PoolEntries::const_iterator it) : it_(it) {}
    Block* operator*() const { return it_->block; }
    iterator& operator++() {
      ++it_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++it_;
      return old;
    }
    iterator& operator--() {
      --it_;
      return *this;
    }
    iterator operator--(int) {
      iterator old = *this;
      --it_;
      return old;
    }
    bool operator==(const iterator& o) const { return it_ == o.it_; }
    bool operator!=(const iterator& o) const { return it_ != o.it_; }
    PoolEntries::const_iterator base() const { return it_; }

   private:
    PoolEntries::const_iterator it_;
  };
  using reverse_iterator = std::reverse_iterator<iterator>;

  explicit FreeBlocks(NodeStore* nodes) : entries_(NodeAllocator<PoolEntry>(nodes)) {}

  void insert(Block* b) {
    b->entry = entries_.insert(PoolEntry{b->size, b->addr, b}).first;
    b->cached = true;
  }
  // Removes `b` if it is cached here.
  void erase(Block* b) {
    if (!b->cached) return;
    entries_.erase(b->entry);
    b->cached = false;
  }
  void erase(iterator it) { erase(*it); }
  // The first block of at least `size` bytes (the lowest address among equals).
  iterator lower_bound(int64_t size) const {
    return iterator(
        entries_.lower_bound(PoolEntry{size, std::numeric_limits<int64_t>::min(), nullptr}));
  }
  iterator begin() const { return iterator(entries_.begin()); }
  iterator end() const { return iterator(entries_.end()); }
  reverse_iterator rbegin() const { return reverse_iterator(end()); }
  reverse_iterator rend() const { return reverse_iterator(begin()); }
  size_t size() const { return entries_.size(); }

 private:
  PoolEntries entries_;
};

struct BlockPool {
  BlockPool(bool small, NodeStore* nodes) : is_small(small), blocks(nodes) {}
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
  // The pools' entries, recycled (declared before the pools that use it).
  NodeStore entry_nodes;
  BlockPool small_pool{true, &entry_nodes};
  BlockPool large_pool{false, &entry_nodes};
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
  bool DriverHas(int64_t bytes) const;
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
