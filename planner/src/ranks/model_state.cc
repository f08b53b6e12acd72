// A rank's model state under data parallelism: the ZeRO paper's division and
// each engine's buffers (remat/ranks/rank_memory.h).
#include <algorithm>
#include <numeric>
#include <utility>

#include "remat/ranks/rank_memory.h"

namespace remat {
namespace {

int64_t CeilDiv(int64_t bytes, int64_t n) { return n <= 1 ? bytes : (bytes + n - 1) / n; }

// DeepSpeed's reduce bucket: reduce_bucket_size = bucket_cap_mb MiB of fp32
// elements (python -m remat train's DeepSpeed config), each of the gradient
// dtype (stage_1_and_2.py setup_buckets, stage3.py's ipg buffer).
int64_t ReduceBucketBytes(const ReplicaState& r, const Parallelism& p) {
  const int64_t elements = static_cast<int64_t>(p.bucket_cap_mb * 1048576.0) / 4;
  return elements * r.gradient_element_bytes;
}

// DeepSpeed ZeRO-3: the optimizer's fp32 gradient partition (its sub-group
// of at most sub_group_size = 1e9 elements, DeepSpeed's default).
int64_t OptimizerGradientBytes(const ReplicaState& r, int64_t n) {
  if (r.optimizer_bytes == 0 || r.gradient_element_bytes <= 0) return 0;
  const int64_t elements = std::min<int64_t>(
      CeilDiv(r.gradient_bytes / r.gradient_element_bytes, n), 1'000'000'000);
  return elements * 4;
}

// `bytes` as the engine allocates it: pieces of `piece` bytes (one unit's
// buffer) and what remains.
std::vector<int64_t> Pieces(int64_t bytes, int64_t piece) {
  std::vector<int64_t> out;
  if (bytes <= 0) return out;
  if (piece <= 0 || piece >= bytes) return {bytes};
  for (; bytes >= piece; bytes -= piece) out.push_back(piece);
  if (bytes > 0) out.push_back(bytes);
  return out;
}

// `list`, the tensors of a workspace of `base` bytes, with `pieces` added
// (the allocator replay then requests each apart: Requests splits a
// workspace whose tensors add up to it). A list that does not itemize
// `base` gets it as one tensor first. A negative base (autograd released
// saved tensors before the peak) is no tensor: the list is the pieces, and
// the simulator releases the layer's saved bytes by the difference
// (Replay::StepBackward), so the pieces are still requested one by one.
void AddPieces(TensorSizes* list, int64_t base, const std::vector<int64_t>& pieces) {
  if (pieces.empty()) return;
  if (base < 0) {
    list->assign(pieces.begin(), pieces.end());
    return;
  }
  if (std::accumulate(list->begin(), list->end(), int64_t{0}) != base) {
    list->clear();
    if (base > 0) list->push_back(base);
  }
  list->insert(list->end(), pieces.begin(), pieces.end());
}

// Parallelism::offload: the state the engine keeps on the host, moved out
// of the device terms of `s` (ShardModelState's), and what the step copies
// and the host's step moves.
void OffloadState(const ReplicaState& r, const Parallelism& p, RankModelState* s) {
  const int64_t n = p.shard_ranks();
  const int64_t k = std::max<int64_t>(r.micro_batches, 1);
  if (p.offload == StateOffload::kFsdpCpu) {
    // CPUOffloadPolicy: the shards live on the host; each gather copies the
    // unit's shards up (forward, and again in backward where forward
    // resharded), each reduce-scatter's shard is copied down (every
    // micro-batch, or the last under set_requires_gradient_sync(False)).
    s->host_parameter_bytes = std::exchange(s->parameter_bytes, 0);
    s->host_gradient_bytes = std::exchange(s->gradient_bytes, 0);
    s->host_optimizer_bytes = std::exchange(s->optimizer_bytes, 0);
    s->gradients_on_host = true;
    const int64_t gathers = p.reshard_after_forward ? 2 : 1;
    const int64_t reduces = p.fsdp_no_sync ? 1 : k;
    s->host_copy_bytes = gathers * k * s->host_parameter_bytes + reduces * s->host_gradient_bytes;
    // AdamW on the host reads and writes the parameters and the state and
    // reads the gradients.
    s->host_step_bytes =
        2 * s->host_parameter_bytes + s->host_gradient_bytes + 2 * s->host_optimizer_bytes;
    return;
  }
  if (p.offload != StateOffload::kOptimizer || r.optimizer_bytes == 0) return;
  // ZeRO-Offload: stage_1_and_2.py / stage3.py with offload_optimizer cpu.
  const int64_t trained =
      r.gradient_element_bytes > 0 ? r.gradient_bytes / r.gradient_element_bytes : 0;
  const int64_t master = r.master_weight_bytes > 0 ? r.master_weight_bytes : 4 * trained;
  const bool zero3 = p.data == DataParallel::kZero3;
  s->host_optimizer_bytes = CeilDiv(r.optimizer_bytes - r.master_weight_bytes + master, n);
  s->host_gradient_bytes = CeilDiv(4 * trained, n);
  if (!zero3) {
    // stage_1_and_2.py's staging buffers of the largest parameter's
    // elements: temp_grad_buffer_for_cpu_offload on the host and
    // temp_grad_buffer_for_gpu_offload on the device.
    s->host_gradient_bytes += r.largest_trained_weight_bytes;
    s->offload_staging_bytes = r.largest_trained_weight_bytes;
  }
  s->optimizer_bytes = 0;
  s->optimizer_gradient_bytes = 0;  // ZeRO-3: its fp32 partition is the host's
  if (!zero3) s->host_parameter_bytes = CeilDiv(r.trained_weight_bytes, n);
  // Down: each micro-batch's reduced gradient partition; up: the updated
  // 16-bit partition, and under accumulation the partition restored for
  // micro-batches 2..K (async_accumulate_grad_in_cpu_via_gpu).
  const int64_t partition = CeilDiv(r.gradient_bytes, n);
  s->host_copy_bytes = k * partition + CeilDiv(r.trained_weight_bytes, n) + (k - 1) * partition;
  // DeepSpeedCPUAdam reads and writes the fp32 masters and moments, reads
  // the fp32 gradients and writes the 16-bit partition.
  s->host_step_bytes = 2 * s->host_optimizer_bytes + s->host_gradient_bytes +
                       CeilDiv(r.trained_weight_bytes, n);
}

}  // namespace

std::vector<MemoryTerm> RankModelState::host_terms() const {
  if (host_bytes() == 0) return {};
  return {{"host_parameters", host_parameter_bytes},
          {"host_gradients", host_gradient_bytes},
          {"host_optimizer", host_optimizer_bytes}};
}

std::vector<MemoryTerm> RankModelState::terms() const {
  std::vector<MemoryTerm> t = {{"parameters", parameter_bytes},
                               {"gradients", gradient_bytes},
                               {"optimizer", optimizer_bytes}};
  if (ddp_bucket_bytes > 0) t.push_back({"ddp_buckets", ddp_bucket_bytes});
  if (unsharded_bytes > 0) t.push_back({"fsdp_unsharded", unsharded_bytes});
  if (fsdp_prefetch_bytes > 0) t.push_back({"fsdp_prefetch", fsdp_prefetch_bytes});
  if (fsdp_gradient_bytes > 0) t.push_back({"fsdp_gradients", gather_blocks * fsdp_gradient_bytes});
  if (reduce_scatter_bytes > 0) t.push_back({"reduce_scatter", reduce_scatter_bytes});
  if (reduce_bucket_bytes > 0) t.push_back({"reduce_bucket", reduce_bucket_bytes});
  if (persistent_bytes > 0) t.push_back({"zero3_persistent", persistent_bytes});
  if (optimizer_gradient_bytes > 0) t.push_back({"zero3_optimizer_grads", optimizer_gradient_bytes});
  if (bucket_flush_bytes > 0) t.push_back({"bucket_flush", bucket_flush_bytes});
  if (recompute_gather_bytes > 0) t.push_back({"recompute_gather", recompute_gather_bytes});
  if (offload_staging_bytes > 0) t.push_back({"offload_staging", offload_staging_bytes});
  return t;
}

RankModelState ShardModelState(const ReplicaState& r, const Parallelism& p) {
  const int64_t n = p.shard_ranks();
  RankModelState s;
  s.parameter_bytes = r.weight_bytes;
  s.gradient_bytes = r.gradient_bytes;
  s.optimizer_bytes = r.optimizer_bytes;
  switch (p.data) {
    case DataParallel::kNone:
    case DataParallel::kZero0:  // (2 + 2 + K) Ψ
      break;
    case DataParallel::kDdp:
      s.ddp_bucket_bytes = r.gradient_bytes;
      break;
    case DataParallel::kZero1:  // 2Ψ + 2Ψ + KΨ / Nd
      s.optimizer_bytes = CeilDiv(r.optimizer_bytes, n);
      s.reduce_bucket_bytes = ReduceBucketBytes(r, p);
      break;
    case DataParallel::kZero2:  // 2Ψ + (2 + K) Ψ / Nd
      s.gradient_bytes = CeilDiv(r.gradient_bytes, n);
      s.optimizer_bytes = CeilDiv(r.optimizer_bytes, n);
      s.gradient_divisor = n;
      // A block's gradients as backward makes them; the reduce bucket they
      // are copied into is its own term.
      s.reduce_scatter_bytes = r.block_gradient_bytes;
      s.reduce_bucket_bytes = ReduceBucketBytes(r, p);
      break;
    case DataParallel::kZero3: {  // (2 + 2 + K) Ψ / Nd
      s.parameter_bytes = CeilDiv(r.weight_bytes, n);
      s.gradient_bytes = CeilDiv(r.gradient_bytes, n);
      s.optimizer_bytes = CeilDiv(r.optimizer_bytes, n);
      s.gradient_divisor = n;
      s.reduce_bucket_bytes = ReduceBucketBytes(r, p);
      s.optimizer_gradient_bytes = OptimizerGradientBytes(r, n);
      if (n > 1) {
        // Persistent parameters stay whole; the others are gathered per
        // module as forward and backward reach them.
        s.persistent_bytes = r.persistent_weight_bytes;
        s.unsharded_bytes = (r.root_weight_bytes - r.root_persistent_weight_bytes) +
                            2 * (r.block_weight_bytes - r.block_persistent_weight_bytes);
        s.reduce_scatter_bytes = r.block_gradient_bytes;
        s.recompute_gather_bytes = r.block_weight_bytes - r.block_persistent_weight_bytes;
        // The bucket's reduce copies the gradients it holds (Gloo: twice).
        const int64_t bucket = ReduceBucketBytes(r, p);
        s.flush_in_every_layer = r.gradient_bytes > bucket;
        s.bucket_flush_bytes = std::min(r.gradient_bytes, bucket) * (p.gloo ? 2 : 1);
      }
      break;
    }
    case DataParallel::kFsdp2:
    case DataParallel::kHsdp: {
      // The sharded parameters are the fp32 masters where there are any
      // (MixedPrecisionPolicy casts them to param_dtype when gathering):
      // the 16-bit copies of the trained weights (half the masters' bytes)
      // are not kept.
      const int64_t master = r.master_weight_bytes;
      s.parameter_bytes = CeilDiv(r.weight_bytes - master / 2 + master, n);
      s.optimizer_bytes = CeilDiv(r.optimizer_bytes - master, n);
      s.gradient_bytes = CeilDiv(r.gradient_bytes, n);
      s.gradient_divisor = n;
      if (n > 1) {
        // A fully_shard unit: gather_blocks blocks, gathered and reduced
        // together.
        const int64_t units = std::max<int64_t>(r.gather_blocks, 1);
        s.gather_blocks = units;
        const int64_t unit_weights = units * r.block_weight_bytes;
        const int64_t unit_gradients = units * r.block_gradient_bytes;
        if (p.reshard_after_forward) {
          s.unsharded_bytes = r.root_weight_bytes + unit_weights;
          s.fsdp_prefetch_bytes = unit_weights;
          // Per-block units: a recomputed block's pre-forward gathers it
          // again. A segment unit is gathered whole for its recompute and
          // stays so for its backward: the unit term counts it.
          if (p.fsdp_units == FsdpUnits::kBlock) s.recompute_gather_bytes = r.block_weight_bytes;
        } else {
          s.unsharded_bytes = r.weight_bytes;
        }
        // A block's unsharded gradients until its unit's reduce-scatter:
        // as backward makes them (param_dtype, as its weights), or
        // accumulated under set_requires_gradient_sync(False) over the first
        // K - 1 micro-batches (reduce_dtype; fsdp_no_sync). Otherwise each
        // micro-batch reduce-scatters into the sharded gradients. The reduce-scatter input of the
        // unit before lives until the next reduce-scatter.
        s.fsdp_accumulates = r.micro_batches > 1 && p.fsdp_no_sync;
        s.fsdp_gradient_bytes = s.fsdp_accumulates ? r.block_gradient_bytes : r.block_weight_bytes;
        s.reduce_scatter_bytes = unit_gradients;
      }
      break;
    }
  }
  OffloadState(r, p, &s);
  return s;
}

std::vector<RankLayerBuffers> RankLayerBuffersOf(const Profile& whole,
                                                 const RankModelState& state) {
  const int n_layers = static_cast<int>(whole.layers.size());
  std::vector<RankLayerBuffers> out(n_layers);
  std::vector<int> blocks;  // the block layers, in order
  for (int i = 0; i < n_layers; ++i) {
    if (whole.layers[i].kind == kBlockKind) blocks.push_back(i);
  }
  const int64_t g = std::max<int64_t>(state.gather_blocks, 1);
  const int64_t count = static_cast<int64_t>(blocks.size());
  const int64_t top = count > 0 ? (count - 1) / g : 0;  // the unit backward reduces first
  // FSDP2: each block's unsharded gradients beyond the shard its layer
  // counts, and their sums over blocks [0, k).
  std::vector<int64_t> excess(count), before(count + 1, 0);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t shard = state.gradients_on_host
                              ? 0
                              : CeilDiv(whole.layers[blocks[k]].gradient_bytes, state.gradient_divisor);
    excess[k] = state.fsdp_gradient_bytes > 0 ? std::max<int64_t>(0, state.fsdp_gradient_bytes - shard)
                                              : 0;
    before[k + 1] = before[k] + excess[k];
  }
  const bool fsdp = state.fsdp_gradient_bytes > 0;
  for (int64_t k = 0; k < count; ++k) {
    RankLayerBuffers& b = out[blocks[k]];
    const int64_t unit = k / g, unit_end = std::min(count, (unit + 1) * g);
    b.prefetch_forward = state.fsdp_prefetch_bytes;
    if (k >= g) b.prefetch_backward = state.fsdp_prefetch_bytes;
    if (!fsdp) {
      b.reduce_scatter = state.reduce_scatter_bytes;
      continue;
    }
    if (unit < top) b.reduce_scatter = state.reduce_scatter_bytes;
    if (state.fsdp_accumulates) {
      // First micro-batch: nothing reduced, blocks k.. hold theirs. Later:
      // the units not reduced yet, this one included.
      b.gradients_first = before[count] - before[k];
      b.gradients_later = before[unit_end];
    } else {
      // This block's and its unit's blocks after it (backward went there
      // first); the unit's reduce-scatter makes them shards. In
      // micro-batches 2..K the shards are there already (the first made
      // them) and the backward makes the unsharded gradients whole again:
      // post_backward left each unsharded parameter's grad None.
      b.gradients_first = before[unit_end] - before[k];
      b.gradients_later = (unit_end - k) * state.fsdp_gradient_bytes;
    }
  }
  if (fsdp && state.fsdp_accumulates && count > 0) {
    // Outside the blocks: before them every block's gradients are reduced
    // in the last micro-batch, none in the first; after them the reverse.
    for (int i = 0; i < n_layers; ++i) {
      if (whole.layers[i].kind == kBlockKind) continue;
      if (i < blocks.front()) out[i].gradients_first = before[count];
      if (i > blocks.back()) out[i].gradients_later = before[count];
    }
    for (RankLayerBuffers& b : out) b.gradients_forward = before[count];
  }
  for (int i = 0; i < n_layers; ++i) {
    const bool flush =
        state.flush_in_every_layer ? whole.layers[i].gradient_bytes > 0 : i == 0;
    if (flush) out[i].bucket_flush = state.bucket_flush_bytes;
  }
  return out;
}

Profile RankProfile(const Profile& whole, const RankModelState& state) {
  Profile p = whole;
  const std::vector<RankLayerBuffers> buffers = RankLayerBuffersOf(whole, state);
  // The size of one unit's unsharded gradients beyond their shards (the
  // pieces the gradient buffers are allocated in: FSDP2 allocates each
  // unit's apart).
  int64_t unit_gradients = 0;
  for (const LayerProfile& l : whole.layers) {
    if (l.kind != kBlockKind || state.fsdp_gradient_bytes <= 0) continue;
    const int64_t shard =
        state.gradients_on_host ? 0 : CeilDiv(l.gradient_bytes, state.gradient_divisor);
    unit_gradients = std::max(unit_gradients, state.fsdp_gradient_bytes - shard);
  }
  unit_gradients *= std::max<int64_t>(state.gather_blocks, 1);
  // FSDP2 reduces the root's gradients at the end of backward: whole until then.
  const bool whole_root = state.fsdp_gradient_bytes > 0;
  // CPUOffloadPolicy without set_requires_gradient_sync(False): every
  // micro-batch's reduce-scatters copy its gradients to the host, so no
  // gradient stays on the device from one micro-batch to the next. The
  // root's (kept whole until the end of backward) are then buffers of the
  // backward: those of the layers after the blocks (head, final norm) live
  // through every later backward, the embedding's in its own.
  const bool each_micro_batch = state.gradients_on_host && !state.fsdp_accumulates;
  // FSDP2 reducing every micro-batch: a block's unsharded gradients are
  // reduce-scattered and dropped at its post_backward, so autograd never
  // accumulates into them (the shard accumulates, in foreach_reduce).
  const bool fresh_gradients = state.fsdp_gradient_bytes > 0 && !state.fsdp_accumulates;
  int last_block = -1;
  for (int i = 0; i < static_cast<int>(whole.layers.size()); ++i) {
    if (whole.layers[i].kind == kBlockKind) last_block = i;
  }
  int64_t root_after = 0;  // the gradients of the layers after the blocks, whole
  for (int i = last_block + 1; each_micro_batch && i < static_cast<int>(whole.layers.size()); ++i) {
    root_after += whole.layers[i].gradient_bytes;
  }
  int64_t created = 0;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    LayerProfile& l = p.layers[i];
    const RankLayerBuffers& b = buffers[i];
    if (l.kind == kBlockKind || !whole_root) {
      l.gradient_bytes = CeilDiv(l.gradient_bytes, state.gradient_divisor);
    }
    if (l.kind == kBlockKind && state.gradients_on_host) l.gradient_bytes = 0;
    int64_t root_gradients = 0;  // each_micro_batch: the root's live in this backward
    if (each_micro_batch) {
      const bool before_blocks = static_cast<int>(i) < last_block && l.kind != kBlockKind;
      root_gradients = root_after + (before_blocks ? l.gradient_bytes : 0);
      l.gradient_bytes = 0;
    }
    if (l.kind == kBlockKind) l.recompute_gather_bytes = state.recompute_gather_bytes;
    if (l.kind == kBlockKind && fresh_gradients) {
      // No gradient to add into: each micro-batch's backward of a block is
      // the first's (gradients_later holds its unsharded gradients).
      l.accumulate_workspace_bytes = -1;
      l.tensors.accumulate_workspace.clear();
    }
    created += l.gradient_bytes;
    const int64_t backward = l.backward_workspace_bytes;
    const int64_t accumulate = l.accumulating_workspace_bytes();
    const int64_t shared = b.prefetch_backward + b.reduce_scatter + b.bucket_flush;
    // Each buffer as its own tensors: the prefetched unit's all-gather
    // output, the reduce-scatter input, the bucket's copy, the unsharded
    // gradients unit by unit.
    auto pieces = [&](std::initializer_list<int64_t> whole_buffers, int64_t gradients) {
      std::vector<int64_t> out;
      for (int64_t b : whole_buffers) {
        if (b > 0) out.push_back(b);
      }
      for (int64_t g : Pieces(gradients, unit_gradients)) out.push_back(g);
      return out;
    };
    // A layer without gradients of its own backpropagates in micro-batches
    // 2..K with its backward workspace (the simulator's accumulating one is
    // for layers whose gradients exist): the larger of the two there.
    const int64_t accumulate_add = shared + b.gradients_later;
    const int64_t backward_gradients =
        l.gradient_bytes > 0 ? b.gradients_first : std::max(b.gradients_first, b.gradients_later);
    const int64_t backward_add = shared + backward_gradients + root_gradients;
    const std::vector<int64_t> backward_pieces = pieces(
        {b.prefetch_backward, b.reduce_scatter, b.bucket_flush, root_gradients}, backward_gradients);
    const std::vector<int64_t> accumulate_pieces =
        pieces({b.prefetch_backward, b.reduce_scatter, b.bucket_flush}, b.gradients_later);
    if (l.accumulate_workspace_bytes < 0 && accumulate_add != backward_add) {
      l.tensors.accumulate_workspace = l.tensors.backward_workspace;  // it itemizes `backward`
    }
    AddPieces(&l.tensors.backward_workspace, backward, backward_pieces);
    l.backward_workspace_bytes = backward + backward_add;
    if (l.recompute_backward_workspace_bytes) *l.recompute_backward_workspace_bytes += backward_add;
    if (l.accumulate_workspace_bytes >= 0 || accumulate_add != backward_add) {
      AddPieces(&l.tensors.accumulate_workspace, accumulate, accumulate_pieces);
      l.accumulate_workspace_bytes = accumulate + accumulate_add;
    }
    const int64_t forward_add = b.prefetch_forward + b.gradients_forward;
    if (forward_add > 0) {
      const std::vector<int64_t> forward_pieces = pieces({b.prefetch_forward}, b.gradients_forward);
      AddPieces(&l.tensors.nograd_workspace, l.nograd_workspace_bytes(), forward_pieces);
      AddPieces(&l.tensors.forward_workspace, l.forward_workspace_bytes, forward_pieces);
      l.forward_workspace_bytes += forward_add;
      if (l.forward_nograd_workspace_bytes >= 0) l.forward_nograd_workspace_bytes += forward_add;
      for (SelectiveOption& o : l.selective) {
        if (o.forward_workspace_bytes < 0) continue;
        AddPieces(&o.forward_workspace_tensors, o.forward_workspace_bytes, forward_pieces);
        o.forward_workspace_bytes += forward_add;
      }
    }
  }
  p.static_memory.parameter_bytes =
      state.parameter_bytes + state.unsharded_bytes + state.persistent_bytes;
  p.static_memory.gradient_bytes =
      std::max<int64_t>(0, state.gradient_bytes - created) + state.ddp_bucket_bytes +
      state.reduce_bucket_bytes + state.optimizer_gradient_bytes + state.offload_staging_bytes;
  p.static_memory.optimizer_bytes = state.optimizer_bytes;
  // The optimizer step's temporaries follow the rank's share of the state
  // (whole.optimizer_workspace_tensors, per parameter, do not: one request).
  if (state.optimizer_bytes != whole.static_memory.optimizer_bytes) {
    const double share = whole.static_memory.optimizer_bytes > 0
                             ? static_cast<double>(state.optimizer_bytes) /
                                   static_cast<double>(whole.static_memory.optimizer_bytes)
                             : 0.0;
    p.optimizer_workspace_bytes =
        static_cast<int64_t>(share * static_cast<double>(whole.optimizer_workspace_bytes));
    p.optimizer_workspace_tensors.clear();
  }
  if (state.host_step_bytes > 0) {
    // The optimizer steps on the host (its temporaries there too).
    p.optimizer_ms = static_cast<double>(state.host_step_bytes) / (kHostStepGBps * 1e6);
    p.offload_copy_bytes = state.host_copy_bytes;
    p.optimizer_workspace_bytes = 0;
    p.optimizer_workspace_tensors.clear();
  }
  return p;
}

bool RegathersBlocks(const RankMemory& m, int64_t blocks) {
  return m.state.gather_blocks != blocks && m.parallel.fsdp_units == FsdpUnits::kSegment &&
         (m.parallel.data == DataParallel::kFsdp2 || m.parallel.data == DataParallel::kHsdp);
}

RankMemory WithGatherBlocks(const RankMemory& m, int64_t blocks) {
  if (!RegathersBlocks(m, blocks)) return m;
  // Each field but the profile, which is made again.
  RankMemory out;
  out.rank = m.rank;
  out.ranks = m.ranks;
  out.stage = m.stage;
  out.in_flight = m.in_flight;
  out.replica = m.replica;
  out.replica.gather_blocks = blocks;
  out.stage_profile = m.stage_profile;
  out.parallel = m.parallel;
  out.state = ShardModelState(out.replica, m.parallel);
  out.profile = RankProfile(*m.stage_profile, out.state);
  return out;
}

ReplicaState ReplicaOfProfile(const Profile& profile) {
  ReplicaState r;
  r.weight_bytes = profile.static_memory.parameter_bytes;
  r.optimizer_bytes = profile.static_memory.optimizer_bytes;
  int64_t created = 0, block = 0, root = 0;
  for (const LayerProfile& l : profile.layers) {
    created += l.gradient_bytes;
    if (l.kind == kBlockKind) {
      block = std::max(block, l.gradient_bytes);
    } else {
      root += l.gradient_bytes;
    }
  }
  r.gradient_bytes = profile.static_memory.gradient_bytes + created;
  r.block_gradient_bytes = block;
  if (created > 0) {
    const double per = static_cast<double>(r.weight_bytes) / static_cast<double>(created);
    r.block_weight_bytes = static_cast<int64_t>(per * static_cast<double>(block));
    r.root_weight_bytes = static_cast<int64_t>(per * static_cast<double>(root));
  }
  return r;
}

}  // namespace remat
