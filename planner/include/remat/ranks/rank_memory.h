// What one rank of a multi-GPU job holds: its share of the model (tensor
// and pipeline parallelism), that share's model state divided as data
// parallelism divides it (DDP, ZeRO stages 0-3, FSDP2, HSDP), and the
// buffers each engine adds, every term named. docs/distributed.md gives the
// formulas.
#ifndef REMAT_RANK_MEMORY_H_
#define REMAT_RANK_MEMORY_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "remat/model/model_config.h"
#include "remat/model/parallel.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

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
  // ZeRO-3: of weight_bytes, block_weight_bytes and root_weight_bytes, the
  // parameters of at most Parallelism::persistence_threshold elements, which
  // DeepSpeed keeps whole on every rank (RankShare::persistent_parameters).
  int64_t persistent_weight_bytes = 0;
  int64_t block_persistent_weight_bytes = 0;
  int64_t root_persistent_weight_bytes = 0;
  // The optimizer step's micro-batches (K): FSDP2 with
  // Parallelism::fsdp_no_sync accumulates the unsharded gradients over the
  // first K - 1 (set_requires_gradient_sync(False)).
  int64_t micro_batches = 1;
  // FSDP2 / HSDP: the blocks one fully_shard unit holds, gathered and
  // reduced together (a recompute segment of several blocks is one unit:
  // remat.apply computes them in one call).
  int64_t gather_blocks = 1;
  // Of weight_bytes: the trained weights in the weights' dtype (DeepSpeed
  // ZeRO-Offload keeps a 16-bit partition of them on the host to copy up).
  int64_t trained_weight_bytes = 0;
  // The largest trained parameter in the weights' dtype (ZeRO-Offload's
  // gradient staging buffers, one on the device and one on the host).
  int64_t largest_trained_weight_bytes = 0;
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
  // FSDP2 / ZeRO-3: unsharded weights in flight for the whole step. ZeRO-3:
  // the root's and two blocks' gathered parameters (the one computing and
  // the one prefetched), persistent ones apart. FSDP2 with
  // reshard_after_forward: the root's (kept from forward to backward) and
  // one unit's (gather_blocks blocks: the one computing); the second unit
  // is fsdp_prefetch_bytes. Without reshard_after_forward: every weight.
  int64_t unsharded_bytes = 0;
  // FSDP2 with reshard_after_forward: a second unit's unsharded weights,
  // live in each block's forward (the all-gather output FSDP2 keeps until
  // the next all-gather) and in the backward of the blocks past the first
  // unit (the unit prefetched; the first unit, the backward's last, has
  // none to prefetch). RankProfile adds it to those layers' workspaces.
  int64_t fsdp_prefetch_bytes = 0;
  // ZeRO-2/3: a block's gradients as backward makes them, in its backward
  // (every micro-batch: they reduce each one). FSDP2: the reduce-scatter
  // input of the unit reduced before (reduce dtype), which FSDP2 frees at
  // the next unit's reduce-scatter: in the backward of every block but the
  // first unit reduced's.
  int64_t reduce_scatter_bytes = 0;
  // FSDP2: one block's unsharded gradients as FSDP2 holds them until its
  // unit's reduce-scatter: the param dtype's as backward makes them, the
  // reduce dtype's accumulated under set_requires_gradient_sync(False) (K
  // > 1, fsdp_accumulates). The layers' gradients count as their shards;
  // RankLayerBuffersOf adds the unsharded ones beyond them in the backward
  // of each layer that holds them. The root's gradients stay whole until the
  // end of backward (FSDP2 reduces the root last): not divided.
  int64_t fsdp_gradient_bytes = 0;
  bool fsdp_accumulates = false;
  // FSDP2 with reshard_after_forward, ZeRO-3: a block recomputed in
  // backward gathers its weights again (the param dtype; ZeRO-3's
  // persistent ones apart), beside the unit whose backward runs and the one
  // prefetched: LayerProfile::recompute_gather_bytes of each block.
  int64_t recompute_gather_bytes = 0;
  // ZeRO-3: the parameters DeepSpeed keeps whole on every rank
  // (persistence threshold), beside their shard.
  int64_t persistent_bytes = 0;
  // ZeRO-3: the fp32 gradient partition DeepSpeed's optimizer steps from
  // (initialize_optimizer_states' gradient buffer, a sub-group's partition:
  // the rank's whole partition at the default sub_group_size 1e9), held
  // from initialization on beside the partition backward reduces into.
  int64_t optimizer_gradient_bytes = 0;
  // ZeRO-3: the copy the reduce of the bucket's gradients makes
  // (reduce_scatter_coalesced's torch.cat, and Gloo's reduce_scatter_tensor
  // copies it again): min(bucket, the rank's gradients). Live in the
  // backward that fills the bucket: every layer's where the gradients
  // exceed a bucket (flush_in_every_layer), else the first layer's, where
  // backward ends and the bucket is flushed.
  int64_t bucket_flush_bytes = 0;
  bool flush_in_every_layer = false;
  // FSDP2: the blocks of a fully_shard unit (ReplicaState::gather_blocks).
  int64_t gather_blocks = 1;
  // DeepSpeed ZeRO-1/2/3 (contiguous_gradients, its default): the reduce
  // bucket backward copies each gradient into, reduce_bucket_size elements
  // of the gradient dtype whatever the model's size (reduce_bucket_size =
  // bucket_cap_mb MiB of fp32 elements, as python -m remat train sets it).
  // ZeRO-1/2 allocate it at the first backward, ZeRO-3 at initialization;
  // it stays allocated.
  int64_t reduce_bucket_bytes = 0;
  // The rank keeps 1/gradient_divisor of each gradient (1: all of it).
  int64_t gradient_divisor = 1;
  // State offload (Parallelism::offload): what the rank keeps in host
  // memory instead of on the device, by term (0 without offload), each
  // moved out of the device terms above. FSDP2's CPUOffloadPolicy: the
  // parameter, gradient and optimizer shards. ZeRO-Offload: the fp32 master
  // partition and moments (host_optimizer_bytes; an fp32 partition even
  // where the weights are fp32), the fp32 gradient partition
  // (host_gradient_bytes) and, ZeRO-1/2, the 16-bit partition the updated
  // weights are copied up from (host_parameter_bytes).
  int64_t host_parameter_bytes = 0;
  int64_t host_gradient_bytes = 0;
  int64_t host_optimizer_bytes = 0;
  // The layers' gradient shards go to the host as backward reduces them
  // (FSDP2's CPUOffloadPolicy): no block keeps a gradient on the device.
  bool gradients_on_host = false;
  // Bytes one optimizer step copies between device and host (both ways,
  // every micro-batch's), timed over the profile's host link.
  int64_t host_copy_bytes = 0;
  // ZeRO-1/2 Offload: the device's gradient staging buffer
  // (temp_grad_buffer_for_gpu_offload, the largest parameter's elements),
  // held from initialization; its host twin is in host_gradient_bytes.
  int64_t offload_staging_bytes = 0;
  // Bytes the host's optimizer step reads and writes.
  int64_t host_step_bytes = 0;
  int64_t host_bytes() const {
    return host_parameter_bytes + host_gradient_bytes + host_optimizer_bytes;
  }
  // The host terms by name ("host_parameters", "host_gradients",
  // "host_optimizer"), empty without offload.
  std::vector<MemoryTerm> host_terms() const;
  // Every term at once (one unit's unsharded gradients for FSDP2's): an
  // upper bound of what any moment of the step holds.
  int64_t total() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes + ddp_bucket_bytes + unsharded_bytes +
           fsdp_prefetch_bytes + gather_blocks * fsdp_gradient_bytes + reduce_scatter_bytes +
           reduce_bucket_bytes + persistent_bytes + optimizer_gradient_bytes + bucket_flush_bytes +
           recompute_gather_bytes + offload_staging_bytes;
  }
  // The terms by name, those above 0 only beyond the first three.
  std::vector<MemoryTerm> terms() const;
};

// What RankProfile adds to one layer of a rank's profile, by term: each
// lives in that layer's forward (and recompute) or backward only. In the
// step's first micro-batch (`first`) and in micro-batches 2..K, where the
// gradients exist already (`later`).
struct RankLayerBuffers {
  int64_t prefetch_forward = 0;   // FSDP2: the all-gather output kept in forward
  int64_t prefetch_backward = 0;  // FSDP2: the unit prefetched (none in the first unit)
  // FSDP2: unsharded gradients beyond their shards held in this backward:
  // the block's own and its unit's earlier (K = 1, or the step's first
  // micro-batch: every block's so far, none reduced), or every unit's not
  // yet reduced (micro-batches 2..K).
  int64_t gradients_first = 0;
  int64_t gradients_later = 0;
  // FSDP2 accumulating: every block's unsharded gradients beyond their
  // shards, held through the forward of micro-batches 2..K (no reduce has
  // run yet); the first micro-batch's forward, which holds none, is lower
  // than theirs anyway, so it lives in every forward and recompute.
  int64_t gradients_forward = 0;
  int64_t reduce_scatter = 0;  // ZeRO-2/3: the block's gradients; FSDP2: the unit before's input
  int64_t bucket_flush = 0;    // ZeRO-3: the copies of the bucket's reduce
};

// The buffers of `state` in each layer of `whole` (the profile RankProfile
// starts from: gradients not yet divided), one per layer.
std::vector<RankLayerBuffers> RankLayerBuffersOf(const Profile& whole,
                                                 const RankModelState& state);

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
  // Of each entry of `layers`, the model chunk of the rank it belongs to
  // (0..virtual_stages - 1 under the interleaved schedule, else 0).
  std::vector<int64_t> layer_chunks;
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
  // Of parameters, block_parameters and root_parameters: those in weights of
  // at most Parallelism::persistence_threshold elements (ZeRO-3 keeps them
  // whole on every rank).
  int64_t persistent_parameters = 0;
  int64_t block_persistent = 0;
  int64_t root_persistent = 0;
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
  // Pipeline: the micro-batches in flight at the rank's peak, one per model
  // chunk it runs (InFlightMicrobatches); each of its layers carries its
  // chunk's (LayerProfile::in_flight_microbatches). {1} without pipeline.
  std::vector<int64_t> in_flight = {1};
  // The rank's profile: its layers (their activations per GPU) and as
  // static memory its model state (RankProfile says where each term goes),
  // its layers' gradients divided as it keeps them.
  Profile profile;
  RankModelState state;
  // What state and profile were made from: the replica's model state and
  // the stage's profile before RankProfile (WithGatherBlocks remakes them).
  // The stage's profile is only read: copies of the rank share it.
  ReplicaState replica;
  std::shared_ptr<const Profile> stage_profile;
  Parallelism parallel;
  // (A field added here is one WithGatherBlocks copies.)
};

// `m` with FSDP2's fully_shard units of `blocks` blocks (a recompute
// segment of that many blocks is gathered and reduced as one unit): its
// state and profile made again with ReplicaState::gather_blocks = blocks.
// Other data parallelism: `m` as it is.
RankMemory WithGatherBlocks(const RankMemory& m, int64_t blocks);
// Whether WithGatherBlocks(m, blocks) remakes `m` (its units follow the
// plan's segments and `blocks` differs from its units); else it is `m`.
bool RegathersBlocks(const RankMemory& m, int64_t blocks);

// The rank's profile from `whole` (one replica's profile of the stage's
// layers, activations per GPU) and its model state: the static memory
// replaced by `state`'s (the unsharded and persistent weights count as
// parameters, the DDP buckets, DeepSpeed's reduce bucket and ZeRO-3's
// optimizer gradient partition as gradients), each layer's gradient_bytes
// divided by state.gradient_divisor (rounded up; FSDP2: the blocks' only;
// none on the device where state.gradients_on_host, and then, unless FSDP2
// accumulates unsharded gradients, none kept between micro-batches: the
// root's a buffer of each backward they live in), the optimizer step the
// host's where the state is offloaded (optimizer_ms at the host's memory
// bandwidth, kHostStepGBps; offload_copy_bytes over the host link),
// and the buffers that live in one layer's pass (RankLayerBuffersOf) added
// to its forward, backward and accumulating workspaces.
Profile RankProfile(const Profile& whole, const RankModelState& state);

// The host's optimizer step under state offload moves host_step_bytes at
// this rate: the `cpu` device preset's memory bandwidth (20 GB/s) at its
// roofline efficiency (0.5), a bandwidth-bound elementwise pass as
// DeepSpeedCPUAdam's and torch's AdamW on the CPU are.
inline constexpr double kHostStepGBps = 10.0;

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
// divided by ShardModelState. Under pipeline parallelism each layer of a
// stage holds its chunk's micro-batches in flight for `whole`'s
// grad_accumulation micro-batches per step (InFlightMicrobatches; fails as
// it does: the interleaved schedule needs them a multiple of the stages).
// Ranks are numbered tensor first, then data, then pipeline (Megatron's
// order), so stage s starts at rank s x data x tensor.
Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config, const Profile& whole,
                                             const Parallelism& p);

// What RankMemories reads of the model: its op graph. The graph reads
// neither the optimizer, the gradient dtype nor max_grad_norm, and what
// RankMemories reads of it (each op's parameters and layer, the layers'
// kinds, the trained tensors' elements) not the micro-batch nor the
// accumulation, so one built for a config serves every config that differs
// from it there alone: RankMemories(config, whole, p, layout) is then
// RankMemories(config, whole, p), field for field.
struct RankLayout;
Result<std::shared_ptr<const RankLayout>> BuildRankLayout(const ModelConfig& config);
// The same from the graph `chain` was derived from (BuildAnalyticChain of
// the same model, any device, tensor and sequence degrees: the graph's ops
// keep the model's parameter counts under a split), so the graph is not
// built twice.
struct AnalyticChain;
std::shared_ptr<const RankLayout> RankLayoutOfChain(const AnalyticChain& chain);
// Whether two layouts hold the same figures.
bool SameLayout(const RankLayout& a, const RankLayout& b);
// The layout's model's TrainableParameterCount.
int64_t TrainableParameters(const RankLayout& layout);
Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config, const Profile& whole,
                                             const Parallelism& p, const RankLayout& layout);
// The same with `layout` built where null, and `whole` shared: the ranks
// that hold every layer as it is (no pipeline or tensor parallelism) keep
// `whole` itself as their stage profile, not a copy.
Result<std::vector<RankMemory>> RankMemories(const ModelConfig& config,
                                             const std::shared_ptr<const Profile>& whole,
                                             const Parallelism& p, const RankLayout* layout);

// The same for a measured profile (one rank already): one kind of rank,
// data parallelism only.
RankMemory ProfileRankMemory(const Profile& whole, const Parallelism& p);

}  // namespace remat

#endif  // REMAT_RANK_MEMORY_H_
