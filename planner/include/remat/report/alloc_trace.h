// An allocator trace file as `planner --alloc-trace` writes it and
// scripts/record_allocator_trace.py completes on a GPU
// (docs/device-memory.md, "The trace format"): a plan's replayed allocation
// sequence, what the allocator model predicted for it, and what PyTorch's
// caching allocator did with the same sequence where it was recorded.
#ifndef REMAT_ALLOC_TRACE_H_
#define REMAT_ALLOC_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/device/caching_allocator.h"
#include "remat/io/status.h"

namespace remat {

// One side of a trace: the model's ("predicted") or the GPU's ("measured").
struct AllocatorTraceSide {
  int64_t reserved_peak_bytes = 0;
  int64_t allocated_peak_bytes = 0;
  std::vector<int64_t> reserved_timeline_bytes;  // after each event
  std::string device;                            // measured only: the GPU's name
};

struct AllocatorTraceFile {
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF of both sides
  std::vector<AllocEvent> events;
  AllocatorTraceSide predicted;
  std::optional<AllocatorTraceSide> measured;  // absent until recorded on a GPU
};

// Parses a trace file's text; `where` names it in messages. InvalidInput,
// naming the field, for anything else (an event that is not ["a", id,
// bytes] or ["f", id], a timeline of another length than the events).
Result<AllocatorTraceFile> ParseAllocatorTrace(std::string_view text, const std::string& where);

}  // namespace remat

#endif  // REMAT_ALLOC_TRACE_H_
