// The LibTorch runtime: executes planner schedules on a GPT-style
// transformer, measures per-layer profiles, and reports measured memory and
// time per schedule op. Implements remat::Runtime (remat/schedule/runtime_api.h); no
// torch type appears in this header, so the CLI links it without including
// LibTorch.
//
// Models: model.json with architecture "gpt", eager attention, precision
// fp32, bf16 or fp16. Devices: "cpu" (memory metered by a registered CPU
// allocator, exact bytes) and "cuda" (the caching allocator's statistics;
// only when built against a CUDA LibTorch).
#ifndef REMAT_RUNTIME_TORCH_RUNTIME_H_
#define REMAT_RUNTIME_TORCH_RUNTIME_H_

#include <memory>

#include "remat/schedule/runtime_api.h"

namespace remat::runtime {

// A new runtime. The first Measure or Train on "cpu" registers the metering
// CPU allocator for the rest of the process.
std::unique_ptr<Runtime> MakeTorchRuntime();

}  // namespace remat::runtime

#endif  // REMAT_RUNTIME_TORCH_RUNTIME_H_
