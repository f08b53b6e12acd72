// planner --gpus, --ddp, --zero, --fsdp, --tp, --pp and the per-rank plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kGpt2[] = REMAT_SOURCE_DIR "/examples/gpt2-small.json";
const char kLlama8b[] = REMAT_SOURCE_DIR "/examples/hf/llama-3-8b.config.json";

nlohmann::json PlanJson(std::vector<std::string> args) {
  args.insert(args.end(), {"--json", "--quiet"});
  const Captured c = RunCli(args);
  EXPECT_TRUE(c.code == 0 || c.code == 3) << c.err;
  return nlohmann::json::parse(c.out);
}

void ExpectRefused(const std::vector<std::string>& args, const std::string& says) {
  const Captured c = RunCli(args);
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.err.find(says), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;  // one line
  EXPECT_TRUE(c.out.empty()) << c.out;
}

TEST(ParallelFlags, BadCombinationsAreRefusedInOneLine) {
  ExpectRefused({"--budget", "24GB", "--gpus", "6", "--tp", "4", kGpt2},
                "not a multiple of --tp x --pp");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--tp", "8", kGpt2},
                "must divide the attention heads (12)");
  ExpectRefused({"--budget", "80GB", "--gpus", "16", "--tp", "16", kLlama8b},
                "key/value heads (8)");
  ExpectRefused({"--budget", "24GB", "--gpus", "16", "--pp", "16", kGpt2},
                "more pipeline stages than the model's 12 blocks");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--zero", "2", "--fsdp", "full_shard", kGpt2},
                "give one");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--fsdp", "sharded", kGpt2},
                "accepted: full_shard, shard_grad_op, hybrid_shard, no_shard");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--zero", "4", kGpt2}, "option --zero");
  ExpectRefused({"--budget", "24GB", "--gpus", "3", "--global-batch", "32", kGpt2},
                "not a multiple of the 3 data ranks");
  ExpectRefused({"--budget", "24GB", "--gpus", "2", "--sp", kGpt2}, "--sp");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--zero", "3", "--bucket-cap-mb", "50", kGpt2},
                "DDP's");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--zero", "2", "--zero3-persistence-threshold",
                 "0", kGpt2},
                "needs --zero 3");
  ExpectRefused({"--budget", "24GB", "--gpus", "8", "--zero", "3", "--fsdp-no-sync", kGpt2},
                "needs --fsdp");
}

TEST(ParallelFlags, FsdpNoSyncKeepsUnshardedGradientsOverTheMicroBatches) {
  const std::vector<std::string> fsdp = {"--budget",  "24GB", "--gpus", "4", "--fsdp",
                                         "full_shard", "--grad-accumulation", "4", "--strategy",
                                         "none", kGpt2};
  const nlohmann::json sync = PlanJson(fsdp);
  std::vector<std::string> args = fsdp;
  args.insert(args.end() - 1, "--fsdp-no-sync");
  const nlohmann::json no_sync = PlanJson(args);
  EXPECT_EQ(sync["job"]["parallel"]["fsdp_no_sync"], false);
  EXPECT_EQ(no_sync["job"]["parallel"]["fsdp_no_sync"], true);
  // amp_bf16's fp32 gradients whole (4 B a parameter) rather than a quarter.
  EXPECT_GT(no_sync["predicted"]["peak_bytes"].get<int64_t>(),
            sync["predicted"]["peak_bytes"].get<int64_t>() + 124'439'808LL * 4 / 2);
}

TEST(ParallelFlags, Zero3KeepsParametersUnderItsThresholdWhole) {
  // GPT-2 small's LayerNorms (1,536 elements each) are under DeepSpeed's
  // default 1e5; threshold 0 keeps none whole and gathers them with the rest.
  const std::vector<std::string> zero3 = {"--budget", "24GB", "--gpus", "4", "--zero", "3", kGpt2};
  const nlohmann::json j = PlanJson(zero3);
  EXPECT_EQ(j["job"]["parallel"]["persistence_threshold"], 100000);
  const nlohmann::json& terms = j["predicted"]["per_rank"][0]["terms"];
  ASSERT_TRUE(terms.contains("zero3_persistent"));
  std::vector<std::string> none = zero3;
  none.insert(none.end() - 1, {"--zero3-persistence-threshold", "0"});
  const nlohmann::json k = PlanJson(none);
  EXPECT_EQ(k["job"]["parallel"]["persistence_threshold"], 0);
  const nlohmann::json& gathered = k["predicted"]["per_rank"][0]["terms"];
  EXPECT_FALSE(gathered.contains("zero3_persistent"));
  EXPECT_GT(gathered["fsdp_unsharded"].get<int64_t>(), terms["fsdp_unsharded"].get<int64_t>());
}

TEST(ParallelFlags, AProfileIsOneRankAlready) {
  const std::string profile = REMAT_SOURCE_DIR "/profiles/fixtures/gpt2-small.analytic.json";
  ExpectRefused({"--budget", "24GB", "--gpus", "2", "--tp", "2", profile},
                "--tp, --sp and --pp change its activations");
  const nlohmann::json one = PlanJson({"--budget", "24GB", profile});
  const nlohmann::json zero2 =
      PlanJson({"--budget", "24GB", "--gpus", "2", "--zero", "2", profile});
  EXPECT_LT(zero2["predicted"]["static_bytes"].get<int64_t>(),
            one["predicted"]["static_bytes"].get<int64_t>());
  EXPECT_EQ(zero2["job"]["parallel"]["data"], "zero2");
}

TEST(ParallelFlags, SingleGpuOutputHasNoRanks) {
  const nlohmann::json j = PlanJson({"--budget", "24GB", kGpt2});
  EXPECT_FALSE(j["predicted"].contains("per_rank"));
  EXPECT_FALSE(j["job"].contains("parallel"));
}

TEST(ParallelFlags, GpusAloneMeansDdpAndEachRankHoldsABucketCopy) {
  const nlohmann::json j = PlanJson({"--budget", "24GB", "--gpus", "4", kGpt2});
  const nlohmann::json& par = j["job"]["parallel"];
  EXPECT_EQ(par["gpus"], 4);
  EXPECT_EQ(par["data"], "ddp");
  EXPECT_EQ(par["data_ranks"], 4);
  const nlohmann::json& ranks = j["predicted"]["per_rank"];
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0]["rank"], 0);
  EXPECT_EQ(ranks[0]["ranks"], 4);
  const nlohmann::json& terms = ranks[0]["terms"];
  // amp_bf16: fp32 gradients, and DDP's buckets as many bytes again.
  EXPECT_EQ(terms["ddp_buckets"].get<int64_t>(), 4 * 124'439'808);
  int64_t sum = 0;
  for (const auto& [name, bytes] : terms.items()) sum += bytes.get<int64_t>();
  EXPECT_EQ(sum, ranks[0]["peak_bytes"].get<int64_t>());
  EXPECT_EQ(j["predicted"]["peak_bytes"], ranks[0]["peak_bytes"]);
}

TEST(ParallelFlags, DeepSpeedsReduceBucketIsATermOfItsOwn) {
  const nlohmann::json j = PlanJson({"--budget", "24GB", "--gpus", "4", "--zero", "2", kGpt2});
  const nlohmann::json& rank = j["predicted"]["per_rank"][0];
  // 25 MiB of fp32 elements (6,553,600), each of amp_bf16's fp32 gradients.
  EXPECT_EQ(rank["terms"]["reduce_bucket"].get<int64_t>(), 26'214'400);
  int64_t sum = 0;
  for (const auto& [name, bytes] : rank["terms"].items()) sum += bytes.get<int64_t>();
  EXPECT_EQ(sum, rank["peak_bytes"].get<int64_t>());
}

TEST(ParallelFlags, ZeroStagesShrinkEachRanksModelState) {
  int64_t last = 0;
  for (const char* stage : {"0", "1", "2", "3"}) {
    // The same plan on each: the peak moves by the model state alone (with
    // accumulation every gradient exists at it).
    const nlohmann::json j =
        PlanJson({"--budget", "80GB", "--strategy", "none", "--grad-accumulation", "2", "--gpus",
                  "8", "--zero", stage, kGpt2});
    const int64_t state = j["predicted"]["peak_bytes"];
    if (last > 0) EXPECT_LT(state, last) << "zero " << stage;
    last = state;
    EXPECT_EQ(j["job"]["parallel"]["data"], std::string("zero") + stage);
  }
}

TEST(ParallelFlags, PipelineStagesAreRanksOfTheirOwn) {
  const nlohmann::json j = PlanJson({"--budget", "24GB", "--gpus", "4", "--pp", "2", kGpt2});
  const nlohmann::json& ranks = j["predicted"]["per_rank"];
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0]["stage"], 0);
  EXPECT_EQ(ranks[1]["stage"], 1);
  EXPECT_EQ(ranks[1]["rank"], 2);  // tensor first, then data, then pipeline
  EXPECT_EQ(ranks[0]["ranks"], 2);
  const int64_t worst =
      std::max(ranks[0]["peak_bytes"].get<int64_t>(), ranks[1]["peak_bytes"].get<int64_t>());
  EXPECT_EQ(j["predicted"]["peak_bytes"].get<int64_t>(), worst);
}

TEST(ParallelFlags, TextReportNamesTheWorstRanksTerms) {
  const Captured c =
      RunCli({"--budget", "24GB", "--gpus", "8", "--fsdp", "full_shard", "--quiet", kGpt2});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("Ranks: 8 GPUs: 8 data ranks (FSDP2 full_shard)"), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("fsdp_unsharded"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("reduce_scatter"), std::string::npos) << c.out;
}

// Among the combinations that fit (listed or not): the job as it is,
// sharded by FSDP2 over more GPUs.
TEST(ParallelFlags, NoFitAdviceNamesTheShardingThatFits) {
  const Captured c = RunCli({"--budget", "80GB", "--json", kLlama8b});
  EXPECT_EQ(c.code, 3) << c.err;
  const nlohmann::json alternatives = nlohmann::json::parse(c.out)["fit_advice"]["alternatives"];
  const auto sharded = std::find_if(alternatives.begin(), alternatives.end(),
                                    [](const nlohmann::json& a) { return a["changes"].empty(); });
  ASSERT_NE(sharded, alternatives.end()) << c.err;
  EXPECT_GT((*sharded)["gpus"].get<int>(), 1);
  EXPECT_NE((*sharded)["flags"].get<std::string>().find(" --fsdp full_shard"), std::string::npos);
}

TEST(ParallelFlags, PlanFileKeepsTheParallelSettings) {
  const ScratchDir dir;
  const std::string plan = dir.path() + "/plan.json";
  const Captured c = RunCli({"--budget", "24GB", "--gpus", "8", "--fsdp", "shard_grad_op",
                             "--quiet", "--json", "-o", plan, kGpt2});
  ASSERT_EQ(c.code, 0) << c.err;
  const Captured t = RunCli({"train", "--plan", plan, "--steps", "1", kGpt2});
  EXPECT_EQ(t.code, 2);
  EXPECT_NE(t.err.find("was made for 8 GPUs (fsdp2"), std::string::npos) << t.err;
}

}  // namespace
}  // namespace remat::cli
