// What a GPU's memory holds besides the tensors the simulator tracks.
//
// A budget of 24GB is the card. Before the first tensor, the CUDA context
// takes its share; cuBLAS/cuDNN keep workspaces; and PyTorch's caching
// allocator reserves more than is allocated: it rounds every request, packs
// small requests into shared segments, splits cached blocks and keeps freed
// ones cached, so reserved memory grows past what is live.
//
// These are the named terms of a plan's device memory:
//   allocated peak  the simulator's peak (torch.cuda.max_memory_allocated)
//   reserved peak   (torch.cuda.max_memory_reserved) on a device with a
//                   caching allocator: the plan's training steps replayed
//                   through the allocator model (remat/device/caching_allocator.h)
//                   until its reserved state repeats; with a user's
//                   fragmentation fraction instead: allocated + the rounded
//                   segments' excess (ReservedTally) + fraction x the rounded peak
//   + cuda_context + workspaces = the device peak judged against the budget
// The presets per device are in analytic/devices.cc (docs/device-memory.md
// says where their numbers come from); flags override them one by one.
#ifndef REMAT_DEVICE_MEMORY_H_
#define REMAT_DEVICE_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "remat/device/caching_allocator.h"
#include "remat/io/status.h"

namespace remat {

// The caching allocator's constants (c10/cuda/CUDACachingAllocator.cpp), as
// remat/device/caching_allocator.h's replay uses them.
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
  int64_t reserved() const { return model_ == nullptr ? allocated_ : RoundedReserved(); }

 private:
  // Inline: the simulator changes a tally a few times per op.
  void Change(int64_t bytes, int sign) {
    if (bytes <= 0) return;
    allocated_ += sign * bytes;
    if (model_ != nullptr) ChangeRounded(bytes, sign);
  }
  // The rounded sums of the model (model_ set, bytes > 0).
  void ChangeRounded(int64_t bytes, int sign);
  int64_t RoundedReserved() const;
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
  bool caching_allocator = false;  // PyTorch's CUDA caching allocator holds the tensors
  CachingAllocatorModel allocator;
  // The user's fragmentation fraction (--fragmentation), [0, 0.5]: set, the
  // reserved peak is the rounded peak plus this fraction of it instead of
  // the allocator replay.
  std::optional<double> fragmentation;
  // The allocator's settings the replay follows (PYTORCH_CUDA_ALLOC_CONF),
  // and their text as given ("" = PyTorch's defaults).
  AllocatorOptions alloc_conf;
  std::string alloc_conf_text;

  int64_t fixed_bytes() const { return cuda_context_bytes + workspace_bytes; }
  double fragmentation_fraction() const { return fragmentation.value_or(0.0); }
  // The reserved peak comes from replaying the allocator model.
  bool replays_allocator() const { return caching_allocator && !fragmentation.has_value(); }
  // Whether any term is in effect (false: reports and fits as without terms).
  bool any() const {
    return cuda_context_bytes > 0 || workspace_bytes > 0 || fragmentation_fraction() > 0 ||
           caching_allocator;
  }
};

// The caching allocator replayed over a plan's training steps
// (ReplayTrainingSteps, remat/plan/plan.h).
struct AllocatorReplaySummary {
  int micro_steps = 0;              // micro-steps replayed
  bool steady = false;              // the reserved state repeats: later steps reserve nothing more
  int64_t alloc_retries = 0;        // out-of-memory free-and-retry rounds (num_alloc_retries)
  int64_t device_allocs = 0;        // cudaMalloc calls and page mappings (num_device_alloc)
  bool under_budget_limit = false;  // the peak is from the replay capped at the budget,
                                    // where the allocator freed its cache to fit
  bool out_of_memory = false;       // the replay capped at the budget ran out
};

// A plan's device memory, every term named.
struct DeviceMemoryUse {
  int64_t allocated_peak_bytes = 0;  // the simulator's peak
  // Reserved above allocated_peak_bytes: the replayed allocator's, or the
  // rounded segments' excess with a user's fragmentation fraction.
  int64_t allocator_rounding_bytes = 0;
  int64_t fragmentation_bytes = 0;  // the user's fraction x the rounded peak (0 when replayed)
  int64_t reserved_peak_bytes = 0;  // allocated + rounding + fragmentation
  int64_t cuda_context_bytes = 0;
  int64_t workspace_bytes = 0;
  // Beside a replayed reserved peak, a stated margin for what the replay of
  // an analytic profile's tensors misses (kTensorReplayMargin of it).
  int64_t replay_margin_bytes = 0;
  int64_t total_bytes = 0;  // reserved + margin + context + workspaces: what must fit
  std::optional<AllocatorReplaySummary> replay;  // set when the reserved peak was replayed
};

// The margin a plan's replayed reserved peak is planned with when its
// profile knows its tensors (an analytic profile, LayerTensors), as a
// fraction of that peak: the largest shortfall of such replays against the
// reserved peaks measured on the H200 (gpt2-medium at 45% of its peak:
// 11.55 GiB replayed, 12.14 GiB measured). bench/reserved/reserved_vs_h200
// checks that it covers every measured run. A measured profile's replay
// (one request per layer) held more than its runs: no margin.
inline constexpr double kTensorReplayMargin = 0.053;

// The use of a plan whose simulated allocated peak is `allocated_peak` and
// whose allocator-rounded peak (SimulationResult::reserved_peak_bytes) is
// `rounded_peak`, with the user's fragmentation fraction (0 if none). Sums
// saturate at kMaxBytes.
DeviceMemoryUse AccountDeviceMemory(int64_t allocated_peak, int64_t rounded_peak,
                                    const DeviceMemoryTerms& terms);

// The use of a plan whose reserved peak was replayed (`replayed_reserved`,
// never below `allocated_peak`). Sums saturate at kMaxBytes.
// `margin` (a fraction, kTensorReplayMargin or 0) of the reserved peak is
// added as replay_margin_bytes.
DeviceMemoryUse AccountReplayedDeviceMemory(int64_t allocated_peak, int64_t replayed_reserved,
                                            const AllocatorReplaySummary& replay,
                                            const DeviceMemoryTerms& terms, double margin = 0);

// The bytes of a budget left for the simulated tensors: (budget - fixed
// terms) / (1 + the user's fragmentation), at least 1 (0 stays 0: no budget).
int64_t TensorBudget(int64_t budget_bytes, const DeviceMemoryTerms& terms);

// Explicit settings, each overriding the preset's term.
struct DeviceMemoryOverrides {
  std::optional<int64_t> cuda_context_bytes;
  std::optional<int64_t> workspace_bytes;
  std::optional<double> fragmentation;  // the user's fraction: replaces the allocator replay
  bool any() const { return cuda_context_bytes || workspace_bytes || fragmentation; }
};

// The terms of `device` (a name LookupDevice knows; empty: none, all zero)
// with `overrides` applied. Any override turns the caching-allocator model on
// (the terms describe a CUDA card). Errors name the device.
// `alloc_conf` (PYTORCH_CUDA_ALLOC_CONF syntax, "" = defaults) is parsed
// here; a bad key or value is an InvalidInput error naming it.
Result<DeviceMemoryTerms> ResolveDeviceMemory(std::string_view device,
                                              const DeviceMemoryOverrides& overrides,
                                              std::string_view alloc_conf = {});

// "600MiB" (ParseBytes), or "0" / "0B" for none.
Result<int64_t> ParseTermBytes(std::string_view text);
// "5%" or "0.05": a fraction in [0, 0.5].
Result<double> ParseFraction(std::string_view text);

}  // namespace remat

#endif  // REMAT_DEVICE_MEMORY_H_
