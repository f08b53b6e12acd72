#include "simulate/alloc_requests.h"

#include <numeric>

namespace remat::simulate_internal {
namespace {

// Whether `tensors` (may be null) and then `extra` bytes (0: none) are the
// allocations behind `bytes` (TensorSizes): more than one, adding up to it.
bool SplitsInto(const TensorSizes* tensors, int64_t extra, int64_t bytes) {
  return tensors != nullptr && tensors->size() + (extra > 0 ? 1 : 0) > 1 &&
         std::accumulate(tensors->begin(), tensors->end(), extra) == bytes;
}

}  // namespace

Requests::Requests(int num_layers, const CachingAllocatorModel* allocator,
                   std::vector<AllocEvent>* events)
    : tally_(allocator),
      models_allocator_(allocator != nullptr),
      events_(events),
      tensors_(3 * (num_layers + 1)),
      layers_(num_layers),
      ids_(tensors_ + 3 * layers_ + 4),
      split_(events != nullptr ? ids_ : 0, nullptr) {}

void Requests::RecordAlloc(int64_t id, int64_t bytes, const TensorSizes* tensors) {
  if (!SplitsInto(tensors, 0, bytes)) {
    events_->push_back(AllocEvent::Alloc(id, bytes));
    return;
  }
  AllocPieces(id, *tensors, 0);
  split_[id] = tensors;
}

void Requests::RecordFree(int64_t id) {
  if (split_[id] == nullptr) {
    events_->push_back(AllocEvent::Free(id));
    return;
  }
  FreePieces(id, *split_[id], 0);
  split_[id] = nullptr;
}

void Requests::RecordWorkspace(int64_t bytes, const TensorSizes* tensors, int64_t extra) {
  if (SplitsInto(tensors, extra, bytes)) {
    AllocPieces(WorkspaceId(), *tensors, extra);
    FreePieces(WorkspaceId(), *tensors, extra);
  } else {
    events_->push_back(AllocEvent::Alloc(WorkspaceId(), bytes));
    events_->push_back(AllocEvent::Free(WorkspaceId()));
  }
}

void Requests::AllocPieces(int64_t id, const TensorSizes& tensors, int64_t extra) {
  for (size_t j = 0; j < tensors.size(); ++j) {
    if (tensors[j] > 0) events_->push_back(AllocEvent::Alloc(id + j * ids_, tensors[j]));
  }
  if (extra > 0) events_->push_back(AllocEvent::Alloc(id + tensors.size() * ids_, extra));
}

void Requests::FreePieces(int64_t id, const TensorSizes& tensors, int64_t extra) {
  if (extra > 0) events_->push_back(AllocEvent::Free(id + tensors.size() * ids_));
  for (size_t j = tensors.size(); j-- > 0;) {
    if (tensors[j] > 0) events_->push_back(AllocEvent::Free(id + j * ids_));
  }
}

}  // namespace remat::simulate_internal
