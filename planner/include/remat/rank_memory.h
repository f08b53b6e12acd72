// What one rank of a multi-GPU job holds: its share of the model (tensor
// and pipeline parallelism), that share's model state divided as data
// parallelism divides it (DDP, ZeRO stages 0-3, FSDP2, HSDP), and the
// buffers each engine adds, every term named. docs/distributed.md gives the
// formulas.
#ifndef REMAT_RANK_MEMORY_H_
#define REMAT_RANK_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "remat/model_config.h"
#include "remat/parallel.h"
#include "remat/profile.h"
#include "remat/status.h"

namespace remat {

// One named part of a rank's memory, in bytes.
struct MemoryTerm {
  std::string name;  // "parameters", "gradients", "optimizer", "ddp_buckets", ...
  int64_t bytes = 0;
};

// One copy of the model state of a rank's layers, before data parallelism
// divides it (the ZeRO paper's 2Ψ + 2Ψ + KΨ for mixed precision with Adam).
struct ReplicaState {
  int64_t weight_bytes = 0;     // every weight the layers hold, frozen ones and buffers included
  int64_t gradient_bytes = 0;   // the trained weights' gradients, in the gradient dtype
  int64_t optimizer_bytes = 0;  // master weights and moments of the trained weights
  int64_t master_weight_bytes = 0;  // of optimizer_bytes: the fp32 master weights (mixed_*)
  // For the engines that gather weights per block (FSDP2, ZeRO-3): the
  // largest block's weights as forward reads them (the parameter dtype) and
  // its gradients (the reduce dtype), and the weights outside the blocks
  // (embedding, final norm, head: FSDP2's root module).
  int64_t block_weight_bytes = 0;
  int64_t block_gradient_bytes = 0;
  int64_t root_weight_bytes = 0;
  int64_t gradient_element_bytes = 4;  // the gradient dtype's size (DeepSpeed's reduce bucket)
};

// A rank's model state under `Parallelism::data`, each term apart.
struct RankModelState {
  int64_t parameter_bytes = 0;  // the rank's weights (its shard under ZeRO-3 / FSDP2)
  int64_t gradient_bytes = 0;   // its gradients (its shard under ZeRO-2/3, FSDP2)
  int64_t optimizer_bytes = 0;  // its optimizer state (its shard under ZeRO-1 and up)
  // DDP (gradient_as_bucket_view False, PyTorch's default): the flat bucket
  // tensors DistributedDataParallel allocates at construction, one element
  // per trained parameter: a second copy of the gradients.
  int64_t ddp_bucket_bytes = 0;
  // FSDP2 / ZeRO-3: unsharded weights in flight: the root's (kept from
  // forward to backward) and two blocks' (the one computing and the one
  // prefetched), or every block's with reshard_after_forward false.
  int64_t unsharded_bytes = 0;
  // ZeRO-2/3, FSDP2: a block's unsharded gradients (parameter dtype) and the
  // reduce-scatter input they are copied into (reduce dtype).
  int64_t reduce_scatter_bytes = 0;
  // DeepSpeed ZeRO-1/2/3 (contiguous_gradients, its default): the reduce
  // bucket backward copies each gradient into, reduce_bucket_size elements
  // of the gradient dtype whatever the model's size (reduce_bucket_size =
  // bucket_cap_mb MiB of fp32 elements, as python -m remat train sets it).
  // ZeRO-1/2 allocate it at the first backward, ZeRO-3 at initialization;
  // it stays allocated.
  int64_t reduce_bucket_bytes = 0;
  // The rank keeps 1/gradient_divisor of each gradient (1: all of it).
  int64_t gradient_divisor = 1;
  int64_t total() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes + ddp_bucket_bytes + unsharded_bytes +
           reduce_scatter_bytes + reduce_bucket_bytes;
  }
  // The terms by name, those above 0 only beyond the first three.
  std::vector<MemoryTerm> terms() const;
};

// `replica`'s model state on one rank of `p`: the ZeRO paper's division
// (Rajbhandari et al. 2020, Figure 1) over p.shard_ranks() ranks, with
// the buffers of the engine p.data names. FSDP2 and HSDP keep the fp32
// master weights as the sharded parameters (MixedPrecisionPolicy), so
// master_weight_bytes move from the optimizer to the parameters there.
RankModelState ShardModelState(const ReplicaState& replica, const Parallelism& p);

// The share of the model one tensor- and pipeline-parallel rank holds.
struct RankShare {
  int64_t stage = 0;
  std::vector<std::string> layers;  // the chain layers the stage runs, in order
  // Parameters: held (frozen included), trained, of the largest block, and
  // outside the blocks; each already divided by the tensor degree where
  // tensor parallelism splits it: linear weights and the vocab-parallel
  // embedding and head (Megatron); weights of at most 2 x hidden elements
  // (norms, row-parallel biases) are replicated.
  int64_t parameters = 0;
  int64_t trainable = 0;
  int64_t block_parameters = 0;
  int64_t block_trainable = 0;
  int64_t root_parameters = 0;
};

// The share of each pipeline stage of `config` under `p` (one entry for
// pipeline 1). Stage 0 holds the embedding, the last stage the final norm,
// head and loss; a tied embedding is held by both (Megatron keeps a copy of
// the word embeddings on the last stage). Fails as ValidateParallelism does.
Result<std::vector<RankShare>> RankShares(const ModelConfig& config, const Parallelism& p);

// One kind of rank: the ranks that hold the same memory.
struct RankMemory {
  int64_t rank = 0;   // the first global rank of this kind
  int64_t ranks = 1;  // how many ranks share it
  int64_t stage = 0;  // its pipeline stage
  // The rank's profile: its layers (their activations per GPU) and as
  // static memory its model state (RankProfile says where each term goes),
  // its layers' gradients divided as it keeps them.
  Profile profile;
  RankModelState state;
};

// The rank's profile from `whole` (one replica's profile of the stage's
// layers, activations per GPU) and its model state: the static memory
// replaced by `state`'s (the unsharded weights count as parameters, the DDP
// buckets and DeepSpeed's reduce bucket as gradients), each layer's gradient_bytes divided by
// state.gradient_divisor (rounded up), and the reduce buffers added to
// each block's backward workspace, where they live.
Profile RankProfile(const Profile& whole, const RankModelState& state);

// The replica state of a profile: its static memory and the gradients its
// layers create; the largest block's and the root's weights in proportion
// to their layers' gradient_bytes (so 0 when the layers create none). No
// master weights are told apart. For measured profiles, which are one rank
// already.
ReplicaState ReplicaOfProfile(const Profile& profile);

// The distinct ranks of `config` under `p`, from `whole`, the job's profile
// (one GPU's activations of every layer, the whole model state): one per
// pipeline stage, its layers taken from `whole` and its model state from
// `whole`'s bytes per parameter times the stage's share (RankShares),
// divided by ShardModelState. Ranks are numbered tensor first, then data,
// then pipeline (Megatron's order), so stage s starts at rank
// s x data x tensor.
Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config, const Profile& whole,
                                             const Parallelism& p);

// The same for a measured profile (one rank already): one kind of rank,
// data parallelism only.
RankMemory ProfileRankMemory(const Profile& whole, const Parallelism& p);

}  // namespace remat

#endif  // REMAT_RANK_MEMORY_H_
