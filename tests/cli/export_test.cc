// planner --export ENGINE: what each engine takes for the plan, and the
// closest plan it can express when it cannot express the one asked for.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

Captured Export(const std::string& engine, std::vector<std::string> plan_flags) {
  std::vector<std::string> args = {"--budget", "24GB", "--quiet", "--export", engine};
  args.insert(args.end(), plan_flags.begin(), plan_flags.end());
  args.push_back(kExample);
  return RunCli(args);
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Export, UnknownEngineIsBadInputNamingTheEngines) {
  const Captured c = Export("colossal", {});
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(c.out.empty()) << c.out;
  EXPECT_TRUE(Has(c.err, "option --export: unknown engine 'colossal'")) << c.err;
  EXPECT_TRUE(Has(c.err, "pytorch, hf, deepspeed, megatron, torchtitan")) << c.err;
}

TEST(Export, ContradictsAnotherFormat) {
  const Captured c = Export("hf", {"--json"});
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(c.out.empty()) << c.out;
  EXPECT_TRUE(Has(c.err, "contradicts --json")) << c.err;
}

TEST(Export, HfExpressesEveryBlockCheckpointedExactly) {
  const Captured c = Export("hf", {"--every", "1"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(Has(c.err, "hf runs the plan exactly: uniform (every 1)")) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["gradient_checkpointing"], true);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["use_reentrant"], false);
}

// A layer list HF cannot express: the export is a planned plan HF can run,
// with that plan's own prediction, and the note names the plan asked for.
TEST(Export, HfSaysWhatItCannotExpressAndPrintsThePlannedClosest) {
  const Captured c = Export("hf", {"--checkpoint-layers", "1,4,8"});
  EXPECT_TRUE(Has(c.err, "cannot express manual (blocks 1,4,8)")) << c.err;
  EXPECT_TRUE(Has(c.err, "remat.apply(model, plan) applies manual (blocks 1,4,8) exactly"))
      << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  // The closest plan is one HF's switch runs (here every other block from
  // block 0: fits, and faster than every block), planned.
  ASSERT_EQ(j["gradient_checkpointing"], true) << c.out;
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["every_n_layers"], 2) << c.out;
  const std::string name = "manual (blocks 0,2,4,6,8,10)";
  EXPECT_TRUE(Has(c.err, "exporting the closest plan it can, " + name)) << c.err;
  // Its prediction is the one the planner reports for that plan asked alone.
  const Captured exact = Export("hf", {"--checkpoint-layers", "0,2,4,6,8,10"});
  EXPECT_EQ(exact.code, 0) << exact.err;
  const size_t at = exact.err.find(name + ", predicted");
  ASSERT_NE(at, std::string::npos) << exact.err;
  const size_t end = exact.err.find('\n', at);
  EXPECT_TRUE(Has(c.err, exact.err.substr(at, end - at))) << c.err << exact.err;
}

// 11 GiB lies between the lowest peak (uniform every 4, 10.93 GiB) and that
// of every block checkpointed (11.36 GiB): a plan fits, none HF runs does.
TEST(Export, NoFitWhenOnlyThePlanAskedForFits) {
  const Captured c = RunCli({"--budget", "11GiB", "--quiet", "--export", "hf", kExample});
  EXPECT_EQ(c.code, 3) << c.err;
  EXPECT_TRUE(Has(c.err, "does not fit 11.00 GiB")) << c.err;
  EXPECT_TRUE(Has(c.err, "no plan hf can express fits the budget")) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);  // still printed: the closest there is
  EXPECT_EQ(j["gradient_checkpointing"], true);
  EXPECT_EQ(RunCli({"--budget", "11GiB", "--quiet", "--export", "pytorch", kExample}).code, 0);
}

TEST(Export, DeepSpeedCountsTheChunks) {
  const Captured c = Export("deepspeed", {"--every", "4"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(Has(c.err, "deepspeed runs the plan exactly")) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["activation_checkpointing"]["number_checkpoints"], 3);  // 12 blocks / 4
  EXPECT_EQ(j["train_micro_batch_size_per_gpu"], 16);
  EXPECT_EQ(j["bf16"]["enabled"], true);
}

TEST(Export, DeepSpeedWithoutCheckpointingHasNoCheckpointingSection) {
  const Captured c = Export("deepspeed", {"--strategy", "none", "--micro-batch", "4"});
  ASSERT_EQ(c.code, 0) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_FALSE(j.contains("activation_checkpointing")) << c.out;
}

TEST(Export, MegatronUniformBlockAndSelective) {
  Captured c = Export("megatron", {"--every", "4"});
  EXPECT_TRUE(Has(c.out,
                  "--recompute-granularity full --recompute-method uniform "
                  "--recompute-num-layers 4"))
      << c.out;
  c = Export("megatron", {"--checkpoint-layers", "0,1,2", "--micro-batch", "4"});
  EXPECT_TRUE(Has(c.err, "megatron runs the plan exactly")) << c.err;
  EXPECT_TRUE(Has(c.out, "--recompute-method block --recompute-num-layers 3")) << c.out;
  c = Export("megatron", {"--selective-layers", "0,1,2,3,4,5,6,7,8,9,10,11"});
  EXPECT_TRUE(Has(c.err, "megatron runs the plan exactly")) << c.err;
  EXPECT_TRUE(Has(c.out, "--recompute-granularity selective --recompute-modules core_attn"))
      << c.out;
  EXPECT_TRUE(Has(c.out, "--micro-batch-size 16 --global-batch-size 16")) << c.out;
  EXPECT_TRUE(Has(c.out, "--bf16")) << c.out;
}

// transformers' every_n_layers checkpoints blocks 0, n, 2n, ...: a plan of
// that shape is exact, the kwargs carry n.
TEST(Export, HfExpressesEveryNthBlockFromTheFirst) {
  Captured c = Export("hf", {"--checkpoint-layers", "0,4,8"});
  EXPECT_TRUE(Has(c.err, "hf runs the plan exactly: manual (blocks 0,4,8)")) << c.err;
  nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["gradient_checkpointing"], true);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["every_n_layers"], 4);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["use_reentrant"], false);
  // Block 0 alone: n at least the block count (12).
  c = Export("hf", {"--checkpoint-layers", "0"});
  EXPECT_TRUE(Has(c.err, "hf runs the plan exactly")) << c.err;
  j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["every_n_layers"], 12);
  // Every block: the plain switch, no every_n_layers.
  c = Export("hf", {"--every", "1"});
  j = nlohmann::json::parse(c.out);
  EXPECT_FALSE(j["gradient_checkpointing_kwargs"].contains("every_n_layers")) << c.out;
}

// transformers' offload (save_on_cpu around each block's checkpoint) copies
// in line: every block checkpointed with every movable checkpoint offloaded
// over an in-line link is exact; over an overlapped link those decisions
// are exported with their copies in line, planned so; a plan that offloads
// only some checkpoints is not expressed (remat.apply runs it).
TEST(Export, HfOffloadsEveryBlockWhereThePlanDoes) {
  Captured c =
      RunCli({"--quiet", "--export", "hf", "--strategy", "offload", "--host-link", "cpu", kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(Has(c.err, "hf runs the plan exactly: offload (every 1, 11 offloaded)")) << c.err;
  nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["gradient_checkpointing"], true);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["offload"], true);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["use_reentrant"], false);
  EXPECT_FALSE(j["gradient_checkpointing_kwargs"].contains("every_n_layers")) << c.out;
  // 11 GiB: below every block checkpointed on the device (11.42 GiB), above
  // every block offloaded (10.90 GiB). Over pcie4 the plan offloads 10 of
  // the 11 movable checkpoints; hf offloads them all, in line.
  c = RunCli({"--budget", "11GiB", "--quiet", "--export", "hf", "--strategy", "offload",
              "--host-link", "pcie4", kExample});
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(Has(c.err, "cannot express offload (every 1, 10 offloaded)")) << c.err;
  EXPECT_TRUE(Has(c.err,
                  "exporting the closest plan it can, offload (every 1, 11 offloaded, copies in "
                  "line), predicted 10.90 GiB (fits 11.00 GiB)"))
      << c.err;
  EXPECT_TRUE(Has(c.err, "remat.apply(model, plan) applies offload (every 1, 10 offloaded) exactly"))
      << c.err;
  j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["gradient_checkpointing_kwargs"]["offload"], true) << c.out;
  // Without a link nothing offloads.
  c = Export("hf", {"--every", "1"});
  j = nlohmann::json::parse(c.out);
  EXPECT_FALSE(j["gradient_checkpointing_kwargs"].contains("offload")) << c.out;
}

TEST(Export, TorchtitanFullAndEveryNthBlock) {
  Captured c = Export("torchtitan", {"--every", "1"});
  EXPECT_TRUE(Has(c.out, "[activation_checkpoint]\nmode = \"full\"\n")) << c.out;
  c = Export("torchtitan", {"--checkpoint-layers", "2,5,8,11", "--micro-batch", "4"});
  EXPECT_TRUE(Has(c.err, "torchtitan runs the plan exactly")) << c.err;
  EXPECT_TRUE(Has(c.out, "mode = \"selective\"\nselective_ac_option = \"3\"\n")) << c.out;
  EXPECT_TRUE(Has(c.out, "local_batch_size = 4\n")) << c.out;
}

TEST(Export, PrecisionFlagsFollowThePrecision) {
  Captured c = Export("torchtitan", {"--precision", "fp32"});
  EXPECT_TRUE(Has(c.out, "mixed_precision_param = \"float32\"\n")) << c.out;
  c = Export("megatron", {"--precision", "mixed_fp16"});
  EXPECT_TRUE(Has(c.out, " --fp16")) << c.out;
  c = Export("hf", {"--precision", "fp32"});
  const nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_FALSE(j.contains("bf16") || j.contains("fp16")) << c.out;
}

TEST(Export, GlobalBatchSizesFollowTheAccumulation) {
  const Captured c = Export("torchtitan", {"--micro-batch", "4", "--grad-accumulation", "8"});
  EXPECT_TRUE(Has(c.out, "local_batch_size = 4\nglobal_batch_size = 32\n")) << c.out;
  const Captured hf = Export("hf", {"--micro-batch", "4", "--grad-accumulation", "8"});
  const nlohmann::json j = nlohmann::json::parse(hf.out);
  EXPECT_EQ(j["per_device_train_batch_size"], 4);
  EXPECT_EQ(j["gradient_accumulation_steps"], 8);
}

TEST(Export, PyTorchIsExactAndListsCheckpointedBlocks) {
  Captured c = Export("pytorch", {"--checkpoint-layers", "0,4,8"});
  EXPECT_TRUE(Has(c.err, "pytorch runs the plan exactly: manual (blocks 0,4,8)")) << c.err;
  EXPECT_TRUE(Has(c.out, "remat.apply(model, \"plan.json\")")) << c.out;
  EXPECT_TRUE(Has(c.out, "for i in (0, 4, 8)}")) << c.out;
  // A plan that recomputes chunks is not a list of wrapped blocks.
  c = Export("pytorch", {"--every", "4"});
  EXPECT_TRUE(Has(c.out, "remat.apply(model, \"plan.json\")")) << c.out;
  EXPECT_FALSE(Has(c.out, "apply_activation_checkpointing")) << c.out;
}

}  // namespace
}  // namespace remat::cli
