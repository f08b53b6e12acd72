// planner --pp on a real config: every pipeline rank's plan holds the
// micro-batches its schedule keeps in flight (remat/ranks/pipeline.h), so
// the first stage's peak grows with the step's micro-batches and differs
// between 1F1B and the interleaved schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kLlama8b[] = REMAT_SOURCE_DIR "/examples/hf/llama-3-8b.config.json";

nlohmann::json PlanJson(std::vector<std::string> args) {
  args.insert(args.end(), {"--json", "--quiet"});
  const Captured c = RunCli(args);
  EXPECT_TRUE(c.code == 0 || c.code == 3) << c.err;
  return c.out.empty() ? nlohmann::json() : nlohmann::json::parse(c.out);
}

// Stage 0 of 4 under --strategy none, seq 4096, with `more` flags.
nlohmann::json Stages(const std::vector<std::string>& more) {
  std::vector<std::string> args = {"--budget", "1TB",     "--gpus",      "8", "--pp", "4",
                                   "--strategy", "none",  "--micro-batch", "1", "--seq-len",
                                   "4096"};
  args.insert(args.end(), more.begin(), more.end());
  args.push_back(kLlama8b);
  return PlanJson(args)["predicted"]["per_rank"];
}

TEST(PipelineRanks, FirstStageHoldsTheMicroBatchesInFlight) {
  const nlohmann::json one = Stages({"--grad-accumulation", "1"});
  const nlohmann::json eight = Stages({"--grad-accumulation", "8"});
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(eight.size(), 4u);
  // 1F1B: stage s holds min(p - s, M) micro-batches.
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(one[s]["in_flight_microbatches"], nlohmann::json::array({1})) << s;
    EXPECT_EQ(eight[s]["in_flight_microbatches"], nlohmann::json::array({4 - s})) << s;
  }
  // Three more micro-batches of stage 0's kept activations (its 8 blocks'
  // inputs and saved tensors under no checkpointing; a Llama-3-8B block
  // keeps more than half a GiB at 4096 tokens: its input alone is 4096 x
  // 4096 x 2 B = 32 MiB and its MLP's saved tensors 3 x 4096 x 14336 x
  // 2 B = 336 MiB), and the last stage, one in flight, less than that.
  const int64_t first_one = one[0]["peak_bytes"], first_eight = eight[0]["peak_bytes"];
  EXPECT_GT(first_eight - first_one, int64_t{3} * 8 * (int64_t{1} << 29)) << first_one;
  const int64_t last_one = one[3]["peak_bytes"], last_eight = eight[3]["peak_bytes"];
  EXPECT_LT(last_eight - last_one, first_eight - first_one);
}

TEST(PipelineRanks, InterleavedHoldsMoreOnTheFirstRank) {
  const nlohmann::json flat = Stages({"--grad-accumulation", "8"});
  const nlohmann::json interleaved = Stages(
      {"--grad-accumulation", "8", "--pp-schedule", "interleaved", "--virtual-stages", "2"});
  ASSERT_EQ(interleaved.size(), 4u);
  // megatron-core's interleaved schedule at p 4, v 2, M 8 (rank 0: 2p - 1
  // forwards of its first chunk, p of its second).
  EXPECT_EQ(interleaved[0]["in_flight_microbatches"], nlohmann::json::array({7, 4}));
  EXPECT_EQ(interleaved[3]["in_flight_microbatches"], nlohmann::json::array({4, 1}));
  // 11 half-stage chunk forwards against 4 whole-stage ones: 5.5 against 4.
  EXPECT_GT(interleaved[0]["peak_bytes"].get<int64_t>(), flat[0]["peak_bytes"].get<int64_t>());
}

TEST(PipelineRanks, InterleavedNeedsMicroBatchesAMultipleOfTheStages) {
  const Captured c = RunCli({"--budget", "1TB", "--gpus", "8", "--pp", "4", "--pp-schedule",
                             "interleaved", "--virtual-stages", "2", "--grad-accumulation", "6",
                             "--seq-len", "4096", "--quiet", kLlama8b});
  EXPECT_EQ(c.code, 2) << c.out;
  // One line: the file, the flag and its value, what is accepted.
  EXPECT_NE(c.err.find("llama-3-8b.config.json: --grad-accumulation 6: the interleaved "
                       "schedule needs micro-batches per step (6) to be a multiple of the 4 "
                       "pipeline stages"),
            std::string::npos)
      << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_TRUE(c.out.empty()) << c.out;
}

}  // namespace
}  // namespace remat::cli
