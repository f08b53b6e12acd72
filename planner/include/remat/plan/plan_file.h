// plan.json read back (PlanToJson, remat/report/report.h, writes it) by `planner
// train`, and checked against the model it is about to run on.
#ifndef REMAT_PLAN_FILE_H_
#define REMAT_PLAN_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "remat/model/model_config.h"
#include "remat/model/parallel.h"
#include "remat/plan/plan.h"
#include "remat/profile/profile.h"
#include "remat/schedule/schedule.h"
#include "remat/io/status.h"

namespace remat {

// The job's model-level fields as planned: plan.json's "job" object, written
// for model.json and config.json inputs (a profile's sizes are measured).
// Names and values are model.json's, each resolved (never "default"); a
// field that does not apply to the job is left out (pooling: the pooling
// head only; num_labels: the classification head only; lora_targets: a
// LoRA rank above 0; loss_chunks: a chunked loss).
struct PlannedJob {
  std::optional<Precision> precision;
  std::optional<AttentionImpl> attention;
  std::optional<Head> head;
  std::optional<Pooling> pooling;
  std::optional<Loss> loss;
  std::optional<int64_t> texts_per_example;
  std::optional<int64_t> num_labels;
  std::optional<bool> merge_columns;
  std::optional<int64_t> loss_chunks;  // chunked cross-entropy: with chunks only
  std::optional<Optimizer> optimizer;
  std::optional<GradDtype> grad_dtype;
  std::optional<Gradients> gradients;
  std::optional<double> dropout;
  std::optional<int64_t> lora_rank;
  std::optional<uint32_t> lora_targets;  // LoraTarget bits
  std::optional<double> lora_dropout;    // with a rank
  std::optional<Quantization> quantization;
  // PYTORCH_CUDA_ALLOC_CONF the plan's reserved peak was replayed with
  // (planner --alloc-conf): what a run should set to match it.
  std::optional<std::string> alloc_conf;
  // The ranks a distributed job runs on (its profile is one rank's); absent
  // on one GPU.
  std::optional<Parallelism> parallel;
};

// The job fields of `config` (a model.json / config.json with its overrides
// applied), resolved as PlannedJob says.
PlannedJob PlannedJobOf(const ModelConfig& config);

// A plan file read back: the profile it was made for and its schedule.
struct LoadedPlan {
  std::string model;
  std::string strategy;
  std::string parameter;  // the strategy's setting ("every 2"), as planned
  int64_t budget_bytes = 0;
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step (absent: 1)
  // The job as planned (model inputs). Optional: absent for profile inputs,
  // and a plan file without it gives its job's micro_batch and seq_len only.
  std::optional<PlannedJob> job;
  Profile profile;
  Schedule schedule;
  int64_t predicted_peak_bytes = 0;
  double predicted_step_ms = 0;
};
Result<LoadedPlan> ParsePlanJson(std::string_view json_text, const std::string& source);

// Checks that a plan read back is for the model about to run it: `profile` is
// that model's profile now (analytic or measured). The model names must
// agree (when both are named); the chains must agree in length, layer names
// and kinds, in micro-batch and sequence length (when both profiles say),
// and in the tensors passed between layers (output bytes: exact shapes,
// which change with the micro-batch, sequence length and precision; the
// batch x[0] is the executor's). Activation bytes and times may differ (a
// plan made from an analytic profile runs on measured sizes). The error names `source` (the
// plan file), both models and the first difference.
Status CheckPlanMatchesProfile(const LoadedPlan& plan, const Profile& profile,
                               const std::string& source);

// The plan file as a PlanSet for the reports: its schedule simulated on its
// profile (chosen, with the file's strategy and setting) beside `baseline`,
// that profile's no-checkpointing plan, which the caller solves (the
// strategies sit above this layer).
Result<PlanSet> PlanSetOf(const LoadedPlan& plan, Plan baseline);

}  // namespace remat

#endif  // REMAT_PLAN_FILE_H_
