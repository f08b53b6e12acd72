// A training job to plan: the input file (model.json, config.json or a
// profile) with the overrides a caller applies to it, and the profile the
// strategies work on (analytic for models, as read for profiles).
#ifndef REMAT_JOB_H_
#define REMAT_JOB_H_

#include <cstdint>
#include <optional>
#include <string>

#include "remat/analytic.h"
#include "remat/input.h"
#include "remat/model_config.h"
#include "remat/profile.h"
#include "remat/report.h"
#include "remat/status.h"

namespace remat {

// Changes to a model's job fields and to the analytic time model. Model
// fields apply to model.json / config.json inputs only: a profile's sizes
// and times are measured.
struct JobOverrides {
  std::optional<int64_t> micro_batch;  // sequences per micro-batch
  std::optional<int64_t> seq_len;      // tokens per sequence (raises max_position to it)
  std::optional<Precision> precision;
  std::optional<AttentionImpl> attention;
  std::optional<int64_t> lora_rank;      // 0: no LoRA
  std::optional<uint32_t> lora_targets;  // LoraTarget bits
  std::optional<Quantization> quantization;
  std::optional<Gradients> gradients;  // when parameter gradients exist
  // Micro-batches per optimizer step: changes no size or time of a
  // micro-step, so it applies to profiles too.
  std::optional<int64_t> grad_accumulation;
  std::optional<std::string> device;  // analytic times: "h200", "a100" (default), ...
  std::optional<double> tflops;       // analytic times: achieved TFLOP/s, > 0
  bool any_model_field() const {
    return micro_batch || seq_len || precision || attention || lora_rank || lora_targets ||
           quantization || gradients;
  }
  bool any() const { return any_model_field() || device || tflops; }
};

struct Job {
  PlannerInput input;
  AnalyticOptions analytic;
  Profile profile;        // analytic for model inputs, as read for profiles
  ReportContext context;  // input path and kind, and the config when there is one
  bool has_config() const { return context.has_config; }
  const ModelConfig& config() const { return context.config; }
  int64_t grad_accumulation() const { return context.grad_accumulation; }
};

// The job of an input already read (e.g. by LoadPlannerInput), with
// overrides applied and validated, and its profile built.
Result<Job> MakeJob(PlannerInput input, const JobOverrides& overrides);

// Reads `path` and makes its job.
Result<Job> LoadJob(const std::string& path, const JobOverrides& overrides);

// The job's model with another micro-batch (and, when `grad_accumulation`
// > 0, another accumulation): its analytic profile. Fails for profile inputs.
Result<Job> WithMicroBatch(const Job& job, int64_t micro_batch, int64_t grad_accumulation = 0);

}  // namespace remat

#endif  // REMAT_JOB_H_
