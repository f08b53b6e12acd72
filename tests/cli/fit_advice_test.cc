// The fit advice over every lever, as a user meets it: Llama-3-8B at
// micro-batch 1 x 2048 on a 24 GB RTX 4090, whose model state alone (amp
// bf16 AdamW, 16 B a parameter) is five times the card; and Llama-3.2-1B
// at micro-batch 4 x 4096 on the same card, whose model state fits but
// whose activations do not at any micro-batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace remat::cli {
namespace {

const char kLlama8b[] = REMAT_SOURCE_DIR "/examples/hf/llama-3-8b.config.json";
const char kLlama1b[] = REMAT_SOURCE_DIR "/examples/hf/llama-3.2-1b.config.json";

std::vector<std::string> Job8bOn4090(const std::string& flags = "") {
  std::vector<std::string> args = {"--budget", "24GB",      "--device", "rtx4090", "--micro-batch",
                                   "1",        "--seq-len", "2048",     "--json"};
  std::istringstream words(flags);
  for (std::string w; words >> w;) args.push_back(w);
  args.push_back(kLlama8b);
  return args;
}

TEST(FitAdvice, LlamaThreeEightBOnTwentyFourGbListsWhatFitsFastestFirst) {
  const Captured c = RunCli(Job8bOn4090());
  ASSERT_EQ(c.code, 3) << c.err;
  const nlohmann::json j = nlohmann::json::parse(c.out);
  ASSERT_TRUE(j.contains("fit_advice")) << c.out.substr(0, 400);
  const nlohmann::json& advice = j["fit_advice"];
  EXPECT_TRUE(advice["model_state_exceeds_budget"].get<bool>());
  const nlohmann::json& alternatives = advice["alternatives"];
  ASSERT_FALSE(alternatives.empty());
  // The message is the one the command ends with.
  EXPECT_NE(c.err.find(advice["message"].get<std::string>()), std::string::npos) << c.err;

  // Listed first, each group fastest first; a full fine-tune among the
  // listed (it fits sharded: the bf16 weights and gradients alone are
  // 29.92 GiB).
  bool listed_full = false;
  int listed = 0;
  for (size_t i = 0; i < alternatives.size(); ++i) {
    const nlohmann::json& a = alternatives[i];
    if (a["listed"].get<bool>()) {
      ++listed;
      EXPECT_EQ(listed, static_cast<int>(i) + 1) << "listed ones come first";
      listed_full = listed_full || a["full_fine_tuning"].get<bool>();
      EXPECT_NE(c.err.find(a["flags"].get<std::string>()), std::string::npos) << c.err;
    }
    if (i > 0 && alternatives[i - 1]["listed"] == a["listed"]) {
      EXPECT_LE(alternatives[i - 1]["step_ms"].get<double>(), a["step_ms"].get<double>());
    }
  }
  EXPECT_GE(listed, 1);
  EXPECT_LE(listed, 5);
  EXPECT_TRUE(listed_full) << advice["message"];
  // A full fine-tune on the card itself is listed too: the model state
  // offloaded to the host (FSDP2's CPUOffloadPolicy on one GPU), with the
  // host bytes a rank keeps there.
  const auto on_the_card =
      std::find_if(alternatives.begin(), alternatives.end(), [](const nlohmann::json& a) {
        return a["listed"].get<bool>() && a["full_fine_tuning"].get<bool>() &&
               a["gpus"].get<int64_t>() == 1;
      });
  ASSERT_NE(on_the_card, alternatives.end()) << advice["message"];
  EXPECT_NE((*on_the_card)["flags"].get<std::string>().find("--fsdp-cpu-offload"),
            std::string::npos);
  EXPECT_GT((*on_the_card)["host_bytes"].get<int64_t>(), 0);
  if (static_cast<size_t>(listed) < alternatives.size()) {
    EXPECT_NE(c.err.find("and " + std::to_string(alternatives.size() - listed) + " other"),
              std::string::npos)
        << c.err;
  }

  // Each listed combination planned alone with its flags: it fits, with
  // the peak and step time the advice said. So is each with the chunked
  // loss (its profile made once for the combinations whose models differ
  // in their optimizer alone, and for every GPU count tried): several.
  int chunked = 0;
  for (const nlohmann::json& a : alternatives) {
    const std::string flags = a["flags"].get<std::string>();
    const bool with_chunks = flags.find("--chunked-loss") != std::string::npos;
    chunked += with_chunks ? 1 : 0;
    if (!a["listed"].get<bool>() && !with_chunks) continue;
    const Captured alone = RunCli(Job8bOn4090(flags));
    ASSERT_EQ(alone.code, 0) << flags << ": " << alone.err;
    const nlohmann::json p = nlohmann::json::parse(alone.out);
    EXPECT_TRUE(p["fits"].get<bool>()) << flags;
    EXPECT_FALSE(p.contains("fit_advice")) << flags;
    EXPECT_EQ(p["strategy"], a["strategy"]) << flags;
    EXPECT_EQ(p["predicted"]["peak_bytes"], a["peak_bytes"]) << flags;
    EXPECT_EQ(p["predicted"]["device_peak_bytes"], a["device_peak_bytes"]) << flags;
    EXPECT_LE(a["device_peak_bytes"].get<int64_t>(), p["budget_bytes"].get<int64_t>()) << flags;
    EXPECT_DOUBLE_EQ(p["predicted"]["step_ms"].get<double>(), a["step_ms"].get<double>()) << flags;
    // The host bytes the advice names are the rank's (0: nothing offloaded).
    int64_t host = 0;
    if (p["predicted"].contains("per_rank")) {
      for (const nlohmann::json& r : p["predicted"]["per_rank"]) {
        host = std::max(host, r.value("host_bytes", int64_t{0}));
      }
    }
    EXPECT_EQ(host, a.value("host_bytes", int64_t{0})) << flags;
  }
  EXPECT_GE(chunked, 3) << advice["message"];
}

// --host-budget holds the model state a rank offloads (FSDP2's
// CPUOffloadPolicy on the card: the amp bf16 AdamW state, 119.66 GiB, on
// the host): above it nothing fits, and the message says why; the listed
// alternatives, added to the command, fit within both budgets.
TEST(FitAdvice, OffloadedStateBeyondTheHostBudgetFitsNothing) {
  const std::string offloaded = "--gpus 1 --fsdp full_shard --fsdp-cpu-offload --host-budget ";
  const Captured fits = RunCli(Job8bOn4090(offloaded + "130GB"));
  ASSERT_EQ(fits.code, 0) << fits.err;
  const nlohmann::json rank = nlohmann::json::parse(fits.out)["predicted"]["per_rank"][0];
  EXPECT_GT(rank["host_bytes"].get<int64_t>(), 120'000'000'000);
  EXPECT_LE(rank["host_bytes"].get<int64_t>(), 130'000'000'000);

  const Captured c = RunCli(Job8bOn4090(offloaded + "64GB"));
  ASSERT_EQ(c.code, 3) << c.err;
  const nlohmann::json advice = nlohmann::json::parse(c.out)["fit_advice"];
  const std::string message = advice["message"].get<std::string>();
  EXPECT_EQ(message.find("no plan fits: the model state offloaded to the host needs 119.66 GiB, "
                         "above the host budget of 59.60 GiB; what fits, fastest first: "),
            0u)
      << message;
  int listed = 0;
  for (const nlohmann::json& a : advice["alternatives"]) {
    if (!a["listed"].get<bool>()) continue;
    ++listed;
    const std::string flags = a["flags"].get<std::string>();
    EXPECT_LE(a.value("host_bytes", int64_t{0}), 64'000'000'000) << flags;
    // The flags added to the command (--gpus and --fsdp replacing its own).
    const std::string job = flags.find("--gpus") == std::string::npos
                                ? offloaded
                                : "--fsdp-cpu-offload --host-budget ";
    const Captured alone = RunCli(Job8bOn4090(job + "64GB " + flags));
    ASSERT_EQ(alone.code, 0) << flags << ": " << alone.err;
    const nlohmann::json p = nlohmann::json::parse(alone.out)["predicted"];
    EXPECT_EQ(p["device_peak_bytes"], a["device_peak_bytes"]) << flags;
    EXPECT_EQ(p["per_rank"][0].value("host_bytes", int64_t{0}), a.value("host_bytes", int64_t{0}))
        << flags;
  }
  EXPECT_GE(listed, 1) << message;
}

TEST(FitAdvice, ActivationsThatDoNotFitGetEveryLeverToo) {
  const std::vector<std::string> job = {"--budget",      "24GB",  "--device",  "rtx4090",
                                        "--micro-batch", "4",     "--seq-len", "4096",
                                        "--json",        kLlama1b};
  const Captured c = RunCli(job);
  ASSERT_EQ(c.code, 3) << c.err;
  const nlohmann::json advice = nlohmann::json::parse(c.out)["fit_advice"];
  EXPECT_FALSE(advice["model_state_exceeds_budget"].get<bool>());
  EXPECT_TRUE(advice["micro_batches"].empty()) << "no micro-batch fits as the job is";
  const std::string message = advice["message"].get<std::string>();
  EXPECT_NE(message.find("even micro_batch 1 does not fit without other levers"), std::string::npos)
      << message;
  EXPECT_NE(message.find("at this micro-batch, what fits, fastest first: "), std::string::npos)
      << message;
  const nlohmann::json& alternatives = advice["alternatives"];
  ASSERT_FALSE(alternatives.empty()) << message;
  for (size_t i = 1; i < alternatives.size(); ++i) {
    if (alternatives[i - 1]["listed"] != alternatives[i]["listed"]) continue;
    EXPECT_LE(alternatives[i - 1]["step_ms"].get<double>(),
              alternatives[i]["step_ms"].get<double>());
  }
  // The fastest, planned alone with its flags: it fits at micro-batch 4
  // with the peak and step time the advice said.
  const nlohmann::json& first = alternatives[0];
  std::vector<std::string> alone_args(job.begin(), job.end() - 1);
  std::istringstream words(first["flags"].get<std::string>());
  for (std::string w; words >> w;) alone_args.push_back(w);
  alone_args.push_back(kLlama1b);
  const Captured alone = RunCli(alone_args);
  ASSERT_EQ(alone.code, 0) << first["flags"] << ": " << alone.err;
  const nlohmann::json p = nlohmann::json::parse(alone.out);
  EXPECT_TRUE(p["fits"].get<bool>());
  EXPECT_EQ(p["predicted"]["device_peak_bytes"], first["device_peak_bytes"]);
  EXPECT_DOUBLE_EQ(p["predicted"]["step_ms"].get<double>(), first["step_ms"].get<double>());
}

// Llama-3.2-1B at micro-batch 16 x 8192 on a 40 GB H100 budget: the
// largest micro-batch that fits (12) does not divide 16, so the one that
// keeps the global batch (8, planned by the bisection too) is suggested
// as well. Each is auto's plan of the job at that micro-batch, as planning
// it alone gives it.
TEST(FitAdvice, EachSuggestedMicroBatchIsAutosPlanAlone) {
  auto job = [](const std::string& micro_batch) {
    return std::vector<std::string>{"--budget",      "40GB",      "--device", "h100",
                                    "--micro-batch", micro_batch, "--seq-len", "8192",
                                    "--json",        kLlama1b};
  };
  const Captured c = RunCli(job("16"));
  ASSERT_EQ(c.code, 3) << c.err;
  const nlohmann::json suggested = nlohmann::json::parse(c.out)["fit_advice"]["micro_batches"];
  ASSERT_EQ(suggested.size(), 2u) << c.err;
  EXPECT_EQ(suggested[0]["micro_batch"], 12);
  EXPECT_EQ(suggested[1]["micro_batch"], 8);
  for (const nlohmann::json& s : suggested) {
    const std::string mb = std::to_string(s["micro_batch"].get<int64_t>());
    const Captured alone = RunCli(job(mb));
    ASSERT_EQ(alone.code, 0) << mb << ": " << alone.err;
    const nlohmann::json p = nlohmann::json::parse(alone.out);
    EXPECT_EQ(p["strategy"], s["strategy"]) << mb;
    EXPECT_EQ(p["predicted"]["peak_bytes"], s["peak_bytes"]) << mb;
    EXPECT_DOUBLE_EQ(p["predicted"]["step_ms"].get<double>(), s["step_ms"].get<double>()) << mb;
  }
}

TEST(FitAdvice, AJobThatFitsGetsNone) {
  const Captured c = RunCli(Job8bOn4090("--precision bf16 --lora-rank 16 --quantization nf4"));
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_FALSE(nlohmann::json::parse(c.out).contains("fit_advice"));
  EXPECT_EQ(c.err.find("NO PLAN FITS"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("fits, fastest first"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace remat::cli
