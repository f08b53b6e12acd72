// The analytic model against transformers / sentence-transformers trained on
// an NVIDIA H200 with PyTorch 2.11 (profiles/results/gpu-h200-report.md, "Against
// transformers / sentence-transformers on CUDA"): one AdamW step, the peak
// torch.cuda.max_memory_allocated. The prediction is what
// `planner --budget 1TB --device h200 --strategy none|uniform --every 1
// --json CONFIG` reports: the simulated allocated peak plus the cuBLAS
// workspace term, both computed here from the committed config files.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "remat/device/device_memory.h"
#include "remat/planning/job.h"
#include "remat/planning/planning.h"

namespace remat {
namespace {

struct Row {
  const char* config;  // under the source tree
  bool every_layer;    // gradient_checkpointing_enable(): uniform, every 1
  int64_t measured;    // reference allocated peak, bytes (the report's table)
};

int64_t Predicted(const Row& row) {
  JobOverrides overrides;
  overrides.device = "h200";
  Result<Job> job = LoadJob(std::string(REMAT_SOURCE_DIR) + "/" + row.config, overrides);
  EXPECT_TRUE(job.ok()) << job.status().message();
  if (!job.ok()) return 0;
  PlanningRequest request;
  request.options.budget_bytes = int64_t{1000} * 1000 * 1000 * 1000;  // 1TB
  request.options.strategy = row.every_layer ? Strategy::kUniform : Strategy::kNone;
  request.options.every = row.every_layer ? 1 : 0;
  Result<DeviceMemoryTerms> terms = ResolveDeviceMemory("h200", {});
  EXPECT_TRUE(terms.ok());
  if (!terms.ok()) return 0;
  request.options.device_memory = *terms;
  request.suggest_fit = false;
  Result<PlanningResult> r = RunPlanner(*job, request);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return 0;
  const DeviceMemoryUse& m = r->plans.chosen.memory;
  return m.allocated_peak_bytes + m.workspace_bytes;
}

double Error(const Row& row) {
  return static_cast<double>(Predicted(row) - row.measured) / static_cast<double>(row.measured);
}

// The fp32 rows, whose attention PyTorch runs on three different kernels on
// the H200: llama-gqa-s (GQA, fp32: flash and cuDNN take 16-bit only and
// 2.11's efficient kernel no grouped heads, so the math path keeps its
// scaled q and k, the repeated v and the s x s probabilities), all-minilm
// and bert-mlm-s (fp32 with dropout: efficient). A fused kernel's bytes
// would put llama none at -11.0%.
TEST(SdpaH200, Fp32RowsWithin3PercentOfTheMeasuredPeak) {
  const Row rows[] = {
      {"bench/fidelity/models/hf/llama-gqa-s.config.json", false, 374'031'360},
      {"bench/fidelity/models/hf/llama-gqa-s.config.json", true, 258'395'136},
      {"bench/fidelity/models/hf/all-minilm-l6-v2.mnrl.config.json", false, 1'514'662'912},
      {"bench/fidelity/models/hf/all-minilm-l6-v2.mnrl.config.json", true, 583'594'496},
  };
  for (const Row& row : rows) {
    EXPECT_LT(std::abs(Error(row)), 0.03) << row.config << (row.every_layer ? " every layer" : "");
  }
}

// distilroberta-base MNRL under amp_fp16 (cuDNN, which the H200 prefers)
// without checkpointing.
TEST(SdpaH200, AmpFp16RowWithoutCheckpointingWithin3Percent) {
  const Row row{"examples/hf/distilroberta-base.mnrl.config.json", false, 7'182'325'248};
  EXPECT_LT(std::abs(Error(row)), 0.03);
}

// bert-mlm-s (fp32, efficient attention) stays 3-4% low: its peak is the
// loss's backward (schedule op 7), where no attention runs, with or without
// checkpointing, and the gap is the same ~10.7 MiB in both; the attention
// kernel does not explain it. Held here at its size so that a change moving
// it shows.
TEST(SdpaH200, BertMlmGapIsOutsideAttention) {
  const Row none{"bench/fidelity/models/hf/bert-mlm-s.config.json", false, 316'376'576};
  const Row every{"bench/fidelity/models/hf/bert-mlm-s.config.json", true, 251'495'936};
  const int64_t gap_none = none.measured - Predicted(none);
  const int64_t gap_every = every.measured - Predicted(every);
  EXPECT_NEAR(gap_none, gap_every, 512 * 1024);
  EXPECT_LT(std::abs(Error(none)), 0.045);
  EXPECT_LT(std::abs(Error(every)), 0.045);
}

}  // namespace
}  // namespace remat
