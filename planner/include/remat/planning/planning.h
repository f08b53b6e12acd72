// The planning API: the whole question a user asks, in one call.
//
//   Job (model or profile, overrides) + PlanningRequest (budget, strategy and
//   its settings, what else to weigh)  --RunPlanner-->  PlanningResult
//
// The result holds the chosen plan and the best plan of each strategy tried,
// and, when asked, the Pareto sweep over budgets and, when nothing fits,
// what would; with a global batch, the micro-batch and gradient accumulation
// chosen with the plan (SearchBatch). Front ends (the CLI, tests, scripts)
// call this and render the result; they plan nothing themselves.
#ifndef REMAT_PLANNING_H_
#define REMAT_PLANNING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "remat/simulate/accumulation.h"
#include "remat/planning/job.h"
#include "remat/planning/pareto.h"
#include "remat/plan/plan.h"
#include "remat/io/progress.h"
#include "remat/io/status.h"
#include "remat/strategies/strategies.h"

namespace remat {

struct PlanningRequest {
  PlanOptions options;  // budget, strategy and its settings
  // When nothing fits, re-plan at other micro-batches to say what would
  // (FitAdvice::suggestions). The lowest peak is reported either way.
  bool suggest_fit = true;
  // >= 2: also sweep every strategy over this many budgets (ParetoSweep),
  // e.g. for the HTML report's Pareto chart; 0: no sweep.
  int sweep_points = 0;
  ProgressCallback progress;  // told of the sweep, one item per plan; may be empty
  // > 0: choose the micro-batch with the plan for this many examples per
  // optimizer step (SearchBatch); the job's micro_batch and
  // grad_accumulation are replaced by the chosen ones. Model inputs only.
  int64_t global_batch = 0;
  // --strategy auto: also plan the job with the chunked loss
  // (ModelConfig::loss_chunks, kLossChunksAuto's chunks) and take that job
  // where only it fits, or where the plain job's plan recomputes and the
  // chunked one's is faster (per optimizer step with a global batch). Only
  // for a model with the lm head, no logit soft-capping, no tensor
  // parallelism and loss_chunks 0; a caller whose user set the chunked loss
  // (0 included) leaves this false.
  bool weigh_chunked_loss = false;
};

// The chunked loss auto chose (PlanningRequest::weigh_chunked_loss).
struct ChunkedLossChoice {
  int64_t chunks = 0;
  // The peak without checkpointing (baseline) of the plain job less the
  // chunked job's: the logits and their gradient it does not hold.
  int64_t saves_bytes = 0;
  std::string message;  // one line: "chunked loss chosen by auto: saves ..."
};

// One micro-batch the batch search weighed.
struct BatchCandidate {
  int64_t micro_batch = 0;
  int64_t grad_accumulation = 0;  // global batch / micro_batch
  Plan plan;  // the request's strategy at this micro-batch (auto: the fastest that fits)
  UpdatePrediction update;  // time per optimizer step with `plan`
};

// The joint choice of micro-batch, accumulation and plan for a global batch.
struct BatchSearch {
  int64_t global_batch = 0;
  // Every micro-batch dividing global_batch, ascending, up to the first that
  // does not fit: activations grow with the micro-batch and the model state
  // does not, so no larger one fits either (those are counted in `skipped`).
  std::vector<BatchCandidate> weighed;
  int skipped = 0;
  int chosen = -1;  // index in weighed: least update_ms among fitting plans; -1 if none fits
};

// Weighs every micro-batch b dividing the examples of one data rank
// (global_batch / data ranks; K = that / b) with the plan `options` asks
// for at the budget, every distinct rank planned (a micro-batch fits when
// each rank's plan does), and chooses the least predicted time per
// optimizer step. Fails for profile inputs (their micro-batch is measured),
// global_batch < 1, and a global batch the data ranks do not divide.
Result<BatchSearch> SearchBatch(const Job& job, int64_t global_batch, const PlanOptions& options);

// One way to make the job fit: auto's plan at another micro-batch.
struct FitSuggestion {
  int64_t micro_batch = 0;
  // Micro-batches per optimizer step that keep the job's global batch
  // (micro_batch x grad_accumulation); 0 when micro_batch does not divide it.
  int64_t grad_accumulation = 0;
  Plan plan;
};

// Another way to make the job fit at its micro-batch: a combination of levers (precision, gradient convention, optimizer, LoRA,
// QLoRA, the chunked loss, FSDP2 sharding), planned by auto.
struct FitAlternative {
  std::vector<std::string> changes;  // "precision bf16", "optimizer adafactor"
  std::string flags;                 // the planner flags that make it
  int64_t gpus = 1;                  // the GPUs it runs on
  bool full_fine_tuning = true;      // every weight trained (no LoRA)
  bool listed = false;               // named in FitAdvice::message
  int64_t host_bytes = 0;            // model state on the host, per GPU (state offload)
  Plan plan;                         // auto's (a distributed job's worst rank's)
};

// Why nothing fits and what would.
struct FitAdvice {
  int64_t budget_bytes = 0;
  int64_t lowest_peak_bytes = 0;  // the lowest peak any strategy tried reaches
  Strategy lowest_peak_strategy = Strategy::kNone;
  int64_t model_state_bytes = 0;  // parameters + gradients + optimizer state
  bool model_state_exceeds_budget = false;
  // The largest micro-batch that fits, then the largest that keeps the
  // global batch with accumulation, if different; empty when none does or
  // the input is a profile.
  std::vector<FitSuggestion> suggestions;
  // Every combination of levers that fits at the job's micro-batch,
  // fastest first (the listed ones first), none where a simpler one is as
  // fast; weighed whether or not the model state alone exceeds the budget
  // (where it fits, beside the micro-batch suggestions), empty where
  // AdviseFit's `search` is off.
  std::vector<FitAlternative> alternatives;
  std::string message;  // one line: all of the above, for people
};

// One kind of rank of a distributed job and its plans.
struct RankPlan {
  RankMemory memory;  // which ranks, their profile and model state terms
  PlanSet plans;      // the request's plans for that profile
};

// Plans every distinct rank of `job` (job.ranks; a single-GPU job: its
// profile as one rank) with `options`.
Result<std::vector<RankPlan>> PlanRanks(const Job& job, const PlanOptions& options);

// A floor under the device peak of the worst rank of every plan PlanRanks
// gives `job` with `options` (DevicePeakFloor of each rank's profile, the
// highest): where it is above a positive options.budget_bytes, no plan of
// the job fits. A rank whose FSDP2 units follow its plan's segments
// (--fsdp-units segment) is planned again with other units: it counts 0.
int64_t JobPeakFloor(const Job& job, const PlanOptions& options);

// The rank to report: the first that does not fit, else the highest device
// peak. Requires a non-empty list.
int WorstRank(const std::vector<RankPlan>& ranks);

// The worst rank's plans, with chosen.fits true only when every rank's
// chosen plan fits.
PlanSet WorstRankPlans(const std::vector<RankPlan>& ranks);

struct PlanningResult {
  // The chosen plan and the others; for a distributed job the worst rank's
  // (WorstRank), fitting only when every rank's plan fits.
  PlanSet plans;
  // A distributed job: every distinct rank's plans, and the index of the
  // one `plans` is (its profile is the one the reports describe). Empty on
  // one GPU.
  std::vector<RankPlan> ranks;
  int worst_rank = -1;
  // The profile `plans` was made for: the worst rank's, or `planned`'s
  // (the job planned: batch_job or the job given).
  const Profile& profile_of(const Job& planned) const {
    return ranks.empty() ? planned.profile : ranks[worst_rank].memory.profile;
  }
  // With a global batch: the search, and the job at its chosen micro-batch
  // and accumulation (at micro-batch 1 when none fits), which `plans` and
  // `advice` are about. batch_job is also the job planned when auto chose
  // the chunked loss (its loss_chunks set), with or without a global batch.
  std::optional<BatchSearch> batch;
  std::optional<Job> batch_job;
  // The job `plans` are about: batch_job when there is one, else `given`
  // (the job RunPlanner was called with).
  const Job& planned(const Job& given) const { return batch_job ? *batch_job : given; }
  std::optional<ChunkedLossChoice> chunked_loss;  // when auto chose it
  std::optional<ParetoCurve> sweep;  // when requested
  std::optional<FitAdvice> advice;   // exactly when plans.chosen does not fit
  // For people, not an error: e.g. more than kManyMicroBatches per update.
  std::vector<std::string> warnings;
  // OK, or kNoFit with the advice's message: what a front end reports after
  // rendering the plan (which is still the best there is).
  Status fit_status() const;
};

// Plans `job` as `request` asks. Errors are for invalid options only: a
// budget nothing fits is a result (see fit_status).
Result<PlanningResult> RunPlanner(const Job& job, const PlanningRequest& request);

// Why `plans` (made for `job` under `options`) does not fit and, with
// `search`, what would: where the model state fits, the micro-batches that
// fit; either way, every combination of levers that fits at the job's
// micro-batch (FitAdvice::alternatives). Each alternative is planned as
// the plan was: with `options`, and with `weigh_chunked_loss` (the plan's
// PlanningRequest::weigh_chunked_loss) the chunked loss weighed where the
// alternative does not fit without it. `chosen_loss_chunks`: the chunked
// loss auto chose for `job` (PlanningResult::chunked_loss; 0: none), which
// every alternative, made from `job`, has and names in its flags.
FitAdvice AdviseFit(const Job& job, const PlanSet& plans, const PlanOptions& options, bool search,
                    bool weigh_chunked_loss = false, int64_t chosen_loss_chunks = 0);

}  // namespace remat

#endif  // REMAT_PLANNING_H_
