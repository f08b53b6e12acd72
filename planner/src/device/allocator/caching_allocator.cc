// CudaAllocatorModel: the public face of AllocatorState, its counters and
// snapshot, and the replay of an event sequence.
// PyTorch: DeviceCachingAllocator::getStats, snapshot, emptyCache.
#include <algorithm>
#include <string>

#include "device/allocator/allocator_state.h"

namespace remat {

using allocator_internal::AllocatorState;
using allocator_internal::Block;
using allocator_internal::BlockPool;

namespace allocator_internal {

AllocatorState::AllocatorState(const AllocatorOptions& o, const AllocatorLimit& l)
    : options(o), limit(l) {}

Block* AllocatorState::NewBlock(int64_t addr, int64_t size, BlockPool* pool) {
  Block* b = nullptr;
  if (spare.empty()) {
    b = &arena.emplace_back();
  } else {
    b = spare.back();
    spare.pop_back();
    *b = Block();
  }
  b->addr = addr;
  b->size = size;
  b->pool = pool;
  return b;
}

Block* AllocatorState::Splice(const Block& like, int64_t addr, int64_t size, Block* prev,
                              Block* next) {
  Block* b = NewBlock(addr, size, like.pool);
  b->expandable_segment = like.expandable_segment;
  b->prev = prev;
  b->next = next;
  if (prev != nullptr) prev->next = b;
  if (next != nullptr) next->prev = b;
  return b;
}

void AllocatorState::DeleteBlock(Block* b) {
  b->retired = true;
  spare.push_back(b);
}

void AllocatorState::AddReserved(int64_t bytes) {
  stats.reserved_bytes += bytes;
  stats.peak_reserved_bytes = std::max(stats.peak_reserved_bytes, stats.reserved_bytes);
}

void AllocatorState::AddAllocated(int64_t block_bytes, int64_t requested_bytes) {
  stats.allocated_bytes += block_bytes;
  stats.requested_bytes += requested_bytes;
  stats.peak_allocated_bytes = std::max(stats.peak_allocated_bytes, stats.allocated_bytes);
}

}  // namespace allocator_internal

int64_t AllocatorSegmentView::total_bytes() const {
  int64_t total = 0;
  for (const Block& b : blocks) total += b.size_bytes;
  return total;
}

struct CudaAllocatorModel::Impl {
  Impl(const AllocatorOptions& options, const AllocatorLimit& limit) : state(options, limit) {}
  AllocatorState state;
};

CudaAllocatorModel::CudaAllocatorModel(const AllocatorOptions& options, const AllocatorLimit& limit)
    : impl_(std::make_unique<Impl>(options, limit)) {}

CudaAllocatorModel::~CudaAllocatorModel() = default;

Status CudaAllocatorModel::Malloc(int64_t id, int64_t size_bytes) {
  return impl_->state.Malloc(id, size_bytes, nullptr);
}

Status CudaAllocatorModel::Free(int64_t id) { return impl_->state.Free(id); }

void CudaAllocatorModel::EmptyCache() { impl_->state.ReleaseCachedBlocks(); }

const AllocatorStats& CudaAllocatorModel::stats() const { return impl_->state.stats; }

int64_t CudaAllocatorModel::LiveRequestBytes(int64_t id) const {
  const Block* b = impl_->state.live.Find(id);
  return b == nullptr ? -1 : b->requested;
}

std::vector<AllocatorSegmentView> CudaAllocatorModel::Snapshot() const {
  // Segment heads: blocks with no predecessor, or the first mapped block
  // after an unmapped range of an expandable segment.
  std::vector<const Block*> heads;
  for (const Block& block : impl_->state.arena) {
    const Block* b = &block;
    if (b->retired) continue;
    if (b->mapped && (b->prev == nullptr || !b->prev->mapped)) heads.push_back(b);
  }
  std::sort(heads.begin(), heads.end(),
            [](const Block* a, const Block* b) { return a->addr < b->addr; });
  std::vector<AllocatorSegmentView> segments;
  for (const Block* head : heads) {
    AllocatorSegmentView view;
    view.small_pool = head->pool->is_small;
    view.expandable = head->expandable();
    for (const Block* b = head; b != nullptr && b->mapped; b = b->next) {
      view.blocks.push_back({b->size, b->allocated});
    }
    segments.push_back(std::move(view));
  }
  return segments;
}

Result<AllocatorReplay> ReplayAllocations(const std::vector<AllocEvent>& events,
                                          const AllocatorOptions& options,
                                          const AllocatorLimit& limit) {
  AllocatorState state(options, limit);
  AllocatorReplay replay;
  replay.reserved_timeline_bytes.reserve(events.size());
  replay.allocated_timeline_bytes.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const AllocEvent& e = events[i];
    AllocatorOom oom;
    const Status status = e.kind == AllocEvent::Kind::kAlloc
                              ? state.Malloc(e.id, e.size_bytes, &oom)
                              : state.Free(e.id);
    if (status.code() == StatusCode::kOutOfMemory) {
      oom.event_index = static_cast<int64_t>(i);
      replay.oom = oom;
      break;
    }
    if (!status.ok()) return status.WithPrefix("allocation event " + std::to_string(i));
    replay.reserved_timeline_bytes.push_back(state.stats.reserved_bytes);
    replay.allocated_timeline_bytes.push_back(state.stats.allocated_bytes);
  }
  replay.stats = state.stats;
  return replay;
}

}  // namespace remat
