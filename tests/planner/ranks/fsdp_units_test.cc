// FSDP2's fully_shard units as users wrap them (one per block by default, a
// recompute segment's blocks on request), the weights a recomputed block
// gathers again, and the engine buffers as the allocator replay sees them.
#include <gtest/gtest.h>

#include <numeric>

#include "remat/ranks/rank_memory.h"
#include "remat/schedule/decisions.h"
#include "remat/simulate/simulator.h"
#include "testing/gpt_chain.h"

namespace remat {
namespace {

Parallelism Fsdp(int64_t gpus) {
  Parallelism p;
  p.gpus = gpus;
  p.data = DataParallel::kFsdp2;
  return p;
}

// A block of 400 B of weights (the param dtype) and 800 B of gradients (the
// reduce dtype), a root of 1,000 B.
ReplicaState Replica() {
  ReplicaState r;
  r.weight_bytes = 10'000;
  r.gradient_bytes = 20'000;
  r.block_weight_bytes = 400;
  r.block_gradient_bytes = 800;
  r.root_weight_bytes = 1000;
  return r;
}

// embedding, block0..block3, head: each layer's gradients `gradients` B.
Profile SixLayers(int64_t gradients) {
  Profile whole;
  whole.layers.resize(6);
  for (int i = 0; i < 6; ++i) {
    whole.layers[i].name = "l" + std::to_string(i);
    whole.layers[i].kind = i == 0 ? kEmbeddingKind : i == 5 ? "head" : kBlockKind;
    whole.layers[i].gradient_bytes = gradients;
  }
  return whole;
}

int64_t Sum(const TensorSizes& t) { return std::accumulate(t.begin(), t.end(), int64_t{0}); }

TEST(FsdpUnits, OneBlockPerUnitWhateverTheSegments) {
  RankMemory m;
  m.parallel = Fsdp(8);
  m.replica = Replica();
  m.state = ShardModelState(m.replica, m.parallel);
  m.stage_profile = std::make_shared<const Profile>(SixLayers(800));
  m.profile = RankProfile(*m.stage_profile, m.state);
  // The default: each block its own unit, so a plan's 3-block segment
  // changes nothing.
  EXPECT_FALSE(RegathersBlocks(m, 3));
  const RankMemory per_block = WithGatherBlocks(m, 3);
  EXPECT_EQ(per_block.state.gather_blocks, 1);
  EXPECT_EQ(per_block.state.unsharded_bytes, 1000 + 400);
  // Asked for (--fsdp-units segment): the segment is one unit.
  m.parallel.fsdp_units = FsdpUnits::kSegment;
  EXPECT_TRUE(RegathersBlocks(m, 3));
  EXPECT_FALSE(RegathersBlocks(m, m.state.gather_blocks));
  const RankMemory per_segment = WithGatherBlocks(m, 3);
  EXPECT_EQ(per_segment.state.gather_blocks, 3);
  EXPECT_EQ(per_segment.state.unsharded_bytes, 1000 + 3 * 400);
  // Remade from the stage's profile it shares, its own profile made again.
  EXPECT_EQ(per_segment.stage_profile, m.stage_profile);
  EXPECT_EQ(ProfileToJson(per_segment.profile),
            ProfileToJson(RankProfile(*m.stage_profile, per_segment.state)));
  EXPECT_EQ(per_segment.rank, m.rank);
  EXPECT_EQ(per_segment.in_flight, m.in_flight);
  EXPECT_STREQ(ToString(FsdpUnits::kBlock), "block");
  EXPECT_EQ(ParseFsdpUnits("segment").value(), FsdpUnits::kSegment);
  EXPECT_FALSE(ParseFsdpUnits("module").ok());
}

TEST(FsdpUnits, RecomputedBlocksGatherTheirWeightsAgain) {
  const Profile whole = SixLayers(800);
  // Per-block units with reshard_after_forward: a block's weights, on the
  // block layers only.
  RankModelState s = ShardModelState(Replica(), Fsdp(8));
  EXPECT_EQ(s.recompute_gather_bytes, 400);
  Profile p = RankProfile(whole, s);
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(p.layers[i].recompute_gather_bytes, 400) << i;
  EXPECT_EQ(p.layers[0].recompute_gather_bytes + p.layers[5].recompute_gather_bytes, 0);
  // A segment unit is gathered whole for its recompute and kept for its
  // backward; shard_grad_op keeps every weight: nothing gathered again.
  Parallelism segment = Fsdp(8);
  segment.fsdp_units = FsdpUnits::kSegment;
  EXPECT_EQ(ShardModelState(Replica(), segment).recompute_gather_bytes, 0);
  Parallelism kept = Fsdp(8);
  kept.reshard_after_forward = false;
  EXPECT_EQ(ShardModelState(Replica(), kept).recompute_gather_bytes, 0);
  // ZeRO-3 gathers a block's weights but its persistent ones.
  ReplicaState r = Replica();
  r.block_persistent_weight_bytes = 30;
  Parallelism zero3 = Fsdp(8);
  zero3.data = DataParallel::kZero3;
  EXPECT_EQ(ShardModelState(r, zero3).recompute_gather_bytes, 370);
  // One rank gathers nothing.
  EXPECT_EQ(ShardModelState(Replica(), Fsdp(1)).recompute_gather_bytes, 0);
}

// GPT-2-shaped chain of 4 blocks: embedding, block0..3, norm, head, loss.
// block0 checkpointed and blocks 1..3 recomputed: backward recomputes
// block0, 1, 2, 3 in a run, then runs block3's backward.
int64_t SegmentPeak(int gathering_block, int64_t gather) {
  Profile p = testing::GptChain(4, 1);
  p.layers[1 + gathering_block].recompute_gather_bytes = gather;
  std::vector<LayerDecision> d(p.num_layers(), LayerDecision::kKeep);
  d[1] = LayerDecision::kCheckpoint;
  d[2] = d[3] = d[4] = LayerDecision::kRecompute;
  const Schedule s = BuildSingleLevelSchedule(p, d, {}).value();
  return Simulate(p, s).value().peak_bytes;
}

TEST(FsdpUnits, TheSimulatorHoldsTheGatherInTheRecomputesBeforeTheLast) {
  const int64_t gather = int64_t{64} << 30;  // above everything else the chain holds
  const int64_t plain = SegmentPeak(0, 0);
  // block1's recompute gathers it beside the rest: the peak is that moment.
  const int64_t second = SegmentPeak(1, gather);
  EXPECT_GT(second, plain + gather / 2);
  EXPECT_LE(second, plain + gather);
  // block3, whose backward runs next, is gathered for that backward already.
  EXPECT_EQ(SegmentPeak(3, gather), plain);
}

TEST(FsdpUnits, AccumulatedGradientsAreRequestedUnitByUnit) {
  // Under --fsdp-no-sync each block's forward holds every unit's unsharded
  // gradients; the allocator replay must see one request per unit, not one
  // of all of them.
  Profile whole = SixLayers(800);
  for (LayerProfile& l : whole.layers) {
    l.forward_workspace_bytes = 5;
    l.backward_workspace_bytes = 6;
  }
  ReplicaState r = Replica();
  r.micro_batches = 4;
  Parallelism p = Fsdp(2);
  p.fsdp_no_sync = true;
  const RankModelState s = ShardModelState(r, p);
  ASSERT_TRUE(s.fsdp_accumulates);
  const Profile rank = RankProfile(whole, s);
  const int64_t unit = 800 - 400;  // a block's gradients beyond its 2-rank shard
  for (int i = 0; i < 6; ++i) {
    const LayerProfile& l = rank.layers[i];
    // The largest buffer the engine allocates at once: a unit's
    // reduce-scatter input (800 B), not the 4 blocks' gradients (1,600 B).
    for (const TensorSizes* t :
         {&l.tensors.forward_workspace, &l.tensors.backward_workspace,
          &l.tensors.accumulate_workspace}) {
      for (int64_t piece : *t) EXPECT_LE(piece, 800) << i;
    }
    // Where buffers were added the tensors itemize the workspace (a layer
    // given none keeps its workspace as one request).
    for (const auto& [t, bytes] :
         {std::pair{&l.tensors.forward_workspace, l.forward_workspace_bytes},
          std::pair{&l.tensors.backward_workspace, l.backward_workspace_bytes}}) {
      if (!t->empty()) EXPECT_EQ(Sum(*t), bytes) << i;
    }
  }
  // block0's forward: its own workspace, the prefetched unit, 4 units' gradients.
  EXPECT_EQ(rank.layers[1].tensors.forward_workspace,
            (TensorSizes{5, 400, unit, unit, unit, unit}));
}

}  // namespace
}  // namespace remat
