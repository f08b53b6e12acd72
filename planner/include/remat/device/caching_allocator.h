// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// PyTorch 2.11), replayed over a sequence of allocations and frees on one
// stream. It answers what the card sees: *reserved* memory (segments obtained
// from cudaMalloc or mapped pages of expandable segments), not only the bytes
// allocated to live tensors.
//
// The mechanism, as PyTorch implements it:
//   - A request is rounded up to a multiple of 512 B (at least 512 B), or to a
//     power-of-two division when roundup_power2_divisions applies to its size.
//   - Rounded requests of at most 1 MiB go to the small pool, whose segments
//     are 2 MiB; larger ones to the large pool. A large request below 10 MiB
//     gets a 20 MiB segment (large_segment_size_mb), a bigger one a segment of
//     its own size rounded up to 2 MiB.
//   - A request first looks for the smallest cached free block that fits (the
//     pool is ordered by size, then address). A found block is split when the
//     remainder is at least 512 B (small pool) or more than 1 MiB (large pool);
//     otherwise the whole block is handed out (and counted as allocated).
//   - A freed block merges with free neighbours of the same segment and stays
//     cached: reserved memory does not drop on free.
//   - max_split_size_mb: blocks of at least that size are never split, are not
//     used for requests below it, and serve a request at or above it only if
//     they exceed it by less than max_non_split_rounding_mb.
//   - expandable_segments:True: one segment per pool grows by mapping pages
//     (2 MiB in the small pool, large_segment_size_mb = 20 MiB in the large
//     pool); reserved = mapped. Every remainder of at least 512 B is split off.
//   - When no cached block fits and a new segment would pass the limit: free
//     cached oversize blocks (max_split_size_mb), retry; free every cached
//     segment that holds no live block (and unmap every free whole page of
//     expandable segments), retry; then report out of memory.
//   - garbage_collection_threshold: under a memory-fraction cap, before asking
//     for a new segment while reserved is above threshold x cap, free cached
//     whole large-pool segments, oldest reuse first, down to the threshold.
//
// What the model leaves out: streams (one stream; no cross-stream events),
// CUDA graph private pools, IPC, the cudaMallocAsync backend, and driver-side
// addresses (segments get increasing addresses, never reused; this only breaks
// ties between equal-sized free blocks).
#ifndef REMAT_CACHING_ALLOCATOR_H_
#define REMAT_CACHING_ALLOCATOR_H_

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/io/status.h"

namespace remat {

// The allocator's fixed sizes (c10/core/AllocatorConfig.h).
inline constexpr int64_t kAllocMinBlockBytes = 512;            // rounding unit
inline constexpr int64_t kAllocSmallRequestBytes = 1 << 20;    // small pool: <= this
inline constexpr int64_t kAllocSmallSegmentBytes = 2 << 20;    // small pool segment / page
inline constexpr int64_t kAllocMinLargeAllocBytes = 10 << 20;  // below: a shared large segment
inline constexpr int64_t kAllocRoundLargeBytes = 2 << 20;      // bigger segments round to this
inline constexpr int64_t kAllocDefaultLargeSegmentBytes = 20 << 20;
inline constexpr int64_t kAllocUnlimited = std::numeric_limits<int64_t>::max();
// roundup_power2_divisions has one value per power-of-two interval of the
// request size: [1 MiB, 2 MiB) ... [32 GiB, 64 GiB) (smaller sizes use the
// first, larger the last).
inline constexpr int kAllocRoundupIntervals = 16;

// The PYTORCH_CUDA_ALLOC_CONF settings the model follows, field by field.
// Defaults are PyTorch's.
struct AllocatorOptions {
  // expandable_segments:True|False.
  bool expandable_segments = false;
  // max_split_size_mb * 1 MiB: blocks of this size or more are not split.
  int64_t max_split_size_bytes = kAllocUnlimited;
  // max_non_split_rounding_mb * 1 MiB: how much larger than a request at or
  // above max_split_size an unsplit cached block may be. Defaults to the
  // large segment size.
  int64_t max_non_split_rounding_bytes = kAllocDefaultLargeSegmentBytes;
  // large_segment_size_mb * 1 MiB: the segment (and expandable page) of the
  // large pool for requests below 10 MiB.
  int64_t large_segment_bytes = kAllocDefaultLargeSegmentBytes;
  // garbage_collection_threshold, in (0, 1); 0 = off. Only acts under a
  // memory-fraction cap (AllocatorLimit::fraction_cap_bytes), as in PyTorch.
  double garbage_collection_threshold = 0;
  // roundup_power2_divisions per interval (see kAllocRoundupIntervals); 0 or
  // 1 = plain 512 B rounding. Powers of two.
  std::array<int64_t, kAllocRoundupIntervals> roundup_power2_divisions{};
  // per_process_memory_fraction, in (0, 1]; 1 = no cap. The caller turns it
  // into AllocatorLimit::fraction_cap_bytes (MemoryFractionCapBytes).
  double per_process_memory_fraction = 1.0;
  // Keys PyTorch accepts that do not change device memory (host/pinned
  // allocator, locking, graph capture), in the order given: parsed for
  // syntax, otherwise ignored.
  std::vector<std::string> ignored_keys;
};

// Parses PYTORCH_CUDA_ALLOC_CONF (also PYTORCH_ALLOC_CONF) syntax:
// comma-separated key:value pairs, whitespace ignored, list values in
// brackets ("roundup_power2_divisions:[256:1,512:2,>:4]"). An empty string
// gives the defaults. Accepted keys and values, as PyTorch checks them:
//   expandable_segments            True | False
//   max_split_size_mb              integer >= large_segment_size_mb (20)
//   max_non_split_rounding_mb      integer >= large_segment_size_mb (20)
//   large_segment_size_mb          integer > 10
//   garbage_collection_threshold   number in (0, 1)
//   roundup_power2_divisions       power of two, or a list of
//                                  <size_mb power of two>:<divisions 0 or power
//                                  of two> with a last ">:<divisions>"
//   per_process_memory_fraction    number in (0, 1]
//   backend                        native (cudaMallocAsync is refused: a
//                                  different allocator, not modelled)
// Accepted and ignored (recorded in ignored_keys), values checked for form:
//   release_lock_on_cudamalloc, pinned_use_cuda_host_register,
//   pinned_use_background_threads, graph_capture_record_stream_reuse (True |
//   False); pinned_num_register_threads, pinned_reserve_segment_size_mb
//   (integers).
// Any other key, or a value outside the above, is an InvalidInput error of one
// line naming the key, the value and what is accepted.
Result<AllocatorOptions> ParseAllocConf(std::string_view conf);

// What the allocator may obtain. Both zero: unlimited.
struct AllocatorLimit {
  // Bytes cudaMalloc (or page mapping) can hand out in total: the card's
  // memory less the CUDA context and anything else outside this allocator.
  // A segment that would take reserved past it fails. 0 = unlimited.
  int64_t driver_bytes = 0;
  // The allocator's own cap (torch.cuda.set_per_process_memory_fraction).
  // PyTorch checks it before asking the driver, with the request's full
  // segment size even for expandable segments, and runs
  // garbage_collection_threshold only under it. 0 = none.
  int64_t fraction_cap_bytes = 0;
};

// floor(fraction x card_total_bytes), the cap PyTorch derives from a memory
// fraction and cudaMemGetInfo's total. Requires 0 < fraction <= 1.
int64_t MemoryFractionCapBytes(double fraction, int64_t card_total_bytes);

// A request's size after rounding (round_size): 512 B multiples, at least
// 512 B (an empty request never reaches it: PyTorch allocates nothing), or the next power-of-two
// division when its interval has more than one division and the size exceeds 512 B x divisions.
int64_t RoundAllocationBytes(int64_t request_bytes, const AllocatorOptions& options);

// The segment a rounded request would get from cudaMalloc
// (get_allocation_size): 2 MiB for small, the large segment below 10 MiB,
// else the size rounded up to 2 MiB.
int64_t SegmentBytesFor(int64_t rounded_bytes, const AllocatorOptions& options);

// One event of the replayed sequence. An id names a live allocation from its
// alloc to its free; ids may be reused after the free.
struct AllocEvent {
  enum class Kind { kAlloc, kFree };
  Kind kind = Kind::kAlloc;
  int64_t id = 0;
  int64_t size_bytes = 0;  // the request (kAlloc only), >= 0; 0 takes no memory (as PyTorch)

  static AllocEvent Alloc(int64_t id, int64_t size_bytes) { return {Kind::kAlloc, id, size_bytes}; }
  static AllocEvent Free(int64_t id) { return {Kind::kFree, id, 0}; }
};

// Where the replay ran out of memory: the allocation that failed after every
// release PyTorch tries.
struct AllocatorOom {
  int64_t event_index = 0;  // into the replayed events
  int64_t id = 0;
  int64_t request_bytes = 0;    // as asked
  int64_t segment_bytes = 0;    // the segment it needed (PyTorch's "Tried to allocate")
  int64_t allocated_bytes = 0;  // at the failure, after the releases
  int64_t reserved_bytes = 0;
};

// One segment as torch.cuda.memory_snapshot() would list it: its blocks in
// address order. An expandable segment lists its mapped ranges as segments.
struct AllocatorSegmentView {
  bool small_pool = false;
  bool expandable = false;
  struct Block {
    int64_t size_bytes = 0;
    bool allocated = false;
  };
  std::vector<Block> blocks;
  int64_t total_bytes() const;
};

// Counters of the allocator (torch.cuda.memory_stats() names in comments).
struct AllocatorStats {
  int64_t allocated_bytes = 0;       // allocated_bytes.all.current: live blocks' sizes
  int64_t peak_allocated_bytes = 0;  // allocated_bytes.all.peak
  int64_t requested_bytes = 0;       // requested_bytes.all.current: live requests as asked
  int64_t reserved_bytes = 0;        // reserved_bytes.all.current
  int64_t peak_reserved_bytes = 0;   // reserved_bytes.all.peak
  int64_t segments = 0;              // segment.all.current: cudaMalloc'd segments held
  int64_t expandable_segments = 0;   // expandable segments held (each maps pages)
  int64_t device_allocs = 0;         // num_device_alloc: cudaMalloc calls and page mappings
  int64_t device_frees = 0;          // num_device_free: cudaFree calls and unmappings
  int64_t alloc_retries = 0;         // num_alloc_retries: last-resort retries
  // Segments and page mappings refused for AllocatorLimit::driver_bytes
  // (none: every step ran as without that limit).
  int64_t driver_refusals = 0;
};

// The allocator, one event at a time. Not copyable (it owns its blocks).
class CudaAllocatorModel {
 public:
  CudaAllocatorModel(const AllocatorOptions& options, const AllocatorLimit& limit);
  ~CudaAllocatorModel();
  CudaAllocatorModel(const CudaAllocatorModel&) = delete;
  CudaAllocatorModel& operator=(const CudaAllocatorModel&) = delete;

  // Allocates `size_bytes` under `id`. Returns OK, OutOfMemory (the state is
  // as PyTorch leaves it after its releases; the model stays usable), or
  // InvalidInput for a negative size or an id already live.
  Status Malloc(int64_t id, int64_t size_bytes);
  // Frees the live allocation `id`; InvalidInput if there is none.
  Status Free(int64_t id);
  // torch.cuda.empty_cache(): releases every cached segment holding no live
  // block, and unmaps free whole pages of expandable segments.
  void EmptyCache();

  const AllocatorStats& stats() const;
  // The bytes live allocation `id` asked for (0: an empty one); -1 when `id`
  // is not live.
  int64_t LiveRequestBytes(int64_t id) const;
  // The segments in address order.
  std::vector<AllocatorSegmentView> Snapshot() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A replay's outcome.
struct AllocatorReplay {
  AllocatorStats stats;                           // at the end (or at the OOM)
  std::vector<int64_t> reserved_timeline_bytes;   // reserved after each replayed event
  std::vector<int64_t> allocated_timeline_bytes;  // allocated after each replayed event
  std::optional<AllocatorOom> oom;                // the first OOM; the replay stops there
};

// Replays `events` through a fresh allocator. Stops at the first out of
// memory (reported in `oom`, the timelines end before that event). Returns
// InvalidInput, naming the event index, for a free of an id that is not live,
// an alloc of a live id, or a negative size.
Result<AllocatorReplay> ReplayAllocations(const std::vector<AllocEvent>& events,
                                          const AllocatorOptions& options,
                                          const AllocatorLimit& limit = {});

}  // namespace remat

#endif  // REMAT_CACHING_ALLOCATOR_H_
