// The request path of the caching allocator: round, pick the pool, best fit
// in the pool, else obtain memory (with PyTorch's release-and-retry steps),
// split the block found; and the free path: merge with free neighbours, cache.
// PyTorch: DeviceCachingAllocator::malloc, get_free_block, should_split,
// alloc_found_block, free, free_block, try_merge_blocks.
#include <iterator>
#include <string>

#include "device/allocator/allocator_state.h"

namespace remat::allocator_internal {

Status AllocatorState::Malloc(int64_t id, int64_t request, AllocatorOom* oom) {
  if (request < 0) {
    return Status::Invalid("allocation " + std::to_string(id) + ": negative size " +
                           std::to_string(request) + " (accepted: >= 0 bytes)");
  }
  if (live.Find(id) != nullptr) {
    return Status::Invalid("allocation " + std::to_string(id) +
                           " is already live (free it before allocating the id again)");
  }
  if (request == 0) {  // PyTorch hands out no memory for an empty tensor
    live.Set(id, live.empty());
    return Status::Ok();
  }
  const int64_t size = RoundAllocationBytes(request, options);
  BlockPool& pool = size <= kAllocSmallRequestBytes ? small_pool : large_pool;
  const int64_t segment_size = SegmentBytesFor(size, options);

  Block* block = nullptr;
  bool found = GetFreeBlock(pool, size, &block);
  if (!found) {
    if (GcActive()) GarbageCollect();
    found = AllocBlock(pool, size, segment_size, /*retry=*/false, &block) ||
            (ReleaseAvailableCachedBlocks(pool, size) &&
             AllocBlock(pool, size, segment_size, /*retry=*/false, &block)) ||
            (ReleaseCachedBlocks(), AllocBlock(pool, size, segment_size, /*retry=*/true, &block));
  }
  if (!found) {
    if (oom != nullptr) {
      oom->id = id;
      oom->request_bytes = request;
      oom->segment_bytes = segment_size;
      oom->allocated_bytes = stats.allocated_bytes;
      oom->reserved_bytes = stats.reserved_bytes;
    }
    return Status::OutOfMemory("allocation " + std::to_string(id) + " of " +
                               std::to_string(request) + " B: out of memory (reserved " +
                               std::to_string(stats.reserved_bytes) + " B)");
  }
  Block* taken = TakeBlock(block, size, ShouldSplit(*block, size));
  taken->requested = request;
  AddAllocated(taken->size, request);
  live.Set(id, taken);
  return Status::Ok();
}

bool AllocatorState::GetFreeBlock(BlockPool& pool, int64_t size, Block** out) {
  if (GcActive()) ++pool.free_block_lookups;
  auto it = pool.blocks.lower_bound(size);
  if (it == pool.blocks.end()) return false;
  if ((*it)->expandable()) {
    // A free block in front of unmapped pages counts as the size it can grow
    // to: skip ahead while the next block is smaller by that measure.
    auto growable = [](const Block* b) {
      return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
    };
    auto next = std::next(it);
    while ((*it)->expandable() && next != pool.blocks.end() && growable(*next) < growable(*it)) {
      it = next++;
    }
  }
  const int64_t max_split = options.max_split_size_bytes;
  // An oversize block does not serve a request below max_split_size...
  if (size < max_split && (*it)->size >= max_split) return false;
  // ...and serves a larger one only within max_non_split_rounding.
  if (size >= max_split && (*it)->size >= size + options.max_non_split_rounding_bytes) {
    return false;
  }
  *out = *it;
  pool.blocks.erase(it);
  return true;
}

bool AllocatorState::ShouldSplit(const Block& block, int64_t size) const {
  const int64_t remaining = block.size - size;
  if (block.pool->is_small || options.expandable_segments) {
    return remaining >= kAllocMinBlockBytes;
  }
  return size < options.max_split_size_bytes && remaining > kAllocSmallRequestBytes;
}

Block* AllocatorState::TakeBlock(Block* block, int64_t size, bool split) {
  if (split) {
    // The front `size` bytes become the allocation; the rest stays cached.
    Block* front = Splice(*block, block->addr, size, block->prev, block);
    block->addr += size;
    block->size -= size;
    block->pool->Insert(block);
    block = front;
  }
  block->allocated = true;
  return block;
}

Status AllocatorState::Free(int64_t id) {
  Block* block = live.Find(id);
  if (block == nullptr) {
    return Status::Invalid("free of allocation " + std::to_string(id) +
                           ", which is not live (free only what was allocated and not freed)");
  }
  live.Erase(id);
  if (block == live.empty()) return Status::Ok();  // an empty allocation
  block->allocated = false;
  stats.allocated_bytes -= block->size;
  stats.requested_bytes -= block->requested;
  block->requested = 0;
  CacheFreedBlock(block);
  return Status::Ok();
}

void AllocatorState::CacheFreedBlock(Block* block) {
  BlockPool& pool = *block->pool;
  TryMerge(block, block->prev, pool);
  TryMerge(block, block->next, pool);
  pool.Insert(block);
}

int64_t AllocatorState::TryMerge(Block* dst, Block* src, BlockPool& pool) {
  if (src == nullptr || src->allocated || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) {  // [src dst]
    dst->addr = src->addr;
    dst->prev = src->prev;
    if (dst->prev != nullptr) dst->prev->next = dst;
  } else {  // [dst src]
    dst->next = src->next;
    if (dst->next != nullptr) dst->next->prev = dst;
  }
  const int64_t merged = src->size;
  dst->size += merged;
  if (src->mapped) {
    pool.blocks.erase(src);
  } else {
    pool.unmapped.erase(src);
  }
  DeleteBlock(src);
  return merged;
}

}  // namespace remat::allocator_internal
