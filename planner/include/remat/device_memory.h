// What a GPU's memory holds besides the tensors the simulator tracks.
//
// A budget of 24GB is the card. Before the first tensor, the CUDA context
// takes its share; cuBLAS/cuDNN keep workspaces; and PyTorch's caching
// allocator reserves more than is allocated: it rounds every request up to
// 512 B, packs small (<= 1 MiB) requests into shared 2 MiB segments, gives a
// large request its own segment rounded up to 2 MiB, and keeps freed blocks
// cached, so reserved memory grows past what is live (fragmentation).
//
// These are the named terms of a plan's device memory:
//   allocated peak  the simulator's peak (torch.cuda.max_memory_allocated)
//   + allocator_rounding    the allocator's rounded segments above it, from
//                           the simulated timeline (SimulationResult)
//   + fragmentation         a fraction of the rounded peak, on top
//   = reserved peak         (torch.cuda.max_memory_reserved)
//   + cuda_context + workspaces = the device total judged against the budget
// The presets per device are in analytic/devices.cc (docs/device-memory.md
// says where their numbers come from); flags override them one by one.
#ifndef REMAT_DEVICE_MEMORY_H_
#define REMAT_DEVICE_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "remat/caching_allocator.h"
#include "remat/status.h"

namespace remat {

// The caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp), as
// remat/caching_allocator.h's replay uses them.
struct CachingAllocatorModel {
  int64_t min_block_bytes = kAllocMinBlockBytes;        // every request is rounded up to this
  int64_t small_size_bytes = kAllocSmallRequestBytes;   // requests up to this are small
  int64_t small_segment_bytes = kAllocSmallSegmentBytes;  // small requests share segments of this
  int64_t large_round_bytes = kAllocRoundLargeBytes;    // a large request's segment is rounded to this
};

// A request's size after the allocator's 512 B rounding; 0 stays 0 (PyTorch
// allocates nothing for an empty tensor).
int64_t RoundRequest(int64_t bytes, const CachingAllocatorModel& model);

// The bytes reserved for a set of live requests: the large ones' own
// segments plus as many shared small segments as their rounded sizes fill.
// Requests are added and removed by size (a removal must match an addition).
class ReservedTally {
 public:
  // Without a model, reserved() == allocated(): the CPU allocator reserves
  // nothing beyond what is live.
  explicit ReservedTally(const CachingAllocatorModel* model = nullptr) : model_(model) {}
  void Add(int64_t bytes) { Change(bytes, +1); }
  void Remove(int64_t bytes) { Change(bytes, -1); }
  int64_t allocated() const { return allocated_; }
  int64_t reserved() const;

 private:
  void Change(int64_t bytes, int sign);
  const CachingAllocatorModel* model_;
  int64_t allocated_ = 0;
  int64_t small_rounded_ = 0;   // rounded small requests, packed into shared segments
  int64_t large_reserved_ = 0;  // large requests' own segments
};

// The terms of one device, from a preset or flags. All zero (and no
// allocator model) is a CPU: the device total is the allocated peak.
struct DeviceMemoryTerms {
  std::string source;              // "h200 preset", "flags", ... (for reports); "" = none
  int64_t cuda_context_bytes = 0;  // CUDA context + driver reservation
  int64_t workspace_bytes = 0;     // cuBLAS/cuDNN workspaces outside the simulated tensors
  double fragmentation = 0;        // fraction of the rounded reserved peak held on top, [0, 0.5]
  bool caching_allocator = false;  // round requests per CachingAllocatorModel
  CachingAllocatorModel allocator;

  int64_t fixed_bytes() const { return cuda_context_bytes + workspace_bytes; }
  // Whether any term is in effect (false: reports and fits as without terms).
  bool any() const {
    return cuda_context_bytes > 0 || workspace_bytes > 0 || fragmentation > 0 || caching_allocator;
  }
};

// A plan's device memory, every term named.
struct DeviceMemoryUse {
  int64_t allocated_peak_bytes = 0;      // the simulator's peak
  int64_t allocator_rounding_bytes = 0;  // rounded segments' peak above allocated_peak_bytes
  int64_t fragmentation_bytes = 0;       // fragmentation x the rounded peak
  int64_t reserved_peak_bytes = 0;       // allocated + rounding + fragmentation
  int64_t cuda_context_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t total_bytes = 0;  // reserved + context + workspaces: what must fit
};

// The use of a plan whose simulated allocated peak is `allocated_peak` and
// whose allocator-rounded peak (SimulationResult::reserved_peak_bytes) is
// `rounded_peak`. Sums saturate at kMaxBytes.
DeviceMemoryUse AccountDeviceMemory(int64_t allocated_peak, int64_t rounded_peak,
                                    const DeviceMemoryTerms& terms);

// The bytes of a budget left for the simulated tensors: (budget - fixed
// terms) / (1 + fragmentation), at least 1 (0 stays 0: no budget).
int64_t TensorBudget(int64_t budget_bytes, const DeviceMemoryTerms& terms);

// Explicit settings, each overriding the preset's term.
struct DeviceMemoryOverrides {
  std::optional<int64_t> cuda_context_bytes;
  std::optional<int64_t> workspace_bytes;
  std::optional<double> fragmentation;
  bool any() const { return cuda_context_bytes || workspace_bytes || fragmentation; }
};

// The terms of `device` (a name LookupDevice knows; empty: none, all zero)
// with `overrides` applied. Any override turns the caching-allocator model on
// (the terms describe a CUDA card). Errors name the device.
Result<DeviceMemoryTerms> ResolveDeviceMemory(std::string_view device,
                                              const DeviceMemoryOverrides& overrides);

// "600MiB" (ParseBytes), or "0" / "0B" for none.
Result<int64_t> ParseTermBytes(std::string_view text);
// "5%" or "0.05": a fraction in [0, 0.5].
Result<double> ParseFraction(std::string_view text);

}  // namespace remat

#endif  // REMAT_DEVICE_MEMORY_H_
