// Obtaining memory: a new cudaMalloc'd segment, or pages mapped into an
// expandable segment, within the limits.
// PyTorch: DeviceCachingAllocator::alloc_block, find_expandable_block,
// map_block, try_allocate_expandable_block; ExpandableSegment::map.
#include <algorithm>

#include "device/allocator/allocator_state.h"

namespace remat::allocator_internal {
namespace {

// The virtual range of one expandable segment. PyTorch reserves 1.125 x the
// card; the model reserves more than any card so a segment never fills up.
constexpr int64_t kExpandableSpanBytes = int64_t{1} << 44;

int64_t RoundUp(int64_t value, int64_t unit) { return (value + unit - 1) / unit * unit; }

}  // namespace

bool AllocatorState::DriverHas(int64_t bytes) {
  if (limit.driver_bytes <= 0 || stats.reserved_bytes + bytes <= limit.driver_bytes) return true;
  ++stats.driver_refusals;
  return false;
}

int64_t AllocatorState::PageBytes(const BlockPool& pool) const {
  return pool.is_small ? kAllocSmallSegmentBytes : options.large_segment_bytes;
}

bool AllocatorState::AllocBlock(BlockPool& pool, int64_t size, int64_t segment_size, bool retry,
                                Block** out) {
  if (retry) ++stats.alloc_retries;
  // The fraction cap is checked with the full segment size, expandable or not.
  if (limit.fraction_cap_bytes > 0 &&
      stats.reserved_bytes + segment_size > limit.fraction_cap_bytes) {
    return false;
  }
  if (options.expandable_segments) {
    *out = TryAllocateExpandable(pool, size);
    return *out != nullptr;
  }
  if (!DriverHas(segment_size)) return false;
  Block* block = NewBlock(next_addr, segment_size, &pool);
  next_addr += segment_size;
  AddReserved(segment_size);
  ++stats.segments;
  ++stats.device_allocs;
  *out = block;
  return true;
}

Block* AllocatorState::FindExpandableBlock(BlockPool& pool, int64_t size) {
  auto allocatable = [](const Block* b) { return b != nullptr && !b->allocated; };
  auto has_room = [&](const Block* b) {
    int64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += b->size;
      b = b->next;
    }
    return bytes >= size;
  };
  // The lowest unmapped range (with a free block just before it) with room.
  for (Block* c : pool.unmapped) {
    if (allocatable(c->prev)) c = c->prev;
    if (has_room(c)) return c;
  }
  const int64_t page = PageBytes(pool);
  const int64_t base = RoundUp(next_addr, page);
  const int64_t span = kExpandableSpanBytes / page * page;
  next_addr = base + span;
  Block* segment = NewBlock(base, span, &pool);
  segment->mapped = false;
  segment->expandable_segment = expandable_segments_created++;
  ++stats.expandable_segments;
  pool.unmapped.insert(segment);
  return segment;
}

bool AllocatorState::MapBlock(Block* to_map, int64_t size) {
  // Whole pages from the block's (page-aligned) start; all or nothing.
  const int64_t mapped = RoundUp(size, PageBytes(*to_map->pool));
  if (!DriverHas(mapped)) return false;
  BlockPool& pool = *to_map->pool;
  pool.unmapped.erase(to_map);
  to_map->mapped = true;
  if (mapped < to_map->size) {
    Block* rest =
        Splice(*to_map, to_map->addr + mapped, to_map->size - mapped, to_map, to_map->next);
    rest->mapped = false;
    to_map->size = mapped;
    pool.unmapped.insert(rest);
  }
  TryMerge(to_map, to_map->prev, pool);
  TryMerge(to_map, to_map->next, pool);
  pool.Insert(to_map);
  AddReserved(mapped);
  ++stats.device_allocs;
  return true;
}

Block* AllocatorState::TryAllocateExpandable(BlockPool& pool, int64_t size) {
  Block* candidate = FindExpandableBlock(pool, size);
  // candidate: unmapped, or a free block followed by unmapped pages.
  if (!candidate->mapped && !MapBlock(candidate, std::min(candidate->size, size))) {
    return nullptr;
  }
  while (candidate->size < size) {
    Block* next = candidate->next;  // unmapped: map what is missing, merging back
    if (!MapBlock(next, std::min(size - candidate->size, next->size))) return nullptr;
    candidate = next;
  }
  pool.blocks.erase(candidate);
  return candidate;
}

}  // namespace remat::allocator_internal
