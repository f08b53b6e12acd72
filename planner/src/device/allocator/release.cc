// Giving memory back: what PyTorch frees when a new segment does not fit
// (oversize blocks first, then every cached segment), what empty_cache frees,
// and the garbage collector under a memory-fraction cap.
// PyTorch: DeviceCachingAllocator::release_available_cached_blocks,
// release_cached_blocks, release_blocks, release_block, unmap_block,
// release_expandable_segment, garbage_collect_cached_blocks.
#include <vector>

#include "device/allocator/allocator_state.h"

namespace remat::allocator_internal {

bool AllocatorState::ReleaseAvailableCachedBlocks(BlockPool& pool, int64_t size) {
  const int64_t max_split = options.max_split_size_bytes;
  if (max_split == kAllocUnlimited) return false;
  // Only whole cudaMalloc'd segments can be cudaFree'd: the model skips
  // expandable blocks and split blocks here (PyTorch assumes neither occurs).
  auto releasable = [](const Block* b) { return !b->expandable() && !b->is_split(); };
  const int64_t wanted = size < max_split ? max_split : size;
  auto it = pool.blocks.lower_bound(wanted);
  if (it != pool.blocks.end()) {
    // One block large enough.
    if (!releasable(*it)) return false;
    ReleaseBlock(*it);
    return true;
  }
  // Free oversize blocks, largest first, until enough is released.
  int64_t released = 0;
  std::vector<Block*> victims;
  for (auto r = pool.blocks.rbegin(); r != pool.blocks.rend() && released < wanted; ++r) {
    if ((*r)->size < max_split || !releasable(*r)) break;
    released += (*r)->size;
    victims.push_back(*r);
  }
  for (Block* b : victims) ReleaseBlock(b);
  return released >= wanted;
}

void AllocatorState::ReleaseCachedBlocks() {
  ReleaseBlocks(large_pool);
  ReleaseBlocks(small_pool);
}

void AllocatorState::ReleaseBlocks(BlockPool& pool) {
  std::vector<Block*> whole;
  std::vector<Block*> to_unmap;
  for (Block* b : pool.blocks) {
    if (b->expandable()) {
      to_unmap.push_back(b);
    } else if (!b->is_split()) {
      whole.push_back(b);
    }
  }
  for (Block* b : whole) ReleaseBlock(b);
  for (Block* b : to_unmap) {
    UnmapBlock(b);
    if (!b->is_split() && !b->mapped) {
      // Nothing of the segment is mapped any more: release it.
      pool.unmapped.erase(b);
      DeleteBlock(b);
      --stats.expandable_segments;
    }
  }
}

void AllocatorState::ReleaseBlock(Block* block) {
  block->pool->blocks.erase(block);
  AddReserved(-block->size);
  --stats.segments;
  ++stats.device_frees;
  DeleteBlock(block);
}

void AllocatorState::UnmapBlock(Block* block) {
  // The whole pages inside the free block.
  const int64_t page = PageBytes(*block->pool);
  const int64_t begin = (block->addr + page - 1) / page * page;
  const int64_t end = (block->addr + block->size) / page * page;
  if (begin >= end) return;
  BlockPool& pool = *block->pool;
  pool.blocks.erase(block);
  // What stays mapped around the pages: free blocks before and after.
  if (begin > block->addr) {
    pool.Insert(Splice(*block, block->addr, begin - block->addr, block->prev, block));
  }
  const int64_t block_end = block->addr + block->size;
  if (block_end > end) pool.Insert(Splice(*block, end, block_end - end, block, block->next));
  block->addr = begin;
  block->size = end - begin;
  block->mapped = false;
  TryMerge(block, block->prev, pool);
  TryMerge(block, block->next, pool);
  pool.unmapped.insert(block);
  AddReserved(-(end - begin));
  ++stats.device_frees;
}

void AllocatorState::GarbageCollect() {
  const auto threshold = static_cast<int64_t>(options.garbage_collection_threshold *
                                              static_cast<double>(limit.fraction_cap_bytes));
  if (stats.reserved_bytes <= threshold) return;
  const int64_t target = stats.reserved_bytes - threshold;
  // Only whole cached segments of the large pool, by age: the pool's free
  // block lookups since the block was cached.
  auto freeable = [](const Block* b) { return !b->is_split() && !b->expandable(); };
  int64_t total_age = 0;
  int64_t count = 0;
  for (const Block* b : large_pool.blocks) {
    if (freeable(b)) {
      total_age += large_pool.Age(b);
      ++count;
    }
  }
  int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && count > 0) {
    // Free every block at least as old as the average, then look again.
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(count);
    freed = false;
    std::vector<Block*> victims;
    for (Block* b : large_pool.blocks) {
      if (freeable(b) && static_cast<double>(large_pool.Age(b)) >= age_threshold) {
        victims.push_back(b);
      }
    }
    for (Block* b : victims) {
      freed = true;
      reclaimed += b->size;
      total_age -= large_pool.Age(b);
      --count;
      ReleaseBlock(b);
    }
  }
}

}  // namespace remat::allocator_internal
