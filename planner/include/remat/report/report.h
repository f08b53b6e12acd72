// The terminal report and plan.json of a planning result. One PlanSet,
// several renderings: the visualize/ library adds HTML, trace and Markdown
// renderings of the same structures, train_report.h what `planner train`
// prints. Renderers read the result and a ReportContext; they plan nothing.
#ifndef REMAT_REPORT_H_
#define REMAT_REPORT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "remat/planning/job.h"
#include "remat/model/model_config.h"
#include "remat/model/parallel.h"
#include "remat/plan/plan.h"
#include "remat/ranks/rank_memory.h"
#include "remat/profile/profile.h"
#include "remat/io/status.h"

namespace remat {

struct BatchSearch;  // remat/planning/planning.h
struct FitAdvice;    // remat/planning/planning.h
struct RankPlan;     // remat/planning/planning.h
struct PlanningResult;  // remat/planning/planning.h

// What the report says about where the plan came from: the render options
// besides the result itself.
struct ReportContext {
  std::string input_path;   // the file the user gave
  std::string input_kind;   // "model.json", "config.json", "profile"
  bool has_config = false;  // `config` is meaningful
  // config.seq_len is the default a config.json without one gets
  // (kDefaultSeqLen): the job line and the JSON say so.
  bool default_seq_len = false;
  ModelConfig config;
  int64_t grad_accumulation = 1;  // micro-batches per optimizer step (config's or overridden)
  std::string note;  // extra line (e.g. a suggestion), may be empty
  // --global-batch: the table weighed, written to plan.json; null otherwise.
  const BatchSearch* batch = nullptr;
  // When no plan fits: why, and what would (plan.json "fit_advice"); null
  // otherwise.
  const FitAdvice* advice = nullptr;
  // The ranks the job runs on (distributed() false: one GPU).
  Parallelism parallel;
  // A distributed job's planned ranks (PlanningResult::ranks) and the one
  // the plan describes; null on one GPU.
  const std::vector<RankPlan>* ranks = nullptr;
  int worst_rank = -1;
  // The job's rank layout, where it made one (Job::layout): config's
  // trainable parameters counted already.
  std::shared_ptr<const RankLayout> layout;
};

// TrainableParameterCount(ctx.config), from ctx.layout where set; -1
// without a config.
int64_t TrainableParametersOf(const ReportContext& ctx);

// The parallel settings in words: "8 GPUs: 8 data ranks (FSDP2 full_shard),
// tensor 1, pipeline 1".
std::string DescribeParallelism(const Parallelism& p);

// What a rank's peak holds, by name: its model-state terms (parameters,
// gradients at the peak, optimizer, ddp_buckets, fsdp_unsharded,
// reduce_scatter) and "activations", the rest of the peak (activations,
// their gradients, workspaces). They add up to the plan's peak_bytes.
std::vector<MemoryTerm> RankTermsAtPeak(const RankPlan& rank);

// The text and Markdown sections on the ranks (ctx.ranks set): the worst
// rank's terms, then one line per distinct rank. "" without ranks.
std::string FormatRanksText(const ReportContext& ctx);
std::string FormatRanksMarkdown(const ReportContext& ctx);

// The context of `job`'s reports: its input path and kind, its config (model
// inputs) and accumulation; no note and no batch table.
ReportContext ReportContextOf(const Job& job);

// The context of the reports of `result`, planned for `job`: that of the job
// it planned (result.planned(job): its batch job where --global-batch or the
// chunked loss chose one), with its ranks, the batch table and the note
// (what auto's chunked loss saves, or the advice when nothing fits). Points
// into `result`, which must outlive it.
ReportContext ReportContextOf(const Job& job, const PlanningResult& result);

// The human-readable report printed by `planner --budget ... model.json`.
std::string FormatPlanText(const PlanSet& plans, const Profile& profile, const ReportContext& ctx);

// What `plan`'s reserved peak holds above its allocated peak, in words, for
// the reports: "allocated + 120.00 MiB held by the caching allocator
// (replayed over 2 micro-steps, steady)", or the rounding and the user's
// fragmentation fraction.
std::string DescribeReservedPeak(const Plan& plan);
// A peak's model state in words: "model state 1.39 GiB", with the step's
// buffers (StaticMemory::buffer_bytes) named apart when there are any:
// "model state 1.39 GiB + buffers 64.00 MiB". `static_bytes` counts both
// (SimulationResult::static_bytes).
std::string DescribeModelState(int64_t static_bytes, const Profile& profile);
// The plan's replay margin (DeviceMemoryUse::replay_margin_bytes) and why,
// e.g. "5.3% of the reserved peak: ..."; "" when it has none.
std::string DescribeReplayMargin(const Plan& plan);

// The device terms' allocator model in words: "caching allocator replayed
// (PyTorch's defaults)", "... (expandable_segments:True)", "caching allocator
// rounding + the user's fragmentation 5.0%", or "" without one.
std::string DescribeAllocatorModel(const DeviceMemoryTerms& terms);

// The allocator trace of `plan` (planner --alloc-trace, the format in
// docs/device-memory.md): its replayed events and the model's reserved
// timeline and segments, with `alloc_conf` (PYTORCH_CUDA_ALLOC_CONF) for the
// GPU recording to set.
std::string AllocatorTraceJson(const TrainingStepReplay& replay, const ReplayTrace& trace,
                               const std::string& alloc_conf);

// plan.json: fits, strategy, budget_bytes, layers, schedule, predicted, model,
// baseline, candidates, and the profile the plan was made for (so that a
// plan file is self-contained for `planner train --plan`; remat/plan/plan_file.h
// reads it back).
std::string PlanToJson(const PlanSet& plans, const Profile& profile, const ReportContext& ctx);

}  // namespace remat

#endif  // REMAT_REPORT_H_
