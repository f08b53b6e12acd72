// State offload (Parallelism::offload): FSDP2's CPUOffloadPolicy and
// DeepSpeed ZeRO-Offload move terms of a rank's model state to the host,
// by hand-computed numbers (docs/levers.md, docs/distributed.md).
#include <gtest/gtest.h>

#include "remat/ranks/rank_memory.h"

namespace remat {
namespace {

constexpr int64_t kPsi = 1'000'000;

// Mixed precision with AdamW: bf16 weights, fp32 gradients, fp32 masters
// and two moments; a block of 400 B of weights and 800 B of gradients, a
// root of 1,000 B.
ReplicaState Mixed() {
  ReplicaState r;
  r.weight_bytes = 2 * kPsi;
  r.gradient_bytes = 4 * kPsi;
  r.gradient_element_bytes = 4;
  r.optimizer_bytes = 12 * kPsi;
  r.master_weight_bytes = 4 * kPsi;
  r.trained_weight_bytes = 2 * kPsi;
  r.block_weight_bytes = 400;
  r.block_gradient_bytes = 800;
  r.root_weight_bytes = 1000;
  return r;
}

Parallelism Data(DataParallel d, int64_t gpus, StateOffload offload) {
  Parallelism p;
  p.gpus = gpus;
  p.data = d;
  p.offload = offload;
  return p;
}

TEST(StateOffload, FsdpCpuOffloadKeepsTheShardsOnTheHost) {
  const RankModelState on = ShardModelState(Mixed(), Data(DataParallel::kFsdp2, 4, StateOffload::kNone));
  const RankModelState off =
      ShardModelState(Mixed(), Data(DataParallel::kFsdp2, 4, StateOffload::kFsdpCpu));
  // The device keeps none of the shards; the host all of them.
  EXPECT_EQ(off.parameter_bytes, 0);
  EXPECT_EQ(off.gradient_bytes, 0);
  EXPECT_EQ(off.optimizer_bytes, 0);
  EXPECT_EQ(off.host_parameter_bytes, on.parameter_bytes);
  EXPECT_EQ(off.host_gradient_bytes, on.gradient_bytes);
  EXPECT_EQ(off.host_optimizer_bytes, on.optimizer_bytes);
  EXPECT_EQ(off.host_bytes(), (4 + 4 + 8) * kPsi / 4);  // fp32 masters, gradients, moments
  EXPECT_TRUE(off.gradients_on_host);
  // What is gathered stays on the device.
  EXPECT_EQ(off.unsharded_bytes, on.unsharded_bytes);
  EXPECT_EQ(off.fsdp_prefetch_bytes, on.fsdp_prefetch_bytes);
  EXPECT_EQ(off.reduce_scatter_bytes, on.reduce_scatter_bytes);
  // A micro-batch gathers the shards in forward and again in backward and
  // copies each gradient shard down.
  EXPECT_EQ(off.host_copy_bytes, 2 * kPsi + kPsi);
  ASSERT_EQ(off.host_terms().size(), 3u);
  EXPECT_EQ(off.host_terms()[2].name, "host_optimizer");
}

TEST(StateOffload, FsdpCopiesFollowTheMicroBatchesAndNoSync) {
  ReplicaState r = Mixed();
  r.micro_batches = 4;
  Parallelism p = Data(DataParallel::kFsdp2, 4, StateOffload::kFsdpCpu);
  const int64_t shard_weights = kPsi, shard_gradients = kPsi;
  EXPECT_EQ(ShardModelState(r, p).host_copy_bytes, 4 * (2 * shard_weights + shard_gradients));
  p.fsdp_no_sync = true;  // one reduce-scatter a step
  EXPECT_EQ(ShardModelState(r, p).host_copy_bytes, 4 * 2 * shard_weights + shard_gradients);
  p.fsdp_no_sync = false;
  p.reshard_after_forward = false;  // gathered once, kept for backward
  EXPECT_EQ(ShardModelState(r, p).host_copy_bytes, 4 * (shard_weights + shard_gradients));
}

TEST(StateOffload, ZeroOffloadKeepsMastersMomentsAndFp32GradientsOnTheHost) {
  const RankModelState on = ShardModelState(Mixed(), Data(DataParallel::kZero2, 4, StateOffload::kNone));
  const RankModelState off =
      ShardModelState(Mixed(), Data(DataParallel::kZero2, 4, StateOffload::kOptimizer));
  EXPECT_EQ(off.optimizer_bytes, 0);
  EXPECT_EQ(off.parameter_bytes, on.parameter_bytes);  // the bf16 weights whole
  EXPECT_EQ(off.gradient_bytes, on.gradient_bytes);
  EXPECT_EQ(off.host_optimizer_bytes, 12 * kPsi / 4);
  EXPECT_EQ(off.host_gradient_bytes, 4 * kPsi / 4);   // the fp32 gradient partition
  EXPECT_EQ(off.host_parameter_bytes, 2 * kPsi / 4);  // the 16-bit partition copied up
  // Down: the gradient partition; up: the updated 16-bit partition.
  EXPECT_EQ(off.host_copy_bytes, 4 * kPsi / 4 + 2 * kPsi / 4);
  // DeepSpeedCPUAdam: masters and moments read and written, gradients read,
  // the 16-bit partition written.
  EXPECT_EQ(off.host_step_bytes, 2 * 12 * kPsi / 4 + 4 * kPsi / 4 + 2 * kPsi / 4);
}

TEST(StateOffload, ZeroOffloadStagesTheLargestParameterOnBothSides) {
  ReplicaState r = Mixed();
  r.largest_trained_weight_bytes = 1000;
  const RankModelState s = ShardModelState(r, Data(DataParallel::kZero2, 4, StateOffload::kOptimizer));
  EXPECT_EQ(s.host_gradient_bytes, 4 * kPsi / 4 + 1000);
  EXPECT_EQ(s.offload_staging_bytes, 1000);
  const RankModelState z3 = ShardModelState(r, Data(DataParallel::kZero3, 4, StateOffload::kOptimizer));
  EXPECT_EQ(z3.offload_staging_bytes, 0);  // stage3.py has no such buffers
}

TEST(StateOffload, ZeroOffloadMakesAnFp32PartitionForFp32Weights) {
  ReplicaState r;  // fp32 weights and gradients, AdamW: no masters
  r.weight_bytes = 4 * kPsi;
  r.gradient_bytes = 4 * kPsi;
  r.optimizer_bytes = 8 * kPsi;
  r.trained_weight_bytes = 4 * kPsi;
  const RankModelState s = ShardModelState(r, Data(DataParallel::kZero1, 2, StateOffload::kOptimizer));
  // stage_1_and_2.py clones the fp32 partition it steps whatever the dtype.
  EXPECT_EQ(s.host_optimizer_bytes, (8 + 4) * kPsi / 2);
  EXPECT_EQ(s.host_gradient_bytes, 4 * kPsi / 2);
  EXPECT_EQ(s.host_parameter_bytes, 4 * kPsi / 2);
}

TEST(StateOffload, Zero3OffloadMovesItsFp32GradientPartition) {
  const RankModelState on = ShardModelState(Mixed(), Data(DataParallel::kZero3, 4, StateOffload::kNone));
  const RankModelState off =
      ShardModelState(Mixed(), Data(DataParallel::kZero3, 4, StateOffload::kOptimizer));
  EXPECT_GT(on.optimizer_gradient_bytes, 0);
  EXPECT_EQ(off.optimizer_gradient_bytes, 0);
  EXPECT_EQ(off.host_gradient_bytes, on.optimizer_gradient_bytes);
  EXPECT_EQ(off.host_parameter_bytes, 0);  // its 16-bit shards stay on the device
  EXPECT_EQ(off.parameter_bytes, on.parameter_bytes);
}

TEST(StateOffload, RankProfileKeepsNoBlockGradientOnTheDeviceAndStepsOnTheHost) {
  Profile whole;
  whole.layers.resize(3);
  for (int i = 0; i < 3; ++i) {
    whole.layers[i].kind = i == 0 ? kEmbeddingKind : kBlockKind;
    whole.layers[i].gradient_bytes = 800;
  }
  whole.optimizer_ms = 5;
  whole.optimizer_workspace_bytes = 64;
  ReplicaState r = Mixed();
  r.gradient_bytes = 2400;
  r.optimizer_bytes = 7200;
  r.master_weight_bytes = 2400;
  const RankModelState s = ShardModelState(r, Data(DataParallel::kFsdp2, 2, StateOffload::kFsdpCpu));
  const Profile p = RankProfile(whole, s);
  EXPECT_EQ(p.layers[1].gradient_bytes, 0);
  EXPECT_EQ(p.layers[2].gradient_bytes, 0);
  EXPECT_EQ(p.static_memory.parameter_bytes, s.unsharded_bytes);
  EXPECT_EQ(p.static_memory.optimizer_bytes, 0);
  EXPECT_EQ(p.optimizer_workspace_bytes, 0);  // the step's temporaries are the host's
  // The unsharded block gradients beyond a shard of 0 B: all of them.
  EXPECT_EQ(RankLayerBuffersOf(whole, s)[2].gradients_first, s.fsdp_gradient_bytes);
  EXPECT_DOUBLE_EQ(p.optimizer_ms, static_cast<double>(s.host_step_bytes) / (kHostStepGBps * 1e6));
  EXPECT_EQ(p.offload_copy_bytes, s.host_copy_bytes);
  // No gradient stays on the device between micro-batches: none is a
  // layer's; the root's (the embedding here, before the blocks) is a buffer
  // of its own backward.
  Profile accumulating = whole;
  accumulating.grad_accumulation = 4;
  const Profile a = RankProfile(accumulating, s);
  EXPECT_EQ(a.grad_accumulation, 4);
  EXPECT_EQ(a.total_gradient_bytes(), 0);
  EXPECT_EQ(a.layers[0].backward_workspace_bytes, 800);
  // Without a link the copies are not timed; over one, in line.
  EXPECT_DOUBLE_EQ(OptimizerStepMs(p), p.optimizer_ms);
  Profile linked = p;
  linked.host_link.gb_per_s = 25;
  linked.host_link.latency_us = 10;
  EXPECT_DOUBLE_EQ(OptimizerStepMs(linked),
                   p.optimizer_ms + 0.01 + static_cast<double>(s.host_copy_bytes) / 25e6);
}

}  // namespace
}  // namespace remat
