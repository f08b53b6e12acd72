#include "remat/ranks/pipeline.h"

#include <algorithm>
#include <string>

namespace remat {
namespace {

int64_t Chunks(const Parallelism& parallel) {
  return parallel.schedule == PipelineSchedule::kInterleaved ? parallel.virtual_stages : 1;
}

Status CheckPipeline(const Parallelism& parallel, int64_t microbatches) {
  const int64_t p = parallel.pipeline;
  if (p < 1) return Status::Invalid("pipeline stages must be at least 1, got " + std::to_string(p));
  if (microbatches < 1) {
    return Status::Invalid("micro-batches per step must be at least 1, got " +
                           std::to_string(microbatches));
  }
  if (parallel.schedule != PipelineSchedule::kInterleaved) return Status::Ok();
  if (parallel.virtual_stages < 1) {
    return Status::Invalid("virtual stages must be at least 1, got " +
                           std::to_string(parallel.virtual_stages));
  }
  if (p < 2) return Status::Invalid("the interleaved schedule needs at least 2 pipeline stages");
  if (microbatches % p != 0) {
    return Status::Invalid("the interleaved schedule needs micro-batches per step (" +
                           std::to_string(microbatches) + ") to be a multiple of the " +
                           std::to_string(p) + " pipeline stages (as megatron-core does)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<int64_t>> InFlightMicrobatches(const Parallelism& parallel, int64_t rank,
                                                  int64_t microbatches) {
  REMAT_RETURN_IF_ERROR(CheckPipeline(parallel, microbatches));
  const int64_t p = parallel.pipeline, m = microbatches;
  if (rank < 0 || rank >= p) {
    return Status::Invalid("pipeline rank " + std::to_string(rank) + " is outside [0, " +
                           std::to_string(p) + ")");
  }
  if (parallel.schedule != PipelineSchedule::kInterleaved) {
    return std::vector<int64_t>{std::min(p - rank, m)};
  }
  const int64_t v = parallel.virtual_stages, total = m * v;
  // get_pp_rank_microbatches: warm-up chunk forwards, capped at all of them;
  // the first steady-state step runs one more forward before its backward.
  const int64_t warmup = std::min(2 * (p - rank - 1) + (v - 1) * p, total);
  const int64_t forwards = std::min(warmup + 1, total);
  // get_schedule_table with groups of p micro-batches (M is a multiple of
  // p): entry k runs chunk (k mod (p v)) / p.
  std::vector<int64_t> counts(v, 0);
  for (int64_t k = 0; k < forwards; ++k) ++counts[(k % (p * v)) / p];
  return counts;
}

Result<std::vector<int64_t>> EvenChunkBlocks(const Parallelism& parallel, int64_t blocks) {
  const int64_t chunks = parallel.pipeline * Chunks(parallel);
  if (chunks < 1 || blocks % chunks != 0) {
    return Status::Invalid(std::to_string(parallel.pipeline) + " pipeline stages x " +
                           std::to_string(Chunks(parallel)) + " virtual stages must divide the " +
                           std::to_string(blocks) + " blocks");
  }
  return std::vector<int64_t>(chunks, blocks / chunks);
}

Result<Profile> StageProfile(const Profile& model, const Parallelism& parallel, int64_t rank,
                             const std::vector<int64_t>& chunk_blocks, int64_t microbatches,
                             const StaticMemory& model_state) {
  REMAT_ASSIGN_OR_RETURN(std::vector<int64_t> in_flight,
                         InFlightMicrobatches(parallel, rank, microbatches));
  const int64_t p = parallel.pipeline, v = Chunks(parallel);
  const std::vector<int> blocks = BlockLayers(model);
  if (blocks.empty() || model.layers[blocks.front()].kind != kBlockKind) {
    return Status::Invalid(model.model + ": the profile has no block layers to cut into stages");
  }
  if (static_cast<int64_t>(chunk_blocks.size()) != p * v) {
    return Status::Invalid("the stage split lists " + std::to_string(chunk_blocks.size()) +
                           " model chunks; " + std::to_string(p) + " stages x " +
                           std::to_string(v) + " virtual stages need " + std::to_string(p * v));
  }
  int64_t sum = 0;
  for (int64_t n : chunk_blocks) {
    if (n < 1) return Status::Invalid("every pipeline stage needs at least one block");
    sum += n;
  }
  if (sum != static_cast<int64_t>(blocks.size())) {
    return Status::Invalid("the stage split has " + std::to_string(sum) + " blocks; the model has " +
                           std::to_string(blocks.size()));
  }
  // Layer range [first, last) of chunk c; the layers before the first
  // block join chunk 0, those after the last block the last chunk.
  std::vector<int> start(p * v + 1);
  start[0] = 0;
  int64_t block = 0;
  for (int64_t c = 0; c < p * v; ++c) {
    block += chunk_blocks[c];
    start[c + 1] = c + 1 == p * v ? model.num_layers() : blocks[block];
  }
  Profile stage = model;
  stage.layers.clear();
  for (int64_t j = 0; j < v; ++j) {
    const int64_t chunk = rank + j * p;
    for (int i = start[chunk]; i < start[chunk + 1]; ++i) {
      LayerProfile l = model.layers[i];
      l.in_flight_microbatches = in_flight[j];
      stage.layers.push_back(std::move(l));
    }
  }
  stage.static_memory = model_state;
  stage.grad_accumulation = microbatches;
  REMAT_RETURN_IF_ERROR(ValidateProfile(
      stage, model.model + " pipeline rank " + std::to_string(rank) + " of " + std::to_string(p)));
  return stage;
}

}  // namespace remat
