// The state behind CudaAllocatorModel (remat/device/caching_allocator.h): blocks,
// the two pools and the operations PyTorch's DeviceCachingAllocator performs
// on them. Each .cc beside this header holds one part of the mechanism:
//   malloc_free.cc  the request path: best fit, split, free and merge
//   segments.cc     obtaining memory: cudaMalloc'd and expandable segments
//   release.cc      giving memory back: oversize, all cached, garbage collection
//   model.cc        the public class, stats and snapshot
#ifndef REMAT_ALLOCATOR_ALLOCATOR_STATE_H_
#define REMAT_ALLOCATOR_ALLOCATOR_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "remat/device/caching_allocator.h"

namespace remat::allocator_internal {

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
  int64_t expandable_segment = -1;  // index of its expandable segment; -1 = cudaMalloc'd
  Block* prev = nullptr;
  Block* next = nullptr;
  int64_t requested = 0;      // the request it serves (allocated blocks)
  int64_t gc_count_base = 0;  // pool's free-block lookups when it was cached

  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool expandable() const { return expandable_segment >= 0; }
};

// PyTorch's pool order: by size, then address (BlockComparatorSize).
struct BySizeThenAddr {
  bool operator()(const Block* a, const Block* b) const {
    if (a->size != b->size) return a->size < b->size;
    return a->addr < b->addr;
  }
};
struct ByAddr {
  bool operator()(const Block* a, const Block* b) const { return a->addr < b->addr; }
};

struct BlockPool {
  explicit BlockPool(bool small) : is_small(small) {}
  const bool is_small;
  std::set<Block*, BySizeThenAddr> blocks;  // cached free mapped blocks
  std::set<Block*, ByAddr> unmapped;        // unmapped ranges of expandable segments
  int64_t free_block_lookups = 0;           // get_free_blocks_call_count (GC ages)

  void Insert(Block* b) {
    b->gc_count_base = free_block_lookups;
    blocks.insert(b);
  }
  int64_t Age(const Block* b) const { return free_block_lookups - b->gc_count_base; }
};

struct AllocatorState {
  AllocatorState(const AllocatorOptions& options, const AllocatorLimit& limit);

  AllocatorOptions options;
  AllocatorLimit limit;
  BlockPool small_pool{true};
  BlockPool large_pool{false};
  std::unordered_map<Block*, std::unique_ptr<Block>> owned;  // every block
  std::unordered_map<int64_t, Block*> live;                  // id -> allocated block
  AllocatorStats stats;
  int64_t next_addr = 0;
  int64_t expandable_segments_created = 0;

  // Blocks.
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
