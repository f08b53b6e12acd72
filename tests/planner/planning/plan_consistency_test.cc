// One answer, consistent with itself, over real public configs: Llama 3.1
// 8B/70B/405B, Mixtral 8x22B, Qwen3 dense and MoE, Gemma 2, Phi-3 and
// Qwen2.5 (examples/hf) on 1 to 1,024 GPUs under DDP, ZeRO 1-3, FSDP2
// full_shard and hybrid, tensor with sequence parallelism and pipelines, at
// 2k to 128k tokens and several budgets. For every job of the grid:
//  - auto fits whenever a strategy planned alone fits, no slower than the
//    fastest of them;
//  - each of auto's candidates (the strategies table's rows) is that
//    strategy's plan planned alone: the same peak, step time and setting;
//  - where nothing fits, the lowest peak the advice names is the lowest of
//    all strategies';
//  - a strategy that fits nothing returns its own lowest-peak plan (never
//    above uniform every 1's, nor all blocks selective's, on any rank);
//  - a larger budget keeps every fit;
//  - more data-parallel ranks never raise a rank's model state.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/input/input.h"
#include "remat/planning/planning.h"
#include "remat/strategies/strategies.h"

namespace remat {
namespace {

constexpr int64_t kGB = 1000LL * 1000 * 1000;

// One job of the grid.
struct GridJob {
  const char* config;  // examples/hf/<config>.config.json
  int64_t gpus;
  DataParallel data;
  int64_t tensor;    // with sequence parallelism where > 1
  int64_t pipeline;  // 1F1B
  int64_t seq_len;
  int64_t budget_gb;  // 10^9 bytes
  const char* device = "";  // "": no device terms; else its caching allocator replayed
};

std::string Name(const GridJob& g) {
  return std::string(g.config) + " on " + std::to_string(g.gpus) + " GPUs, " +
         ToString(g.data) + ", tp " + std::to_string(g.tensor) + ", pp " +
         std::to_string(g.pipeline) + ", seq " + std::to_string(g.seq_len) + ", " +
         std::to_string(g.budget_gb) + "GB" + (*g.device ? std::string(", ") + g.device : "");
}

// Small enough to run in seconds, wide enough to reach every sharding,
// tensor and pipeline layout, MoE and dense blocks, and jobs that fit,
// fit only with checkpointing, and fit nothing.
const GridJob kGrid[] = {
    {"llama-3.1-8b", 1, DataParallel::kNone, 1, 1, 2048, 80},
    {"llama-3.1-8b", 8, DataParallel::kDdp, 1, 1, 4096, 80},
    {"llama-3.1-8b", 8, DataParallel::kZero1, 1, 1, 8192, 80},
    {"llama-3.1-8b", 16, DataParallel::kZero2, 1, 1, 16384, 80, "a100"},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 4096, 24},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 131072, 80},
    {"llama-3.1-8b", 8, DataParallel::kNone, 1, 8, 8192, 40},
    {"llama-3.1-70b", 64, DataParallel::kFsdp2, 1, 1, 8192, 80},
    {"llama-3.1-70b", 64, DataParallel::kZero3, 1, 1, 4096, 80, "h200"},
    {"llama-3.1-70b", 256, DataParallel::kHsdp, 1, 1, 8192, 80},
    {"llama-3.1-70b", 64, DataParallel::kFsdp2, 8, 1, 32768, 80},
    {"llama-3.1-70b", 64, DataParallel::kZero1, 4, 4, 4096, 80},
    {"llama-3.1-405b", 1024, DataParallel::kFsdp2, 8, 1, 8192, 80},
    {"llama-3.1-405b", 512, DataParallel::kFsdp2, 8, 8, 8192, 80},
    {"mixtral-8x22b", 64, DataParallel::kFsdp2, 1, 1, 4096, 80},
    {"qwen3-235b-a22b", 128, DataParallel::kFsdp2, 1, 1, 4096, 80},
    {"qwen3-32b", 32, DataParallel::kZero3, 1, 1, 32768, 80},
    {"qwen2.5-7b", 16, DataParallel::kFsdp2, 4, 1, 16384, 40},
    {"gemma-2-9b", 8, DataParallel::kFsdp2, 1, 1, 8192, 24},
    {"phi-3-medium-4k", 4, DataParallel::kDdp, 1, 1, 4096, 80},
    {"qwen2.5-7b", 2, DataParallel::kZero2, 1, 1, 65536, 141},
    {"llama-2-70b", 64, DataParallel::kFsdp2, 1, 1, 4096, 70, "a100"},
};

Parallelism LayoutOf(const GridJob& g, int64_t gpus) {
  Parallelism p;
  p.gpus = gpus;
  p.data = g.data;
  p.tensor = g.tensor;
  p.sequence = g.tensor > 1;
  p.pipeline = g.pipeline;
  return p;
}

Result<Job> JobOf(const GridJob& g, int64_t gpus) {
  JobOverrides o;
  o.micro_batch = 1;
  o.seq_len = g.seq_len;
  if (gpus > 1 || g.data != DataParallel::kNone) o.parallel = LayoutOf(g, gpus);
  return LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/" + g.config + ".config.json", o);
}

PlanOptions OptionsOf(const GridJob& g, int64_t budget_bytes, Strategy s) {
  PlanOptions o;
  o.budget_bytes = budget_bytes;
  o.strategy = s;
  Result<DeviceMemoryTerms> terms = ResolveDeviceMemory(g.device, DeviceMemoryOverrides{}, "");
  EXPECT_TRUE(terms.ok()) << terms.status().message();
  if (terms.ok()) o.device_memory = *terms;
  return o;
}

// The job planned as the CLI plans it: auto weighs the chunked loss.
PlanningResult PlanJob(const Job& job, const PlanOptions& options) {
  PlanningRequest request;
  request.options = options;
  request.suggest_fit = false;
  request.weigh_chunked_loss = options.strategy == Strategy::kAuto;
  Result<PlanningResult> r = RunPlanner(job, request);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *std::move(r) : PlanningResult{};
}

// Each rank's profile as `r` planned it (one GPU: the job's).
std::vector<const Profile*> RankProfiles(const PlanningResult& r, const Job& job) {
  std::vector<const Profile*> out;
  for (const RankPlan& rank : r.ranks) out.push_back(&rank.memory.profile);
  if (out.empty()) out.push_back(&job.profile);
  return out;
}
std::vector<const Plan*> RankChosen(const PlanningResult& r) {
  std::vector<const Plan*> out;
  for (const RankPlan& rank : r.ranks) out.push_back(&rank.plans.chosen);
  if (out.empty()) out.push_back(&r.plans.chosen);
  return out;
}

// The blocks of one pass of `p`, numbered as --selective-layers counts them.
int BlockCount(const Profile& p) {
  int n = 0;
  for (const LayerProfile& l : p.layers) n += l.kind == kBlockKind ? 1 : 0;
  return n;
}

// A strategy that fits nothing returns its lowest peak: on each rank,
// never above the plan with the most checkpointing its family has.
void ExpectLowestPeak(const PlanningResult& alone, const Job& job, const GridJob& g,
                      Strategy s) {
  const std::vector<const Profile*> profiles = RankProfiles(alone, job);
  const std::vector<const Plan*> plans = RankChosen(alone);
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (plans[i]->fits) continue;
    PlanOptions most = OptionsOf(g, alone.plans.chosen.budget_bytes, s);
    if (s == Strategy::kUniform) most.every = 1;
    if (s == Strategy::kSelective) {
      // Passes repeat their blocks (a sentence-embedding pair): one pass's.
      most.selective_layers.resize(BlockCount(*profiles[i]));
      std::iota(most.selective_layers.begin(), most.selective_layers.end(), 0);
      bool options = false;
      for (const LayerProfile& l : profiles[i]->layers) options |= !l.selective.empty();
      if (!options) continue;  // no block has a selective option: nothing to compare
    }
    Result<PlanSet> m = MakePlan(*profiles[i], most);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_LE(plans[i]->memory.total_bytes, m->chosen.memory.total_bytes)
        << ToString(s) << " on rank " << i << ": " << plans[i]->parameter << " against "
        << m->chosen.parameter;
  }
}

TEST(PlanConsistency, EveryAnswerAgreesWithItselfOverRealConfigs) {
  for (const GridJob& g : kGrid) {
    SCOPED_TRACE(Name(g));
    Result<Job> job = JobOf(g, g.gpus);
    ASSERT_TRUE(job.ok()) << job.status().message();
    const int64_t budget = g.budget_gb * kGB;
    const PlanningResult chosen = PlanJob(*job, OptionsOf(g, budget, Strategy::kAuto));
    // The job auto planned (with the chunked loss where auto chose it).
    const Job& planned = chosen.planned(*job);
    ASSERT_FALSE(chosen.plans.candidates.empty());
    bool any_fits = false;
    double fastest_ms = 0;
    int64_t lowest = chosen.plans.chosen.memory.total_bytes;
    for (const Plan& row : chosen.plans.candidates) {
      SCOPED_TRACE(ToString(row.strategy));
      const PlanningResult alone = PlanJob(planned, OptionsOf(g, budget, row.strategy));
      const Plan& a = alone.plans.chosen;
      EXPECT_EQ(row.memory.total_bytes, a.memory.total_bytes);
      EXPECT_EQ(row.predicted.step_ms, a.predicted.step_ms);
      EXPECT_EQ(row.parameter, a.parameter);
      EXPECT_EQ(row.fits, a.fits);
      if (a.fits && (!any_fits || a.predicted.step_ms < fastest_ms)) {
        fastest_ms = a.predicted.step_ms;
      }
      any_fits = any_fits || a.fits;
      lowest = std::min(lowest, a.memory.total_bytes);
      if (row.strategy == Strategy::kUniform || row.strategy == Strategy::kSelective) {
        ExpectLowestPeak(alone, planned, g, row.strategy);
      }
      // A larger budget keeps the fit.
      if (a.fits) {
        const PlanningResult more = PlanJob(planned, OptionsOf(g, budget * 5 / 4, row.strategy));
        EXPECT_TRUE(more.plans.chosen.fits) << "fits at " << g.budget_gb << "GB, not at 5/4 of it";
      }
    }
    EXPECT_EQ(chosen.plans.chosen.fits, any_fits);
    if (any_fits) {
      EXPECT_LE(chosen.plans.chosen.predicted.step_ms, fastest_ms * (1 + 1e-12));
      const PlanningResult more = PlanJob(*job, OptionsOf(g, budget * 5 / 4, Strategy::kAuto));
      EXPECT_TRUE(more.plans.chosen.fits);
    } else {
      ASSERT_TRUE(chosen.advice.has_value());
      EXPECT_EQ(chosen.advice->lowest_peak_bytes, lowest);
    }
    // More data-parallel ranks divide the model state further.
    if (g.data != DataParallel::kNone) {
      Result<Job> wider = JobOf(g, g.gpus * 2);
      ASSERT_TRUE(wider.ok()) << wider.status().message();
      ASSERT_EQ(wider->ranks.size(), job->ranks.size());
      for (size_t i = 0; i < job->ranks.size(); ++i) {
        EXPECT_LE(wider->ranks[i].state.total(), job->ranks[i].state.total()) << "rank " << i;
      }
    }
  }
}

// The 70B job users plan first: 64 GPUs, FSDP2 full_shard, 8k tokens,
// 80 GB: it fits by default.
TEST(PlanConsistency, Llama70bOn64GpusFitsByDefault) {
  const GridJob g = {"llama-3.1-70b", 64, DataParallel::kFsdp2, 1, 1, 8192, 80};
  Result<Job> job = JobOf(g, g.gpus);
  ASSERT_TRUE(job.ok()) << job.status().message();
  const PlanningResult r = PlanJob(*job, OptionsOf(g, 80 * kGB, Strategy::kAuto));
  EXPECT_TRUE(r.plans.chosen.fits) << r.plans.chosen.memory.total_bytes;
  EXPECT_FALSE(r.advice.has_value());
}

}  // namespace
}  // namespace remat
