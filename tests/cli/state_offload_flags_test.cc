// planner --offload-optimizer cpu (DeepSpeed ZeRO-Offload) and
// --fsdp-cpu-offload (FSDP2's CPUOffloadPolicy): the device and host bytes
// per rank, the step time, the exports and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kTiny[] = REMAT_SOURCE_DIR "/examples/distributed/tiny-llama-gqa.config.json";
const char kLlama8b[] = REMAT_SOURCE_DIR "/examples/hf/llama-3-8b.config.json";

std::vector<std::string> Tiny(std::vector<std::string> flags) {
  std::vector<std::string> args = {"--budget",     "1TB",  "--strategy",  "uniform", "--every",
                                   "1",            "--micro-batch", "2",  "--seq-len", "32",
                                   "--precision",  "fp32", "--device",    "cpu",     "--attention",
                                   "eager",        "--gpus", "2"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back(kTiny);
  return args;
}

nlohmann::json PlanJson(std::vector<std::string> args) {
  args.insert(args.end() - 1, {"--json", "--quiet"});
  const Captured c = RunCli(args);
  EXPECT_TRUE(c.code == 0 || c.code == 3) << c.err;
  return nlohmann::json::parse(c.out);
}

void ExpectRefused(const std::vector<std::string>& args, const std::string& says) {
  const Captured c = RunCli(args);
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.err.find(says), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_TRUE(c.out.empty()) << c.out;
}

TEST(StateOffloadFlags, BadCombinationsAreRefusedInOneLine) {
  ExpectRefused(Tiny({"--ddp", "--offload-optimizer", "cpu"}), "needs --zero 1, 2 or 3");
  ExpectRefused(Tiny({"--zero", "0", "--offload-optimizer", "cpu"}), "needs --zero 1, 2 or 3");
  ExpectRefused(Tiny({"--fsdp", "full_shard", "--offload-optimizer", "cpu"}),
                "FSDP2: --fsdp-cpu-offload");
  ExpectRefused(Tiny({"--zero", "2", "--offload-optimizer", "nvme"}), "accepted: cpu, none");
  ExpectRefused(Tiny({"--zero", "3", "--fsdp-cpu-offload"}), "needs --fsdp full_shard");
  ExpectRefused(Tiny({"--fsdp", "no_shard", "--fsdp-cpu-offload"}), "needs --fsdp full_shard");
}

int64_t Sum(const nlohmann::json& terms) {
  int64_t s = 0;
  for (const auto& [name, bytes] : terms.items()) s += bytes.get<int64_t>();
  return s;
}

TEST(StateOffloadFlags, FsdpCpuOffloadMovesTheShardsToTheHost) {
  const nlohmann::json on = PlanJson(Tiny({"--fsdp", "full_shard"}));
  const nlohmann::json off = PlanJson(Tiny({"--fsdp", "full_shard", "--fsdp-cpu-offload"}));
  EXPECT_EQ(off["job"]["parallel"]["state_offload"], "fsdp_cpu");
  EXPECT_FALSE(on["job"]["parallel"].contains("state_offload"));
  const nlohmann::json& r_on = on["predicted"]["per_rank"][0];
  const nlohmann::json& r = off["predicted"]["per_rank"][0];
  EXPECT_FALSE(r_on.contains("host_bytes"));
  // tiny-llama-gqa: 180,800 fp32 parameters over 2 ranks: 90,400 of each
  // term's elements on a rank, 361,600 B of weights and of gradients,
  // 723,200 B of moments.
  EXPECT_EQ(r["host_terms"]["host_parameters"], 361600);
  EXPECT_EQ(r["host_terms"]["host_gradients"], 361600);
  EXPECT_EQ(r["host_terms"]["host_optimizer"], 723200);
  EXPECT_EQ(r["host_bytes"], 1446400);
  EXPECT_EQ(r["terms"]["parameters"], 0);
  EXPECT_EQ(r["terms"]["optimizer"], 0);
  EXPECT_EQ(Sum(r["terms"]), r["peak_bytes"].get<int64_t>());
  // The device peak falls by at least the parameter and optimizer shards.
  EXPECT_LE(r["peak_bytes"].get<int64_t>() + 361600 + 723200, r_on["peak_bytes"].get<int64_t>());
}

TEST(StateOffloadFlags, CopiesAreTimedOverTheHostLink) {
  const nlohmann::json none = PlanJson(Tiny({"--fsdp", "full_shard", "--fsdp-cpu-offload"}));
  const nlohmann::json pcie4 =
      PlanJson(Tiny({"--fsdp", "full_shard", "--fsdp-cpu-offload", "--host-link", "pcie4"}));
  const int64_t copied = pcie4["predicted"]["per_rank"][0]["offload_copy_bytes"];
  // One micro-batch: the 361,600 B of shards up twice, the gradients down.
  EXPECT_EQ(copied, 3 * 361600);
  const double extra = pcie4["predicted"]["step_ms"].get<double>() -
                       none["predicted"]["step_ms"].get<double>();
  // pcie4: 25 GB/s with its latency, in line with the step; 10 us at most.
  EXPECT_GE(extra, copied / 25e6);
  EXPECT_LE(extra, copied / 25e6 + 0.01 + 1e-9);
}

TEST(StateOffloadFlags, ZeroOffloadPutsTheOptimizerOnTheHost) {
  const nlohmann::json j = PlanJson(Tiny({"--zero", "2", "--offload-optimizer", "cpu"}));
  EXPECT_EQ(j["job"]["parallel"]["state_offload"], "optimizer");
  const nlohmann::json& r = j["predicted"]["per_rank"][0];
  EXPECT_EQ(r["terms"]["optimizer"], 0);
  // fp32 weights: DeepSpeed's fp32 partition (361,600 B) beside the moments.
  EXPECT_EQ(r["host_terms"]["host_optimizer"], 361600 + 723200);
  // The fp32 gradient partition and the host staging buffer of the
  // largest parameter (the 256 x 64 embedding and head: 65,536 B), whose
  // device twin is a term of its own.
  EXPECT_EQ(r["host_terms"]["host_gradients"], 361600 + 65536);
  EXPECT_EQ(r["host_terms"]["host_parameters"], 361600);
  EXPECT_EQ(r["terms"]["offload_staging"], 65536);
}

TEST(StateOffloadFlags, OneCardZeroOffloadLowersAnEightBModelsDevicePeak) {
  const std::vector<std::string> base = {"--budget", "80GB", "--device", "h100", "--precision",
                                         "bf16", "--micro-batch", "1", "--seq-len", "2048",
                                         "--gpus", "1", "--zero", "2", kLlama8b};
  std::vector<std::string> off = base;
  off.insert(off.end() - 1, {"--offload-optimizer", "cpu"});
  const nlohmann::json a = PlanJson(base), b = PlanJson(off);
  const nlohmann::json &ra = a["predicted"]["per_rank"][0], &rb = b["predicted"]["per_rank"][0];
  // bf16 AdamW: its moments leave the device; the device keeps the
  // staging buffer of the largest parameter (the 128,256 x 4,096 embedding
  // in bf16).
  EXPECT_EQ(rb["terms"]["optimizer"], 0);
  EXPECT_EQ(rb["terms"]["offload_staging"], 128256LL * 4096 * 2);
  EXPECT_EQ(ra["static_bytes"].get<int64_t>() - rb["static_bytes"].get<int64_t>(),
            ra["terms"]["optimizer"].get<int64_t>() - 128256LL * 4096 * 2);
  EXPECT_GT(b["predicted"]["step_ms"].get<double>(), 0);
}

Captured Export(const std::string& engine, std::vector<std::string> flags) {
  std::vector<std::string> args = Tiny(flags);
  args.insert(args.end() - 1, {"--quiet", "--export", engine});
  return RunCli(args);
}

TEST(StateOffloadFlags, ExportsCarryTheOffload) {
  Captured c = Export("deepspeed", {"--zero", "2", "--offload-optimizer", "cpu"});
  ASSERT_EQ(c.code, 0) << c.err;
  nlohmann::json j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_FALSE(j["zero_optimization"].contains("offload_param"));
  c = Export("deepspeed", {"--fsdp", "full_shard", "--fsdp-cpu-offload"});
  ASSERT_EQ(c.code, 0) << c.err;
  j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["zero_optimization"]["stage"], 3);
  EXPECT_EQ(j["zero_optimization"]["offload_param"]["device"], "cpu");
  c = Export("torchtitan", {"--fsdp", "full_shard", "--fsdp-cpu-offload"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("enable_cpu_offload = true"), std::string::npos) << c.out;
  c = Export("pytorch", {"--fsdp", "full_shard", "--fsdp-cpu-offload"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("fully_shard(model, mesh=mesh, offload_policy=CPUOffloadPolicy())"),
            std::string::npos)
      << c.out;
  c = Export("pytorch", {"--fsdp", "full_shard"});
  EXPECT_EQ(c.out.find("CPUOffloadPolicy"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace remat::cli
