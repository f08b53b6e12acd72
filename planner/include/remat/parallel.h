// How one training job is spread over GPUs: data parallelism (the model
// state replicated or sharded), tensor and sequence parallelism (a block's
// weights and activations split over t ranks), pipeline parallelism (the
// blocks split over p stages). gpus = dp * tp * pp. The memory a rank holds
// under these settings is the planner's per-rank prediction; the settings are
// carried in the plan's job and in the exports.
#ifndef REMAT_PARALLEL_H_
#define REMAT_PARALLEL_H_

#include <cstdint>

namespace remat {

// What the data-parallel ranks hold of the model state.
enum class DataParallel {
  kNone,    // one data-parallel rank
  kDdp,     // DistributedDataParallel: everything replicated, gradient buckets
  kZero1,   // optimizer state sharded (DeepSpeed ZeRO-1, Megatron's distributed optimizer)
  kZero2,   // optimizer state and gradients sharded
  kZero3,   // optimizer state, gradients and weights sharded (DeepSpeed ZeRO-3)
  kFsdp2,   // PyTorch fully_shard: weights, gradients, optimizer state sharded per module
  kHsdp,    // fully_shard within a shard group, replicated across groups
};

enum class PipelineSchedule {
  k1F1B,         // PipeDream-flush: stage s holds p - s micro-batches in flight
  kInterleaved,  // virtual stages per rank (Megatron's interleaved 1F1B)
};

struct Parallelism {
  int64_t gpus = 1;  // world size: data * tensor * pipeline
  DataParallel data = DataParallel::kNone;
  int64_t tensor = 1;     // tensor-parallel degree t (Megatron-style column/row split)
  bool sequence = false;  // sequence parallelism over the tensor-parallel group
  int64_t pipeline = 1;   // pipeline stages p
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;  // model chunks per rank (interleaved only)
  double bucket_cap_mb = 25;   // DDP's gradient buckets
  bool reshard_after_forward = true;  // FSDP2: free the unsharded weights after forward
  int64_t shard_group = 0;            // HSDP: ranks that shard one replica (0: gpus per node, 8)

  int64_t data_ranks() const { return gpus / (tensor * pipeline); }
  bool distributed() const { return gpus > 1; }
};

}  // namespace remat

#endif  // REMAT_PARALLEL_H_
