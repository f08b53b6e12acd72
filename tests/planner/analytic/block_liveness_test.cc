// A block's forward holds what the runtime's (and HF's) one reassigned
// variable still points to (graph_builder.h HoldInLastOp): its with-grad
// forward workspace against the runtime's measured profiles of the bench
// models on this CPU (`planner profile bench/fidelity/models/<m>.json`,
// forward_workspace_bytes of every block: 262,144 = b s h x 4).
#include <gtest/gtest.h>

#include <string>

#include "remat/planning/job.h"

namespace remat {
namespace {

const LayerProfile& Block(const Profile& p, const std::string& name) {
  for (const LayerProfile& l : p.layers) {
    if (l.name == name) return l;
  }
  static const LayerProfile none;
  ADD_FAILURE() << "no " << name;
  return none;
}

Profile CpuProfile(const std::string& model) {
  JobOverrides overrides;
  overrides.device = "cpu";
  Result<Job> job = LoadJob(
      std::string(REMAT_SOURCE_DIR) + "/bench/fidelity/models/" + model + ".json", overrides);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return job.ok() ? job->profile : Profile{};
}

constexpr int64_t kNhFp32 = 4 * 128 * 128 * 4;  // b 4, s 128, h 128, fp32: 262,144

// bert: the second dropout's output is held through ln2 (the block's
// `return layer_norm(y + t)`), above everything the block keeps by then.
TEST(BlockLiveness, BertHoldsTheSecondDropoutsOutputThroughLn2) {
  EXPECT_EQ(Block(CpuProfile("cpu-bert-s"), "block0").forward_workspace_bytes, kNhFp32);
}

// Without grad the core's inputs (the runtime's Heads temporary) live until
// the core returns: q and k are not freed after the scores (2 n h more than
// before; the measured profile's 3,670,016).
TEST(BlockLiveness, BertNoGradHoldsQAndKThroughTheCore) {
  EXPECT_EQ(Block(CpuProfile("cpu-bert-s"), "block0").forward_nograd_workspace_bytes,
            14 * kNhFp32);  // 3,670,016
}

TEST(BlockLiveness, GptAndLlamaForwardWorkspacesAsMeasured) {
  EXPECT_EQ(Block(CpuProfile("cpu-s"), "block0").forward_workspace_bytes, kNhFp32);
  EXPECT_EQ(Block(CpuProfile("cpu-llama-s"), "block0").forward_workspace_bytes, kNhFp32);
}

// LoRA: the frozen base keeps little, so what the forward holds shows. The
// executor holds the core's context through the epilogue, and not past it (a
// frozen o projection keeps nothing of it): measured with grad 1,568,780
// (bert) and 1,490,956 (llama) B, 12 B of them scalars the model leaves
// out; the attention_core option's forward (the core without grad, its
// context a transient of the epilogue too) 1,568,780 (bert).
TEST(BlockLiveness, LoraForwardHoldsTheContextThroughTheEpilogue) {
  const Profile bert_lora = CpuProfile("cpu-bert-s-lora");  // Block() returns into it
  const LayerProfile& bert = Block(bert_lora, "block1");
  EXPECT_EQ(bert.forward_workspace_bytes, 1'568'768);
  ASSERT_FALSE(bert.selective.empty());
  EXPECT_EQ(bert.selective[0].forward_workspace_bytes, 1'568'768);
  EXPECT_EQ(Block(CpuProfile("cpu-llama-s-lora"), "block1").forward_workspace_bytes, 1'490'944);
}

}  // namespace
}  // namespace remat
