// planner --fsdp on a real config: FSDP2's fully_shard units one per block
// by default (--fsdp-units segment on request), the no-checkpoint line equal
// to --strategy none run alone, and the kept gradients of --fsdp-no-sync
// replayed unit by unit by the caching allocator.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kLlama8b[] = REMAT_SOURCE_DIR "/examples/hf/llama-3-8b.config.json";

nlohmann::json PlanJson(std::vector<std::string> args) {
  args.insert(args.end(), {"--json", "--quiet", kLlama8b});
  const Captured c = RunCli(args);
  EXPECT_TRUE(c.code == 0 || c.code == 3) << c.err;
  return c.out.empty() ? nlohmann::json() : nlohmann::json::parse(c.out);
}

const std::vector<std::string> kFsdp8 = {"--gpus", "8", "--fsdp", "full_shard", "--seq-len",
                                         "4096"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(FsdpUnits, EachBlockIsAUnitWhateverTheSegments) {
  const std::vector<std::string> every4 = {"--budget", "1TB", "--strategy", "uniform",
                                           "--every", "4"};
  const nlohmann::json block = PlanJson(With(kFsdp8, every4));
  const nlohmann::json segment = PlanJson(With(With(kFsdp8, every4), {"--fsdp-units", "segment"}));
  EXPECT_EQ(block["job"]["parallel"]["fsdp_units"], "block");
  EXPECT_EQ(segment["job"]["parallel"]["fsdp_units"], "segment");
  EXPECT_EQ(block["predicted"]["per_rank"][0]["gather_blocks"], 1);
  EXPECT_EQ(segment["predicted"]["per_rank"][0]["gather_blocks"], 4);
  // A segment unit holds 4 blocks gathered and 4 prefetched, a block unit
  // 1 and 1 (and 1 gathered again while recomputing): at least 4 more
  // blocks of 218,112,000 parameters at the segment unit's peak, 2 B each
  // at the least (gathered in the param dtype: 4 B under amp_bf16).
  // Block units name the gather a recompute makes; the terms add up to
  // the rank's peak.
  const nlohmann::json& terms = block["predicted"]["per_rank"][0]["terms"];
  ASSERT_TRUE(terms.contains("recompute_gather")) << terms;
  EXPECT_FALSE(segment["predicted"]["per_rank"][0]["terms"].contains("recompute_gather"));
  int64_t sum = 0;
  for (const auto& [name, bytes] : terms.items()) sum += bytes.get<int64_t>();
  EXPECT_EQ(sum, block["predicted"]["per_rank"][0]["peak_bytes"].get<int64_t>());
  const int64_t b = block["predicted"]["per_rank"][0]["peak_bytes"];
  const int64_t s = segment["predicted"]["per_rank"][0]["peak_bytes"];
  EXPECT_GT(s - b, int64_t{4} * 218'112'000 * 2) << b << " " << s;
}

TEST(FsdpUnits, OnlyFsdpTakesUnitsAndOnlyKnownOnes) {
  Captured c = RunCli({"--budget", "80GB", "--gpus", "8", "--zero", "3", "--fsdp-units",
                       "segment", "--quiet", kLlama8b});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("--fsdp-units is FSDP2's"), std::string::npos) << c.err;
  c = RunCli({"--budget", "80GB", "--gpus", "8", "--fsdp", "full_shard", "--fsdp-units", "layer",
              "--quiet", kLlama8b});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("accepted: block, segment"), std::string::npos) << c.err;
}

TEST(FsdpUnits, NoCheckpointLineIsStrategyNoneRunAlone) {
  // The plan's baseline and --strategy none on the same job (seq 8192,
  // where the plan checkpoints; the chunked loss given, as auto would pick
  // it for the plan only): one figure.
  const std::vector<std::string> job = {"--gpus",   "8",    "--fsdp",         "full_shard",
                                        "--budget", "80GB", "--device",       "a100",
                                        "--seq-len", "8192", "--chunked-loss", "32"};
  const nlohmann::json plan = PlanJson(job);
  const nlohmann::json none = PlanJson(With(job, {"--strategy", "none"}));
  EXPECT_EQ(plan["baseline"]["device_peak_bytes"], none["predicted"]["device_peak_bytes"]);
  EXPECT_EQ(plan["baseline"]["peak_bytes"], none["predicted"]["peak_bytes"]);
}

TEST(FsdpUnits, NoSyncGradientsAreReplayedUnitByUnit) {
  // --fsdp-no-sync keeps every unit's unsharded gradients from the first
  // micro-batch on (fp32 here: 4 B x 218,112,000 a block). Replayed as one
  // request per unit, the caching allocator reuses each unit's block, so
  // what it reserves beyond the tensors is its rounding and the
  // activations' varying sizes: under 2 GiB at this peak, not the tens of
  // GiB a request of every unit at once, made and freed at every layer,
  // would strand.
  const nlohmann::json j = PlanJson(With(
      kFsdp8, {"--budget", "1TB", "--device", "a100", "--fsdp-no-sync", "--grad-accumulation",
               "4", "--strategy", "uniform", "--every", "1"}));
  const int64_t allocated = j["predicted"]["allocated_peak_bytes"];
  const int64_t reserved = j["predicted"]["reserved_peak_bytes"];
  EXPECT_LT(reserved - allocated, int64_t{2} << 30) << allocated << " " << reserved;
}

}  // namespace
}  // namespace remat::cli
