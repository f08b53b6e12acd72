// --host-link and --host-budget: the offload strategy they enable, the
// report's and plan JSON's offload figures, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

struct BadFlag {
  std::vector<std::string> args;
  std::string expect;
};

class HostLinkBadFlag : public ::testing::TestWithParam<BadFlag> {};

TEST_P(HostLinkBadFlag, ExitsTwoWithOneLine) {
  std::vector<std::string> args = {"--budget", "24GB"};
  for (const std::string& a : GetParam().args) args.push_back(a);
  args.push_back(kExample);
  const Captured c = RunCli(args);
  EXPECT_EQ(c.code, 2) << c.out << c.err;
  EXPECT_NE(c.err.find(GetParam().expect), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_TRUE(c.out.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, HostLinkBadFlag,
    ::testing::Values(
        BadFlag{{"--host-link", "pcie6"},
                "option --host-link: unknown host link 'pcie6', expected pcie4, pcie5, "
                "nvlink-c2c, cpu, none or <N>GB/s"},
        BadFlag{{"--host-link", "0GB/s"}, "option --host-link: host link '0GB/s'"},
        BadFlag{{"--host-link", "fastGB/s"}, "option --host-link: host link 'fastGB/s'"},
        BadFlag{{"--host-link", "pcie5", "--host-budget", "64"},
                "option --host-budget: byte quantity '64' has no unit"},
        BadFlag{{"--host-budget", "64GB"},
                "option --host-budget 64GB: nothing is offloaded to the host: give --host-link "
                "(activation offload), --offload-optimizer cpu or --fsdp-cpu-offload"},
        BadFlag{{"--strategy", "offload"}, "offload: the profile has no host link"}));

TEST(HostLinkFlags, OffloadPlanReportsItsCheckpointsAndCopies) {
  const Captured text =
      RunCli({"--budget", "16GB", "--strategy", "offload", "--host-link", "pcie5", kExample});
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* line : {"Plan: offload (every ", "  offloaded        the checkpoints of block1",
                           " over pcie5 (50 GB/s, overlapped)", "  host memory      ",
                           "  transfers        ", "offload     "}) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  }
  const Captured json = RunCli(
      {"--budget", "16GB", "--strategy", "offload", "--host-link", "pcie5", "--json", kExample});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json p = nlohmann::json::parse(json.out)["predicted"];
  ASSERT_TRUE(p.contains("offloaded_bytes")) << p.dump();
  EXPECT_GT(p["offloaded_bytes"].get<int64_t>(), 0);
  EXPECT_GT(p["host_peak_bytes"].get<int64_t>(), 0);
  EXPECT_GE(p["transfer_ms"].get<double>(), 0);
  // Without a link nothing offloads and the block is as before.
  const Captured plain = RunCli({"--budget", "24GB", "--json", kExample});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out)["predicted"].contains("offloaded_bytes"));
}

TEST(HostLinkFlags, EverySetsTheOffloadSpacing) {
  const Captured c = RunCli({"--budget", "24GB", "--strategy", "offload", "--every", "4",
                             "--host-link", "pcie5", kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("Plan: offload (every 4, "), std::string::npos) << c.out;
}

TEST(HostLinkFlags, HostBudgetCapsTheOffloadedBytes) {
  const Captured all = RunCli(
      {"--strategy", "offload", "--host-link", "pcie5", "--json", "--budget", "1GB", kExample});
  const Captured capped = RunCli({"--strategy", "offload", "--host-link", "pcie5", "--host-budget",
                                  "100MB", "--json", "--budget", "1GB", kExample});
  ASSERT_EQ(all.code, 3) << all.err;  // 1 GB fits nothing: the lowest peak
  ASSERT_EQ(capped.code, 3) << capped.err;
  const nlohmann::json a = nlohmann::json::parse(all.out)["predicted"];
  const nlohmann::json c = nlohmann::json::parse(capped.out)["predicted"];
  EXPECT_LE(c["host_peak_bytes"].get<int64_t>(), 100'000'000);
  EXPECT_GT(a["host_peak_bytes"].get<int64_t>(), 100'000'000);
  EXPECT_GT(c["peak_bytes"].get<int64_t>(), a["peak_bytes"].get<int64_t>());
}

// A host budget that holds no block's input leaves offload out of auto's
// sweep (--strategy offload alone says why), on one GPU and on ranks.
TEST(HostLinkFlags, AHostBudgetThatHoldsNoCheckpointLeavesOffloadOut) {
  for (const std::vector<std::string>& ranks :
       std::vector<std::vector<std::string>>{{}, {"--gpus", "2", "--fsdp", "full_shard"}}) {
    std::vector<std::string> args = {"--budget", "24GB", "--host-link", "pcie5", "--host-budget",
                                     "1KB"};
    args.insert(args.end(), ranks.begin(), ranks.end());
    args.push_back(kExample);
    const Captured c = RunCli(args);
    ASSERT_EQ(c.code, 0) << c.err;
    EXPECT_EQ(c.out.find("\n  offload "), std::string::npos) << c.out;
  }
  const Captured alone = RunCli({"--budget", "24GB", "--strategy", "offload", "--host-link",
                                 "pcie5", "--host-budget", "1KB", kExample});
  EXPECT_EQ(alone.code, 2) << alone.err;
  EXPECT_NE(alone.err.find("offload: no checkpoint can move (the host budget of 1000 B holds none)"),
            std::string::npos)
      << alone.err;
}

TEST(HostLinkFlags, H200PresetNamesPcie5) {
  const Captured c =
      RunCli({"--budget", "16GB", "--device", "h200", "--strategy", "offload", kExample});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find(" over pcie5 (50 GB/s, overlapped)"), std::string::npos) << c.out;
  // An explicit link wins over the preset's.
  const Captured c2c = RunCli({"--budget", "16GB", "--device", "h200", "--host-link", "nvlink-c2c",
                               "--strategy", "offload", kExample});
  ASSERT_EQ(c2c.code, 0) << c2c.err;
  EXPECT_NE(c2c.out.find(" over nvlink-c2c (300 GB/s, overlapped)"), std::string::npos)
      << c2c.out;  // --host-link none: the preset's link off, auto weighs no offload.
  const Captured none =
      RunCli({"--budget", "40GB", "--device", "h200", "--host-link", "none", kExample});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out.find("offload"), std::string::npos) << none.out;
  const Captured with_link = RunCli({"--budget", "40GB", "--device", "h200", kExample});
  ASSERT_EQ(with_link.code, 0) << with_link.err;
  EXPECT_NE(with_link.out.find("\n  offload "), std::string::npos) << with_link.out;
}

}  // namespace
}  // namespace remat::cli
