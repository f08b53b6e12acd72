// How one training job is spread over GPUs: data parallelism (the model
// state replicated or sharded), tensor and sequence parallelism (a block's
// weights and activations split over t ranks), pipeline parallelism (the
// blocks split over p stages). gpus = dp * tp * pp. The memory a rank holds
// under these settings is the planner's per-rank prediction; the settings are
// carried in the plan's job and in the exports.
#ifndef REMAT_PARALLEL_H_
#define REMAT_PARALLEL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "remat/model/model_config.h"
#include "remat/io/status.h"

namespace remat {

// What the data-parallel ranks hold of the model state.
enum class DataParallel {
  kNone,    // one data-parallel rank
  kDdp,     // DistributedDataParallel: everything replicated, gradient buckets
  kZero0,   // DeepSpeed ZeRO stage 0: everything replicated, DeepSpeed's own all-reduce
  kZero1,   // optimizer state sharded (DeepSpeed ZeRO-1, Megatron's distributed optimizer)
  kZero2,   // optimizer state and gradients sharded
  kZero3,   // optimizer state, gradients and weights sharded (DeepSpeed ZeRO-3)
  kFsdp2,   // PyTorch fully_shard: weights, gradients, optimizer state sharded per module
  kHsdp,    // fully_shard within a shard group, replicated across groups
};

// FSDP2 / HSDP: which modules are fully_shard units (each gathered and
// reduced as one), besides the root (embeddings, final norm, head).
enum class FsdpUnits {
  kBlock,    // one unit per transformer block (torchtitan, accelerate, transformers)
  kSegment,  // a recompute segment's blocks as one unit (the plan's largest)
};

// Model state kept in host memory instead of the device's (docs/levers.md).
enum class StateOffload {
  kNone,
  // DeepSpeed ZeRO-Offload (zero_optimization.offload_optimizer.device
  // "cpu", ZeRO stages 1-3): the fp32 master weights, the moments and the
  // fp32 gradient partition on the host; the optimizer steps there
  // (DeepSpeedCPUAdam); gradients copied down, updated weights copied up.
  kOptimizer,
  // FSDP2's CPUOffloadPolicy: the sharded parameters, their gradients and
  // the optimizer state on the host; each gather copies the shards up, each
  // reduce-scatter's shard is copied down; the optimizer steps on the host.
  kFsdpCpu,
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
  // DeepSpeed ZeRO-3's stage3_param_persistence_threshold: a parameter of at
  // most this many elements is kept whole on every rank after its first
  // gather (not released after each use); DeepSpeed's default, 1e5.
  int64_t persistence_threshold = 100000;
  // FSDP2 / HSDP under gradient accumulation: set_requires_gradient_sync
  // (False) on micro-batches 1..K-1 (each unit then keeps its unsharded
  // gradients until the last one reduces them); false: every micro-batch
  // reduce-scatters into the sharded gradients (FSDP2's default,
  // torchtitan's).
  bool fsdp_no_sync = false;
  // FSDP2 / HSDP: the fully_shard units (--fsdp-units).
  FsdpUnits fsdp_units = FsdpUnits::kBlock;
  // --offload-optimizer cpu (ZeRO 1-3) or --fsdp-cpu-offload (FSDP2, HSDP).
  StateOffload offload = StateOffload::kNone;
  // The ranks reduce over Gloo (CPU ranks): its reduce_scatter_tensor copies
  // its whole input (NCCL's does not). Set from the job's device, not a
  // setting of the plan.
  bool gloo = false;

  int64_t data_ranks() const { return gpus / (tensor * pipeline); }
  // The ranks one copy of the model state is sharded over: the data ranks,
  // or HSDP's shard group (1 where nothing is sharded).
  int64_t shard_ranks() const;
  bool distributed() const {
    return gpus > 1 || data != DataParallel::kNone || tensor > 1 || sequence || pipeline > 1;
  }
};

// "none", "ddp", "zero0".."zero3", "fsdp2", "hsdp".
const char* ToString(DataParallel d);
// "1f1b", "interleaved".
const char* ToString(PipelineSchedule s);
// "block", "segment".
const char* ToString(FsdpUnits u);
// "none", "optimizer", "fsdp_cpu".
const char* ToString(StateOffload o);
// The names ToString prints; the error lists them.
Result<DataParallel> ParseDataParallel(std::string_view name);
Result<PipelineSchedule> ParsePipelineSchedule(std::string_view name);
Result<FsdpUnits> ParseFsdpUnits(std::string_view name);
Result<StateOffload> ParseStateOffload(std::string_view name);

// Why `p` cannot run `config` (a model.json / config.json with its defaults
// resolved or not): gpus not a multiple of tensor x pipeline, the tensor
// degree not dividing the attention heads or the key/value heads, more
// stages than blocks, virtual stages without the interleaved schedule, a
// shard group not dividing the data ranks. `source` prefixes the message.
// Pipeline stages may hold unequal numbers of blocks (PipelineBlocks).
Status ValidateParallelism(const Parallelism& p, const ModelConfig& config,
                           const std::string& source);

// The blocks of pipeline stage `stage` of `p` stages over `blocks`: the
// first `blocks % p` stages hold one block more (torchtitan's split of an
// uneven count). Returns [first, end).
struct BlockRange {
  int64_t first = 0;
  int64_t end = 0;
};
BlockRange PipelineBlocks(int64_t blocks, int64_t stages, int64_t stage);

}  // namespace remat

#endif  // REMAT_PARALLEL_H_
