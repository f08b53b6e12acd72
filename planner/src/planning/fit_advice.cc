// When nothing fits: the lowest peak reached, and the micro-batch that would
// fit (keeping the global batch with gradient accumulation where it can).
#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <mutex>
#include <vector>
#include <optional>

#include "planning/in_order.h"
#include "planning/job_plans.h"
#include "remat/analytic/analytic.h"
#include "remat/planning/planning.h"
#include "remat/model/precision.h"
#include "remat/io/units.h"

namespace remat {
namespace {

// How the advice plans each alternative: as the plan was made (its
// options, and whether auto weighed the chunked loss).
struct Alternatives {
  PlanOptions options;
  bool chunked_loss = false;  // PlanningRequest::weigh_chunked_loss
  int64_t chosen_loss_chunks = 0;  // the job's chunked loss auto chose (AdviseFit)
};

// A model's analytic chain (BuildAnalyticChain) and rank layout
// (BuildRankLayout), each made once by whichever user (on any thread)
// needs it first.
struct SharedModel {
  std::once_flag made;
  std::optional<Result<std::shared_ptr<const AnalyticChain>>> chain;
  std::once_flag layout_made;
  std::optional<Result<std::shared_ptr<const RankLayout>>> layout;
};

// The chain and layout of the combinations whose models differ in their
// optimizer and gradient dtype alone (what neither reads), and of those
// models with the chunked loss auto weighs (WithChunkedLoss), its chunks
// `loss_chunks` (the same for all of them: AutoLossChunks reads the
// micro-batch, sequence, vocabulary and hidden size alone).
struct SharedChain {
  SharedModel plain;
  std::once_flag chunked_made;
  int64_t loss_chunks = 0;
  SharedModel chunked;
};

// `shared`'s rank layout of `model` (valid), or null where it cannot be
// built (WithParallel then builds it again and fails as it does). Taken
// from `shared`'s chain (RankLayoutOfChain: the chain's graph, on any
// tensor and sequence degrees, is the model's for the layout) where a
// SharedProfile of this thread made or found it, so the graph is not built
// again.
const RankLayout* SharedLayout(const ModelConfig& model, SharedModel* shared) {
  std::call_once(shared->layout_made, [&] {
    if (shared->chain.has_value() && shared->chain->ok()) {
      shared->layout = RankLayoutOfChain(***shared->chain);
    } else {
      shared->layout = BuildRankLayout(model);
    }
  });
  return shared->layout->ok() ? shared->layout->value().get() : nullptr;
}

// The model profile of `model` (valid: ValidateModelConfig) with `job`'s
// analytic options on the tensor and sequence degrees of `p`:
// ModelProfile's, from `shared`'s chain.
Result<Profile> SharedProfile(const Job& job, const ModelConfig& model, const Parallelism& p,
                              SharedModel* shared) {
  AnalyticOptions options = job.analytic;
  options.parallel = p;
  std::call_once(shared->made, [&] { shared->chain = BuildAnalyticChain(model, options); });
  const Result<std::shared_ptr<const AnalyticChain>>& chain = *shared->chain;
  if (!chain.ok()) return chain.status();
  return AnalyticProfile(model, options, **chain);
}

// The analytic profile of a combination's model (ModelProfile), made once
// for every parallelism it is tried on, by whichever of the combinations
// sharing it (on any thread) needs it first, from its shared chain; the
// same for that model with the chunked loss.
struct SharedModelProfile {
  std::once_flag made;
  std::optional<Result<Profile>> profile;
  std::once_flag chunked_made;
  std::optional<Result<Profile>> chunked;
  SharedChain* chain = nullptr;
};

// `job` (a config's, its model `model`, valid) on `p` with `made`, the
// profile of `model` on p (SharedProfile): WithParallel(job, p)'s job,
// the rank layout from `layout`.
Result<Job> WithSharedProfile(const Job& job, const Parallelism& p, const Result<Profile>& made,
                              SharedModel* layout) {
  if (!made.ok()) return made.status();
  const RankLayout* l = p.distributed() ? SharedLayout(job.model, layout) : nullptr;
  return WithParallel(job, p, *made, l);
}

// `job` with the chunked loss auto weighs (PlanningRequest::
// weigh_chunked_loss), where it applies.
// With `shared` (`job`'s model's profile, when made by Changed), the
// chunked model's profile comes from it, made once for the combinations
// that share it.
// Whether auto weighs the chunked loss for `job` at all (its config's lm
// head without chunks, no tensor parallelism): else WithChunkedLoss gives
// none.
bool ChunkedLossApplies(const Job& job) {
  if (!job.has_config()) return false;
  const ModelConfig c = WithDefaults(job.config());
  return c.head == Head::kLm && c.loss_chunks == 0 && job.parallel().tensor == 1;
}

std::optional<Job> WithChunkedLoss(const Job& job, SharedModelProfile* shared = nullptr) {
  if (!ChunkedLossApplies(job)) return std::nullopt;
  const ModelConfig c = WithDefaults(job.config());
  ModelConfig auto_chunks = c;
  auto_chunks.loss_chunks = kLossChunksAuto;
  Job changed = WithoutProfile(job);
  changed.model.loss_chunks = WithDefaults(auto_chunks).loss_chunks;
  if (!ValidateModelConfig(changed.model, job.path).ok()) return std::nullopt;
  const Parallelism& p = job.parallel();
  SharedChain* chain = shared != nullptr ? shared->chain : nullptr;
  if (chain != nullptr) {
    std::call_once(chain->chunked_made, [&] { chain->loss_chunks = changed.model.loss_chunks; });
    if (chain->loss_chunks != changed.model.loss_chunks) chain = nullptr;
  }
  Result<Job> chunked = Status::Invalid("no profile");
  if (chain != nullptr) {
    // WithParallel(changed, p), its profile and layout shared.
    if (!ValidateParallelism(p, changed.model, job.path).ok()) return std::nullopt;
    std::call_once(shared->chunked_made, [&] {
      shared->chunked = SharedProfile(changed, changed.model, p, &chain->chunked);
    });
    chunked = WithSharedProfile(changed, p, *shared->chunked, &chain->chunked);
  } else {
    chunked = WithParallel(changed, p);
  }
  if (!chunked.ok()) return std::nullopt;
  return *std::move(chunked);
}

// Whether no plan of `job` fits `options`' budget: its peak floor
// (JobPeakFloor) is above it. Such a job is not planned.
bool CannotFit(const Job& job, const PlanOptions& options) {
  return options.budget_bytes > 0 && JobPeakFloor(job, options) > options.budget_bytes;
}

// Whether PlanRanks takes every rank's profile of `job` (its validation).
bool RanksValid(const Job& job) {
  if (job.ranks.empty()) {
    return ValidateProfile(job.profile, job.profile.model.empty() ? "profile" : job.profile.model)
        .ok();
  }
  for (const RankMemory& m : job.ranks) {
    if (!ValidateProfile(m.profile, m.profile.model.empty() ? "profile" : m.profile.model).ok()) {
      return false;
    }
  }
  return true;
}

// Auto's plans of `job` (its worst rank's, distributed), if every rank
// fits; a job that cannot fit (CannotFit) is not planned. Where the plan weighed the chunked loss, as RunPlanner weighs it at
// one micro-batch (WeighChunkedLoss): those of the job with it where only
// they fit, or where both fit and they recompute less. `chunks` (when
// given) is set to the loss chunks the plans use beyond the job's (0: none).
// With `chosen_only`, only the chosen plan is made (PlanRanksFastestFitting:
// the sets' other plans are left empty).
// `shared`: the job's model profile where Changed made it (WithChunkedLoss).
std::optional<PlanSet> FittingPlans(const Job& job, const Alternatives& a,
                                    int64_t* chunks = nullptr, bool chosen_only = false,
                                    SharedModelProfile* shared = nullptr) {
  if (chunks != nullptr) *chunks = 0;
  PlanOptions auto_options = a.options;
  auto_options.strategy = Strategy::kAuto;
  std::optional<PlanSet> fitting;
  bool plain_fits = false;
  if (CannotFit(job, auto_options)) {
    // Not planned; a rank's profile PlanRanks would refuse still ends the
    // weighing of this job, as its error would.
    if (!RanksValid(job)) return std::nullopt;
  } else {
    // A rank's error and a rank that does not fit end the same where the
    // chunked loss is not weighed next (its job's below end the same in
    // any case): the ranks after the first that does not fit are left out.
    const bool stop = !a.chunked_loss || !ChunkedLossApplies(job);
    Result<std::vector<RankPlan>> ranks =
        chosen_only ? planning_internal::PlanRanksFastestFitting(job, auto_options, stop)
                    : PlanRanks(job, auto_options);
    if (!ranks.ok()) return std::nullopt;
    PlanSet plain = WorstRankPlans(*ranks);
    plain_fits = plain.chosen.fits;
    if (plain_fits) fitting = std::move(plain);
  }
  if (!a.chunked_loss || (plain_fits && fitting->chosen.predicted.recompute_ms <= 0)) {
    return fitting;
  }
  const std::optional<Job> chunked = WithChunkedLoss(job, shared);
  if (!chunked || CannotFit(*chunked, auto_options)) return fitting;
  Result<std::vector<RankPlan>> ranks =
      chosen_only ? planning_internal::PlanRanksFastestFitting(*chunked, auto_options, true)
                  : PlanRanks(*chunked, auto_options);
  if (!ranks.ok()) return fitting;
  PlanSet s = WorstRankPlans(*ranks);
  if (!s.chosen.fits) return fitting;
  if (plain_fits &&
      s.chosen.predicted.recompute_ms >= fitting->chosen.predicted.recompute_ms) {
    return fitting;
  }
  if (chunks != nullptr) *chunks = chunked->config().loss_chunks;
  return s;
}

// Auto's plan of `job`, if one fits (FittingPlans): only the chosen plan
// is made, the strategies that cannot be auto's choice left out
// (PlanRanksFastestFitting), as for the combinations.
std::optional<Plan> FittingPlan(const Job& job, const Alternatives& a) {
  std::optional<PlanSet> s = FittingPlans(job, a, nullptr, true);
  if (!s) return std::nullopt;
  return std::move(s->chosen);
}

// Auto's plan of `job` at each micro-batch (FittingPlan), each made once.
class PlansAt {
 public:
  PlansAt(const Job& job, const Alternatives& options) : job_(job), options_(options) {}
  const std::optional<Plan>& Of(int64_t mb) {
    auto it = plans_.find(mb);
    if (it == plans_.end()) {
      Result<Job> other = WithMicroBatch(job_, mb);
      it = plans_.emplace(mb, other.ok() ? FittingPlan(*other, options_) : std::nullopt).first;
    }
    return it->second;
  }

 private:
  const Job& job_;
  const Alternatives& options_;
  std::map<int64_t, std::optional<Plan>> plans_;
};

// Every tensor grows with the micro-batch, so whether a plan fits is
// monotone in it: bisect for the largest micro-batch below `above` that fits
// (walking down one by one from a micro-batch of 100,000 would plan 100,000
// times). 0 when even 1 does not.
int64_t LargestFittingMicroBatch(PlansAt* plans_at, int64_t above, std::optional<Plan>* plan) {
  int64_t lo = 0, hi = above;  // lo fits (0: none does), hi does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::optional<Plan> p = plans_at->Of(mid);
    if (p) {
      lo = mid;
      *plan = std::move(p);
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::string Describe(const FitSuggestion& s, int64_t global) {
  std::string text = "micro_batch " + std::to_string(s.micro_batch) + " fits (" +
                     ToString(s.plan.strategy) + ", peak " +
                     FormatBytes(s.plan.memory.total_bytes) + ")";
  if (s.grad_accumulation > 0 && global > s.micro_batch) {
    text += " with grad_accumulation " + std::to_string(s.grad_accumulation) +
            ", keeping the global batch of " + std::to_string(global);
  }
  return text;
}

// Auto's plans for the job's model changed by `change`, if the chosen one
// fits.
template <typename Change>
std::optional<PlanSet> FittingPlansWith(const Job& job, const Alternatives& options, Change change) {
  Job changed = job.has_config() ? WithoutProfile(job) : job;
  change(&changed.model);
  if (!ValidateModelConfig(changed.model, job.path).ok()) return std::nullopt;
  // The profile (and a distributed job's ranks) made again; --host-link kept.
  Result<Job> other = WithParallel(changed, job.parallel());
  if (!other.ok() || other->profile.model_state_bytes() >= options.options.budget_bytes) {
    return std::nullopt;
  }
  return FittingPlans(*other, options);
}

// The lowest peak of any strategy's plan in `s`.
int64_t LowestPeak(const PlanSet& s) {
  int64_t lowest = s.chosen.memory.total_bytes;
  for (const Plan& c : s.candidates) lowest = std::min(lowest, c.memory.total_bytes);
  return lowest;
}

std::string Fits(const std::string& what, const Plan& plan) {
  return what + " fits (" + ToString(plan.strategy) + ", peak " +
         FormatBytes(plan.predicted.peak_bytes) + ", " + FormatMillis(plan.predicted.step_ms) +
         " per step)";
}

// One change of the job the advice weighs: what it is called, the planner
// flags that make it, and what it does to the model config.
struct Lever {
  std::string name;   // "optimizer adafactor"
  std::string flags;  // "--optimizer adafactor"
  std::function<void(ModelConfig*)> change;
  // Whether it changes the optimizer or the gradient dtype alone: what the
  // analytic chain does not read (BuildAnalyticChain).
  bool step_only = false;
};

// A combination of levers (one of each kind at most) on `gpus` GPUs.
struct Combination {
  std::vector<const Lever*> levers;
  bool full_fine_tuning = true;
};

// The levers of the precision convention the job could change to: its own
// (none), 16-bit gradients and gradients created in the backward where the
// job's mixed precision keeps fp32 or persistent ones, and pure bf16 where
// the job keeps wider weights. Other conventions keep as many bytes a
// parameter as these or more (precision.h).
std::vector<std::vector<Lever>> PrecisionLevers(const ModelConfig& job_config) {
  std::vector<std::vector<Lever>> out = {{}};
  const bool mixed = job_config.precision == Precision::kMixedBf16 ||
                     job_config.precision == Precision::kMixedFp16;
  std::vector<Lever> mixed_levers;
  if (mixed && GradientBytes(job_config.precision, job_config.grad_dtype) == 4) {
    const GradDtype half =
        job_config.precision == Precision::kMixedBf16 ? GradDtype::kBf16 : GradDtype::kFp16;
    mixed_levers.push_back({std::string("grad_dtype ") + ToString(half),
                            std::string("--grad-dtype ") + ToString(half),
                            [half](ModelConfig* c) { c->grad_dtype = half; }, true});
  }
  if (GradientsOf(job_config) == Gradients::kPersistent) {
    mixed_levers.push_back({"gradients created_in_backward", "--gradients created_in_backward",
                            [](ModelConfig* c) { c->gradients = Gradients::kCreatedInBackward; }});
  }
  for (const Lever& l : mixed_levers) out.push_back({l});
  if (mixed_levers.size() == 2) out.push_back(mixed_levers);
  if (job_config.precision != Precision::kBf16 && job_config.precision != Precision::kFp16) {
    out.push_back({{"precision bf16", "--precision bf16", [](ModelConfig* c) {
                      c->precision = Precision::kBf16;
                      c->grad_dtype = GradDtype::kDefault;
                      c->gradients = Gradients::kDefault;
                    }}});
  }
  return out;
}

// The levers of what is trained and how it steps: the job's optimizer, the
// ones with smaller state (8-bit moments, Adafactor's factored one, Muon's
// one moment of each matrix: docs/optimizers.md), LoRA (rank 16 on q and v,
// PEFT's default targets) and QLoRA (the blocks' weights in nf4 besides).
// Each with whether it still trains every weight. SGD is left out: its
// state is Adafactor's (none) or Muon's (one moment), and it is not how
// these models are fine-tuned.
std::vector<std::pair<std::vector<Lever>, bool>> TrainingLevers(const ModelConfig& job_config) {
  std::vector<std::pair<std::vector<Lever>, bool>> out;
  const bool full = job_config.lora_rank == 0;
  out.push_back({{}, full});
  for (Optimizer o : {Optimizer::kAdamW8bit, Optimizer::kAdafactor, Optimizer::kMuon}) {
    if (o == job_config.optimizer) continue;
    out.push_back({{{std::string("optimizer ") + ToString(o),
                     std::string("--optimizer ") + ToString(o),
                     [o](ModelConfig* c) { c->optimizer = o; }, true}},
                   full});
  }
  constexpr int64_t kAdviceRank = 16;
  if (full) {
    out.push_back({{{"LoRA (lora_rank 16 on q,v)", "--lora-rank 16",
                     [](ModelConfig* c) { c->lora_rank = kAdviceRank; }}},
                   false});
  }
  if (job_config.quantization == Quantization::kNone) {
    const std::string rank = std::to_string(full ? kAdviceRank : job_config.lora_rank);
    out.push_back({{{"QLoRA (nf4 base weights, lora_rank " + rank + ")",
                     (full ? "--lora-rank 16 " : "") + std::string("--quantization nf4"),
                     [](ModelConfig* c) {
                       if (c->lora_rank == 0) c->lora_rank = kAdviceRank;
                       c->quantization = Quantization::kNf4;
                     }}},
                   false});
  }
  return out;
}

// Whether DeepSpeed runs the job: its state offload is ZeRO-Offload's.
bool DeepSpeedJob(const Parallelism& p) {
  return p.data == DataParallel::kZero1 || p.data == DataParallel::kZero2 ||
         p.data == DataParallel::kZero3;
}

// `job` with its model changed by `levers` and its model state sharded by
// FSDP2's full_shard over `data` data ranks (1: the job's parallelism), or
// nullopt where that job is not valid or its model state alone exceeds the
// budget left for tensors (no plan of it fits: nothing to plan). With
// `offload`, the state goes to the host on the job's own data ranks:
// ZeRO-Offload where DeepSpeed runs the job, FSDP2's CPUOffloadPolicy
// (full_shard over them) otherwise.
std::optional<Job> Changed(const Job& job, const std::vector<const Lever*>& levers, int64_t data,
                           bool offload, const Alternatives& options,
                           SharedModelProfile* model_profile) {
  Job changed = job.has_config() ? WithoutProfile(job) : job;
  if (job.has_config()) {
    for (const Lever* l : levers) l->change(&changed.model);
    if (!ValidateModelConfig(changed.model, job.path).ok()) return std::nullopt;
  }
  Parallelism p = job.parallel();
  if (offload && DeepSpeedJob(p)) {
    p.offload = StateOffload::kOptimizer;
  } else if (data > 1 || offload) {
    p.data = DataParallel::kFsdp2;
    p.reshard_after_forward = true;
    p.shard_group = 0;
    p.gpus = data * p.tensor * p.pipeline;
    if (offload) p.offload = StateOffload::kFsdpCpu;
  }
  // The profile (and a distributed job's ranks) made again; --host-link
  // kept. The model's profile is the same on any data ranks (the tensor and
  // sequence degrees kept): made once.
  Result<Job> other = Status::Invalid("no profile");
  if (job.has_config()) {
    std::call_once(model_profile->made, [&] {
      model_profile->profile =
          SharedProfile(changed, changed.model, p, &model_profile->chain->plain);
    });
    other = WithSharedProfile(changed, p, *model_profile->profile, &model_profile->chain->plain);
  } else {
    other = WithParallel(changed, p);
  }
  const PlanOptions& o = options.options;
  if (!other.ok() ||
      other->profile.model_state_bytes() >= TensorBudget(o.budget_bytes, o.device_memory)) {
    return std::nullopt;
  }
  return *std::move(other);
}

// The data-rank counts the advice shards over besides the job's own
// (FSDP2 full_shard on 2, 4, 8, the tensor and pipeline degrees kept):
// never as many as a job that shards its state so already.
std::vector<int64_t> ShardingDegrees(const Job& job) {
  const Parallelism& now = job.parallel();
  const bool sharded = now.data == DataParallel::kFsdp2 || now.data == DataParallel::kZero3;
  std::vector<int64_t> out = {1};
  for (int64_t data : {2, 4, 8}) {
    if (sharded && now.reshard_after_forward && data <= now.data_ranks()) continue;
    out.push_back(data);
  }
  return out;
}

// Listed alternatives at most; the others are counted.
constexpr size_t kListedAlternatives = 5;
// A simpler combination is as fast as another within 1% of its step time
// (an optimizer's step over LoRA's adapters, say, is a fraction of a
// millisecond): the other is left out.
constexpr double kAsFast = 1.01;

// Whether `a`'s changes are a strict subset of `b`'s (the same GPUs or
// fewer counting as a subset of more).
bool Simpler(const FitAlternative& a, const FitAlternative& b) {
  if (a.gpus > b.gpus || a.changes.size() > b.changes.size()) return false;
  for (const std::string& c : a.changes) {
    if (std::find(b.changes.begin(), b.changes.end(), c) == b.changes.end()) return false;
  }
  return a.changes.size() < b.changes.size() || a.gpus < b.gpus;
}

std::string Describe(const FitAlternative& a) {
  std::string what;
  for (const std::string& c : a.changes) what += (what.empty() ? "" : " + ") + c;
  if (a.gpus > 1) {
    what += (what.empty() ? "the job" : "") + std::string(" on ") + std::to_string(a.gpus) +
            " GPUs (FSDP2 full_shard)";
  }
  const std::string per_gpu = a.gpus > 1 ? " per GPU" : "";
  return what + " fits (" + ToString(a.plan.strategy) + ", device peak " +
         FormatBytes(a.plan.memory.total_bytes) + per_gpu +
         (a.host_bytes > 0 ? ", host " + FormatBytes(a.host_bytes) + per_gpu : "") + ", " +
         FormatMillis(a.plan.predicted.step_ms) + " per step: " + a.flags + ")";
}

// Every combination of the levers the planner models (precision, gradient
// convention, optimizer, LoRA, QLoRA, the chunked loss auto weighs, FSDP2
// sharding over 2 to 8 GPUs) that fits, each planned by auto at the job's
// micro-batch; fastest first, a combination left out where a simpler one
// (a subset of its changes, on as many GPUs or fewer) fits as fast
// (kAsFast). The candidates are
// bounded: one lever of each kind, and each combination planned on the
// fewest GPUs that fit it (more GPUs only shard further).
std::vector<FitAlternative> FittingAlternatives(const Job& job, const Alternatives& options) {
  std::vector<std::vector<Lever>> precisions = {{}};
  std::vector<std::pair<std::vector<Lever>, bool>> trainings = {{{}, true}};
  if (job.has_config()) {
    precisions = PrecisionLevers(job.config());
    trainings = TrainingLevers(job.config());
  }
  const std::vector<int64_t> degrees = ShardingDegrees(job);
  // One combination on the fewest GPUs that fit it, if any.
  // The state offloaded to the host, on the job's own data ranks: with the
  // job's own optimizer only (DeepSpeedCPUAdam or PyTorch's AdamW stepping
  // on the host; the 8-bit, factored and Muon steps are device kernels).
  const Parallelism& now = job.parallel();
  const std::vector<int64_t> own_ranks = {now.data_ranks()};
  const std::string offload_name = DeepSpeedJob(now) ? "optimizer state offload (ZeRO-Offload)"
                                                     : "state offload (FSDP2 CPUOffloadPolicy)";
  auto plan_combination = [&](const std::vector<Lever>& precision,
                              const std::vector<Lever>& training, bool full,
                              bool offload,
                              SharedModelProfile* model_profile) -> std::optional<FitAlternative> {
    std::vector<const Lever*> levers;
    for (const Lever& l : precision) levers.push_back(&l);
    for (const Lever& l : training) levers.push_back(&l);
    for (int64_t data : offload ? own_ranks : degrees) {
      if (levers.empty() && data == 1 && !offload) continue;  // the job itself
      const std::optional<Job> changed =
          Changed(job, levers, data, offload, options, model_profile);
      if (!changed) continue;
      int64_t chunks = 0;
      std::optional<PlanSet> plans = FittingPlans(*changed, options, &chunks, true, model_profile);
      if (!plans) continue;
      if (chunks == 0) chunks = options.chosen_loss_chunks;
      FitAlternative a;
      for (const Lever* l : levers) {
        a.changes.push_back(l->name);
        a.flags += (a.flags.empty() ? "" : " ") + l->flags;
      }
      if (chunks > 0) {
        a.changes.push_back("chunked loss");
        a.flags +=
            (a.flags.empty() ? "" : " ") + std::string("--chunked-loss ") + std::to_string(chunks);
      }
      const Parallelism& p = changed->parallel();
      a.gpus = p.gpus;
      if (data > 1 || (offload && p.offload == StateOffload::kFsdpCpu)) {
        a.flags += (a.flags.empty() ? "" : " ") + std::string("--gpus ") + std::to_string(a.gpus) +
                   " --fsdp full_shard";
      }
      if (offload) {
        a.changes.push_back(offload_name);
        a.flags += (a.flags.empty() ? "" : " ") + std::string(p.offload == StateOffload::kFsdpCpu
                                                                  ? "--fsdp-cpu-offload"
                                                                  : "--offload-optimizer cpu");
      }
      for (const RankMemory& m : changed->ranks) {  // offloaded here or by the job
        a.host_bytes = std::max(a.host_bytes, m.state.host_bytes());
      }
      a.full_fine_tuning = full;
      a.plan = std::move(plans->chosen);
      return a;  // more GPUs only shard further
    }
    return std::nullopt;
  };
  // The combinations are independent: planned on as many threads as the
  // machine has cores (RunInOrder), collected in their order.
  // The changed model's profile of each (precision, training), shared by
  // its data-parallel layouts and by its state offload (the same model on
  // the same tensor and sequence degrees).
  // Their chain, shared by the combinations whose levers besides the
  // optimizer and gradient dtype ones are alike (by name).
  std::deque<SharedModelProfile> profiles;
  std::map<std::vector<std::string>, SharedChain> chains;
  std::vector<std::function<std::optional<FitAlternative>()>> combinations;
  for (const std::vector<Lever>& precision : precisions) {
    SharedModelProfile* own_training = nullptr;
    for (const auto& [training, full] : trainings) {
      SharedModelProfile* shared = &profiles.emplace_back();
      std::vector<std::string> chain_levers;
      for (const std::vector<Lever>* levers : {&precision, &training}) {
        for (const Lever& l : *levers) {
          if (!l.step_only) chain_levers.push_back(l.name);
        }
      }
      shared->chain = &chains[chain_levers];
      if (own_training == nullptr) own_training = shared;
      combinations.push_back(
          [&plan_combination, p = &precision, t = &training, full = full, shared] {
            return plan_combination(*p, *t, full, false, shared);
          });
    }
    if (now.offload == StateOffload::kNone && trainings.front().second) {
      combinations.push_back(
          [&plan_combination, p = &precision, t = &trainings.front().first, own_training] {
            return plan_combination(*p, *t, true, true, own_training);
          });
    }
  }
  std::vector<FitAlternative> fitting;
  for (std::optional<FitAlternative>& a :
       planning_internal::RunInOrder(combinations, planning_internal::MachineThreads())) {
    if (a) fitting.push_back(*std::move(a));
  }
  std::stable_sort(fitting.begin(), fitting.end(),
                   [](const FitAlternative& a, const FitAlternative& b) {
                     return a.plan.predicted.step_ms < b.plan.predicted.step_ms;
                   });
  std::vector<FitAlternative> kept;
  for (const FitAlternative& a : fitting) {
    const bool dominated =
        std::any_of(fitting.begin(), fitting.end(), [&](const FitAlternative& simpler) {
          return Simpler(simpler, a) &&
                 simpler.plan.predicted.step_ms <= a.plan.predicted.step_ms * kAsFast;
        });
    if (!dominated) kept.push_back(a);
  }
  return kept;
}

// What shrinks the model state enough to fit (FittingAlternatives): the
// fastest few, the fastest full fine-tuning among them where one fits.
std::string StateAdvice(const Job& job, const Alternatives& options,
                        std::vector<FitAlternative>* alternatives) {
  *alternatives = FittingAlternatives(job, options);
  std::vector<FitAlternative>& all = *alternatives;
  if (all.empty()) {
    if (!job.has_config()) {
      return "a profile's precision and optimizer are measured, and not even --fsdp "
             "full_shard on 8 GPUs fits";
    }
    return "no other precision, optimizer, LoRA or QLoRA fits, nor --fsdp full_shard on up "
           "to 8 GPUs";
  }
  // The fastest full fine-tuning, and the fastest on the job's own GPUs
  // (state offload, say, where sharding needs more GPUs), are listed where
  // they are not among the fastest few: they take the last places, the
  // listed ones fastest first and first in `all`.
  const size_t listed = std::min(all.size(), kListedAlternatives);
  std::vector<bool> named(all.size(), false);
  auto name_first = [&](auto pred) {
    const auto it = std::find_if(all.begin(), all.end(), pred);
    if (it != all.end()) named[static_cast<size_t>(it - all.begin())] = true;
  };
  name_first([](const FitAlternative& a) { return a.full_fine_tuning; });
  const int64_t own_gpus = job.parallel().gpus;
  name_first([&](const FitAlternative& a) { return a.full_fine_tuning && a.gpus == own_gpus; });
  for (size_t i = 0, n = std::count(named.begin(), named.end(), true); i < all.size() && n < listed;
       ++i) {
    if (!named[i]) {
      named[i] = true;
      ++n;
    }
  }
  std::vector<FitAlternative> ordered;
  for (bool first : {true, false}) {
    for (size_t i = 0; i < all.size(); ++i) {
      if (named[i] == first) ordered.push_back(std::move(all[i]));
    }
  }
  all = std::move(ordered);
  std::string text = "what fits, fastest first: ";
  for (size_t i = 0; i < listed; ++i) {
    all[i].listed = true;
    text += (i == 0 ? "" : "; ") + Describe(all[i]);
  }
  if (all.size() > listed) {
    text += "; and " + std::to_string(all.size() - listed) + " other combination" +
            (all.size() - listed == 1 ? "" : "s");
  }
  if (job.has_config() && job.config().lora_rank == 0 &&
      !std::any_of(all.begin(), all.end(),
                   [](const FitAlternative& a) { return a.full_fine_tuning; })) {
    text += "; no full fine-tuning fits on up to 8 GPUs";
  }
  return text;
}

// The LM head's logits (tokens x vocab, with their gradient and the fp32
// copies of the loss) are often the step's largest tensors: the job's model
// with the chunked loss (ModelConfig::loss_chunks, Liger-Kernel's chunk
// size), planned, and what its lowest peak saves against `peak_bytes`, the
// job's. Empty where the job has no lm head, chunks its loss already, or
// the plan does not fit.
std::string ChunkedLossAdvice(const Job& job, const Alternatives& options, int64_t peak_bytes) {
  const ModelConfig c = WithDefaults(job.config());
  if (c.head != Head::kLm || c.loss_chunks != 0) return "";
  ModelConfig auto_chunks = c;
  auto_chunks.loss_chunks = kLossChunksAuto;
  const int64_t chunks = WithDefaults(auto_chunks).loss_chunks;
  std::optional<PlanSet> plans =
      FittingPlansWith(job, options, [&](ModelConfig* m) { m->loss_chunks = chunks; });
  if (!plans) return "";
  return "; " + Fits("--chunked-loss " + std::to_string(chunks), plans->chosen) +
         ": chunked loss saves " + FormatBytes(peak_bytes - LowestPeak(*plans));
}

// The largest micro-batches that fit (appended to `suggestions`: the
// largest, then the largest that keeps the global batch) and the message's
// words for them; where none does, what else to change, unless `levers_fit`
// (other levers make the job fit: the message names them).
std::string MicroBatchAdvice(const Job& job, const ModelConfig& c, const Alternatives& options,
                             bool levers_fit, std::vector<FitSuggestion>* suggestions) {
  std::optional<Plan> largest_plan;
  PlansAt plans_at(job, options);
  const int64_t largest = LargestFittingMicroBatch(&plans_at, c.micro_batch, &largest_plan);
  if (largest == 0) {
    std::string text = "; even micro_batch 1 does not fit";
    if (levers_fit) return text + " without other levers";
    text += ": shorten seq_len";
    if (c.attention == AttentionImpl::kEager) text += " or use flash attention";
    return text;
  }
  const int64_t global = c.micro_batch * c.grad_accumulation;
  // The largest fitting micro-batch that divides the global batch, so that
  // gradient accumulation keeps it exactly.
  int64_t divisor = largest;
  while (global % divisor != 0) --divisor;
  if (divisor != largest) suggestions->push_back({largest, 0, *largest_plan});
  std::optional<Plan> divisor_plan =
      divisor == largest ? largest_plan : plans_at.Of(divisor);
  if (divisor_plan) suggestions->push_back({divisor, global / divisor, *divisor_plan});
  // The global batch over every data rank, as --global-batch counts it.
  const int64_t all_ranks = global * job.parallel().data_ranks();
  std::string text;
  for (const FitSuggestion& s : *suggestions) text += "; " + Describe(s, all_ranks);
  return text;
}

}  // namespace

FitAdvice AdviseFit(const Job& job, const PlanSet& plans, const PlanOptions& plan_options,
                    bool search, bool weigh_chunked_loss, int64_t chosen_loss_chunks) {
  const Alternatives options{plan_options, weigh_chunked_loss, chosen_loss_chunks};
  FitAdvice a;
  a.budget_bytes = plan_options.budget_bytes;
  a.lowest_peak_bytes = plans.chosen.memory.total_bytes;
  a.lowest_peak_strategy = plans.chosen.strategy;
  for (const Plan& c : plans.candidates) {
    if (c.memory.total_bytes < a.lowest_peak_bytes) {
      a.lowest_peak_bytes = c.memory.total_bytes;
      a.lowest_peak_strategy = c.strategy;
    }
  }
  a.model_state_bytes = job.profile.model_state_bytes();
  const int64_t tensor_budget = TensorBudget(plan_options.budget_bytes, plan_options.device_memory);
  a.model_state_exceeds_budget = a.model_state_bytes >= tensor_budget;
  a.message = "no plan fits in " + FormatBytes(plan_options.budget_bytes) +
              (plan_options.device_memory.any()
                   ? " (" + FormatBytes(tensor_budget) + " for tensors after the device's terms)"
                   : "") +
              ": the smallest peak any strategy reaches is " + FormatBytes(a.lowest_peak_bytes) +
              " (" + ToString(a.lowest_peak_strategy) + ")";
  const ModelConfig* c = job.has_config() ? &job.config() : nullptr;
  // The model state a rank offloads beyond the host budget: no plan of
  // the job fits whatever the device holds.
  int64_t state_on_host = 0;
  for (const RankMemory& m : job.ranks) {
    state_on_host = std::max(state_on_host, m.state.host_bytes());
  }
  const int64_t host_budget = job.profile.host_link.budget_bytes;
  if (host_budget > 0 && state_on_host > host_budget) {
    a.message = "no plan fits: the model state offloaded to the host needs " +
                FormatBytes(state_on_host) + (job.parallel().gpus > 1 ? " a GPU" : "") +
                ", above the host budget of " + FormatBytes(host_budget) + "; " +
                StateAdvice(job, options, &a.alternatives);
    return a;
  }
  if (a.model_state_exceeds_budget) {
    a.message += "; the model state alone (parameters, gradients, optimizer) needs " +
                 FormatBytes(a.model_state_bytes) + "; " +
                 StateAdvice(job, options, &a.alternatives);
    return a;
  }
  if (c != nullptr) a.message += ChunkedLossAdvice(job, options, a.lowest_peak_bytes);
  if (!search) {
    a.message += "; a budget of at least " + FormatBytes(a.lowest_peak_bytes) + " would fit";
    return a;
  }
  // The model state fits but what the step holds besides does not: every
  // lever weighed at the job's micro-batch as well, for a user who keeps it.
  const std::string levers = StateAdvice(job, options, &a.alternatives);
  if (c == nullptr) {
    a.message += "; a budget of at least " + FormatBytes(a.lowest_peak_bytes) + " would fit";
  } else {
    a.message += MicroBatchAdvice(job, *c, options, !a.alternatives.empty(), &a.suggestions);
  }
  a.message += "; at this micro-batch, " + levers;
  return a;
}

}  // namespace remat
