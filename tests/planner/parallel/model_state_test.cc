// Each data-parallel term against the ZeRO paper's formulas and the engines'
// allocations, by hand-computed numbers (docs/distributed.md).
#include <gtest/gtest.h>

#include "remat/analytic.h"
#include "remat/rank_memory.h"

namespace remat {
namespace {

// The ZeRO paper's Figure 1 model: Ψ = 7.5B parameters, mixed precision
// with Adam (K = 12: fp32 master weights, momentum, variance), Nd = 64.
constexpr int64_t kPsi = 7'500'000'000;

ReplicaState PaperReplica() {
  ReplicaState r;
  r.weight_bytes = 2 * kPsi;
  r.gradient_bytes = 2 * kPsi;
  r.optimizer_bytes = 12 * kPsi;
  r.master_weight_bytes = 4 * kPsi;
  return r;
}

Parallelism Data(DataParallel d, int64_t gpus) {
  Parallelism p;
  p.gpus = gpus;
  p.data = d;
  return p;
}

// The model state alone, without DeepSpeed's reduce bucket.
int64_t StateBytes(const RankModelState& s) { return s.total() - s.reduce_bucket_bytes; }

TEST(ShardModelState, ZeroStagesAreThePapersFigure1) {
  const ReplicaState r = PaperReplica();
  // (2 + 2 + K) Ψ = 120 GB.
  EXPECT_EQ(StateBytes(ShardModelState(r, Data(DataParallel::kZero0, 64))), 120'000'000'000);
  // 2Ψ + 2Ψ + KΨ / Nd = 31.4 GB.
  EXPECT_EQ(StateBytes(ShardModelState(r, Data(DataParallel::kZero1, 64))), 31'406'250'000);
  // 2Ψ + (2 + K) Ψ / Nd = 16.6 GB (and the reduce buffers of a block: none here).
  EXPECT_EQ(StateBytes(ShardModelState(r, Data(DataParallel::kZero2, 64))), 16'640'625'000);
  // (2 + 2 + K) Ψ / Nd = 1.9 GB.
  EXPECT_EQ(StateBytes(ShardModelState(r, Data(DataParallel::kZero3, 64))), 1'875'000'000);
}

TEST(ShardModelState, DeepSpeedHoldsItsWholeReduceBucket) {
  // bucket_cap_mb 25: 25 x 2^20 / 4 = 6,553,600 elements; fp32 gradients:
  // 26,214,400 B whatever the model's size; bf16 gradients: half of it.
  ReplicaState r;
  r.weight_bytes = r.gradient_bytes = 1000;
  r.block_gradient_bytes = 100;
  for (DataParallel d : {DataParallel::kZero1, DataParallel::kZero2, DataParallel::kZero3}) {
    const RankModelState s = ShardModelState(r, Data(d, 2));
    EXPECT_EQ(s.reduce_bucket_bytes, 26'214'400) << ToString(d);
    EXPECT_EQ(s.terms().back().name, "reduce_bucket") << ToString(d);
  }
  // ZeRO-2/3: the block's gradients as backward makes them, beside the bucket.
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero2, 2)).reduce_scatter_bytes, 100);
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero0, 2)).reduce_bucket_bytes, 0);
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kDdp, 2)).reduce_bucket_bytes, 0);
  Parallelism p = Data(DataParallel::kZero2, 2);
  p.bucket_cap_mb = 50;
  r.gradient_element_bytes = 2;
  EXPECT_EQ(ShardModelState(r, p).reduce_bucket_bytes, 13'107'200 * 2);
  // RankProfile counts it with the gradients, from the first step on.
  Profile whole;
  const RankModelState s = ShardModelState(r, p);
  EXPECT_EQ(RankProfile(whole, s).static_memory.gradient_bytes, s.gradient_bytes + 26'214'400);
}

TEST(ShardModelState, MegatronDistributedOptimizerIsSixPlusTwelveOverD) {
  // Megatron keeps fp32 main gradients: 18 B/param, and its distributed
  // optimizer (ZeRO-1) holds 6 + 12/d.
  const BytesPerParameter per =
      ModelStatePerParameter(Precision::kMixedBf16, Optimizer::kAdamW, GradDtype::kFp32);
  EXPECT_EQ(per.total(), 18);
  const int64_t n = 1'000'000;
  ReplicaState r;
  r.weight_bytes = per.weights * n;
  r.gradient_bytes = per.gradients * n;
  r.optimizer_bytes = per.optimizer * n;
  // (DeepSpeed's reduce bucket apart: Megatron's ZeRO-1 has none.)
  EXPECT_EQ(StateBytes(ShardModelState(r, Data(DataParallel::kZero1, 8))), 6 * n + 12 * n / 8);
}

TEST(ShardModelState, DdpBucketsAreASecondCopyOfTheGradients) {
  ReplicaState r = PaperReplica();
  const RankModelState s = ShardModelState(r, Data(DataParallel::kDdp, 8));
  EXPECT_EQ(s.parameter_bytes, 2 * kPsi);
  EXPECT_EQ(s.gradient_bytes, 2 * kPsi);
  EXPECT_EQ(s.optimizer_bytes, 12 * kPsi);
  EXPECT_EQ(s.ddp_bucket_bytes, 2 * kPsi);
  EXPECT_EQ(s.gradient_divisor, 1);
  ASSERT_EQ(s.terms().size(), 4u);
  EXPECT_EQ(s.terms()[3].name, "ddp_buckets");
}

TEST(ShardModelState, Fsdp2ShardsTheMasterWeightsAndGathersTwoBlocks) {
  ReplicaState r = PaperReplica();
  r.block_weight_bytes = 400;
  r.block_gradient_bytes = 800;  // fp32 reduce dtype
  r.root_weight_bytes = 1000;
  const RankModelState s = ShardModelState(r, Data(DataParallel::kFsdp2, 8));
  // The fp32 masters are the sharded parameters (4Ψ / 8); no bf16 copy kept.
  EXPECT_EQ(s.parameter_bytes, 4 * kPsi / 8);
  EXPECT_EQ(s.optimizer_bytes, 8 * kPsi / 8);  // the two moments
  EXPECT_EQ(s.gradient_bytes, 2 * kPsi / 8);
  EXPECT_EQ(s.gradient_divisor, 8);
  // The root's weights and two blocks' (computing, prefetched), unsharded.
  EXPECT_EQ(s.unsharded_bytes, 1000 + 2 * 400);
  // A block's bf16 gradients and the fp32 reduce-scatter input.
  EXPECT_EQ(s.reduce_scatter_bytes, 400 + 800);
  // (4 + 2 + 8) Ψ / Nd: ZeRO-3's (2 + 2 + K) Ψ / Nd less the 16-bit
  // partition DeepSpeed keeps beside the masters.
  EXPECT_EQ(s.parameter_bytes + s.gradient_bytes + s.optimizer_bytes, 14 * kPsi / 8);
}

TEST(ShardModelState, ShardGradOpKeepsEveryUnshardedWeightAfterForward) {
  ReplicaState r = PaperReplica();
  r.block_weight_bytes = 400;
  Parallelism p = Data(DataParallel::kFsdp2, 8);
  p.reshard_after_forward = false;
  EXPECT_EQ(ShardModelState(r, p).unsharded_bytes, 2 * kPsi);
}

TEST(ShardModelState, HsdpShardsWithinItsGroup) {
  const ReplicaState r = PaperReplica();
  Parallelism p = Data(DataParallel::kHsdp, 32);
  p.shard_group = 8;
  EXPECT_EQ(p.shard_ranks(), 8);
  const RankModelState s = ShardModelState(r, p);
  EXPECT_EQ(s.gradient_bytes, 2 * kPsi / 8);
  EXPECT_EQ(s.parameter_bytes + s.optimizer_bytes, 12 * kPsi / 8);
  p.shard_group = 0;  // default: 8 ranks a node
  EXPECT_EQ(p.shard_ranks(), 8);
}

TEST(ShardModelState, FrozenWeightsShardOnlyUnderZero3AndFsdp2) {
  // LoRA: 1,000 frozen bf16 weights (2,000 B), 10 trained adapters.
  ReplicaState r;
  r.weight_bytes = 2000 + 20;
  r.gradient_bytes = 20;
  r.optimizer_bytes = 120;
  r.master_weight_bytes = 40;
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero2, 4)).parameter_bytes, 2020);
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero3, 4)).parameter_bytes, 505);
  // FSDP2: frozen 2,000 + the adapters' fp32 masters 40, over 4.
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kFsdp2, 4)).parameter_bytes, 510);
}

TEST(RankProfile, DividesTheLayersGradientsAndPlacesTheBuffers) {
  Profile whole;
  whole.layers.resize(2);
  whole.layers[0].gradient_bytes = 10;
  whole.layers[0].kind = kEmbeddingKind;
  whole.layers[1].gradient_bytes = 7;
  whole.layers[1].kind = kBlockKind;
  whole.layers[1].backward_workspace_bytes = 100;
  RankModelState s;
  s.parameter_bytes = 100;
  s.gradient_bytes = 5 + 3;  // the layers' shards, rounded up
  s.optimizer_bytes = 50;
  s.unsharded_bytes = 20;
  s.reduce_scatter_bytes = 9;
  s.gradient_divisor = 2;
  const Profile p = RankProfile(whole, s);
  EXPECT_EQ(p.layers[0].gradient_bytes, 5);
  EXPECT_EQ(p.layers[1].gradient_bytes, 4);
  EXPECT_EQ(p.static_memory.parameter_bytes, 120);
  EXPECT_EQ(p.static_memory.gradient_bytes, 0);  // none persistent
  // The reduce buffers live in the block's backward.
  EXPECT_EQ(p.layers[0].backward_workspace_bytes, 0);
  EXPECT_EQ(p.layers[1].backward_workspace_bytes, 109);
  EXPECT_EQ(p.static_memory.optimizer_bytes, 50);
}

}  // namespace
}  // namespace remat
