// The allocator requests of a replay (replay.h): the reserved bytes the
// caching-allocator model tallies, and the requests as allocation events.
// Internal to the planner.
#ifndef REMAT_SRC_SIMULATE_ALLOC_REQUESTS_H_
#define REMAT_SRC_SIMULATE_ALLOC_REQUESTS_H_

#include <cstdint>
#include <vector>

#include "remat/device/caching_allocator.h"
#include "remat/device/device_memory.h"
#include "remat/profile/profile.h"

namespace remat::simulate_internal {

// The allocator requests of a replay, each under an id: the tensors by Key,
// then per layer its side output, the side output's gradient and its
// parameter gradients, then the three model-state parts, then the one
// workspace of the op running. Tallies the reserved bytes and, when asked,
// records the requests as allocation events (empty requests allocate
// nothing: none is recorded). A request the profile knows as tensors
// (TensorSizes) is recorded as one allocation each, the j-th under its id
// plus j times the count of ids, and freed tensor by tensor, last made
// first; the tally sees the whole request, as without them.
class Requests {
 public:
  // `allocator` (may be null: reserved is what is requested) and `events`
  // (may be null: nothing recorded) must outlive the object.
  Requests(int num_layers, const CachingAllocatorModel* allocator, std::vector<AllocEvent>* events);

  int64_t SkipId(int layer) const { return tensors_ + layer; }
  int64_t SkipGradId(int layer) const { return tensors_ + layers_ + layer; }
  int64_t GradientsId(int layer) const { return tensors_ + 2 * layers_ + layer; }
  int64_t ModelStateId(int part) const { return tensors_ + 3 * layers_ + part; }
  int64_t WorkspaceId() const { return tensors_ + 3 * layers_ + 3; }
  // The other micro-batches a pipeline stage holds in flight.
  int64_t InFlightId() const { return tensors_ + 3 * layers_ + 4; }

  // Requests `bytes` under `id`. `tensors` (may be null; else it must
  // outlive the request): the allocations behind `bytes`.
  void Add(int64_t id, int64_t bytes, const TensorSizes* tensors = nullptr) {
    tally_.Add(bytes);
    if (events_ != nullptr && bytes > 0) RecordAlloc(id, bytes, tensors);
  }
  // Frees the request under `id` (`bytes`, as added).
  void Remove(int64_t id, int64_t bytes) {
    tally_.Remove(bytes);
    if (events_ != nullptr && bytes > 0) RecordFree(id);
  }
  // Reserved with the op's workspace live on top, which is freed again, and
  // less `released`: bytes autograd let go before the op's peak, which a
  // caching allocator keeps reserved (`models_allocator`) and no allocator
  // model does.
  // `tensors` (may be null) and then `extra` bytes (0: none): the
  // allocations behind the workspace.
  int64_t ReservedWithWorkspace(int64_t bytes, int64_t released, const TensorSizes* tensors,
                                int64_t extra) {
    ReservedTally with = tally_;
    with.Add(bytes);
    if (!models_allocator_) with.Remove(released);
    if (events_ != nullptr && bytes > 0) RecordWorkspace(bytes, tensors, extra);
    return with.reserved();
  }
  // Bytes reserved by the requests live now.
  int64_t reserved() const { return tally_.reserved(); }

 private:
  // The events of Add, Remove and ReservedWithWorkspace (events_ set,
  // bytes > 0).
  void RecordAlloc(int64_t id, int64_t bytes, const TensorSizes* tensors);
  void RecordFree(int64_t id);
  void RecordWorkspace(int64_t bytes, const TensorSizes* tensors, int64_t extra);
  // The j-th of `tensors` under id + j * ids_, then `extra` (if any).
  void AllocPieces(int64_t id, const TensorSizes& tensors, int64_t extra);
  void FreePieces(int64_t id, const TensorSizes& tensors, int64_t extra);

  ReservedTally tally_;
  bool models_allocator_;
  std::vector<AllocEvent>* events_;
  int64_t tensors_;
  int64_t layers_;
  int64_t ids_;  // ids of whole requests; a request's j-th tensor is id + j * ids_
  // By id, the profile's list a live request was recorded as (it outlives
  // the replay); null: one allocation. Sized only when recording.
  std::vector<const TensorSizes*> split_;
};

}  // namespace remat::simulate_internal

#endif  // REMAT_SRC_SIMULATE_ALLOC_REQUESTS_H_
