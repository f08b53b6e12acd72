// A rank's model state under data parallelism: the ZeRO paper's division and
// each engine's buffers (remat/rank_memory.h).
#include <algorithm>

#include "remat/rank_memory.h"

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

}  // namespace

std::vector<MemoryTerm> RankModelState::terms() const {
  std::vector<MemoryTerm> t = {{"parameters", parameter_bytes},
                               {"gradients", gradient_bytes},
                               {"optimizer", optimizer_bytes}};
  if (ddp_bucket_bytes > 0) t.push_back({"ddp_buckets", ddp_bucket_bytes});
  if (unsharded_bytes > 0) t.push_back({"fsdp_unsharded", unsharded_bytes});
  if (reduce_scatter_bytes > 0) t.push_back({"reduce_scatter", reduce_scatter_bytes});
  if (reduce_bucket_bytes > 0) t.push_back({"reduce_bucket", reduce_bucket_bytes});
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
    case DataParallel::kZero3:  // (2 + 2 + K) Ψ / Nd
      s.parameter_bytes = CeilDiv(r.weight_bytes, n);
      s.gradient_bytes = CeilDiv(r.gradient_bytes, n);
      s.optimizer_bytes = CeilDiv(r.optimizer_bytes, n);
      s.gradient_divisor = n;
      s.unsharded_bytes = n > 1 ? r.root_weight_bytes + 2 * r.block_weight_bytes : 0;
      s.reduce_scatter_bytes = n > 1 ? r.block_gradient_bytes : 0;
      s.reduce_bucket_bytes = ReduceBucketBytes(r, p);
      break;
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
        s.unsharded_bytes = p.reshard_after_forward ? r.root_weight_bytes + 2 * r.block_weight_bytes
                                                    : r.weight_bytes;
        // The block's unsharded gradients (param_dtype, as its weights) and
        // the reduce-scatter input (reduce_dtype).
        s.reduce_scatter_bytes = r.block_weight_bytes + r.block_gradient_bytes;
      }
      break;
    }
  }
  return s;
}

Profile RankProfile(const Profile& whole, const RankModelState& state) {
  Profile p = whole;
  int64_t created = 0;
  for (LayerProfile& l : p.layers) {
    l.gradient_bytes = CeilDiv(l.gradient_bytes, state.gradient_divisor);
    created += l.gradient_bytes;
    // A block's reduce buffers live during its backward.
    if (l.kind == kBlockKind) {
      l.backward_workspace_bytes += state.reduce_scatter_bytes;
      if (l.accumulate_workspace_bytes >= 0) {
        l.accumulate_workspace_bytes += state.reduce_scatter_bytes;
      }
    }
  }
  p.static_memory.parameter_bytes = state.parameter_bytes + state.unsharded_bytes;
  p.static_memory.gradient_bytes =
      std::max<int64_t>(0, state.gradient_bytes - created) + state.ddp_bucket_bytes +
      state.reduce_bucket_bytes;
  p.static_memory.optimizer_bytes = state.optimizer_bytes;
  return p;
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
