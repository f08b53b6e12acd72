// Pipeline parallelism: what one pipeline rank runs and holds.
//
// The model's chain (embedding, blocks, final norm, head, loss) is cut into
// p stages, each a contiguous run of blocks; the embedding goes with the
// first stage, the final norm, head and loss with the last. With v virtual
// stages per rank (Megatron's interleaved schedule) the blocks are cut into
// p * v model chunks and rank r runs chunks r, r + p, .., r + (v - 1) p.
// A rank's profile is its chunks' layers in order, each layer carrying the
// micro-batches in flight of its chunk at the rank's peak
// (LayerProfile::in_flight_microbatches), which the simulator multiplies by
// what the plan keeps. docs/tensor-pipeline-parallel.md.
#ifndef REMAT_PIPELINE_H_
#define REMAT_PIPELINE_H_

#include <cstdint>
#include <vector>

#include "remat/model/parallel.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat {

// Micro-batches in flight on pipeline rank `rank` (0-based, of
// parallel.pipeline = p) at its peak, for `microbatches` (M) per optimizer
// step: one entry per model chunk the rank runs (virtual_stages of them
// under kInterleaved, else one), each the micro-batches whose forward of
// that chunk has run and whose backward has not when the rank's first
// backward starts, that micro-batch's included. The counts follow
// megatron-core's schedules (pipeline_parallel/schedules.py):
//   1F1B (forward_backward_pipelining_without_interleaving): p - rank - 1
//     warm-up forwards, then one more before the first backward:
//     min(p - rank, M).
//   interleaved (get_pp_rank_microbatches, get_schedule_table with
//     microbatch_group_size_per_vp_stage = p): W = min(2 (p - rank - 1) +
//     (v - 1) p, M v) warm-up chunk forwards and one more (if any is left),
//     taken in the schedule table's order (p micro-batches of chunk 0, then
//     of chunk 1, ..); rank 0 holds p v + p - 1 chunk forwards: 2p - 1 of
//     chunk 0, p of each other (Narayanan et al. 2021, section 2.2).
// Fails for p < 1, a rank outside [0, p), M < 1, v < 1, and under
// kInterleaved for p < 2 or M not a multiple of p (Megatron refuses it).
Result<std::vector<int64_t>> InFlightMicrobatches(const Parallelism& parallel, int64_t rank,
                                                  int64_t microbatches);

// The blocks of each model chunk (p * v entries, in pipeline order) when
// they are cut evenly. Fails unless p * v divides `blocks`.
Result<std::vector<int64_t>> EvenChunkBlocks(const Parallelism& parallel, int64_t blocks);

// The profile of pipeline rank `rank`: from `model` (a whole chain whose
// block layers have kind "block"; the layers before the first block go to
// the first chunk, those after the last to the last chunk), the layers of
// the rank's chunks in order, `chunk_blocks` (p * v entries summing to the
// block count, any split: EvenChunkBlocks or uneven) saying how many blocks
// each chunk has; each layer's in_flight_microbatches from
// InFlightMicrobatches; grad_accumulation = `microbatches` (the step's
// micro-batches pass through every stage). Times, bytes and each layer's
// gradient_bytes are the model's layers' as they are; the static memory is
// `model_state`, the model state the rank holds (the caller's: its share of
// the weights, gradients and optimizer state). The stage's input x[0] is
// the batch on the first stage, else the activation received from the
// previous stage (its receive buffer); its output is what it sends.
// Fails on counts that do not add up, or as InFlightMicrobatches.
Result<Profile> StageProfile(const Profile& model, const Parallelism& parallel, int64_t rank,
                             const std::vector<int64_t>& chunk_blocks, int64_t microbatches,
                             const StaticMemory& model_state);

}  // namespace remat

#endif  // REMAT_PIPELINE_H_
