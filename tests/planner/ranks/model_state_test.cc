// Each data-parallel term against the ZeRO paper's formulas and the engines'
// allocations, by hand-computed numbers (docs/distributed.md).
#include <gtest/gtest.h>

#include "remat/analytic/analytic.h"
#include "remat/ranks/rank_memory.h"

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

// The paper's model with a block of 400 B of bf16 weights and 800 B of fp32
// gradients (the reduce dtype), and a root of 1,000 B of weights.
ReplicaState PaperReplicaWithBlocks() {
  ReplicaState r = PaperReplica();
  r.block_weight_bytes = 400;
  r.block_gradient_bytes = 800;
  r.root_weight_bytes = 1000;
  return r;
}

Parallelism Data(DataParallel d, int64_t gpus) {
  Parallelism p;
  p.gpus = gpus;
  p.data = d;
  return p;
}

// embedding, block0..block3, head: each layer's gradients `gradients` B.
Profile SixLayers(int64_t gradients) {
  Profile whole;
  whole.layers.resize(6);
  for (int i = 0; i < 6; ++i) {
    whole.layers[i].kind = i == 0 ? kEmbeddingKind : i == 5 ? "head" : kBlockKind;
    whole.layers[i].gradient_bytes = gradients;
  }
  return whole;
}

// The ZeRO paper's three terms, without the engines' buffers.
int64_t StateBytes(const RankModelState& s) {
  return s.parameter_bytes + s.gradient_bytes + s.optimizer_bytes;
}

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
    bool named = false;
    for (const MemoryTerm& t : s.terms()) named = named || t.name == "reduce_bucket";
    EXPECT_TRUE(named) << ToString(d);
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
  const ReplicaState r = PaperReplicaWithBlocks();
  const RankModelState s = ShardModelState(r, Data(DataParallel::kFsdp2, 8));
  // The fp32 masters are the sharded parameters (4Ψ / 8); no bf16 copy kept.
  EXPECT_EQ(s.parameter_bytes, 4 * kPsi / 8);
  EXPECT_EQ(s.optimizer_bytes, 8 * kPsi / 8);  // the two moments
  EXPECT_EQ(s.gradient_bytes, 2 * kPsi / 8);
  EXPECT_EQ(s.gradient_divisor, 8);
  // The root's weights and one block's (computing) unsharded all step, a
  // second block's (all-gather output kept in forward, prefetched in
  // backward) in the passes RankProfile places it in.
  EXPECT_EQ(s.unsharded_bytes, 1000 + 400);
  EXPECT_EQ(s.fsdp_prefetch_bytes, 400);
  // A block's bf16 unsharded gradients until its reduce-scatter, and the
  // fp32 reduce-scatter input of the block reduced before.
  EXPECT_EQ(s.fsdp_gradient_bytes, 400);
  EXPECT_EQ(s.reduce_scatter_bytes, 800);
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
  EXPECT_EQ(ShardModelState(r, p).fsdp_prefetch_bytes, 0);
}

TEST(ShardModelState, Fsdp2GathersAndReducesASegmentAsOneUnit) {
  // A recompute segment of 3 blocks is one fully_shard unit: 3 blocks'
  // weights gathered together, computing and prefetched, and reduced
  // together.
  ReplicaState r = PaperReplicaWithBlocks();
  r.gather_blocks = 3;
  const RankModelState s = ShardModelState(r, Data(DataParallel::kFsdp2, 8));
  EXPECT_EQ(s.gather_blocks, 3);
  EXPECT_EQ(s.unsharded_bytes, 1000 + 3 * 400);
  EXPECT_EQ(s.fsdp_prefetch_bytes, 3 * 400);
  EXPECT_EQ(s.reduce_scatter_bytes, 3 * 800);
  // One rank: nothing gathered.
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kFsdp2, 1)).unsharded_bytes, 0);
}

TEST(ShardModelState, Fsdp2AccumulatesUnshardedGradients) {
  // Under set_requires_gradient_sync(False) FSDP2 keeps each parameter's
  // unsharded gradient, in the reduce dtype, until the last micro-batch's
  // reduce-scatter.
  ReplicaState r = PaperReplicaWithBlocks();
  r.micro_batches = 2;
  Parallelism p = Data(DataParallel::kFsdp2, 8);
  p.fsdp_no_sync = true;
  const RankModelState s = ShardModelState(r, p);
  EXPECT_TRUE(s.fsdp_accumulates);
  EXPECT_EQ(s.fsdp_gradient_bytes, 800);
  EXPECT_EQ(s.gradient_bytes, 2 * kPsi / 8);  // what the step leaves: the shards
  // Without no-sync every micro-batch reduce-scatters: as with one.
  EXPECT_FALSE(ShardModelState(r, Data(DataParallel::kFsdp2, 8)).fsdp_accumulates);
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kFsdp2, 8)).fsdp_gradient_bytes, 400);
  // ZeRO-2/3 reduce every micro-batch into the partitions.
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero3, 8)).fsdp_gradient_bytes, 0);
}

TEST(RankLayerBuffers, Fsdp2HoldsUnshardedGradientsUntilTheUnitsReduce) {
  // Units of 2 blocks; each block's gradients 100 B whole, 50 B a shard on
  // 2 ranks: 50 B beyond the shard.
  const Profile whole = SixLayers(100);
  RankModelState s;
  s.gradient_divisor = 2;
  s.gather_blocks = 2;
  s.fsdp_gradient_bytes = 100;
  s.reduce_scatter_bytes = 200;
  std::vector<RankLayerBuffers> b = RankLayerBuffersOf(whole, s);
  // One micro-batch: backward runs block3, block2 (unit 1, reduced first),
  // then block1, block0 beside unit 1's reduce-scatter input.
  EXPECT_EQ(b[4].gradients_first, 50);
  EXPECT_EQ(b[3].gradients_first, 100);
  EXPECT_EQ(b[2].gradients_first, 50);
  EXPECT_EQ(b[1].gradients_first, 100);
  EXPECT_EQ(b[4].reduce_scatter, 0);
  EXPECT_EQ(b[2].reduce_scatter, 200);
  EXPECT_EQ(b[0].gradients_first + b[5].gradients_first, 0);
  // Accumulating: the first micro-batch reduces nothing; the last holds the
  // units not reduced yet, and all of them at the head.
  s.fsdp_accumulates = true;
  b = RankLayerBuffersOf(whole, s);
  EXPECT_EQ(b[1].gradients_first, 4 * 50);
  EXPECT_EQ(b[4].gradients_first, 50);
  EXPECT_EQ(b[0].gradients_first, 4 * 50);
  EXPECT_EQ(b[4].gradients_later, 4 * 50);
  EXPECT_EQ(b[2].gradients_later, 2 * 50);
  EXPECT_EQ(b[1].gradients_later, 2 * 50);
  EXPECT_EQ(b[5].gradients_later, 4 * 50);
  EXPECT_EQ(b[0].gradients_later, 0);
  // The root's gradients stay whole (reduced at the end of backward).
  const Profile p = RankProfile(whole, s);
  EXPECT_EQ(p.layers[5].gradient_bytes, 100);
  EXPECT_EQ(p.layers[1].gradient_bytes, 50);
  EXPECT_EQ(p.layers[1].accumulating_workspace_bytes(), 2 * 50 + 200);
}

TEST(RankProfile, Fsdp2ReducingEachMicroBatchMakesWholeGradientsAgain) {
  // Without no-sync each unit's post_backward reduce-scatters its unsharded
  // gradients and leaves unsharded_param.grad None: in micro-batches 2..K
  // autograd adds into nothing (the layer's backward workspace, 6 B, not
  // its accumulating one, 9 B) and makes the block's gradients whole again
  // (100 B) beside the shard the first micro-batch made (50 B, counted as
  // the layer's gradients). Units of 2 blocks on 2 ranks.
  Profile whole = SixLayers(100);
  for (LayerProfile& l : whole.layers) {
    l.backward_workspace_bytes = 6;
    l.accumulate_workspace_bytes = 9;
  }
  RankModelState s;
  s.gradient_divisor = 2;
  s.gather_blocks = 2;
  s.fsdp_gradient_bytes = 100;
  s.reduce_scatter_bytes = 200;
  const std::vector<RankLayerBuffers> b = RankLayerBuffersOf(whole, s);
  EXPECT_EQ(b[4].gradients_later, 100);  // block3: its own
  EXPECT_EQ(b[3].gradients_later, 200);  // block2: and block3's, its unit's
  EXPECT_EQ(b[2].gradients_later, 100);
  EXPECT_EQ(b[1].gradients_later, 200);
  const Profile p = RankProfile(whole, s);
  // block1: unit 1's reduce-scatter input (200) beside it.
  EXPECT_EQ(p.layers[2].gradient_bytes, 50);
  EXPECT_EQ(p.layers[2].backward_workspace_bytes, 6 + 200 + 50);
  EXPECT_EQ(p.layers[2].accumulating_workspace_bytes(), 6 + 200 + 100);
  EXPECT_EQ(p.layers[4].accumulating_workspace_bytes(), 6 + 100);
  // The root's gradients are whole (reduced at the end of backward) and
  // accumulate as the layer's own.
  EXPECT_EQ(p.layers[5].accumulating_workspace_bytes(), 9);
}

TEST(ShardModelState, Zero3KeepsPersistentParametersWhole) {
  // stage3_param_persistence_threshold: the parameters under it stay whole
  // beside their shard and are never gathered again.
  ReplicaState r;
  r.weight_bytes = r.gradient_bytes = 10'000;
  r.optimizer_bytes = 20'000;
  r.root_weight_bytes = 2000;
  r.block_weight_bytes = 1000;
  r.block_gradient_bytes = 1000;
  r.persistent_weight_bytes = 3000;
  r.root_persistent_weight_bytes = 500;
  r.block_persistent_weight_bytes = 250;
  const RankModelState s = ShardModelState(r, Data(DataParallel::kZero3, 2));
  EXPECT_EQ(s.parameter_bytes, 5000);
  EXPECT_EQ(s.persistent_bytes, 3000);
  EXPECT_EQ(s.unsharded_bytes, (2000 - 500) + 2 * (1000 - 250));
  // Every parameter persistent: nothing to gather.
  r.persistent_weight_bytes = r.weight_bytes;
  r.root_persistent_weight_bytes = r.root_weight_bytes;
  r.block_persistent_weight_bytes = r.block_weight_bytes;
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero3, 2)).unsharded_bytes, 0);
  bool named = false;
  for (const MemoryTerm& t : ShardModelState(r, Data(DataParallel::kZero3, 2)).terms()) {
    named = named || (t.name == "zero3_persistent" && t.bytes == 10'000);
  }
  EXPECT_TRUE(named);
  // Other stages keep every weight whole anyway.
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero2, 2)).persistent_bytes, 0);
}

TEST(ShardModelState, Zero3OptimizerStepsFromAnFp32GradientPartition) {
  // initialize_optimizer_states' fp32 gradient buffer: the rank's partition
  // of the gradients in fp32, besides the partition backward reduces into.
  ReplicaState r;
  r.weight_bytes = r.gradient_bytes = 1000;  // fp32: 250 elements
  r.optimizer_bytes = 2000;
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero3, 2)).optimizer_gradient_bytes, 500);
  r.gradient_element_bytes = 2;  // bf16 gradients: 500 elements, 250 a rank, fp32
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero3, 2)).optimizer_gradient_bytes, 1000);
  r.optimizer_bytes = 0;  // no optimizer
  EXPECT_EQ(ShardModelState(r, Data(DataParallel::kZero3, 2)).optimizer_gradient_bytes, 0);
}

TEST(ShardModelState, Zero3FlushCopiesTheBucketsGradients) {
  // reduce_scatter_coalesced copies what the bucket holds (torch.cat); on
  // Gloo reduce_scatter_tensor copies it again.
  ReplicaState r;
  r.weight_bytes = r.gradient_bytes = 1000;
  Parallelism p = Data(DataParallel::kZero3, 2);
  RankModelState s = ShardModelState(r, p);
  EXPECT_EQ(s.bucket_flush_bytes, 1000);
  EXPECT_FALSE(s.flush_in_every_layer);  // one flush, where backward ends
  p.gloo = true;
  EXPECT_EQ(ShardModelState(r, p).bucket_flush_bytes, 2000);
  // Gradients beyond one bucket: a bucket's worth at any layer's backward.
  p.gloo = false;
  p.bucket_cap_mb = 1.0 / 4096;  // 256 B: 64 fp32 elements
  s = ShardModelState(r, p);
  EXPECT_EQ(s.bucket_flush_bytes, 256);
  EXPECT_TRUE(s.flush_in_every_layer);
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

TEST(RankProfile, PlacesFsdp2sSecondUnitAndZero3sFlush) {
  Profile whole = SixLayers(10);
  for (LayerProfile& l : whole.layers) {
    l.forward_workspace_bytes = 1;
    l.backward_workspace_bytes = 2;
  }
  RankModelState s;
  s.fsdp_prefetch_bytes = 100;
  s.gather_blocks = 2;
  s.reduce_scatter_bytes = 7;
  s.bucket_flush_bytes = 1000;
  const Profile p = RankProfile(whole, s);
  // Every block's forward holds a second unit (the all-gather output kept).
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(p.layers[i].forward_workspace_bytes, 101) << i;
  EXPECT_EQ(p.layers[5].forward_workspace_bytes, 1);
  // Backward: the first unit (block0, block1) has nothing to prefetch.
  EXPECT_EQ(p.layers[1].backward_workspace_bytes, 2 + 7);
  EXPECT_EQ(p.layers[2].backward_workspace_bytes, 2 + 7);
  EXPECT_EQ(p.layers[3].backward_workspace_bytes, 2 + 7 + 100);
  EXPECT_EQ(p.layers[3].accumulating_workspace_bytes(), 2 + 7 + 100);
  // The flush: where backward ends (the first layer), or every layer with
  // gradients where they exceed a bucket.
  EXPECT_EQ(p.layers[0].backward_workspace_bytes, 2 + 1000);
  EXPECT_EQ(p.layers[5].backward_workspace_bytes, 2);
  s.flush_in_every_layer = true;
  s.fsdp_prefetch_bytes = s.reduce_scatter_bytes = 0;
  const Profile every = RankProfile(whole, s);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(every.layers[i].backward_workspace_bytes, 1002) << i;
}

}  // namespace
}  // namespace remat
