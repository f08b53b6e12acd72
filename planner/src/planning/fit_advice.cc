// When nothing fits: the lowest peak reached, and the micro-batch that would
// fit (keeping the global batch with gradient accumulation where it can).
#include <algorithm>
#include <optional>

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
};

// `job` with the chunked loss auto weighs (PlanningRequest::
// weigh_chunked_loss), where it applies.
std::optional<Job> WithChunkedLoss(const Job& job) {
  if (!job.has_config()) return std::nullopt;
  const ModelConfig c = WithDefaults(job.config());
  if (c.head != Head::kLm || c.loss_chunks != 0 || job.parallel().tensor > 1) {
    return std::nullopt;
  }
  ModelConfig auto_chunks = c;
  auto_chunks.loss_chunks = kLossChunksAuto;
  Job changed = job;
  changed.model.loss_chunks = WithDefaults(auto_chunks).loss_chunks;
  if (!ValidateModelConfig(changed.model, job.path).ok()) return std::nullopt;
  Result<Job> chunked = WithParallel(changed, job.parallel());
  if (!chunked.ok()) return std::nullopt;
  return *std::move(chunked);
}

// Auto's plans of `job` (its worst rank's, distributed), if every rank
// fits; where they do not and the plan weighed the chunked loss, those of
// the job with it.
std::optional<PlanSet> FittingPlans(const Job& job, const Alternatives& a) {
  PlanOptions auto_options = a.options;
  auto_options.strategy = Strategy::kAuto;
  Result<std::vector<RankPlan>> ranks = PlanRanks(job, auto_options);
  if (!ranks.ok()) return std::nullopt;
  PlanSet s = WorstRankPlans(*ranks);
  if (s.chosen.fits) return s;
  if (!a.chunked_loss) return std::nullopt;
  const std::optional<Job> chunked = WithChunkedLoss(job);
  if (!chunked) return std::nullopt;
  ranks = PlanRanks(*chunked, auto_options);
  if (!ranks.ok()) return std::nullopt;
  s = WorstRankPlans(*ranks);
  if (!s.chosen.fits) return std::nullopt;
  return s;
}

// Auto's plan of `job`, if one fits (FittingPlans).
std::optional<Plan> FittingPlan(const Job& job, const Alternatives& a) {
  std::optional<PlanSet> s = FittingPlans(job, a);
  if (!s) return std::nullopt;
  return std::move(s->chosen);
}

std::optional<Plan> FittingPlanAt(const Job& job, int64_t mb, const Alternatives& options) {
  Result<Job> other = WithMicroBatch(job, mb);
  if (!other.ok()) return std::nullopt;
  return FittingPlan(*other, options);
}

// The fewest data ranks (2, 4, 8) over which FSDP2's full_shard makes the
// job fit, the tensor and pipeline degrees kept: "fits with --fsdp
// full_shard on 2 GPUs (auto, peak ...)"; "" when none up to 8 does (or the
// job shards over as many already); nullopt when the job cannot be
// sharded so (a profile whose model state is divided already).
std::optional<std::string> ShardingAdvice(const Job& job, const Alternatives& options) {
  const Parallelism& now = job.parallel();
  const bool sharded = now.data == DataParallel::kFsdp2 || now.data == DataParallel::kZero3;
  for (int64_t data : {2, 4, 8}) {
    if (sharded && now.reshard_after_forward && data <= now.data_ranks()) continue;
    Parallelism p = now;
    p.data = DataParallel::kFsdp2;
    p.reshard_after_forward = true;
    p.shard_group = 0;
    p.gpus = data * now.tensor * now.pipeline;
    Result<Job> other = WithParallel(job, p);
    if (!other.ok()) return std::nullopt;
    std::optional<Plan> plan = FittingPlan(*other, options);
    if (plan) {
      return "fits with --fsdp full_shard on " + std::to_string(p.gpus) + " GPUs (" +
             ToString(plan->strategy) + ", peak " + FormatBytes(plan->memory.total_bytes) +
             " per GPU)";
    }
  }
  return "";
}

// Every tensor grows with the micro-batch, so whether a plan fits is
// monotone in it: bisect for the largest micro-batch below `above` that fits
// (walking down one by one from a micro-batch of 100,000 would plan 100,000
// times). 0 when even 1 does not.
int64_t LargestFittingMicroBatch(const Job& job, int64_t above, const Alternatives& options,
                                 std::optional<Plan>* plan) {
  int64_t lo = 0, hi = above;  // lo fits (0: none does), hi does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    std::optional<Plan> p = FittingPlanAt(job, mid, options);
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
  Job changed = job;
  change(&changed.model);
  if (!ValidateModelConfig(changed.model, job.path).ok()) return std::nullopt;
  // The profile (and a distributed job's ranks) made again; --host-link kept.
  Result<Job> other = WithParallel(changed, job.parallel());
  if (!other.ok() || other->profile.model_state_bytes() >= options.options.budget_bytes) {
    return std::nullopt;
  }
  return FittingPlans(*other, options);
}

// Auto's plan for the job's model changed by `change`, if one fits.
template <typename Change>
std::optional<Plan> FittingPlanWith(const Job& job, const Alternatives& options, Change change) {
  std::optional<PlanSet> s = FittingPlansWith(job, options, change);
  if (!s) return std::nullopt;
  return std::move(s->chosen);
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

// What shrinks the model state enough to fit, each planned at the job's
// micro-batch: other precision conventions and optimizers, never the ones
// the job already uses; sharding the model state over more GPUs last.
std::string StateAdvice(const Job& job, const Alternatives& options) {
  std::string text;
  auto add = [&](const std::string& o) { text += (text.empty() ? "" : "; ") + o; };
  if (job.has_config()) {
    const ModelConfig& job_config = job.config();
    for (const PrecisionConvention& p : PrecisionConventions()) {
      if (p.precision == job_config.precision) continue;
      std::optional<Plan> plan = FittingPlanWith(job, options, [&](ModelConfig* c) {
        c->precision = p.precision;
        c->grad_dtype = GradDtype::kDefault;
      });
      if (plan) add(Fits(std::string("precision ") + ToString(p.precision), *plan));
    }
    const bool mixed = job_config.precision == Precision::kMixedBf16 ||
                       job_config.precision == Precision::kMixedFp16;
    if (mixed && GradientBytes(job_config.precision, job_config.grad_dtype) == 4) {
      const GradDtype half =
          job_config.precision == Precision::kMixedBf16 ? GradDtype::kBf16 : GradDtype::kFp16;
      std::optional<Plan> plan =
          FittingPlanWith(job, options, [&](ModelConfig* c) { c->grad_dtype = half; });
      if (plan) add(Fits(std::string("grad_dtype ") + ToString(half), *plan));
    }
    // LoRA trains adapters only (rank 16 on q and v, PEFT's default
    // targets); QLoRA also stores the blocks' weights in nf4.
    constexpr int64_t kAdviceRank = 16;
    if (job_config.lora_rank == 0) {
      std::optional<Plan> plan =
          FittingPlanWith(job, options, [&](ModelConfig* c) { c->lora_rank = kAdviceRank; });
      if (plan) add(Fits("LoRA (lora_rank 16 on q,v)", *plan));
    }
    if (job_config.quantization == Quantization::kNone) {
      std::optional<Plan> plan = FittingPlanWith(job, options, [&](ModelConfig* c) {
        if (c->lora_rank == 0) c->lora_rank = kAdviceRank;
        c->quantization = Quantization::kNf4;
      });
      const std::string rank =
          std::to_string(job_config.lora_rank > 0 ? job_config.lora_rank : kAdviceRank);
      if (plan) add(Fits("QLoRA (nf4 base weights, lora_rank " + rank + ")", *plan));
    }
    // Smaller state first: 8-bit moments, Adafactor's factored one, Muon's
    // one moment of each matrix (docs/optimizers.md), then SGD's.
    for (Optimizer o : {Optimizer::kAdamW8bit, Optimizer::kAdafactor, Optimizer::kMuon,
                        Optimizer::kSgdMomentum, Optimizer::kSgd}) {
      if (o == job_config.optimizer) continue;
      std::optional<Plan> plan =
          FittingPlanWith(job, options, [&](ModelConfig* c) { c->optimizer = o; });
      if (plan) add(Fits(std::string("optimizer ") + ToString(o), *plan));
    }
  }
  const std::optional<std::string> sharding = ShardingAdvice(job, options);
  if (sharding && !sharding->empty()) {
    add(text.empty() ? *sharding : "or " + *sharding);
  } else if (!job.has_config()) {
    add(sharding ? "a profile's precision and optimizer are measured, and not even --fsdp "
                   "full_shard on 8 GPUs fits"
                 : "a profile's precision and optimizer are measured: shard the model state "
                   "across more devices");
  } else {
    add(text.empty() ? "no other precision or optimizer fits, nor --fsdp full_shard on 8 GPUs"
                     : "not even --fsdp full_shard on 8 GPUs fits as it is");
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

}  // namespace

FitAdvice AdviseFit(const Job& job, const PlanSet& plans, const PlanOptions& plan_options,
                    bool search, bool weigh_chunked_loss) {
  const Alternatives options{plan_options, weigh_chunked_loss};
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
  if (a.model_state_exceeds_budget) {
    a.message += "; the model state alone (parameters, gradients, optimizer) needs " +
                 FormatBytes(a.model_state_bytes) + ": " + StateAdvice(job, options);
    return a;
  }
  if (c != nullptr) a.message += ChunkedLossAdvice(job, options, a.lowest_peak_bytes);
  if (c == nullptr || !search) {
    a.message += "; a budget of at least " + FormatBytes(a.lowest_peak_bytes) + " would fit";
    return a;
  }
  std::optional<Plan> largest_plan;
  const int64_t largest = LargestFittingMicroBatch(job, c->micro_batch, options, &largest_plan);
  if (largest == 0) {
    a.message += "; even micro_batch 1 does not fit: shorten seq_len";
    if (c->attention == AttentionImpl::kEager) a.message += " or use flash attention";
    return a;
  }
  const int64_t global = c->micro_batch * c->grad_accumulation;
  // The largest fitting micro-batch that divides the global batch, so that
  // gradient accumulation keeps it exactly.
  int64_t divisor = largest;
  while (global % divisor != 0) --divisor;
  if (divisor != largest) a.suggestions.push_back({largest, 0, *largest_plan});
  std::optional<Plan> divisor_plan =
      divisor == largest ? largest_plan : FittingPlanAt(job, divisor, options);
  if (divisor_plan) a.suggestions.push_back({divisor, global / divisor, *divisor_plan});
  // The global batch over every data rank, as --global-batch counts it.
  const int64_t all_ranks = global * job.parallel().data_ranks();
  for (const FitSuggestion& s : a.suggestions) a.message += "; " + Describe(s, all_ranks);
  return a;
}

}  // namespace remat
