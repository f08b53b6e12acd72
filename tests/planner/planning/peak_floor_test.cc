// The peak floor the fit advice skips alternatives by (JobPeakFloor,
// remat/plan/peak_floor.h): over real configs and layouts, each with the
// changes the advice weighs (precision, optimizer, LoRA, QLoRA, the chunked
// loss), no plan any strategy gives any rank has a device peak below the
// job's floor, so an alternative whose floor is above the budget has no
// plan that fits. And the floor is not vacuous: it holds the model state.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/device/device_memory.h"
#include "remat/plan/peak_floor.h"
#include "remat/planning/planning.h"

namespace remat {
namespace {

constexpr int64_t kGB = 1000LL * 1000 * 1000;

struct FloorJob {
  const char* config;  // examples/hf/<config>.config.json
  int64_t gpus;
  DataParallel data;
  int64_t tensor;    // with sequence parallelism where > 1
  int64_t pipeline;  // 1F1B
  int64_t seq_len;
  int64_t micro_batch;
  const char* device;  // "": no device terms
  StateOffload offload = StateOffload::kNone;
  int64_t grad_accumulation = 1;
};

// The layouts of bench/speed/grid.py's no-fit commands and a few others:
// one GPU, DDP, ZeRO-3, FSDP2 full and hybrid shard, tensor and pipeline
// parallelism, with and without a device's terms, and the model state
// offloaded to the host (FSDP2's CPUOffloadPolicy, ZeRO-Offload).
const FloorJob kJobs[] = {
    {"llama-3.1-8b", 1, DataParallel::kNone, 1, 1, 4096, 1, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kDdp, 1, 1, 8192, 1, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 2, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 2, ""},
    {"llama-3.1-8b", 16, DataParallel::kFsdp2, 2, 1, 8192, 2, "h100"},
    {"llama-3.1-8b", 8, DataParallel::kNone, 1, 4, 4096, 1, "a100"},
    {"llama-3.1-70b", 8, DataParallel::kFsdp2, 1, 1, 8192, 1, "h100"},
    {"llama-3.1-70b", 64, DataParallel::kHsdp, 1, 1, 8192, 1, "h100"},
    {"llama-3.1-70b", 64, DataParallel::kZero3, 1, 1, 4096, 1, "h200"},
    // The state offload the advice weighs on the job's own GPUs.
    {"llama-3.1-8b", 1, DataParallel::kFsdp2, 1, 1, 2048, 1, "rtx4090", StateOffload::kFsdpCpu},
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 2, "h100", StateOffload::kFsdpCpu},
    {"llama-3.1-8b", 8, DataParallel::kZero2, 1, 1, 8192, 1, "h100", StateOffload::kOptimizer},
    {"llama-3.1-70b", 64, DataParallel::kZero3, 1, 1, 4096, 1, "h200", StateOffload::kOptimizer},
    // Gradient accumulation: the later micro-steps back-propagate into
    // existing gradients (the accumulating workspace), on the stages of a
    // 1F1B pipeline with their micro-batches in flight too.
    {"llama-3.1-8b", 8, DataParallel::kFsdp2, 1, 1, 8192, 1, "h100", StateOffload::kNone, 4},
    {"llama-3.1-8b", 8, DataParallel::kDdp, 1, 1, 4096, 1, "h100", StateOffload::kNone, 4},
    {"llama-3.1-8b", 8, DataParallel::kNone, 1, 4, 4096, 1, "a100", StateOffload::kNone, 8},
};

// One change the advice weighs, as its flags set it.
struct Change {
  const char* name;
  void (*apply)(JobOverrides*);
};

const Change kChanges[] = {
    {"as given", [](JobOverrides*) {}},
    {"optimizer adafactor", [](JobOverrides* o) { o->optimizer = Optimizer::kAdafactor; }},
    {"optimizer adamw8bit", [](JobOverrides* o) { o->optimizer = Optimizer::kAdamW8bit; }},
    {"precision bf16", [](JobOverrides* o) { o->precision = Precision::kBf16; }},
    {"gradients created_in_backward",
     [](JobOverrides* o) { o->gradients = Gradients::kCreatedInBackward; }},
    {"LoRA", [](JobOverrides* o) { o->lora_rank = 16; }},
    {"QLoRA",
     [](JobOverrides* o) {
       o->lora_rank = 16;
       o->quantization = Quantization::kNf4;
     }},
    {"chunked loss", [](JobOverrides* o) { o->loss_chunks = 16; }},
};

Parallelism LayoutOf(const FloorJob& g) {
  Parallelism p;
  p.gpus = g.gpus;
  p.data = g.data;
  p.tensor = g.tensor;
  p.sequence = g.tensor > 1;
  p.pipeline = g.pipeline;
  p.offload = g.offload;
  return p;
}

TEST(PeakFloor, NoPlanOfAnyRankIsBelowTheJobsFloor) {
  int planned = 0, left_out = 0;
  int backward_decides = 0;  // ranks whose floor a layer's backward sets
  for (const FloorJob& g : kJobs) {
    for (const Change& c : kChanges) {
      SCOPED_TRACE(std::string(g.config) + " on " + std::to_string(g.gpus) + " GPUs (" +
                   ToString(g.data) + ", tp " + std::to_string(g.tensor) + ", pp " +
                   std::to_string(g.pipeline) + ", offload " + ToString(g.offload) + "), " +
                   c.name +
                   (*g.device ? std::string(", ") + g.device : ""));
      JobOverrides o;
      o.precision = Precision::kMixedBf16;
      o.seq_len = g.seq_len;
      o.micro_batch = g.micro_batch;
      o.grad_accumulation = g.grad_accumulation;
      if (g.gpus > 1 || g.offload != StateOffload::kNone) o.parallel = LayoutOf(g);
      c.apply(&o);
      Result<Job> job =
          LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/" + g.config + ".config.json", o);
      // LoRA, QLoRA and the chunked loss under tensor parallelism are not
      // modelled: the advice does not weigh them either.
      if (g.tensor > 1 && !job.ok()) {
        ++left_out;
        continue;
      }
      ASSERT_TRUE(job.ok()) << job.status().message();
      PlanOptions options;
      options.strategy = Strategy::kAuto;
      options.budget_bytes = 80 * kGB;
      Result<DeviceMemoryTerms> terms = ResolveDeviceMemory(g.device, DeviceMemoryOverrides{}, "");
      ASSERT_TRUE(terms.ok()) << terms.status().message();
      options.device_memory = *terms;
      const int64_t floor = JobPeakFloor(*job, options);
      Result<std::vector<RankPlan>> ranks = PlanRanks(*job, options);
      ASSERT_TRUE(ranks.ok()) << ranks.status().message();
      ++planned;
      // Not vacuous: at least every rank's model state and fixed terms.
      for (const RankPlan& r : *ranks) {
        EXPECT_GE(floor, r.memory.profile.model_state_bytes() + terms->fixed_bytes());
        EXPECT_GE(floor, DevicePeakFloor(r.memory.profile, *terms));
      }
      // Every strategy's plan of every rank, and the plan the job gets.
      for (const RankPlan& r : *ranks) {
        const Profile& profile = r.memory.profile;
        const int64_t backward_floor = BackwardPeakFloor(profile);
        int64_t step_floor = profile.static_bytes() + profile.optimizer_workspace_bytes;
        for (const LayerProfile& l : profile.layers) step_floor += l.gradient_bytes;
        if (backward_floor > step_floor) ++backward_decides;
        EXPECT_LE(backward_floor, r.plans.chosen.predicted.peak_bytes)
            << "rank " << r.memory.rank << ": " << ToString(r.plans.chosen.strategy);
        const int64_t rank_floor = DevicePeakFloor(r.memory.profile, *terms);
        EXPECT_LE(rank_floor, r.plans.chosen.memory.total_bytes)
            << "rank " << r.memory.rank << ": " << ToString(r.plans.chosen.strategy);
        for (const Plan& p : r.plans.candidates) {
          EXPECT_LE(rank_floor, p.memory.total_bytes)
              << "rank " << r.memory.rank << ": " << ToString(p.strategy) << " " << p.parameter;
          EXPECT_LE(AllocatedPeakFloor(r.memory.profile), p.predicted.peak_bytes)
              << "rank " << r.memory.rank << ": " << ToString(p.strategy) << " " << p.parameter;
          EXPECT_LE(backward_floor, p.predicted.peak_bytes)
              << "rank " << r.memory.rank << ": " << ToString(p.strategy) << " " << p.parameter;
        }
      }
      EXPECT_LE(floor, WorstRankPlans(*ranks).chosen.memory.total_bytes);
    }
  }
  EXPECT_EQ(left_out, 3);
  // The layers' backwards are what decides the floor on most of these
  // jobs (the engines' gathers and unsharded gradients in their workspace,
  // a block's saved activations): not vacuous.
  EXPECT_GT(backward_decides, planned / 2);
  EXPECT_EQ(planned + left_out, static_cast<int>(std::size(kJobs) * std::size(kChanges)));
}

// The floor is what decides: a budget just below it fits no plan, and the
// lowest peak of the job lies at or above it.
TEST(PeakFloor, ABudgetBelowTheFloorFitsNothing) {
  JobOverrides o;
  o.precision = Precision::kMixedBf16;
  o.seq_len = 8192;
  o.micro_batch = 2;
  Parallelism p;
  p.gpus = 8;
  p.data = DataParallel::kFsdp2;
  o.parallel = p;
  Result<Job> job =
      LoadJob(std::string(REMAT_SOURCE_DIR) + "/examples/hf/llama-3.1-8b.config.json", o);
  ASSERT_TRUE(job.ok()) << job.status().message();
  PlanOptions options;
  options.strategy = Strategy::kAuto;
  Result<DeviceMemoryTerms> terms = ResolveDeviceMemory("h100", DeviceMemoryOverrides{}, "");
  ASSERT_TRUE(terms.ok()) << terms.status().message();
  options.device_memory = *terms;
  options.budget_bytes = 80 * kGB;
  const int64_t floor = JobPeakFloor(*job, options);
  ASSERT_GT(floor, 0);
  options.budget_bytes = floor - 1;
  Result<std::vector<RankPlan>> ranks = PlanRanks(*job, options);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  const PlanSet worst = WorstRankPlans(*ranks);
  EXPECT_FALSE(worst.chosen.fits);
  for (const Plan& c : worst.candidates) {
    EXPECT_FALSE(c.fits) << ToString(c.strategy);
    EXPECT_GE(c.memory.total_bytes, floor) << ToString(c.strategy);
  }
}

}  // namespace
}  // namespace remat
